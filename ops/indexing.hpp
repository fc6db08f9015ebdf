#pragma once
// Index ops, with PyTorch 1.13's names, argument orders and semantics. Indices are int64 tensors
// (int32 is accepted where torch accepts it: index_select, index, take_along_dim is int64 only as in
// torch); masks are bool tensors. An index out of range is an xgrad::Error naming the op, the
// argument, the bad index and the size it indexes. Negative indices count from the end only where
// torch allows them (index(x, idx)); gather, scatter_add, index_add, index_select and
// take_along_dim refuse them, as torch does.
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// Note [Deterministic index ops]: every scatter-type sum is summed, for each destination element,
// by one task, its contributions in increasing source order: no atomics, and any thread count gives
// the same bits (Note [Determinism]). Three kernels do it, none with an index per element beyond
// the index the user passed:
// - index_add, the backward of index_select (and so of nn::Embedding) and a 1-d scatter_add add
//   whole rows chosen by one index per row (Note [Row scatter], ops/kernels/scatter_rows.cpp): the
//   serial loop at 1 thread; with more, tasks own destination rows and walk the inverse of the
//   row indices (CSR, a counting sort built in parallel, O(E) ints), adding rows with SIMD.
// - gather, take_along_dim and scatter_add (and their backward, each other's) read their full
//   index tensor in place (Note [Index along a dim], indexing.cpp): a scatter splits the work by
//   the positions off the dim, which never meet, so it needs no inverse at all.
// - index (x[idx]), topk, sort and max/min with indices go through an index map
//   (ops/define/gather_map.cpp, Note [Deterministic scatter]).
// Ties in argmax/argmin/topk/sort go to the lowest index (sort is always stable, topk and sort put
// NaN above every number, as torch does).
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

namespace detail {
Tensor index_select_tensor(const Tensor& x, std::int64_t dim, const Tensor& index);
}
/// The gradient goes through the std::vector overload's (ops/shape_ops.hpp). A template since a
/// braced 0 once converted to a Tensor and made index_select(x, 0, {0}) ambiguous; it no longer
/// does (Tensor's constructor from an impl takes no braced list), and the template stays as it is.
/// @op `index_select(x, dim, index)` (an int64 or int32 tensor) | x taken at the 1-d (or 0-d) index along dim
///   (no negative indices, as torch) | g added back at the indices | torch.index_select
template <std::same_as<Tensor> T>
inline Tensor index_select(const Tensor& x, std::int64_t dim, const T& index) {
  return detail::index_select_tensor(x, dim, index);
}
/// index (int64) has x's number of dims, index.size(d) <= x.size(d) for d != dim; y has index's shape.
/// @op `gather(x, dim, index)` | y[i][j] = x[index[i][j]][j] (dim 0; likewise along any dim)
///   | dx = zeros with g added at the indices, in index order | torch.gather
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
/// @op `take_along_dim(x, indices, dim)` | gather after broadcasting x and indices (int64, as many dims) except
///   along dim; without dim: from the flattened x | as gather | torch.take_along_dim
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<std::int64_t> dim = std::nullopt);
/// index.size(d) <= src.size(d) for all d, <= x.size(d) for d != dim.
/// @op `scatter_add(x, dim, index, src)` | y = x; y[index[i][j]][j] += src[i][j] (dim 0; likewise along any dim),
///   in increasing position order | dx = g; dsrc = gather(g, dim, index) (0 outside index's shape)
///   | torch.Tensor.scatter_add
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
/// torch 1.13's Tensor.scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin"; index and
/// src as for scatter_add. include_self = false leaves x's own values out of the elements the index
/// reaches (the others keep x's); "mean" divides by the number of values reduced (x's included when
/// include_self). amax/amin: NaN wins, as torch. Differentiable to any order, except the second
/// derivative with respect to src of a "prod" with 2 or more zeros of src reaching one element
/// (torch refuses it too): an xgrad::Error when it is asked for (Note [Scatter reduce]).
/// @op `scatter_reduce(x, dim, index, src, reduce, include_self)` | y = x; y[index[i][j]][j] =
/// reduce(y[index[i][j]][j],
///   src[i][j]) (dim 0; likewise along any dim), reduce ∈ sum, prod, mean, amax, amin; without include_self
///   the reached elements start from the identity; mean divides by the count | sum: dx = g, dsrc = gather(g);
///   mean: both ÷ the count; amax/amin: g ÷ the number of elements equal to y (x and src), to each of them;
///   prod: dx = g·y/x, dsrc = g·y/src, zeros handled as torch (the product of the other factors); without
///   include_self dx = 0 where the index reaches | torch.Tensor.scatter_reduce
Tensor scatter_reduce(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
/// index 1-d int64/int32, src.size(dim) == index.numel(), src's other dims equal to x's.
/// @op `index_add(x, dim, index, src)` | y = x; y[.., index[j], ..] += src[.., j, ..]
///   | dx = g; dsrc = index_select(g, dim, index) | torch.Tensor.index_add
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
/// torch's Tensor::index with one tensor. A bool mask's sizes must match x's leading dims.
/// @op `index(x, idx)` (x[idx]) | int64/int32 idx: the rows of x at idx (negatives wrap), shape idx.shape +
///   x.shape[1:]; bool idx: the elements / rows of x where the mask over its leading idx.dim() dims is true,
///   shape (count, x.shape[idx.dim():]) | g added back at the selected places | torch.Tensor.__getitem__
Tensor index(const Tensor& x, const Tensor& idx);

/// @op `argmax(x, dim, keepdim)` | the int64 position of the first maximum along dim (NaN counts as the
///   maximum); without dim: in the flattened x (keepdim: all dims of size 1) | none | torch.argmax
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
/// @op `argmin(x, dim, keepdim)` | the int64 position of the first minimum (NaN counts as the minimum); without
///   dim: in the flattened x | none | torch.argmin
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
/// `sorted` = false gives them in the same order (this implementation always sorts).
/// @op `topk(x, k, dim, largest, sorted)` | (the k largest, or smallest, along dim, largest first when largest;
///   their int64 positions) | values: g scattered to the positions | torch.topk
std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// Always stable (ties keep their order); `stable` is accepted for torch's signature.
/// @op `sort(x, dim, descending, stable)` | (the values sorted along dim, their int64 positions)
///   | values: g scattered to the positions | torch.sort
std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim = -1, bool descending = false, bool stable = false);
/// @op `nonzero(x)` | int64 (n, x.dim()): the positions of the n nonzero elements of x (any dtype), in row-major
///   order | none | torch.nonzero
Tensor nonzero(const Tensor& x);
/// @op `one_hot(labels, C)` | int64 (..., C), 1 at each label (C = −1: max(labels) + 1; labels in [0, C))
///   | none | torch.nn.functional.one_hot
Tensor one_hot(const Tensor& labels, std::int64_t num_classes = -1);

}  // namespace xgrad
