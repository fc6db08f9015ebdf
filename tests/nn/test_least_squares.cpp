// Levenberg-Marquardt (nn/optim/least_squares.hpp) on problems with known optima.
#include <cmath>

#include "support.hpp"
#include "xgrad/nn/optim/least_squares.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;

TEST_CASE("least_squares: Rosenbrock as residuals reaches (1, 1) with zero cost", "[optim][least_squares]") {
  Tensor x = Tensor::from_vector({-1.2, 1.0}, {2}, kFloat64).set_requires_grad();
  auto residuals = [&] {
    Tensor x0 = slice(x, 0, 0, 1), x1 = slice(x, 0, 1, 2);
    return concat({10.0 * (x1 - x0 * x0), 1.0 - x0}, 0);
  };
  const nn::LeastSquaresResult r = nn::least_squares(residuals, {x});
  INFO(r.status << " after " << r.iterations << " iterations");
  CHECK(r.converged);
  CHECK(r.initial_cost == Approx(0.5 * (4.4 * 4.4 + 2.2 * 2.2)));
  CHECK(r.cost < 1e-20);
  CHECK(std::abs(x.to_vector()[0] - 1) < 1e-9);
  CHECK(std::abs(x.to_vector()[1] - 1) < 1e-9);
  CHECK(r.iterations < 50);
}

TEST_CASE("least_squares: a noise-free exponential decay recovers its parameters", "[optim][least_squares]") {
  std::vector<double> ts, ys;
  for (int i = 0; i < 20; ++i) {
    ts.push_back(0.1 * i);
    ys.push_back(2.5 * std::exp(-1.3 * ts.back()) + 0.2);
  }
  const Tensor t = Tensor::from_vector(ts, {20}, kFloat64), y = Tensor::from_vector(ys, {20}, kFloat64);
  Tensor amp = Tensor::scalar(1.0, kFloat64).set_requires_grad(),
         rate = Tensor::scalar(-0.2, kFloat64).set_requires_grad(),
         offset = Tensor::scalar(0.0, kFloat64).set_requires_grad();
  const auto r = nn::least_squares([&] { return amp * exp(rate * t) + offset - y; }, {amp, rate, offset});
  INFO(r.status);
  CHECK(r.converged);
  CHECK(std::abs(amp.item() - 2.5) < 1e-8);
  CHECK(std::abs(rate.item() + 1.3) < 1e-8);
  CHECK(std::abs(offset.item() - 0.2) < 1e-8);
  CHECK(r.num_residuals == 20);
  CHECK(r.num_params == 3);
}

TEST_CASE("least_squares: a model linear in its parameters gives the normal equations' solution and covariance",
          "[optim][least_squares]") {
  // y = a + b t + c t^2 + noise; the least-squares solution and s^2 (X^T X)^-1 in closed form.
  Generator gen(11);
  const int m = 30;
  std::vector<double> ts, ys;
  const std::vector<double> noise = Tensor::randn({m}, gen, kFloat64).to_vector();
  for (int i = 0; i < m; ++i) {
    const double tv = -1 + 2.0 * i / (m - 1);
    ts.push_back(tv);
    ys.push_back(0.5 - 1.5 * tv + 0.8 * tv * tv + 0.05 * noise[i]);
  }
  // X^T X and X^T y, solved by Cramer's rule (3x3).
  double A[3][3] = {}, rhs[3] = {};
  for (int i = 0; i < m; ++i) {
    const double row[3] = {1, ts[i], ts[i] * ts[i]};
    for (int p = 0; p < 3; ++p) {
      rhs[p] += row[p] * ys[i];
      for (int q = 0; q < 3; ++q) A[p][q] += row[p] * row[q];
    }
  }
  auto det3 = [](double M[3][3]) {
    return M[0][0] * (M[1][1] * M[2][2] - M[1][2] * M[2][1]) - M[0][1] * (M[1][0] * M[2][2] - M[1][2] * M[2][0]) +
           M[0][2] * (M[1][0] * M[2][1] - M[1][1] * M[2][0]);
  };
  const double det = det3(A);
  double want[3];
  for (int k = 0; k < 3; ++k) {
    double Mk[3][3];
    for (int p = 0; p < 3; ++p)
      for (int q = 0; q < 3; ++q) Mk[p][q] = q == k ? rhs[p] : A[p][q];
    want[k] = det3(Mk) / det;
  }
  const Tensor t = Tensor::from_vector(ts, {m}, kFloat64), y = Tensor::from_vector(ys, {m}, kFloat64);
  Tensor coef = Tensor::zeros({3}, kFloat64).set_requires_grad();
  const auto r = nn::least_squares(
      [&] { return slice(coef, 0, 0, 1) + slice(coef, 0, 1, 2) * t + slice(coef, 0, 2, 3) * t * t - y; }, {coef});
  CHECK(r.converged);
  const auto c = coef.to_vector();
  for (int k = 0; k < 3; ++k) CHECK(std::abs(c[k] - want[k]) < 1e-10);
  // Covariance: s^2 (X^T X)^-1 with s^2 = |r|^2 / (m - 3); check (X^T X) cov / s^2 = I.
  REQUIRE(r.covariance.size() == 9);
  const double s2 = 2 * r.cost / (m - 3);
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) {
      double v = 0;
      for (int k = 0; k < 3; ++k) v += A[p][k] * r.covariance[k * 3 + q] / s2;
      CHECK(std::abs(v - (p == q ? 1.0 : 0.0)) < 1e-9);
    }
}

TEST_CASE("least_squares: bad arguments", "[optim][least_squares]") {
  Tensor x = Tensor::scalar(1.0, kFloat64).set_requires_grad();
  test::require_error([&] { nn::least_squares([&] { return x; }, {}); }, {"least_squares", "no parameters"});
  test::require_error([&] { nn::least_squares([&] { return x; }, {Tensor::scalar(1.0)}); },
                      {"least_squares", "parameter 0", "requires grad"});
  test::require_error([&] { nn::least_squares([&] { return Tensor::ones({2}, kFloat64); }, {x}); },
                      {"least_squares", "do not depend"});
  test::require_error([&] { nn::least_squares([&] { return x * std::nan(""); }, {x}); },
                      {"least_squares", "not finite"});
  test::require_error([&] { nn::least_squares([&] { return x; }, {x}, {.max_iter = 0}); },
                      {"least_squares", "max_iter"});
}
