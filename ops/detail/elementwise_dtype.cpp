// The elementwise ops on integer and bool tensors (Note [Integer promotion] in
// ops/detail/elementwise_impl.hpp): integer arithmetic, the comparisons, the logical ops, where on
// integer operands and masked_fill. Plain broadcast loops over the six element types, no autograd
// (integer tensors have no gradient), in a file of their own (Note [Elementwise build time]).
#include <cmath>
#include <type_traits>

#include "xgrad/ops/detail/elementwise_impl.hpp"

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
      const T* p = x.data<T>();
      T* o = out.data<T>();
      parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) o[i] = int_apply(k, p[i], sv);
      });
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
      const T* p = x.data<T>();
      T* o = out.data<T>();
      parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) o[i] = wrap_sub(T(0), p[i]);
      });
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
      const T* p = x.data<T>();
      T* o = out.data<T>();
      parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        // |INT64_MIN| wraps to itself, as in torch.
        for (std::int64_t i = b; i < e; ++i) o[i] = p[i] < T(0) ? wrap_sub(T(0), p[i]) : p[i];
      });
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

namespace {
enum class LogicalKind { and_, or_, xor_ };
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
}  // namespace
}  // namespace detail::ew

using namespace detail::ew;  // NOLINT(google-build-using-namespace)

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
  const bool* p = b.data<bool>();
  bool* o = out.data<bool>();
  parallel_for(0, b.numel(), kParallelGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) o[i] = !p[i];
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  XGRAD_CHECK(x.defined() && mask.defined(), "masked_fill: argument '{}' is an undefined tensor",
              x.defined() ? "mask" : "x");
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
