// Shared by the op table's files (op_table.cpp builds the table from the add_*_entries functions
// defined in op_table_*.cpp, one file per group of headers, so that no file takes long to compile):
// sample-value helpers, the factories of op families (unary, binary, reduction, pointwise loss) and
// the torch code several groups use. Internal to the test suite.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "dense_index.hpp"
#include "op_table.hpp"
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

using In = ParityBatch::Input;
using Call = std::function<Tensor(const Tensors&)>;

// ---- sample values -----------------------------------------------------------------------------

/// batch + rest.
inline Shape bshape(const Shape& batch, std::initializer_list<std::int64_t> rest) {
  Shape s = batch;
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

enum class Domain { normal, positive, nonzero, unit, mask };

/// Values for a domain: normal N(0, 1); positive U[0.5, 2); nonzero +-U[0.5, 2); unit U[0, 1);
/// mask 0/1 with probability 1/2 (kinks, poles and branch cuts are kept away from the samples).
inline Tensor values(const Shape& shape, Generator& gen, Dtype dt, Domain d = Domain::normal) {
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

inline std::vector<std::int64_t> to_index(const Tensor& t) {
  std::vector<std::int64_t> out;
  for (double v : t.to_vector()) out.push_back(static_cast<std::int64_t>(v));
  return out;
}

/// Class indices for `samples` samples of `classes` classes, every 4th one ignore_index (-100); all
/// ignored when there are no classes.
inline Tensor class_targets(const Shape& shape, std::int64_t classes, Generator& gen) {
  Tensor t = Tensor::zeros(shape, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = (classes == 0 || i % 4 == 3) ? -100.0 : std::min<double>(classes - 1, std::floor(gen.uniform() * classes));
  return t;
}

inline std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// ---- factories ---------------------------------------------------------------------------------

inline OpInfo unary(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
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
inline OpInfo binary(std::string name, std::string sig, std::string torch,
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
      {"shapes that do not broadcast",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4}, kFloat64));
       },
       {opname, "(2, 3)", "(4,)"}},
  };
  // add, sub, mul, div, pow, maximum and minimum promote float32 with float64 (tests/ops/test_elementwise.cpp); the
  // other binary ops refuse the mix.
  static const std::set<std::string> promoting = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  if (promoting.count(opname) == 0)
    op.errors.insert(op.errors.begin(), {"dtype mix",
                                         [f] {
                                           f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat32));
                                         },
                                         {opname, "dtype"}});
  return op;
}

inline OpInfo scalar_form(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
                          Domain d = Domain::normal) {
  OpInfo op = unary(std::move(name), std::move(sig), std::move(torch), std::move(f), d);
  return op;
}

/// x (batch..., n, m) reduced over `axes` (empty: all).
inline OpInfo reduction(std::string name, std::string torch,
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
inline OpInfo pointwise_loss(std::string opname, std::string torch_fn, std::string extra,
                             std::function<Tensor(const Tensor&, const Tensor&, Reduction)> f, Reduction r,
                             std::string sig) {
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
inline const char* kTorchDenseW =
    "Wd = torch.zeros(O * I, dtype=w.dtype).index_put((idx.long(),), w.reshape(-1)).reshape(O, I)\n";

// resample_conv with the seed's cos^2 response and with a sampled (cubic) response, as dense T.
inline const char* kTorchCos2 =
    "import math\n"
    "d = coarse[:, :, None] - x[None, None, :]\n"
    "T = torch.where((d >= -w / 2) & (d <= w / 2), torch.cos(math.pi * d / w) ** 2, torch.zeros((), dtype=d.dtype))\n"
    "out = torch.einsum('nab,...nb->...na', T, f)\n";
inline const char* kTorchSampled =
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

inline Response cos2(double w) {  // with r' and r'' (second derivatives in the coarse points: create_graph)
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); }, {},
                            [w](double d) { return -2 * M_PI * M_PI / (w * w) * std::cos(2 * M_PI * d / w); });
}

// A (R*bo, C*bi) pattern of 2x3 blocks, each stored with probability 1/2.
inline BlockSparsePattern random_pattern(std::int64_t R, std::int64_t C, Generator& g) {
  return BlockSparsePattern::from_block_mask(InFeatures{C * 3}, OutFeatures{R * 2}, {InFeatures{3}, OutFeatures{2}},
                                             values({R, C}, g, kFloat32, Domain::mask));
}

inline std::string dims_prelude(const BlockSparsePattern& p) {
  return fmt::format("O = {}\nI = {}\nwshape = {}\n", p.out_features(), p.in_features(),
                     fmt::format("[{}]", fmt::join(p.weight_shape(), ", ")));
}

// ---- copy-type shape ops (split ... pad) and reductions (min ... cumsum) -------------------------

/// a (batch..., n, m): the sample of most entries below.
inline SampleInput nm_sample(Dtype dt, const SampleSpec& s, Generator& g) {
  return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
}

/// Joins split pieces i != 1 scaled by i + 1 (so each piece's gradient is told apart, and an unused
/// piece gets the engine's zeros).
inline Tensor join_pieces(const Tensors& ps, std::int64_t dim) {
  Tensors kept;
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (i != 1) kept.push_back(mul(ps[i], static_cast<double>(i + 1)));
  return concat(kept, dim);
}
inline std::string torch_join(int dim) {
  return fmt::format("out = torch.cat([p * (i + 1) for i, p in enumerate(ps) if i != 1], {})", dim);
}

/// Values with exact zeros: every 5th element, and two in row 1 when it has 2 or more elements (prod's
/// gradient with one zero and with two).
inline Tensor with_zeros(const Shape& shape, Generator& g, Dtype dt) {
  Tensor v = values(shape, g, kFloat64);
  double* p = v.data<double>();
  for (std::int64_t i = 0; i < v.numel(); i += 5) p[i] = 0;
  if (shape.size() >= 2 && shape[shape.size() - 2] > 1 && shape.back() >= 2) {
    p[shape.back()] = 0;
    p[shape.back() + 1] = 0;
  }
  return v.to(dt);
}

// One group of entries each (op_table_*.cpp), appended to t in the table's order (op_table.cpp).
void add_shape_reduction_entries(std::vector<OpInfo>& t);                      // op_table_shape_reduction_index.cpp
void add_index_entries(std::vector<OpInfo>& t);                                // op_table_shape_reduction_index.cpp
void add_elementwise_entries(std::vector<OpInfo>& t);                          // op_table_elementwise.cpp
void add_unary_math_activation_entries(std::vector<OpInfo>& t);                // op_table_elementwise.cpp
void add_reduction_softmax_loss_entries(std::vector<OpInfo>& t);               // op_table_reduction_linear.cpp
void add_matmul_linear_entries(std::vector<OpInfo>& t);                        // op_table_reduction_linear.cpp
void add_shape_entries(std::vector<OpInfo>& t);                                // op_table_shape_attention.cpp
void add_attention_entries(std::vector<OpInfo>& t);                            // op_table_shape_attention.cpp
void add_block_sparse_resample_normalization_entries(std::vector<OpInfo>& t);  // op_table_flagship.cpp
void add_conv_pool_entries(std::vector<OpInfo>& t);                            // op_table_conv_pool.cpp
void add_sparse_entries(std::vector<OpInfo>& t);                               // op_table_sparse.cpp

}  // namespace xgrad::test::table
