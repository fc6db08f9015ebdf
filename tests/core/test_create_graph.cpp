// Higher-order gradients (Note [Create graph] in core/autograd.hpp): create_graph in grad() and
// backward(), saved outputs seen with their history, leaf .grad with history, the refusal of ops
// whose backward is not differentiable, gradgradcheck, the functional API (jvp, vhp, hvp, hessian)
// against closed forms, and second derivatives against torch.autograd.grad(..., create_graph=True).
#include <cmath>

#include "support.hpp"
#include "xgrad/core/functional.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"
#include "xgrad/ops/unary_math.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {
std::vector<double> vec(const Tensor& t) { return t.to_vector(); }

// y = x^2 whose backward claims to be differentiable but returns 2 x g with x detached: the first
// derivative is right, the second (2) comes out as 0. gradgradcheck must catch it.
struct WrongSquare : Function<WrongSquare> {
  static constexpr const char* kName = "wrong_square";
  static constexpr bool kDifferentiableBackward = true;
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return mul(x, x);
  }
  Tensors backward(const Tensors& g) { return {mul(g[0], mul(saved(0).detach(), 2.0))}; }
};

// The same op without the declaration: create_graph must be refused.
struct PlainSquare : Function<PlainSquare> {
  static constexpr const char* kName = "plain_square";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return mul(x, x);
  }
  Tensors backward(const Tensors& g) { return {mul(g[0], mul(saved(0), 2.0))}; }
};
}  // namespace

TEST_CASE("grad and backward take torch's parameters in torch's order", "[create_graph][grad]") {
  // torch::autograd::grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused):
  // create_graph is the 5th positional argument, allow_unused the 6th.
  Tensor x = Tensor::of({0.5, 2.0}, kFloat64).set_requires_grad();
  Tensor unused = Tensor::of({1.0}, kFloat64).set_requires_grad();
  const Tensors g = xgrad::grad({sum(x * x * x)}, {x}, {}, std::nullopt, true);  // 3x^2, recorded
  REQUIRE(g.size() == 1);
  CHECK(g[0].grad_fn() != nullptr);
  CHECK(vec(g[0]) == std::vector<double>{0.75, 12.0});
  CHECK(vec(xgrad::grad({sum(g[0])}, {x})[0]) == std::vector<double>{3.0, 12.0});  // 6x

  const Tensors gu = xgrad::grad({sum(x * x)}, {x, unused}, {}, std::nullopt, false, true);
  CHECK(gu[0].grad_fn() == nullptr);  // create_graph false: no history
  CHECK(vec(gu[0]) == std::vector<double>{1.0, 4.0});
  CHECK_FALSE(gu[1].defined());
  // A true 5th argument is create_graph, not allow_unused: the unused input is still an error.
  require_error(
      [&] {
        (void)xgrad::grad({sum(x * x)}, {x, unused}, {}, std::nullopt, true);
      },
      {"grad", "not used", "allow_unused"});

  // Tensor::backward(gradient, retain_graph, create_graph), as torch's.
  Tensor y = sum(x * x * x);
  y.backward(Tensor(), std::nullopt, true);
  CHECK(x.grad().grad_fn() != nullptr);
  CHECK(vec(x.grad()) == std::vector<double>{0.75, 12.0});
  x.zero_grad();  // .grad's graph holds x: a reference cycle (as in torch) until .grad is cleared
}

TEST_CASE("create_graph: derivatives of x^3 to third order, through grad()", "[create_graph]") {
  const Tensor x = Tensor::of({0.5, -1.5, 2.0}, kFloat64).set_requires_grad();
  const Tensor y = sum(pow(x, 3.0));
  const Tensor g1 = xgrad::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  REQUIRE(g1.requires_grad());
  REQUIRE(g1.grad_fn() != nullptr);
  const Tensor g2 = xgrad::grad({sum(g1)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];  // 6x
  const Tensor g3 = xgrad::grad({sum(g2)}, {x}, {})[0];                                       // 6
  const auto xv = vec(x), v1 = vec(g1), v2 = vec(g2), v3 = vec(g3);
  for (int i = 0; i < 3; ++i) {
    CHECK(v1[i] == Approx(3 * xv[i] * xv[i]).epsilon(1e-14));
    CHECK(v2[i] == Approx(6 * xv[i]).epsilon(1e-14));
    CHECK(v3[i] == Approx(6.0).epsilon(1e-14));
  }
  // without create_graph the gradient has no history
  const Tensor plain = xgrad::grad({sum(pow(x, 3.0))}, {x})[0];
  CHECK_FALSE(plain.requires_grad());
}

TEST_CASE("create_graph: ops that save their own output see it with its history", "[create_graph]") {
  const Tensor x = Tensor::of({0.3, -0.7, 1.1}, kFloat64).set_requires_grad();
  // exp saves its output: d2/dx2 exp = exp
  const Tensor ge = xgrad::grad({sum(exp(x))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor he = xgrad::grad({sum(ge)}, {x})[0];
  // tanh saves its output: d2/dx2 tanh = -2 tanh (1 - tanh^2)
  const Tensor gt = xgrad::grad({sum(tanh(x))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor ht = xgrad::grad({sum(gt)}, {x})[0];
  // sigmoid: s (1 - s) (1 - 2 s); sqrt: -x^(-3/2) / 4 (on |x|)
  const Tensor gs = xgrad::grad({sum(sigmoid(x))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor hs = xgrad::grad({sum(gs)}, {x})[0];
  const auto xv = vec(x);
  for (int i = 0; i < 3; ++i) {
    const double t = std::tanh(xv[i]), s = 1 / (1 + std::exp(-xv[i]));
    CHECK(vec(he)[i] == Approx(std::exp(xv[i])).epsilon(1e-14));
    CHECK(vec(ht)[i] == Approx(-2 * t * (1 - t * t)).epsilon(1e-13));
    CHECK(vec(hs)[i] == Approx(s * (1 - s) * (1 - 2 * s)).epsilon(1e-13));
  }
}

TEST_CASE("create_graph in backward(): .grad carries history, retain_graph defaults to true", "[create_graph]") {
  Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  const Tensor y = sum(mul(mul(x, x), x));  // x used three times: the engine sums recorded gradients
  y.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  const Tensor g = x.grad();
  REQUIRE(g.grad_fn() != nullptr);
  CHECK(vec(g) == std::vector<double>{3.0, 12.0});
  // the graph was retained: a second backward works
  y.backward(Tensor(), std::nullopt, true);
  CHECK(vec(x.grad()) == std::vector<double>{6.0, 24.0});  // accumulated with a recorded add
  REQUIRE(x.grad().grad_fn() != nullptr);
  // differentiate the accumulated .grad: d/dx sum(2 * 3x^2) = 12 x
  const Tensor acc = x.grad();
  x.zero_grad();
  sum(acc).backward();
  CHECK(vec(x.grad()) == std::vector<double>{12.0, 24.0});
  // retain_graph=false explicitly with create_graph frees the graph
  const Tensor z = Tensor::of({1.0}, kFloat64).set_requires_grad();
  const Tensor w = sum(exp(z));
  (void)xgrad::grad({w}, {z}, {}, /*retain_graph=*/false, /*create_graph=*/true);
  require_error([&] { (void)xgrad::grad({w}, {z}); }, {"exp", "second time"});
}

TEST_CASE("create_graph: an op without a differentiable backward refuses, naming the op", "[create_graph]") {
  const Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  const Tensor y = sum(apply<PlainSquare>(x));
  require_error([&] { (void)xgrad::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true); },
                {"plain_square", "create_graph", "not supported"});
  require_error([&] { sum(apply<PlainSquare>(x)).backward(Tensor(), std::nullopt, true); },
                {"plain_square", "create_graph", "not supported"});
  // first order still works on the same graph
  CHECK(vec(xgrad::grad({y}, {x})[0]) == std::vector<double>{2.0, 4.0});
}

TEST_CASE("create_graph: third derivatives through the gather-type ops and their recorded scatters", "[create_graph]") {
  // Each P rearranges x (a permutation, or a round trip such as cumsum then differences), so
  // f = sum(P(x)^4) has the derivatives 4x^3, 12x^2 and 24x: the third one runs through the first
  // backward's scatter recorded as an op, its backward (the gather) recorded in turn, and back.
  const Tensor x = Tensor::of({0.5, -1.5, 2.0, 0.25, -0.75}, kFloat64).set_requires_grad();
  const Tensor perm = Tensor::of({3, 0, 4, 1, 2}, kFloat64).to(kInt64);
  const Tensor all = Tensor::ones({5}, kBool), z = Tensor::zeros({5}, kFloat64);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
      {"flip", [](const Tensor& t) { return flip(t, {0}); }},
      {"roll", [](const Tensor& t) { return roll(t, {2}, {0}); }},
      {"sort", [](const Tensor& t) { return std::get<0>(sort(t, 0, true)); }},
      {"topk", [](const Tensor& t) { return std::get<0>(topk(t, 5, 0, false)); }},
      {"gather", [&](const Tensor& t) { return gather(t, 0, perm); }},
      {"index", [&](const Tensor& t) { return index(t, perm); }},
      {"take_along_dim", [&](const Tensor& t) { return take_along_dim(t, perm); }},
      {"masked_select", [&](const Tensor& t) { return masked_select(t, all); }},
      {"scatter_add", [&](const Tensor& t) { return scatter_add(z, 0, perm, t); }},
      {"index_add", [&](const Tensor& t) { return index_add(z, 0, perm, t); }},
      {"repeat_slice", [](const Tensor& t) { return slice(repeat(t, {2}), 0, 3, 8); }},
      {"split_concat",
       [](const Tensor& t) {
         const Tensors ps = split(t, std::vector<std::int64_t>{2, 3}, 0);
         return concat({ps[1], ps[0]}, 0);
       }},
      {"cumsum_pad",
       [](const Tensor& t) {
         const Tensor c = cumsum(t, 0);
         return c - pad(slice(c, 0, 0, 4), {1, 0});
       }},
  };
  const std::vector<double> xv = vec(x);
  for (const auto& [name, P] : cases) {
    INFO(name);
    const Tensor g1 = xgrad::grad({sum(pow(P(x), 4.0))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor g2 = xgrad::grad({sum(g1)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor g3 = xgrad::grad({sum(g2)}, {x})[0];
    const auto v1 = vec(g1), v2 = vec(g2), v3 = vec(g3);
    REQUIRE(v3.size() == xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) {
      CHECK(v1[i] == Approx(4 * std::pow(xv[i], 3)).epsilon(1e-13));
      CHECK(v2[i] == Approx(12 * xv[i] * xv[i]).epsilon(1e-13));
      CHECK(v3[i] == Approx(24 * xv[i]).epsilon(1e-13));
    }
  }
}

TEST_CASE("gradgradcheck passes on correct second derivatives and catches a wrong one", "[create_graph]") {
  Generator gen(11);
  const Tensor W = test::randn_leaf({3, 4}, gen), x = test::randn_leaf({4, 2}, gen), b = test::randn_leaf({3}, gen);
  const auto f = [](const Tensors& in) {
    const Tensor h = tanh(matmul(in[0], in[1]));                                   // (3, 2)
    return log_softmax(add(transpose(h, 0, 1), in[2]), 1) * sigmoid(sum(h, {1}));  // (2, 3)
  };
  const GradcheckReport ok = gradgradcheck(f, {W, x, b});
  INFO(ok.message);
  CHECK(ok.ok);
  const Tensor z = test::randn_leaf({3}, gen);
  const GradcheckReport bad = gradgradcheck([](const Tensors& in) { return apply<WrongSquare>(in[0]); }, {z});
  INFO(bad.message);
  CHECK_FALSE(bad.ok);
  require_error([&] { (void)gradgradcheck([](const Tensors& in) { return in[0]; }, {Tensor::ones({2})}); },
                {"gradgradcheck", "float64"});
}

TEST_CASE("hessian, hvp, vhp and jvp against closed forms", "[create_graph][functional]") {
  // f(x, y) = sum(x^3) + x0 x1 y + y^2  (x of 2, y of 1)
  const auto f = [](const Tensors& in) {
    const Tensor x = in[0], y = in[1];
    const Tensor x0 = slice(x, 0, 0, 1), x1 = slice(x, 0, 1, 2);
    return sum(pow(x, 3.0)) + sum(x0 * x1 * y) + sum(y * y);
  };
  const Tensor x = Tensor::of({0.5, -2.0}, kFloat64), y = Tensor::of({1.5}, kFloat64);
  const double a = 0.5, c = -2.0, d = 1.5;
  // H = [[6a, d, c], [d, 6c, a], [c, a, 2]]
  const double H[3][3] = {{6 * a, d, c}, {d, 6 * c, a}, {c, a, 2}};
  const std::vector<Tensors> h = hessian(f, {x, y});
  REQUIRE(h.size() == 2);
  CHECK(h[0][0].shape() == Shape{2, 2});
  CHECK(h[0][1].shape() == Shape{2, 1});
  CHECK(h[1][0].shape() == Shape{1, 2});
  CHECK(h[1][1].shape() == Shape{1, 1});
  const auto h00 = vec(h[0][0]), h01 = vec(h[0][1]), h10 = vec(h[1][0]), h11 = vec(h[1][1]);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) CHECK(h00[i * 2 + j] == Approx(H[i][j]).epsilon(1e-14));
    CHECK(h01[i] == Approx(H[i][2]).epsilon(1e-14));
    CHECK(h10[i] == Approx(H[2][i]).epsilon(1e-14));
  }
  CHECK(h11[0] == Approx(2.0));
  const Tensor vx = Tensor::of({0.25, -1.0}, kFloat64), vy = Tensor::of({2.0}, kFloat64);
  const double v[3] = {0.25, -1.0, 2.0};
  const auto [val, hv] = hvp(f, {x, y}, {vx, vy});
  const auto [val2, vh] = vhp(f, {x, y}, {vx, vy});
  CHECK(val.item() == Approx(a * a * a + c * c * c + a * c * d + d * d));
  CHECK(val2.item() == val.item());
  for (int i = 0; i < 3; ++i) {
    double want = 0;
    for (int j = 0; j < 3; ++j) want += H[i][j] * v[j];
    const double got_h = i < 2 ? vec(hv[0])[i] : vec(hv[1])[0];
    const double got_v = i < 2 ? vec(vh[0])[i] : vec(vh[1])[0];
    CHECK(got_h == Approx(want).epsilon(1e-14));
    CHECK(got_v == Approx(want).epsilon(1e-14));
  }
  // jvp of g(W, x) = tanh(W x) equals the Jacobian times v
  Generator gen(5);
  const Tensor W = Tensor::randn({3, 4}, gen, kFloat64), xx = Tensor::randn({4}, gen, kFloat64);
  const Tensor vW = Tensor::randn({3, 4}, gen, kFloat64), vxx = Tensor::randn({4}, gen, kFloat64);
  const auto g = [](const Tensors& in) { return tanh(matmul(in[0], in[1])); };
  const auto [out, jv] = jvp(g, {W, xx}, {vW, vxx});
  const Tensors J = jacobian(g, {W, xx});  // (3, 3, 4) and (3, 4)
  const auto jw = vec(J[0]), jx = vec(J[1]), vw = vec(vW), vxv = vec(vxx), jvv = vec(jv);
  REQUIRE(jv.shape() == Shape{3});
  for (int i = 0; i < 3; ++i) {
    double want = 0;
    for (int k = 0; k < 12; ++k) want += jw[i * 12 + k] * vw[k];
    for (int k = 0; k < 4; ++k) want += jx[i * 4 + k] * vxv[k];
    CHECK(jvv[i] == Approx(want).epsilon(1e-13));
  }
  require_error([&] { (void)hvp(f, {x, y}, {vx}); }, {"hvp", "'v'", "1 tensors for 2 inputs"});
  require_error([&] { (void)vhp(f, {x, y}, {vx, vx}); }, {"vhp", "'v'", "(1,)", "(2,)"});
  require_error([&] { (void)hessian(g, {W, xx}); }, {"hessian", "one-element", "(3,)"});
  require_error([&] { (void)jvp(g, {W, xx}, {vW}); }, {"jvp", "'v'"});
  require_error([&] { (void)hvp([](const Tensors& in) { return sum(apply<PlainSquare>(in[0])); }, {xx}, {vxx}); },
                {"plain_square", "create_graph"});
}

TEST_CASE("second derivatives match torch.autograd.grad(..., create_graph=True)", "[create_graph][parity]") {
  // Each case's output is the first gradient computed with create_graph (seeded by an input v); the
  // harness then backpropagates into it, so the compared gradients are second derivatives (with
  // respect to the inputs and to v).
  Generator gen(21);
  test::ParityBatch batch("create_graph");
  const auto first = [](const std::function<Tensor(const Tensors&)>& f, std::size_t n) {
    return [f, n](const Tensors& in) {
      const Tensors xs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
      const Tensor y = f(xs);
      return xgrad::grad({y}, xs, {in[n]}, std::nullopt, /*create_graph=*/true)[0];
    };
  };
  const std::string G = "out = torch.autograd.grad(y, a, v, create_graph=True)[0]";
  {
    const Tensor a = Tensor::randn({3, 4}, gen, kFloat64), b = Tensor::randn({4, 2}, gen, kFloat64),
                 v = Tensor::randn({3, 2}, gen, kFloat64);
    batch.add("matmul_tanh", "y = torch.tanh(a @ b)\n" + G, {{"a", a}, {"b", b}, {"v", v}},
              first([](const Tensors& in) { return tanh(matmul(in[0], in[1])); }, 2));
  }
  {
    const Tensor a = Tensor::randn({2, 5}, gen, kFloat64), v = Tensor::randn({2, 5}, gen, kFloat64);
    batch.add("softmax", "y = torch.softmax(a, 1)\n" + G, {{"a", a}, {"v", v}},
              first([](const Tensors& in) { return softmax(in[0], 1); }, 1));
    batch.add("log_softmax", "y = torch.log_softmax(a, 0)\n" + G, {{"a", a}, {"v", v}},
              first([](const Tensors& in) { return log_softmax(in[0], 0); }, 1));
  }
  {
    const Tensor a = abs(Tensor::randn({3, 4}, gen, kFloat64)) + 0.5, b = Tensor::randn({4}, gen, kFloat64),
                 v = Tensor::randn({3, 4}, gen, kFloat64);
    batch.add("div_pow_exp_broadcast", "y = torch.pow(a, b) / (a + torch.exp(b))\n" + G, {{"a", a}, {"b", b}, {"v", v}},
              first([](const Tensors& in) { return div(pow(in[0], in[1]), add(in[0], exp(in[1]))); }, 2));
  }
  {
    const Tensor a = Tensor::randn({5, 3}, gen, kFloat64), w = Tensor::randn({4, 3}, gen, kFloat64),
                 bias = Tensor::randn({4}, gen, kFloat64), v = Tensor::randn({5, 4}, gen, kFloat64);
    batch.add("linear_sigmoid_mean", "y = torch.sigmoid(torch.nn.functional.linear(a, w, bias)) * a.mean()\n" + G,
              {{"a", a}, {"w", w}, {"bias", bias}, {"v", v}},
              first([](const Tensors& in) { return sigmoid(linear(in[0], in[1], in[2])) * mean(in[0]); }, 3));
  }
  {
    const Tensor a = Tensor::randn({2, 3}, gen, kFloat64), v = Tensor::randn({3, 2}, gen, kFloat64);
    batch.add(
        "shape_ops", "y = torch.cat([a.T[:, :1] * a.T[:, 1:], a.T.sum(1, keepdim=True).expand(3, 1)], 1) ** 2\n" + G,
        {{"a", a}, {"v", v}},
        first(
            [](const Tensors& in) {
              const Tensor t = transpose(in[0], 0, 1);
              return pow(concat({slice(t, 1, 0, 1) * slice(t, 1, 1, 2), expand(sum(t, {1}, true), {3, 1})}, 1), 2.0);
            },
            1));
  }
  {
    // binary math with piecewise-constant partials, and the one-sided clamps
    const Tensor a = Tensor::randn({3, 4}, gen, kFloat64), b = Tensor::randn({3, 4}, gen, kFloat64) * 0.7 + 1.5,
                 v = Tensor::randn({3, 4}, gen, kFloat64);
    batch.add("atan2_fmod_remainder_clamps",
              "y = torch.atan2(a, b) ** 2 + torch.remainder(a * 3, b) * b + torch.fmod(a * 3, b) * a"
              " + torch.clamp_min(a, 0.1) * torch.clamp_max(b, 1.4)\n" +
                  G,
              {{"a", a}, {"b", b}, {"v", v}},
              first(
                  [](const Tensors& in) {
                    const Tensor &x = in[0], &z = in[1];
                    return pow(atan2(x, z), 2.0) + remainder(x * 3.0, z) * z + fmod(x * 3.0, z) * x +
                           clamp_min(x, 0.1) * clamp_max(z, 1.4);
                  },
                  2));
  }
  {
    // the gather family: scatter-type first backwards recorded as ops whose backward is the gather
    const Tensor a = Tensor::randn({3, 5}, gen, kFloat64), src = Tensor::randn({2, 5}, gen, kFloat64),
                 src2 = Tensor::randn({2, 5}, gen, kFloat64), v = Tensor::randn({26}, gen, kFloat64);
    const auto longs = [](std::vector<double> vals, const Shape& shape) {
      return Tensor::from_vector(vals, shape, kFloat64).to(kInt64);
    };
    const Tensor i0 = longs({2, 0}, {2}), i1 = longs({0, 4, 4, 1, 2, 2, 3, 0, 1, 0, 4, 4}, {3, 4}),
                 i2 = longs({14, 0, 3, 3, 7}, {5}), i3 = longs({1, 0, 1, 2, 0, 0, 2, 2, 1, 1}, {2, 5}),
                 mask = Tensor::from_vector({1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0}, {3, 5}, kFloat64).to(kBool);
    batch.add("gather_scatter_index_masked",
              "i0 = torch.tensor([2, 0]); i1 = torch.tensor([[0, 4, 4, 1], [2, 2, 3, 0], [1, 0, 4, 4]])\n"
              "i2 = torch.tensor([14, 0, 3, 3, 7]); i3 = torch.tensor([[1, 0, 1, 2, 0], [0, 2, 2, 1, 1]])\n"
              "m = torch.tensor([[1, 0, 0, 1, 1], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0]]).bool()\n"
              "t = a.index_add(0, i0, src).scatter_add(0, i3, src2)\n"
              "y = torch.cat([torch.gather(t, 1, i1).flatten() ** 3, torch.masked_select(t, m) ** 2,"
              " torch.take_along_dim(t, i2) ** 2, t[i0].flatten()[:2] ** 3])\n" +
                  G,
              {{"a", a}, {"src", src}, {"src2", src2}, {"v", v}},
              first(
                  [=](const Tensors& in) {
                    const Tensor t = scatter_add(index_add(in[0], 0, i0, in[1]), 0, i3, in[2]);
                    return concat(
                        {pow(reshape(gather(t, 1, i1), {-1}), 3.0), pow(masked_select(t, mask), 2.0),
                         pow(take_along_dim(t, i2), 2.0), pow(slice(reshape(index(t, i0), {-1}), 0, 0, 2), 3.0)},
                        0);
                  },
                  3));
  }
  {
    // copies through index maps (pad in every mode, flip, roll, repeat), cumsum, split
    const Tensor a = Tensor::randn({2, 5}, gen, kFloat64), v = Tensor::randn({2, 8}, gen, kFloat64);
    batch.add(
        "pad_flip_roll_cumsum_repeat_split",
        "c = torch.cumsum(torch.roll(torch.flip(torch.nn.functional.pad(a, (2, 1), mode='reflect'), (-1,)), 3,"
        " 1), 1)\n"
        "p = torch.split(a.repeat(1, 2), [3, 7], 1)\n"
        "y = c ** 2 * torch.nn.functional.pad(a, (1, 2), value=0.5)"
        " + torch.nn.functional.pad(a, (3, 0), mode='replicate') ** 3 + torch.cat([p[1], p[0][:, :1]], 1) ** 2\n" +
            G,
        {{"a", a}, {"v", v}},
        first(
            [](const Tensors& in) {
              const Tensor& x = in[0];
              const Tensor c = cumsum(roll(flip(pad(x, {2, 1}, "reflect"), {-1}), {3}, {1}), 1);
              const Tensors p = split(repeat(x, {1, 2}), std::vector<std::int64_t>{3, 7}, 1);
              return pow(c, 2.0) * pad(x, {1, 2}, "constant", 0.5) + pow(pad(x, {3, 0}, "replicate"), 3.0) +
                     pow(concat({p[1], slice(p[0], 1, 0, 1)}, 1), 2.0);
            },
            1));
  }
  {
    // max, min and the values of sort and topk: the scatter to the chosen positions, recorded
    const Tensor a = Tensor::randn({3, 5}, gen, kFloat64), v = Tensor::randn({8}, gen, kFloat64);
    batch.add("max_min_sort_topk",
              "y = torch.cat([torch.amax(a, 1) * torch.topk(a, 2, 1)[0][:, 1],"
              " torch.amin(a, 0) ** 2 * torch.sort(a, 0, descending=True)[0][0]])\n" +
                  G,
              {{"a", a}, {"v", v}},
              first(
                  [](const Tensors& in) {
                    const Tensor& x = in[0];
                    const Tensor top = std::get<0>(topk(x, 2, 1)), sorted = std::get<0>(sort(x, 0, true));
                    return concat(
                        {max(x, std::vector<std::int64_t>{1}) * reshape(slice(top, 1, 1, 2), {3}),
                         pow(min(x, std::vector<std::int64_t>{0}), 2.0) * reshape(slice(sorted, 0, 0, 1), {5})},
                        0);
                  },
                  1));
  }
  {
    // torch.autograd.functional: hvp, vhp, hessian and jvp of the same functions (values only)
    const Tensor a = Tensor::randn({4}, gen, kFloat64), v = Tensor::randn({4}, gen, kFloat64);
    const std::string F = "f = lambda x: (torch.log_softmax(x, 0) * x).sum() + (torch.tanh(x) ** 3).sum()\n";
    const auto f = [](const Tensors& in) { return sum(log_softmax(in[0], 0) * in[0]) + sum(pow(tanh(in[0]), 3.0)); };
    batch.add("functional_hvp", F + "out = torch.autograd.functional.hvp(f, a, v)[1]",
              {{"a", a, false}, {"v", v, false}},
              [f](const Tensors& in) { return hvp(f, {in[0]}, {in[1]}).second[0]; });
    batch.add("functional_vhp", F + "out = torch.autograd.functional.vhp(f, a, v)[1]",
              {{"a", a, false}, {"v", v, false}},
              [f](const Tensors& in) { return vhp(f, {in[0]}, {in[1]}).second[0]; });
    batch.add("functional_hessian", F + "out = torch.autograd.functional.hessian(f, a)", {{"a", a, false}},
              [f](const Tensors& in) { return hessian(f, {in[0]})[0][0]; });
    const Tensor W = Tensor::randn({3, 4}, gen, kFloat64);
    batch.add("functional_jvp",
              "out = torch.autograd.functional.jvp(lambda x: torch.softmax(W @ x, 0) * x[:3], a, v)[1]",
              {{"a", a, false}, {"v", v, false}, {"W", W, false}}, [](const Tensors& in) {
                return jvp([&](const Tensors& x) { return softmax(matmul(in[2], x[0]), 0) * slice(x[0], 0, 0, 3); },
                           {in[0]}, {in[1]})
                    .second;
              });
  }
  batch.run();
}

TEST_CASE("flagships: resample_conv (with respect to f) and block_sparse_linear pass gradgradcheck",
          "[create_graph][flagship]") {
  Generator gen(31);
  // resample_conv: a cos^2 response on a uniform and on a non-uniform grid, fixed coarse points;
  // the loss is quadratic in the output so that the second derivative with respect to f is not 0.
  const double w = 0.3;
  const Response r = Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                                        [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / 29, 30);
  const FineGrid pts =
      FineGrid::points(Tensor::linspace(0.0, 1.0, 30, kFloat64) + Tensor::rand({30}, gen, kFloat64) * 0.01);
  const Tensor c = Tensor::rand({3, 5}, gen, kFloat64) * 0.8 + 0.1;
  for (const FineGrid* grid : {&uni, &pts}) {
    INFO((grid->is_uniform() ? "uniform" : "points"));
    const Tensor f = test::randn_leaf({2, 3, 30}, gen);
    const auto fn = [&](const Tensors& in) {
      const Tensor y = resample_conv(in[0], c, *grid, r);
      return y * y;
    };
    const GradcheckReport rep = gradgradcheck(fn, {f});
    INFO(rep.message);
    CHECK(rep.ok);
    // hvp of a scalar loss equals the dense Hessian times v (third-order machinery: hvp's double vjp)
    const auto loss = [&](const Tensors& in) { return sum(pow(resample_conv(in[0], c, *grid, r), 2.0)); };
    const Tensor v = Tensor::randn({2, 3, 30}, gen, kFloat64);
    const auto [val, hv] = hvp(loss, {f}, {v});
    // H = 2 R^T R per row: H v = 2 R^T (R v), with R v = resample_conv(v) (linear in f)
    const Tensor want = xgrad::grad({resample_conv(f, c, *grid, r)}, {f}, {resample_conv(v, c, *grid, r) * 2.0})[0];
    CHECK(allclose(hv[0], want, 1e-12, 1e-12));
  }
  // coarse points requiring grad: first order in them with history works (r' is all it needs), and
  // the f gradient's dependence on them is differentiated; a second coarse derivative needs r'',
  // which this callable lacks: refused with the reason (tests/ops/test_resample_conv_create_graph.cpp
  // has the rest)
  const Tensor f = test::randn_leaf({3, 30}, gen);
  const Tensor cg = c.clone_data().set_requires_grad();
  const Tensor y = sum(pow(resample_conv(f, cg, uni, r), 2.0));
  const Tensors gfc = xgrad::grad({y}, {f, cg}, {}, std::nullopt, /*create_graph=*/true);
  CHECK(xgrad::grad({sum(gfc[0])}, {cg}, {}, true)[0].defined());
  require_error([&] { (void)xgrad::grad({sum(gfc[1])}, {cg}); }, {"resample_conv", "order 2", "'coarse'"});

  // block_sparse_linear with a bias, on a pattern of unequal blocks, and a nonlinear loss
  const BlockSparsePattern pattern = BlockSparsePattern::from_block_coords(
      InFeatures{6}, OutFeatures{4}, BlockSize{InFeatures{2}, OutFeatures{2}}, {{0, 0}, {0, 2}, {1, 1}});
  const Tensor x = test::randn_leaf({3, 6}, gen), W = test::randn_leaf(pattern.weight_shape(), gen),
               b = test::randn_leaf({4}, gen);
  const GradcheckReport bs = gradgradcheck(
      [&](const Tensors& in) { return tanh(block_sparse_linear(in[0], in[1], in[2], pattern)); }, {x, W, b});
  INFO(bs.message);
  CHECK(bs.ok);
}
