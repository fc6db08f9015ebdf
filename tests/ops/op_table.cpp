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
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

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

Response cos2(double w) {  // with r' and r'' (second derivatives in the coarse points: create_graph)
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); }, {},
                            [w](double d) { return -2 * M_PI * M_PI / (w * w) * std::cos(2 * M_PI * d / w); });
}

// A (R*bo, C*bi) pattern of 2x3 blocks, each stored with probability 1/2.
BlockSparsePattern random_pattern(std::int64_t R, std::int64_t C, Generator& g) {
  return BlockSparsePattern::from_block_mask(InFeatures{C * 3}, OutFeatures{R * 2}, {InFeatures{3}, OutFeatures{2}},
                                             values({R, C}, g, kFloat32, Domain::mask));
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

// ---- issue 16: shape ops (split ... pad) and reductions (min ... cumsum), one contiguous block ----

/// a (batch..., n, m): the sample of most entries below.
SampleInput nm_sample(Dtype dt, const SampleSpec& s, Generator& g) {
  return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
}

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

/// Values with exact zeros: every 5th element, and two in row 1 when it has 2 or more elements (prod's
/// gradient with one zero and with two).
Tensor with_zeros(const Shape& shape, Generator& g, Dtype dt) {
  Tensor v = values(shape, g, kFloat64);
  double* p = v.data<double>();
  for (std::int64_t i = 0; i < v.numel(); i += 5) p[i] = 0;
  if (shape.size() >= 2 && shape[shape.size() - 2] > 1 && shape.back() >= 2) {
    p[shape.back()] = 0;
    p[shape.back() + 1] = 0;
  }
  return v.to(dt);
}

void add_issue16_entries(std::vector<OpInfo>& t) {
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

// ---- issue 16: index ops (ops/indexing.hpp) and max/min with indices, one contiguous block -------
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

void add_issue16_index_entries(std::vector<OpInfo>& t) {
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
                     fmt::format("out = torch.{}(a, -1).double()", arg));
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
              fmt::format("out = torch.{}(a, None, True).double()", arg));
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
                            values_out ? "" : ".double()"));
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
      op.errors = {{"integer x",
                    [is_max] { is_max ? max(Tensor::zeros({2}, kInt64), 0) : min(Tensor::zeros({2}, kInt64), 0); },
                    {opname, "int64"}}};
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
    OpInfo op = base("nonzero", "nonzero(Tensor)", "out = torch.nonzero(a).double()");
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

// ---- issue 17: scaled_dot_product_attention (ops/attention.hpp), one contiguous block ----------
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
      {"dropout without a generator",
       [q, k, v] { scaled_dot_product_attention(q, k, v, Tensor(), 0.1); },
       {"scaled_dot_product_attention", "'dropout_p'", "generator"}},
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

// ---- the table ----------------------------------------------------------------------------------

// The entries of elementwise.hpp: binary, scalar, unary, comparison ops.
void add_elementwise_entries(std::vector<OpInfo>& t) {
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
    std::erase_if(op.errors, [](const ErrorCase& e) { return e.what == "dtype mix"; });  // promoted, not refused
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
}

// The entries of unary_math.hpp and activation.hpp.
void add_unary_math_activation_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  const std::string TT = "Tensor,Tensor";
  // unary_math.hpp and activation.hpp (one block). Samples stay inside each op's domain and away from
  // its poles, kinks and jumps: uniform on [lo, hi) where the domain is bounded.
  {
    const std::size_t first = t.size();
    auto in_range = [](OpInfo op, double lo, double hi) {
      op.sample = [lo, hi](Dtype dt, const SampleSpec& s, Generator& g) {
        Tensor v = values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]}), g, kFloat64, D::unit);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = lo + (hi - lo) * p[i];
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
      return op;
    };
    using U = Tensor (*)(const Tensor&);
    struct Math {
      const char* name;
      U fn;
      Domain d;
      double lo = 0, hi = 0;  // a uniform range instead of d when lo < hi
    };
    for (const Math& m : std::vector<Math>{{"sin", &sin, D::normal},
                                           {"cos", &cos, D::normal},
                                           {"tan", &tan, D::normal, -1.2, 1.2},
                                           {"asin", &asin, D::normal, -0.9, 0.9},
                                           {"acos", &acos, D::normal, -0.9, 0.9},
                                           {"atan", &atan, D::normal},
                                           {"sinh", &sinh, D::normal},
                                           {"cosh", &cosh, D::normal},
                                           {"log1p", &log1p, D::normal, -0.7, 3.0},
                                           {"expm1", &expm1, D::normal},
                                           {"log2", &log2, D::positive},
                                           {"log10", &log10, D::positive},
                                           {"erf", &erf, D::normal},
                                           {"erfc", &erfc, D::normal},
                                           {"rsqrt", &rsqrt, D::positive},
                                           {"reciprocal", &reciprocal, D::nonzero},
                                           {"sign", &sign, D::normal},
                                           {"floor", &floor, D::normal},
                                           {"ceil", &ceil, D::normal},
                                           {"round", static_cast<U>(&round), D::normal},
                                           {"trunc", &trunc, D::normal}}) {
      OpInfo op = unary(
          m.name, std::string(m.name) + "(Tensor)", fmt::format("out = torch.{}(a)", m.name),
          [fn = m.fn](auto& x) { return fn(x); }, m.d);
      t.push_back(m.lo < m.hi ? in_range(op, m.lo, m.hi) : op);
    }
    t.push_back(unary("round_decimals", "round(Tensor,int64_t)", "out = torch.round(a, decimals=2)",
                      [](auto& x) { return round(x, 2); }));
    t.push_back(in_range(unary("round_decimals_negative", "round(Tensor,int64_t)", "out = torch.round(a, decimals=-2)",
                               [](auto& x) { return round(x, -2); }),
                         -300.0, 300.0));
    using B = Tensor (*)(const Tensor&, const Tensor&);
    for (auto [name, fn] : std::vector<std::pair<std::string, B>>{
             {"atan2", &atan2}, {"fmod", static_cast<B>(&fmod)}, {"remainder", static_cast<B>(&remainder)}})
      t.push_back(binary(
          name, name + "(" + TT + ")", fmt::format("out = torch.{}(a, b)", name),
          [fn](auto& a, auto& b) { return fn(a, b); }, D::normal, D::nonzero));
    t.push_back(scalar_form("fmod_scalar", "fmod(Tensor,double)", "out = torch.fmod(a, 0.75)",
                            [](auto& a) { return fmod(a, 0.75); }));
    t.push_back(scalar_form("remainder_scalar", "remainder(Tensor,double)", "out = torch.remainder(a, -0.75)",
                            [](auto& a) { return remainder(a, -0.75); }));
    {
      OpInfo op = unary("clamp_min", "clamp_min(Tensor,double)", "out = torch.clamp_min(a, 0.3)",
                        [](auto& x) { return clamp_min(x, 0.3); });
      op.errors = {{"NaN bound",
                    [] {
                      clamp_min(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"clamp_min", "'min'", "NaN", "(2, 3)"}}};
      t.push_back(op);
      op = unary("clamp_max", "clamp_max(Tensor,double)", "out = torch.clamp_max(a, -0.2)",
                 [](auto& x) { return clamp_max(x, -0.2); });
      op.errors = {{"NaN bound",
                    [] {
                      clamp_max(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"clamp_max", "'max'", "NaN", "(2, 3)"}}};
      t.push_back(op);
    }
    // activations
    const std::string F = "out = torch.nn.functional.";
    {
      OpInfo op = unary("gelu", "gelu(Tensor,string_view)", F + "gelu(a)", [](auto& x) { return gelu(x); });
      op.errors = {
          {"unknown approximate", [] { gelu(Tensor::zeros({2}, kFloat64), "erf"); }, {"gelu", "'approximate'", "erf"}}};
      t.push_back(op);
      t.push_back(unary("gelu_tanh", "gelu(Tensor,string_view)", F + "gelu(a, approximate='tanh')",
                        [](auto& x) { return gelu(x, "tanh"); }));
    }
    t.push_back(unary("silu", "silu(Tensor)", F + "silu(a)", [](auto& x) { return silu(x); }));
    {
      OpInfo op =
          unary("softplus", "softplus(Tensor,double,double)", F + "softplus(a)", [](auto& x) { return softplus(x); });
      op.errors = {{"beta 0", [] { softplus(Tensor::zeros({2}, kFloat64), 0.0); }, {"softplus", "'beta'", "0"}},
                   {"NaN threshold",
                    [] { softplus(Tensor::zeros({2}, kFloat64), 1.0, NAN); },
                    {"softplus", "'threshold'", "nan"}}};
      t.push_back(op);
      // both sides of the threshold: beta x > 1 for x > 0.5
      t.push_back(unary("softplus_beta_threshold", "softplus(Tensor,double,double)",
                        F + "softplus(a, beta=2.0, threshold=1.0)", [](auto& x) { return softplus(x, 2.0, 1.0); }));
    }
    t.push_back(unary("mish", "mish(Tensor)", F + "mish(a)", [](auto& x) { return mish(x); }));
    {
      OpInfo op =
          unary("leaky_relu", "leaky_relu(Tensor,double)", F + "leaky_relu(a)", [](auto& x) { return leaky_relu(x); });
      op.errors = {{"NaN slope",
                    [] {
                      leaky_relu(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"leaky_relu", "'negative_slope'", "(2, 3)"}}};
      t.push_back(op);
      t.push_back(unary("leaky_relu_slope", "leaky_relu(Tensor,double)", F + "leaky_relu(a, 0.2)",
                        [](auto& x) { return leaky_relu(x, 0.2); }));
    }
    {
      OpInfo op = unary("elu", "elu(Tensor,double)", F + "elu(a)", [](auto& x) { return elu(x); });
      op.errors = {{"NaN alpha", [] { elu(Tensor::zeros({2, 3}, kFloat64), NAN); }, {"elu", "'alpha'", "(2, 3)"}}};
      t.push_back(op);
      t.push_back(
          unary("elu_alpha", "elu(Tensor,double)", F + "elu(a, alpha=0.5)", [](auto& x) { return elu(x, 0.5); }));
    }
    t.push_back(unary("selu", "selu(Tensor)", F + "selu(a)", [](auto& x) { return selu(x); }));
    {
      OpInfo op =
          unary("hardtanh", "hardtanh(Tensor,double,double)", F + "hardtanh(a)", [](auto& x) { return hardtanh(x); });
      op.errors = {{"min_val > max_val",
                    [] {
                      hardtanh(Tensor::zeros({2, 3}, kFloat64), 1.0, -1.0);
                    },
                    {"hardtanh", "'min_val'", "(2, 3)"}},
                   {"NaN bound",
                    [] {
                      hardtanh(Tensor::zeros({2, 3}, kFloat64), -1.0, NAN);
                    },
                    {"hardtanh", "'max_val'", "NaN"}}};
      t.push_back(op);
      t.push_back(unary("hardtanh_bounds", "hardtanh(Tensor,double,double)", F + "hardtanh(a, -0.5, 0.8)",
                        [](auto& x) { return hardtanh(x, -0.5, 0.8); }));
    }
    t.push_back(unary("logsigmoid", "logsigmoid(Tensor)", F + "logsigmoid(a)", [](auto& x) { return logsigmoid(x); }));
    // every input in turn as an integer tensor: refused, naming the op, the argument and the dtype
    for (std::size_t k = first; k < t.size(); ++k) {
      OpInfo& op = t[k];
      const std::string opname = op.signature.substr(0, op.signature.find('('));
      Generator g(1);
      const SampleInput si = op.sample(kFloat64, {op.small, {}}, g);
      for (std::size_t i = 0; i < si.inputs.size(); ++i) {
        Tensors args;
        for (const auto& in : si.inputs) args.push_back(in.value);
        args[i] = args[i].to(kInt64);
        op.errors.push_back(
            {"integer " + si.inputs[i].name, [call = op.call, args] { call(args); }, {opname, "int64"}});
      }
    }
  }
}

// The entries of reduction.hpp, softmax.hpp, loss.hpp.
void add_reduction_softmax_loss_entries(std::vector<OpInfo>& t) {
  using D = Domain;
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
}

// The entries of matmul.hpp, linear.hpp.
void add_matmul_linear_entries(std::vector<OpInfo>& t) {
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
}

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
}

// The entries of block_sparse_linear.hpp, resample_conv.hpp, normalization.hpp.
void add_block_sparse_resample_normalization_entries(std::vector<OpInfo>& t) {
  using D = Domain;
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
            for (std::int64_t i = 0; i < s.sizes[1]; ++i) groups.push_back({InFeatures{1 + i % 3}, OutFeatures{1 + (2 * i) % 5}});
            return BlockSparsePattern::block_diagonal(groups);
          }()
          : variant == 3 ? BlockSparsePattern::from_block_mask(InFeatures{s.sizes[2] * 3}, OutFeatures{s.sizes[1] * 2}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({s.sizes[1], s.sizes[2]}))
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
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 5}), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'", "(5, 5)"}},
          {"weight of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}), Tensor::zeros({3, 2, 3}), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'weight'", "(3, 2, 3)"}},
          {"dtype mix",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}, kFloat64), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}),
                                 p);
           },
           {"block_sparse_linear", "dtype"}},
          {"undefined x",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor(), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'"}},
          {"bias of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
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
                    const auto p = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
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

  // normalization.hpp: x (n, c, s); batch_norm in training (batch statistics) and eval (running
  // statistics) mode, the running statistics after one training step, and group_norm (c = g * k).
  {
    const SampleFn bn_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], c = s.sizes[1], sp = s.sizes[2];
      return SampleInput{{{"x", values({n, c, sp}, g, dt)},
                          {"w", values({c}, g, dt)},
                          {"b", values({c}, g, dt)},
                          {"rm", values({c}, g, dt), false},
                          {"rv", values({c}, g, dt, Domain::positive), false}},
                         {},
                         {}};
    };
    const auto bn_refuses = [](const SampleSpec& s) -> std::string { return s.sizes[1] == 0 ? "0 channels" : ""; };
    const Tensor x23 = Tensor::zeros({2, 3}, kFloat64), c3 = Tensor::ones({3}, kFloat64);
    const std::vector<ErrorCase> bn_errors = {
        {"x 1-d", [c3] { batch_norm(c3, c3, c3); }, {"batch_norm", "'x'", "(3,)"}},
        {"weight of the wrong size",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor::ones({2}, kFloat64)); },
         {"batch_norm", "'weight'", "(2,)", "(2, 3)"}},
        {"bias dtype mix",
         [x23, c3] { batch_norm(x23, c3, c3, c3, Tensor::ones({3}, kFloat32)); },
         {"batch_norm", "'bias'", "float32"}},
        {"running_var of the wrong size",
         [x23, c3] { batch_norm(x23, c3, Tensor::ones({4}, kFloat64)); },
         {"batch_norm", "'running_var'", "(4,)"}},
        {"eval without running stats", [x23] { batch_norm(x23, Tensor(), Tensor()); }, {"batch_norm", "evaluation"}},
        {"only running_mean",
         [x23, c3] { batch_norm(x23, c3, Tensor(), Tensor(), Tensor(), true); },
         {"batch_norm", "both"}},
        {"running stats that require grad",
         [x23] {
           Tensor rm = Tensor::zeros({3}, kFloat64);
           rm.set_requires_grad();
           batch_norm(x23, rm, Tensor::ones({3}, kFloat64), Tensor(), Tensor(), true);
         },
         {"batch_norm", "require grad"}},
        {"one value per channel when training",
         [c3] {
           batch_norm(Tensor::zeros({1, 3}, kFloat64), Tensor(), Tensor(), Tensor(), Tensor(), true);
         },
         {"batch_norm", "more than 1 value", "(1, 3)"}},
        {"negative eps",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor(), Tensor(), false, 0.1, -1.0); },
         {"batch_norm", "'eps'", "-1"}},
        {"momentum nan",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor(), Tensor(), true, std::nan(""), 1e-5); },
         {"batch_norm", "'momentum'"}},
        {"undefined x", [c3] { batch_norm(Tensor(), c3, c3); }, {"batch_norm", "'x'"}},
    };
    const std::string bn_sig = "batch_norm(Tensor,Tensor,Tensor,Tensor,Tensor,bool,double,double)";
    for (const bool training : {true, false}) {
      OpInfo op;
      op.name = training ? "batch_norm_train" : "batch_norm_eval";
      op.signature = bn_sig;
      op.torch = fmt::format("out = torch.nn.functional.batch_norm(x, rm.clone(), rv.clone(), w, b, {}, 0.3, 1e-3)",
                             training ? "True" : "False");
      op.call = [training](const Tensors& in) {
        return batch_norm(in[0], in[3].clone_data(), in[4].clone_data(), in[1], in[2], training, 0.3, 1e-3);
      };
      op.sample = bn_sample;
      op.size_names = {"n", "c", "s"};
      op.small = {3, 4, 5};
      op.threads = {64, 8, 512};
      op.check_undefined = false;  // running stats, weight and bias may be undefined; x: in errors
      op.refuses = bn_refuses;
      op.errors = bn_errors;
      t.push_back(op);
    }
    {
      // Running stats after one step, momentum 0.3 (unbiased variance); and the module's cumulative
      // average (momentum = 1 / num_batches_tracked, here the 3rd batch).
      for (const double momentum : {0.3, 1.0 / 3.0}) {
        OpInfo op;
        op.name = momentum == 0.3 ? "batch_norm_running_stats" : "batch_norm_running_stats_cumulative";
        op.signature = bn_sig;
        op.torch = fmt::format(
            "rm2 = rm.clone(); rv2 = rv.clone()\n"
            "torch.nn.functional.batch_norm(x, rm2, rv2, w, b, True, {:.17g}, 1e-5)\n"
            "out = torch.stack([rm2, rv2])",
            momentum);
        op.call = [momentum](const Tensors& in) {
          Tensor rm = in[3].clone_data(), rv = in[4].clone_data();
          batch_norm(in[0], rm, rv, in[1], in[2], true, momentum, 1e-5);
          return stack({rm, rv});
        };
        op.sample = bn_sample;
        op.size_names = {"n", "c", "s"};
        op.small = {3, 4, 5};
        op.threads = {64, 8, 512};
        op.differentiable = false;
        op.check_undefined = false;
        op.refuses = bn_refuses;
        op.errors = bn_errors;
        t.push_back(op);
      }
    }
    OpInfo gn;
    gn.name = "group_norm";
    gn.signature = "group_norm(Tensor,int64_t,Tensor,Tensor,double)";
    gn.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], groups = s.sizes[1], c = groups * s.sizes[2], sp = s.sizes[3];
      SampleInput si{{{"x", values({n, c, sp}, g, dt)}, {"w", values({c}, g, dt)}, {"b", values({c}, g, dt)}}, {}, {}};
      si.call = [groups](const Tensors& in) { return group_norm(in[0], groups, in[1], in[2], 1e-3); };
      si.torch_prelude = fmt::format("groups = {}\n", groups);
      return si;
    };
    gn.torch = "out = torch.nn.functional.group_norm(x, groups, w, b, 1e-3)";
    gn.size_names = {"n", "g", "k", "s"};
    gn.small = {3, 2, 3, 4};
    gn.threads = {8, 4, 2, 1024};
    gn.large = {300, 300, 300, 300};
    gn.check_undefined = false;
    gn.refuses = [](const SampleSpec& s) -> std::string { return s.sizes[1] == 0 ? "'num_groups' = 0" : ""; };
    gn.torch_skip = [](const SampleSpec& s) -> std::string {
      // torch 1.13's weight gradient is NaN when the groups are empty (s = 0); ours is 0, the empty sum
      return s.sizes[3] == 0 ? "torch's weight gradient is NaN for s = 0" : "";
    };
    gn.errors = {
        {"num_groups not dividing C",
         [x23] { group_norm(x23, 2); },
         {"group_norm", "'num_groups' = 2", "3 channels", "(2, 3)"}},
        {"x 1-d", [c3] { group_norm(c3, 1); }, {"group_norm", "'x'", "(3,)"}},
        {"weight of the wrong size",
         [x23] { group_norm(x23, 3, Tensor::ones({2}, kFloat64)); },
         {"group_norm", "'weight'", "(2,)"}},
        {"bias dtype mix",
         [x23, c3] { group_norm(x23, 3, c3, Tensor::ones({3}, kFloat32)); },
         {"group_norm", "'bias'", "float32"}},
        {"one value",
         [] {
           group_norm(Tensor::zeros({1, 1}, kFloat64), 1);
         },
         {"group_norm", "more than 1 value", "(1, 1)"}},
        {"negative eps", [x23] { group_norm(x23, 3, Tensor(), Tensor(), -1e-3); }, {"group_norm", "'eps'"}},
        {"undefined x", [] { group_norm(Tensor(), 1); }, {"group_norm", "'x'"}},
    };
    t.push_back(gn);
  }
}

// The entries of conv.hpp, pool.hpp.
void add_conv_pool_entries(std::vector<OpInfo>& t) {
  // conv.hpp and pool.hpp: x (n, cg * groups, [h,] w); conv weight (og * groups, cg, k...), transposed
  // weight (cg * groups, og, k...); one entry per public function and a few per mode.
  {
    struct ConvCase {
      std::string name, fn;
      int dims;
      bool transposed, bias, unbatched;
      std::int64_t groups;
      std::vector<std::int64_t> k, stride, dilation, output_padding;
      std::vector<std::int64_t> padv;  // numeric padding (one per dim)
      std::string pad_mode;            // "same" / "valid", else numeric
      std::string torch_args;          // Python keyword arguments after (x, w, b)
    };
    const std::vector<ConvCase> cases = {
        {"conv1d", "conv1d", 1, false, true, false, 1, {3}, {2}, {1}, {}, {1}, "", "stride=2, padding=1"},
        {"conv1d_same_groups_dilated",
         "conv1d",
         1,
         false,
         false,
         false,
         2,
         {4},
         {1},
         {2},
         {},
         {},
         "same",
         "padding='same', dilation=2, groups=2"},
        {"conv2d",
         "conv2d",
         2,
         false,
         true,
         false,
         1,
         {3, 2},
         {2, 1},
         {1, 1},
         {},
         {1, 0},
         "",
         "stride=(2, 1), padding=(1, 0)"},
        {"conv2d_same_groups",
         "conv2d",
         2,
         false,
         false,
         false,
         2,
         {3, 4},
         {1, 1},
         {1, 1},
         {},
         {},
         "same",
         "padding='same', groups=2"},
        {"conv2d_valid_dilated_unbatched",
         "conv2d",
         2,
         false,
         true,
         true,
         1,
         {2, 3},
         {1, 2},
         {2, 1},
         {},
         {},
         "valid",
         "stride=(1, 2), padding='valid', dilation=(2, 1)"},
        {"conv_transpose1d",
         "conv_transpose1d",
         1,
         true,
         true,
         false,
         1,
         {3},
         {2},
         {1},
         {1},
         {1},
         "",
         "stride=2, padding=1, output_padding=1"},
        {"conv_transpose2d",
         "conv_transpose2d",
         2,
         true,
         true,
         false,
         2,
         {3, 2},
         {2, 1},
         {1, 2},
         {1, 0},
         {1, 0},
         "",
         "stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2, dilation=(1, 2)"},
        {"conv_transpose2d_unbatched",
         "conv_transpose2d",
         2,
         true,
         false,
         true,
         1,
         {2, 2},
         {1, 1},
         {1, 1},
         {0, 0},
         {0, 0},
         "",
         ""},
    };
    for (const ConvCase& cc : cases) {
      OpInfo op;
      op.name = cc.name;
      op.signature = cc.transposed
                         ? cc.fn +
                               "(Tensor,Tensor,Tensor,vector<int64_t>,vector<int64_t>,vector<int64_t>,int64_t,"
                               "vector<int64_t>)"
                         : cc.fn + "(Tensor,Tensor,Tensor,vector<int64_t>,ConvPadding,vector<int64_t>,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(x, w, {}{}{})", cc.fn, cc.bias ? "b" : "None",
                             cc.torch_args.empty() ? "" : ", ", cc.torch_args);
      op.call = [cc](const Tensors& in) {
        const Tensor b = cc.bias ? in[2] : Tensor();
        if (cc.transposed) {
          const auto f = cc.dims == 1 ? conv_transpose1d : conv_transpose2d;
          return f(in[0], in[1], b, cc.stride, cc.padv, cc.output_padding, cc.groups, cc.dilation);
        }
        const ConvPadding pad = cc.pad_mode.empty() ? ConvPadding(cc.padv) : ConvPadding(cc.pad_mode);
        const auto f = cc.dims == 1 ? conv1d : conv2d;
        return f(in[0], in[1], b, cc.stride, pad, cc.dilation, cc.groups);
      };
      op.sample = [cc](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t n = s.sizes[0], cg = s.sizes[1], og = s.sizes[2];
        Shape xs = {n, cg * cc.groups};
        if (cc.unbatched) xs.erase(xs.begin());
        Shape ws = cc.transposed ? Shape{cg * cc.groups, og} : Shape{og * cc.groups, cg};
        for (int d = 0; d < cc.dims; ++d) {
          xs.push_back(s.sizes[static_cast<std::size_t>(3 + d)]);
          ws.push_back(cc.k[static_cast<std::size_t>(d)]);
        }
        SampleInput si{{{"x", values(xs, g, dt)}, {"w", values(ws, g, dt)}}, {}, {}};
        if (cc.bias) si.inputs.push_back({"b", values({og * cc.groups}, g, dt)});
        return si;
      };
      op.size_names = {"n", "cg", "og"};
      op.small = {2, 2, 3};
      op.threads = {16, 4, 8};
      op.large = {40, 24, 24};
      for (int d = 0; d < cc.dims; ++d) {
        op.size_names.push_back(d == cc.dims - 1 ? "w" : "h");
        op.small.push_back(cc.dims == 1 ? 7 : 5 + d);
        op.threads.push_back(cc.dims == 1 ? 1000 : 28);
        op.large.push_back(cc.dims == 1 ? 300 : 40);
      }
      if (cc.unbatched) op.threads = {1, 16, 16, 64, 64};  // no batch: more channels and pixels instead
      op.refuses = [cc](const SampleSpec& s) -> std::string {
        const std::int64_t cg = s.sizes[1], og = s.sizes[2];
        for (int d = 0; d < cc.dims; ++d)
          if (s.sizes[static_cast<std::size_t>(3 + d)] == 0) return "only the batch and channel dimensions";
        if (cc.transposed) {
          if (cg == 0 || og == 0) return "must be non-empty";
          return "";
        }
        if (og == 0) return "at least 1 at dimension 0";
        for (int d = 0; d < cc.dims; ++d) {
          const auto i = static_cast<std::size_t>(d);
          const std::int64_t span = cc.dilation[i] * (cc.k[i] - 1) + 1;
          const std::int64_t padded = s.sizes[3 + i] + (cc.pad_mode == "same" ? span - 1
                                                        : cc.pad_mode.empty() ? 2 * cc.padv[i]
                                                                              : 0);
          if (padded < span) return "smaller than the (dilated) kernel";
        }
        return "";
      };
      const Tensor x4 = Tensor::zeros({2, 4, 6, 6}, kFloat64), w4 = Tensor::zeros({4, 4, 3, 3}, kFloat64);
      const Tensor x3 = Tensor::zeros({2, 4, 6}, kFloat64), w3 = Tensor::zeros({4, 4, 3}, kFloat64);
      const std::string opname = cc.fn;
      if (cc.name == "conv2d")
        op.errors = {
            {"channel mismatch",
             [] {
               conv2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({4, 2, 3, 3}, kFloat64));
             },
             {"conv2d", "(4, 2, 3, 3)", "(2, 3, 6, 6)", "channels"}},
            {"groups not dividing out channels",
             [x4] {
               conv2d(x4, Tensor::zeros({3, 2, 3, 3}, kFloat64), Tensor(), {1}, 0, {1}, 2);
             },
             {"conv2d", "groups=2", "(3, 2, 3, 3)"}},
            {"groups 0", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, 0, {1}, 0); }, {"conv2d", "'groups'", "0"}},
            {"kernel larger than the padded input",
             [] {
               conv2d(Tensor::zeros({1, 1, 2, 6}, kFloat64), Tensor::zeros({1, 1, 5, 3}, kFloat64), Tensor(), {1}, 1);
             },
             {"conv2d", "(1, 1, 2, 6)", "(1, 1, 5, 3)", "kernel"}},
            {"zero stride", [x4, w4] { conv2d(x4, w4, Tensor(), {0}); }, {"conv2d", "'stride'", "(0,)"}},
            {"negative stride",
             [x4, w4] {
               conv2d(x4, w4, Tensor(), {1, -2});
             },
             {"conv2d", "'stride'", "(1, -2)"}},
            {"three strides",
             [x4, w4] {
               conv2d(x4, w4, Tensor(), {1, 1, 1});
             },
             {"conv2d", "'stride'", "3"}},
            {"zero dilation", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, 0, {0}); }, {"conv2d", "'dilation'"}},
            {"negative padding", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, -1); }, {"conv2d", "'padding'", "(-1,)"}},
            {"unknown padding mode",
             [x4, w4] { conv2d(x4, w4, Tensor(), {1}, "full"); },
             {"conv2d", "'padding'", "full"}},
            {"same with stride 2",
             [x4, w4] { conv2d(x4, w4, Tensor(), {2}, "same"); },
             {"conv2d", "\"same\"", "strided"}},
            {"bias of the wrong size",
             [x4, w4] { conv2d(x4, w4, Tensor::zeros({3}, kFloat64)); },
             {"conv2d", "'bias'", "(3,)", "(4,)"}},
            {"x 2-d",
             [w4] {
               conv2d(Tensor::zeros({6, 6}, kFloat64), w4);
             },
             {"conv2d", "'x'", "(6, 6)"}},
            {"weight 3-d", [x4, w3] { conv2d(x4, w3); }, {"conv2d", "'weight'", "(4, 4, 3)"}},
            {"empty spatial dim",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 0, 6}, kFloat64), w4, Tensor(), {1}, 2);
             },
             {"conv2d", "(2, 4, 0, 6)"}},
            {"dtype mix",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 6, 6}, kFloat32), w4);
             },
             {"conv2d", "float32", "float64"}},
            {"undefined x", [w4] { conv2d(Tensor(), w4); }, {"conv2d", "'x'"}},
            {"undefined weight", [x4] { conv2d(x4, Tensor()); }, {"conv2d", "'weight'"}},
            {"integer x",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 6, 6}, kInt64), w4);
             },
             {"conv2d", "'x'", "int64"}}};
      if (cc.name == "conv1d")
        op.errors = {{"channel mismatch",
                      [] {
                        conv1d(Tensor::zeros({2, 3, 6}, kFloat64), Tensor::zeros({4, 2, 3}, kFloat64));
                      },
                      {"conv1d", "(4, 2, 3)", "(2, 3, 6)", "channels"}},
                     {"two strides for 1-d",
                      [x3, w3] {
                        conv1d(x3, w3, Tensor(), {1, 1});
                      },
                      {"conv1d", "'stride'", "2"}},
                     {"kernel larger than the input",
                      [x3] {
                        conv1d(x3, Tensor::zeros({4, 4, 7}, kFloat64));
                      },
                      {"conv1d", "(2, 4, 6)", "(4, 4, 7)", "kernel"}},
                     {"x 4-d", [x4, w3] { conv1d(x4, w3); }, {"conv1d", "'x'", "(2, 4, 6, 6)"}}};
      if (cc.name == "conv_transpose2d")
        op.errors = {
            {"channel mismatch",
             [] {
               conv_transpose2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({4, 2, 3, 3}, kFloat64));
             },
             {"conv_transpose2d", "(4, 2, 3, 3)", "(2, 3, 6, 6)", "channels"}},
            {"groups not dividing in channels",
             [] {
               conv_transpose2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({3, 2, 3, 3}, kFloat64), Tensor(),
                                {1}, {0}, {0}, 2);
             },
             {"conv_transpose2d", "groups=2", "3"}},
            {"output_padding too large",
             [x4, w4] { conv_transpose2d(x4, w4, Tensor(), {2}, {0}, {2}); },
             {"conv_transpose2d", "'output_padding'", "(2,)"}},
            {"output too small",
             [] {
               conv_transpose2d(Tensor::zeros({1, 1, 1, 1}, kFloat64), Tensor::zeros({1, 1, 1, 1}, kFloat64), Tensor(),
                                {1}, {1});
             },
             {"conv_transpose2d", "(1, 1, 1, 1)", "too small"}},
            {"zero stride", [x4, w4] { conv_transpose2d(x4, w4, Tensor(), {0}); }, {"conv_transpose2d", "'stride'"}},
            {"bias of the wrong size",
             [x4, w4] { conv_transpose2d(x4, w4, Tensor::zeros({5}, kFloat64)); },
             {"conv_transpose2d", "'bias'", "(5,)"}},
            {"undefined x", [w4] { conv_transpose2d(Tensor(), w4); }, {"conv_transpose2d", "'x'"}}};
      if (cc.name == "conv_transpose1d")
        op.errors = {
            {"weight 4-d", [x3, w4] { conv_transpose1d(x3, w4); }, {"conv_transpose1d", "'weight'", "(4, 4, 3, 3)"}},
            {"negative padding",
             [x3, w3] { conv_transpose1d(x3, w3, Tensor(), {1}, {-1}); },
             {"conv_transpose1d", "'padding'", "(-1,)"}}};
      if (!cc.transposed)
        op.torch_skip = [](const SampleSpec& s) -> std::string {
          return s.sizes[1] == 0 ? "torch 1.13 gives (N, 0, ...) for an input with 0 channels; ours gives the bias"
                                 : "";
        };
      op.check_undefined = false;  // an undefined bias means no bias; undefined x and weight: errors above
      t.push_back(op);
    }

    // pooling: x (n, c, [h,] w)
    struct PoolCase {
      std::string name, fn, torch;
      int dims;
      bool max, adaptive, unbatched;
      std::vector<std::int64_t> k, stride, padding, dilation;  // adaptive: k = output size
      bool ceil, include_pad;
      std::optional<std::int64_t> divisor;
    };
    const std::vector<PoolCase> pools = {
        {"max_pool1d",
         "max_pool1d",
         "max_pool1d(x, 3, 2, 1, 2, ceil_mode=True)",
         1,
         true,
         false,
         false,
         {3},
         {2},
         {1},
         {2},
         true,
         true,
         {}},
        {"max_pool2d",
         "max_pool2d",
         "max_pool2d(x, (3, 2), (2, 1), (1, 0), (1, 2))",
         2,
         true,
         false,
         false,
         {3, 2},
         {2, 1},
         {1, 0},
         {1, 2},
         false,
         true,
         {}},
        {"max_pool2d_default_stride_unbatched",
         "max_pool2d",
         "max_pool2d(x, 2, ceil_mode=True)",
         2,
         true,
         false,
         true,
         {2},
         {},
         {0},
         {1},
         true,
         true,
         {}},
        {"avg_pool1d",
         "avg_pool1d",
         "avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)",
         1,
         false,
         false,
         false,
         {3},
         {2},
         {1},
         {1},
         true,
         false,
         {}},
        {"avg_pool2d",
         "avg_pool2d",
         "avg_pool2d(x, 3, 2, 1, ceil_mode=True)",
         2,
         false,
         false,
         false,
         {3},
         {2},
         {1},
         {1},
         true,
         true,
         {}},
        {"avg_pool2d_divisor_override",
         "avg_pool2d",
         "avg_pool2d(x, (2, 3), (1, 2), (1, 1), divisor_override=5)",
         2,
         false,
         false,
         false,
         {2, 3},
         {1, 2},
         {1, 1},
         {1},
         false,
         true,
         5},
        {"adaptive_avg_pool1d",
         "adaptive_avg_pool1d",
         "adaptive_avg_pool1d(x, 3)",
         1,
         false,
         true,
         false,
         {3},
         {},
         {},
         {},
         false,
         false,
         {}},
        {"adaptive_avg_pool2d",
         "adaptive_avg_pool2d",
         "adaptive_avg_pool2d(x, (3, 2))",
         2,
         false,
         true,
         false,
         {3, 2},
         {},
         {},
         {},
         false,
         false,
         {}},
        {"adaptive_max_pool2d",
         "adaptive_max_pool2d",
         "adaptive_max_pool2d(x, (2, 4))",
         2,
         true,
         true,
         true,
         {2, 4},
         {},
         {},
         {},
         false,
         false,
         {}},
    };
    for (const PoolCase& pc : pools) {
      OpInfo op;
      op.name = pc.name;
      const std::string V = "vector<int64_t>";
      op.signature = pc.adaptive    ? pc.fn + "(Tensor," + V + ")"
                     : pc.max       ? pc.fn + "(Tensor," + V + "," + V + "," + V + "," + V + ",bool)"
                     : pc.dims == 1 ? pc.fn + "(Tensor," + V + "," + V + "," + V + ",bool,bool)"
                                    : pc.fn + "(Tensor," + V + "," + V + "," + V + ",bool,bool,optional<int64_t>)";
      op.torch = "out = torch.nn.functional." + pc.torch;
      op.call = [pc](const Tensors& in) -> Tensor {
        if (pc.adaptive)
          return pc.fn == "adaptive_avg_pool1d"   ? adaptive_avg_pool1d(in[0], pc.k)
                 : pc.fn == "adaptive_avg_pool2d" ? adaptive_avg_pool2d(in[0], pc.k)
                                                  : adaptive_max_pool2d(in[0], pc.k);
        if (pc.max)
          return (pc.dims == 1 ? max_pool1d : max_pool2d)(in[0], pc.k, pc.stride, pc.padding, pc.dilation, pc.ceil);
        if (pc.dims == 1) return avg_pool1d(in[0], pc.k, pc.stride, pc.padding, pc.ceil, pc.include_pad);
        return avg_pool2d(in[0], pc.k, pc.stride, pc.padding, pc.ceil, pc.include_pad, pc.divisor);
      };
      op.sample = [pc](Dtype dt, const SampleSpec& s, Generator& g) {
        Shape xs = {s.sizes[0], s.sizes[1]};
        if (pc.unbatched) xs.erase(xs.begin());
        for (int d = 0; d < pc.dims; ++d) xs.push_back(s.sizes[static_cast<std::size_t>(2 + d)]);
        return SampleInput{{{"x", values(xs, g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "c"};
      op.small = {2, 3};
      op.threads = {8, 8};
      op.large = {40, 40};
      for (int d = 0; d < pc.dims; ++d) {
        op.size_names.push_back(d == pc.dims - 1 ? "w" : "h");
        op.small.push_back(7 - d);
        op.threads.push_back(pc.dims == 1 ? 600 : 32);
        op.large.push_back(pc.dims == 1 ? 300 : 60);
      }
      if (pc.unbatched) op.threads[1] = 64;
      op.refuses = [pc](const SampleSpec& s) -> std::string {
        for (std::size_t i = pc.unbatched ? 1 : 1; i < s.sizes.size(); ++i)
          if (s.sizes[i] == 0) return "empty non-batch dimension";
        if (pc.adaptive) return "";
        for (int d = 0; d < pc.dims; ++d) {
          const auto i = static_cast<std::size_t>(d);
          auto pick = [&](const std::vector<std::int64_t>& v, std::int64_t dflt) {
            return v.empty() ? dflt : v.size() == 1 ? v[0] : v[i];
          };
          const std::int64_t k = pick(pc.k, 1), st = pick(pc.stride, k), p = pick(pc.padding, 0),
                             dl = pick(pc.dilation, 1), L = s.sizes[2 + i];
          const std::int64_t num = L + 2 * p - dl * (k - 1) - 1 + (pc.ceil ? st - 1 : 0);
          std::int64_t o = (num >= 0 ? num / st : -((-num + st - 1) / st)) + 1;
          if (pc.ceil && (o - 1) * st >= L + p) --o;
          if (o < 1) return "too small";
        }
        return "";
      };
      op.check_undefined = true;
      const std::string f = pc.fn;
      const Tensor x4 = Tensor::zeros({2, 3, 6, 6}, kFloat64), x3 = Tensor::zeros({2, 3, 6}, kFloat64);
      if (pc.name == "max_pool2d")
        op.errors = {{"kernel 0",
                      [x4] {
                        max_pool2d(x4, {0, 2});
                      },
                      {"max_pool2d", "'kernel_size'", "(0, 2)"}},
                     {"stride 0", [x4] { max_pool2d(x4, {2}, {0}); }, {"max_pool2d", "'stride'", "(0,)"}},
                     {"dilation 0", [x4] { max_pool2d(x4, {2}, {}, {0}, {0}); }, {"max_pool2d", "'dilation'", "(0,)"}},
                     {"padding over half the kernel",
                      [x4] { max_pool2d(x4, {2}, {}, {2}); },
                      {"max_pool2d", "'padding'", "(2,)"}},
                     {"kernel larger than the input",
                      [] {
                        max_pool2d(Tensor::zeros({1, 1, 2, 8}, kFloat64), {3});
                      },
                      {"max_pool2d", "(1, 1, 2, 8)", "too small"}},
                     {"empty channels",
                      [] {
                        max_pool2d(Tensor::zeros({2, 0, 4, 4}, kFloat64), {2});
                      },
                      {"max_pool2d", "(2, 0, 4, 4)"}},
                     {"x 2-d",
                      [] {
                        max_pool2d(Tensor::zeros({4, 4}, kFloat64), {2});
                      },
                      {"max_pool2d", "'x'", "(4, 4)"}},
                     {"three kernel sizes",
                      [x4] {
                        max_pool2d(x4, {2, 2, 2});
                      },
                      {"max_pool2d", "'kernel_size'", "(2, 2, 2)"}}};
      if (pc.name == "max_pool1d")
        op.errors = {
            {"x 4-d", [x4] { max_pool1d(x4, {2}); }, {"max_pool1d", "'x'", "(2, 3, 6, 6)"}},
            {"kernel larger than the input", [x3] { max_pool1d(x3, {7}); }, {"max_pool1d", "(2, 3, 6)", "too small"}}};
      if (pc.name == "avg_pool2d")
        op.errors = {
            {"divisor_override 0",
             [x4] { avg_pool2d(x4, {2}, {}, {0}, false, true, 0); },
             {"avg_pool2d", "'divisor_override'"}},
            {"negative padding", [x4] { avg_pool2d(x4, {2}, {}, {-1}); }, {"avg_pool2d", "'padding'", "(-1,)"}}};
      if (pc.name == "avg_pool1d")
        op.errors = {{"stride 0", [x3] { avg_pool1d(x3, {2}, {0}); }, {"avg_pool1d", "'stride'"}}};
      if (pc.name == "adaptive_avg_pool2d")
        op.errors = {{"negative output size",
                      [x4] {
                        adaptive_avg_pool2d(x4, {2, -1});
                      },
                      {"adaptive_avg_pool2d", "'output_size'", "(2, -1)"}},
                     {"empty height",
                      [] {
                        adaptive_avg_pool2d(Tensor::zeros({1, 2, 0, 3}, kFloat64), {2});
                      },
                      {"adaptive_avg_pool2d", "(1, 2, 0, 3)"}}};
      if (pc.name == "adaptive_avg_pool1d")
        op.errors = {{"x 1-d",
                      [] { adaptive_avg_pool1d(Tensor::zeros({5}, kFloat64), {2}); },
                      {"adaptive_avg_pool1d", "'x'", "(5,)"}}};
      if (pc.name == "adaptive_max_pool2d")
        op.errors = {{"three output sizes",
                      [x4] {
                        adaptive_max_pool2d(x4, {1, 2, 3});
                      },
                      {"adaptive_max_pool2d", "'output_size'"}}};
      t.push_back(op);
    }
    // max_pool*_with_indices: values and indices (as the input's dtype) in one flat output, so that
    // parity checks both and the gradient of the values.
    for (const int dims : {1, 2}) {
      OpInfo op;
      op.name = dims == 1 ? "max_pool1d_with_indices" : "max_pool2d_with_indices";
      const std::string V = "vector<int64_t>";
      op.signature = op.name + "(Tensor," + V + "," + V + "," + V + "," + V + ",bool)";
      op.torch =
          dims == 1 ? "v, i = torch.nn.functional.max_pool1d(x, 3, 2, 1, 1, ceil_mode=True, return_indices=True)\n"
                    : "v, i = torch.nn.functional.max_pool2d(x, (2, 3), (2, 1), (1, 1), (2, 1), return_indices=True)\n";
      op.torch += "out = torch.cat([v.flatten(), i.flatten().to(v.dtype)])";
      op.call = [dims](const Tensors& in) {
        const Tensors r = dims == 1 ? max_pool1d_with_indices(in[0], {3}, {2}, {1}, {1}, true)
                                    : max_pool2d_with_indices(in[0], {2, 3}, {2, 1}, {1, 1}, {2, 1});
        return concat({flatten(r[0]), flatten(r[1].to(in[0].dtype()))}, 0);
      };
      op.sample = [dims](Dtype dt, const SampleSpec& s, Generator& g) {
        Shape xs = {s.sizes[0], s.sizes[1]};
        for (int d = 0; d < dims; ++d) xs.push_back(s.sizes[static_cast<std::size_t>(2 + d)]);
        return SampleInput{{{"x", values(xs, g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "c"};
      op.small = {2, 3};
      op.threads = {8, 8};
      op.large = {40, 40};
      for (int d = 0; d < dims; ++d) {
        op.size_names.push_back(d == dims - 1 ? "w" : "h");
        op.small.push_back(7 - d);
        op.threads.push_back(dims == 1 ? 600 : 32);
        op.large.push_back(dims == 1 ? 300 : 60);
      }
      op.refuses = [dims](const SampleSpec& s) -> std::string {
        for (std::size_t i = 1; i < s.sizes.size(); ++i)
          if (s.sizes[i] == 0) return "empty non-batch dimension";
        // 2-d: height kernel 2, dilation 2 (span 3) with padding 1: any H >= 1 fits
        return "";
      };
      if (dims == 2)
        op.torch_skip = [](const SampleSpec& s) -> std::string {
          // H = 1: the window's rows -1 and 1 both lie outside; torch 1.13 returns index H * W (out of
          // its plane) and its backward writes there (heap corruption, the Python process aborts).
          // Ours: -inf, index -1, no gradient (ops/pool.hpp).
          return s.sizes[2] == 1 ? "torch 1.13 indexes out of bounds for a window with no element in range" : "";
        };
      const std::string name = op.name;
      op.errors = {{"integer x",
                    [dims] {
                      const Tensor x = Tensor::zeros(dims == 1 ? Shape{2, 3, 6} : Shape{2, 3, 6, 6}, kInt64);
                      if (dims == 1)
                        max_pool1d_with_indices(x, {2});
                      else
                        max_pool2d_with_indices(x, {2});
                    },
                    {name, "'x'", "int64"}}};
      t.push_back(op);
    }
  }
}

// Parts (one function each: a single function of ~1900 lines was most of this file's compile time).
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
  add_issue16_entries(t);        // shape ops and reductions of issue 16
  add_issue16_index_entries(t);  // index ops of issue 16
  add_attention_entries(t);      // scaled_dot_product_attention (issue 17)

  // The shape and index ops of issue 16 move elements of any dtype (as torch's do): their inputs
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
  // Entries whose ops support create_graph (their backwards are recorded; gradgradcheck runs).
  // Every other entry must refuse create_graph with a clear error (OpInfo::create_graph).
  // clang-format off
  static const std::set<std::string> kCreateGraph = {
      "add", "sub", "mul", "div", "pow", "pow_scalar", "maximum", "minimum", "add_scalar", "sub_scalar", "mul_scalar",
      "div_scalar", "rdiv_scalar", "neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "clamp", "where",
      "sum_all", "sum_last", "sum_rows_keepdim", "mean_all", "mean_last", "mean_rows_keepdim",
      "reshape_swap", "reshape_infer", "flatten", "flatten_all", "squeeze_axis", "squeeze_all",
      "unsqueeze", "permute", "transpose", "slice_step", "slice_negative", "index_select", "cat_middle",
      "pow_scalar_int", "sign", "floor", "ceil", "round", "trunc", "round_decimals", "round_decimals_negative",
      "fmod_scalar", "remainder_scalar", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "log1p",
      "expm1", "log2", "log10", "erf", "erfc", "rsqrt", "reciprocal", "gelu", "gelu_tanh", "silu", "softplus",
      "softplus_beta_threshold", "mish", "leaky_relu", "leaky_relu_slope", "elu", "elu_alpha", "selu", "hardtanh",
      "hardtanh_bounds", "logsigmoid", "concat", "stack", "expand", "linear", "linear_nobias",
      "add_outer", "mul_outer", "maximum_outer", "softmax_last", "softmax_first", "softmax_middle",
      "log_softmax_last", "log_softmax_first", "log_softmax_middle", "sum_outer_axes", "mean_outer_axes", "matmul_mm",
      "matmul_broadcast_a", "matmul_bmm", "matmul_dot", "matmul_mv", "matmul_vm", "concat_first", "stack_first",
      "index_select_tensor", "masked_fill",
      // hggc: attention and the recurrent ops
      "scaled_dot_product_attention", "scaled_dot_product_attention_causal", "scaled_dot_product_attention_float_mask",
      "scaled_dot_product_attention_bool_mask", "lstm_cell", "lstm_cell_nobias", "gru_cell", "gru_cell_nobias",
      "lstm_layer", "lstm_layer_reverse", "gru_layer", "gru_layer_reverse",
      // end hggc
      // hgga: binary math, one-sided clamps, split/flip/roll/repeat/pad, cumsum, the gather/scatter
      // ops, max/min, sort/topk values
      "atan2", "fmod", "remainder", "clamp_min", "clamp_max", "chunk", "split_size", "split_sizes", "flip",
      "flip_scalar", "roll", "roll_flat", "repeat", "pad_constant", "pad_reflect", "pad_replicate", "cumsum_first",
      "cumsum_last", "gather", "scatter_add", "index_add", "index_int", "index_mask_elements", "index_mask_rows",
      "masked_select", "take_along_dim", "take_along_dim_flat", "max_all", "max_dim_values", "max_last",
      "max_outer_axes", "max_rows_keepdim", "min_all", "min_dim_values", "min_last", "min_outer_axes",
      "min_rows_keepdim", "sort_ascending_values", "sort_descending_values", "topk_largest_values",
      "topk_smallest_values",
      // hgga end
      // hggb: convolutions, pooling, normalization, class-index losses, prod/var/std/norm
      "conv1d", "conv1d_same_groups_dilated", "conv2d", "conv2d_same_groups", "conv2d_valid_dilated_unbatched",
      "conv_transpose1d", "conv_transpose2d", "conv_transpose2d_unbatched", "max_pool1d", "max_pool2d",
      "max_pool2d_default_stride_unbatched", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
      "avg_pool2d", "avg_pool2d_divisor_override", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
      "adaptive_max_pool2d", "batch_norm_train", "batch_norm_eval", "batch_norm_running_stats",
      "batch_norm_running_stats_cumulative", "group_norm",
      // hggb end
      // hggr
      "resample_conv_cos2_uniform", "resample_conv_sampled_points",
  };
  // clang-format on
  // ... and every entry whose name starts with one of these
  static const std::vector<std::string> kCreateGraphPrefixes = {
      "mse_loss_", "l1_loss_", "huber_loss_", "smooth_l1_loss_", "bce_with_logits", "logsumexp_", "block_sparse_linear",
      // hggb
      "cross_entropy_", "nll_loss_", "prod_", "var_", "std_", "norm_"};
  for (auto& op : t) {
    // hggb: norm's samples sit on its kinks (zeros, a zero row); gradgradcheck takes values away from them
    if ((op.name == "norm_last_p1" || op.name == "norm_last_p3") && !op.gradgrad_sample)
      op.gradgrad_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
      };
    if (kCreateGraph.count(op.name) != 0) op.create_graph = true;
    for (const auto& prefix : kCreateGraphPrefixes)
      if (op.name.rfind(prefix, 0) == 0) op.create_graph = true;
  }
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
  std::vector<std::string> out;
  for (const auto& d : public_op_declarations(ops_dir)) out.push_back(d.signature);
  return out;
}

std::vector<OpDeclaration> public_op_declarations(const std::string& ops_dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ops_dir))
    if (e.path().extension() == ".hpp") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<OpDeclaration> out;
  const std::regex decl_re("^(Tensor|Tensors|std::tuple<Tensor, Tensor>) (operator\\S+|[A-Za-z_][A-Za-z0-9_]*)\\(");
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
      out.push_back(
          {std::filesystem::path(file).stem().string(), fmt::format("{}({})", m[2].str(), fmt::join(types, ","))});
    }
  }
  return out;
}

}  // namespace xgrad::test
