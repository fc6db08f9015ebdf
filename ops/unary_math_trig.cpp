// The trigonometric and hyperbolic ops of ops/unary_math.hpp: sin, cos, tan, asin, acos, atan, sinh,
// cosh (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp: xsimd's math for two dtypes per op).
#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct SinOp {
  static constexpr const char* kName = "sin";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::sin(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * pw::cos(x);
  }
};
struct CosOp {
  static constexpr const char* kName = "cos";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::cos(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * -pw::sin(x);
  }
};
struct TanOp {
  static constexpr const char* kName = "tan";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::tan(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * (lit(y, 1) + y * y);
  }
};
// d asin = 1/sqrt(1 - x^2), d acos = -1/sqrt(1 - x^2): inf at +-1, NaN outside (as torch)
struct AsinOp {
  static constexpr const char* kName = "asin";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::asin(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * (lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  }
};
struct AcosOp {
  static constexpr const char* kName = "acos";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::acos(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * -(lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  }
};
struct AtanOp {
  static constexpr const char* kName = "atan";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::atan(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g / (x * x + lit(x, 1));
  }
};
struct SinhOp {
  static constexpr const char* kName = "sinh";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::sinh(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * pw::cosh(x);
  }
};
struct CoshOp {
  static constexpr const char* kName = "cosh";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::cosh(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g * pw::sinh(x);
  }
};

}  // namespace

Tensor sin(const Tensor& x) { return detail::pw::run<SinOp>(x); }
Tensor cos(const Tensor& x) { return detail::pw::run<CosOp>(x); }
Tensor tan(const Tensor& x) { return detail::pw::run<TanOp>(x); }
Tensor asin(const Tensor& x) { return detail::pw::run<AsinOp>(x); }
Tensor acos(const Tensor& x) { return detail::pw::run<AcosOp>(x); }
Tensor atan(const Tensor& x) { return detail::pw::run<AtanOp>(x); }
Tensor sinh(const Tensor& x) { return detail::pw::run<SinhOp>(x); }
Tensor cosh(const Tensor& x) { return detail::pw::run<CoshOp>(x); }

}  // namespace xgrad
