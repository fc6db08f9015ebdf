// The op table's entries for ops/attention.hpp: scaled_dot_product_attention (op_table_common.hpp,
// op_table.cpp). torch 1.13 has no scaled_dot_product_attention: the torch side is the explicit formula
// softmax(q k^T * scale + mask) v. Bool masks travel as float 0/1 inputs (key 0 always allowed, so no
// row is fully masked) and are converted in the call and in torch. More cases: tests/ops/test_attention.cpp.
#include "op_table_common.hpp"
#include "xgrad/ops/attention_layout.hpp"

namespace xgrad::test::table {

namespace {

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

}  // namespace

// The entries of attention.hpp.
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
    op.threads = {70, 140, 16, 8};  // L and S over several tiles of the fused kernels
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
  // block_sparse_attention: a sliding window of one block plus key block 0 for every query block (so
  // no row is fully masked), in blocks of 2 at the small sizes and of 16 at the thread-test sizes (many
  // tiles); the torch side masks the dense scores with the layout's blocks, passed as a 0/1 input.
  for (const bool causal : {false, true}) {
    OpInfo op;
    op.name = causal ? "block_sparse_attention_causal" : "block_sparse_attention";
    op.signature =
        "block_sparse_attention(Tensor,Tensor,Tensor,CsrPattern,int64_t,double,bool,optional<double>,Generator)";
    op.op = "block_sparse_attention";
    op.torch = torch_attention("bool", causal, "");
    op.sample = [causal](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t l = s.sizes[0], n = s.sizes[1], e = s.sizes[2], ev = s.sizes[3];
      const std::int64_t block = l >= 32 ? 16 : 2, rows = (l + block - 1) / block, cols = (n + block - 1) / block;
      CsrPattern layout = sliding_window_layout(rows, cols, 1);
      if (rows > 0 && cols > 0) {  // key block 0 for every query block
        std::vector<std::int64_t> crow{0}, c;
        for (std::int64_t i = 0; i < rows; ++i) {
          c.push_back(0);
          crow.push_back(i + 1);
        }
        layout = layout_union({layout, CsrPattern::from_indices(crow, c, rows, cols, "test")});
      }
      Tensor m = Tensor::zeros({l, n}, kFloat64);
      double* mp = m.data<double>();
      for (std::int64_t i = 0; i < rows; ++i)
        for (auto k = layout.crow()[static_cast<std::size_t>(i)]; k < layout.crow()[static_cast<std::size_t>(i + 1)];
             ++k)
          for (std::int64_t a = i * block; a < std::min(l, (i + 1) * block); ++a)
            for (std::int64_t b = layout.col()[static_cast<std::size_t>(k)] * block;
                 b < std::min(n, (layout.col()[static_cast<std::size_t>(k)] + 1) * block); ++b)
              mp[a * n + b] = 1;
      SampleInput si{{{"q", values(bshape(s.batch, {l, e}), g, dt)},
                      {"k", values(bshape(s.batch, {n, e}), g, dt)},
                      {"v", values(bshape(s.batch, {n, ev}), g, dt)},
                      {"m", m.to(dt), false}},
                     {},
                     {}};
      si.call = [layout, block, causal](const Tensors& in) {
        return block_sparse_attention(in[0], in[1], in[2], layout, block, 0.0, causal);
      };
      return si;
    };
    op.size_names = {"l", "s", "e", "ev"};
    op.small = {5, 6, 3, 2};
    op.threads = {70, 140, 16, 8};
    op.threads_batch = {4, 8};
    op.large = {300, 300, 300, 300};
    op.supports_batch = true;
    op.check_undefined = false;  // the layout input m is a helper; undefined query: in errors
    op.int64_inputs = {"m"};
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      return s.sizes[2] == 0 ? "E = 0: torch's explicit formula gives 0 * inf" : "";
    };
    if (!causal)
      op.errors = {
          {"block of 0",
           [q, k, v] { block_sparse_attention(q, k, v, sliding_window_layout(3, 5, 1), 0); },
           {"block_sparse_attention", "'block'", "0"}},
          {"layout of another grid",
           [q, k, v] { block_sparse_attention(q, k, v, sliding_window_layout(2, 2, 1), 1); },
           {"block_sparse_attention", "'layout'", "(2, 2)", "(3, 5)"}},
          {"key of another E",
           [q, v] {
             block_sparse_attention(q, Tensor::zeros({2, 5, 3}, kFloat64), v, sliding_window_layout(3, 5, 1), 1);
           },
           {"block_sparse_attention", "'key'", "(2, 5, 3)"}},
          {"undefined query",
           [k, v] { block_sparse_attention(Tensor(), k, v, sliding_window_layout(3, 5, 1), 1); },
           {"block_sparse_attention", "'query'", "undefined"}},
      };
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_attention_entries);

}  // namespace xgrad::test::table
