#pragma once
// Reductions over chosen axes. `axes` empty means all axes; negative axes count from the end;
// keepdim keeps reduced axes as size 1. A 0-d tensor accepts axis 0 or -1 (a no-op), like PyTorch.
// An axis out of range or named twice is an xgrad::Error naming the op, the axis and the shape.
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// Details:
// - sum is deterministic: each output is summed in a fixed order (vectorised, with fixed chunks for
//   long reductions), whatever the thread count. A reduction over non-adjacent axes runs as one pass
//   per block of adjacent axes. The sum over an empty axis is 0; the mean over one is NaN (0/0).
// - sum of an integer or bool tensor is int64 (as torch), exact and wrapping on overflow, with no
//   gradient; max and min of one (over axes, or with an integer dim and indices) keep its dtype and
//   are exact, as torch.amax/amin and torch.max/min. The other reductions take float32/float64 only.
// - max's tie rule is torch.amax's (Note [Tie rules] in ops/reduction.cpp). Where the result is NaN,
//   torch.max() over all elements shares the gradient among the NaNs as max does, while torch.amax
//   over some axes gives NaN gradients there. The max with an integer dim, max(x, dim, keepdim)
//   (values and indices, below), gives the gradient to its index, the first arg-max, as
//   torch.max(x, dim). max over an axis of size 0 is an error (there is no identity); reducing a
//   non-empty axis of an empty tensor gives an empty result.
// - logsumexp subtracts m = the maximum first, so inputs of 1e4 do not overflow. Like torch, an
//   infinite m is replaced by 0: a row of all -inf gives -inf (and a NaN gradient, as torch does),
//   a row holding +inf gives +inf, NaN propagates. logsumexp over an empty axis is -inf.
#include <concepts>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `sum(x, axes, keepdim)` | Σ over axes (an integer or bool x: int64, exact) | g broadcast back | torch.sum
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// @op `mean(x, axes, keepdim)` | Σ/count | g/count broadcast back | torch.mean
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// @op `max(x, axes, keepdim)` | the maximum over axes (torch.amax); NaN where a reduced element is NaN; an
///   integer or bool x: exact, in its dtype
///   | g/K to each of the K elements equal to y (ties share evenly, as torch.amax); a NaN y: shared by its NaNs
///   | torch.amax
Tensor max(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// @op `logsumexp(x, axes, keepdim)` | m + ln Σ eˣ⁻ᵐ, m the maximum | g·eˣ⁻ʸ (g·softmax) | torch.logsumexp
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);

// ---- more reductions ----------------------------------------------------------------------------
// Same axes conventions as above. K = the number of reduced elements per output, m = their mean.
// Details: min mirrors max (NaN propagates; an empty reduced axis is an error). var/std of fewer
// than correction + 1 elements divide by 0 and give NaN or inf, as torch does. norm with p = inf over
// an empty axis is an error (no identity, as torch.linalg.vector_norm). Each output's elements are
// reduced in a fixed order by one task (deterministic); cumsum runs along the dim sequentially, in
// parallel over the other positions.

/// @op `min(x, axes, keepdim)` | the minimum over axes (torch.amin); NaN where a reduced element is NaN; an
///   integer or bool x: exact, in its dtype
///   | g/K to each of the K elements equal to y (ties share evenly, as torch.amin) | torch.amin
Tensor min(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// @op `prod(x, axes, keepdim)` | Π over axes (1 over nothing)
///   | dxₖ = g·Π_{j≠k} xⱼ (prefix·suffix products: exact with zeros) | torch.prod
Tensor prod(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// torch::var with a correction c (1: the unbiased estimate, 0: the population variance).
/// @op `var(x, axes, correction, keepdim)` | Σ(x − m)²/max(0, K − c) over the K reduced elements, m their mean
///   | g·2(x − m)/max(0, K − c) | torch.var
Tensor var(const Tensor& x, const std::vector<std::int64_t>& axes = {}, std::int64_t correction = 1,
           bool keepdim = false);
/// torch::std with a correction.
/// @op `std(x, axes, correction, keepdim)` | √var | g·(x − m)/(max(0, K − c)·y), 0 where y = 0 (as torch) | torch.std
Tensor std(const Tensor& x, const std::vector<std::int64_t>& axes = {}, std::int64_t correction = 1,
           bool keepdim = false);
/// Vector p-norm over axes (all axes: the norm of the flattened tensor), p >= 1 or
/// std::numeric_limits<double>::infinity().
/// @op `norm(x, p, axes, keepdim)` (p ≥ 1, inf) | (Σ|x|ᵖ)^(1/p); inf: max |x|
///   | g·sign(x)·|x|ᵖ⁻¹/yᵖ⁻¹ (p = 2: g·x/y; p = 1: g·sign(x)), 0 where y = 0; inf: g·sign(x) split evenly over
///     the |x| = y (as torch) | torch.linalg.vector_norm
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// Other strings than "fro" are refused.
/// @op `norm(x, "fro", axes, keepdim)` | the Frobenius norm: the 2-norm over axes | as p = 2 | torch.norm
Tensor norm(const Tensor& x, const std::string& p, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// A 0-d tensor takes dim 0 or -1.
/// @op `cumsum(x, dim)` | yⱼ = Σ_{i≤j} xᵢ along dim (inclusive) | dxⱼ = Σ_{i≥j} gᵢ | torch.cumsum
Tensor cumsum(const Tensor& x, std::int64_t dim);

/// Also spelled max(x, dim, keepdim) with an integer dim, as in torch (below); the positions are
/// argmax(x, dim, keepdim) (ops/indexing.hpp).
/// @op `max_with_indices(x, dim, keepdim)`, `max(x, dim, keepdim)` (integer dim)
///   | (the maxima along dim in x's dtype, their int64 positions) | values: g to the first arg-max | torch.max
std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Also spelled min(x, dim, keepdim) with an integer dim; the positions are argmin(x, dim, keepdim).
/// @op `min_with_indices(x, dim, keepdim)`, `min(x, dim, keepdim)` (integer dim)
///   | (the minima along dim in x's dtype, their int64 positions) | values: g to the first arg-min | torch.min
std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, std::int64_t dim, bool keepdim = false);
// torch's spelling: max(x, 1) / min(x, 1) (an integer dim) return (values, indices), while
// max(x, {1}) (a braced list of axes) stays the values-only reduction above: a template parameter
// cannot be deduced from a braced list, so the overloads never compete.
template <std::integral I>
requires(!std::same_as<I, bool>) std::tuple<Tensor, Tensor> max(const Tensor& x, I dim, bool keepdim = false) {
  return max_with_indices(x, static_cast<std::int64_t>(dim), keepdim);
}
template <std::integral I>
requires(!std::same_as<I, bool>) std::tuple<Tensor, Tensor> min(const Tensor& x, I dim, bool keepdim = false) {
  return min_with_indices(x, static_cast<std::int64_t>(dim), keepdim);
}

}  // namespace xgrad
