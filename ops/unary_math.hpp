#pragma once
// Elementwise math with PyTorch's names and semantics (torch::sin, torch::atan2, torch::remainder,
// ...). float32 and float64; the binary forms broadcast (NumPy rules) and sum each gradient back to
// its input's shape; both inputs must share a dtype. A number argument is taken in the tensor's
// dtype. Values agree with torch's to a few ulp: the forward and backward loops are vectorised with
// xsimd, whose sin, log1p, expm1, ... are within 4 ulp of the C library's (tests/ops/
// test_unary_math.cpp measures it), except erf in float64 and erfc, which call the C library's erf
// and erfc lane by lane. Results are bit-identical whatever the thread count.
//
// | op                 | forward                                  | gradient(s)                                 |
// |--------------------|------------------------------------------|---------------------------------------------|
// | sin(x)             | sin x                                    | dx = g*cos x                                |
// | cos(x)             | cos x                                    | dx = -g*sin x                               |
// | tan(x)             | tan x                                    | dx = g*(1 + y^2)                            |
// | asin(x)            | asin x (NaN outside [-1, 1])             | dx = g/sqrt(1 - x^2)                        |
// | acos(x)            | acos x (NaN outside [-1, 1])             | dx = -g/sqrt(1 - x^2)                       |
// | atan(x)            | atan x                                   | dx = g/(1 + x^2)                            |
// | atan2(a, b)        | angle of (b, a) in (-pi, pi]             | da = g*b/(a^2+b^2), db = -g*a/(a^2+b^2)     |
// | sinh(x)            | sinh x                                   | dx = g*cosh x                               |
// | cosh(x)            | cosh x                                   | dx = g*sinh x                               |
// | log1p(x)           | ln(1 + x), accurate near 0               | dx = g/(1 + x)                              |
// | expm1(x)           | e^x - 1, accurate near 0                 | dx = g*(y + 1)                              |
// | log2(x)            | log2 x                                   | dx = g/(x ln 2)                             |
// | log10(x)           | log10 x                                  | dx = g/(x ln 10)                            |
// | erf(x)             | erf x                                    | dx = g*2/sqrt(pi)*e^(-x^2)                  |
// | erfc(x)            | 1 - erf x, accurate for large x          | dx = -g*2/sqrt(pi)*e^(-x^2)                 |
// | rsqrt(x)           | 1/sqrt x (inf at 0, NaN below)           | dx = -g*y^3/2                               |
// | reciprocal(x)      | 1/x                                      | dx = -g*y^2                                 |
// | sign(x)            | 1, 0 or -1 (0 for 0, -0 and NaN, as torch)| dx = 0                                     |
// | floor, ceil, trunc | rounded down / up / towards 0            | dx = 0                                      |
// | round(x)           | nearest integer, halves to even (as torch)| dx = 0                                     |
// | round(x, decimals) | round(x*10^d)/10^d (d < 0: round(x/10^-d)*10^-d) | dx = 0                               |
// | fmod(a, b)         | a - b*trunc(a/b), sign of a (C fmod)     | da = g, db = -g*trunc(a/b)                  |
// | remainder(a, b)    | a - b*floor(a/b), sign of b (Python %)   | da = g, db = -g*floor(a/b)                  |
// | fmod(a, s)         | fmod with a number s                     | da = g                                      |
// | remainder(a, s)    | remainder with a number s                | da = g                                      |
// | clamp_min(x, lo)   | max(x, lo) (NaN stays NaN)               | dx = g where x >= lo, else 0                |
// | clamp_max(x, hi)   | min(x, hi) (NaN stays NaN)               | dx = g where x <= hi, else 0                |
//
// fmod and remainder by 0 give NaN (as torch's floating-point forms); clamp_min/clamp_max refuse a
// NaN bound. The one-sided clamps are torch::clamp_min / torch::clamp_max; clamp(x, lo, hi) with
// -inf or +inf for the missing side (ops/elementwise.hpp) computes the same values and gradients.
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
/// Rounds to `decimals` decimal places (negative: to tens, hundreds, ...), halves to even, as
/// torch.round(x, decimals=d): nearbyint(x*10^d)/10^d, or nearbyint(x/10^-d)*10^-d; zero gradient.
Tensor round(const Tensor& x, std::int64_t decimals);
Tensor trunc(const Tensor& x);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, double b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, double b);
Tensor clamp_min(const Tensor& x, double min);
Tensor clamp_max(const Tensor& x, double max);

}  // namespace xgrad
