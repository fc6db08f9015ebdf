// Rounding, sign, reciprocals, the binary ops (atan2, fmod, remainder) and the one-sided clamps of
// ops/unary_math.hpp; the transcendental ones are in ops/unary_math_trig.cpp and
// unary_math_exp.cpp (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/unary_math.hpp"

#include "xgrad/ops/detail/elementwise_impl.hpp"
#include "xgrad/ops/detail/pointwise.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

// ---- zero gradient ------------------------------------------------------------------------------
struct SignOp {
  static constexpr const char* kName = "sign";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  // (0 < x) - (x < 0): 0 for +-0 and NaN, as torch's sign.
  template <class V>
  static V f(const V& x, const Params&) {
    const V zero = lit(x, 0), one = lit(x, 1);
    return select(x > zero, one, zero) - select(x < zero, one, zero);
  }
};
struct FloorOp {
  static constexpr const char* kName = "floor";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return xsimd::floor(x);
  }
};
struct CeilOp {
  static constexpr const char* kName = "ceil";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return xsimd::ceil(x);
  }
};
struct RoundOp {
  static constexpr const char* kName = "round";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  // the default rounding mode, to nearest with halves to even (torch's round)
  template <class V>
  static V f(const V& x, const Params&) {
    return xsimd::nearbyint(x);
  }
};
struct Decimals {
  std::int64_t d = 0;
};
// torch's round_decimals kernel: the power of ten in double, taken in the tensor's dtype
struct RoundDecimalsOp {
  static constexpr const char* kName = "round";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = Decimals;
  template <class V>
  static V f(const V& x, const Params& p) {
    const V ten_pow = lit(x, std::pow(10.0, static_cast<double>(p.d < 0 ? -p.d : p.d)));
    return p.d < 0 ? xsimd::nearbyint(x / ten_pow) * ten_pow : xsimd::nearbyint(x * ten_pow) / ten_pow;
  }
};
struct TruncOp {
  static constexpr const char* kName = "trunc";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return xsimd::trunc(x);
  }
};

// ---- reciprocals ----------------------------------------------------------------------------------
// True divisions: xsimd's rsqrt and reciprocal are the ~12-bit hardware approximations.
struct RsqrtOp {
  static constexpr const char* kName = "rsqrt";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return lit(x, 1) / pw::sqrt(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return lit(y, -0.5) * g * (y * y * y);
  }
};
struct ReciprocalOp {
  static constexpr const char* kName = "reciprocal";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return lit(x, 1) / x;
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return -g * (y * y);
  }
};

// ---- one-sided clamps -----------------------------------------------------------------------------
// x on the bound takes the gradient (torch's clamp_backward): Note [Tie rules] in docs/ops.md.
struct Bound {
  double v = 0;
};
struct ClampMinOp {
  static constexpr const char* kName = "clamp_min";
  static constexpr Saves kSaves = Saves::input;
  using Params = Bound;
  template <class V>
  static V f(const V& x, const Params& p) {
    const V lo = lit(x, p.v);
    return select(x < lo, lo, x);  // NaN < lo is false: NaN stays
  }
  template <class V>
  static V df(const V& g, const V& x, const Params& p) {
    return select(x >= lit(x, p.v), g, lit(g, 0));
  }
};
struct ClampMaxOp {
  static constexpr const char* kName = "clamp_max";
  static constexpr Saves kSaves = Saves::input;
  using Params = Bound;
  template <class V>
  static V f(const V& x, const Params& p) {
    const V hi = lit(x, p.v);
    return select(x > hi, hi, x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params& p) {
    return select(x <= lit(x, p.v), g, lit(g, 0));
  }
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
struct FmodScalarOp {
  static constexpr const char* kName = "fmod";
  static constexpr Saves kSaves = Saves::nothing;
  static constexpr bool kPassGrad = true, kScalarLoop = true;
  using Params = Bound;
  template <class T>
  static T f(T a, const Params& p) {
    return fmod_of(a, static_cast<T>(p.v));
  }
};
struct RemainderScalarOp {
  static constexpr const char* kName = "remainder";
  static constexpr Saves kSaves = Saves::nothing;
  static constexpr bool kPassGrad = true, kScalarLoop = true;
  using Params = Bound;
  template <class T>
  static T f(T a, const Params& p) {
    return remainder_of(a, static_cast<T>(p.v));
  }
};

// ---- binary, broadcasting (Binary<Op> of elementwise_impl.hpp) ------------------------------------
// Binary<Op>'s contract (Note [One formula] in elementwise_impl.hpp): f on elements, the partials on
// elements or tensors.
struct Atan2Op {
  static constexpr const char* kName = "atan2";
  static constexpr Saves kSaves = Saves::input;
  template <class T>
  static T f(T a, T b) {
    return std::atan2(a, b);
  }
  template <class V>
  static V da(const V& g, const V& a, const V& b, const V&) {
    return g * b * (lit(a, 1) / (a * a + b * b));
  }
  template <class V>
  static V db(const V& g, const V& a, const V& b, const V&) {
    return g * -a * (lit(a, 1) / (a * a + b * b));
  }
};
// The quotients trunc(a/b) and floor(a/b) are piecewise constant: their derivative is 0.
struct FmodOp {
  static constexpr const char* kName = "fmod";
  static constexpr Saves kSaves = Saves::input;
  template <class T>
  static T f(T a, T b) {
    return fmod_of(a, b);
  }
  template <class V>
  static V da(const V& g, const V&, const V&, const V&) {
    return g;
  }
  template <class V>
  static V db(const V& g, const V& a, const V& b, const V&) {
    return -g * pw::trunc(a / b);
  }
};
struct RemainderOp {
  static constexpr const char* kName = "remainder";
  static constexpr Saves kSaves = Saves::input;
  template <class T>
  static T f(T a, T b) {
    return remainder_of(a, b);
  }
  template <class V>
  static V da(const V& g, const V&, const V&, const V&) {
    return g;
  }
  template <class V>
  static V db(const V& g, const V& a, const V& b, const V&) {
    return -g * pw::floor(a / b);
  }
};

void check_bound(const char* op, const char* arg, const Tensor& x, double v) {
  XGRAD_CHECK(!std::isnan(v), "{}: argument '{}' is NaN (x has shape {})", op, arg,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

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
  check_bound("clamp_min", "min", x, min);
  return detail::pw::run<ClampMinOp>(x, Bound{min});
}
Tensor clamp_max(const Tensor& x, double max) {
  check_bound("clamp_max", "max", x, max);
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
