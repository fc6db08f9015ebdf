#pragma once
// Activation functions with the names, defaults and semantics of torch.nn.functional (torch 1.13);
// each has a module of the same role in nn/activation.hpp (nn::GELU, nn::SiLU, ...). float32 and
// float64, any shape; values agree with torch's to a few ulp and are bit-identical whatever the
// thread count. The gradient at a kink is torch's choice (noted per op). Each op's formulas are its
// `/// @op` row (op | forward y | gradient dx, g = dL/dy | torch), from which docs/ops.md's table is
// generated; σ is the logistic sigmoid.
//
// softplus and logsigmoid are computed in the overflow-free forms max(z, 0) + ln(1 + e^-|z|) and
// sigmoid = 1/(1 + e^-z), so softplus stays finite for any threshold.
// Errors: gelu's approximate other than "none" or "tanh"; softplus with beta = 0 or a NaN beta or
// threshold; a NaN slope or alpha; hardtanh with min_val > max_val or a NaN bound.
#include <string_view>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `gelu(x, approximate)`
///   | "none": x·Φ(x) = x/2·(1 + erf(x/√2)); "tanh": x/2·(1 + tanh u), u = √(2/π)(x + 0.044715x³)
///   | "none": g·(Φ(x) + x·φ(x)), φ the N(0, 1) density; "tanh": g·((1 + t)/2 + x/2·(1 − t²)·u′), t = tanh u,
///     u′ = √(2/π)(1 + 0.134145x²)
///   | torch.nn.functional.gelu
Tensor gelu(const Tensor& x, std::string_view approximate = "none");

/// @op `silu(x)` | x·σ(x) | g·σ·(1 + x(1 − σ)), σ = sigmoid(x) | torch.nn.functional.silu
Tensor silu(const Tensor& x);

/// @op `softplus(x, β, threshold)` | ln(1 + e^(βx))/β, stable; x where βx > threshold
///   | g·σ(βx); g where βx > threshold | torch.nn.functional.softplus
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

/// @op `mish(x)` | x·tanh(softplus x) | g·(t + x·σ(x)·(1 − t²)), t = tanh(softplus x) | torch.nn.functional.mish
Tensor mish(const Tensor& x);

/// @op `leaky_relu(x, slope)` | x if x > 0, else slope·x | g if x > 0, else slope·g (slope·g at 0)
///   | torch.nn.functional.leaky_relu
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);

/// @op `elu(x, α)` | x if x > 0, else α(eˣ − 1) | g if x > 0, else g·α·eˣ (at 0 too) | torch.nn.functional.elu
Tensor elu(const Tensor& x, double alpha = 1.0);

/// @op `selu(x)` | λ·elu(x, α), torch's λ = 1.0507009873554804934193349852946, α = 1.6732632423543772848170429916717
///   | λg if x > 0, else g·λα·eˣ (at 0 too) | torch.nn.functional.selu
Tensor selu(const Tensor& x);

/// @op `hardtanh(x, lo, hi)` | min(max(x, lo), hi); NaN stays NaN
///   | g where lo < x < hi, else 0 (0 at the bounds, unlike clamp) | torch.nn.functional.hardtanh
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);

/// @op `logsigmoid(x)` | ln σ(x) = min(x, 0) − ln(1 + e^−|x|) | g·σ(−x) | torch.nn.functional.logsigmoid
Tensor logsigmoid(const Tensor& x);

/// @op `hardswish(x)` | x·min(max(x + 3, 0), 6)/6 | 0 if x < −3, g if x ≥ 3, else g·(x/3 + ½)
///   | torch.nn.functional.hardswish
Tensor hardswish(const Tensor& x);

/// @op `hardsigmoid(x)` | min(max(x + 3, 0), 6)/6 | g/6 where −3 < x < 3, else 0 | torch.nn.functional.hardsigmoid
Tensor hardsigmoid(const Tensor& x);

/// @op `softsign(x)` | x/(1 + |x|) | g/(1 + |x|)² | torch.nn.functional.softsign
Tensor softsign(const Tensor& x);

}  // namespace xgrad
