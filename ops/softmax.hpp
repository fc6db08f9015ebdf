#pragma once
// Softmax along one axis, numerically stable (the row maximum is subtracted first). Each op's
// formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// m is the maximum along `axis`, so logits of +-1000 neither overflow nor underflow to 0/0. Both
// ops save only their output y for backward. As in PyTorch, a row that is all -inf (or holds a NaN)
// gives NaN; a 0-d tensor is one row of length 1 (axis 0 or -1). A bad axis is an xgrad::Error
// naming the op, the axis and the shape. Rows are computed in parallel, each by one task in a fixed
// order: results are bit-identical whatever the thread count.
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `softmax(x, axis)` | eˣ⁻ᵐ/Σ eˣ⁻ᵐ, m the maximum along axis | y·(g − Σ g·y) | torch.softmax
Tensor softmax(const Tensor& x, std::int64_t axis = -1);
/// @op `log_softmax(x, axis)` | x − m − ln Σ eˣ⁻ᵐ | g − eʸ·Σ g | torch.log_softmax
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);

}  // namespace xgrad
