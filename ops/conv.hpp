#pragma once
// Convolutions with torch 1.13's names, argument order, defaults and shape rules
// (torch.nn.functional.conv1d/conv2d/conv_transpose1d/conv_transpose2d).
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// The 1-d forms are the 2-d ones with a height of 1. An input with 0 channels gives the bias
// broadcast (torch 1.13 returns an empty (N, 0, ...) tensor there); a batch of 0 gives an empty output.
//
// Implementation: with unit strides and an output grid as wide as the image ("same" padding, every
// such 1-d convolution), xgrad's direct kernels (Notes [Direct convolution] and [Direct weight
// gradient] in ops/kernels/gemm_loops.hpp: the forward and the input gradient read each tap's shifted
// plane straight from the image, no im2col matrix, no col2im); otherwise (Note [im2col convolution]
// in conv.cpp) im2col + one GEMM per group and chunk of samples, through detail::gemm (the project's
// BLAS entry). Chunks are fixed by the shapes and run as TBB tasks; the weight gradient sums per-run
// partials in a fixed order: bit-identical results whatever the thread count.
//
// Errors (xgrad::Error naming the op, the argument and the shapes): undefined or integer x or weight, wrong
// ranks, input channels != weight's in-channels * groups, groups < 1 or not dividing the channels,
// stride / dilation < 1, padding < 0, a kernel larger than the padded input (an output size < 1),
// output_padding not smaller than stride or dilation, padding "same" with a stride other than 1,
// bias not (out_channels), mixed dtypes.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// A convolution's padding, as torch's: one value for every spatial dimension (`1`), one per
/// dimension (`{1, 2}`), or the strings "valid" (no padding) and "same" (output size = input size;
/// stride 1 only; an odd total padding puts the extra element at the end, as torch does).
struct ConvPadding {
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ConvPadding(I p) : values{static_cast<std::int64_t>(p)} {}  // NOLINT(google-explicit-constructor)
  ConvPadding(std::initializer_list<std::int64_t> p) : values(p) {}
  ConvPadding(std::vector<std::int64_t> p) : values(std::move(p)) {}  // NOLINT(google-explicit-constructor)
  ConvPadding(const char* m) : mode(m) {}                             // NOLINT(google-explicit-constructor)
  ConvPadding(std::string m) : mode(std::move(m)) {}                  // NOLINT(google-explicit-constructor)
  std::vector<std::int64_t> values;                                   // used when mode is empty
  std::string mode;                                                   // "", "same" or "valid"
};

/// 1-d convolution: x (N, C, L) or (C, L), weight (O, C/groups, K), bias (O) or undefined ->
/// (N, O, Lo) or (O, Lo). stride, dilation: one value; padding: a value, "same" or "valid".
/// @op `conv1d(x, W, b, stride, padding, dilation, groups)` | conv2d with a height of 1 | as conv2d
///   | torch.nn.functional.conv1d
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const std::vector<std::int64_t>& stride = {1}, const ConvPadding& padding = 0,
              const std::vector<std::int64_t>& dilation = {1}, std::int64_t groups = 1);

/// 2-d convolution: x (N, C, H, W) or (C, H, W), weight (O, C/groups, kH, kW), bias (O) or undefined
/// -> (N, O, Ho, Wo) or (O, Ho, Wo). stride, dilation: one value or (h, w); padding: a value, (h, w),
/// "same" or "valid".
/// @op `conv2d(x, W, b, stride, padding, dilation, groups)`
///   | y[n,o,i,j] = b[o] + Σ_{c∈group(o),p,q} W[o,c,p,q]·x[n,c, i·s−pad+p·d, j·s−pad+q·d] (0 outside x), Ho =
///     ⌊(H + 2pad − d(k − 1) − 1)/s⌋ + 1; direct kernels at unit strides on a grid as wide as x, else im2col + GEMM
///   | dx = col2im(Wᵀ·g), dW = Σ_batch g·col(x)ᵀ (per-chunk partials added in chunk order), db = Σ_{n,i,j} g;
///     col(x) the im2col matrix of x, a row per (c, p, q) and a column per (n, i, j)
///   | torch.nn.functional.conv2d
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const std::vector<std::int64_t>& stride = {1}, const ConvPadding& padding = 0,
              const std::vector<std::int64_t>& dilation = {1}, std::int64_t groups = 1);

/// 1-d transposed convolution: x (N, Cin, L) or (Cin, L), weight (Cin, Cout/groups, K), bias (Cout)
/// or undefined -> (N, Cout, Lo).
/// @op `conv_transpose1d(x, W, b, stride, padding, output_padding, groups, dilation)`
///   | conv_transpose2d with a height of 1 | as conv_transpose2d | torch.nn.functional.conv_transpose1d
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const std::vector<std::int64_t>& stride = {1}, const std::vector<std::int64_t>& padding = {0},
                        const std::vector<std::int64_t>& output_padding = {0}, std::int64_t groups = 1,
                        const std::vector<std::int64_t>& dilation = {1});

/// 2-d transposed convolution (the gradient of conv2d with respect to its input): x (N, Cin, H, W)
/// or (Cin, H, W), weight (Cin, Cout/groups, kH, kW), bias (Cout) or undefined -> (N, Cout, Ho, Wo).
/// stride, padding, output_padding, dilation: one value or (h, w).
/// @op `conv_transpose2d(x, W, b, stride, padding, output_padding, groups, dilation)`
///   | the adjoint of conv2d in x: y = col2im(Wᵀ·x) + b, W (Cin, Cout/groups, kH, kW), Ho = (H − 1)s − 2pad +
///     d(k − 1) + output_padding + 1
///   | dx = W·col(g) (a conv2d of g), dW = Σ_batch x·col(g)ᵀ, db = Σ g | torch.nn.functional.conv_transpose2d
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const std::vector<std::int64_t>& stride = {1}, const std::vector<std::int64_t>& padding = {0},
                        const std::vector<std::int64_t>& output_padding = {0}, std::int64_t groups = 1,
                        const std::vector<std::int64_t>& dilation = {1});

}  // namespace xgrad
