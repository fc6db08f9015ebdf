#pragma once
// Softmax along one axis, numerically stable (the row maximum is subtracted first).
//
// | op                   | forward                          | gradient                            |
// |----------------------|----------------------------------|-------------------------------------|
// | softmax(x, axis)     | y = exp(x - m) / sum exp(x - m)  | dx = y * (g - sum(g * y, axis))     |
// | log_softmax(x, axis) | y = x - m - log sum exp(x - m)   | dx = g - exp(y) * sum(g, axis)      |
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor softmax(const Tensor& x, std::int64_t axis = -1);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);

}  // namespace xgrad
