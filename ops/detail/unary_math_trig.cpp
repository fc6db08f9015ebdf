// The trigonometric and hyperbolic ops of ops/unary_math.hpp: sin, cos, tan, asin, acos, atan, sinh,
// cosh (Note [Elementwise build time] in elementwise_impl.hpp: xsimd's math for two dtypes per op).
#include "xgrad/ops/detail/vec_unary_impl.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using detail::vu::elem_t;
using detail::vu::NoParams;
using detail::vu::Saves;

struct SinOp {
  static constexpr const char* kName = "sin";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::sin(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, cos(s)); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g * xsimd::cos(x);
  }
};
struct CosOp {
  static constexpr const char* kName = "cos";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::cos(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, neg(sin(s))); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g * -xsimd::sin(x);
  }
};
struct TanOp {
  static constexpr const char* kName = "tan";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::tan(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, add(mul(s, s), 1.0)); }
  template <class B>
  static B vdf(const B& g, const B& y, const Params&) {
    return g * (B(elem_t<B>(1)) + y * y);
  }
};
// d asin = 1/sqrt(1 - x^2), d acos = -1/sqrt(1 - x^2): inf at +-1, NaN outside (as torch)
struct AsinOp {
  static constexpr const char* kName = "asin";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::asin(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return div(g, sqrt(add(neg(mul(s, s)), 1.0)));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    const B one(elem_t<B>(1));
    return g * (one / xsimd::sqrt(one - x * x));
  }
};
struct AcosOp {
  static constexpr const char* kName = "acos";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::acos(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) {
    return neg(div(g, sqrt(add(neg(mul(s, s)), 1.0))));
  }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    const B one(elem_t<B>(1));
    return g * -(one / xsimd::sqrt(one - x * x));
  }
};
struct AtanOp {
  static constexpr const char* kName = "atan";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::atan(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return div(g, add(mul(s, s), 1.0)); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g / (x * x + B(elem_t<B>(1)));
  }
};
struct SinhOp {
  static constexpr const char* kName = "sinh";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::sinh(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, cosh(s)); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g * xsimd::cosh(x);
  }
};
struct CoshOp {
  static constexpr const char* kName = "cosh";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class B>
  static B vf(const B& x, const Params&) {
    return xsimd::cosh(x);
  }
  static Tensor recorded_df(const Tensor& g, const Tensor& s, const Params&) { return mul(g, sinh(s)); }
  template <class B>
  static B vdf(const B& g, const B& x, const Params&) {
    return g * xsimd::sinh(x);
  }
};

}  // namespace

Tensor sin(const Tensor& x) { return detail::vu::run<SinOp>(x); }
Tensor cos(const Tensor& x) { return detail::vu::run<CosOp>(x); }
Tensor tan(const Tensor& x) { return detail::vu::run<TanOp>(x); }
Tensor asin(const Tensor& x) { return detail::vu::run<AsinOp>(x); }
Tensor acos(const Tensor& x) { return detail::vu::run<AcosOp>(x); }
Tensor atan(const Tensor& x) { return detail::vu::run<AtanOp>(x); }
Tensor sinh(const Tensor& x) { return detail::vu::run<SinhOp>(x); }
Tensor cosh(const Tensor& x) { return detail::vu::run<CoshOp>(x); }

}  // namespace xgrad
