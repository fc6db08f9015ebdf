#pragma once
// linear as one op (torch.nn.functional.linear); nn::Linear and nn::functional::linear call it.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// x (in) or (batch..., in), weight (out, in), bias (out) or undefined; y (out) or (batch..., out).
/// Three GEMMs that read W and x in place (Note [Fused linear] in ops/linear.cpp), bit-identical
/// whatever the thread count. Errors: undefined x or weight, weight not 2-d, x 0-d or x's last dim
/// != in, bias not (out), mixed dtypes.
/// @op `linear(x, W, b)` (also `nn::functional::linear`) | y = x·Wᵀ + b, one GEMM over all batch rows (what
///   `nn::Linear` runs) | dx = g·W, dW = Σ_batch gᵀ·x, db = Σ_batch g | torch.nn.functional.linear
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace xgrad
