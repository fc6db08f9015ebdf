#pragma once
// linear: y = x W^T + b as one op (torch.nn.functional.linear); nn::Linear and
// nn::functional::linear call it.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// y = x W^T + b: x (in) or (batch..., in), weight (out, in), bias (out) or undefined; y (out) or
/// (batch..., out). Gradients (g = dL/dy, rows of x flattened to (rows, in)):
///   dx = g W,   dW = g^T x,   db = sum of g over rows.
/// Three GEMMs that read W and x in place (Note [Fused linear] in ops/linear.cpp), bit-identical
/// whatever the thread count. Errors: undefined x or weight, weight not 2-d, x 0-d or x's last dim
/// != in, bias not (out), mixed dtypes.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace xgrad
