#pragma once
// Elementwise math with PyTorch's names and semantics (torch::sin, torch::atan2, torch::remainder,
// ...). float32 and float64; the binary forms broadcast (NumPy rules) and sum each gradient back to
// its input's shape; both inputs must share a dtype. A number argument is taken in the tensor's
// dtype. Values agree with torch's to a few ulp: the forward and backward loops are vectorised with
// xsimd, whose sin, log1p, expm1, ... are within 4 ulp of the C library's (tests/ops/
// test_unary_math.cpp measures it), except erf in float64 and erfc, which call the C library's erf
// and erfc lane by lane. Results are bit-identical whatever the thread count.
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated. clamp_min/clamp_max refuse a NaN bound. The one-sided clamps are
// torch::clamp_min / torch::clamp_max; clamp(x, lo, hi) with -inf or +inf for the missing side
// (ops/elementwise.hpp) computes the same values and gradients.
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `sin(x)` | sin x | g·cos x | torch.sin
Tensor sin(const Tensor& x);
/// @op `cos(x)` | cos x | −g·sin x | torch.cos
Tensor cos(const Tensor& x);
/// @op `tan(x)` | tan x | g·(1 + y²) | torch.tan
Tensor tan(const Tensor& x);
/// @op `asin(x)` | asin x (NaN outside [−1, 1]) | g/√(1 − x²) | torch.asin
Tensor asin(const Tensor& x);
/// @op `acos(x)` | acos x (NaN outside [−1, 1]) | −g/√(1 − x²) | torch.acos
Tensor acos(const Tensor& x);
/// @op `atan(x)` | atan x | g/(1 + x²) | torch.atan
Tensor atan(const Tensor& x);
/// @op `atan2(a, b)` | the angle of (b, a), in (−π, π] | da = g·b/(a² + b²), db = −g·a/(a² + b²) | torch.atan2
Tensor atan2(const Tensor& a, const Tensor& b);
/// @op `sinh(x)` | sinh x | g·cosh x | torch.sinh
Tensor sinh(const Tensor& x);
/// @op `cosh(x)` | cosh x | g·sinh x | torch.cosh
Tensor cosh(const Tensor& x);
/// @op `log1p(x)` | ln(1 + x), accurate near 0 | g/(1 + x) | torch.log1p
Tensor log1p(const Tensor& x);
/// @op `expm1(x)` | eˣ − 1, accurate near 0 | g·(y + 1) | torch.expm1
Tensor expm1(const Tensor& x);
/// @op `log2(x)` | log₂ x | g/(x·ln 2) | torch.log2
Tensor log2(const Tensor& x);
/// @op `log10(x)` | log₁₀ x | g/(x·ln 10) | torch.log10
Tensor log10(const Tensor& x);
/// @op `erf(x)` | erf x | g·2/√π·e^(−x²) | torch.erf
Tensor erf(const Tensor& x);
/// @op `erfc(x)` | 1 − erf x, accurate for large x | −g·2/√π·e^(−x²) | torch.erfc
Tensor erfc(const Tensor& x);
/// @op `rsqrt(x)` | 1/√x (inf at 0, NaN below) | −g·y³/2 | torch.rsqrt
Tensor rsqrt(const Tensor& x);
/// @op `reciprocal(x)` | 1/x | −g·y² | torch.reciprocal
Tensor reciprocal(const Tensor& x);
/// @op `sign(x)` | −1, 0 or 1 (0 for 0, −0 and NaN, as torch) | 0 | torch.sign
Tensor sign(const Tensor& x);
/// @op `floor(x)` | rounded down | 0 | torch.floor
Tensor floor(const Tensor& x);
/// @op `ceil(x)` | rounded up | 0 | torch.ceil
Tensor ceil(const Tensor& x);
/// @op `round(x)` | the nearest integer, halves to even (as torch) | 0 | torch.round
Tensor round(const Tensor& x);
/// @op `round(x, decimals)` | to d = decimals places, halves to even: nearbyint(x·10ᵈ)/10ᵈ, or for d < 0 (tens,
///   hundreds, ...) nearbyint(x/10⁻ᵈ)·10⁻ᵈ | 0 | torch.round
Tensor round(const Tensor& x, std::int64_t decimals);
/// @op `trunc(x)` | rounded towards 0 | 0 | torch.trunc
Tensor trunc(const Tensor& x);
/// @op `fmod(a, b)` | a − b·trunc(a/b): the sign of a (C fmod); NaN for b = 0 | da = g, db = −g·trunc(a/b)
///   | torch.fmod
Tensor fmod(const Tensor& a, const Tensor& b);
/// @op `fmod(a, s)` (number s) | fmod(a, b) with b = s | da = g | torch.fmod
Tensor fmod(const Tensor& a, double b);
/// @op `remainder(a, b)` | a − b·floor(a/b): the sign of b (Python %); NaN for b = 0 | da = g, db = −g·floor(a/b)
///   | torch.remainder
Tensor remainder(const Tensor& a, const Tensor& b);
/// @op `remainder(a, s)` (number s) | remainder(a, b) with b = s | da = g | torch.remainder
Tensor remainder(const Tensor& a, double b);
/// @op `clamp_min(x, lo)` | max(x, lo) (NaN stays NaN) | g where x ≥ lo, else 0 | torch.clamp_min
Tensor clamp_min(const Tensor& x, double min);
/// @op `clamp_max(x, hi)` | min(x, hi) (NaN stays NaN) | g where x ≤ hi, else 0 | torch.clamp_max
Tensor clamp_max(const Tensor& x, double max);

}  // namespace xgrad
