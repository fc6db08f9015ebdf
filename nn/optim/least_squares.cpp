#include "xgrad/nn/optim/least_squares.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/functional.hpp"

namespace xgrad::nn {

namespace {
using Vec = std::vector<double>;

// Cholesky factor of the symmetric (n, n) matrix a in place (lower triangle); false when it is not
// positive definite.
bool cholesky(Vec& a, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (std::int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (std::int64_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (std::int64_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
  }
  return true;
}

// Solves L L^T x = b with the factor from cholesky().
Vec cholesky_solve(const Vec& l, std::int64_t n, Vec b) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t k = 0; k < i; ++k) b[i] -= l[i * n + k] * b[k];
    b[i] /= l[i * n + i];
  }
  for (std::int64_t i = n - 1; i >= 0; --i) {
    for (std::int64_t k = i + 1; k < n; ++k) b[i] -= l[k * n + i] * b[k];
    b[i] /= l[i * n + i];
  }
  return b;
}

struct Evaluation {
  Vec r;        // residuals
  Vec J;        // (m, n)
  double cost;  // 0.5 |r|^2
};

double half_square(const Vec& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return 0.5 * s;
}
}  // namespace

LeastSquaresResult least_squares(const std::function<Tensor()>& residuals, const std::vector<Tensor>& params,
                                 const LeastSquaresOptions& options) {
  const char* op = "least_squares";
  XGRAD_CHECK(static_cast<bool>(residuals), "{}: the residual function is empty", op);
  XGRAD_CHECK(!params.empty(), "{}: no parameters to fit", op);
  for (std::size_t i = 0; i < params.size(); ++i)
    XGRAD_CHECK(params[i].defined() && params[i].requires_grad() && params[i].is_leaf(),
                "{}: parameter {} must be a leaf tensor that requires grad", op, i);
  XGRAD_CHECK(options.max_iter >= 1, "{}: option 'max_iter' must be >= 1, got {}", op, options.max_iter);
  XGRAD_CHECK(options.ftol >= 0 && options.xtol >= 0 && options.gtol >= 0,
              "{}: the tolerances must be >= 0 (ftol {}, xtol {}, gtol {})", op, options.ftol, options.xtol,
              options.gtol);
  XGRAD_CHECK(options.initial_damping > 0, "{}: option 'initial_damping' must be > 0, got {}", op,
              options.initial_damping);
  std::int64_t n = 0;
  for (const auto& p : params) n += p.numel();

  LeastSquaresResult res;
  res.num_params = n;
  // Evaluates the residuals (with the Jacobian when asked) at the parameters' current values.
  auto evaluate = [&](bool with_jacobian) {
    AutoGradMode grad_mode(with_jacobian);
    const Tensor r = residuals();
    ++res.evaluations;
    XGRAD_CHECK(r.defined(), "{}: the residual function returned an undefined tensor", op);
    Evaluation e{r.to_vector(), {}, 0};
    e.cost = half_square(e.r);
    if (with_jacobian) {
      XGRAD_CHECK(r.requires_grad(), "{}: the residuals do not depend on the parameters", op);
      e.J = jacobian_matrix(r, params);
    }
    return e;
  };
  auto values = [&] {
    Vec x;
    for (const auto& p : params) {
      const Vec v = p.to_vector();
      x.insert(x.end(), v.begin(), v.end());
    }
    return x;
  };
  auto assign = [&](const Vec& x) {
    NoGradGuard no_grad;
    std::size_t off = 0;
    for (const auto& p : params) {
      Tensor src = Tensor::from_vector(
          Vec(x.begin() + static_cast<std::ptrdiff_t>(off), x.begin() + static_cast<std::ptrdiff_t>(off + p.numel())),
          p.shape(), p.dtype());
      Tensor(p).copy_(src);
      off += static_cast<std::size_t>(p.numel());
    }
  };

  Evaluation cur = evaluate(true);
  const auto m = static_cast<std::int64_t>(cur.r.size());
  res.num_residuals = m;
  XGRAD_CHECK(std::isfinite(cur.cost), "{}: the residuals at the starting point are not finite", op);
  res.initial_cost = cur.cost;
  Vec x = values();
  // A = J^T J and g = J^T r.
  auto normal = [&](const Evaluation& e, Vec& A, Vec& g) {
    A.assign(static_cast<std::size_t>(n * n), 0.0);
    g.assign(static_cast<std::size_t>(n), 0.0);
    for (std::int64_t i = 0; i < m; ++i) {
      const double* row = e.J.data() + i * n;
      for (std::int64_t a = 0; a < n; ++a) {
        g[a] += row[a] * e.r[i];
        for (std::int64_t b = 0; b <= a; ++b) A[a * n + b] += row[a] * row[b];
      }
    }
    for (std::int64_t a = 0; a < n; ++a)
      for (std::int64_t b = a + 1; b < n; ++b) A[a * n + b] = A[b * n + a];
  };
  Vec A, g;
  normal(cur, A, g);
  double max_diag = 0;
  for (std::int64_t a = 0; a < n; ++a) max_diag = std::max(max_diag, A[a * n + a]);
  double mu = options.initial_damping * std::max(max_diag, 1e-300), nu = 2;
  Vec D(static_cast<std::size_t>(n));
  auto update_scaling = [&] {  // Marquardt's scaling, never shrinking (MINPACK keeps the largest seen)
    for (std::int64_t a = 0; a < n; ++a) D[a] = std::max(D[a], std::max(A[a * n + a], 1e-300));
  };
  update_scaling();
  res.status = "max_iter";
  int rejected = 0;  // consecutive rejected steps
  while (res.iterations < options.max_iter) {
    double gmax = 0;
    for (double v : g) gmax = std::max(gmax, std::abs(v));
    if (cur.cost == 0) {
      res.status = "zero cost";
      res.converged = true;
      break;
    }
    if (gmax <= options.gtol) {
      res.status = "gtol";
      res.converged = true;
      break;
    }
    // Solve (A + mu D) h = -g; raise mu until the system is positive definite.
    Vec h;
    for (int tries = 0; tries < 64; ++tries) {
      Vec M = A;
      for (std::int64_t a = 0; a < n; ++a) M[a * n + a] += mu * D[a];
      if (cholesky(M, n)) {
        Vec minus_g(g.size());
        for (std::size_t a = 0; a < g.size(); ++a) minus_g[a] = -g[a];
        h = cholesky_solve(M, n, minus_g);
        break;
      }
      mu *= nu;
      nu *= 2;
    }
    XGRAD_CHECK(!h.empty(), "{}: the damped normal equations stayed singular (the residuals' Jacobian is not finite?)",
                op);
    double hn = 0, xn = 0;
    for (std::int64_t a = 0; a < n; ++a) {
      hn += h[a] * h[a];
      xn += x[a] * x[a];
    }
    if (std::sqrt(hn) <= options.xtol * (std::sqrt(xn) + options.xtol)) {
      res.status = "xtol";
      res.converged = true;
      break;
    }
    Vec x_new = x;
    for (std::int64_t a = 0; a < n; ++a) x_new[a] += h[a];
    assign(x_new);
    const Evaluation trial = evaluate(false);
    // Predicted decrease of the quadratic model: 0.5 h^T (mu D h - g).
    double predicted = 0;
    for (std::int64_t a = 0; a < n; ++a) predicted += h[a] * (mu * D[a] * h[a] - g[a]);
    predicted *= 0.5;
    const double actual = cur.cost - trial.cost;
    const double rho = predicted > 0 && std::isfinite(trial.cost) ? actual / predicted : -1;
    if (rho > 0) {
      const double old_cost = cur.cost;
      x = std::move(x_new);
      cur = evaluate(true);
      normal(cur, A, g);
      update_scaling();
      ++res.iterations;
      mu *= std::max(1.0 / 3.0, 1 - std::pow(2 * rho - 1, 3));
      nu = 2;
      if (old_cost - cur.cost <= options.ftol * old_cost) {
        res.status = "ftol";
        res.converged = true;
        break;
      }
      rejected = 0;
      continue;
    } else {
      assign(x);
      mu *= nu;
      nu *= 2;
      if (++rejected >= 100) {  // no step lowers the cost any more (only possible with xtol = 0)
        res.status = "stalled";
        break;
      }
      continue;
    }
  }
  res.cost = cur.cost;
  // (J^T J)^{-1} at the solution, column by column from its Cholesky factor.
  Vec L = A;
  if (cholesky(L, n)) {
    res.jtj_inverse.assign(static_cast<std::size_t>(n * n), 0.0);
    for (std::int64_t c = 0; c < n; ++c) {
      Vec e(static_cast<std::size_t>(n), 0.0);
      e[c] = 1;
      const Vec col = cholesky_solve(L, n, e);
      for (std::int64_t r = 0; r < n; ++r) res.jtj_inverse[r * n + c] = col[r];
    }
    if (m > n) {
      const double s2 = 2 * res.cost / static_cast<double>(m - n);
      res.covariance = res.jtj_inverse;
      for (double& v : res.covariance) v *= s2;
    }
  }
  return res;
}

}  // namespace xgrad::nn
