#pragma once
// Elementwise ops with NumPy broadcasting. Each gradient is summed back to its input's shape
// (over the broadcast axes). Both inputs of a binary op must have the same dtype.
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
// | relu(x)       | max(x, 0)                    | dx = g where x > 0, else 0                          |
// | clamp(x,lo,hi)| min(max(x, lo), hi)          | dx = g where lo <= x <= hi, else 0                  |
// | where(c, a, b)| c != 0 ? a : b               | da = g where c, db = g where !c; c gets none        |
// | masked_select | the x[mask != 0], 1-d        | dx = g scattered back to the selected positions     |
// Comparisons (gt, lt, ge, le, eq, ne) return 0/1 in the inputs' dtype and have no gradient.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // da = g where a >= b, db = g where b > a
Tensor minimum(const Tensor& a, const Tensor& b);  // da = g where a <= b, db = g where b < a

// Scalar forms (the scalar takes the tensor's dtype).
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

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// The elements of x where mask (broadcast to x's shape) is non-zero, as a 1-d tensor in row-major order.
Tensor masked_select(const Tensor& x, const Tensor& mask);

Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);

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

}  // namespace xgrad
