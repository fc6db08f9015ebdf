// The op table (see op_table.hpp): one entry per public op of ops/ (one per meaningful overload or
// variant). Entries are grouped by header, in the header's order; families of similar ops are made
// by small factories (unary, binary, reduction, pointwise loss) so that each op is one line.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
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

namespace xgrad::test {

namespace {
using namespace table;  // the helpers and the groups of entries (op_table_common.hpp)

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

std::vector<OpInfo> build() {
  std::vector<OpInfo> t;
  using D = Domain;
  const std::string TT = "Tensor,Tensor";
  add_elementwise_entries(t);
  add_unary_math_activation_entries(t);
  add_reduction_softmax_loss_entries(t);
  add_matmul_linear_entries(t);
  add_shape_entries(t);
  add_block_sparse_resample_normalization_entries(t);
  add_conv_pool_entries(t);
  add_shape_reduction_entries(t);  // split ... pad, min ... cumsum
  add_index_entries(t);            // gather ... topk
  add_attention_entries(t);        // scaled_dot_product_attention
  add_sparse_entries(t);           // spmm, sddmm, linear (sparse), the segment reductions

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

  // ---- integer and bool dtypes (elementwise.hpp) ---------------------------------------------
  {
    OpInfo op;
    op.name = "masked_fill";
    op.signature = "masked_fill(Tensor,Tensor,double)";
    op.torch = "out = x.masked_fill(m != 0, 0.5)";
    op.call = [](const Tensors& in) {  // the sample's 0/1 mask as bool (a float mask is refused)
      return masked_fill(in[0], in[1].defined() && is_floating_point(in[1].dtype()) ? in[1].to(kBool) : in[1], 0.5);
    };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      if (s.scalar) return SampleInput{{{"x", values({}, g, dt)}, {"m", values({}, g, dt, D::mask), false}}, {}, {}};
      return SampleInput{{{"x", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                          {"m", values({s.sizes[1]}, g, dt, D::mask), false}},
                         {},
                         {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.supports_scalar = true;
    op.int64_inputs = {"*"};
    op.errors = {{"mask broadcasting beyond x",
                  [] {
                    masked_fill(Tensor::zeros({3}), Tensor::zeros({2, 3}, kBool), 1.0);
                  },
                  {"masked_fill", "(2, 3)", "(3,)"}},
                 {"float mask",
                  [] { masked_fill(Tensor::zeros({3}), Tensor::ones({3}, kFloat64), 1.0); },
                  {"masked_fill", "argument 'mask'", "float64", "(3,)"}}};
    t.push_back(op);
  }
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"logical_and", "torch.logical_and", &logical_and},
           {"logical_or", "torch.logical_or", &logical_or},
           {"logical_xor", "torch.logical_xor", &logical_xor}}) {
    OpInfo op = binary(
        name, name + "(" + TT + ")", fmt::format("out = {}(a, b).to(a.dtype)", py),
        [fn](auto& a, auto& b) { return fn(a, b).to(a.dtype()); }, D::mask, D::mask);
    op.op = name;
    op.differentiable = false;
    std::erase_if(op.errors, [](const ErrorCase& e) { return e.what == "dtype mix"; });  // any dtypes
    for (auto& e : op.errors) e.fragments[0] = name;
    t.push_back(op);
  }
  {
    OpInfo op = unary(
        "logical_not", "logical_not(Tensor)", "out = torch.logical_not(a).to(a.dtype)",
        [](auto& x) { return logical_not(x).to(x.dtype()); }, D::mask);
    op.differentiable = false;
    t.push_back(op);
  }
  for (auto& op : t) {
    if (op.op.empty()) op.op = op.signature.substr(0, op.signature.find('('));
    if (op.large.empty()) op.large.assign(op.size_names.size(), 300);
    if (!op.call) op.call = [](const Tensors&) -> Tensor { throw Error("op table: the sample must set call"); };
  }
  // The ops that take integer and bool inputs (ops/elementwise.hpp).
  // rnn.hpp: lstm_cell and gru_cell (batch, in, hidden), with and without biases; lstm_layer and
  // gru_layer (seq, batch, in, hidden) in both directions, against a Python loop of torch's cells.
  // The several outputs are compared joined: cells (batch, 2 H) for the LSTM's {h', c'}; layers the
  // flattened output, h_n (and c_n) end to end.
  {
    const auto flat = [](const Tensors& rs) {
      Tensors parts;
      for (const Tensor& r : rs) parts.push_back(reshape(r, {-1}));
      return cat(parts, 0);
    };
    const auto rnn_sample = [](std::int64_t gates, bool layer, bool lstm, bool bias) {
      return [=](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t seq = layer ? s.sizes[0] : 1, o = layer ? 1 : 0;
        const std::int64_t b = s.sizes[o], in = s.sizes[o + 1], h = s.sizes[o + 2];
        SampleInput si;
        si.inputs.push_back({"x", layer ? values({seq, b, in}, g, dt) : values({b, in}, g, dt)});
        si.inputs.push_back({"h", values({b, h}, g, dt)});
        if (lstm) si.inputs.push_back({"c", values({b, h}, g, dt)});
        si.inputs.push_back({"w_ih", values({gates * h, in}, g, dt)});
        si.inputs.push_back({"w_hh", values({gates * h, h}, g, dt)});
        if (bias) {
          si.inputs.push_back({"b_ih", values({gates * h}, g, dt)});
          si.inputs.push_back({"b_hh", values({gates * h}, g, dt)});
        }
        return si;
      };
    };
    const Tensor x23 = Tensor::zeros({2, 3}, kFloat64), h24 = Tensor::zeros({2, 4}, kFloat64);
    const Tensor w16x3 = Tensor::zeros({16, 3}, kFloat64), w16x4 = Tensor::zeros({16, 4}, kFloat64);
    const Tensor w12x3 = Tensor::zeros({12, 3}, kFloat64), w12x4 = Tensor::zeros({12, 4}, kFloat64);
    const Tensor x523 = Tensor::zeros({5, 2, 3}, kFloat64);
    for (const bool bias : {true, false}) {
      OpInfo op;
      op.name = bias ? "lstm_cell" : "lstm_cell_nobias";
      op.signature = "lstm_cell(Tensor,Tensors,Tensor,Tensor,Tensor,Tensor)";
      op.torch = std::string(bias ? "h1, c1 = torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)\n"
                                  : "h1, c1 = torch.lstm_cell(x, (h, c), w_ih, w_hh)\n") +
                 "out = torch.cat([h1, c1], -1)";
      op.call = [bias](const Tensors& in) {
        return cat(lstm_cell(in[0], {in[1], in[2]}, in[3], in[4], bias ? in[5] : Tensor(), bias ? in[6] : Tensor()),
                   -1);
      };
      op.sample = rnn_sample(4, false, true, bias);
      op.size_names = {"batch", "in", "hidden"};
      op.small = {3, 4, 5};
      op.threads = {256, 32, 128};
      op.large = {300, 300, 100};
      op.check_undefined = false;  // undefined biases mean none; the other inputs: errors below
      if (bias)
        op.errors = {{"input of the wrong size",
                      [=] {
                        lstm_cell(Tensor::zeros({2, 5}, kFloat64), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'", "(2, 5)", "input_size = 3"}},
                     {"h of the wrong shape",
                      [=] {
                        lstm_cell(x23, {Tensor::zeros({3, 4}, kFloat64), h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[0]'", "(3, 4)", "(2, 4)"}},
                     {"c of the wrong shape",
                      [=] {
                        lstm_cell(x23, {h24, Tensor::zeros({2, 5}, kFloat64)}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[1]'", "(2, 5)", "(2, 4)"}},
                     {"hx not 2 tensors", [=] { lstm_cell(x23, {h24}, w16x3, w16x4); }, {"lstm_cell", "'hx'", "2"}},
                     {"w_hh not (4 H, H)",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, Tensor::zeros({12, 4}, kFloat64));
                      },
                      {"lstm_cell", "'w_hh'", "(12, 4)"}},
                     {"w_ih rows differ",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w12x3, w16x4);
                      },
                      {"lstm_cell", "'w_ih'", "(12, 3)"}},
                     {"bias of the wrong size",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, w16x4, Tensor::zeros({12}, kFloat64));
                      },
                      {"lstm_cell", "'b_ih'", "(12,)", "(16,)"}},
                     {"input 3-d",
                      [=] {
                        lstm_cell(Tensor::zeros({1, 2, 3}, kFloat64), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'", "(1, 2, 3)"}},
                     {"dtype mix",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3.to(kFloat32), w16x4);
                      },
                      {"lstm_cell", "'w_ih'", "float32", "float64"}},
                     {"undefined input",
                      [=] {
                        lstm_cell(Tensor(), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'"}},
                     {"undefined c",
                      [=] {
                        lstm_cell(x23, {h24, Tensor()}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[1]'"}},
                     {"undefined w_hh",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, Tensor());
                      },
                      {"lstm_cell", "'w_hh'"}}};
      t.push_back(op);
    }
    for (const bool bias : {true, false}) {
      OpInfo op;
      op.name = bias ? "gru_cell" : "gru_cell_nobias";
      op.signature = "gru_cell(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor)";
      op.torch = bias ? "out = torch.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh)" : "out = torch.gru_cell(x, h, w_ih, w_hh)";
      op.call = [bias](const Tensors& in) {
        return gru_cell(in[0], in[1], in[2], in[3], bias ? in[4] : Tensor(), bias ? in[5] : Tensor());
      };
      op.sample = rnn_sample(3, false, false, bias);
      op.size_names = {"batch", "in", "hidden"};
      op.small = {3, 4, 5};
      op.threads = {256, 32, 128};
      op.large = {300, 300, 100};
      op.check_undefined = false;
      if (bias)
        op.errors = {
            {"input of the wrong size",
             [=] {
               gru_cell(Tensor::zeros({2, 5}, kFloat64), h24, w12x3, w12x4);
             },
             {"gru_cell", "'input'", "(2, 5)", "input_size = 3"}},
            {"h of the wrong shape",
             [=] {
               gru_cell(x23, Tensor::zeros({2, 3}, kFloat64), w12x3, w12x4);
             },
             {"gru_cell", "'hx'", "(2, 3)", "(2, 4)"}},
            {"unbatched input, batched h",
             [=] { gru_cell(Tensor::zeros({3}, kFloat64), h24, w12x3, w12x4); },
             {"gru_cell", "'hx'", "(2, 4)", "(4,)"}},
            {"LSTM weights", [=] { gru_cell(x23, h24, w16x3, w16x4); }, {"gru_cell", "'w_hh'", "(16, 4)"}},
            {"b_hh of the wrong size",
             [=] { gru_cell(x23, h24, w12x3, w12x4, Tensor(), Tensor::zeros({16}, kFloat64)); },
             {"gru_cell", "'b_hh'", "(16,)", "(12,)"}},
            {"dtype mix", [=] { gru_cell(x23, h24.to(kFloat32), w12x3, w12x4); }, {"gru_cell", "'hx'", "float32"}},
            {"undefined h", [=] { gru_cell(x23, Tensor(), w12x3, w12x4); }, {"gru_cell", "'hx'"}},
            {"undefined w_ih", [=] { gru_cell(x23, h24, Tensor(), w12x4); }, {"gru_cell", "'w_ih'"}}};
      t.push_back(op);
    }
    for (const bool lstm : {true, false})
      for (const bool reverse : {false, true}) {
        OpInfo op;
        op.name = std::string(lstm ? "lstm_layer" : "gru_layer") + (reverse ? "_reverse" : "");
        op.signature = lstm ? "lstm_layer(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,bool)"
                            : "gru_layer(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,bool)";
        op.torch = fmt::format(
            "hh = h\n{}"
            "outs = [None] * x.shape[0]\n"
            "for t in {}:\n"
            "    {}\n"
            "    outs[t] = hh\n"
            "out = torch.cat([torch.stack(outs).flatten() if outs else x.new_zeros(0), hh.flatten(){}])",
            lstm ? "cc = c\n" : "", reverse ? "range(x.shape[0] - 1, -1, -1)" : "range(x.shape[0])",
            lstm ? "hh, cc = torch.lstm_cell(x[t], (hh, cc), w_ih, w_hh, b_ih, b_hh)"
                 : "hh = torch.gru_cell(x[t], hh, w_ih, w_hh, b_ih, b_hh)",
            lstm ? ", cc.flatten()" : "");
        op.call = [lstm, reverse, flat](const Tensors& in) {
          return lstm ? flat(lstm_layer(in[0], in[1], in[2], in[3], in[4], in[5], in[6], reverse))
                      : flat(gru_layer(in[0], in[1], in[2], in[3], in[4], in[5], reverse));
        };
        op.sample = rnn_sample(lstm ? 4 : 3, true, lstm, true);
        op.size_names = {"seq", "batch", "in", "hidden"};
        op.small = {3, 2, 3, 4};
        op.threads = {4, 128, 32, 64};
        op.large = {40, 100, 100, 60};
        op.check_undefined = false;
        if (!reverse)
          op.errors =
              lstm
                  ? std::vector<ErrorCase>{{"input 2-d",
                                            [=] { lstm_layer(x23, h24, h24, w16x3, w16x4); },
                                            {"lstm_layer", "'input'", "(2, 3)", "(seq_len, batch, input_size)"}},
                                           {"input of the wrong size",
                                            [=] {
                                              lstm_layer(Tensor::zeros({5, 2, 4}, kFloat64), h24, h24, w16x3, w16x4);
                                            },
                                            {"lstm_layer", "'input'", "(5, 2, 4)", "input_size = 3"}},
                                           {"h0 of the wrong batch",
                                            [=] {
                                              lstm_layer(x523, Tensor::zeros({3, 4}, kFloat64), h24, w16x3, w16x4);
                                            },
                                            {"lstm_layer", "'h0'", "(3, 4)", "(2, 4)"}},
                                           {"c0 undefined",
                                            [=] { lstm_layer(x523, h24, Tensor(), w16x3, w16x4); },
                                            {"lstm_layer", "'c0'"}},
                                           {"b_hh of the wrong size",
                                            [=] { lstm_layer(x523, h24, h24, w16x3, w16x4, Tensor(), h24); },
                                            {"lstm_layer", "'b_hh'", "(2, 4)"}}}
                  : std::vector<ErrorCase>{
                        {"input of the wrong size",
                         [=] {
                           gru_layer(Tensor::zeros({5, 2, 4}, kFloat64), h24, w12x3, w12x4);
                         },
                         {"gru_layer", "'input'", "(5, 2, 4)", "input_size = 3"}},
                        {"h0 3-d",
                         [=] {
                           gru_layer(x523, Tensor::zeros({1, 2, 4}, kFloat64), w12x3, w12x4);
                         },
                         {"gru_layer", "'h0'", "(1, 2, 4)", "(2, 4)"}},
                        {"undefined input", [=] { gru_layer(Tensor(), h24, w12x3, w12x4); }, {"gru_layer", "'input'"}}};
        t.push_back(op);
      }
  }

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
