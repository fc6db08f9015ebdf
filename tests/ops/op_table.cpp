// The op table (see op_table.hpp): one entry per public op of ops/ (one per meaningful overload or
// variant). Entries are grouped by header, in the header's order; families of similar ops are made
// by small factories (unary, binary, reduction, pointwise loss) so that each op is one line.
#include "op_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"

namespace xgrad::test {

namespace {

using In = ParityBatch::Input;
using Call = std::function<Tensor(const Tensors&)>;

// ---- sample values -----------------------------------------------------------------------------

/// batch + rest.
Shape bshape(const Shape& batch, std::initializer_list<std::int64_t> rest) {
  Shape s = batch;
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

enum class Domain { normal, positive, nonzero, unit, mask };

/// Values for a domain: normal N(0, 1); positive U[0.5, 2); nonzero +-U[0.5, 2); unit U[0, 1);
/// mask 0/1 with probability 1/2 (kinks, poles and branch cuts are kept away from the samples).
Tensor values(const Shape& shape, Generator& gen, Dtype dt, Domain d = Domain::normal) {
  if (d == Domain::normal) return Tensor::randn(shape, gen, kFloat64).to(dt);
  Tensor t = Tensor::rand(shape, gen, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double u = p[i];
    switch (d) {
      case Domain::positive:
        p[i] = 0.5 + 1.5 * u;
        break;
      case Domain::nonzero:
        p[i] = (gen.uniform() < 0.5 ? -1 : 1) * (0.5 + 1.5 * u);
        break;
      case Domain::unit:
        break;
      case Domain::mask:
        p[i] = u < 0.5 ? 0 : 1;
        break;
      case Domain::normal:
        break;
    }
  }
  return t.to(dt);
}

std::vector<std::int64_t> to_index(const Tensor& t) {
  std::vector<std::int64_t> out;
  for (double v : t.to_vector()) out.push_back(static_cast<std::int64_t>(v));
  return out;
}

/// Class indices for `samples` samples of `classes` classes, every 4th one ignore_index (-100); all
/// ignored when there are no classes.
Tensor class_targets(const Shape& shape, std::int64_t classes, Generator& gen) {
  Tensor t = Tensor::zeros(shape, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = (classes == 0 || i % 4 == 3) ? -100.0 : std::min<double>(classes - 1, std::floor(gen.uniform() * classes));
  return t;
}

std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// ---- factories ---------------------------------------------------------------------------------

OpInfo unary(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
             Domain d = Domain::normal) {
  OpInfo op;
  op.name = std::move(name);
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.call = [f](const Tensors& in) { return f(in[0]); };
  op.sample = [d](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]}), g, dt, d)}}, {}, {}};
  };
  op.size_names = {"n"};
  op.small = {5};
  op.threads = {40000};
  op.supports_batch = true;
  op.supports_scalar = true;
  return op;
}

/// a (batch..., n, m) against b (m): broadcasting along the leading axes.
OpInfo binary(std::string name, std::string sig, std::string torch,
              std::function<Tensor(const Tensor&, const Tensor&)> f, Domain da = Domain::normal,
              Domain db = Domain::normal) {
  OpInfo op;
  op.name = name;
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.call = [f](const Tensors& in) { return f(in[0], in[1]); };
  op.sample = [da, db](Dtype dt, const SampleSpec& s, Generator& g) {
    if (s.scalar) return SampleInput{{{"a", values({}, g, dt, da)}, {"b", values({}, g, dt, db)}}, {}, {}};
    return SampleInput{
        {{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt, da)}, {"b", values({s.sizes[1]}, g, dt, db)}},
        {},
        {}};
  };
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  op.supports_batch = true;
  op.supports_scalar = true;
  const std::string opname = name.substr(0, name.find('_'));
  op.errors = {
      {"dtype mix",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat32));
       },
       {opname, "dtype"}},
      {"shapes that do not broadcast",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4}, kFloat64));
       },
       {opname, "(2, 3)", "(4,)"}},
  };
  return op;
}

OpInfo scalar_form(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
                   Domain d = Domain::normal) {
  OpInfo op = unary(std::move(name), std::move(sig), std::move(torch), std::move(f), d);
  return op;
}

/// x (batch..., n, m) reduced over `axes` (empty: all).
OpInfo reduction(std::string name, std::string torch,
                 std::function<Tensor(const Tensor&, const std::vector<std::int64_t>&, bool)> f,
                 std::vector<std::int64_t> axes, bool keepdim, bool refuses_empty) {
  OpInfo op;
  const std::string opname = name.substr(0, name.find('_'));
  op.name = std::move(name);
  op.signature = opname + "(Tensor,vector<int64_t>,bool)";
  op.torch = std::move(torch);
  op.call = [f, axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
  op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
  };
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  op.supports_batch = true;
  op.supports_scalar = axes.empty() || axes == std::vector<std::int64_t>{-1};  // torch: axis -2 of a 0-d is an error
  if (refuses_empty)
    op.refuses = [axes](const SampleSpec& s) -> std::string {
      // max has no identity: an empty reduced axis is refused (an empty kept axis is fine)
      if (s.scalar) return "";
      const bool empty = axes.empty() ? (s.sizes[0] == 0 || s.sizes[1] == 0 || numel_of(s.batch) == 0)
                                      : std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) {
                                          return s.sizes[static_cast<std::size_t>(a + 2)] == 0;
                                        });
      return empty ? "size 0" : "";
    };
  op.errors = {
      {"axis out of range",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), {2}, false);
       },
       {opname, "axis 2", "(2, 3)"}},
      {"axis named twice",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), {1, -1}, false);
       },
       {opname, "twice", "(2, 3)"}},
  };
  return op;
}

/// input and target (batch..., n), both differentiable.
OpInfo pointwise_loss(std::string opname, std::string torch_fn, std::string extra,
                      std::function<Tensor(const Tensor&, const Tensor&, Reduction)> f, Reduction r, std::string sig) {
  const char* rname = r == Reduction::Mean ? "mean" : r == Reduction::Sum ? "sum" : "none";
  OpInfo op;
  op.name = opname + "_" + rname;
  op.signature = std::move(sig);
  op.torch = fmt::format("out = torch.nn.functional.{}(a, t, reduction='{}'{})", torch_fn, rname, extra);
  op.call = [f, r](const Tensors& in) { return f(in[0], in[1], r); };
  op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    const Shape sh = s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]});
    return SampleInput{{{"a", values(sh, g, dt)}, {"t", values(sh, g, dt)}}, {}, {}};
  };
  op.size_names = {"n"};
  op.small = {6};
  op.threads = {40000};
  op.supports_batch = true;
  op.supports_scalar = true;
  if (r == Reduction::Mean)
    op.refuses = [](const SampleSpec& s) -> std::string {
      return !s.scalar && s.sizes[0] * numel_of(s.batch) == 0 ? "mean reduction of an empty input" : "";
    };
  op.errors = {
      {"(N, 1) against (N)",
       [f, r] {
         f(Tensor::zeros({3, 1}, kFloat64), Tensor::zeros({3}, kFloat64), r);
       },
       {opname, "(3, 1)", "(3,)"}},
      {"dtype mix", [f, r] { f(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat32), r); }, {opname, "dtype"}},
  };
  return op;
}

// ---- torch code shared by entries ---------------------------------------------------------------

// The dense (O, I) weight of a block-sparse layer from its packed blocks w and the flat dense
// position idx of every stored element (Note [Block-sparse storage]).
const char* kTorchDenseW =
    "Wd = torch.zeros(O * I, dtype=w.dtype).index_put((idx.long(),), w.reshape(-1)).reshape(O, I)\n";

// resample_conv with the seed's cos^2 response and with a sampled (cubic) response, as dense T.
const char* kTorchCos2 =
    "import math\n"
    "d = coarse[:, :, None] - x[None, None, :]\n"
    "T = torch.where((d >= -w / 2) & (d <= w / 2), torch.cos(math.pi * d / w) ** 2, torch.zeros((), dtype=d.dtype))\n"
    "out = torch.einsum('nab,...nb->...na', T, f)\n";
const char* kTorchSampled =
    "K = v.shape[0]\n"
    "delta = (hi - lo) / (K - 1)\n"
    "d = coarse[:, :, None] - x[None, None, :]\n"
    "u = (d - lo) / delta\n"
    "i = torch.clamp(torch.floor(u.detach()), 0, K - 2).long()\n"
    "s = u - i.to(u.dtype)\n"
    "vx = torch.cat([(2 * v[0] - v[1]).reshape(1), v, (2 * v[-1] - v[-2]).reshape(1)])\n"
    "vm, v0, v1, v2 = vx[i], vx[i + 1], vx[i + 2], vx[i + 3]\n"
    "r = 0.5 * (2 * v0 + (v1 - vm) * s + (2 * vm - 5 * v0 + 4 * v1 - v2) * s ** 2 + (3 * v0 - vm - 3 * v1 + v2) * s ** "
    "3)\n"
    "T = torch.where((d >= lo) & (d <= hi), r, torch.zeros((), dtype=d.dtype))\n"
    "out = torch.einsum('nab,...nb->...na', T, f)\n";

Response cos2(double w) {
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
}

// A (R*bo, C*bi) pattern of 2x3 blocks, each stored with probability 1/2.
BlockSparsePattern random_pattern(std::int64_t R, std::int64_t C, Generator& g) {
  return BlockSparsePattern::from_block_mask(R * 2, C * 3, 2, 3, values({R, C}, g, kFloat32, Domain::mask));
}

// The flat dense position of every stored weight element.
Tensor dense_index(const BlockSparsePattern& p) {
  std::vector<double> idx(static_cast<std::size_t>(p.stored_elements()));
  for (const auto& b : p.blocks())
    for (std::int64_t i = 0; i < b.rows; ++i)
      for (std::int64_t j = 0; j < b.cols; ++j)
        idx[static_cast<std::size_t>(b.offset + i * b.cols + j)] =
            static_cast<double>((b.row + i) * p.in_features() + b.col + j);
  return Tensor::from_vector(idx, {p.stored_elements()}, kFloat64);
}

std::string dims_prelude(const BlockSparsePattern& p) {
  return fmt::format("O = {}\nI = {}\nwshape = {}\n", p.out_features(), p.in_features(),
                     fmt::format("[{}]", fmt::join(p.weight_shape(), ", ")));
}

// ---- the table ----------------------------------------------------------------------------------

std::vector<OpInfo> build() {
  std::vector<OpInfo> t;
  using D = Domain;
  const std::string TT = "Tensor,Tensor";

  // elementwise.hpp: binary ops (a (batch..., n, m) op b (m))
  t.push_back(binary("add", "add(" + TT + ")", "out = a + b", [](auto& a, auto& b) { return add(a, b); }));
  t.push_back(binary("sub", "sub(" + TT + ")", "out = a - b", [](auto& a, auto& b) { return sub(a, b); }));
  t.push_back(binary("mul", "mul(" + TT + ")", "out = a * b", [](auto& a, auto& b) { return mul(a, b); }));
  t.push_back(binary(
      "div", "div(" + TT + ")", "out = a / b", [](auto& a, auto& b) { return div(a, b); }, D::normal, D::nonzero));
  t.push_back(binary(
      "pow", "pow(" + TT + ")", "out = torch.pow(a, b)", [](auto& a, auto& b) { return pow(a, b); }, D::positive));
  t.push_back(binary("maximum", "maximum(" + TT + ")", "out = torch.maximum(a, b)",
                     [](auto& a, auto& b) { return maximum(a, b); }));
  t.push_back(binary("minimum", "minimum(" + TT + ")", "out = torch.minimum(a, b)",
                     [](auto& a, auto& b) { return minimum(a, b); }));
  // scalar forms and s / x
  t.push_back(scalar_form("add_scalar", "add(Tensor,double)", "out = a + 1.5", [](auto& a) { return add(a, 1.5); }));
  t.push_back(scalar_form("sub_scalar", "sub(Tensor,double)", "out = a - 1.5", [](auto& a) { return sub(a, 1.5); }));
  t.push_back(scalar_form("mul_scalar", "mul(Tensor,double)", "out = a * -2.5", [](auto& a) { return mul(a, -2.5); }));
  t.push_back(scalar_form("div_scalar", "div(Tensor,double)", "out = a / 3.0", [](auto& a) { return div(a, 3.0); }));
  t.push_back(scalar_form(
      "rdiv_scalar", "operator/(double,Tensor)", "out = 2.0 / a", [](auto& a) { return 2.0 / a; }, D::nonzero));
  t.back().op = "div";
  t.push_back(scalar_form(
      "pow_scalar", "pow(Tensor,double)", "out = torch.pow(a, 2.5)", [](auto& a) { return pow(a, 2.5); }, D::positive));
  t.push_back(scalar_form("pow_scalar_int", "pow(Tensor,double)", "out = torch.pow(a, 3.0)",
                          [](auto& a) { return pow(a, 3.0); }));
  // unary
  t.push_back(unary("neg", "neg(Tensor)", "out = -a", [](auto& x) { return neg(x); }));
  t.push_back(unary("exp", "exp(Tensor)", "out = torch.exp(a)", [](auto& x) { return exp(x); }));
  t.push_back(unary(
      "log", "log(Tensor)", "out = torch.log(a)", [](auto& x) { return log(x); }, D::positive));
  t.push_back(unary(
      "sqrt", "sqrt(Tensor)", "out = torch.sqrt(a)", [](auto& x) { return sqrt(x); }, D::positive));
  t.push_back(unary("abs", "abs(Tensor)", "out = torch.abs(a)", [](auto& x) { return abs(x); }));
  t.push_back(unary("tanh", "tanh(Tensor)", "out = torch.tanh(a)", [](auto& x) { return tanh(x); }));
  t.push_back(unary("sigmoid", "sigmoid(Tensor)", "out = torch.sigmoid(a)", [](auto& x) { return sigmoid(x); }));
  t.push_back(unary("relu", "relu(Tensor)", "out = torch.relu(a)", [](auto& x) { return relu(x); }));
  {
    OpInfo op = unary("clamp", "clamp(Tensor,double,double)", "out = torch.clamp(a, -0.5, 0.7)",
                      [](auto& x) { return clamp(x, -0.5, 0.7); });
    op.errors = {{"lo > hi",
                  [] {
                    clamp(Tensor::zeros({2, 3}, kFloat64), 1.0, 0.0);
                  },
                  {"clamp", "'lo'", "(2, 3)"}},
                 {"NaN bound", [] { clamp(Tensor::zeros({2}, kFloat64), NAN, 1.0); }, {"clamp", "NaN"}}};
    op.name = "clamp";
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "where";
    op.signature = "where(Tensor,Tensor,Tensor)";
    op.torch = "out = torch.where(c != 0, a, b)";
    op.call = [](const Tensors& in) { return where(in[0], in[1], in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
      return SampleInput{
          {{"c", values(sh, g, dt, D::mask), false}, {"a", values(sh, g, dt)}, {"b", values({s.sizes[1]}, g, dt)}},
          {},
          {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {
        {"cond that does not broadcast",
         [] {
           where(Tensor::zeros({4}, kFloat64), Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
         },
         {"where", "(4,)", "(2, 3)"}},
        {"dtype mix",
         [] { where(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat32)); },
         {"where", "dtype"}}};
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "masked_select";
    op.signature = "masked_select(Tensor,Tensor)";
    op.torch = "out = torch.masked_select(a, m != 0)";
    op.call = [](const Tensors& in) { return masked_select(in[0], in[1]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                          {"m", values({s.sizes[1]}, g, dt, D::mask), false}},
                         {},
                         {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {{"mask broadcasting beyond x",
                  [] {
                    masked_select(Tensor::zeros({3}, kFloat64), Tensor::zeros({2, 3}, kFloat64));
                  },
                  {"masked_select", "(2, 3)", "(3,)"}}};
    t.push_back(op);
  }
  // comparisons: 0/1 in the inputs' dtype, no gradient
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{{"gt", ">", &gt},
                                                                                                   {"lt", "<", &lt},
                                                                                                   {"ge", ">=", &ge},
                                                                                                   {"le", "<=", &le},
                                                                                                   {"eq", "==", &eq},
                                                                                                   {"ne", "!=", &ne}}) {
    // bool results, compared here as 0/1 in the inputs' dtype
    OpInfo op = binary(name, name + "(" + TT + ")", fmt::format("out = (a {} b).to(a.dtype)", py),
                       [fn](auto& a, auto& b) { return fn(a, b).to(a.dtype()); });
    op.differentiable = false;
    op.errors.erase(op.errors.begin());  // a float32/float64 mix is promoted, not refused
    // equal values must occur for eq/ne/ge/le to mean anything: round the samples to halves
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      auto halves = [&](const Shape& sh) {
        Tensor v = values(sh, g, kFloat64);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = std::round(2 * p[i]) / 2;
        return v.to(dt);
      };
      if (s.scalar) return SampleInput{{{"a", halves({})}, {"b", halves({})}}, {}, {}};
      return SampleInput{
          {{"a", halves(bshape(s.batch, {s.sizes[0], s.sizes[1]}))}, {"b", halves({s.sizes[1]})}}, {}, {}};
    };
    t.push_back(op);
  }

  // both operands broadcast: a (batch..., n, 1) op b (m) -> (batch..., n, m); gradients summed on both sides
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"add", "a + b", &add}, {"mul", "a * b", &mul}, {"maximum", "torch.maximum(a, b)", &maximum}}) {
    OpInfo op =
        binary(name + "_outer", name + "(" + TT + ")", "out = " + py, [fn](auto& a, auto& b) { return fn(a, b); });
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{
          {{"a", values(bshape(s.batch, {s.sizes[0], 1}), g, dt)}, {"b", values({s.sizes[1]}, g, dt)}}, {}, {}};
    };
    op.supports_scalar = false;
    t.push_back(op);
  }

  // reduction.hpp
  for (auto [opname, fn] :
       std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool)>>{
           {"sum", &sum}, {"mean", &mean}, {"max", &max}, {"logsumexp", &logsumexp}}) {
    const bool refuses = opname == "max";
    const std::string all_dims = "tuple(range(a.dim()))";
    const std::string tfn = opname == "max" ? "torch.amax" : "torch." + opname;
    t.push_back(reduction(opname + "_all", fmt::format("out = {}(a, {})", tfn, all_dims), fn, {}, false, refuses));
    t.push_back(reduction(opname + "_last", fmt::format("out = {}(a, -1)", tfn), fn, {-1}, false, refuses));
    t.push_back(reduction(opname + "_rows_keepdim", fmt::format("out = {}(a, -2, keepdim=True)", tfn), fn, {-2}, true,
                          refuses));
  }
  // torch.sum/mean(a, ()) reduce everything in 1.13 as well, but spell it out for clarity
  for (auto& op : t)
    if (op.name == "sum_all")
      op.torch = "out = a.sum()";
    else if (op.name == "mean_all")
      op.torch = "out = a.mean()";

  // softmax.hpp
  for (auto [opname, fn] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, std::int64_t)>>{
           {"softmax", &softmax}, {"log_softmax", &log_softmax}}) {
    for (std::int64_t axis : {-1, 0}) {
      OpInfo op;
      op.name = opname + (axis == -1 ? "_last" : "_first");
      op.signature = opname + "(Tensor,int64_t)";
      op.torch = fmt::format("out = torch.{}(a, {})", opname, axis);
      op.call = [fn, axis](const Tensors& in) { return fn(in[0], axis); };
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{
            {{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "m"};
      op.small = {3, 4};
      op.threads = {200, 200};
      op.supports_batch = axis == -1;
      op.supports_scalar = true;  // one row of length 1, axis 0 or -1
      op.errors = {{"axis out of range",
                    [fn] {
                      fn(Tensor::zeros({2, 3}, kFloat64), 2);
                    },
                    {opname, "axis 2", "(2, 3)"}}};
      t.push_back(op);
    }
  }

  // reductions over non-adjacent axes {0, 2} of (n, m, k), and softmax along the middle axis (strided rows)
  for (auto [opname, fn] :
       std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool)>>{
           {"sum", &sum}, {"mean", &mean}, {"max", &max}, {"logsumexp", &logsumexp}}) {
    OpInfo op = reduction(opname + "_outer_axes", "", fn, {0, 2}, false, false);
    op.torch = fmt::format("out = {}(a, (0, 2))", opname == "max" ? "torch.amax" : "torch." + opname);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.supports_batch = false;
    op.supports_scalar = false;
    if (opname == "max")
      op.refuses = [](const SampleSpec& s) -> std::string {
        return s.sizes[0] == 0 || s.sizes[2] == 0 ? "size 0" : "";
      };
    t.push_back(op);
  }
  for (auto [opname, fn] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, std::int64_t)>>{
           {"softmax", &softmax}, {"log_softmax", &log_softmax}}) {
    OpInfo op;
    op.name = opname + "_middle";
    op.signature = opname + "(Tensor,int64_t)";
    op.torch = fmt::format("out = torch.{}(a, 1)", opname);
    op.call = [fn](const Tensors& in) { return fn(in[0], 1); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    t.push_back(op);
  }

  // loss.hpp: pointwise losses x reductions
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    t.push_back(pointwise_loss(
        "mse_loss", "mse_loss", "", [](auto& a, auto& b, Reduction rr) { return mse_loss(a, b, rr); }, r,
        "mse_loss(Tensor,Tensor,Reduction)"));
    t.push_back(pointwise_loss(
        "l1_loss", "l1_loss", "", [](auto& a, auto& b, Reduction rr) { return l1_loss(a, b, rr); }, r,
        "l1_loss(Tensor,Tensor,Reduction)"));
    OpInfo hub = pointwise_loss(
        "huber_loss", "huber_loss", ", delta=0.7",
        [](auto& a, auto& b, Reduction rr) { return huber_loss(a, b, rr, 0.7); }, r,
        "huber_loss(Tensor,Tensor,Reduction,double)");
    hub.errors.push_back(
        {"delta = 0",
         [] { huber_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, 0.0); },
         {"huber_loss", "'delta'"}});
    t.push_back(hub);
    OpInfo sl1 = pointwise_loss(
        "smooth_l1_loss", "smooth_l1_loss", ", beta=0.7",
        [](auto& a, auto& b, Reduction rr) { return smooth_l1_loss(a, b, rr, 0.7); }, r,
        "smooth_l1_loss(Tensor,Tensor,Reduction,double)");
    sl1.errors.push_back(
        {"beta < 0",
         [] { smooth_l1_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, -1.0); },
         {"smooth_l1_loss", "'beta'"}});
    t.push_back(sl1);
  }
  // class-index losses: scores (N, C) with a std::vector target, (N, C, d) with a Tensor target
  for (const std::string opname : {"cross_entropy", "nll_loss"}) {
    const bool ce = opname == "cross_entropy";
    {
      OpInfo op;
      op.name = opname + "_vector_mean";
      op.signature = ce ? "cross_entropy(Tensor,vector<int64_t>,Reduction,double,int64_t)"
                        : "nll_loss(Tensor,vector<int64_t>,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='mean')", opname);
      op.call = [ce](const Tensors& in) {
        return ce ? cross_entropy(in[0], to_index(in[1])) : nll_loss(in[0], to_index(in[1]));
      };
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{
            {{"z", values({s.sizes[0], s.sizes[1]}, g, dt)}, {"y", class_targets({s.sizes[0]}, s.sizes[1], g), false}},
            {},
            {}};
      };
      op.size_names = {"N", "C"};
      op.small = {5, 4};
      op.threads = {400, 100};
      op.check_undefined = false;  // the target is a std::vector here; the scores are checked by the Tensor form
      op.int64_inputs = {"y"};     // converted to the vector by the call
      op.refuses = [](const SampleSpec& s) -> std::string {
        // Mean over no counted sample: none at all, or all ignored (no class to aim at, C = 0)
        return (s.sizes[0] == 0 || s.sizes[1] == 0) ? "mean reduction over no samples" : "";
      };
      op.errors = {
          {"target length != N",
           [ce] {
             const Tensor z = Tensor::zeros({3, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 1}) : nll_loss(z, std::vector<std::int64_t>{0, 1});
           },
           {opname, "(3, 4)"}},
          {"class index out of range",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 4}) : nll_loss(z, std::vector<std::int64_t>{0, 4});
           },
           {opname, "4"}},
          {"0-d scores",
           [ce] {
             const Tensor z = Tensor::scalar(1.0, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0}) : nll_loss(z, std::vector<std::int64_t>{0});
           },
           {opname, "()"}},
      };
      if (ce)
        op.errors.push_back(
            {"label_smoothing > 1",
             [] {
               cross_entropy(Tensor::zeros({2, 3}, kFloat64), std::vector<std::int64_t>{0, 1}, Reduction::Mean, 1.5);
             },
             {"cross_entropy", "'label_smoothing'"}});
      t.push_back(op);
    }
    {
      OpInfo op;
      op.name = opname + "_tensor_sum_spatial";
      op.signature =
          ce ? "cross_entropy(Tensor,Tensor,Reduction,double,int64_t)" : "nll_loss(Tensor,Tensor,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='sum'{})", opname,
                             ce ? ", label_smoothing=0.1" : "");
      // The sample's targets are float for the parity batch; ours takes them as int64.
      op.call = [ce](const Tensors& in) {
        const Tensor y = in[1].defined() ? in[1].to(kInt64) : in[1];
        return ce ? cross_entropy(in[0], y, Reduction::Sum, 0.1) : nll_loss(in[0], y, Reduction::Sum);
      };
      op.int64_inputs = {"y"};
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"z", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)},
                            {"y", class_targets({s.sizes[0], s.sizes[2]}, s.sizes[1], g).to(dt), false}},
                           {},
                           {}};
      };
      op.size_names = {"N", "C", "d"};
      op.torch_skip = [](const SampleSpec& s) -> std::string {
        // torch 1.13 views (N, 0, d) scores as (N, 0, 0, 0): "size mismatch"; ours gives 0 as for (N, 0)
        return s.sizes[1] == 0 ? "torch fails on C = 0 with spatial dimensions" : "";
      };
      op.small = {3, 4, 2};
      op.threads = {20, 100, 20};
      op.errors = {
          {"target of the wrong shape",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4, 3}, kFloat64), y = Tensor::zeros({2, 2}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "(2, 2)", "(2, 4, 3)"}},
          {"float target",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64), y = Tensor::of({0.0, 1.0}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "'target'", "float64", "target.to(xgrad::kInt64)"}},
          {"target requiring grad",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             Tensor y = Tensor::of({0.0, 1.0}, kFloat64);
             y.set_requires_grad();
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "target"}},
      };
      t.push_back(op);
    }
  }
  {
    for (bool pw : {false, true}) {
      OpInfo op;
      op.name = pw ? "bce_with_logits_pos_weight_sum" : "bce_with_logits_mean";
      op.signature = "binary_cross_entropy_with_logits(Tensor,Tensor,Reduction,Tensor)";
      op.torch = pw ? "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='sum', pos_weight=w)"
                    : "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='mean')";
      op.call = [pw](const Tensors& in) {
        return pw ? binary_cross_entropy_with_logits(in[0], in[1], Reduction::Sum, in[2])
                  : binary_cross_entropy_with_logits(in[0], in[1]);
      };
      op.sample = [pw](Dtype dt, const SampleSpec& s, Generator& g) {
        const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
        SampleInput si{{{"a", values(sh, g, dt)}, {"t", values(sh, g, dt, D::unit)}}, {}, {}};
        // torch 1.13 does not differentiate pos_weight; its gradient is gradchecked in test_loss.cpp
        if (pw) si.inputs.push_back({"w", values({s.sizes[1]}, g, dt, D::positive), false});
        return si;
      };
      op.size_names = {"n", "c"};
      op.small = {3, 4};
      op.threads = {200, 200};
      op.supports_batch = true;
      op.check_undefined = !pw;  // an undefined pos_weight means "none"
      if (!pw)
        op.refuses = [](const SampleSpec& s) -> std::string {
          return s.sizes[0] * s.sizes[1] * numel_of(s.batch) == 0 ? "mean reduction of an empty input" : "";
        };
      op.errors = {{"shape mismatch",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({3, 1}, kFloat64), Tensor::zeros({3}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "(3, 1)", "(3,)"}},
                   {"pos_weight not a suffix",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({2, 3}, kFloat64),
                                                       Reduction::Mean, Tensor::ones({2}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "'pos_weight'", "(2,)"}}};
      t.push_back(op);
    }
  }

  // matmul.hpp
  {
    auto mm = [](std::string name, std::vector<std::string> sizes, bool batch,
                 std::function<std::pair<Shape, Shape>(const SampleSpec&)> shapes) {
      OpInfo op;
      op.name = std::move(name);
      op.signature = "matmul(Tensor,Tensor)";
      op.torch = "out = torch.matmul(a, b)";
      op.call = [](const Tensors& in) { return matmul(in[0], in[1]); };
      op.sample = [shapes](Dtype dt, const SampleSpec& s, Generator& g) {
        const auto [sa, sb] = shapes(s);
        return SampleInput{{{"a", values(sa, g, dt)}, {"b", values(sb, g, dt)}}, {}, {}};
      };
      op.size_names = std::move(sizes);
      op.supports_batch = batch;
      return op;
    };
    OpInfo op = mm("matmul_mm", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), Shape{s.sizes[1], s.sizes[2]}};
    });
    op.small = {3, 4, 5};
    op.threads = {256, 256, 256};
    op.errors = {
        {"inner sizes differ",
         [] {
           matmul(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 5}, kFloat64));
         },
         {"matmul", "(2, 3)", "(4, 5)"}},
        {"0-d operand", [] { matmul(Tensor::scalar(1, kFloat64), Tensor::zeros({1}, kFloat64)); }, {"matmul", "()"}},
        {"dtype mix",
         [] {
           matmul(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3, 2}, kFloat32));
         },
         {"matmul", "dtype"}},
        {"batch dims that do not broadcast",
         [] {
           matmul(Tensor::zeros({2, 2, 3}, kFloat64), Tensor::zeros({3, 3, 4}, kFloat64));
         },
         {"matmul", "(2, 2, 3)", "(3, 3, 4)"}}};
    t.push_back(op);
    op = mm("matmul_broadcast_a", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0], s.sizes[1]}, bshape(s.batch, {s.sizes[1], s.sizes[2]})};
    });
    op.small = {3, 4, 5};
    op.threads = {128, 64, 128};
    op.threads_batch = {4};
    t.push_back(op);
    op = mm("matmul_bmm", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), bshape(s.batch, {s.sizes[1], s.sizes[2]})};
    });
    op.small = {3, 4, 5};
    op.threads = {128, 64, 128};
    op.threads_batch = {4};
    t.push_back(op);
    op = mm("matmul_dot", {"k"}, false, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0]}, Shape{s.sizes[0]}};
    });
    op.small = {6};
    op.threads = {70000};
    t.push_back(op);
    op = mm("matmul_mv", {"n", "k"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), Shape{s.sizes[1]}};
    });
    op.small = {3, 4};
    op.threads = {300, 300};
    t.push_back(op);
    op = mm("matmul_vm", {"k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0]}, bshape(s.batch, {s.sizes[0], s.sizes[1]})};
    });
    op.small = {4, 3};
    op.threads = {300, 300};
    t.push_back(op);
  }

  // linear.hpp: y = x W^T + b, with and without bias, any leading batch dims.
  for (const bool with_bias : {true, false}) {
    OpInfo op;
    op.name = with_bias ? "linear" : "linear_nobias";
    op.signature = "linear(Tensor,Tensor,Tensor)";
    op.torch = with_bias ? "out = torch.nn.functional.linear(x, w, b)" : "out = torch.nn.functional.linear(x, w)";
    op.call = [with_bias](const Tensors& in) { return linear(in[0], in[1], with_bias ? in[2] : Tensor()); };
    op.sample = [with_bias](Dtype dt, const SampleSpec& s, Generator& g) {
      SampleInput si{{{"x", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                      {"w", values({s.sizes[2], s.sizes[1]}, g, dt)}},
                     {},
                     {}};
      if (with_bias) si.inputs.push_back({"b", values({s.sizes[2]}, g, dt)});
      return si;
    };
    op.size_names = {"rows", "in", "out"};
    op.small = {3, 4, 5};
    op.threads = {256, 256, 256};
    op.supports_batch = true;
    op.check_undefined = false;  // an undefined bias means no bias; undefined x or weight: errors below
    if (with_bias)
      op.errors = {
          {"x's last dim differs from in",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 5}, kFloat64));
           },
           {"linear", "(2, 3)", "in_features = 5"}},
          {"weight not 2-d",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
           },
           {"linear", "'weight'", "(3,)"}},
          {"bias of the wrong size",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
           },
           {"linear", "'bias'", "(3,)"}},
          {"dtype mix",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat32), Tensor::zeros({4, 3}, kFloat64));
           },
           {"linear", "float32", "float64"}},
          {"undefined x",
           [] {
             linear(Tensor(), Tensor::zeros({4, 3}, kFloat64));
           },
           {"linear", "'x'"}},
          {"undefined weight",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor());
           },
           {"linear", "'weight'"}}};
    t.push_back(op);
  }

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
      // repeats (gradients add up), a negative index, and an empty list when n = 0
      std::vector<std::int64_t> idx;
      if (n > 0) idx = {n - 1, 0, n - 1, n / 2, -1};
      std::vector<std::int64_t> pos;
      for (auto i : idx) pos.push_back(i < 0 ? i + n : i);
      SampleInput si{{{"a", values(bshape(s.batch, {n, s.sizes[1]}), g, dt)}}, {}, {}};
      si.call = [idx](const Tensors& in) { return index_select(in[0], -2, idx); };
      si.torch_prelude = fmt::format("idx = [{}]\n", fmt::join(pos, ", "));
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

  // block_sparse_linear.hpp: x (batch..., M, C*3) through a random pattern of 2x3 blocks (R x C grid)
  // 0: with bias, 1: no bias, 2: block-diagonal groups, 3: no stored block at all
  for (int variant : {0, 1, 2, 3}) {
    OpInfo op;
    op.name = variant == 0   ? "block_sparse_linear"
              : variant == 1 ? "block_sparse_linear_nobias"
              : variant == 2 ? "block_sparse_linear_diagonal"
                             : "block_sparse_linear_noblocks";
    op.signature = "block_sparse_linear(Tensor,Tensor,Tensor,BlockSparsePattern)";
    op.torch = std::string(kTorchDenseW) + (variant == 1 ? "out = torch.nn.functional.linear(x, Wd)"
                                                         : "out = torch.nn.functional.linear(x, Wd, b)");
    op.sample = [variant](Dtype dt, const SampleSpec& s, Generator& g) {
      BlockSparsePattern p =
          variant == 2 ? [&] {
            std::vector<BlockSparsePattern::DiagonalGroup> groups;
            for (std::int64_t i = 0; i < s.sizes[1]; ++i) groups.push_back({1 + i % 3, 1 + (2 * i) % 5});
            return BlockSparsePattern::block_diagonal(groups);
          }()
          : variant == 3 ? BlockSparsePattern::from_block_mask(s.sizes[1] * 2, s.sizes[2] * 3, 2, 3,
                                                               Tensor::zeros({s.sizes[1], s.sizes[2]}))
                       : random_pattern(s.sizes[1], s.sizes[2], g);
      SampleInput si{{{"x", values(bshape(s.batch, {s.sizes[0], p.in_features()}), g, dt)},
                      {"w", values(p.weight_shape(), g, dt)}},
                     {},
                     dims_prelude(p)};
      if (variant != 1) si.inputs.push_back({"b", values({p.out_features()}, g, dt)});
      si.inputs.push_back({"idx", dense_index(p), false});
      si.call = [p, variant](const Tensors& in) {
        return block_sparse_linear(in[0], in[1], variant == 1 ? Tensor() : in[2], p);
      };
      return si;
    };
    op.size_names = variant == 2 ? std::vector<std::string>{"M", "groups"} : std::vector<std::string>{"M", "R", "C"};
    op.small = variant == 2 ? std::vector<std::int64_t>{3, 4} : std::vector<std::int64_t>{3, 4, 3};
    op.threads = variant == 2 ? std::vector<std::int64_t>{400, 40} : std::vector<std::int64_t>{300, 40, 40};
    op.supports_batch = true;
    op.check_undefined = false;  // idx is a helper input for torch only; undefined x/weight: errors below
    if (variant == 0) {
      op.errors = {
          {"x of the wrong width",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 5}), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'", "(5, 5)"}},
          {"weight of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}), Tensor::zeros({3, 2, 3}), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'weight'", "(3, 2, 3)"}},
          {"dtype mix",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}, kFloat64), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}),
                                 p);
           },
           {"block_sparse_linear", "dtype"}},
          {"undefined x",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor(), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'"}},
          {"bias of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}), Tensor::zeros(p.weight_shape()), Tensor::zeros({5}), p);
           },
           {"block_sparse_linear", "'bias'", "(5,)"}}};
    }
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
  for (bool to_dense : {true, false}) {
    OpInfo op;
    op.name = to_dense ? "block_sparse_to_dense" : "block_sparse_from_dense";
    op.signature = to_dense ? "block_sparse_to_dense(Tensor,BlockSparsePattern)"
                            : "block_sparse_from_dense(Tensor,BlockSparsePattern)";
    op.torch = to_dense ? std::string(kTorchDenseW) + "out = Wd" : "out = d.reshape(-1)[idx.long()].reshape(wshape)";
    op.differentiable = false;  // no autograd history (documented)
    op.sample = [to_dense](Dtype dt, const SampleSpec& s, Generator& g) {
      const BlockSparsePattern p = random_pattern(s.sizes[0], s.sizes[1], g);
      SampleInput si{{}, {}, dims_prelude(p)};
      if (to_dense)
        si.inputs.push_back({"w", values(p.weight_shape(), g, dt), false});
      else
        si.inputs.push_back({"d", values({p.out_features(), p.in_features()}, g, dt), false});
      si.inputs.push_back({"idx", dense_index(p), false});
      si.call = [p, to_dense](const Tensors& in) {
        return to_dense ? block_sparse_to_dense(in[0], p) : block_sparse_from_dense(in[0], p);
      };
      return si;
    };
    op.size_names = {"R", "C"};
    op.small = {3, 4};
    op.threads = {150, 150};
    op.check_undefined = false;
    const std::string opname = op.name;
    op.errors = {{"argument of the wrong shape",
                  [to_dense] {
                    const auto p = BlockSparsePattern::from_block_mask(4, 6, 2, 3, Tensor::ones({2, 2}));
                    to_dense ? block_sparse_to_dense(Tensor::zeros({3, 2, 3}), p)
                             : block_sparse_from_dense(Tensor::zeros({4, 5}), p);
                  },
                  {opname, to_dense ? "(3, 2, 3)" : "(4, 5)"}}};
    t.push_back(op);
  }

  // resample_conv.hpp: f (batch..., N, B), coarse (N, A)
  for (bool sampled : {false, true}) {
    OpInfo op;
    op.name = sampled ? "resample_conv_sampled_points" : "resample_conv_cos2_uniform";
    op.signature = "resample_conv(Tensor,Tensor,FineGrid,Response,ResampleConvOptions)";
    op.torch = sampled ? std::string("lo = -0.12\nhi = 0.2\n") + kTorchSampled : std::string("w = 0.3\n") + kTorchCos2;
    op.sample = [sampled](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t N = s.sizes[0], A = s.sizes[1], B = s.sizes[2];
      FineGrid grid;
      if (sampled) {  // sorted random points on [0, 1]
        std::vector<double> x(static_cast<std::size_t>(B));
        for (auto& v : x) v = g.uniform();
        std::sort(x.begin(), x.end());
        grid = FineGrid::points(Tensor::from_vector(x, {B}, kFloat64));
      } else {
        grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(std::max<std::int64_t>(B - 1, 1)), B);
      }
      Tensor coarse = values({N, A}, g, kFloat64, D::unit);
      coarse = (coarse * 1.2 - 0.1).detach();  // [-0.1, 1.1): supports reaching past both ends
      SampleInput si{{{"f", values(bshape(s.batch, {N, B}), g, dt)}, {"coarse", coarse.to(dt)}}, {}, {}};
      if (sampled) si.inputs.push_back({"v", values({6}, g, dt)});
      si.inputs.push_back({"x", grid.to_tensor(dt), false});
      si.call = [grid, sampled](const Tensors& in) {
        return resample_conv(in[0], in[1], grid, sampled ? Response::sampled(in[2], -0.12, 0.2) : cos2(0.3));
      };
      return si;
    };
    op.size_names = {"N", "A", "B"};
    op.small = {3, 5, 30};
    op.threads = {64, 600, 600};
    op.large = {300, 300, 3000};
    op.supports_batch = true;
    op.check_undefined = false;  // x (the grid's points) is for torch only; undefined f: errors below
    op.rtol32 = 1e-3;
    op.atol32 = 1e-4;
    if (!sampled)
      op.errors = {
          {"f and coarse with different N",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({4, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 10)", "(4, 2)"}},
          {"f of the wrong width",
           [] {
             resample_conv(Tensor::zeros({3, 9}, kFloat64), Tensor::zeros({3, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 9)"}},
          {"dtype mix",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({3, 2}, kFloat32),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "dtype"}},
          {"undefined f",
           [] {
             resample_conv(Tensor(), Tensor::zeros({3, 2}, kFloat64), FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "'f'"}}};
    t.push_back(op);
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
                        {"index below -n", [z23] { index_select(z23, 0, {-3}); }, {"index_select", "-3", "(2, 3)"}}});
  more("slice_step", {{"axis of a 0-d tensor", [s0] { slice(s0, 0, 0, 1); }, {"slice", "()"}},
                      {"negative step", [z23] { slice(z23, 0, 0, 2, -1); }, {"slice", "step", "(2, 3)"}}});
  more("softmax_last", {{"axis 1 of a 0-d tensor", [s0] { softmax(s0, 1); }, {"softmax", "axis 1", "()"}}});
  more("sum_all", {{"axis -3 of a 2-d tensor", [z23] { sum(z23, {-3}); }, {"sum", "-3", "(2, 3)"}},
                   {"axis 1 of a 0-d tensor", [s0] { sum(s0, {1}); }, {"sum", "axis 1", "()"}}});
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
    op.call = [](const Tensors& in) { return masked_fill(in[0], in[1], 0.5); };
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
                  {"masked_fill", "(2, 3)", "(3,)"}}};
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
    op.errors.erase(op.errors.begin());  // any dtypes
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
                                                          {"block_sparse_linear", "idx"},
                                                          {"block_sparse_linear_nobias", "idx"},
                                                          {"block_sparse_linear_diagonal", "idx"},
                                                          {"block_sparse_linear_noblocks", "idx"},
                                                          {"block_sparse_to_dense", "idx"},
                                                          {"block_sparse_from_dense", "idx"},
                                                          {"resample_conv_sampled_points", "x"},
                                                          {"resample_conv_cos2_uniform", "x"}})
      if (op.name == n) op.int64_inputs.push_back(input);
  return t;
}

}  // namespace

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = build();
  return table;
}

// ---- the completeness check's parser --------------------------------------------------------------

namespace {
std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "const std::vector<std::int64_t>& axes = {}" -> "vector<int64_t>"
std::string param_type(std::string p) {
  // drop the default value (a top-level '=')
  int depth = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '<' || p[i] == '(' || p[i] == '{') ++depth;
    if (p[i] == '>' || p[i] == ')' || p[i] == '}') --depth;
    if (p[i] == '=' && depth == 0) {
      p = p.substr(0, i);
      break;
    }
  }
  p = std::regex_replace(p, std::regex("std::"), "");
  p = std::regex_replace(p, std::regex("\\bconst\\b"), "");
  p = std::regex_replace(p, std::regex("[&*]"), " ");
  p = trim(p);
  // drop the parameter name: the last identifier, when something precedes it
  const std::regex name_re("^(.*[^A-Za-z0-9_:])\\s*[A-Za-z_][A-Za-z0-9_]*$");
  std::smatch m;
  if (std::regex_match(p, m, name_re)) p = trim(m[1].str());
  return std::regex_replace(p, std::regex("\\s+"), "");
}
}  // namespace

std::vector<std::string> public_op_signatures(const std::string& ops_dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ops_dir))
    if (e.path().extension() == ".hpp") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  const std::regex decl_re("^(Tensor|Tensors) (operator\\S+|[A-Za-z_][A-Za-z0-9_]*)\\(");
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) lines.push_back(line);
    int detail_depth = 0;  // > 0 inside namespace detail
    int brace = 0;         // braces opened inside namespace detail
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      if (detail_depth == 0 && std::regex_search(l, std::regex("^namespace (\\w+::)*detail(::\\w+)* \\{"))) {
        detail_depth = 1;
        brace = 1;
        continue;
      }
      if (detail_depth > 0) {
        for (char c : l) brace += c == '{' ? 1 : c == '}' ? -1 : 0;
        if (brace <= 0) detail_depth = 0;
        continue;
      }
      std::smatch m;
      if (!std::regex_search(l, m, decl_re)) continue;  // class members are indented; inline aliases skipped
      // gather the parameter list up to the matching ')'
      std::string text = l.substr(static_cast<std::size_t>(m.position(0) + m.length(0)));
      std::size_t j = i;
      int depth = 1;
      std::string params;
      for (;;) {
        for (char c : text) {
          if (c == '(') ++depth;
          if (c == ')' && --depth == 0) break;
          params += c;
        }
        if (depth == 0 || ++j >= lines.size()) break;
        text = " " + lines[j];
      }
      std::vector<std::string> types;
      int d = 0;
      std::string cur;
      for (char c : params) {
        if (c == '<' || c == '(' || c == '{') ++d;
        if (c == '>' || c == ')' || c == '}') --d;
        if (c == ',' && d == 0) {
          types.push_back(param_type(cur));
          cur.clear();
        } else {
          cur += c;
        }
      }
      if (!trim(cur).empty()) types.push_back(param_type(cur));
      out.push_back(fmt::format("{}({})", m[2].str(), fmt::join(types, ",")));
    }
  }
  return out;
}

}  // namespace xgrad::test
