#pragma once
// Elementwise ops with NumPy broadcasting. Each gradient is summed back to its input's shape
// (over the broadcast axes).
//
// Dtypes (Note [Integer promotion] in ops/define/elementwise_impl.hpp): the ops compute in float32
// or float64. add, sub, mul, div, pow, maximum and minimum promote float32 with float64 to float64,
// as PyTorch (the float32 operand is converted with the differentiable .to(), so its gradient comes
// back in float32); the other binary ops need both float inputs of one dtype (convert one with
// .to()). Integer and bool tensors are taken by add, sub, mul, div, maximum, minimum, neg, abs,
// where, masked_fill, masked_select, the comparisons and the logical ops: a binary op with an
// integer or bool operand computes in promote_types(a, b) (core/dtype.hpp), so int64 + int64 is
// int64 (wrapping on overflow, as PyTorch) and int64 + float32 is float32 (differentiable in the
// float operand). div is true division: integer operands give float32. sub and neg refuse bool
// (as PyTorch). Every other op refuses integer and bool inputs with an xgrad::Error naming the op
// and the argument.
//
// With a number: a float tensor keeps its dtype (x * 2.0 is float32 for a float32 x). An integer or
// bool tensor with a whole number (2, 2.0, -3) keeps its integer dtype (bool becomes int64), with any
// other number (2.5, inf, NaN) it becomes float32: torch's rule for int_tensor + 2 and
// int_tensor + 2.5 (C++ cannot tell 2 from 2.0, so the value decides). div by a number is float32.
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated. A condition or mask (where, masked_select) may be of any dtype
// and selects where it is != 0 (bool, as PyTorch takes it, or numbers, as xgrad always did);
// masked_fill's mask is bool or an integer dtype, a float mask is an error (torch 1.13 ignores one
// silently, later torch refuses it). Comparisons compare in promote_types(a, b) and return bool, as
// do the logical ops.
#include <cstdint>
#include <type_traits>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `add(a, b)`, `a + b` | a + b | da = g, db = g | torch.add
Tensor add(const Tensor& a, const Tensor& b);
/// @op `sub(a, b)`, `a - b` | a − b | da = g, db = −g | torch.sub
Tensor sub(const Tensor& a, const Tensor& b);
/// @op `mul(a, b)`, `a * b` | a·b | da = g·b, db = g·a | torch.mul
Tensor mul(const Tensor& a, const Tensor& b);
/// @op `div(a, b)`, `a / b` | a/b | da = g/b, db = −g·a/b² | torch.div
Tensor div(const Tensor& a, const Tensor& b);
/// @op `pow(a, b)` | aᵇ | da = g·b·aᵇ⁻¹, db = g·aᵇ·ln a (0 where a = 0) | torch.pow
Tensor pow(const Tensor& a, const Tensor& b);
/// @op `pow(a, k)` (number k) | aᵏ | da = g·k·aᵏ⁻¹ | torch.pow
Tensor pow(const Tensor& a, double exponent);
/// @op `maximum(a, b)`, `minimum(a, b)` | max(a, b), min(a, b); NaN if either is NaN (as torch)
///   | da = g where a > b (a < b for minimum), g/2 where a = b, 0 where it lost, g where either is NaN (as torch);
///     db likewise | torch.maximum, torch.minimum
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Scalar forms (the number takes a float tensor's dtype; integer tensors: see the top of the file).
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);

/// @op `neg(x)`, `-x` | −x | −g | torch.neg
Tensor neg(const Tensor& x);
/// @op `exp(x)` | eˣ | g·y | torch.exp
Tensor exp(const Tensor& x);
/// @op `log(x)` | ln x | g/x | torch.log
Tensor log(const Tensor& x);
/// @op `sqrt(x)` | √x | g/(2y) | torch.sqrt
Tensor sqrt(const Tensor& x);
/// @op `abs(x)` | |x| | g·sign(x), 0 at 0 | torch.abs
Tensor abs(const Tensor& x);
/// @op `tanh(x)` | tanh x | g·(1 − y²) | torch.tanh
Tensor tanh(const Tensor& x);
/// @op `sigmoid(x)` | 1/(1 + e⁻ˣ), stable | g·y·(1 − y) | torch.sigmoid
Tensor sigmoid(const Tensor& x);
/// @op `relu(x)` | x < 0 ? 0 : x (NaN and −0 stay) | 0 where y ≤ 0, else g (g at NaN, as torch) | torch.relu
Tensor relu(const Tensor& x);
/// Pass -inf or +inf for a one-sided clamp. lo > hi is an error.
/// @op `clamp(x, lo, hi)` | min(max(x, lo), hi) | g where lo ≤ x ≤ hi, else 0 | torch.clamp
Tensor clamp(const Tensor& x, double lo, double hi);

/// a and b are promoted like a binary op's operands.
/// @op `where(c, a, b)` | c ≠ 0 ? a : b | da = g where c ≠ 0, db = g where c = 0; none for c | torch.where
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// value is converted to x's dtype; mask must broadcast to x's shape.
/// @op `masked_fill(x, m, v)` (m bool or integer) | m ≠ 0 ? v : x | dx = g where m = 0, else 0; none for m
///   | torch.Tensor.masked_fill
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// @op `masked_select(x, m)` | the x where m (broadcast to x's shape) ≠ 0, 1-d, in row-major order
///   | g scattered back to the selected places | torch.masked_select
Tensor masked_select(const Tensor& x, const Tensor& mask);

/// @op `gt lt ge le eq ne` | bool: a > b, a < b, a ≥ b, a ≤ b, a = b, a ≠ b (any dtypes, broadcast) | none
///   | torch.gt, torch.lt, torch.ge, torch.le, torch.eq, torch.ne
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);

/// @op `logical_and(a, b)` | bool: a ≠ 0 and b ≠ 0 (any dtypes, broadcast) | none | torch.logical_and
Tensor logical_and(const Tensor& a, const Tensor& b);
/// @op `logical_or(a, b)` | bool: a ≠ 0 or b ≠ 0 | none | torch.logical_or
Tensor logical_or(const Tensor& a, const Tensor& b);
/// @op `logical_xor(a, b)` | bool: (a ≠ 0) ≠ (b ≠ 0) | none | torch.logical_xor
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// @op `logical_not(x)` | bool: x = 0 | none | torch.logical_not
Tensor logical_not(const Tensor& x);

// Operators (found by argument-dependent lookup).
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b);

// Comparison and logical operators, as libtorch's (ATen/TensorOperators.h): a == b, x > 0 and the
// like return bool tensors (eq, gt, ...), so `==` is not identity: Tensor::is_same is. A number is
// compared in x's dtype when x is floating point (x == 0.1 converts 0.1 to float32 for a float32 x,
// as torch); for an integer or bool x, a whole number is compared as int64 and any other number
// (2.5, inf, NaN) in float32: the dtypes torch compares in. A C++ integer operand is taken as int64
// exactly (x == (1LL << 53) + 1 holds for that int64 element: a double would round it). &, | and ^
// are torch's bitwise ops, given here on bool tensors only (logical_and, logical_or, logical_xor);
// ~ is bitwise_not on bool tensors (logical_not); ! (not in libtorch) is logical_not on any dtype.
// Integer operands of &, |, ^ and ~ are an xgrad::Error (bitwise ops on integers are not implemented).
/// The C++ operand types of the comparison operators: any arithmetic type (bool included).
template <class N>
concept CppNumber = std::is_arithmetic_v<N>;
namespace detail {
/// The 0-d tensor a comparison operator compares x with (the rule above); x undefined: float32.
Tensor comparison_operand(const Tensor& x, double value);
/// The same for an integer: int64 exactly unless x is floating point (then x's dtype).
Tensor comparison_operand(const Tensor& x, std::int64_t value);
/// comparison_operand of a C++ number: integers (but bool) exactly, when they fit in int64.
template <class N>
Tensor number_operand(const Tensor& x, N value) {
  if constexpr (std::is_same_v<N, bool> || std::is_floating_point_v<N>) {
    return comparison_operand(x, static_cast<double>(value));
  } else if constexpr (std::is_unsigned_v<N>) {
    if (static_cast<std::uint64_t>(value) > static_cast<std::uint64_t>(INT64_MAX))
      return comparison_operand(x, static_cast<double>(value));
    return comparison_operand(x, static_cast<std::int64_t>(value));
  } else {
    return comparison_operand(x, static_cast<std::int64_t>(value));
  }
}
/// Refuses operands of a bitwise operator (`op`: "operator&", ...) that are not both bool.
void check_bool_operands(const char* op, const Tensor& a, const Tensor& b);
}  // namespace detail
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
template <CppNumber N>
inline Tensor operator==(const Tensor& a, N b) {
  return eq(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator!=(const Tensor& a, N b) {
  return ne(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator<(const Tensor& a, N b) {
  return lt(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator<=(const Tensor& a, N b) {
  return le(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator>(const Tensor& a, N b) {
  return gt(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator>=(const Tensor& a, N b) {
  return ge(a, detail::number_operand(a, b));
}
template <CppNumber N>
inline Tensor operator==(N a, const Tensor& b) {
  return eq(detail::number_operand(b, a), b);
}
template <CppNumber N>
inline Tensor operator!=(N a, const Tensor& b) {
  return ne(detail::number_operand(b, a), b);
}
template <CppNumber N>
inline Tensor operator<(N a, const Tensor& b) {
  return lt(detail::number_operand(b, a), b);
}
template <CppNumber N>
inline Tensor operator<=(N a, const Tensor& b) {
  return le(detail::number_operand(b, a), b);
}
template <CppNumber N>
inline Tensor operator>(N a, const Tensor& b) {
  return gt(detail::number_operand(b, a), b);
}
template <CppNumber N>
inline Tensor operator>=(N a, const Tensor& b) {
  return ge(detail::number_operand(b, a), b);
}
inline Tensor operator!(const Tensor& x) { return logical_not(x); }
inline Tensor operator~(const Tensor& x) {
  detail::check_bool_operands("operator~", x, x);
  return logical_not(x);
}
inline Tensor operator&(const Tensor& a, const Tensor& b) {
  detail::check_bool_operands("operator&", a, b);
  return logical_and(a, b);
}
inline Tensor operator|(const Tensor& a, const Tensor& b) {
  detail::check_bool_operands("operator|", a, b);
  return logical_or(a, b);
}
inline Tensor operator^(const Tensor& a, const Tensor& b) {
  detail::check_bool_operands("operator^", a, b);
  return logical_xor(a, b);
}

}  // namespace xgrad
