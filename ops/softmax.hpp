#pragma once
// Softmax along one axis, numerically stable (the row maximum is subtracted first).
//
// | op                   | forward                          | gradient                            |
// |----------------------|----------------------------------|-------------------------------------|
// | softmax(x, axis)     | y = exp(x - m) / sum exp(x - m)  | dx = y * (g - sum(g * y, axis))     |
// | log_softmax(x, axis) | y = x - m - log sum exp(x - m)   | dx = g - exp(y) * sum(g, axis)      |
//
// m is the maximum along `axis`, so logits of +-1000 neither overflow nor underflow to 0/0. Both
// ops save only their output y for backward. As in PyTorch, a row that is all -inf (or holds a NaN)
// gives NaN; a 0-d tensor is one row of length 1 (axis 0 or -1). A bad axis is an xgrad::Error
// naming the op, the axis and the shape. Rows are computed in parallel, each by one task in a fixed
// order: results are bit-identical whatever the thread count.
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor softmax(const Tensor& x, std::int64_t axis = -1);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);

}  // namespace xgrad
