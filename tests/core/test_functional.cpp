// vjp and jacobian (core/functional.hpp) against gradients and closed forms.
#include <cmath>

#include "support.hpp"
#include "xgrad/core/functional.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;

TEST_CASE("jacobian of y = tanh(W x) is diag(1 - y^2) W, and of x in a second input", "[functional]") {
  Generator gen(3);
  const Tensor W = Tensor::randn({3, 4}, gen, kFloat64), x = Tensor::randn({4, 1}, gen, kFloat64);
  const Tensors J = jacobian([](const Tensors& in) { return tanh(matmul(in[0], in[1])); }, {W, x});
  REQUIRE(J.size() == 2);
  CHECK(J[0].shape() == Shape{3, 1, 3, 4});
  CHECK(J[1].shape() == Shape{3, 1, 4, 1});
  const auto y = tanh(matmul(W, x)).to_vector(), w = W.to_vector(), xv = x.to_vector(), jw = J[0].to_vector(),
             jx = J[1].to_vector();
  for (int i = 0; i < 3; ++i) {
    const double s = 1 - y[i] * y[i];
    for (int j = 0; j < 4; ++j) {
      CHECK(std::abs(jx[i * 4 + j] - s * w[i * 4 + j]) < 1e-14);  // d y_i / d x_j
      for (int k = 0; k < 3; ++k)                                 // d y_i / d W_kj
        CHECK(std::abs(jw[(i * 3 + k) * 4 + j] - (k == i ? s * xv[j] : 0.0)) < 1e-14);
    }
  }
  CHECK_FALSE(W.requires_grad());  // the inputs are not touched
}

TEST_CASE("jacobian: an input the output does not use gives zeros, a scalar output one row", "[functional]") {
  const Tensor a = Tensor::of({1.0, 2.0}, kFloat64), b = Tensor::of({3.0}, kFloat64);
  const Tensors J = jacobian([](const Tensors& in) { return sum(in[0] * in[0]); }, {a, b});
  CHECK(J[0].shape() == Shape{2});
  CHECK(J[0].to_vector() == std::vector<double>{2.0, 4.0});
  CHECK(J[1].to_vector() == std::vector<double>{0.0});
}

TEST_CASE("vjp equals grad with a seed, and agrees with the Jacobian", "[functional]") {
  Generator gen(4);
  const Tensor x = Tensor::randn({5}, gen, kFloat64), v = Tensor::randn({5}, gen, kFloat64);
  auto fn = [](const Tensors& in) { return exp(in[0]) * in[0]; };
  const auto [out, g] = vjp(fn, {x}, v);
  CHECK(allclose(out, exp(x) * x, 0, 0));
  const Tensor J = jacobian(fn, {x})[0];  // (5, 5), diagonal
  const auto jv = J.to_vector(), vv = v.to_vector(), gv = g[0].to_vector();
  for (int j = 0; j < 5; ++j) {
    double s = 0;
    for (int i = 0; i < 5; ++i) s += vv[i] * jv[i * 5 + j];
    CHECK(std::abs(gv[j] - s) < 1e-13);
  }
  test::require_error([&] { (void)vjp(fn, {x}, Tensor::ones({4}, kFloat64)); }, {"vjp", "'v'", "(5,)", "(4,)"});
  test::require_error([&] { (void)jacobian(fn, {Tensor()}); }, {"jacobian", "input 0", "undefined"});
}

TEST_CASE("jacobian and vjp: an integer input is refused naming the call and the argument", "[functional][errors]") {
  const auto f = [](const Tensors& in) { return in[0] * 2.0; };
  const Tensor i = Tensor::zeros({2, 3}, kInt64);
  test::require_error([&] { (void)jacobian(f, {i}); }, {"jacobian", "'inputs'", "input 0", "int64", "(2, 3)"});
  test::require_error([&] { (void)vjp(f, {i}, Tensor::ones({2, 3}, kFloat64)); }, {"vjp", "'inputs'", "int64"});
}
