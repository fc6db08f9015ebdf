#include "xgrad/ops/unary_math.hpp"

#include <numbers>

#include "xgrad/ops/define/elementwise_impl.hpp"
#include "xgrad/ops/define/pointwise.hpp"

// The ops of ops/unary_math.hpp, as Pointwise ops (Note [One formula] in ops/define/pointwise.hpp)
// and Binary ops (ops/define/elementwise_impl.hpp).

// ---- rounding, sign, reciprocals, the binary ops (atan2, fmod, remainder), one-sided clamps -------
namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

// ---- zero gradient ------------------------------------------------------------------------------
struct SignOp : pw::Def<"sign"> {
  // (0 < x) - (x < 0): 0 for +-0 and NaN, as torch's sign.
  static constexpr auto f = [](const auto& x, const Params&) {
    const auto zero = lit(x, 0), one = lit(x, 1);
    return select(x > zero, one, zero) - select(x < zero, one, zero);
  };
};
struct FloorOp : pw::Def<"floor"> {
  static constexpr auto f = [](const auto& x, const Params&) { return xsimd::floor(x); };
};
struct CeilOp : pw::Def<"ceil"> {
  static constexpr auto f = [](const auto& x, const Params&) { return xsimd::ceil(x); };
};
struct RoundOp : pw::Def<"round"> {
  // the default rounding mode, to nearest with halves to even (torch's round)
  static constexpr auto f = [](const auto& x, const Params&) { return xsimd::nearbyint(x); };
};
struct Decimals {
  std::int64_t d = 0;
};
// torch's round_decimals kernel: the power of ten in double, taken in the tensor's dtype
struct RoundDecimalsOp : pw::Def<"round", Saves::nothing, Decimals> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto ten_pow = lit(x, std::pow(10.0, static_cast<double>(p.d < 0 ? -p.d : p.d)));
    return p.d < 0 ? xsimd::nearbyint(x / ten_pow) * ten_pow : xsimd::nearbyint(x * ten_pow) / ten_pow;
  };
};
struct TruncOp : pw::Def<"trunc"> {
  static constexpr auto f = [](const auto& x, const Params&) { return xsimd::trunc(x); };
};

// ---- reciprocals ----------------------------------------------------------------------------------
// True divisions: xsimd's rsqrt and reciprocal are the ~12-bit hardware approximations.
struct RsqrtOp : pw::Def<"rsqrt", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return lit(x, 1) / pw::sqrt(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return lit(y, -0.5) * g * (y * y * y); };
};
struct ReciprocalOp : pw::Def<"reciprocal", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return lit(x, 1) / x; };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return -g * (y * y); };
};

// ---- one-sided clamps -----------------------------------------------------------------------------
// x on the bound takes the gradient (torch's clamp_backward): Note [Tie rules] in docs/ops.md.
struct Bound {
  double v = 0;
};
struct ClampMinOp : pw::Def<"clamp_min", Saves::input, Bound> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto lo = lit(x, p.v);
    return select(x < lo, lo, x);  // NaN < lo is false: NaN stays
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select(x >= lit(x, p.v), g, lit(g, 0));
  };
};
struct ClampMaxOp : pw::Def<"clamp_max", Saves::input, Bound> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto hi = lit(x, p.v);
    return select(x > hi, hi, x);
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select(x <= lit(x, p.v), g, lit(g, 0));
  };
};

// ---- with a number: fmod(a, s), remainder(a, s); dx = g -----------------------------------------
template <class T>
T fmod_of(T a, T b) {
  return std::fmod(a, b);
}
// Python's %: the result takes the sign of b (torch's remainder for floating types).
template <class T>
T remainder_of(T a, T b) {
  T m = std::fmod(a, b);
  if (m != T(0) && ((b < T(0)) != (m < T(0)))) m += b;
  return m;
}
struct FmodScalarOp : pw::Def<"fmod", Saves::nothing, Bound> {
  static constexpr bool kPassGrad = true, kScalarLoop = true;
  static constexpr auto f = [](auto a, const Params& p) {
    using T = std::remove_cvref_t<decltype(a)>;
    return fmod_of(a, static_cast<T>(p.v));
  };
};
struct RemainderScalarOp : pw::Def<"remainder", Saves::nothing, Bound> {
  static constexpr bool kPassGrad = true, kScalarLoop = true;
  static constexpr auto f = [](auto a, const Params& p) {
    using T = std::remove_cvref_t<decltype(a)>;
    return remainder_of(a, static_cast<T>(p.v));
  };
};

// ---- binary, broadcasting (Binary<Op> of elementwise_impl.hpp) ------------------------------------
// Binary<Op>'s contract (Note [One formula] in elementwise_impl.hpp): f on elements, the partials on
// elements or tensors.
struct Atan2Op : pw::Def<"atan2", Saves::input> {
  static constexpr auto f = [](auto a, auto b) { return std::atan2(a, b); };
  static constexpr auto da = [](const auto& g, const auto& a, const auto& b, const auto&) {
    return g * b * (lit(a, 1) / (a * a + b * b));
  };
  static constexpr auto db = [](const auto& g, const auto& a, const auto& b, const auto&) {
    return g * -a * (lit(a, 1) / (a * a + b * b));
  };
};
// The quotients trunc(a/b) and floor(a/b) are piecewise constant: their derivative is 0.
struct FmodOp : pw::Def<"fmod", Saves::input> {
  static constexpr auto f = [](auto a, auto b) { return fmod_of(a, b); };
  static constexpr auto da = [](const auto& g, const auto&, const auto&, const auto&) { return g; };
  static constexpr auto db = [](const auto& g, const auto& a, const auto& b, const auto&) {
    return -g * pw::trunc(a / b);
  };
};
struct RemainderOp : pw::Def<"remainder", Saves::input> {
  static constexpr auto f = [](auto a, auto b) { return remainder_of(a, b); };
  static constexpr auto da = [](const auto& g, const auto&, const auto&, const auto&) { return g; };
  static constexpr auto db = [](const auto& g, const auto& a, const auto& b, const auto&) {
    return -g * pw::floor(a / b);
  };
};

}  // namespace

Tensor sign(const Tensor& x) { return detail::pw::run<SignOp>(x); }
Tensor floor(const Tensor& x) { return detail::pw::run<FloorOp>(x); }
Tensor ceil(const Tensor& x) { return detail::pw::run<CeilOp>(x); }
Tensor round(const Tensor& x) { return detail::pw::run<RoundOp>(x); }
Tensor round(const Tensor& x, std::int64_t decimals) { return detail::pw::run<RoundDecimalsOp>(x, Decimals{decimals}); }
Tensor trunc(const Tensor& x) { return detail::pw::run<TruncOp>(x); }
Tensor rsqrt(const Tensor& x) { return detail::pw::run<RsqrtOp>(x); }
Tensor reciprocal(const Tensor& x) { return detail::pw::run<ReciprocalOp>(x); }

Tensor clamp_min(const Tensor& x, double min) {
  check_number("clamp_min", "min", x, min);
  return detail::pw::run<ClampMinOp>(x, Bound{min});
}
Tensor clamp_max(const Tensor& x, double max) {
  check_number("clamp_max", "max", x, max);
  return detail::pw::run<ClampMaxOp>(x, Bound{max});
}

Tensor fmod(const Tensor& a, double b) { return detail::pw::run<FmodScalarOp>(a, Bound{b}); }
Tensor remainder(const Tensor& a, double b) { return detail::pw::run<RemainderScalarOp>(a, Bound{b}); }

// Binary<Op> checks definedness, dtypes and shapes; the floating-point check comes first.
template <class Op>
Tensor binary_op(const Tensor& a, const Tensor& b) {
  check_floating(Op::kName, "a", a);
  check_floating(Op::kName, "b", b);
  return apply<detail::ew::Binary<Op>>(a, b);
}

Tensor atan2(const Tensor& a, const Tensor& b) { return binary_op<Atan2Op>(a, b); }
Tensor fmod(const Tensor& a, const Tensor& b) { return binary_op<FmodOp>(a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary_op<RemainderOp>(a, b); }

}  // namespace xgrad

// ---- the exponential, logarithmic and error-function ops: log1p, expm1, log2, log10, erf, erfc ----
namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct Log1pOp : pw::Def<"log1p", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log1p(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / (x + lit(x, 1)); };
};
struct Expm1Op : pw::Def<"expm1", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::expm1(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (y + lit(y, 1)); };
};
struct Log2Op : pw::Def<"log2", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log2(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln2));
  };
};
struct Log10Op : pw::Def<"log10", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log10(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln10));
  };
};
// d erf = 2/sqrt(pi) * e^(-x^2)
struct ErfOp : pw::Def<"erf", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::erf(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return lit(x, std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  };
};
// d erfc = -2/sqrt(pi) * e^(-x^2); the C library's erfc (Note in pointwise.hpp, lanewise)
struct ErfcOp : pw::Def<"erfc", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) {
    using V = std::remove_cvref_t<decltype(x)>;
    return pw::lanewise(x, [](pw::elem_t<V> v) { return std::erfc(v); });
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return lit(x, -std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  };
};

}  // namespace

Tensor log1p(const Tensor& x) { return detail::pw::run<Log1pOp>(x); }
Tensor expm1(const Tensor& x) { return detail::pw::run<Expm1Op>(x); }
Tensor log2(const Tensor& x) { return detail::pw::run<Log2Op>(x); }
Tensor log10(const Tensor& x) { return detail::pw::run<Log10Op>(x); }
Tensor erf(const Tensor& x) { return detail::pw::run<ErfOp>(x); }
Tensor erfc(const Tensor& x) { return detail::pw::run<ErfcOp>(x); }

}  // namespace xgrad

// ---- the trigonometric and hyperbolic ops: sin, cos, tan, asin, acos, atan, sinh, cosh -----------
namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct SinOp : pw::Def<"sin", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sin(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::cos(x); };
};
struct CosOp : pw::Def<"cos", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::cos(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * -pw::sin(x); };
};
struct TanOp : pw::Def<"tan", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::tan(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (lit(y, 1) + y * y); };
};
// d asin = 1/sqrt(1 - x^2), d acos = -1/sqrt(1 - x^2): inf at +-1, NaN outside (as torch)
struct AsinOp : pw::Def<"asin", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::asin(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g * (lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  };
};
struct AcosOp : pw::Def<"acos", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::acos(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g * -(lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  };
};
struct AtanOp : pw::Def<"atan", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::atan(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / (x * x + lit(x, 1)); };
};
struct SinhOp : pw::Def<"sinh", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sinh(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::cosh(x); };
};
struct CoshOp : pw::Def<"cosh", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::cosh(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::sinh(x); };
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
