#include "xgrad/ops/elementwise.hpp"

#include <cmath>
#include <type_traits>

#include "xgrad/ops/define/elementwise_impl.hpp"
#include "xgrad/ops/define/pointwise.hpp"

// The ops of ops/elementwise.hpp. Float kernels and autograd Functions: ops/define/elementwise_impl.hpp
// (binary ops) and ops/define/pointwise.hpp (unary ops, Note [One formula]).

// ---- the arithmetic binary ops -------------------------------------------------------------------
namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor add(const Tensor& a, const Tensor& b) { return promoted_binary<AddOp>(IntKind::add, a, b, &add); }
Tensor sub(const Tensor& a, const Tensor& b) { return promoted_binary<SubOp>(IntKind::sub, a, b, &sub); }
Tensor mul(const Tensor& a, const Tensor& b) { return promoted_binary<MulOp>(IntKind::mul, a, b, &mul); }
Tensor div(const Tensor& a, const Tensor& b) {
  // True division: integer operands are divided in float32 (torch: int / int is float32).
  if (involves_integer(a, b)) [[unlikely]] {
    Dtype c = promote_types(a.dtype(), b.dtype());
    if (!is_floating_point(c)) c = kFloat32;
    return apply<Binary<DivOp>>(a.to(c), b.to(c));
  }
  if (mixed_float(a, b)) [[unlikely]]
    return div(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<DivOp>>(a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  if (mixed_float(a, b)) [[unlikely]]
    return pow(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<PowOp>>(a, b);
}

}  // namespace xgrad

// ---- the piecewise-linear and arithmetic pointwise ops: neg, abs, relu, clamp, pow by a number and
// the forms with a number (add, sub, mul, div, s / x) ------------------------------------------------
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

// ---- maximum, minimum, where, masked_select, the comparisons, the logical ops and masked_fill -----
namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor maximum(const Tensor& a, const Tensor& b) { return promoted_binary<MaxOp>(IntKind::maximum, a, b, &maximum); }
Tensor minimum(const Tensor& a, const Tensor& b) { return promoted_binary<MinOp>(IntKind::minimum, a, b, &minimum); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (involves_integer(a, b)) [[unlikely]] {
    XGRAD_CHECK(cond.defined(), "where: argument 'cond' is an undefined tensor");
    const Dtype c = promote_types(a.dtype(), b.dtype());
    if (is_floating_point(c)) return apply<Where>(cond, a.to(c), b.to(c));
    return where_integer(cond, a.to(c), b.to(c));
  }
  return apply<Where>(cond, a, b);
}
Tensor masked_select(const Tensor& x, const Tensor& mask) { return apply<MaskedSelect>(x, mask); }

Tensor gt(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::gt, "gt", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::lt, "lt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::ge, "ge", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::le, "le", a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::ne, "ne", a, b); }

Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(LogicalKind::and_, "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(LogicalKind::or_, "logical_or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(LogicalKind::xor_, "logical_xor", a, b); }
Tensor logical_not(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "logical_not: argument 'x' is an undefined tensor");
  const Tensor b = x.detach().to(kBool);
  Tensor out = Tensor::empty(b.shape(), kBool);
  detail::broadcast_map<bool, 1>(out.data<bool>(), b.shape(), {b.data<bool>()}, {&b.shape()},
                                 [](bool v) { return !v; });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  XGRAD_CHECK(x.defined() && mask.defined(), "masked_fill: argument '{}' is an undefined tensor",
              x.defined() ? "mask" : "x");
  // torch takes a bool mask; torch 1.13 ignores a float one silently, later versions refuse it.
  XGRAD_CHECK(!is_floating_point(mask.dtype()),
              "masked_fill: argument 'mask' has dtype {} (shape {}): a mask must be bool (or an integer dtype, "
              "nonzero = fill); compare first, e.g. masked_fill(x, mask != 0, value)",
              mask.dtype(), shape_str(mask.shape()));
  XGRAD_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(),
              "masked_fill: mask of shape {} must broadcast to x's shape {}", shape_str(mask.shape()),
              shape_str(x.shape()));
  return where(mask, Tensor::scalar(value, x.dtype()), x);
}

namespace detail {

Tensor comparison_operand(const Tensor& x, double value) {
  if (x.defined() && is_floating_point(x.dtype())) return Tensor::scalar(value, x.dtype());
  if (!x.defined()) return Tensor::scalar(value);  // the op then names the undefined argument
  const bool whole = std::isfinite(value) && std::trunc(value) == value && std::abs(value) < 0x1p63;
  return Tensor::scalar(value, whole ? kInt64 : kFloat32);
}

Tensor comparison_operand(const Tensor& x, std::int64_t value) {
  if (x.defined() && is_floating_point(x.dtype())) return Tensor::scalar(static_cast<double>(value), x.dtype());
  return Tensor::from_vector(std::vector<std::int64_t>{value}, {});
}

void check_bool_operands(const char* op, const Tensor& a, const Tensor& b) {
  const bool unary = &a == &b;
  const char* what = unary ? "its operand" : "both operands";
  XGRAD_CHECK(a.defined() && b.defined(), "{}: {} must be defined bool tensors; got an undefined tensor", op, what);
  if (unary) {
    XGRAD_CHECK(a.dtype() == kBool,
                "{}: its operand must be a bool tensor (bitwise not of {} is not implemented); got {} {}; use "
                "logical_not for truth values",
                op, a.dtype(), a.dtype(), shape_str(a.shape()));
    return;
  }
  XGRAD_CHECK(a.dtype() == kBool && b.dtype() == kBool,
              "{}: both operands must be bool tensors (bitwise ops on integers are not implemented); got a: {} {} and "
              "b: {} {}; use logical_and/logical_or/logical_xor for truth values of any dtype",
              op, a.dtype(), shape_str(a.shape()), b.dtype(), shape_str(b.shape()));
}

}  // namespace detail
}  // namespace xgrad

// ---- the transcendental pointwise ops: exp, log, sqrt, tanh and sigmoid, on xsimd's math ---------
namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct ExpOp : pw::Def<"exp", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::exp(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * y; };
};
struct LogOp : pw::Def<"log", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / x; };
};
struct SqrtOp : pw::Def<"sqrt", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sqrt(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g / (lit(y, 2) * y); };
};
struct TanhOp : pw::Def<"tanh", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::tanh(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (lit(y, 1) - y * y); };
};
// 1/(1 + e^-x), as torch's vectorised kernel: e^-x = inf gives 0, never NaN
struct SigmoidOp : pw::Def<"sigmoid", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sigmoid(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * y * (lit(y, 1) - y); };
};
}  // namespace

Tensor exp(const Tensor& x) { return pw::run<ExpOp>(x); }
Tensor log(const Tensor& x) { return pw::run<LogOp>(x); }
Tensor sqrt(const Tensor& x) { return pw::run<SqrtOp>(x); }
Tensor tanh(const Tensor& x) { return pw::run<TanhOp>(x); }
Tensor sigmoid(const Tensor& x) { return pw::run<SigmoidOp>(x); }

}  // namespace xgrad

// ---- the kernels on integer and bool tensors (Note [Integer promotion] in
// ops/define/elementwise_impl.hpp): integer arithmetic, where on integer operands, the comparisons
// (any dtype) and the logical ops. Plain broadcast loops over the six element types, no autograd
// (integer tensors have no gradient). -------------------------------------------------------------
namespace xgrad {
namespace detail::ew {
namespace {

// Two's complement wrap-around without undefined behaviour (int64 overflow is UB in C++).
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a || b;
  else
    return static_cast<T>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a != b;  // never reached: sub of bools is refused
  else
    return static_cast<T>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a && b;
  else
    return static_cast<T>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

template <class T>
T int_apply(IntKind k, T a, T b) {
  switch (k) {
    case IntKind::add:
      return wrap_add(a, b);
    case IntKind::sub:
      return wrap_sub(a, b);
    case IntKind::mul:
      return wrap_mul(a, b);
    case IntKind::maximum:
      return a >= b ? a : b;
    case IntKind::minimum:
      return a <= b ? a : b;
  }
  return a;
}

void check_defined2(const char* op, const Tensor& a, const Tensor& b) {
  XGRAD_CHECK(a.defined() && b.defined(), "{}: argument '{}' is an undefined tensor", op, a.defined() ? "b" : "a");
}

void refuse_bool_sub(IntKind k, const char* op, Dtype d) {
  XGRAD_CHECK(!(k == IntKind::sub && d == kBool),
              "{}: subtraction of bool tensors is not supported (as in PyTorch); use logical_xor, or convert "
              "with .to(xgrad::kInt64)",
              op);
}

// The dtype of an integer tensor combined with a whole number (torch: bool + 2 is int64).
Dtype with_integral_number(Dtype d) { return d == kBool ? kInt64 : d; }

}  // namespace

Tensor int_binary(IntKind k, const char* op, const Tensor& a, const Tensor& b) {
  XGRAD_ASSERT(a.dtype() == b.dtype() && !is_floating_point(a.dtype()));
  refuse_bool_sub(k, op, a.dtype());
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>)
      detail::broadcast_map<T, 2>(out.data<T>(), out_shape, {a.data<T>(), b.data<T>()}, {&a.shape(), &b.shape()},
                                  [k](T x, T y) { return int_apply(k, x, y); });
  });
  return out;
}

Tensor int_promoted_binary(IntKind k, const char* op, const Tensor& a, const Tensor& b,
                           Tensor (*floating)(const Tensor&, const Tensor&)) {
  check_defined2(op, a, b);
  const Dtype c = promote_types(a.dtype(), b.dtype());
  if (is_floating_point(c)) return floating(a.to(c), b.to(c));
  return int_binary(k, op, a.to(c), b.to(c));
}

Tensor int_scalar(IntKind k, const char* op, const Tensor& a, double s, Tensor (*floating)(const Tensor&, double)) {
  XGRAD_CHECK(a.defined(), "{}: tensor argument is undefined", op);
  const bool whole = std::isfinite(s) && std::trunc(s) == s && std::abs(s) < 0x1p63;
  if (!whole) return floating(a.to(kFloat32), s);
  const Dtype d = with_integral_number(a.dtype());
  const Tensor x = a.to(d);
  refuse_bool_sub(k, op, d);
  Tensor out = Tensor::empty(x.shape(), d);
  dispatch_all(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      // The number in T's arithmetic: int64 arithmetic wrapped to T, as torch does.
      const T sv = static_cast<T>(static_cast<std::int64_t>(s));
      detail::broadcast_map<T, 1>(out.data<T>(), x.shape(), {x.data<T>()}, {&x.shape()},
                                  [k, sv](T v) { return int_apply(k, v, sv); });
    }
  });
  return out;
}

Tensor int_neg(const Tensor& x) {
  XGRAD_CHECK(x.dtype() != kBool,
              "neg: negation of a bool tensor is not supported (as in PyTorch); use logical_not, or convert "
              "with .to(xgrad::kInt64)");
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      detail::broadcast_map<T, 1>(out.data<T>(), x.shape(), {x.data<T>()}, {&x.shape()},
                                  [](T v) { return wrap_sub(T(0), v); });
    }
  });
  return out;
}

Tensor int_abs(const Tensor& x) {
  XGRAD_CHECK(x.dtype() != kBool,
              "abs: a bool tensor is not supported (as in PyTorch); convert with "
              ".to(xgrad::kInt64)");
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // |INT64_MIN| wraps to itself, as in torch.
      detail::broadcast_map<T, 1>(out.data<T>(), x.shape(), {x.data<T>()}, {&x.shape()},
                                  [](T v) { return v < T(0) ? wrap_sub(T(0), v) : v; });
    }
  });
  return out;
}

Tensor where_integer(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape out_shape = detail::broadcast_all<3>({&cond.shape(), &a.shape(), &b.shape()}, "where");
  const Tensor c = cond.detach().to(kBool).to(a.dtype());  // 0/1 in a's type
  Tensor out = Tensor::empty(out_shape, a.dtype());
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>)
      detail::broadcast_map<T, 3>(out.data<T>(), out_shape, {c.data<T>(), a.data<T>(), b.data<T>()},
                                  {&c.shape(), &a.shape(), &b.shape()},
                                  [](T cv, T av, T bv) { return cv != T(0) ? av : bv; });
  });
  return out;
}

Tensor compare_any(CmpKind k, const char* op, const Tensor& a, const Tensor& b) {
  check_defined2(op, a, b);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Dtype c = promote_types(a.dtype(), b.dtype());
  const Tensor x = a.detach().to(c), y = b.detach().to(c);
  Tensor out = Tensor::empty(out_shape, kBool);
  dispatch_all(c, [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::broadcast_map<T, 2>(out.data<bool>(), out_shape, {x.data<T>(), y.data<T>()}, {&x.shape(), &y.shape()},
                                [k](T u, T v) {
                                  switch (k) {
                                    case CmpKind::gt:
                                      return u > v;
                                    case CmpKind::lt:
                                      return u < v;
                                    case CmpKind::ge:
                                      return u >= v;
                                    case CmpKind::le:
                                      return u <= v;
                                    case CmpKind::eq:
                                      return u == v;
                                    case CmpKind::ne:
                                      return u != v;
                                  }
                                  return false;
                                });
  });
  return out;
}

Tensor logical(LogicalKind k, const char* op, const Tensor& a, const Tensor& b) {
  check_defined2(op, a, b);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor x = a.detach().to(kBool), y = b.detach().to(kBool);
  Tensor out = Tensor::empty(out_shape, kBool);
  detail::broadcast_map<bool, 2>(out.data<bool>(), out_shape, {x.data<bool>(), y.data<bool>()},
                                 {&x.shape(), &y.shape()}, [k](bool u, bool v) {
                                   return k == LogicalKind::and_ ? (u && v) : k == LogicalKind::or_ ? (u || v) : u != v;
                                 });
  return out;
}
}  // namespace detail::ew
}  // namespace xgrad
