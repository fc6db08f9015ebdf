// The elementwise kernels on integer and bool tensors (Note [Integer promotion] in
// ops/detail/elementwise_impl.hpp): integer arithmetic, where on integer operands, the comparisons
// (any dtype) and the logical ops. Plain broadcast loops over the six element types, no autograd
// (integer tensors have no gradient), in a file of their own (Note [Elementwise build time]); the
// public ops that use them are in ops/elementwise*.cpp.
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
