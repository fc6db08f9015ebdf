#pragma once
// Internal: the differentiable "gather through an index map" op shared by the copy-type shape ops
// (flip, roll, repeat, pad) and the index ops. y[o] = x[map[o]], or `fill` where map[o] < 0.
// Gradient: dx[i] = sum of g[o] over the o with map[o] == i, added in increasing o (Note
// [Deterministic scatter] in gather_map.cpp), so repeated indices sum the same way for any
// thread count. Under create_graph that scatter is recorded as an op of its own whose backward is
// the gather again, so every op built on gather_map has derivatives of any order.
#include <cstdint>
#include <memory>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::detail {

/// y of shape `out_shape` (numel == map.size()) with y[o] = x[map[o]] (a flat index into x) or
/// `fill` where map[o] < 0. `injective` promises that no index repeats (a faster backward). The
/// recorded node is named `op`. `map` is not checked: the callers build it in range.
Tensor gather_map(const char* op, const Tensor& x, const Shape& out_shape, std::vector<std::int64_t> map,
                  bool injective, double fill = 0.0);

/// dx for a gradient g through `map` onto x's `x_shape` (the backward of gather_map, exposed for
/// the index ops whose source is a second input).
Tensor scatter_add_map(const Tensor& g, const Shape& x_shape, const std::vector<std::int64_t>& map, bool injective);

/// The same dx as a differentiable op named "<op>_backward" (its backward is the gather through
/// `map`): a backward written with it records itself under create_graph (Note [Create graph] in
/// core/autograd.hpp) and runs scatter_add_map otherwise. `op` must be a string literal.
Tensor scatter_map(const char* op, const Tensor& g, const Shape& x_shape, std::vector<std::int64_t> map,
                   bool injective);
/// The same, with a map shared with the caller (no copy of it per backward).
Tensor scatter_map(const char* op, const Tensor& g, const Shape& x_shape,
                   std::shared_ptr<const std::vector<std::int64_t>> map, bool injective);

/// For a shape op whose output index along every dim depends on that dim only: src[d][o_d] is the
/// source index along dim d of x (of shape in_shape) for output index o_d, or -1 (fill). Returns
/// the flat map of out_shape (built in parallel).
std::vector<std::int64_t> separable_map(const Shape& in_shape, const Shape& out_shape,
                                        const std::vector<std::vector<std::int64_t>>& src);

}  // namespace xgrad::detail
