// The op table's entries for the copy-type shape ops and the reductions beyond sum/mean/max (split ...
// cumsum), and for the index ops (gather ... topk) (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

void add_shape_reduction_entries(std::vector<OpInfo>& t) {
  using Fn = std::function<Tensor(const Tensor&)>;
  auto entry = [](std::string name, std::string sig, std::string torch, Fn f) {
    OpInfo op;
    op.name = std::move(name);
    op.signature = std::move(sig);
    op.torch = std::move(torch);
    op.call = [f](const Tensors& in) { return f(in[0]); };
    op.sample = nm_sample;
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    return op;
  };
  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64), s0 = Tensor::scalar(1.0, kFloat64);

  // cat: torch's name for concat (an inline alias, so checked through concat's declaration)
  {
    OpInfo op = entry("cat_middle", "concat(Tensors,int64_t)", "out = torch.cat([a, a], -2)", nullptr);
    op.call = [](const Tensors& in) { return cat({in[0], in[0]}, -2); };
    op.errors = {{"axis out of range", [z23] { cat({z23}, 2); }, {"concat", "(2, 3)"}}};
    t.push_back(op);
  }
  // split, chunk
  {
    OpInfo op = entry("split_size", "split(Tensor,int64_t,int64_t)", "ps = torch.split(a, 2, -1)\n", nullptr);
    op.torch += torch_join(-1);
    op.call = [](const Tensors& in) { return join_pieces(split(in[0], 2, -1), -1); };
    op.errors = {{"split_size 0 of a non-empty dim", [z23] { split(z23, 0, 1); }, {"split", "split_size", "(2, 3)"}},
                 {"negative split_size", [z23] { split(z23, -1, 1); }, {"split", "-1", "(2, 3)"}},
                 {"dim out of range", [z23] { split(z23, 1, 2); }, {"split", "2", "(2, 3)"}},
                 {"0-d tensor", [s0] { split(s0, 1, 0); }, {"split", "()"}}};
    t.push_back(op);
  }
  {
    OpInfo op = entry("split_sizes", "split(Tensor,vector<int64_t>,int64_t)", "", nullptr);
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
    OpInfo op = entry("chunk", "chunk(Tensor,int64_t,int64_t)", "ps = torch.chunk(a, 3, -1)\n", nullptr);
    op.torch += torch_join(-1);
    op.call = [](const Tensors& in) { return join_pieces(chunk(in[0], 3, -1), -1); };
    op.errors = {{"0 chunks", [z23] { chunk(z23, 0, 1); }, {"chunk", "chunks", "(2, 3)"}},
                 {"dim out of range", [z23] { chunk(z23, 2, -3); }, {"chunk", "-3", "(2, 3)"}}};
    t.push_back(op);
  }
  // flip, roll, repeat
  {
    OpInfo op = entry("flip", "flip(Tensor,vector<int64_t>)", "out = torch.flip(a, (-1, -2))", [](const Tensor& a) {
      return flip(a, {-1, -2});
    });
    op.errors = {{"dim twice",
                  [z23] {
                    flip(z23, {1, -1});
                  },
                  {"flip", "twice", "(2, 3)"}},
                 {"dim out of range", [z23] { flip(z23, {2}); }, {"flip", "2", "(2, 3)"}}};
    t.push_back(op);
    op = entry("flip_scalar", "flip(Tensor,vector<int64_t>)", "out = torch.flip(a, (0,))",
               [](const Tensor& a) { return flip(a, {0}); });
    op.supports_batch = false;
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op = entry("roll", "roll(Tensor,vector<int64_t>,vector<int64_t>)", "out = torch.roll(a, (2, -5), (-1, -2))",
                      [](const Tensor& a) {
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
    op = entry("roll_flat", "roll(Tensor,vector<int64_t>,vector<int64_t>)", "out = torch.roll(a, -3)",
               [](const Tensor& a) { return roll(a, {-3}); });
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op = entry("repeat", "repeat(Tensor,vector<int64_t>)", "out = a.repeat(2, 1, 3)", [](const Tensor& a) {
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
    OpInfo op = entry("pad_constant", "pad(Tensor,vector<int64_t>,string,double)",
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
      op = entry("pad_" + mode, "pad(Tensor,vector<int64_t>,string,double)",
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

  // reductions: min mirrors max's entries; prod (with zeros), var, std, norm, cumsum
  for (auto [name, torch, axes, keepdim] :
       std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool>>{
           {"min_all", "out = torch.amin(a, tuple(range(a.dim())))", {}, false},
           {"min_last", "out = torch.amin(a, -1)", {-1}, false},
           {"min_rows_keepdim", "out = torch.amin(a, -2, keepdim=True)", {-2}, true}})
    t.push_back(reduction(
        name, torch, [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return min(x, ax, kd); }, axes,
        keepdim, true));
  {
    OpInfo op = reduction(
        "min_outer_axes", "out = torch.amin(a, (0, 2))",
        [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return min(x, ax, kd); }, {0, 2}, false,
        false);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.supports_batch = false;
    op.supports_scalar = false;
    op.refuses = [](const SampleSpec& s) -> std::string { return s.sizes[0] == 0 || s.sizes[2] == 0 ? "size 0" : ""; };
    t.push_back(op);
  }
  auto zeros_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{
        {{"a", with_zeros(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
  };
  auto prod_fn = [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return prod(x, ax, kd); };
  for (auto [name, torch, axes, keepdim] :
       std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool>>{
           {"prod_all", "out = a.prod()", {}, false},
           {"prod_last", "out = torch.prod(a, -1)", {-1}, false},
           {"prod_rows_keepdim", "out = torch.prod(a, -2, keepdim=True)", {-2}, true}}) {
    OpInfo op = reduction(name, torch, prod_fn, axes, keepdim, false);
    op.sample = zeros_sample;
    if (name == "prod_all") {
      op.threads = {200, 200};  // values near +-1: the product of 40000 stays finite
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        // values near +-1 so that products over the large sizes neither overflow nor vanish
        Tensor v = values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64, Domain::unit);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = (i % 2 ? -1 : 1) * (0.9 + 0.2 * p[i]);
        if (v.numel() > 3) p[3] = 0;
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
    }
    t.push_back(op);
  }
  {
    OpInfo op = reduction("prod_outer_axes", "out = a.prod(2).prod(0)", prod_fn, {0, 2}, false, false);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", with_zeros({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.large = {30, 30, 30};
    op.supports_batch = false;
    op.supports_scalar = false;
    t.push_back(op);
  }
  for (bool is_std : {false, true}) {
    const std::string opname = is_std ? "std" : "var";
    auto fn = [is_std](std::int64_t c) {
      return [is_std, c](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) {
        return is_std ? xgrad::std(x, ax, c, kd) : var(x, ax, c, kd);
      };
    };
    for (auto [suffix, torch, axes, keepdim, corr] :
         std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool, std::int64_t>>{
             {"_all", "dim=None, correction=1", {}, false, 1},
             {"_last_c0", "dim=-1, correction=0", {-1}, false, 0},
             {"_rows_keepdim_c2", "dim=-2, correction=2, keepdim=True", {-2}, true, 2}}) {
      OpInfo op = reduction(opname + suffix, fmt::format("out = torch.{}(a, {})", opname, torch), fn(corr), axes,
                            keepdim, false);
      op.signature = opname + "(Tensor,vector<int64_t>,int64_t,bool)";
      op.call = [f = fn(corr), axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
      op.torch_skip = [axes = axes, corr = corr](const SampleSpec& s) -> std::string {
        const std::int64_t k = s.scalar        ? 1
                               : axes.empty()  ? s.sizes[0] * s.sizes[1] * numel_of(s.batch)
                               : axes[0] == -1 ? s.sizes[1]
                                               : s.sizes[0];
        return k <= corr ? "K <= correction: torch 1.13's backward gives NaN, inf or finite values by case" : "";
      };
      if (suffix == "_all") op.torch = fmt::format("out = torch.{}(a, tuple(range(a.dim())), correction=1)", opname);
      op.errors = {{"axis out of range",
                    [fn] {
                      fn(1)(Tensor::zeros({2, 3}, kFloat64), {2}, false);
                    },
                    {opname, "axis 2", "(2, 3)"}},
                   {"negative correction",
                    [fn] {
                      fn(-1)(Tensor::zeros({2, 3}, kFloat64), {}, false);
                    },
                    {opname, "correction", "-1"}}};
      t.push_back(op);
    }
  }
  {
    auto normfn = [](double p) {
      return [p](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return norm(x, p, ax, kd); };
    };
    const double inf = std::numeric_limits<double>::infinity();
    for (auto [name, ord, p, axes, keepdim] :
         std::vector<std::tuple<std::string, std::string, double, std::vector<std::int64_t>, bool>>{
             {"norm_all", "2", 2.0, {}, false},
             {"norm_last_p1", "1", 1.0, {-1}, false},
             {"norm_rows_inf_keepdim", "float('inf')", inf, {-2}, true},
             {"norm_last_p3", "3", 3.0, {-1}, true}}) {
      OpInfo op = reduction(name,
                            fmt::format("out = torch.linalg.vector_norm(a, {}, dim={}, keepdim={})", ord,
                                        axes.empty() ? "None" : std::to_string(axes[0]), keepdim ? "True" : "False"),
                            normfn(p), axes, keepdim, std::isinf(p));
      op.signature = "norm(Tensor,double,vector<int64_t>,bool)";
      op.call = [f = normfn(p), axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
      // the 0-gradient convention at x = 0 (p = 2 and 1): zeros in the samples, and a zero row
      if (!std::isinf(p))
        op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
          Tensor v = with_zeros(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64);
          if (v.dim() == 2 && v.numel() > 0)
            for (std::int64_t j = 0; j < v.shape()[1]; ++j) v.data<double>()[j] = 0;
          return SampleInput{{{"a", v.to(dt)}}, {}, {}};
        };
      op.errors.push_back({"p below 1", [] { norm(Tensor::zeros({2, 3}, kFloat64), 0.5); }, {"norm", "0.5"}});
      t.push_back(op);
    }
    OpInfo op = reduction(
        "norm_fro", "out = torch.norm(a, 'fro', dim=(-2, -1))",
        [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return norm(x, "fro", ax, kd); }, {-2, -1},
        false, false);
    op.signature = "norm(Tensor,string,vector<int64_t>,bool)";
    op.supports_scalar = false;
    op.errors.push_back({"nuclear norm", [] { norm(Tensor::zeros({2, 3}, kFloat64), "nuc"); }, {"norm", "nuc"}});
    t.push_back(op);
  }
  {
    for (std::int64_t dim : {-1, 0}) {
      OpInfo op =
          entry(dim == -1 ? "cumsum_last" : "cumsum_first", "cumsum(Tensor,int64_t)",
                fmt::format("out = torch.cumsum(a, {})", dim), [dim](const Tensor& a) { return cumsum(a, dim); });
      op.supports_batch = dim == -1;
      op.supports_scalar = true;
      op.errors = {{"dim out of range", [z23] { cumsum(z23, 2); }, {"cumsum", "2", "(2, 3)"}},
                   {"dim 1 of a 0-d tensor", [s0] { cumsum(s0, 1); }, {"cumsum", "()"}}};
      t.push_back(op);
    }
  }
}

// ---- index ops (ops/indexing.hpp) and max/min with indices ------------------------------------
// Index tensors travel through the parity harness as float64 inputs that need no grad (as the
// block-sparse entries do) and are converted to int64 in the call (as_long) and in torch (.long());
// integer results are compared as float64.

Tensor as_long(const Tensor& t) { return t.defined() ? t.to(kInt64) : t; }
/// An integer result as the floating dtype of the entry's run (the sweep checks the output dtype).
Tensor as_float(const Tensor& t, const Tensor& like) { return t.to(like.dtype()); }

/// Integer values in [lo, hi) (float64), for index inputs.
Tensor int_values(const Shape& shape, Generator& g, std::int64_t lo, std::int64_t hi) {
  Tensor t = Tensor::zeros(shape, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<double>(std::min(hi - 1, lo + static_cast<std::int64_t>(std::floor(g.uniform() * (hi - lo)))));
  return t;
}

void add_index_entries(std::vector<OpInfo>& t) {
  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64);
  const auto l = [](std::vector<double> v) {
    return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, kFloat64).to(kInt64);
  };
  auto base = [](std::string name, std::string sig, std::string torch) {
    OpInfo op;
    op.name = std::move(name);
    op.signature = std::move(sig);
    op.torch = std::move(torch);
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    return op;
  };
  {
    OpInfo op =
        // the int64-tensor overload is an inline template (indexing.hpp): filed under the std::vector one
        base("index_select_tensor", "index_select(Tensor,int64_t,vector<int64_t>)",
             "out = a.index_select(-2, idx.long())");
    op.call = [](const Tensors& in) { return index_select(in[0], -2, as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0];
      return SampleInput{{{"a", values(bshape(s.batch, {n, s.sizes[1]}), g, dt)},
                          {"idx", int_values({n == 0 ? 0 : n + 2}, g, 0, n), false}},  // repeats: gradients add up
                         {},
                         {}};
    };
    op.supports_batch = true;
    op.errors = {
        {"index out of range",
         [z23, l] {
           index_select(z23, 0, l({0, 2}));
         },
         {"index_select", "2", "size 2"}},
        {"negative index (torch refuses it too)",
         [z23, l] { index_select(z23, 1, l({-1})); },
         {"index_select", "-1", "size 3"}},
        {"float index", [z23] { index_select(z23, 0, Tensor::zeros({1}, kFloat64)); }, {"index_select", "int64"}},
        {"2-d index",
         [z23] {
           index_select(z23, 0, Tensor::zeros({1, 1}, kInt64));
         },
         {"index_select", "(1, 1)"}}};
    t.push_back(op);
  }
  {
    OpInfo op = base("gather", "gather(Tensor,int64_t,Tensor)", "out = torch.gather(a, 1, idx.long())");
    op.call = [](const Tensors& in) { return gather(in[0], 1, as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      // index longer than x along dim 1 and shorter along dim 0
      return SampleInput{
          {{"a", values({n, m}, g, dt)}, {"idx", int_values({(n + 1) / 2, 2 * m}, g, 0, m), false}}, {}, {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    gather(z23, 1, Tensor::full({2, 1}, 3, kInt64));
                  },
                  {"gather", "3", "size 3"}},
                 {"negative index",
                  [z23] {
                    gather(z23, 1, Tensor::full({2, 1}, -1, kInt64));
                  },
                  {"gather", "-1"}},
                 {"index dims", [z23] { gather(z23, 1, Tensor::zeros({2}, kInt64)); }, {"gather", "(2,)", "(2, 3)"}},
                 {"index larger at another dim",
                  [z23] {
                    gather(z23, 1, Tensor::zeros({3, 1}, kInt64));
                  },
                  {"gather", "(3, 1)", "(2, 3)"}},
                 {"float index",
                  [z23] {
                    gather(z23, 1, Tensor::zeros({2, 1}, kFloat64));
                  },
                  {"gather", "int64"}}};
    t.push_back(op);
  }
  {
    OpInfo op = base("take_along_dim", "take_along_dim(Tensor,Tensor,optional<int64_t>)",
                     "out = torch.take_along_dim(a, idx.long(), 1)");
    op.call = [](const Tensors& in) { return take_along_dim(in[0], as_long(in[1]), 1); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{{{"a", values({n, m}, g, dt)}, {"idx", int_values({1, 2 * m}, g, 0, m), false}}, {}, {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    take_along_dim(z23, Tensor::full({1, 1}, 3, kInt64), 1);
                  },
                  {"take_along_dim", "3"}},
                 {"shapes that do not broadcast",
                  [z23] {
                    take_along_dim(z23, Tensor::zeros({3, 1}, kInt64), 1);
                  },
                  {"take_along_dim", "(3, 1)"}}};
    t.push_back(op);
    op = base("take_along_dim_flat", "take_along_dim(Tensor,Tensor,optional<int64_t>)",
              "out = torch.take_along_dim(a, idx.long())");
    op.call = [](const Tensors& in) { return take_along_dim(in[0], as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{
          {{"a", values({n, m}, g, dt)}, {"idx", int_values({n * m == 0 ? 0 : 5}, g, 0, n * m), false}}, {}, {}};
    };
    op.errors = {{"index out of range", [z23, l] { take_along_dim(z23, l({6})); }, {"take_along_dim", "6", "size 6"}}};
    t.push_back(op);
  }
  {
    OpInfo op =
        base("scatter_add", "scatter_add(Tensor,int64_t,Tensor,Tensor)", "out = a.scatter_add(0, idx.long(), src)");
    op.call = [](const Tensors& in) { return scatter_add(in[0], 0, as_long(in[1]), in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      // more index rows than x has (repeats add up); src of index's shape (torch 1.13's backward
      // fails for a larger src, which test_indexing.cpp checks on its own)
      return SampleInput{{{"a", values({n, m}, g, dt)},
                          {"idx", int_values({2 * n, m}, g, 0, n), false},
                          {"src", values({2 * n, m}, g, dt)}},
                         {},
                         {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    scatter_add(z23, 0, Tensor::full({1, 3}, 2, kInt64), z23);
                  },
                  {"scatter_add", "2", "size 2"}},
                 {"index larger than src",
                  [z23] {
                    scatter_add(z23, 0, Tensor::zeros({3, 3}, kInt64), z23);
                  },
                  {"scatter_add", "(3, 3)", "(2, 3)"}},
                 {"dtype mix",
                  [z23] {
                    scatter_add(z23, 0, Tensor::zeros({1, 3}, kInt64), Tensor::zeros({2, 3}, kFloat32));
                  },
                  {"scatter_add", "dtype"}},
                 {"integer x",
                  [z23] {
                    scatter_add(Tensor::zeros({2, 3}, kInt64), 0, Tensor::zeros({1, 3}, kInt64), z23);
                  },
                  {"scatter_add", "int64"}}};
    t.push_back(op);
  }
  // scatter_reduce: a (n, m), src (2n, m) reduced along dim 0 at a fixed index with repeats (each row
  // of a reached about twice, some more, some not at all), the same formula in C++ and in the torch
  // prelude: the index is no input, so the test at ties redraws only a and src.
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool include_self : {true, false}) {
      const std::string r = reduce;
      OpInfo op = base("scatter_reduce_" + r + (include_self ? "" : "_exclude_self"),
                       "scatter_reduce(Tensor,int64_t,Tensor,Tensor,string,bool)",
                       fmt::format("out = a.scatter_reduce(0, idx, src, '{}', include_self={})", r,
                                   include_self ? "True" : "False"));
      op.op = "scatter_reduce";
      op.sample = [r, include_self](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t n = s.sizes[0], m = s.sizes[1], rows = 2 * n;
        Tensor idx = Tensor::zeros({rows, m}, kInt64);
        std::int64_t* p = idx.data<std::int64_t>();
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < m; ++j)
            p[i * m + j] = (i * 7 + j * 3 + (i * j) % 5) % std::max<std::int64_t>(n, 1);
        SampleInput si{{{"a", values({n, m}, g, dt)}, {"src", values({rows, m}, g, dt)}},
                       {},
                       fmt::format("_r = torch.arange({}).reshape(-1, 1)\n_c = torch.arange({}).reshape(1, -1)\n"
                                   "idx = (_r * 7 + _c * 3 + (_r * _c) % 5) % {}\n",
                                   rows, m, std::max<std::int64_t>(n, 1))};
        si.call = [r, include_self, idx](const Tensors& in) {
          return scatter_reduce(in[0], 0, idx, in[1], r, include_self);
        };
        return si;
      };
      op.errors = {{"unknown reduce",
                    [z23] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kInt64), z23, "max");
                    },
                    {"scatter_reduce", "'reduce'", "'max'", "amax"}},
                   {"index out of range",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::full({1, 3}, 2, kInt64), z23, r);
                    },
                    {"scatter_reduce", "2", "size 2"}},
                   {"negative index",
                    [z23, r] {
                      scatter_reduce(z23, 1, Tensor::full({2, 1}, -1, kInt64), z23, r, false);
                    },
                    {"scatter_reduce", "-1", "size 3"}},
                   {"index larger than src",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({3, 3}, kInt64), z23, r);
                    },
                    {"scatter_reduce", "(3, 3)", "(2, 3)"}},
                   {"index with fewer dims",
                    [z23, r] { scatter_reduce(z23, 0, Tensor::zeros({3}, kInt64), z23, r); },
                    {"scatter_reduce", "(3,)", "(2, 3)"}},
                   {"float index",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kFloat64), z23, r);
                    },
                    {"scatter_reduce", "'index'", "int64"}},
                   {"dtype mix",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kInt64), Tensor::zeros({2, 3}, kFloat32), r);
                    },
                    {"scatter_reduce", "dtype"}}};
      if (r == "prod") op.rtol32 = 1e-4;
      t.push_back(op);
    }
  {
    OpInfo op = base("index_add", "index_add(Tensor,int64_t,Tensor,Tensor)", "out = a.index_add(-1, idx.long(), src)");
    op.call = [](const Tensors& in) { return index_add(in[0], -1, as_long(in[1]), in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{{{"a", values({n, m}, g, dt)},
                          {"idx", int_values({m == 0 ? 0 : 2 * m}, g, 0, m), false},
                          {"src", values({n, m == 0 ? 0 : 2 * m}, g, dt)}},
                         {},
                         {}};
    };
    op.errors = {{"index out of range",
                  [z23, l] {
                    index_add(z23, 1, l({3}), Tensor::zeros({2, 1}, kFloat64));
                  },
                  {"index_add", "3", "size 3"}},
                 {"src of the wrong shape", [z23, l] { index_add(z23, 1, l({0}), z23); }, {"index_add", "(2, 3)"}}};
    t.push_back(op);
  }
  {
    OpInfo op = base("index_int", "index(Tensor,Tensor)", "out = a[idx.long()]");
    op.call = [](const Tensors& in) { return index(in[0], as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0];
      // negative indices and repeats (x[idx] wraps negatives, as torch)
      return SampleInput{
          {{"a", values({n, s.sizes[1]}, g, dt)}, {"idx", int_values({2, n == 0 ? 0 : 3}, g, -n, n), false}}, {}, {}};
    };
    op.errors = {
        {"index out of range", [z23, l] { index(z23, l({-3})); }, {"index", "-3", "size 2"}},
        {"float index", [z23] { index(z23, Tensor::zeros({1}, kFloat64)); }, {"index", "int64"}},
        {"0-d x", [l] { index(Tensor::scalar(1.0, kFloat64), l({0})); }, {"index", "0-d"}},
        {"mask of the wrong shape", [z23] { index(z23, Tensor::zeros({3}, kBool)); }, {"index", "(3,)", "(2, 3)"}}};
    t.push_back(op);
    for (bool rows : {true, false}) {
      op = base(rows ? "index_mask_rows" : "index_mask_elements", "index(Tensor,Tensor)", "out = a[mask.bool()]");
      op.call = [](const Tensors& in) { return index(in[0], in[1].defined() ? in[1].to(kBool) : in[1]); };
      op.sample = [rows](Dtype dt, const SampleSpec& s, Generator& g) {
        const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
        const Shape ms = rows ? Shape(sh.begin(), sh.end() - 1) : sh;
        return SampleInput{{{"a", values(sh, g, dt)}, {"mask", values(ms, g, kFloat64, Domain::mask), false}}, {}, {}};
      };
      op.supports_batch = true;
      t.push_back(op);
    }
  }
  // arg-reductions and max/min with indices
  for (bool is_max : {true, false}) {
    const std::string arg = is_max ? "argmax" : "argmin";
    OpInfo op = base(arg + "_last", arg + "(Tensor,optional<int64_t>,bool)",
                     fmt::format("out = torch.{}(a, -1).to(a.dtype)", arg));
    op.call = [is_max](const Tensors& in) { return as_float(is_max ? argmax(in[0], -1) : argmin(in[0], -1), in[0]); };
    op.sample = nm_sample;
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    op.refuses = [](const SampleSpec& s) -> std::string { return !s.scalar && s.sizes[1] == 0 ? "size 0" : ""; };
    op.errors = {
        {"dim out of range", [z23, is_max] { is_max ? argmax(z23, 2) : argmin(z23, 2); }, {arg, "2", "(2, 3)"}},
        {"empty tensor",
         [is_max] { is_max ? argmax(Tensor::zeros({0})) : argmin(Tensor::zeros({0})); },
         {arg, "empty"}}};
    t.push_back(op);
    op = base(arg + "_all_keepdim", arg + "(Tensor,optional<int64_t>,bool)",
              fmt::format("out = torch.{}(a, None, True).to(a.dtype)", arg));
    op.call = [is_max](const Tensors& in) {
      return as_float(is_max ? argmax(in[0], std::nullopt, true) : argmin(in[0], std::nullopt, true), in[0]);
    };
    op.sample = nm_sample;
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    op.refuses = [](const SampleSpec& s) -> std::string {
      return !s.scalar && s.sizes[0] * s.sizes[1] * numel_of(s.batch) == 0 ? "empty" : "";
    };
    t.push_back(op);

    const std::string opname = is_max ? "max" : "min";
    for (bool values_out : {true, false}) {
      op = base(opname + (values_out ? "_dim_values" : "_dim_indices"), opname + "_with_indices(Tensor,int64_t,bool)",
                fmt::format("out = torch.{}(a, -1, keepdim=True)[{}]{}", opname, values_out ? 0 : 1,
                            values_out ? "" : ".to(a.dtype)"));
      op.op = opname;
      op.call = [is_max, values_out](const Tensors& in) {
        auto [v, i] = is_max ? max(in[0], -1, true) : min(in[0], -1, true);  // torch's spelling (integer dim)
        return values_out ? v : as_float(i, in[0]);
      };
      op.sample = nm_sample;
      op.differentiable = values_out;
      op.supports_batch = true;
      op.supports_scalar = true;
      op.refuses = [](const SampleSpec& s) -> std::string { return !s.scalar && s.sizes[1] == 0 ? "size 0" : ""; };
      op.errors = {{"int64 x with an empty dim",
                    [is_max] {
                      is_max ? max(Tensor::zeros({2, 0}, kInt64), 1) : min(Tensor::zeros({2, 0}, kInt64), 1);
                    },
                    {opname, "size 0", "(2, 0)"}}};
      t.push_back(op);
    }
  }
  // topk and sort: values (gradient scattered back) and indices
  for (bool values_out : {true, false}) {
    for (bool largest : {true, false}) {
      OpInfo op = base(fmt::format("topk_{}_{}", largest ? "largest" : "smallest", values_out ? "values" : "indices"),
                       "topk(Tensor,int64_t,int64_t,bool,bool)", "");
      op.call = nullptr;
      op.sample = [values_out, largest](Dtype dt, const SampleSpec& s, Generator& g) {
        SampleInput si = nm_sample(dt, s, g);
        const std::int64_t k = s.scalar ? 1 : (s.sizes[1] + 1) / 2;
        si.call = [k, values_out, largest](const Tensors& in) {
          auto [v, i] = topk(in[0], k, -1, largest);
          return values_out ? v : as_float(i, in[0]);
        };
        si.torch_prelude = fmt::format("k = {}\n", k);
        return si;
      };
      op.torch = fmt::format("out = torch.topk(a, k, -1, largest={})[{}]{}", largest ? "True" : "False",
                             values_out ? 0 : 1, values_out ? "" : ".double()");
      op.differentiable = values_out;
      op.supports_batch = true;
      op.supports_scalar = true;
      op.errors = {{"k too large", [z23] { topk(z23, 4); }, {"topk", "k = 4", "size 3"}},
                   {"negative k", [z23] { topk(z23, -1); }, {"topk", "-1"}}};
      t.push_back(op);
    }
    for (bool descending : {false, true}) {
      OpInfo op =
          base(fmt::format("sort_{}_{}", descending ? "descending" : "ascending", values_out ? "values" : "indices"),
               "sort(Tensor,int64_t,bool,bool)",
               fmt::format("out = torch.sort(a, dim=-2, descending={}, stable=True)[{}]{}",
                           descending ? "True" : "False", values_out ? 0 : 1, values_out ? "" : ".double()"));
      op.call = [values_out, descending](const Tensors& in) {
        auto [v, i] = sort(in[0], -2, descending);
        return values_out ? v : as_float(i, in[0]);
      };
      op.sample = [values_out](Dtype dt, const SampleSpec& s, Generator& g) {
        // for the indices: values rounded to halves, so ties occur, which a stable sort keeps in
        // order (not for the values: a tie has no gradient for gradcheck to check)
        Tensor v = values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel() && !values_out; ++i) p[i] = std::round(2 * p[i]) / 2;
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
      op.differentiable = values_out;
      op.supports_batch = true;
      op.errors = {{"dim out of range", [z23] { sort(z23, 2); }, {"sort", "2", "(2, 3)"}},
                   {"integer x", [] { sort(Tensor::zeros({2}, kInt64)); }, {"sort", "int64"}}};
      t.push_back(op);
    }
  }
  {
    OpInfo op = base("nonzero", "nonzero(Tensor)", "out = torch.nonzero(a).to(a.dtype)");
    op.call = [](const Tensors& in) { return as_float(nonzero(in[0]), in[0]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{
          {{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt, Domain::mask)}}, {}, {}};
    };
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op = base("one_hot", "one_hot(Tensor,int64_t)", "out = torch.nn.functional.one_hot(y.long(), C).double()");
    op.call = nullptr;
    op.sample = [](Dtype, const SampleSpec& s, Generator& g) {
      const std::int64_t c = s.sizes[1];
      SampleInput si{{{"y", int_values(bshape(s.batch, {c == 0 ? 0 : s.sizes[0]}), g, 0, c), false}}, {}, {}};
      si.call = [c](const Tensors& in) { return one_hot(as_long(in[0]), c).to(kFloat64); };
      si.torch_prelude = fmt::format("C = {}\n", c);
      return si;
    };
    op.differentiable = false;
    op.supports_batch = true;
    op.dtypes = {kFloat64};  // no floating input: the int64 result is compared as float64
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 ? "torch 1.13 takes num_classes 0 as 'infer', which fails on empty labels" : "";
    };
    op.errors = {
        {"label out of range",
         [l] {
           one_hot(l({0, 3}), 3);
         },
         {"one_hot", "3", "3 classes"}},
        {"negative label", [l] { one_hot(l({-1}), 3); }, {"one_hot", "-1"}},
        {"float labels", [] { one_hot(Tensor::zeros({2}, kFloat64), 3); }, {"one_hot", "int64"}},
        {"empty labels without num_classes", [] { one_hot(Tensor::zeros({0}, kInt64)); }, {"one_hot", "empty"}}};
    t.push_back(op);
  }
}

}  // namespace xgrad::test::table
