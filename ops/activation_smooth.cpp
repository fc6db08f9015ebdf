// gelu, softplus and mish (ops/activation.hpp): the activations built from erf, tanh, exp and log1p
// (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include <numbers>
#include <string>

#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

constexpr double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

struct GeluParams {
  bool tanh = false;
};
// Exact: y = x/2*(1 + erf(x/sqrt 2)), dx = g*(cdf + x*pdf). Tanh: torch's gelu kernels, with
// kBeta = sqrt(2/pi), kKappa = 0.044715.
struct GeluOp : pw::Def<"gelu", Saves::input, GeluParams> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    if (p.tanh) return lit(x, 0.5) * x * (lit(x, 1) + pw::tanh(lit(x, kBeta) * (x + lit(x, kKappa) * (x * x * x))));
    return x * lit(x, 0.5) * (lit(x, 1) + pw::erf(x * lit(x, 0.5 * std::numbers::sqrt2)));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    const auto half = lit(x, 0.5), one = lit(x, 1);
    if (p.tanh) {
      const auto x_sq = x * x;
      const auto t = pw::tanh(lit(x, kBeta) * (x + lit(x, kKappa) * (x_sq * x)));
      const auto left = half * x, right = one + t;
      const auto left_derivative = half * right;
      const auto right_derivative = (one - t * t) * lit(x, kBeta) * (one + lit(x, 3) * lit(x, kKappa) * x_sq);
      return g * (left_derivative + left * right_derivative);
    }
    const auto cdf = half * (one + pw::erf(x * lit(x, 0.5 * std::numbers::sqrt2)));
    const auto pdf = pw::exp(lit(x, -0.5) * x * x) * lit(x, 0.5 * kBeta);
    return g * (cdf + x * pdf);
  };
};

struct SoftplusParams {
  double beta = 1, threshold = 20;
};
// y = softplus(beta x)/beta, or x where beta x > threshold; dx = g*sigmoid(beta x), or g
struct SoftplusOp : pw::Def<"softplus", Saves::input, SoftplusParams> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto bx = x * lit(x, p.beta);
    return select(bx > lit(x, p.threshold), x, pw::softplus(bx) / lit(x, p.beta));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    const auto bx = x * lit(x, p.beta);
    return select(bx > lit(x, p.threshold), g, g * pw::sigmoid(bx));
  };
};

// y = x*tanh(ln(1 + e^x)); dx = g*(t + x*s*(1 - t^2)), t = tanh(softplus x), s = sigmoid(x)
struct MishOp : pw::Def<"mish", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return x * pw::tanh(pw::softplus(x)); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    const auto t = pw::tanh(pw::softplus(x));
    const auto s = pw::sigmoid(x);
    return g * (t + x * s * (lit(x, 1) - t * t));
  };
};

}  // namespace

Tensor gelu(const Tensor& x, std::string_view approximate) {
  XGRAD_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: argument 'approximate' must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return detail::pw::run<GeluOp>(x, GeluParams{approximate == "tanh"});
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  XGRAD_CHECK(beta != 0 && !std::isnan(beta) && !std::isnan(threshold),
              "softplus: argument 'beta' ({}) must be non-zero and 'threshold' ({}) not NaN", beta, threshold);
  return detail::pw::run<SoftplusOp>(x, SoftplusParams{beta, threshold});
}

Tensor mish(const Tensor& x) { return detail::pw::run<MishOp>(x); }

}  // namespace xgrad
