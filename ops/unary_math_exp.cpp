// The exponential, logarithmic and error-function ops of ops/unary_math.hpp: log1p, expm1, log2,
// log10, erf, erfc (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include <numbers>

#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct Log1pOp {
  static constexpr const char* kName = "log1p";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::log1p(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g / (x + lit(x, 1));
  }
};
struct Expm1Op {
  static constexpr const char* kName = "expm1";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::expm1(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * (y + lit(y, 1));
  }
};
struct Log2Op {
  static constexpr const char* kName = "log2";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::log2(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln2));
  }
};
struct Log10Op {
  static constexpr const char* kName = "log10";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::log10(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln10));
  }
};
// d erf = 2/sqrt(pi) * e^(-x^2)
struct ErfOp {
  static constexpr const char* kName = "erf";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::erf(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return lit(x, std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  }
};
// d erfc = -2/sqrt(pi) * e^(-x^2); the C library's erfc (Note in pointwise.hpp, lanewise)
struct ErfcOp {
  static constexpr const char* kName = "erfc";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::lanewise(x, [](pw::elem_t<V> v) { return std::erfc(v); });
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return lit(x, -std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  }
};

}  // namespace

Tensor log1p(const Tensor& x) { return detail::pw::run<Log1pOp>(x); }
Tensor expm1(const Tensor& x) { return detail::pw::run<Expm1Op>(x); }
Tensor log2(const Tensor& x) { return detail::pw::run<Log2Op>(x); }
Tensor log10(const Tensor& x) { return detail::pw::run<Log10Op>(x); }
Tensor erf(const Tensor& x) { return detail::pw::run<ErfOp>(x); }
Tensor erfc(const Tensor& x) { return detail::pw::run<ErfcOp>(x); }

}  // namespace xgrad
