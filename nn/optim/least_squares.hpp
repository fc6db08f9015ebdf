#pragma once
// Nonlinear least squares by Levenberg-Marquardt, for fitting models to data.
#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad::nn {

struct LeastSquaresOptions {
  std::int64_t max_iter = 100;    ///< Jacobian evaluations (accepted steps) at most
  double ftol = 1e-12;            ///< stop when an accepted step lowers the cost by less than ftol * cost
  double xtol = 1e-12;            ///< stop when the step is shorter than xtol * (|x| + xtol)
  double gtol = 1e-12;            ///< stop when max |J^T r| <= gtol
  double initial_damping = 1e-3;  ///< tau: the first damping is tau * max diag(J^T J)
};

struct LeastSquaresResult {
  double initial_cost = 0;       ///< 0.5 * |r|^2 at the start
  double cost = 0;               ///< 0.5 * |r|^2 at the solution
  std::int64_t iterations = 0;   ///< accepted steps
  std::int64_t evaluations = 0;  ///< residual evaluations
  bool converged = false;        ///< a tolerance was met (not max_iter)
  std::string status;            ///< "gtol", "xtol", "ftol", "zero cost", "max_iter" or "stalled"
  std::int64_t num_residuals = 0, num_params = 0;
  /// (J^T J)^{-1} at the solution, (n, n) row-major over the parameters' elements in order: the
  /// covariance of the parameters when the residuals are already divided by their standard
  /// deviations (chi = (data - model) / sigma). Empty when J^T J is singular.
  std::vector<double> jtj_inverse;
  /// jtj_inverse * 2 cost / (m - n): the covariance when the residuals' variance is unknown and
  /// estimated from the fit (scipy's curve_fit with absolute_sigma=False). Empty when m <= n or
  /// J^T J is singular.
  std::vector<double> covariance;
};

/// Minimises 0.5 * sum(residuals()^2) over the elements of `params` (leaves that require grad; the
/// function reads them and returns the residuals, any shape) with Levenberg-Marquardt: each
/// iteration solves (J^T J + mu D) h = -J^T r with Marquardt's scaling D = diag(J^T J), accepts h
/// when the gain ratio rho (actual over predicted decrease) is positive and then lowers mu by
/// max(1/3, 1 - (2 rho - 1)^3), otherwise raises it by a doubling factor (Nielsen's rule). The
/// parameters are updated in place (their version counters bumped) and hold the solution.
/// J comes from one backward pass per residual (nothing is differentiated twice): a fit with m
/// residuals costs about m backward passes per iteration. Errors: no parameters, a parameter that
/// is undefined or does not require grad, residuals that are undefined, not finite at the start,
/// or do not depend on the parameters; options out of range.
LeastSquaresResult least_squares(const std::function<Tensor()>& residuals, const std::vector<Tensor>& params,
                                 const LeastSquaresOptions& options = {});

}  // namespace xgrad::nn
