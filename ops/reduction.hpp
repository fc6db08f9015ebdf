#pragma once
// Reductions over chosen axes. `axes` empty means all axes; negative axes count from the end;
// keepdim keeps reduced axes as size 1. A 0-d tensor accepts axis 0 or -1 (a no-op), like PyTorch.
// An axis out of range or named twice is an xgrad::Error naming the op, the axis and the shape.
//
// | op                      | forward                         | gradient                                      |
// |-------------------------|---------------------------------|-----------------------------------------------|
// | sum(x, axes, keepdim)   | sum over axes                   | dx = g broadcast back to x's shape            |
// | mean(x, axes, keepdim)  | sum / (number of reduced elems) | dx = g / count, broadcast                     |
// | max(x, axes, keepdim)   | maximum over axes (torch.amax)  | dx = g / K at the K elements equal to y, 0 else |
// | logsumexp(x, axes, kd)  | m + log(sum exp(x - m)), stable | dx = g * exp(x - y)  (= softmax)              |
//
// Details:
// - sum is deterministic: each output is summed in a fixed order (vectorised, with fixed chunks for
//   long reductions), whatever the thread count. A reduction over non-adjacent axes runs as one pass
//   per block of adjacent axes. The sum over an empty axis is 0; the mean over one is NaN (0/0).
// - sum of an integer or bool tensor is int64 (as torch), exact and wrapping on overflow, with no
//   gradient; mean, max and logsumexp take float32/float64 only.
// - max returns the largest value, or NaN when a reduced element is NaN (like torch.amax). Its
//   gradient is split evenly among the tied maxima, as torch.amax's (Note [Tie rules] in
//   ops/reduction.cpp): g / K to each of the K elements equal to the result. When the result is
//   NaN the row's NaNs share it (as torch.max() over all elements; torch.amax over some axes gives
//   NaN gradients there). The max with an integer dim, max(x, dim, keepdim) (values and indices,
//   ops/indexing.hpp), gives the gradient to its index, the first arg-max, as torch.max(x, dim).
//   max over an axis of size 0 is an error (there is no identity); reducing a non-empty axis of an
//   empty tensor gives an empty result.
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

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);

// ---- more reductions ----------------------------------------------------------------------------
// Same axes conventions as above. K = the number of reduced elements per output, m = their mean.
//
// | op                                | forward                            | gradient                                |
// |-----------------------------------|------------------------------------|-----------------------------------------|
// | min(x, axes, keepdim)             | minimum over axes (torch.amin)     | dx = g / K at the K ties of y, 0 else    |
// | prod(x, axes, keepdim)            | product over axes (1 over nothing) | dx_k = g * prod of the others (exact     |
// |                                   |                                    | with zeros: prefix * suffix products)   |
// | var(x, axes, correction, keepdim) | sum (x - m)^2 / max(0, K - corr)   | dx = g * 2 (x - m) / max(0, K - corr)   |
// | std(x, axes, correction, keepdim) | sqrt(var)                          | dx = g (x - m) / (max(0, K - corr) y),  |
// |                                   |                                    | 0 where y = 0 (as torch)                |
// | norm(x, p, axes, keepdim)         | (sum |x|^p)^(1/p); p = inf: max|x| | p=2: g x / y; p=1: g sign(x); general p:|
// |                                   |                                    | g sign(x) |x|^(p-1) / y^(p-1); 0 where  |
// |                                   |                                    | y = 0; inf: g sign(x) split evenly over |
// |                                   |                                    | the |x| equal to y (as torch)           |
// | cumsum(x, dim)                    | y_j = x_0 + ... + x_j along dim    | dx_j = g_j + ... + g_(n-1)              |
//
// Details: min mirrors max (NaN propagates; the gradient is split evenly among the ties, as
// torch.amin's; an empty reduced axis is an error). var/std of fewer
// than correction + 1 elements divide by 0 and give NaN or inf, as torch does. norm with p = inf over
// an empty axis is an error (no identity, as torch.linalg.vector_norm); p must be >= 1 or inf.
// Each output's elements are reduced in a fixed order by one task (deterministic); cumsum runs
// along the dim sequentially, in parallel over the other positions.

Tensor min(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// torch::var with a correction (1: the unbiased estimate, 0: the population variance).
Tensor var(const Tensor& x, const std::vector<std::int64_t>& axes = {}, std::int64_t correction = 1,
           bool keepdim = false);
/// torch::std with a correction; the square root of var.
Tensor std(const Tensor& x, const std::vector<std::int64_t>& axes = {}, std::int64_t correction = 1,
           bool keepdim = false);
/// Vector p-norm over axes (all axes: the norm of the flattened tensor), p >= 1 or
/// std::numeric_limits<double>::infinity().
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// norm with p = "fro" (the Frobenius norm: the 2-norm over axes); other strings are refused.
Tensor norm(const Tensor& x, const std::string& p, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
/// Inclusive cumulative sum along dim (a 0-d tensor takes dim 0 or -1).
Tensor cumsum(const Tensor& x, std::int64_t dim);

/// torch::max(x, dim, keepdim): (the maxima along dim, their int64 positions). The values are
/// max(x, {dim}, keepdim) (gradient to the first arg-max), the positions argmax(x, dim, keepdim)
/// (ops/indexing.hpp). Also spelled max(x, dim, keepdim) with an integer dim, as in torch (below).
std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// torch::min(x, dim, keepdim): (the minima along dim, their int64 positions); also min(x, dim, keepdim).
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
