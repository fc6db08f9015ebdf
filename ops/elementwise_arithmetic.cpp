// The piecewise-linear and arithmetic pointwise ops of ops/elementwise.hpp: neg, abs, relu, clamp, pow by
// a number and the forms with a number (add, sub, mul, div, s / x), as Pointwise ops (Note [One
// formula] in ops/detail/pointwise.hpp); exp, log, sqrt, tanh and sigmoid are in
// elementwise_transcendental.cpp (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"
#include "xgrad/ops/detail/pointwise.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the integer kernels

namespace {
bool is_integer(const Tensor& t) { return t.defined() && !is_floating_point(t.dtype()); }

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct NegOp : pw::Def<"neg"> {
  static constexpr auto f = [](const auto& x, const Params&) { return -x; };
  static constexpr auto df = [](const auto& g, const auto&, const Params&) { return -g; };
};
// |x|; dx = g*sign(x), 0 at 0 and NaN (torch's abs_backward)
struct AbsOp : pw::Def<"abs", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::abs(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return select(x > lit(x, 0), g, select(x < lit(x, 0), -g, pw::zeros_like(g)));
  };
};
// relu(x) = x < 0 ? 0 : x (NaN and -0 stay, as torch's); dx = 0 where y <= 0, else g (torch's
// threshold_backward on the result: g at a NaN)
struct ReluOp : pw::Def<"relu", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return select(x < lit(x, 0), lit(x, 0), x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) {
    return select(y <= lit(y, 0), pw::zeros_like(g), g);
  };
};
// clamp(x, lo, hi) = min(max(x, lo), hi), NaN stays; dx = g where lo <= x <= hi (the bounds pass it,
// as torch's clamp_backward)
struct ClampBounds {
  double lo = 0, hi = 0;
};
struct ClampOp : pw::Def<"clamp", Saves::input, ClampBounds> {
  static constexpr auto f = [](const auto& x, const Params& p) {
    const auto lo = lit(x, p.lo), hi = lit(x, p.hi);
    return select(x < lo, lo, select(x > hi, hi, x));
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    return select((x >= lit(x, p.lo)) & (x <= lit(x, p.hi)), g, pw::zeros_like(g));
  };
};
// a^k (the C library's pow; k = 2: a*a); da = g*k*a^(k-1), 0 for k = 0 (torch's pow_backward)
struct Exponent {
  double k = 0;
};
struct PowScalarOp : pw::Def<"pow", Saves::input, Exponent> {
  static bool scalar_loop(const Params& p) { return p.k != 2.0; }  // pow one element at a time
  static constexpr auto f = [](const auto& x, const Params& p) { return p.k == 2.0 ? x * x : pw::pow(x, p.k); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) {
    if (p.k == 0.0) return pw::zeros_like(g);
    if (p.k == 1.0) return g;
    if (p.k == 2.0) return g * lit(x, 2) * x;
    return g * lit(x, p.k) * pw::pow(x, p.k - 1.0);
  };
};

// a (op) s for a number s, taken in a's dtype (no 0-d tensor for s): the same float operations as
// the broadcasting tensor form, so the same bits.
struct Number {
  double s = 0;
};
struct AddNumberOp : pw::Def<"add", Saves::nothing, Number> {
  static constexpr bool kPassGrad = true;
  static constexpr auto f = [](const auto& x, const Params& p) { return x + lit(x, p.s); };
};
struct SubNumberOp : pw::Def<"sub", Saves::nothing, Number> {
  static constexpr bool kPassGrad = true;
  static constexpr auto f = [](const auto& x, const Params& p) { return x - lit(x, p.s); };
};
struct MulNumberOp : pw::Def<"mul", Saves::nothing, Number> {
  static constexpr auto f = [](const auto& x, const Params& p) { return x * lit(x, p.s); };
  static constexpr auto df = [](const auto& g, const auto&, const Params& p) { return g * lit(g, p.s); };
};
struct DivNumberOp : pw::Def<"div", Saves::nothing, Number> {
  static constexpr auto f = [](const auto& x, const Params& p) { return x / lit(x, p.s); };
  static constexpr auto df = [](const auto& g, const auto&, const Params& p) { return g / lit(g, p.s); };
};
// s / x: dx = -g*s/x^2, as DivOp::db with a = s
struct NumberDivOp : pw::Def<"div", Saves::input, Number> {
  static constexpr auto f = [](const auto& x, const Params& p) { return lit(x, p.s) / x; };
  static constexpr auto df = [](const auto& g, const auto& x, const Params& p) { return -g * lit(x, p.s) / (x * x); };
};
}  // namespace

Tensor add(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::add, "add", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&add));
  return pw::run<AddNumberOp>(a, Number{b});
}
Tensor sub(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::sub, "sub", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&sub));
  return pw::run<SubNumberOp>(a, Number{b});
}
Tensor mul(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::mul, "mul", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&mul));
  return pw::run<MulNumberOp>(a, Number{b});
}
// Division of an integer tensor is true division in float32.
Tensor div(const Tensor& a, double b) { return pw::run<DivNumberOp>(is_integer(a) ? a.to(kFloat32) : a, Number{b}); }
Tensor operator/(double a, const Tensor& b) {
  return pw::run<NumberDivOp>(is_integer(b) ? b.to(kFloat32) : b, Number{a});
}
Tensor neg(const Tensor& x) {
  if (is_integer(x)) [[unlikely]]
    return int_neg(x);
  return pw::run<NegOp>(x);
}
Tensor pow(const Tensor& a, double exponent) { return pw::run<PowScalarOp>(a, Exponent{exponent}); }
Tensor abs(const Tensor& x) {
  if (is_integer(x)) [[unlikely]]
    return int_abs(x);
  return pw::run<AbsOp>(x);
}
Tensor relu(const Tensor& x) { return pw::run<ReluOp>(x); }
Tensor clamp(const Tensor& x, double lo, double hi) {
  check_bounds("clamp", "lo", lo, "hi", hi, x);
  return pw::run<ClampOp>(x, ClampBounds{lo, hi});
}

}  // namespace xgrad
