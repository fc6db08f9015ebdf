// silu, leaky_relu, elu, selu, hardtanh and logsigmoid (ops/activation.hpp); gelu, softplus and
// mish, which instantiate more of xsimd's math, are in ops/detail/activation_smooth.cpp (Note
// [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/activation.hpp"

#include "xgrad/ops/detail/vec_unary_impl.hpp"

namespace xgrad {

namespace {

using detail::vu::elem_t;
using detail::vu::NoParams;
using detail::vu::Saves;

// silu(x) = x/(1 + e^-x), as torch computes it; dx = g*s*(1 + x*(1 - s))
struct SiluOp {
  static constexpr const char* kName = "silu";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return x / (B(elem_t<B>(1)) + xsimd::exp(-x));
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params&) {
    const Tensor s = sigmoid(x);
    return mul(g, mul(s, add(mul(x, add(neg(s), 1.0)), 1.0)));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    const B one(elem_t<B>(1));
    const B s = detail::vu::vsigmoid(x);
    return g * s * (one + x * (one - s));
  }
};

struct Slope {
  double slope = 0;
};
struct LeakyReluOp {
  static constexpr const char* kName = "leaky_relu";
  static constexpr Saves kSaves = Saves::input;
  using Params = Slope;
  template <class B>
  static B vf(const B& x, const Params& p) {
    return xsimd::select(x > B(elem_t<B>(0)), x, x * B(static_cast<elem_t<B>>(p.slope)));
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) {
    const Tensor m = gt(x.detach(), Tensor::zeros({}, x.dtype())).to(x.dtype());  // constant 0/1
    return mul(g, add(mul(m, 1.0 - p.slope), p.slope));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    return xsimd::select(x > B(elem_t<B>(0)), g, g * B(static_cast<elem_t<B>>(p.slope)));
  }
};

// elu and selu: y = x*scale for x > 0, else alpha*scale*(e^x - 1); dx = g*scale, or g*alpha*scale*e^x
// (torch's elu kernel with input_scale 1; x = 0 takes the exponential side, as torch's)
struct EluParams {
  double alpha = 1, scale = 1;
};
template <class B>
B elu_forward(const B& x, const EluParams& p) {
  using T = elem_t<B>;
  const B neg = xsimd::expm1(x) * B(static_cast<T>(p.alpha * p.scale));
  return xsimd::select(x <= B(T(0)), neg, x * B(static_cast<T>(p.scale)));
}
template <class B>
B elu_backward(const B& g, const B& x, const EluParams& p) {
  using T = elem_t<B>;
  const B neg = g * B(static_cast<T>(p.alpha * p.scale)) * xsimd::exp(x);
  return xsimd::select(x <= B(T(0)), neg, g * B(static_cast<T>(p.scale)));
}
// Note [Create graph]: the elu/selu derivative, recorded: g*alpha*scale*e^x where x <= 0, else g*scale.
inline Tensor recorded_elu_df(const Tensor& g, const Tensor& x, const EluParams& p) {
  const Tensor m = le(x.detach(), Tensor::zeros({}, x.dtype())).to(x.dtype());  // constant 0/1
  return mul(g, add(mul(mul(m, exp(x)), p.alpha * p.scale), mul(add(neg(m), 1.0), p.scale)));
}
struct EluOp {
  static constexpr const char* kName = "elu";
  static constexpr Saves kSaves = Saves::input;
  using Params = EluParams;
  template <class B>
  static B vf(const B& x, const Params& p) {
    return elu_forward(x, p);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) { return recorded_elu_df(g, x, p); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    return elu_backward(g, x, p);
  }
};
struct SeluOp {
  static constexpr const char* kName = "selu";
  static constexpr Saves kSaves = Saves::input;
  using Params = EluParams;
  template <class B>
  static B vf(const B& x, const Params& p) {
    return elu_forward(x, p);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) { return recorded_elu_df(g, x, p); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    return elu_backward(g, x, p);
  }
};
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

struct Bounds {
  double lo = -1, hi = 1;
};
// hardtanh: the boundaries get no gradient (torch's hardtanh_backward), unlike clamp's
struct HardtanhOp {
  static constexpr const char* kName = "hardtanh";
  static constexpr Saves kSaves = Saves::input;
  using Params = Bounds;
  template <class B>
  static B vf(const B& x, const Params& p) {
    using T = elem_t<B>;
    const B lo(static_cast<T>(p.lo)), hi(static_cast<T>(p.hi));
    return xsimd::select(x < lo, lo, xsimd::select(x > hi, hi, x));  // NaN stays NaN
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params& p) {
    const Tensor xd = x.detach();
    const Tensor m =
        logical_or(le(xd, Tensor::full({}, p.lo, x.dtype())), ge(xd, Tensor::full({}, p.hi, x.dtype()))).to(x.dtype());
    return mul(g, add(neg(m), 1.0));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params& p) {
    using T = elem_t<B>;
    const B lo(static_cast<T>(p.lo)), hi(static_cast<T>(p.hi));
    return xsimd::select((x <= lo) | (x >= hi), B(T(0)), g);
  }
};

// logsigmoid(x) = min(x, 0) - ln(1 + e^-|x|); dx = g*(1/(1+z)) for x < 0, g*(z/(1+z)) otherwise,
// z = e^-|x| (torch's log_sigmoid kernels)
struct LogsigmoidOp {
  static constexpr const char* kName = "logsigmoid";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    using T = elem_t<B>;
    return xsimd::min(x, B(T(0))) - xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& x, const Params&) { return mul(g, sigmoid(neg(x))); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    using T = elem_t<B>;
    const B zero(T(0)), one(T(1));
    const B z = xsimd::exp(-xsimd::abs(x));
    const auto neg = x < zero;
    const B max_deriv = xsimd::select(neg, one, zero);
    const B sgn = xsimd::select(neg, one, -one);
    return g * (max_deriv - sgn * (z / (one + z)));
  }
};

void check_number(const char* op, const char* arg, const Tensor& x, double v) {
  XGRAD_CHECK(!std::isnan(v), "{}: argument '{}' is NaN (x has shape {})", op, arg,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

}  // namespace

Tensor silu(const Tensor& x) { return detail::vu::run<SiluOp>(x); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_number("leaky_relu", "negative_slope", x, negative_slope);
  return detail::vu::run<LeakyReluOp>(x, Slope{negative_slope});
}

Tensor elu(const Tensor& x, double alpha) {
  check_number("elu", "alpha", x, alpha);
  return detail::vu::run<EluOp>(x, EluParams{alpha, 1.0});
}

Tensor selu(const Tensor& x) { return detail::vu::run<SeluOp>(x, EluParams{kSeluAlpha, kSeluScale}); }

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_number("hardtanh", "min_val", x, min_val);
  check_number("hardtanh", "max_val", x, max_val);
  XGRAD_CHECK(min_val <= max_val, "hardtanh: argument 'min_val' ({}) must be <= 'max_val' ({}) (x has shape {})",
              min_val, max_val, x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  return detail::vu::run<HardtanhOp>(x, Bounds{min_val, max_val});
}

Tensor logsigmoid(const Tensor& x) { return detail::vu::run<LogsigmoidOp>(x); }

}  // namespace xgrad
