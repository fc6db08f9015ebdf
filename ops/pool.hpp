#pragma once
// Pooling with torch 1.13's names, argument order, defaults and shape rules
// (torch.nn.functional.max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d, adaptive_max_pool2d).
// Inputs are (N, C, L) or (C, L) for the 1-d forms, (N, C, H, W) or (C, H, W) for the 2-d forms; every
// (n, c) plane is pooled on its own. Size arguments take one value or one per spatial dimension; an
// empty stride means stride = kernel_size.
//
// Window of output position o along an axis of length L (kernel k, stride s, padding p, dilation d):
// positions o s - p + i d for i < k that lie in [0, L); the output length is
//   Lo = floor_or_ceil((L + 2p - d (k - 1) - 1) / s) + 1, less one when ceil_mode and (Lo - 1) s >= L + p.
// A max window with no position in range (possible with dilation > 1 and padding) gives -inf and
// index -1, and no gradient (torch 1.13 indexes outside the plane). Each op's formulas are its
// `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which docs/ops.md's table is
// generated.
// Deterministic: every (n, c) plane is computed, forward and backward, by one task in a fixed order.
//
// Errors (xgrad::Error naming the op, the argument and the shapes): undefined or integer x, wrong rank, an empty
// non-batch dimension, kernel_size / stride / dilation < 1, padding < 0 or > kernel_size / 2, an output
// size < 1, divisor_override 0, adaptive output_size < 0.
#include <cstdint>
#include <optional>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// Max pooling over (N, C, L) or (C, L) (max_pool1d), (N, C, H, W) or (C, H, W) (max_pool2d).
/// @op `max_pool1d/2d(x, kernel_size, stride, padding, dilation, ceil_mode)` | the max over each window (NaN wins)
///   | g to the first arg-max of each window (row-major order; NaN wins), summed where windows overlap
///   | torch.nn.functional.max_pool1d, torch.nn.functional.max_pool2d
Tensor max_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

Tensor max_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// @op `max_pool1d/2d_with_indices(…)` | {the max_pool values, the int64 arg-max of each window: its position
///   along L (1-d) or h·W + w in its (H, W) plane (2-d)} | values as max_pool; none for the indices
///   | torch.nn.functional.max_pool1d, torch.nn.functional.max_pool2d (return_indices=True)
Tensors max_pool1d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride = {},
                                const std::vector<std::int64_t>& padding = {0},
                                const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

Tensors max_pool2d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride = {},
                                const std::vector<std::int64_t>& padding = {0},
                                const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// Average pooling over (N, C, L) or (C, L) (torch's avg_pool1d has no divisor_override).
/// @op `avg_pool1d(x, k, s, pad, ceil_mode, count_include_pad)`, `avg_pool2d(…, divisor_override)`
///   | Σ window/divisor: divisor_override, or the window's size counting the padding (count_include_pad, clipped
///     at L + p) or not; a window wholly in the padding gives 0
///   | g/divisor spread over each window | torch.nn.functional.avg_pool1d, torch.nn.functional.avg_pool2d
Tensor avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);

/// Average pooling over (N, C, H, W) or (C, H, W).
Tensor avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);

/// Adaptive average pooling of (N, C, L) or (C, L) to length output_size[0], of (N, C, H, W) or (C, H, W)
/// to output_size (one value or (h, w)).
/// @op `adaptive_avg_pool1d/2d(x, output_size)` | the mean over the window [⌊o·L/Lo⌋, ⌈(o + 1)·L/Lo⌉) of each
///   output position o | g/count spread over each window
///   | torch.nn.functional.adaptive_avg_pool1d, torch.nn.functional.adaptive_avg_pool2d
Tensor adaptive_avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& output_size);

Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size);

/// Adaptive max pooling of (N, C, H, W) or (C, H, W) to output_size (the values; torch's
/// return_indices=False).
/// @op `adaptive_max_pool2d(x, output_size)` | the max over the adaptive window (as adaptive_avg_pool2d's)
///   | g to the first arg-max of each window | torch.nn.functional.adaptive_max_pool2d
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size);

}  // namespace xgrad
