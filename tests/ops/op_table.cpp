// The op table (see op_table.hpp): one entry per public op of ops/ (one per meaningful overload or
// variant). The entries of ops/<header>.hpp are in tests/ops/op_table_<header>.cpp, which registers
// them (register_entries, op_table_common.hpp); build() calls the files in the headers' order, then
// adds what is set across headers: int64 inputs, edge-case errors, ties and kinks, create_graph.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "op_table_common.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/attention.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/normalization.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/rnn.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad::test::table {

namespace {
// The registered files of entries: (file, function), in the order the linker initialised them.
std::vector<std::pair<std::string, AddEntries>>& entry_files() {
  static std::vector<std::pair<std::string, AddEntries>> files;
  return files;
}
}  // namespace

bool register_entries(const char* file, AddEntries add) {
  entry_files().emplace_back(file, add);
  return true;
}

}  // namespace xgrad::test::table

namespace xgrad::test {

namespace {
using namespace table;  // the helpers and the registered files of entries (op_table_common.hpp)

// True when the op's graph on its small float64 sample has only nodes whose backward is
// differentiable (Node::supports_create_graph, the op's kDifferentiableBackward). An output without
// history (e.g. batch norm's running statistics) has nothing to differentiate: false, and both
// create_graph tests skip it.
bool records_differentiable_backward(const OpInfo& op) {
  Generator gen(7);
  SampleInput si = op.sample(kFloat64, {op.small, {}}, gen);
  Tensors args;
  for (const auto& in : si.inputs) {
    Tensor v = in.value.detach().clone_data();
    if (in.requires_grad && is_floating_point(v.dtype())) v.set_requires_grad();
    args.push_back(v);
  }
  const Tensor out = (si.call ? si.call : op.call)(args);
  if (!out.requires_grad() || !out.grad_fn()) return false;
  std::vector<const Node*> stack{out.grad_fn().get()};
  std::set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (!n->supports_create_graph()) return false;
    for (const Edge& e : n->next_edges())
      if (e.fn) stack.push_back(e.fn.get());
  }
  return true;
}

// Whether ops/<header>.hpp declares an inline function `name` (which public_op_declarations skips).
bool declares_inline(const std::string& header, const std::string& name) {
  std::ifstream in(XGRAD_SOURCE_DIR "/ops/" + header + ".hpp");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());  // none: ""
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (auto at = text.find(name + "("); at != std::string::npos; at = text.find(name + "(", at + 1)) {
    const auto line = text.rfind('\n', at) + 1;  // npos + 1 = 0 on the first line
    if ((at == 0 || !ident(text[at - 1])) && text.substr(line, at - line).find("inline ") != std::string::npos)
      return true;
  }
  return false;
}

std::vector<OpInfo> build() {
  std::vector<OpInfo> t;
  // The files of entries, one per op header (tests/ops/op_table_<header>.cpp), in the headers' order.
  // Each entry covers an op of its file's header: its declaration is in ops/<header>.hpp or, for an
  // entry filed under a declaration elsewhere because its own overload is an inline function (the
  // int64-tensor index_select of indexing.hpp), an inline function of that name is.
  std::map<std::string, AddEntries> files;
  for (const auto& [file, add] : entry_files()) {
    const std::string stem = std::filesystem::path(file).stem().string(), prefix = "op_table_";
    if (stem.rfind(prefix, 0) != 0)
      throw std::logic_error("op table: " + file + " registers entries but is not named op_table_<header>.cpp");
    if (!files.emplace(stem.substr(prefix.size()), add).second)
      throw std::logic_error("op table: two files register the entries of ops/" + stem.substr(prefix.size()) + ".hpp");
  }
  std::map<std::string, std::string> declared_in;
  for (const auto& d : public_op_declarations(XGRAD_SOURCE_DIR "/ops")) declared_in[d.signature] = d.header;
  for (const auto& [header, add] : files) {
    const std::size_t first = t.size();
    add(t);
    for (std::size_t i = first; i < t.size(); ++i) {
      const OpInfo& op = t[i];
      const auto it = declared_in.find(op.signature);  // none: the completeness test names the entry
      if (it == declared_in.end() || it->second == header ||
          declares_inline(header, op.signature.substr(0, op.signature.find('('))))
        continue;
      throw std::logic_error(
          fmt::format("op table: entry {} ({}) is in tests/ops/op_table_{}.cpp, but its op is "
                      "declared in ops/{}.hpp: move it to tests/ops/op_table_{}.cpp",
                      op.name, op.signature, header, it->second, it->second));
    }
  }

  // The copy-type shape ops and the index ops move elements of any dtype (as torch's do): their inputs
  // may be int64 (index inputs always are). The generic int64 test runs them so.
  {
    const std::map<std::string, std::vector<std::string>> any_dtype = {{"argmax_all_keepdim", {"a"}},
                                                                       {"argmax_last", {"a"}},
                                                                       {"argmin_all_keepdim", {"a"}},
                                                                       {"argmin_last", {"a"}},
                                                                       {"cat_middle", {"a"}},
                                                                       {"chunk", {"a"}},
                                                                       {"flip", {"a"}},
                                                                       {"flip_scalar", {"a"}},
                                                                       {"gather", {"a", "idx"}},
                                                                       {"index_add", {"idx"}},
                                                                       {"index_int", {"a", "idx"}},
                                                                       {"index_mask_elements", {"a", "mask"}},
                                                                       {"index_mask_rows", {"a", "mask"}},
                                                                       {"index_select_tensor", {"a", "idx"}},
                                                                       {"nonzero", {"a"}},
                                                                       {"one_hot", {"y"}},
                                                                       {"pad_constant", {"a"}},
                                                                       {"pad_reflect", {"a"}},
                                                                       {"pad_replicate", {"a"}},
                                                                       {"repeat", {"a"}},
                                                                       {"roll", {"a"}},
                                                                       {"roll_flat", {"a"}},
                                                                       {"scatter_add", {"idx"}},
                                                                       {"split_size", {"a"}},
                                                                       {"split_sizes", {"a"}},
                                                                       {"take_along_dim", {"a", "idx"}},
                                                                       {"take_along_dim_flat", {"a", "idx"}}};
    for (auto& op : t) {
      const auto it = any_dtype.find(op.name);
      if (it != any_dtype.end())
        for (const auto& in : it->second)
          if (std::find(op.int64_inputs.begin(), op.int64_inputs.end(), in) == op.int64_inputs.end())
            op.int64_inputs.push_back(in);
    }
  }

  // Bad inputs at the edges (empty axes, 0-d tensors, invalid enums), added to their entries.
  auto more = [&t](const std::string& name, std::vector<ErrorCase> cases) {
    auto it = std::find_if(t.begin(), t.end(), [&](const OpInfo& op) { return op.name == name; });
    if (it == t.end()) throw Error("op table: no entry " + name);
    it->errors.insert(it->errors.end(), cases.begin(), cases.end());
  };
  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64), s0 = Tensor::scalar(1.0, kFloat64);
  more("index_select", {{"index into an empty axis",
                         [] {
                           index_select(Tensor::zeros({0, 3}, kFloat64), 0, {0});
                         },
                         {"index_select", "(0, 3)"}},
                        {"negative index (as torch)",
                         [z23] { index_select(z23, 0, {-1}); },
                         {"index_select", "index -1", "dim 0 of size 2", "(2, 3)"}}});
  more("slice_step", {{"axis of a 0-d tensor", [s0] { slice(s0, 0, 0, 1); }, {"slice", "()"}},
                      {"negative step", [z23] { slice(z23, 0, 0, 2, -1); }, {"slice", "step", "(2, 3)"}}});
  more("softmax_last", {{"axis 1 of a 0-d tensor", [s0] { softmax(s0, 1); }, {"softmax", "axis 1", "()"}}});
  more("sum_all", {{"axis -3 of a 2-d tensor", [z23] { sum(z23, {-3}); }, {"sum", "-3", "(2, 3)"}},
                   {"axis 1 of a 0-d tensor", [s0] { sum(s0, {1}); }, {"sum", "axis 1", "()"}},
                   {"int64: axis out of range",
                    [] {
                      sum(Tensor::zeros({2, 3}, kInt64), {2});
                    },
                    {"sum", "axis 2"}}});
  // the integer paths of max and min check their axes as the float ones do
  for (const char* n : {"max", "min"}) {
    using Reduce = Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool);
    const Reduce f = std::string(n) == "max" ? static_cast<Reduce>(&xgrad::max) : static_cast<Reduce>(&xgrad::min);
    more(std::string(n) + "_all", {{"int64 over an empty axis",
                                    [f] {
                                      f(Tensor::zeros({2, 0}, kInt64), {1}, false);
                                    },
                                    {n, "axis 1", "size 0", "(2, 0)"}},
                                   {"int64: axis named twice",
                                    [f] {
                                      f(Tensor::zeros({2, 3}, kInt64), {1, -1}, false);
                                    },
                                    {n, "twice"}}});
  }
  more("matmul_mm", {{"empty inner sizes that differ",
                      [] {
                        matmul(Tensor::zeros({2, 0}, kFloat64), Tensor::zeros({3, 4}, kFloat64));
                      },
                      {"matmul", "(2, 0)", "(3, 4)"}}});
  more("matmul_dot", {{"vectors of different lengths",
                       [] { matmul(Tensor::zeros({3}, kFloat64), Tensor::zeros({4}, kFloat64)); },
                       {"matmul", "(3,)", "(4,)"}}});
  more("expand", {{"negative size other than -1",
                   [] {
                     expand(Tensor::zeros({1, 3}, kFloat64), {-2, 3});
                   },
                   {"expand", "(1, 3)"}}});
  more("concat", {{"0-d tensors", [s0] { concat({s0, s0}, 0); }, {"concat", "()"}}});
  more("mse_loss_mean",
       {{"invalid reduction", [z23] { mse_loss(z23, z23, static_cast<Reduction>(7)); }, {"mse_loss", "'reduction'"}}});
  more("bce_with_logits_pos_weight_sum",
       {{"pos_weight dtype mix",
         [z23] { binary_cross_entropy_with_logits(z23, z23, Reduction::Sum, Tensor::ones({3}, kFloat32)); },
         {"binary_cross_entropy_with_logits", "'pos_weight'", "dtype"}}});
  more("cross_entropy_vector_mean",
       {{"two targets for (C) scores",
         [] {
           cross_entropy(Tensor::zeros({4}, kFloat64), std::vector<std::int64_t>{0, 1});
         },
         {"cross_entropy", "(4,)"}},
        {"ignore_index inside [0, C) is fine, negative index is not",
         [] {
           cross_entropy(Tensor::zeros({2, 4}, kFloat64), std::vector<std::int64_t>{0, -1});
         },
         {"cross_entropy", "-1"}}});
  more("nll_loss_vector_mean", {{"class index into an empty class axis",
                                 [] {
                                   nll_loss(Tensor::zeros({2, 0}, kFloat64), std::vector<std::int64_t>{0, 0});
                                 },
                                 {"nll_loss", "(2, 0)"}}});
  more("permute", {{"dims on a 0-d tensor", [s0] { permute(s0, {0}); }, {"permute", "()"}}});
  more("transpose", {{"axes of a 0-d tensor", [s0] { transpose(s0, 0, 1); }, {"transpose", "()"}}});
  more("squeeze_axis", {{"axis 1 of a 0-d tensor", [s0] { squeeze(s0, 1); }, {"squeeze", "()"}}});
  more("flatten", {{"end_dim 1 of a 0-d tensor", [s0] { flatten(s0, 0, 1); }, {"flatten", "()"}}});
  for (auto& op : t) {
    if (op.op.empty()) op.op = op.signature.substr(0, op.signature.find('('));
    if (op.large.empty()) op.large.assign(op.size_names.size(), 300);
    if (!op.call) op.call = [](const Tensors&) -> Tensor { throw Error("op table: the sample must set call"); };
  }
  // The ops that take integer and bool inputs (ops/elementwise.hpp).
  for (auto& op : t)
    for (const char* n : {"add",         "sub",         "mul",
                          "div",         "maximum",     "minimum",
                          "add_outer",   "mul_outer",   "maximum_outer",
                          "add_scalar",  "sub_scalar",  "mul_scalar",
                          "div_scalar",  "rdiv_scalar", "neg",
                          "abs",         "where",       "masked_select",
                          "masked_fill", "gt",          "lt",
                          "ge",          "le",          "eq",
                          "ne",          "logical_and", "logical_or",
                          "logical_xor", "logical_not"})
      if (op.name == n) op.int64_inputs = {"*"};
  for (auto& op : t)
    if (op.name.rfind("sum_", 0) == 0) op.int64_inputs = {"*"};  // integer sums are int64
  // max and min (over axes, or along a dim with indices) keep an integer dtype, exactly, as torch
  for (auto& op : t)
    for (const char* n :
         {"max_all", "max_last", "max_rows_keepdim", "max_outer_axes", "min_all", "min_last", "min_rows_keepdim",
          "min_outer_axes", "max_dim_values", "max_dim_indices", "min_dim_values", "min_dim_indices"})
      if (op.name == n) op.int64_inputs = {"*"};
  // Ops exact on int64 beyond 2^53 (the int64 parity test draws such values for them).
  for (auto& op : t) {
    for (const char* n : {"max_all",
                          "max_last",
                          "max_rows_keepdim",
                          "max_outer_axes",
                          "min_all",
                          "min_last",
                          "min_rows_keepdim",
                          "min_outer_axes",
                          "max_dim_values",
                          "max_dim_indices",
                          "min_dim_values",
                          "min_dim_indices",
                          "argmax_last",
                          "argmax_all_keepdim",
                          "argmin_last",
                          "argmin_all_keepdim",
                          "maximum",
                          "minimum",
                          "maximum_outer",
                          "gt",
                          "lt",
                          "ge",
                          "le",
                          "eq",
                          "ne",
                          "where",
                          "masked_fill",
                          "masked_select"})
      if (op.name == n) op.int64_exact = true;
    if (op.name.rfind("sum_", 0) == 0) op.int64_exact = true;
  }
  // Ops that only move or read integer data run on int64 inputs too (shape ops copy any dtype; the
  // index and position inputs are read as numbers).
  for (auto& op : t)
    for (const auto& [n, input] :
         std::vector<std::pair<std::string, std::string>>{{"reshape_swap", "a"},
                                                          {"reshape_infer", "a"},
                                                          {"flatten", "a"},
                                                          {"flatten_all", "a"},
                                                          {"squeeze_axis", "a"},
                                                          {"squeeze_all", "a"},
                                                          {"unsqueeze", "a"},
                                                          {"slice_step", "a"},
                                                          {"slice_negative", "a"},
                                                          {"index_select", "a"},
                                                          {"permute", "a"},
                                                          {"transpose", "a"},
                                                          {"expand", "a"},
                                                          {"block_sparse_linear", "idx"},
                                                          {"block_sparse_linear_nobias", "idx"},
                                                          {"block_sparse_linear_diagonal", "idx"},
                                                          {"block_sparse_linear_noblocks", "idx"},
                                                          {"block_sparse_to_dense", "idx"},
                                                          {"block_sparse_from_dense", "idx"},
                                                          {"resample_conv_sampled_points", "x"},
                                                          {"resample_conv_cos2_uniform", "x"}})
      if (op.name == n) op.int64_inputs.push_back(input);
  // Ties and kinks (docs/ops.md, "Ties and kinks"): entries whose op has a tie rule, with the values
  // that make it meet its ties (equal operands or elements) and kinks (relu's 0, the clamp and
  // hardtanh bounds); the test "at ties and kinks" compares them with torch there. topk is not
  // here: which of several equal elements torch.topk returns is unspecified (ours: the lowest index).
  const std::vector<double> kTies = {-1.0, 0.0, 1.0};
  // clang-format off
  static const std::map<std::string, std::vector<double>> kTieValues = {
      {"maximum", kTies}, {"minimum", kTies}, {"maximum_outer", kTies}, {"abs", kTies}, {"relu", kTies},
      {"clamp", {-0.5, 0.0, 0.75}},  // clamp(a, -0.5, 0.7): 0.75 is above, -0.5 on the bound
      {"clamp_min", {-1.0, 0.3, 1.0}}, {"clamp_max", {-1.0, -0.2, 1.0}}, {"leaky_relu", kTies},
      {"leaky_relu_slope", kTies}, {"elu", kTies}, {"elu_alpha", kTies}, {"selu", kTies},
      {"hardtanh", {-2.0, -1.0, 0.0, 1.0, 2.0}}, {"hardtanh_bounds", {-1.0, -0.5, 0.0, 0.8, 1.0}},
      {"softplus_beta_threshold", {0.0, 0.5, 1.0}},  // beta x = threshold at 0.5
      // hardswish at 3: torch's vectorised kernel gives g, its scalar loop (small tensors, tails) 1.5 g;
      // ours is the vectorised one's, so 3 is left out (docs/ops.md, "Ties and kinks")
      {"hardswish", {-4.0, -3.0, 0.0, 2.5, 4.0}}, {"hardsigmoid", {-4.0, -3.0, 0.0, 3.0, 4.0}},
      {"max_all", kTies}, {"max_last", kTies}, {"max_rows_keepdim", kTies}, {"max_outer_axes", kTies},
      {"min_all", kTies}, {"min_last", kTies}, {"min_rows_keepdim", kTies}, {"min_outer_axes", kTies},
      {"norm_rows_inf_keepdim", kTies}, {"norm_last_p1", kTies},
      {"max_pool1d", {0.0, 1.0}}, {"max_pool2d", {0.0, 1.0}}, {"max_pool2d_default_stride_unbatched", {0.0, 1.0}},
      {"max_pool1d_with_indices", {0.0, 1.0}}, {"max_pool2d_with_indices", {0.0, 1.0}},
      {"adaptive_max_pool2d", {0.0, 1.0}},
      {"sort_ascending_values", kTies}, {"sort_descending_values", kTies},
      {"sort_ascending_indices", kTies}, {"sort_descending_indices", kTies},
      {"segment_max", kTies}, {"segment_min", kTies},
  };
  // ... and every entry whose name starts with one of these (max/min with a dim: values and indices;
  // argmax/argmin; the losses with a kink at d = 0 or at |d| = delta or beta)
  static const std::vector<std::pair<std::string, std::vector<double>>> kTiePrefixes = {
      {"max_dim_", kTies}, {"min_dim_", kTies}, {"argmax_", kTies}, {"argmin_", kTies},
      {"l1_loss_", kTies}, {"huber_loss_", {0.0, 0.7, 1.4}}, {"smooth_l1_loss_", {0.0, 0.7, 1.4}},  // delta = beta = 0.7
      {"scatter_reduce_", kTies}};  // amax/amin ties, prod's zeros
  // clang-format on
  std::set<std::string> tie_names;
  for (auto& op : t) {
    if (const auto it = kTieValues.find(op.name); it != kTieValues.end()) {
      op.tie_values = it->second;
      tie_names.insert(op.name);
    }
    for (const auto& [prefix, v] : kTiePrefixes)
      if (op.name.rfind(prefix, 0) == 0) op.tie_values = v;
  }
  for (const auto& [name, v] : kTieValues)
    if (tie_names.count(name) == 0) throw std::logic_error("op table: the ties block names no entry '" + name + "'");
  for (auto& op : t) {
    // norm's samples sit on its kinks (zeros, a zero row); gradgradcheck takes values away from them
    if ((op.name == "norm_last_p1" || op.name == "norm_last_p3") && !op.gradgrad_sample)
      op.gradgrad_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
      };
    // Whether the op supports create_graph comes from the op itself (its kDifferentiableBackward),
    // not from a list kept beside the table: gradgradcheck then runs on every op that claims it.
    op.create_graph = op.differentiable && records_differentiable_backward(op);
  }
  return t;
}

}  // namespace

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = build();
  return table;
}

}  // namespace xgrad::test
