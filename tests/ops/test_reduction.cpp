// Tests for ops/reduction.*: gradcheck, torch parity, thread determinism, special values, bad inputs.
#include <fmt/ranges.h>  // fmt::join

#include <cmath>
#include <limits>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
using ReduceFn = Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool);
struct ReduceOp {
  const char* name;
  ReduceFn fn;
  const char* torch;  // torch function taking (x, dim=..., keepdim=...)
};
const ReduceOp kOps[] = {
    {"sum", sum, "torch.sum"},
    {"mean", mean, "torch.mean"},
    {"max", max, "torch.amax"},
    {"logsumexp", logsumexp, "torch.logsumexp"},
};

struct AxesCase {
  Shape shape;
  std::vector<std::int64_t> axes;
};
// Scalars, 1-d, trailing axes (contiguous rows), leading/middle axes (columns), non-adjacent axes
// (gathered), size-1 axes, negative axes, and "all" (empty list).
const std::vector<AxesCase> kAxes = {
    {{}, {}},          {{}, {0}},        {{}, {-1}},          {{5}, {}},           {{5}, {0}},
    {{5}, {-1}},       {{3, 4}, {}},     {{3, 4}, {0}},       {{3, 4}, {1}},       {{3, 4}, {-2, -1}},
    {{3, 4}, {-1, 0}}, {{2, 3, 4}, {1}}, {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {0, 1}}, {{2, 3, 4}, {-1, -2}},
    {{2, 3, 4}, {-3}}, {{2, 1, 3}, {1}}, {{2, 1, 3}, {0, 2}}, {{4, 1}, {0}},       {{2, 3, 2, 2}, {1, 3}},
};

// Python tuple for torch's dim argument: the axes, or every axis when the list is empty.
std::string torch_dims(const AxesCase& c) {
  std::vector<std::int64_t> dims = c.axes;
  if (dims.empty()) {
    if (c.shape.empty()) dims = {0};
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(c.shape.size()); ++d) dims.push_back(d);
  }
  return fmt::format("({},)", fmt::join(dims, ", "));
}

std::string describe(const ReduceOp& op, const AxesCase& c, bool keepdim) {
  return fmt::format("{} x{} axes [{}] keepdim={}", op.name, shape_str(c.shape), fmt::join(c.axes, ", "), keepdim);
}

const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("reductions: gradcheck over shapes, axes and keepdim", "[reduction]") {
  Generator gen(11);
  for (const auto& op : kOps)
    for (const auto& c : kAxes)
      for (bool keepdim : {false, true}) {
        INFO(describe(op, c, keepdim));
        // randn values are distinct, so max has a unique arg-max and is differentiable there.
        Tensor x = test::randn_leaf(c.shape, gen);
        test::require_gradcheck([&](const Tensors& in) { return op.fn(in[0], c.axes, keepdim); }, {x});
      }
}

TEST_CASE("reductions: output shapes follow keepdim", "[reduction]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  CHECK(sum(x).shape() == Shape{});
  CHECK(sum(x, {}, true).shape() == Shape{1, 1, 1});
  CHECK(mean(x, {-1}).shape() == Shape{2, 3});
  CHECK(max(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(logsumexp(x, {2, 0}).shape() == Shape{3});
  CHECK(sum(Tensor::scalar(2.0), {0}, true).shape() == Shape{});
}

TEST_CASE("reductions: values and gradients match PyTorch", "[reduction][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("reduction_") + std::string(dtype_name(dt)));
    Generator gen(12);
    int k = 0;
    for (const auto& op : kOps)
      for (const auto& c : kAxes)
        for (bool keepdim : {false, true}) {
          Tensor x = test::randn_leaf(c.shape, gen, dt);  // no ties: torch.amax splits ties evenly
          batch.add(fmt::format("{}_{}", op.name, k++),
                    fmt::format("out = {}(x, dim={}, keepdim={})", op.torch, torch_dims(c), keepdim ? "True" : "False"),
                    {{"x", x}}, [&](const Tensors& in) { return op.fn(in[0], c.axes, keepdim); });
        }
    // Large inputs: a naive log(sum(exp(x))) overflows; columns and gathered layouts too.
    Tensor big = test::uniform_leaf({3, 50}, gen, 1e4 - 5, 1e4 + 5, dt);
    batch.add("logsumexp_1e4_rows", "out = torch.logsumexp(x, dim=1)", {{"x", big}},
              [](const Tensors& in) { return logsumexp(in[0], {1}); });
    batch.add("logsumexp_1e4_cols", "out = torch.logsumexp(x, dim=0)", {{"x", big}},
              [](const Tensors& in) { return logsumexp(in[0], {0}); });
    Tensor bigneg = test::uniform_leaf({2, 3, 4}, gen, -1e4 - 5, -1e4 + 5, dt);
    batch.add("logsumexp_-1e4_gather", "out = torch.logsumexp(x, dim=(0, 2), keepdim=True)", {{"x", bigneg}},
              [](const Tensors& in) {
                return logsumexp(in[0], {0, 2}, true);
              });
    // Longer rows and columns than one block of the column kernels (256 columns).
    Tensor wide = test::randn_leaf({7, 300}, gen, dt);
    for (const auto& op : kOps)
      batch.add(fmt::format("{}_wide_cols", op.name), fmt::format("out = {}(x, dim=(0,))", op.torch), {{"x", wide}},
                [&](const Tensors& in) { return op.fn(in[0], {0}, false); });
    // Rows longer than a vector batch, with a tail (the vectorised row kernels).
    Tensor longrows = test::randn_leaf({3, 301}, gen, dt);
    for (const auto& op : kOps)
      batch.add(fmt::format("{}_long_rows", op.name), fmt::format("out = {}(x, dim=(-1,), keepdim=True)", op.torch),
                {{"x", longrows}}, [&](const Tensors& in) { return op.fn(in[0], {-1}, true); });
    // A composite: the gradient of each op flows through another op.
    Tensor y = test::randn_leaf({4, 5}, gen, dt);
    batch.add(
        "composite", "out = torch.logsumexp(y, 1) * torch.amax(y, 0).sum() - torch.mean(y * y, 0).sum()", {{"y", y}},
        [](const Tensors& in) { return logsumexp(in[0], {1}) * sum(max(in[0], {0})) - sum(mean(in[0] * in[0], {0})); });
    batch.run();
  }
}

TEST_CASE("reductions: bit-identical with 1 and 2 threads", "[reduction][threads]") {
  Generator gen(13);
  const Tensor a0 = Tensor::randn({512, 1024}, gen, kFloat32);
  const Tensor b0 = Tensor::randn({16, 64, 512}, gen, kFloat64);
  const Tensor c0 = Tensor::randn({1000000}, gen, kFloat32);
  test::require_thread_deterministic([&] {
    Tensors out;
    for (const auto& op : kOps) {
      for (const auto& axes :
           {std::vector<std::int64_t>{1}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{}}) {
        Tensor a = a0.clone_data().set_requires_grad();
        Tensor y = op.fn(a, axes, false);
        y.backward(Tensor::ones(y.shape(), kFloat32));
        out.push_back(y);
        out.push_back(a.grad());
      }
      Tensor b = b0.clone_data().set_requires_grad();
      Tensor y = op.fn(b, {0, 2}, true);  // the gathered layout
      y.backward(Tensor::ones(y.shape(), kFloat64));
      out.push_back(y);
      out.push_back(b.grad());
    }
    // A full sum of 10^6 elements: split into fixed chunks, added left to right.
    Tensor c = c0.clone_data().set_requires_grad();
    Tensor s = sum(c);
    s.backward();
    out.push_back(s);
    out.push_back(c.grad());
    out.push_back(mean(c));
    return out;
  });
}

TEST_CASE("reductions: a large sum is accurate", "[reduction]") {
  // 10^6 float32 values summed in chunks with several accumulators: compare with a float64 sum.
  Generator gen(14);
  const Tensor x = Tensor::rand({1000000}, gen, kFloat32);
  const float* p = x.data<float>();
  double ref = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) ref += p[i];
  CHECK(std::abs(sum(x).item() - ref) <= 1e-5 * ref);
  CHECK(std::abs(mean(x).item() - ref / 1e6) <= 1e-5 * ref / 1e6);
}

TEST_CASE("max: ties share the gradient evenly, as torch.amax (Note [Tie rules])", "[reduction][ties]") {
  SECTION("contiguous rows") {
    Tensor x = Tensor::of({{1, 3, 3, 2}, {5, 5, 5, 5}}, kFloat64).set_requires_grad();
    max(x, {1}).backward(Tensor::of({10, 20}, kFloat64));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 5, 5, 0, 5, 5, 5, 5});
  }
  SECTION("columns") {
    Tensor x = Tensor::of({{1, 4}, {2, 4}, {2, 0}}, kFloat64).set_requires_grad();
    max(x, {0}).backward(Tensor::of({10, 20}, kFloat64));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 10, 5, 10, 5, 0});
  }
  SECTION("gathered (axes 0 and 2 of a 3-d tensor)") {
    // x[i][j][k]; for j = 0 the maximum 7 sits at (0,0,1) and (1,0,0): each gets half.
    Tensor x = Tensor::from_vector({0, 7, 1, 1, 7, 0, 1, 2}, {2, 2, 2}, kFloat64).set_requires_grad();
    max(x, {0, 2}).backward(Tensor::of({1, 1}, kFloat64));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0, 0, 0.5, 0, 0, 1});
  }
  SECTION("whole tensor, three ties: g / 3 each") {
    Tensor x = Tensor::of({{0, 9}, {9, 9}}, kFloat64).set_requires_grad();
    max(x).backward(Tensor::scalar(3.0, kFloat64));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 1, 1});
  }
  SECTION("long rows (vectorised kernel): ties and NaN") {
    for (Dtype dt : {kFloat32, kFloat64}) {
      std::vector<double> v(2 * 37);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7);
      v[20] = std::nan("");  // row 0: the NaN wins, at column 20
      v[37 + 10] = 100;      // row 1: a tie at columns 10 and 30: half each
      v[37 + 30] = 100;
      Tensor x = Tensor::from_vector(v, {2, 37}, dt).set_requires_grad();
      Tensor y = max(x, {1});
      CHECK(std::isnan(y.to_vector()[0]));
      CHECK(y.to_vector()[1] == 100.0);
      y.backward(Tensor::ones({2}, dt));
      const auto g = x.grad().to_vector();
      for (std::size_t i = 0; i < g.size(); ++i)
        CHECK(g[i] == (i == 20 ? 1.0 : (i == 37 + 10 || i == 37 + 30) ? 0.5 : 0.0));
    }
  }
  SECTION("NaN propagates; the NaNs share the gradient, as torch.max()") {
    Tensor x = Tensor::of({1, std::nan(""), 2, std::nan("")}, kFloat64).set_requires_grad();
    Tensor y = max(x);
    CHECK(std::isnan(y.item()));
    y.backward();
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0, 0.5});
  }
  SECTION("create_graph: the same shares, recorded") {
    Tensor x = Tensor::of({{1, 3, 3}}, kFloat64).set_requires_grad();
    const Tensors g = grad({sum(mul(max(x, {1}), max(x, {1})))}, {x}, {}, std::nullopt, /*create_graph=*/true);
    CHECK(g[0].requires_grad());
    CHECK(g[0].detach().to_vector() == std::vector<double>{0, 3, 3});  // d(y^2) = 2y = 6, half each
  }
}

TEST_CASE("logsumexp: infinities behave like torch", "[reduction]") {
  // Rows: all -inf, finite with -inf, +inf with finite, and a row at 1e4 in float32.
  for (Dtype dt : {kFloat32, kFloat64}) {
    Tensor x = Tensor::of({{-kInf, -kInf}, {1, -kInf}, {kInf, 1}, {1e4, 1e4}}, dt).set_requires_grad();
    Tensor y = logsumexp(x, {1});
    const auto v = y.to_vector();
    CHECK(v[0] == -kInf);                                      // log(0)
    CHECK(v[1] == 1.0);                                        // exp(-inf) adds nothing
    CHECK(v[2] == kInf);                                       // torch: inf
    CHECK(v[3] == Approx(1e4 + std::log(2.0)).epsilon(1e-6));  // no overflow
    y.backward(Tensor::ones({4}, dt));
    const auto g = x.grad().to_vector();
    CHECK((std::isnan(g[0]) && std::isnan(g[1])));  // torch 1.13: exp(-inf - -inf) = NaN
    CHECK((g[2] == 1.0 && g[3] == 0.0));
    CHECK(std::isnan(g[4]));  // torch: exp(inf - inf)
    CHECK(g[5] == 0.0);
    CHECK((g[6] == Approx(0.5).epsilon(1e-3) && g[7] == Approx(0.5).epsilon(1e-3)));  // y rounded at 1e4
  }
  // Columns and gathered layouts use another kernel: same semantics.
  Tensor xc = Tensor::of({{-kInf, 1, kInf}, {-kInf, -kInf, 0}}, kFloat64);
  const auto vc = logsumexp(xc, {0}).to_vector();
  CHECK(vc[0] == -kInf);
  CHECK(vc[1] == 1.0);
  CHECK(vc[2] == kInf);
}

TEST_CASE("reductions over empty axes", "[reduction]") {
  Tensor x = Tensor::zeros({3, 0}, kFloat64).set_requires_grad();
  Tensor s = sum(x, {1});
  CHECK(s.shape() == Shape{3});
  CHECK(s.to_vector() == std::vector<double>{0, 0, 0});
  s.backward(Tensor::ones({3}, kFloat64));
  CHECK(x.grad().shape() == Shape{3, 0});
  CHECK(sum(x).item() == 0.0);
  for (double v : mean(x, {1}).to_vector()) CHECK(std::isnan(v));  // 0/0, like torch.mean
  for (double v : logsumexp(x, {1}).to_vector()) CHECK(v == -kInf);
  // Reducing a non-empty axis of an empty tensor gives an empty result, not an error.
  CHECK(max(x, {0}).shape() == Shape{0});
  test::require_error([&] { max(x, {1}); }, {"max", "axis 1", "size 0", "(3, 0)"});
  test::require_error([&] { max(x); }, {"max", "(3, 0)"});
}

TEST_CASE("reductions: bad inputs raise xgrad::Error naming op, axis and shape", "[reduction][errors]") {
  Tensor x = Tensor::zeros({2, 3});
  for (const auto& op : kOps) {
    INFO(op.name);
    test::require_error([&] { op.fn(x, {2}, false); }, {op.name, "axis 2", "(2, 3)"});
    test::require_error([&] { op.fn(x, {-3}, false); }, {op.name, "axis -3", "(2, 3)"});
    test::require_error([&] { op.fn(x, {1, -1}, true); }, {op.name, "twice", "[1, -1]", "(2, 3)"});
    test::require_error([&] { op.fn(Tensor(), {}, false); }, {op.name, "undefined"});
    test::require_error([&] { op.fn(Tensor::scalar(1.0), {1}, false); }, {op.name, "axis 1", "()"});
  }
}

// ---- min, prod, var, std, norm, cumsum (the op table checks parity and gradients) ---------------
TEST_CASE("prod's gradient is exact with one and with two zeros", "[reduction][prod]") {
  using V = std::vector<double>;
  Tensor x = Tensor::from_vector({2, 0, 3, 4, 0, 0, 5, 6, 1}, {3, 3}, kFloat64);
  x.set_requires_grad();
  const Tensor y = prod(x, {1});
  CHECK(y.to_vector() == V{0, 0, 30});
  y.backward(Tensor::from_vector({1, 1, 1}, {3}, kFloat64));
  // row 0: only the zero gets a gradient (2 * 3); row 1: two zeros, all 0; row 2: products of the others
  CHECK(x.grad().to_vector() == V{0, 6, 0, 0, 0, 0, 6, 5, 30});
  CHECK(prod(Tensor::zeros({0, 3}, kFloat64), {0}).to_vector() == V{1, 1, 1});
}

TEST_CASE("norm, std: the gradient at a zero result is 0, as torch", "[reduction][norm]") {
  using V = std::vector<double>;
  Tensor x = Tensor::zeros({2, 3}, kFloat64);
  x.set_requires_grad();
  sum(norm(x, 2.0, {1})).backward();
  CHECK(x.grad().to_vector() == V(6, 0.0));
  x.zero_grad();
  sum(xgrad::std(x, {1})).backward();
  CHECK(x.grad().to_vector() == V(6, 0.0));
  x.zero_grad();
  sum(norm(x, 1.0)).backward();
  CHECK(x.grad().to_vector() == V(6, 0.0));
  // inf-norm: ties split the gradient evenly, with the sign of each element
  Tensor t = Tensor::from_vector({-2, 1, 2}, {3}, kFloat64);
  t.set_requires_grad();
  norm(t, std::numeric_limits<double>::infinity()).backward();
  CHECK(t.grad().to_vector() == V{-0.5, 0, 0.5});
  CHECK(norm(Tensor::from_vector({3, 4}, {2}, kFloat64), "fro").item() == 5.0);
  test::require_error(
      [] {
        norm(Tensor::zeros({0, 2}), std::numeric_limits<double>::infinity(), {0});
      },
      {"norm", "size 0"});
}

TEST_CASE("min shares ties evenly, var and std use the correction, cumsum runs along the dim", "[reduction][min]") {
  using V = std::vector<double>;
  Tensor x = Tensor::from_vector({3, 1, 1, 2}, {4}, kFloat64);
  x.set_requires_grad();
  min(x).backward();
  CHECK(x.grad().to_vector() == V{0, 0.5, 0.5, 0});
  const Tensor v = Tensor::from_vector({1, 2, 3, 4}, {4}, kFloat64);
  CHECK(var(v).item() == Approx(5.0 / 3));
  CHECK(var(v, {}, 0).item() == Approx(1.25));
  CHECK(xgrad::std(v, {0}, 0, true).shape() == Shape{1});
  CHECK(std::isnan(var(Tensor::ones({1}, kFloat64)).item()));  // K = correction: 0/0, as torch
  CHECK(cumsum(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64), 0).to_vector() == V{1, 2, 3, 5, 7, 9});
  CHECK(cumsum(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64), -1).to_vector() == V{1, 3, 6, 4, 9, 15});
  test::require_error([] { min(Tensor::zeros({2, 0}), {1}); }, {"min", "size 0", "(2, 0)"});
}

// ---- integer dtypes: max, min, argmax, argmin and sum, exact (as torch) --------------------------
namespace {
constexpr std::int64_t kB = std::int64_t{1} << 53;  // above it a double (and float32 from 2^24) rounds
Tensor longs_exact(const std::vector<std::int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }
std::vector<std::int64_t> exact(const Tensor& t) {
  REQUIRE(t.dtype() == kInt64);
  return {t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel()};
}
using L = std::vector<std::int64_t>;
}  // namespace

TEST_CASE("max, min, argmax, argmin and sum of int64 are exact beyond 2^53, in torch's dtypes", "[reduction][dtype]") {
  // In doubles B and B + 1 are one value, and -B, -(B + 1) too: a reduction through floats would
  // pick the wrong element and round the result.
  const Tensor x = longs_exact({kB, kB + 1, kB - 1, -kB, -(kB + 1), kB + 3}, {2, 3});
  CHECK(exact(max(x)) == L{kB + 3});
  CHECK(exact(min(x)) == L{-(kB + 1)});
  CHECK(exact(max(x, {1})) == L{kB + 1, kB + 3});
  CHECK(exact(min(x, {1})) == L{kB - 1, -(kB + 1)});
  CHECK(exact(max(x, {0})) == L{kB, kB + 1, kB + 3});  // columns
  CHECK(exact(min(x, {0}, true)) == L{-kB, -(kB + 1), kB - 1});
  CHECK(min(x, {0}, true).shape() == Shape{1, 3});
  const Tensor x3 = longs_exact({kB, kB + 1, kB - 1, 5, 1, 2, -kB, -(kB + 1), kB + 3, 0, 3, 4}, {2, 3, 2});
  CHECK(exact(max(x3, {0, 2})) == L{kB + 1, kB + 3, 4});  // non-adjacent axes: the gathered layout
  CHECK(exact(min(x3, {0, 2})) == L{-(kB + 1), 0, 1});
  const auto [mv, mi] = max(x, 1);
  CHECK(exact(mv) == L{kB + 1, kB + 3});
  CHECK(exact(mi) == L{1, 2});
  const auto [nv, ni] = min(x, -1, true);
  CHECK(exact(nv) == L{kB - 1, -(kB + 1)});
  CHECK(exact(ni) == L{2, 1});
  CHECK(nv.shape() == Shape{2, 1});
  CHECK(exact(argmax(x, 1)) == L{1, 2});
  CHECK(exact(argmin(x, 1)) == L{2, 1});
  CHECK(exact(argmax(x)) == L{5});
  CHECK(exact(argmin(x)) == L{4});
  CHECK(exact(sum(x)) == L{2 * kB + 2});
  CHECK(exact(sum(x, {1})) == L{3 * kB, -kB + 2});
  CHECK_FALSE(max(x).requires_grad());
  // Other integer and bool dtypes keep theirs, as torch.amax / torch.amin.
  CHECK(max(Tensor::of({0, 1, 0}, kBool)).dtype() == kBool);
  CHECK(max(Tensor::of({0, 1, 0}, kBool)).item() == 1.0);
  CHECK(min(Tensor::of({200, 7, 9}, kUInt8)).dtype() == kUInt8);
  CHECK(min(Tensor::of({200, 7, 9}, kUInt8)).item() == 7.0);
  CHECK(max(Tensor::of({-5, -2}, kInt32), {0}).item<std::int32_t>() == -2);
  // As for floats, an empty reduced axis has no extremum.
  test::require_error([] { max(Tensor::zeros({2, 0}, kInt64), {1}); }, {"max", "size 0", "(2, 0)"});
  test::require_error([] { min(Tensor::zeros({2, 0}, kInt64), {1}); }, {"min", "size 0", "(2, 0)"});
  test::require_error([] { max(Tensor::zeros({2, 0}, kInt64), 1); }, {"max", "size 0", "(2, 0)"});
  test::require_error([] { max(Tensor::zeros({2, 3}, kInt64), {2}); }, {"max", "axis 2", "(2, 3)"});

  // torch agrees, dtypes included (the parity compares integer results exactly).
  ParityBatch batch("reduction_int64");
  const auto add = [&](const std::string& name, const std::string& torch,
                       const std::function<Tensor(const Tensors&)>& f) {
    const Dtype dt = f({x}).dtype();
    batch.add(name, torch + fmt::format("\nassert out.dtype == torch.{}, out.dtype", dtype_name(dt)), {{"x", x, false}},
              f);
  };
  add("amax", "out = torch.amax(x, 1)", [](const Tensors& in) { return max(in[0], {1}); });
  add("amin_all", "out = torch.amin(x, (0, 1))", [](const Tensors& in) { return min(in[0]); });
  add("max_values", "out = torch.max(x, 1)[0]", [](const Tensors& in) { return std::get<0>(max(in[0], 1)); });
  add("min_indices", "out = torch.min(x, 0)[1]", [](const Tensors& in) { return std::get<1>(min(in[0], 0)); });
  add("argmax", "out = torch.argmax(x, 1)", [](const Tensors& in) { return argmax(in[0], 1); });
  add("argmin_all", "out = torch.argmin(x)", [](const Tensors& in) { return argmin(in[0]); });
  add("sum", "out = x.sum(1)", [](const Tensors& in) { return sum(in[0], {1}); });
  batch.run();
}

TEST_CASE("max and min of int64: bit-identical with 1 and 2 threads", "[reduction][dtype][threads]") {
  Generator gen(15);
  Tensor a = Tensor::empty({300, 500}, kInt64);
  for (std::int64_t i = 0; i < a.numel(); ++i)
    a.data<std::int64_t>()[i] = kB + static_cast<std::int64_t>(gen.uniform() * 1000.0) - 500;
  test::require_thread_deterministic([&] {
    Tensors out;
    for (const auto& axes : {L{1}, L{0}, L{}}) {
      out.push_back(max(a, axes));
      out.push_back(min(a, axes));
    }
    out.push_back(std::get<1>(max(a, 0)));
    out.push_back(max(reshape(a, {30, 10, 500}), {0, 2}));
    return out;
  });
}
