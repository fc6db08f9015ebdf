#pragma once
// Elementwise ops with NumPy broadcasting. Each gradient is summed back to its input's shape
// (over the broadcast axes).
//
// Dtypes (Note [Integer promotion] in ops/detail/elementwise_impl.hpp): the ops compute in float32
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
// | op            | forward                      | gradient(s)                                         |
// |---------------|------------------------------|-----------------------------------------------------|
// | add(a, b)     | a + b                        | da = g, db = g                                      |
// | sub(a, b)     | a - b                        | da = g, db = -g                                     |
// | mul(a, b)     | a * b                        | da = g*b, db = g*a                                  |
// | div(a, b)     | a / b                        | da = g/b, db = -g*a/b^2                             |
// | pow(a, b)     | a^b                          | da = g*b*a^(b-1), db = g*a^b*log(a) (0 where a = 0) |
// | pow(a, k)     | a^k (k a number)             | da = g*k*a^(k-1)                                    |
// | neg(x)        | -x                           | dx = -g                                             |
// | exp(x)        | e^x                          | dx = g*y                                            |
// | log(x)        | ln x                         | dx = g/x                                            |
// | sqrt(x)       | sqrt x                       | dx = g/(2y)                                         |
// | abs(x)        | |x|                          | dx = g*sign(x) (0 at 0)                             |
// | tanh(x)       | tanh x                       | dx = g*(1-y^2)                                      |
// | sigmoid(x)    | 1/(1+e^-x)                   | dx = g*y*(1-y)                                      |
// | relu(x)       | x < 0 ? 0 : x (NaN, -0 stay) | dx = 0 where y <= 0, else g (g at NaN, as torch)    |
// | clamp(x,lo,hi)| min(max(x, lo), hi)          | dx = g where lo <= x <= hi, else 0                  |
// | where(c, a, b)| c != 0 ? a : b               | da = g where c, db = g where !c; c gets none        |
// | masked_fill   | mask != 0 ? value : x        | dx = g where mask == 0, else 0                      |
// | masked_select | the x[mask != 0], 1-d        | dx = g scattered back to the selected positions     |
// Comparisons (gt, lt, ge, le, eq, ne) and the logical ops (logical_and, logical_or, logical_xor,
// logical_not) take any dtypes (comparisons compare in promote_types(a, b); logical ops read
// x != 0), return bool and have no gradient. A condition or mask (where, masked_fill,
// masked_select) may be of any dtype and selects where it is != 0 (bool, as PyTorch takes it, or
// numbers, as xgrad always did).
#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
/// NaN wins; da = g where a > b (a < b for minimum), g/2 where a == b, 0 where it lost, g where
/// either is NaN; db likewise (torch's rule: docs/ops.md, "Ties and kinks").
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Scalar forms (the number takes a float tensor's dtype; integer tensors: see the top of the file).
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// Clamps to [lo, hi]; pass -inf or +inf for a one-sided clamp. lo > hi is an error.
Tensor clamp(const Tensor& x, double lo, double hi);

/// a where cond != 0, else b; a and b are promoted like a binary op's operands.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` (converted to x's dtype) where mask != 0; mask must broadcast to x's shape.
/// Differentiable in x. As torch.Tensor.masked_fill.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// The elements of x where mask (broadcast to x's shape) is non-zero, as a 1-d tensor in row-major order.
Tensor masked_select(const Tensor& x, const Tensor& mask);

Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);

/// a != 0 and b != 0 (any dtypes, broadcast), as bool.
Tensor logical_and(const Tensor& a, const Tensor& b);
/// a != 0 or b != 0, as bool.
Tensor logical_or(const Tensor& a, const Tensor& b);
/// (a != 0) != (b != 0), as bool.
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// x == 0, as bool.
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
// (2.5, inf, NaN) in float32: the dtypes torch compares in. &, | and ^ are torch's bitwise ops,
// given here on bool tensors only (logical_and, logical_or, logical_xor); ~ is bitwise_not on bool
// tensors (logical_not); ! (not in libtorch) is logical_not on any dtype. Integer operands of &, |,
// ^ and ~ are an xgrad::Error (bitwise ops on integers are not implemented).
namespace detail {
/// The 0-d tensor a comparison operator compares x with (the rule above); x undefined: float32.
Tensor comparison_operand(const Tensor& x, double value);
/// Refuses operands of a bitwise operator (`op`: "operator&", ...) that are not both bool.
void check_bool_operands(const char* op, const Tensor& a, const Tensor& b);
}  // namespace detail
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, detail::comparison_operand(a, b)); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, detail::comparison_operand(a, b)); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, detail::comparison_operand(a, b)); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, detail::comparison_operand(a, b)); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, detail::comparison_operand(a, b)); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, detail::comparison_operand(a, b)); }
inline Tensor operator==(double a, const Tensor& b) { return eq(detail::comparison_operand(b, a), b); }
inline Tensor operator!=(double a, const Tensor& b) { return ne(detail::comparison_operand(b, a), b); }
inline Tensor operator<(double a, const Tensor& b) { return lt(detail::comparison_operand(b, a), b); }
inline Tensor operator<=(double a, const Tensor& b) { return le(detail::comparison_operand(b, a), b); }
inline Tensor operator>(double a, const Tensor& b) { return gt(detail::comparison_operand(b, a), b); }
inline Tensor operator>=(double a, const Tensor& b) { return ge(detail::comparison_operand(b, a), b); }
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
