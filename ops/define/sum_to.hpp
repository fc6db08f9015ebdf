#pragma once
// Internal: the summation kernel shared by sum/mean and by gradient reduction to a broadcast
// input's shape. Deterministic: each output element is summed in a fixed order, and a reduction
// to few outputs is split into fixed chunks combined left to right (see Note [Determinism]).
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::detail {

/// Sums `x` over `axes` (sorted, unique, in range); the result has x's shape with those axes set to 1.
Tensor sum_keepdim(const Tensor& x, const std::vector<std::int64_t>& axes);

/// Sums a broadcast gradient `g` down to `shape` (the shape of the input that was broadcast). In grad
/// mode (a create_graph backward) the sum is recorded with the public sum and reshape.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace xgrad::detail
