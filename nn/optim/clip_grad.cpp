#include "xgrad/nn/optim/clip_grad.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/detail/optim_helpers.hpp"

namespace xgrad::nn {

using namespace detail;  // NOLINT(google-build-using-namespace): the optimizers' shared helpers

// ---- gradient clipping --------------------------------------------------------------------------

namespace {
// Per-tensor norm term: sum |g|^q (q finite) or max |g| (q infinite), accumulated in double over
// fixed chunks so that the result does not depend on the thread count.
double norm_term(const Tensor& g, double q) {
  return dispatch(g.dtype(), [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    const T* x = g.data<T>();
    const std::int64_t n = g.numel();
    if (std::isinf(q)) {
      double m = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(x[i]));
        if (a != a) return a;  // NOLINT(misc-redundant-expression): NaN propagates like torch's max
        m = std::max(m, a);
      }
      return m;
    }
    return deterministic_sum<double>(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      double acc = 0;
      if (q == 2.0) {
        for (std::int64_t i = b; i < e; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      } else if (q == 1.0) {
        for (std::int64_t i = b; i < e; ++i) acc += std::abs(static_cast<double>(x[i]));
      } else {
        for (std::int64_t i = b; i < e; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), q);
      }
      return acc;
    });
  });
}
}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  XGRAD_CHECK(max_norm >= 0, "clip_grad_norm_: argument 'max_norm' must be >= 0, got {}", max_norm);
  XGRAD_CHECK(norm_type > 0, "clip_grad_norm_: argument 'norm_type' must be > 0 (or INFINITY), got {}", norm_type);
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    XGRAD_CHECK(params[i].defined(), "clip_grad_norm_: parameter {} is an undefined tensor", i);
    Tensor g = params[i].grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const auto& g : grads) {
    const double t = norm_term(g, norm_type);
    if (inf) {
      total = (total != total || t != t) ? std::numeric_limits<double>::quiet_NaN()  // NOLINT
                                         : std::max(total, t);
    } else {
      total += t;
    }
  }
  if (!inf) total = norm_type == 2.0 ? std::sqrt(total) : norm_type == 1.0 ? total : std::pow(total, 1.0 / norm_type);
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  // torch multiplies even when the coefficient is clamped to 1 (a no-op); skip that work. NaN
  // coefficients (a non-finite norm) propagate into the gradients like torch.
  if (coef == 1.0) return total;
  NoGradGuard no_grad;
  for (auto& g : grads) {
    Tensor gd = g.detach();
    dispatch(gd.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* x = gd.data<T>();
      const T c = static_cast<T>(coef);
      for_each_element(gd.numel(), [&](std::int64_t i) { x[i] = x[i] * c; });
    });
    bump_version(gd);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  XGRAD_CHECK(clip_value >= 0, "clip_grad_value_: argument 'clip_value' must be >= 0, got {}", clip_value);
  for (std::size_t i = 0; i < params.size(); ++i) {
    XGRAD_CHECK(params[i].defined(), "clip_grad_value_: parameter {} is an undefined tensor", i);
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* x = g.data<T>();
      const T c = static_cast<T>(clip_value);
      for_each_element(g.numel(), [&](std::int64_t k) { x[k] = std::clamp(x[k], -c, c); });
    });
    bump_version(g);
  }
}

}  // namespace xgrad::nn
