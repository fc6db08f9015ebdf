#pragma once
// Index ops, with PyTorch 1.13's names, argument orders and semantics. Indices are int64 tensors
// (int32 is accepted where torch accepts it: index_select, index, take_along_dim is int64 only as in
// torch); masks are bool tensors. An index out of range is an xgrad::Error naming the op, the
// argument, the bad index and the size it indexes. Negative indices count from the end only where
// torch allows them (index(x, idx)); gather, scatter_add, index_add, index_select and
// take_along_dim refuse them, as torch does.
//
// clang-format off
// | op                                 | forward                                         | gradient                                  |
// |------------------------------------|-------------------------------------------------|-------------------------------------------|
// | index_select(x, dim, index)        | x taken at index (1-d) along dim                | g added back at the indices               |
// | gather(x, dim, index)              | y[i][j] = x[index[i][j]][j]  (dim 0)            | dx = zeros, g added at the indices        |
// | take_along_dim(x, indices, dim)    | gather after broadcasting x and indices         | as gather                                 |
// | scatter_add(x, dim, index, src)    | y = x; y[index[i][j]][j] += src[i][j]  (dim 0)  | dx = g; dsrc = gather(g, dim, index)      |
// | index_add(x, dim, index, src)      | y = x; y[.., index[j], ..] += src[.., j, ..]    | dx = g; dsrc = index_select(g, dim, index)|
// | index(x, idx) (x[idx])             | int64 idx: x taken at idx along dim 0;          | g added back at the selected places       |
// |                                    | bool mask: the elements / rows where mask       |                                           |
// | argmax / argmin(x, dim, keepdim)   | int64 position of the first max / min           | none                                      |
// | topk(x, k, dim, largest, sorted)   | (the k largest or smallest, int64 positions)    | g scattered to the positions              |
// | sort(x, dim, descending, stable)   | (values sorted along dim, int64 positions)      | g scattered to the positions              |
// | nonzero(x)                         | int64 (n, x.dim()) positions of nonzero values  | none                                      |
// | one_hot(labels, num_classes)       | int64 (..., C): 1 at each label                 | none                                      |
// clang-format on
//
// Note [Deterministic index ops]: every scatter-type sum is summed, for each destination element,
// by one task, its contributions in increasing source order: no atomics, and any thread count gives
// the same bits (Note [Determinism]). Three kernels do it, none with an index per element beyond
// the index the user passed:
// - index_add, the backward of index_select (and so of nn::Embedding) and a 1-d scatter_add add
//   whole rows chosen by one index per row (Note [Row scatter], ops/detail/scatter_rows.cpp): the
//   serial loop at 1 thread; with more, tasks own destination rows and walk the inverse of the
//   row indices (CSR, a counting sort built in parallel, O(E) ints), adding rows with SIMD.
// - gather, take_along_dim and scatter_add (and their backward, each other's) read their full
//   index tensor in place (Note [Index along a dim], indexing.cpp): a scatter splits the work by
//   the positions off the dim, which never meet, so it needs no inverse at all.
// - index (x[idx]), topk, sort and max/min with indices go through an index map
//   (ops/detail/gather_map.cpp, Note [Deterministic scatter]).
// Ties in argmax/argmin/topk/sort go to the lowest index (sort is always stable, topk and sort put
// NaN above every number, as torch does).
#include <concepts>
#include <cstdint>
#include <optional>
#include <tuple>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

namespace detail {
Tensor index_select_tensor(const Tensor& x, std::int64_t dim, const Tensor& index);
}
/// x taken at the positions of the 1-d (or 0-d) int64/int32 `index` along dim (torch::index_select);
/// the gradient goes through the std::vector overload's (ops/shape_ops.hpp). A template since a
/// braced 0 once converted to a Tensor and made index_select(x, 0, {0}) ambiguous; it no longer
/// does (Tensor's constructor from an impl takes no braced list), and the template stays as it is.
template <std::same_as<Tensor> T>
inline Tensor index_select(const Tensor& x, std::int64_t dim, const T& index) {
  return detail::index_select_tensor(x, dim, index);
}
/// torch::gather: index (int64) has x's number of dims, index.size(d) <= x.size(d) for d != dim;
/// y has index's shape, y[..i_dim..] = x[..index[..i..]..].
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
/// torch::take_along_dim: x and indices (int64, same number of dims) are broadcast except along
/// dim, then gathered along dim. Without dim, x is flattened and indices taken from it.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<std::int64_t> dim = std::nullopt);
/// torch::scatter_add: a copy of x with src[e] added at index[e] along dim, for every position e of
/// index (index.size(d) <= src.size(d) for all d, <= x.size(d) for d != dim). Differentiable in x
/// and src; contributions are added in increasing position order.
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
/// torch::index_add: a copy of x with src's slice j along dim added at position index[j] (1-d
/// int64/int32, src.size(dim) == index.numel(), other dims equal to x's).
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
/// x[idx] (torch's Tensor::index with one tensor). idx int64/int32: rows of x along dim 0 (negative
/// indices count from the end), result shape idx.shape + x.shape[1:]. idx bool: a mask over x's
/// leading idx.dim() dims (their sizes must match); the result is (count, x.shape[idx.dim():]).
Tensor index(const Tensor& x, const Tensor& idx);

/// Position (int64) of the first maximum along dim; without dim, in the flattened tensor (keepdim
/// then gives all dims of size 1). NaN counts as the maximum.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
/// Position (int64) of the first minimum; NaN counts as the minimum (as torch).
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
/// The k largest (or smallest) elements along dim and their int64 positions; `sorted` orders them
/// (largest first when `largest`), else they come in the same order (this implementation always sorts).
/// Ties keep the lower position first. Gradient: g scattered to the positions.
std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// Sorted values along dim and the int64 positions they came from; always stable (ties keep their
/// order), `stable` is accepted for torch's signature. Gradient: g scattered to the positions.
std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim = -1, bool descending = false, bool stable = false);
/// int64 (n, x.dim()) positions of the nonzero elements of x (any dtype), in row-major order.
Tensor nonzero(const Tensor& x);
/// torch::one_hot: int64 labels -> int64 (..., C) with 1 at each label; num_classes = -1 takes
/// max(labels) + 1. Labels must be in [0, C).
Tensor one_hot(const Tensor& labels, std::int64_t num_classes = -1);

}  // namespace xgrad
