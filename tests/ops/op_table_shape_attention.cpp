// The op table's entries for shape ops and scaled_dot_product_attention (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of shape_ops.hpp.
void add_shape_entries(std::vector<OpInfo>& t) {
  // shape_ops.hpp
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
}

// ---- scaled_dot_product_attention (ops/attention.hpp) ---------------------------------------------
// torch 1.13 has no scaled_dot_product_attention: the torch side is the explicit formula
// softmax(q k^T * scale + mask) v. Bool masks travel as float 0/1 inputs (key 0 always allowed, so no
// row is fully masked) and are converted in the call and in torch. More cases: tests/ops/test_attention.cpp.

std::string torch_attention(const std::string& mask, bool causal, const std::string& scale) {
  std::string code = "import math\ns = " + (scale.empty() ? std::string("1 / math.sqrt(q.shape[-1])") : scale) +
                     "\na = q @ k.transpose(-2, -1) * s\n";
  if (causal)
    code +=
        "a = a.masked_fill(torch.ones(a.shape[-2], a.shape[-1], dtype=torch.bool).tril().logical_not(), "
        "float('-inf'))\n";
  if (mask == "bool") code += "a = a.masked_fill(m == 0, float('-inf'))\n";
  if (mask == "float") code += "a = a + m\n";
  return code + "out = torch.softmax(a, -1) @ v\n";
}

void add_attention_entries(std::vector<OpInfo>& t) {
  const std::string sig =
      "scaled_dot_product_attention(Tensor,Tensor,Tensor,Tensor,double,bool,optional<double>,Generator)";
  const Tensor q = Tensor::zeros({2, 3, 4}, kFloat64), k = Tensor::zeros({2, 5, 4}, kFloat64),
               v = Tensor::zeros({2, 5, 6}, kFloat64);
  const std::vector<ErrorCase> errors = {
      {"key of another E",
       [q, v] {
         scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}, kFloat64), v);
       },
       {"scaled_dot_product_attention", "'key'", "(2, 5, 3)", "(2, 3, 4)"}},
      {"value of another S",
       [q, k] {
         scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 6}, kFloat64));
       },
       {"scaled_dot_product_attention", "'value'", "(2, 4, 6)", "(2, 5, 4)"}},
      {"dtype mix",
       [q, k, v] { scaled_dot_product_attention(q, k, v.to(kFloat32)); },
       {"scaled_dot_product_attention", "float32", "(2, 5, 6)"}},
      {"mask not broadcastable",
       [q, k, v] {
         scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 4}, kFloat64));
       },
       {"scaled_dot_product_attention", "'attn_mask'", "(3, 4)", "(2, 3, 5)"}},
      {"mask with is_causal",
       [q, k, v] {
         scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}, kBool), 0.0, true);
       },
       {"scaled_dot_product_attention", "'attn_mask'", "is_causal"}},
      {"query 1-d",
       [k, v] { scaled_dot_product_attention(Tensor::zeros({4}, kFloat64), k, v); },
       {"scaled_dot_product_attention", "'query'", "(4,)"}},
      {"undefined query",
       [k, v] { scaled_dot_product_attention(Tensor(), k, v); },
       {"scaled_dot_product_attention", "'query'", "undefined"}},
  };
  struct Variant {
    std::string name, mask;  // mask: "", "bool", "float"
    bool causal;
    std::optional<double> scale;
  };
  for (const Variant& var :
       std::vector<Variant>{{"scaled_dot_product_attention", "", false, std::nullopt},
                            {"scaled_dot_product_attention_causal", "", true, std::nullopt},
                            {"scaled_dot_product_attention_float_mask", "float", false, 0.35},
                            {"scaled_dot_product_attention_bool_mask", "bool", false, std::nullopt}}) {
    OpInfo op;
    op.name = var.name;
    op.signature = sig;
    op.op = "scaled_dot_product_attention";
    op.torch = torch_attention(var.mask, var.causal, var.scale ? fmt::format("{:.17g}", *var.scale) : "");
    op.sample = [var](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t l = s.sizes[0], n = s.sizes[1], e = s.sizes[2], ev = s.sizes[3];
      SampleInput si{{{"q", values(bshape(s.batch, {l, e}), g, dt)},
                      {"k", values(bshape(s.batch, {n, e}), g, dt)},
                      {"v", values(bshape(s.batch, {n, ev}), g, dt)}},
                     {},
                     {}};
      if (var.mask == "float") si.inputs.push_back({"m", values({l, n}, g, dt)});  // broadcast over the batch
      if (var.mask == "bool") {
        Tensor m = values(bshape(s.batch, {l, n}), g, kFloat64, Domain::mask);
        double* p = m.data<double>();
        for (std::int64_t i = 0; n > 0 && i < m.numel(); i += n) p[i] = 1;
        si.inputs.push_back({"m", m.to(dt), false});
      }
      const std::string mask = var.mask;
      const bool causal = var.causal;
      const auto scale = var.scale;
      si.call = [mask, causal, scale](const Tensors& in) {
        const Tensor m = mask == "bool" ? in[3].to(kBool) : mask == "float" ? in[3] : Tensor();
        return scaled_dot_product_attention(in[0], in[1], in[2], m, 0.0, causal, scale);
      };
      return si;
    };
    op.size_names = {"l", "s", "e", "ev"};
    op.small = {3, 4, 5, 2};
    op.threads = {40, 48, 32, 8};
    op.threads_batch = {4, 8};
    op.large = {300, 300, 300, 300};
    op.supports_batch = true;
    op.check_undefined = var.mask.empty();            // an undefined mask is no mask; undefined query: in errors
    if (var.mask == "bool") op.int64_inputs = {"m"};  // the call converts the mask to bool
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      // the explicit formula's 1 / sqrt(0) * (q k^T = 0) is NaN; the op's empty dot products are 0
      return s.sizes[2] == 0 ? "E = 0: torch's explicit formula gives 0 * inf" : "";
    };
    op.errors = errors;
    t.push_back(op);
  }
}

}  // namespace xgrad::test::table
