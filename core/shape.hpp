#pragma once
// Shapes, row-major strides and NumPy broadcasting.
#include <cstdint>
#include <string>
#include <vector>

namespace xgrad {

using Shape = std::vector<std::int64_t>;

/// Number of elements (1 for a 0-d scalar shape). Throws xgrad::Error for a negative dimension or a
/// count that overflows int64 (Note [Checked sizes] in checked.hpp).
std::int64_t shape_numel(const Shape& s);
/// Row-major (C-order) strides in elements (checked like shape_numel).
Shape contiguous_strides(const Shape& s);
/// "(2, 3)" for messages.
std::string shape_str(const Shape& s);
/// NumPy broadcast of two shapes; throws xgrad::Error naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Maps a possibly negative axis into [0, ndim); throws naming `op` and the shape when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t ndim, const char* op, const Shape& shape);
/// Normalises, sorts and de-duplicates a list of axes (empty list = all axes when `empty_means_all`).
std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, const Shape& shape, const char* op,
                                         bool empty_means_all = true);

}  // namespace xgrad
