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
// Adaptive windows: [floor(o L / Lo), ceil((o + 1) L / Lo)).
//   max:  y = max over the window (NaN wins); dx = g at the arg-max (the first in row-major order on
//         ties, as torch), 0 elsewhere. A window with no position in range (possible with dilation > 1
//         and padding) gives -inf and index -1, and no gradient (torch 1.13 indexes outside the plane).
//   avg:  y = sum over the window / divisor, divisor = divisor_override if given, else the window's size
//         counting padding (count_include_pad, clipped at L + p) or not; dx = g / divisor spread over the
//         window. A window wholly in the padding gives 0.
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

/// Max pooling over (N, C, L) or (C, L). Formula above.
Tensor max_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// Max pooling over (N, C, H, W) or (C, H, W). Formula above.
Tensor max_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// max_pool1d and the arg-max of every window: {values, indices}, indices an int64 tensor of the
/// output's shape holding each maximum's position along L (torch's max_pool1d_with_indices; the
/// indices carry no gradient).
Tensors max_pool1d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride = {},
                                const std::vector<std::int64_t>& padding = {0},
                                const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// max_pool2d and the arg-max of every window: {values, indices}, indices int64 of the output's shape
/// holding each maximum's flat position h * W + w in its (H, W) plane (torch's max_pool2d_with_indices).
Tensors max_pool2d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride = {},
                                const std::vector<std::int64_t>& padding = {0},
                                const std::vector<std::int64_t>& dilation = {1}, bool ceil_mode = false);

/// Average pooling over (N, C, L) or (C, L) (torch's avg_pool1d has no divisor_override).
Tensor avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);

/// Average pooling over (N, C, H, W) or (C, H, W).
Tensor avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride = {}, const std::vector<std::int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);

/// Adaptive average pooling of (N, C, L) or (C, L) to length output_size[0].
Tensor adaptive_avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& output_size);

/// Adaptive average pooling of (N, C, H, W) or (C, H, W) to output_size (one value or (h, w)).
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size);

/// Adaptive max pooling of (N, C, H, W) or (C, H, W) to output_size (the values; torch's
/// return_indices=False).
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size);

}  // namespace xgrad
