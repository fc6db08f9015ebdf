// The exponential, logarithmic and error-function ops of ops/unary_math.hpp: log1p, expm1, log2,
// log10, erf, erfc (Note [Elementwise build time] in elementwise_impl.hpp).
#include <numbers>

#include "xgrad/ops/detail/vec_unary_impl.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using detail::vu::elem_t;
using detail::vu::NoParams;
using detail::vu::Saves;

struct Log1pOp {
  static constexpr const char* kName = "log1p";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::log1p(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return div(g, add(s, 1.0)); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g / (x + B(elem_t<B>(1)));
  }
};
struct Expm1Op {
  static constexpr const char* kName = "expm1";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::expm1(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, add(s, 1.0)); }
  template <class B>
  static B vdf(const B& g, const B& y, const Params&) {
    return g * (y + B(elem_t<B>(1)));
  }
};
struct Log2Op {
  static constexpr const char* kName = "log2";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::log2(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return div(g, mul(s, std::numbers::ln2));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g / (x * B(static_cast<elem_t<B>>(std::numbers::ln2)));
  }
};
struct Log10Op {
  static constexpr const char* kName = "log10";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::log10(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return div(g, mul(s, std::numbers::ln10));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g / (x * B(static_cast<elem_t<B>>(std::numbers::ln10)));
  }
};
// d erf = 2/sqrt(pi) * e^(-x^2)
struct ErfOp {
  static constexpr const char* kName = "erf";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return detail::vu::verf(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return mul(g, mul(exp(neg(mul(s, s))), 2.0 / std::sqrt(std::numbers::pi)));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return B(static_cast<elem_t<B>>(std::numbers::inv_sqrtpi * 2)) * xsimd::exp(-(x * x)) * g;
  }
};
struct ErfcOp {
  static constexpr const char* kName = "erfc";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return detail::vu::lanewise(x, [](elem_t<B> v) { return std::erfc(v); });
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return mul(g, mul(exp(neg(mul(s, s))), -2.0 / std::sqrt(std::numbers::pi)));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return B(static_cast<elem_t<B>>(-std::numbers::inv_sqrtpi * 2)) * xsimd::exp(-(x * x)) * g;
  }
};

}  // namespace

Tensor log1p(const Tensor& x) { return detail::vu::run<Log1pOp>(x); }
Tensor expm1(const Tensor& x) { return detail::vu::run<Expm1Op>(x); }
Tensor log2(const Tensor& x) { return detail::vu::run<Log2Op>(x); }
Tensor log10(const Tensor& x) { return detail::vu::run<Log10Op>(x); }
Tensor erf(const Tensor& x) { return detail::vu::run<ErfOp>(x); }
Tensor erfc(const Tensor& x) { return detail::vu::run<ErfcOp>(x); }

}  // namespace xgrad
