#include "xgrad/ops/activation.hpp"

#include <numbers>
#include <string>

#include "xgrad/ops/define/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

// The ops of ops/activation.hpp, as Pointwise ops (Note [One formula] in ops/define/pointwise.hpp).

// ---- silu, leaky_relu, elu, selu, hardtanh and logsigmoid ----------------------------------------
namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

// silu: f in the form torch computes, x/(1 + e^-x) rather than x*sigmoid(x)
struct SiluOp : pw::Def<"silu", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return x / (lit(x, 1) + pw::exp(-x)); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    const auto s = pw::sigmoid(x);
    return g * s * (lit(x, 1) + x * (lit(x, 1) - s));
  };
};

struct Slope {
  double slope = 0;
};
// leaky_relu: x = 0 takes the slope (torch's leaky_relu_backward)
struct LeakyReluOp : pw::Def<"leaky_relu", Saves::input, Slope> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    return select(x > lit(x, 0), x, x * lit(x, p.slope));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select(x > lit(x, 0), g, g * lit(x, p.slope));
  };
};

// elu and selu: y = x*scale for x > 0, else alpha*scale*(e^x - 1); dx = g*scale, or g*alpha*scale*e^x
// (torch's elu kernel with input_scale 1; x = 0 takes the exponential side, as torch's)
struct EluParams {
  double alpha = 1, scale = 1;
};
struct EluOp : pw::Def<"elu", Saves::input, EluParams> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    return select(x <= lit(x, 0), pw::expm1(x) * lit(x, p.alpha * p.scale), x * lit(x, p.scale));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select(x <= lit(x, 0), g * lit(x, p.alpha * p.scale) * pw::exp(x), g * lit(x, p.scale));
  };
};
struct SeluOp : EluOp {
  static constexpr const char* kName = "selu";
};
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

struct Bounds {
  double lo = -1, hi = 1;
};
// hardtanh: the boundaries get no gradient (torch's hardtanh_backward), unlike clamp's
struct HardtanhOp : pw::Def<"hardtanh", Saves::input, Bounds> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto lo = lit(x, p.lo), hi = lit(x, p.hi);
    return select(x < lo, lo, select(x > hi, hi, x));  // NaN stays NaN
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select((x <= lit(x, p.lo)) | (x >= lit(x, p.hi)), lit(g, 0), g);
  };
};

// logsigmoid(x) = min(x, 0) - ln(1 + e^-|x|); dx = g*(1/(1+z)) for x < 0, g*(z/(1+z)) otherwise,
// z = e^-|x| (torch's log_sigmoid kernels)
struct LogsigmoidOp : pw::Def<"logsigmoid", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) {
    return pw::min(x, 0) - pw::log1p(pw::exp(-pw::abs(x)));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    const auto z = pw::exp(-pw::abs(x));
    const auto negative = x < lit(x, 0);
    const auto max_deriv = select(negative, lit(x, 1), lit(x, 0));
    const auto sgn = select(negative, lit(x, 1), lit(x, -1));
    return g * (max_deriv - sgn * (z / (lit(x, 1) + z)));
  };
};

// hardswish and hardsigmoid (torch's kernels): x at -3 takes the middle branch of hardswish's
// gradient, x at 3 the right one (as torch's vectorised kernel; its scalar loop gives 1.5 g there);
// hardsigmoid's gradient is 0 at both bounds. relu6(x + 3) keeps a
// NaN (std::min(std::max(...)) in torch's).
template <class V>
V relu6_shifted(const V& x) {
  const V v = x + lit(x, 3);
  return select(v < lit(x, 0), lit(x, 0), select(v > lit(x, 6), lit(x, 6), v));
}
struct HardswishOp : pw::Def<"hardswish", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return x * relu6_shifted(x) / lit(x, 6); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return select(x < lit(x, -3), pw::zeros_like(g), select(x >= lit(x, 3), g, g * (x / lit(x, 3) + lit(x, 0.5))));
  };
};
struct HardsigmoidOp : pw::Def<"hardsigmoid", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return relu6_shifted(x) / lit(x, 6); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    // torch multiplies by 1/6 rounded to float (1.0f / 6.0f, also for float64): the same factor
    return select((x > lit(x, -3)) & (x < lit(x, 3)), g * lit(g, 1.0f / 6.0f), pw::zeros_like(g));
  };
};

struct SoftsignOp : pw::Def<"softsign", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return x / (lit(x, 1) + pw::abs(x)); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    const auto d = lit(x, 1) + pw::abs(x);
    return g / (d * d);
  };
};

}  // namespace

Tensor silu(const Tensor& x) { return detail::pw::run<SiluOp>(x); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_number("leaky_relu", "negative_slope", x, negative_slope);
  return detail::pw::run<LeakyReluOp>(x, Slope{negative_slope});
}

Tensor elu(const Tensor& x, double alpha) {
  check_number("elu", "alpha", x, alpha);
  return detail::pw::run<EluOp>(x, EluParams{alpha, 1.0});
}

Tensor selu(const Tensor& x) { return detail::pw::run<SeluOp>(x, EluParams{kSeluAlpha, kSeluScale}); }

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_bounds("hardtanh", "min_val", min_val, "max_val", max_val, x);
  return detail::pw::run<HardtanhOp>(x, Bounds{min_val, max_val});
}

Tensor logsigmoid(const Tensor& x) { return detail::pw::run<LogsigmoidOp>(x); }
Tensor hardswish(const Tensor& x) { return detail::pw::run<HardswishOp>(x); }
Tensor hardsigmoid(const Tensor& x) { return detail::pw::run<HardsigmoidOp>(x); }
Tensor softsign(const Tensor& x) { return detail::pw::run<SoftsignOp>(x); }

}  // namespace xgrad

// ---- gelu, softplus and mish: the activations built from erf, tanh, exp and log1p ---------------
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
