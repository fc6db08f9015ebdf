// abs, tanh, sigmoid, relu, pow by a number and clamp (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"
#include "xgrad/ops/detail/pointwise.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

namespace {

using detail::pw::lit;
using detail::pw::NoParams;
using detail::pw::Saves;
using detail::pw::select;
namespace pw = detail::pw;

// |x|; dx = g*sign(x), 0 at 0 and NaN (torch's abs_backward)
struct AbsOp {
  static constexpr const char* kName = "abs";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::abs(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return select(x > lit(x, 0), g, select(x < lit(x, 0), -g, pw::zeros_like(g)));
  }
};
struct TanhOp {
  static constexpr const char* kName = "tanh";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::tanh(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * (lit(y, 1) - y * y);
  }
};
// 1/(1 + e^-x), as torch's vectorised kernel: e^-x = inf gives 0, never NaN
struct SigmoidOp {
  static constexpr const char* kName = "sigmoid";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::sigmoid(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * y * (lit(y, 1) - y);
  }
};
// relu(x) = x < 0 ? 0 : x (NaN and -0 stay, as torch's); dx = 0 where y <= 0, else g (torch's
// threshold_backward on the result: g at a NaN)
struct ReluOp {
  static constexpr const char* kName = "relu";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return select(x < lit(x, 0), lit(x, 0), x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return select(y <= lit(y, 0), pw::zeros_like(g), g);
  }
};
// clamp(x, lo, hi) = min(max(x, lo), hi), NaN stays; dx = g where lo <= x <= hi (the bounds pass it,
// as torch's clamp_backward)
struct ClampBounds {
  double lo = 0, hi = 0;
};
struct ClampOp {
  static constexpr const char* kName = "clamp";
  static constexpr Saves kSaves = Saves::input;
  using Params = ClampBounds;
  template <class V>
  static V f(const V& x, const Params& p) {
    const V lo = lit(x, p.lo), hi = lit(x, p.hi);
    return select(x < lo, lo, select(x > hi, hi, x));
  }
  template <class V>
  static V df(const V& g, const V& x, const Params& p) {
    return select((x >= lit(x, p.lo)) & (x <= lit(x, p.hi)), g, pw::zeros_like(g));
  }
};
// a^k (the C library's pow; k = 2: a*a); da = g*k*a^(k-1), 0 for k = 0 (torch's pow_backward)
struct Exponent {
  double k = 0;
};
struct PowScalarOp {
  static constexpr const char* kName = "pow";
  static constexpr Saves kSaves = Saves::input;
  using Params = Exponent;
  static bool scalar_loop(const Params& p) { return p.k != 2.0; }  // pow one element at a time
  template <class V>
  static V f(const V& x, const Params& p) {
    return p.k == 2.0 ? x * x : pw::pow(x, p.k);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params& p) {
    if (p.k == 0.0) return pw::zeros_like(g);
    if (p.k == 1.0) return g;
    if (p.k == 2.0) return g * lit(x, 2) * x;
    return g * lit(x, p.k) * pw::pow(x, p.k - 1.0);
  }
};

}  // namespace

Tensor pow(const Tensor& a, double exponent) { return pw::run<PowScalarOp>(a, Exponent{exponent}); }
Tensor abs(const Tensor& x) {
  if (x.defined() && !is_floating_point(x.dtype())) [[unlikely]]
    return int_abs(x);
  return pw::run<AbsOp>(x);
}
Tensor tanh(const Tensor& x) { return pw::run<TanhOp>(x); }
Tensor sigmoid(const Tensor& x) { return pw::run<SigmoidOp>(x); }
Tensor relu(const Tensor& x) { return pw::run<ReluOp>(x); }
Tensor clamp(const Tensor& x, double lo, double hi) {
  XGRAD_CHECK(!(lo > hi) && !std::isnan(lo) && !std::isnan(hi),
              "clamp: argument 'lo' ({}) must be <= 'hi' ({}) and neither NaN (x has shape {})", lo, hi,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  return pw::run<ClampOp>(x, ClampBounds{lo, hi});
}

}  // namespace xgrad
