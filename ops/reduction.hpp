#pragma once
// Reductions over chosen axes. `axes` empty means all axes; negative axes count from the end;
// keepdim keeps reduced axes as size 1. A 0-d tensor accepts axis 0 or -1 (a no-op), like PyTorch.
// An axis out of range or named twice is an xgrad::Error naming the op, the axis and the shape.
//
// | op                      | forward                         | gradient                                      |
// |-------------------------|---------------------------------|-----------------------------------------------|
// | sum(x, axes, keepdim)   | sum over axes                   | dx = g broadcast back to x's shape            |
// | mean(x, axes, keepdim)  | sum / (number of reduced elems) | dx = g / count, broadcast                     |
// | max(x, axes, keepdim)   | maximum over axes               | dx = g at the first arg-max (row-major), 0 else |
// | logsumexp(x, axes, kd)  | m + log(sum exp(x - m)), stable | dx = g * exp(x - y)  (= softmax)              |
//
// Details:
// - sum is deterministic: each output is summed in a fixed order (vectorised, with fixed chunks for
//   long reductions), whatever the thread count. A reduction over non-adjacent axes runs as one pass
//   per block of adjacent axes. The sum over an empty axis is 0; the mean over one is NaN (0/0).
// - sum of an integer or bool tensor is int64 (as torch), exact and wrapping on overflow, with no
//   gradient; mean, max and logsumexp take float32/float64 only.
// - max returns the largest value, or NaN when a reduced element is NaN (like torch.amax). Its
//   gradient goes entirely to ONE element: the first arg-max in row-major order of the reduced
//   elements (the first NaN if there is one). torch.amax instead splits the gradient evenly among
//   tied maxima, so the two agree only when there are no ties. max over an axis of size 0 is an
//   error (there is no identity); reducing a non-empty axis of an empty tensor gives an empty result.
// - logsumexp subtracts m = the maximum first, so inputs of 1e4 do not overflow. Like torch, an
//   infinite m is replaced by 0: a row of all -inf gives -inf (and a NaN gradient, as torch does),
//   a row holding +inf gives +inf, NaN propagates. logsumexp over an empty axis is -inf.
#include <cstdint>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);

}  // namespace xgrad
