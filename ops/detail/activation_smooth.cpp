// gelu, softplus and mish (ops/activation.hpp): the activations built from erf, tanh, exp and log1p
// (Note [Elementwise build time] in elementwise_impl.hpp).
#include <numbers>
#include <string>

#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/detail/vec_unary_impl.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using detail::vu::elem_t;
using detail::vu::NoParams;
using detail::vu::Saves;

struct GeluParams {
  bool tanh = false;
};
// Exact: y = x/2*(1 + erf(x/sqrt 2)), dx = g*(cdf + x*pdf). Tanh: torch's gelu kernels, with
// kBeta = sqrt(2/pi), kKappa = 0.044715.
struct GeluOp {
  static constexpr const char* kName = "gelu";
  static constexpr Saves kSaves = Saves::input;
  using Params = GeluParams;
  template <class B>
  static B vf(const B& x, const Params& p) {
    using T = elem_t<B>;
    const B half(T(0.5)), one(T(1));
    if (p.tanh) {
      const B inner =
          B(static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi)) * (x + B(T(0.044715)) * (x * x * x));
      return half * x * (one + xsimd::tanh(inner));
    }
    return x * half * (one + detail::vu::verf(x * B(static_cast<T>(0.5 * std::numbers::sqrt2))));
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) {
    const double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
    if (p.tanh) {
      const Tensor t = tanh(mul(add(x, mul(pow(x, 3.0), 0.044715)), kBeta));
      const Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(x, add(neg(mul(t, t)), 1.0)),
                                                      mul(add(mul(mul(x, x), 3 * 0.044715), 1.0), 0.5 * kBeta)));
      return mul(g, d);
    }
    const Tensor cdf = mul(add(erf(mul(x, 0.5 * std::numbers::sqrt2)), 1.0), 0.5);
    const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 0.5 * kBeta);
    return mul(g, add(cdf, mul(x, pdf)));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    using T = elem_t<B>;
    const B half(T(0.5)), one(T(1));
    if (p.tanh) {
      const B beta(static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi)), kappa(T(0.044715));
      const B x_sq = x * x;
      const B inner = beta * (x + kappa * (x_sq * x));
      const B t = xsimd::tanh(inner);
      const B left = half * x, right = one + t;
      const B left_derivative = half * right;
      const B right_derivative = (one - t * t) * beta * (one + B(T(3)) * kappa * x_sq);
      return g * (left_derivative + left * right_derivative);
    }
    const B cdf = half * (one + detail::vu::verf(x * B(static_cast<T>(0.5 * std::numbers::sqrt2))));
    const B pdf =
        xsimd::exp(B(T(-0.5)) * x * x) * B(static_cast<T>(0.5 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi));
    return g * (cdf + x * pdf);
  }
};

struct SoftplusParams {
  double beta = 1, threshold = 20;
};
// y = softplus(beta x)/beta, or x where beta x > threshold; dx = g*sigmoid(beta x), or g
struct SoftplusOp {
  static constexpr const char* kName = "softplus";
  static constexpr Saves kSaves = Saves::input;
  using Params = SoftplusParams;
  template <class B>
  static B vf(const B& x, const Params& p) {
    using T = elem_t<B>;
    const B beta(static_cast<T>(p.beta));
    const B bx = x * beta;
    return xsimd::select(bx > B(static_cast<T>(p.threshold)), x, detail::vu::vsoftplus(bx) / beta);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) {
    const Tensor m = gt(mul(x.detach(), p.beta), Tensor::full({}, p.threshold, x.dtype())).to(x.dtype());
    return mul(g, add(m, mul(add(neg(m), 1.0), sigmoid(mul(x, p.beta)))));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    using T = elem_t<B>;
    const B bx = x * B(static_cast<T>(p.beta));
    return xsimd::select(bx > B(static_cast<T>(p.threshold)), g, g * detail::vu::vsigmoid(bx));
  }
};

// y = x*tanh(ln(1 + e^x)); dx = g*(t + x*s*(1 - t^2)), t = tanh(softplus x), s = sigmoid(x)
struct MishOp {
  static constexpr const char* kName = "mish";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return x * xsimd::tanh(detail::vu::vsoftplus(x));
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params&) {
    const Tensor t = tanh(softplus(x));
    const Tensor s = sigmoid(x);
    return mul(g, add(t, mul(mul(x, s), add(neg(mul(t, t)), 1.0))));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    const B one(elem_t<B>(1));
    const B t = xsimd::tanh(detail::vu::vsoftplus(x));
    const B s = detail::vu::vsigmoid(x);
    return g * (t + x * s * (one - t * t));
  }
};

}  // namespace

Tensor gelu(const Tensor& x, std::string_view approximate) {
  XGRAD_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: argument 'approximate' must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return detail::vu::run<GeluOp>(x, GeluParams{approximate == "tanh"});
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  XGRAD_CHECK(beta != 0 && !std::isnan(beta) && !std::isnan(threshold),
              "softplus: argument 'beta' ({}) must be non-zero and 'threshold' ({}) not NaN", beta, threshold);
  return detail::vu::run<SoftplusOp>(x, SoftplusParams{beta, threshold});
}

Tensor mish(const Tensor& x) { return detail::vu::run<MishOp>(x); }

}  // namespace xgrad
