// The op table's entries for ops/shape_ops.hpp: the view-type ops (reshape ... expand), then the copy-type
// ones (cat, split ... pad) (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

namespace {

/// Joins split pieces i != 1 scaled by i + 1 (so each piece's gradient is told apart, and an unused
/// piece gets the engine's zeros).
Tensor join_pieces(const Tensors& ps, std::int64_t dim) {
  Tensors kept;
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (i != 1) kept.push_back(mul(ps[i], static_cast<double>(i + 1)));
  return concat(kept, dim);
}
std::string torch_join(int dim) {
  return fmt::format("out = torch.cat([p * (i + 1) for i, p in enumerate(ps) if i != 1], {})", dim);
}

}  // namespace

// The entries of shape_ops.hpp.
void add_shape_ops_entries(std::vector<OpInfo>& t) {
  auto shape_op = [](std::string name, std::string sig, std::string torch, Call call, std::vector<std::string> sizes,
                     bool batch, std::function<Shape(const SampleSpec&)> shape) {
    OpInfo op;
    op.name = std::move(name);
    op.signature = std::move(sig);
    op.torch = std::move(torch);
    op.call = std::move(call);
    op.sample = [shape](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values(shape(s), g, dt)}}, {}, {}};
    };
    op.size_names = std::move(sizes);
    op.small.assign(op.size_names.size(), 3);
    op.threads.assign(op.size_names.size(), op.size_names.size() == 2 ? 200 : 40);
    op.supports_batch = batch;
    return op;
  };
  auto nm = [](const SampleSpec& s) { return bshape(s.batch, {s.sizes[0], s.sizes[1]}); };
  {
    OpInfo op = shape_op(
        "reshape_swap", "reshape(Tensor,Shape)", "out = a.reshape(a.shape[1], a.shape[0])",
        [](const Tensors& in) {
          return reshape(in[0], {in[0].size(1), in[0].size(0)});
        },
        {"n", "m"}, false, nm);
    op.errors = {{"wrong element count",
                  [] {
                    reshape(Tensor::zeros({2, 3}, kFloat64), {4});
                  },
                  {"reshape", "(2, 3)", "(4,)"}},
                 {"two -1",
                  [] {
                    reshape(Tensor::zeros({2, 3}, kFloat64), {-1, -1});
                  },
                  {"reshape", "-1", "(2, 3)"}},
                 {"negative size",
                  [] {
                    reshape(Tensor::zeros({2, 3}, kFloat64), {-2, -3});
                  },
                  {"reshape", "(2, 3)"}},
                 {"undefined x", [] { reshape(Tensor(), {2}); }, {"reshape", "'x'"}}};
    op.check_undefined = false;  // the call reads x's sizes first; "undefined x" above instead
    t.push_back(op);
    op = shape_op(
        "reshape_infer", "reshape(Tensor,Shape)", "out = a.reshape(-1, a.shape[-1])",
        [](const Tensors& in) {
          return reshape(in[0], {-1, in[0].size(-1)});
        },
        {"n", "m"}, true, nm);
    op.refuses = [](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 ? "the -1 cannot be inferred" : "";  // torch refuses too
    };
    op.check_undefined = false;
    t.push_back(op);
  }
  {
    OpInfo op = shape_op(
        "flatten", "flatten(Tensor,int64_t,int64_t)", "out = a.flatten(-2, -1)",
        [](const Tensors& in) { return flatten(in[0], -2, -1); }, {"n", "m"}, true, nm);
    op.errors = {{"start after end",
                  [] {
                    flatten(Tensor::zeros({2, 3, 4}, kFloat64), 2, 1);
                  },
                  {"flatten", "(2, 3, 4)"}},
                 {"axis out of range",
                  [] {
                    flatten(Tensor::zeros({2, 3}, kFloat64), 0, 5);
                  },
                  {"flatten", "5", "(2, 3)"}}};
    t.push_back(op);
    op = shape_op(
        "flatten_all", "flatten(Tensor,int64_t,int64_t)", "out = a.flatten()",
        [](const Tensors& in) { return flatten(in[0]); }, {"n", "m"}, true, nm);
    t.push_back(op);
  }
  {
    OpInfo op = shape_op(
        "squeeze_axis", "squeeze(Tensor,int64_t)", "out = a.squeeze(-2)",
        [](const Tensors& in) { return squeeze(in[0], -2); }, {"n", "m"}, true,
        [](const SampleSpec& s) {
          return bshape(s.batch, {s.sizes[0], 1, s.sizes[1]});
        });
    op.errors = {{"axis out of range",
                  [] {
                    squeeze(Tensor::zeros({2, 1}, kFloat64), 2);
                  },
                  {"squeeze", "2", "(2, 1)"}}};
    t.push_back(op);
    op = shape_op(
        "squeeze_all", "squeeze(Tensor)", "out = a.squeeze()", [](const Tensors& in) { return squeeze(in[0]); },
        {"n", "m"}, true,
        [](const SampleSpec& s) {
          return bshape(s.batch, {s.sizes[0], 1, s.sizes[1], 1});
        });
    t.push_back(op);
    op = shape_op(
        "unsqueeze", "unsqueeze(Tensor,int64_t)", "out = a.unsqueeze(-2)",
        [](const Tensors& in) { return unsqueeze(in[0], -2); }, {"n", "m"}, true, nm);
    op.errors = {{"axis out of range",
                  [] {
                    unsqueeze(Tensor::zeros({2, 3}, kFloat64), 3);
                  },
                  {"unsqueeze", "3", "(2, 3)"}}};
    t.push_back(op);
    op = shape_op(
        "permute", "permute(Tensor,vector<int64_t>)", "out = a.permute(2, 0, 1)",
        [](const Tensors& in) {
          return permute(in[0], {2, 0, 1});
        },
        {"n", "m", "k"}, false,
        [](const SampleSpec& s) {
          return Shape{s.sizes[0], s.sizes[1], s.sizes[2]};
        });
    op.errors = {{"not a permutation",
                  [] {
                    permute(Tensor::zeros({2, 3}, kFloat64), {0, 0});
                  },
                  {"permute", "(2, 3)"}},
                 {"wrong length",
                  [] {
                    permute(Tensor::zeros({2, 3}, kFloat64), {1, 0, 2});
                  },
                  {"permute", "(2, 3)"}}};
    t.push_back(op);
    op = shape_op(
        "transpose", "transpose(Tensor,int64_t,int64_t)", "out = a.transpose(-1, -2)",
        [](const Tensors& in) { return transpose(in[0], -1, -2); }, {"n", "m"}, true, nm);
    op.errors = {{"axis out of range",
                  [] {
                    transpose(Tensor::zeros({2, 3}, kFloat64), 0, 2);
                  },
                  {"transpose", "2", "(2, 3)"}}};
    t.push_back(op);
    op = shape_op(
        "slice_step", "slice(Tensor,int64_t,int64_t,int64_t,int64_t)", "out = a[..., 1::2]",
        [](const Tensors& in) { return slice(in[0], -1, 1, std::numeric_limits<std::int64_t>::max(), 2); }, {"n", "m"},
        true, nm);
    op.errors = {{"step 0",
                  [] {
                    slice(Tensor::zeros({2, 3}, kFloat64), 1, 0, 3, 0);
                  },
                  {"slice", "step", "(2, 3)"}},
                 {"axis out of range",
                  [] {
                    slice(Tensor::zeros({2, 3}, kFloat64), 2, 0, 1);
                  },
                  {"slice", "2", "(2, 3)"}}};
    t.push_back(op);
    op = shape_op(
        "slice_negative", "slice(Tensor,int64_t,int64_t,int64_t,int64_t)", "out = a[..., -3:-1, :]",
        [](const Tensors& in) { return slice(in[0], -2, -3, -1); }, {"n", "m"}, true, nm);
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "index_select";
    op.signature = "index_select(Tensor,int64_t,vector<int64_t>)";
    op.torch = "out = a.index_select(-2, torch.tensor(idx, dtype=torch.long))";
    op.call = nullptr;  // set by every sample (the index list depends on n)
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0];
      // repeats (gradients add up), and an empty list when n = 0
      std::vector<std::int64_t> idx;
      if (n > 0) idx = {n - 1, 0, n - 1, n / 2};
      SampleInput si{{{"a", values(bshape(s.batch, {n, s.sizes[1]}), g, dt)}}, {}, {}};
      si.call = [idx](const Tensors& in) { return index_select(in[0], -2, idx); };
      si.torch_prelude = fmt::format("idx = [{}]\n", fmt::join(idx, ", "));
      return si;
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {{"index out of range",
                  [] {
                    index_select(Tensor::zeros({2, 3}, kFloat64), 0, {2});
                  },
                  {"index_select", "2", "(2, 3)"}},
                 {"axis out of range",
                  [] {
                    index_select(Tensor::zeros({2, 3}, kFloat64), 2, {0});
                  },
                  {"index_select", "2", "(2, 3)"}}};
    t.push_back(op);
  }
  for (bool stacked : {false, true}) {  // along the first axis
    OpInfo op;
    op.name = stacked ? "stack_first" : "concat_first";
    op.signature = std::string(stacked ? "stack" : "concat") + "(Tensors,int64_t)";
    op.torch = stacked ? "out = torch.stack([a, b], 0)" : "out = torch.cat([a, b], 0)";
    op.call = [stacked](const Tensors& in) { return stacked ? stack(in, 0) : concat(in, 0); };
    op.sample = [stacked](Dtype dt, const SampleSpec& s, Generator& g) {
      const Shape sh{s.sizes[0], s.sizes[1]};
      return SampleInput{{{"a", values(sh, g, dt)}, {"b", values(stacked ? sh : Shape{1, s.sizes[1]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    t.push_back(op);
  }
  for (bool stacked : {false, true}) {
    OpInfo op;
    op.name = stacked ? "stack" : "concat";
    op.signature = op.name + "(Tensors,int64_t)";
    op.torch = stacked ? "out = torch.stack([a, b, c], -1)" : "out = torch.cat([a, b, c], -1)";
    op.call = [stacked](const Tensors& in) { return stacked ? stack(in, -1) : concat(in, -1); };
    op.sample = [stacked](Dtype dt, const SampleSpec& s, Generator& g) {
      const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
      return SampleInput{{{"a", values(sh, g, dt)},
                          {"b", values(stacked ? sh : bshape(s.batch, {s.sizes[0], 2}), g, dt)},
                          {"c", values(sh, g, dt)}},
                         {},
                         {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 100};
    op.supports_batch = true;
    const std::string opname = op.name;
    op.errors = {{"sizes differ",
                  [stacked] {
                    const Tensors xs{Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3, 3}, kFloat64)};
                    stacked ? stack(xs, 1) : concat(xs, 1);
                  },
                  {opname, "(2, 3)", "(3, 3)"}},
                 {"empty list", [stacked] { stacked ? stack({}, 0) : concat({}, 0); }, {opname, "empty"}},
                 {"dtype mix",
                  [stacked] {
                    const Tensors xs{Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({2, 3}, kFloat32)};
                    stacked ? stack(xs, 0) : concat(xs, 0);
                  },
                  {opname, "dtype"}},
                 {"axis out of range",
                  [stacked] {
                    const Tensors xs{Tensor::zeros({2, 3}, kFloat64)};
                    stacked ? stack(xs, 4) : concat(xs, 2);
                  },
                  {opname, "(2, 3)"}}};
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "expand";
    op.signature = "expand(Tensor,Shape)";
    op.torch = "out = a.expand(*shape)";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      // (n, 1) to (batch..., -1, m): a new leading axis, a broadcast axis and a kept one
      const Shape target = bshape(s.batch, {-1, s.sizes[1]});
      SampleInput si{{{"a", values({s.sizes[0], 1}, g, dt)}}, {}, {}};
      si.call = [target](const Tensors& in) { return expand(in[0], target); };
      si.torch_prelude = fmt::format("shape = [{}]\n", fmt::join(target, ", "));
      return si;
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {{"size that does not broadcast",
                  [] {
                    expand(Tensor::zeros({2, 3}, kFloat64), {2, 4});
                  },
                  {"expand", "(2, 3)", "(2, 4)"}},
                 {"fewer dimensions",
                  [] {
                    expand(Tensor::zeros({2, 3}, kFloat64), {3});
                  },
                  {"expand", "(2, 3)", "(3,)"}}};
    t.push_back(op);
  }

  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64), s0 = Tensor::scalar(1.0, kFloat64);
  // cat: torch's name for concat (an inline alias, so checked through concat's declaration)
  {
    OpInfo op = nm_entry("cat_middle", "concat(Tensors,int64_t)", "out = torch.cat([a, a], -2)", nullptr);
    op.call = [](const Tensors& in) { return cat({in[0], in[0]}, -2); };
    op.errors = {{"axis out of range", [z23] { cat({z23}, 2); }, {"concat", "(2, 3)"}}};
    t.push_back(op);
  }
  // split, chunk
  {
    OpInfo op = nm_entry("split_size", "split(Tensor,int64_t,int64_t)", "ps = torch.split(a, 2, -1)\n", nullptr);
    op.torch += torch_join(-1);
    op.call = [](const Tensors& in) { return join_pieces(split(in[0], 2, -1), -1); };
    op.errors = {{"split_size 0 of a non-empty dim", [z23] { split(z23, 0, 1); }, {"split", "split_size", "(2, 3)"}},
                 {"negative split_size", [z23] { split(z23, -1, 1); }, {"split", "-1", "(2, 3)"}},
                 {"dim out of range", [z23] { split(z23, 1, 2); }, {"split", "2", "(2, 3)"}},
                 {"0-d tensor", [s0] { split(s0, 1, 0); }, {"split", "()"}}};
    t.push_back(op);
  }
  {
    OpInfo op = nm_entry("split_sizes", "split(Tensor,vector<int64_t>,int64_t)", "", nullptr);
    op.call = nullptr;
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      SampleInput si = nm_sample(dt, s, g);
      const std::int64_t n = s.sizes[0];
      const std::vector<std::int64_t> sizes{n / 2, 0, n - n / 2};  // an empty piece in the middle
      si.call = [sizes](const Tensors& in) { return join_pieces(split(in[0], sizes, -2), -2); };
      si.torch_prelude = fmt::format("ps = torch.split(a, [{}], -2)\n", fmt::join(sizes, ", "));
      return si;
    };
    op.torch = torch_join(-2);
    op.errors = {{"sizes that do not sum to the dim",
                  [z23] {
                    split(z23, std::vector<std::int64_t>{1, 1}, 1);
                  },
                  {"split", "sum to 2", "(2, 3)"}},
                 {"negative size",
                  [z23] {
                    split(z23, std::vector<std::int64_t>{3, -1, 1}, 1);
                  },
                  {"split", "-1", "(2, 3)"}}};
    t.push_back(op);
  }
  {
    OpInfo op = nm_entry("chunk", "chunk(Tensor,int64_t,int64_t)", "ps = torch.chunk(a, 3, -1)\n", nullptr);
    op.torch += torch_join(-1);
    op.call = [](const Tensors& in) { return join_pieces(chunk(in[0], 3, -1), -1); };
    op.errors = {{"0 chunks", [z23] { chunk(z23, 0, 1); }, {"chunk", "chunks", "(2, 3)"}},
                 {"dim out of range", [z23] { chunk(z23, 2, -3); }, {"chunk", "-3", "(2, 3)"}}};
    t.push_back(op);
  }
  // flip, roll, repeat
  {
    OpInfo op = nm_entry("flip", "flip(Tensor,vector<int64_t>)", "out = torch.flip(a, (-1, -2))", [](const Tensor& a) {
      return flip(a, {-1, -2});
    });
    op.errors = {{"dim twice",
                  [z23] {
                    flip(z23, {1, -1});
                  },
                  {"flip", "twice", "(2, 3)"}},
                 {"dim out of range", [z23] { flip(z23, {2}); }, {"flip", "2", "(2, 3)"}}};
    t.push_back(op);
    op = nm_entry("flip_scalar", "flip(Tensor,vector<int64_t>)", "out = torch.flip(a, (0,))",
                  [](const Tensor& a) { return flip(a, {0}); });
    op.supports_batch = false;
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op = nm_entry("roll", "roll(Tensor,vector<int64_t>,vector<int64_t>)",
                         "out = torch.roll(a, (2, -5), (-1, -2))", [](const Tensor& a) {
                           return roll(a, {2, -5}, {-1, -2});
                         });
    op.errors = {{"shifts and dims of different lengths",
                  [z23] {
                    roll(z23, {1, 2}, {0});
                  },
                  {"roll", "(2, 3)"}},
                 {"dim out of range", [z23] { roll(z23, {1}, {2}); }, {"roll", "2", "(2, 3)"}},
                 {"no dims and two shifts",
                  [z23] {
                    roll(z23, {1, 2});
                  },
                  {"roll", "(2, 3)"}}};
    t.push_back(op);
    op = nm_entry("roll_flat", "roll(Tensor,vector<int64_t>,vector<int64_t>)", "out = torch.roll(a, -3)",
                  [](const Tensor& a) { return roll(a, {-3}); });
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op = nm_entry("repeat", "repeat(Tensor,vector<int64_t>)", "out = a.repeat(2, 1, 3)", [](const Tensor& a) {
      return repeat(a, {2, 1, 3});
    });
    op.supports_batch = false;
    op.threads = {100, 100};
    op.errors = {{"fewer repeats than dims", [z23] { repeat(z23, {2}); }, {"repeat", "(2, 3)"}},
                 {"negative repeat",
                  [z23] {
                    repeat(z23, {1, -2});
                  },
                  {"repeat", "-2", "(2, 3)"}}};
    t.push_back(op);
  }
  // pad: constant (with a crop), reflect and replicate on (c, n, m) as torch's 2-d padding wants
  {
    OpInfo op = nm_entry("pad_constant", "pad(Tensor,vector<int64_t>,string,double)",
                         "out = torch.nn.functional.pad(a, (2, 1, -1, 2), value=0.5)", [](const Tensor& a) {
                           return pad(a, {2, 1, -1, 2}, "constant", 0.5);
                         });
    op.errors = {{"odd number of pads",
                  [z23] {
                    pad(z23, {1, 2, 3});
                  },
                  {"pad", "(2, 3)"}},
                 {"too many pads",
                  [z23] {
                    pad(z23, {1, 1, 1, 1, 1, 1});
                  },
                  {"pad", "(2, 3)"}},
                 {"unknown mode",
                  [z23] {
                    pad(z23, {1, 1}, "circular");
                  },
                  {"pad", "circular", "(2, 3)"}},
                 {"crop below 0",
                  [z23] {
                    pad(z23, {-2, -2});
                  },
                  {"pad", "negative size", "(2, 3)"}},
                 {"reflect pad as large as the dim",
                  [z23] {
                    pad(z23, {3, 0}, "reflect");
                  },
                  {"pad", "reflect", "(2, 3)"}},
                 {"replicate an empty dim",
                  [] {
                    pad(Tensor::zeros({2, 0}, kFloat64), {1, 0}, "replicate");
                  },
                  {"pad", "replicate", "(2, 0)"}},
                 {"value with reflect",
                  [z23] {
                    pad(z23, {1, 1}, "reflect", 2.0);
                  },
                  {"pad", "reflect"}}};
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      return s.sizes[0] == 0 || s.sizes[1] == 0 || numel_of(s.batch) == 0
                 ? "torch 1.13's constant_pad_nd with a negative pad fails on empty tensors (forward or backward)"
                 : "";
    };
    t.push_back(op);
    for (const std::string mode : {"reflect", "replicate"}) {
      const std::vector<std::int64_t> pads =
          mode == "reflect" ? std::vector<std::int64_t>{2, 1, 1, -1} : std::vector<std::int64_t>{3, 1, 0, 2};
      op = nm_entry("pad_" + mode, "pad(Tensor,vector<int64_t>,string,double)",
                    fmt::format("out = torch.nn.functional.pad(a, ({}), mode='{}')", fmt::join(pads, ", "), mode),
                    [pads, mode](const Tensor& a) { return pad(a, pads, mode); });
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"a", values({2, s.sizes[0], s.sizes[1]}, g, dt)}}, {}, {}};
      };
      op.supports_batch = false;
      op.errors = {};
      if (mode == "reflect")
        op.refuses = [](const SampleSpec& s) -> std::string {
          return s.sizes[0] <= 1 || s.sizes[1] <= 2 ? "less than its size" : "";
        };
      else
        op.refuses = [](const SampleSpec& s) -> std::string {
          return s.sizes[0] == 0 || s.sizes[1] == 0 ? "non-empty" : "";
        };
      t.push_back(op);
    }
  }
}

const bool registered = register_entries(__FILE__, add_shape_ops_entries);

}  // namespace xgrad::test::table
