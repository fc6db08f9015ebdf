#pragma once
// Shape ops. All results are contiguous; reshape/squeeze/unsqueeze/flatten share the input's
// storage (views, like PyTorch), the others copy.
//
// | op                             | gradient                                                  |
// |--------------------------------|-----------------------------------------------------------|
// | reshape(x, shape) (one -1 ok)  | dx = reshape(g, x.shape)                                  |
// | flatten(x, start, end)         | dx = reshape(g, x.shape)                                  |
// | squeeze(x, axis) / unsqueeze   | dx = reshape(g, x.shape)                                  |
// | permute(x, dims)               | dx = permute(g, inverse(dims))                            |
// | transpose(x, d0, d1)           | dx = transpose(g, d0, d1)                                 |
// | slice(x, axis, start, end, st) | dx = zeros(x.shape) with g written at the sliced indices |
// | index_select(x, axis, index)   | dx = zeros(x.shape) with g added at the indices (repeats sum) |
// | concat(xs, axis)               | dx_i = the i-th slice of g along axis                     |
// | stack(xs, axis)                | dx_i = g selected at position i of the new axis           |
// | expand(x, shape)               | dx = g summed over the expanded axes (broadcast_to alias) |
#include <cstdint>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
/// Removes `axis` if its size is 1; otherwise returns a view of the same shape (as torch does).
Tensor squeeze(const Tensor& x, std::int64_t axis);
/// Removes every axis of size 1.
Tensor squeeze(const Tensor& x);
/// Inserts a size-1 axis at `axis` (in [-dim-1, dim]).
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
/// Elements start, start+step, ... < end along axis (negative start/end count from the end,
/// clipped to the axis like Python slices); step >= 1.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// x taken at `index` positions along axis (negative indices count from the end).
Tensor index_select(const Tensor& x, std::int64_t axis, const std::vector<std::int64_t>& index);
Tensor concat(const Tensors& xs, std::int64_t axis = 0);
Tensor stack(const Tensors& xs, std::int64_t axis = 0);
/// Broadcasts x to `shape` (NumPy rules; -1 keeps a dimension).
Tensor expand(const Tensor& x, const Shape& shape);
inline Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

}  // namespace xgrad
