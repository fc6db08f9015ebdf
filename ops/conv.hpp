#pragma once
// Convolutions with torch 1.13's names, argument order, defaults and shape rules
// (torch.nn.functional.conv1d/conv2d/conv_transpose1d/conv_transpose2d).
//
// conv2d: x (N, C, H, W) or unbatched (C, H, W), weight (O, C/groups, kH, kW), bias (O) or undefined:
//   y[n, o, i, j] = b[o] + sum_{c in group(o), p, q} w[o, c, p, q] x[n, c, i*sH - padH + p*dH, j*sW - padW + q*dW]
// (x is zero outside its bounds), y (N, O, Ho, Wo), Ho = (H + 2 padH - dH (kH - 1) - 1) / sH + 1.
// Gradients, with col(x) the im2col matrix of x (one row per (c, p, q), one column per (n, i, j)):
//   dx = col2im(W^T g),   dW = g col(x)^T (summed over the batch),   db[o] = sum_{n, i, j} g[n, o, i, j].
// conv_transpose2d is the adjoint of conv2d in x: x (N, Cin, H, W), weight (Cin, Cout/groups, kH, kW),
//   y = col2im(W^T x) + b, Ho = (H - 1) sH - 2 padH + dH (kH - 1) + output_padH + 1;
//   dx = W col(g) (a conv2d of g), dW = x col(g)^T, db = sum of g.
// The 1-d forms are the 2-d ones with a height of 1. An input with 0 channels gives the bias
// broadcast (torch 1.13 returns an empty (N, 0, ...) tensor there); a batch of 0 gives an empty output.
//
// Implementation (Note [im2col convolution] in conv.cpp): im2col + one GEMM per group and chunk of
// samples, through detail::gemm (the project's BLAS entry), chunks fixed by the shapes and run as TBB
// tasks; the weight gradient sums per-chunk partial products in chunk order: bit-identical results
// whatever the thread count.
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
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const std::vector<std::int64_t>& stride = {1}, const ConvPadding& padding = 0,
              const std::vector<std::int64_t>& dilation = {1}, std::int64_t groups = 1);

/// 2-d convolution: x (N, C, H, W) or (C, H, W), weight (O, C/groups, kH, kW), bias (O) or undefined
/// -> (N, O, Ho, Wo) or (O, Ho, Wo). stride, dilation: one value or (h, w); padding: a value, (h, w),
/// "same" or "valid". Formulas above.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const std::vector<std::int64_t>& stride = {1}, const ConvPadding& padding = 0,
              const std::vector<std::int64_t>& dilation = {1}, std::int64_t groups = 1);

/// 1-d transposed convolution: x (N, Cin, L) or (Cin, L), weight (Cin, Cout/groups, K), bias (Cout)
/// or undefined -> (N, Cout, Lo), Lo = (L - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const std::vector<std::int64_t>& stride = {1}, const std::vector<std::int64_t>& padding = {0},
                        const std::vector<std::int64_t>& output_padding = {0}, std::int64_t groups = 1,
                        const std::vector<std::int64_t>& dilation = {1});

/// 2-d transposed convolution (the gradient of conv2d with respect to its input): x (N, Cin, H, W)
/// or (Cin, H, W), weight (Cin, Cout/groups, kH, kW), bias (Cout) or undefined -> (N, Cout, Ho, Wo).
/// stride, padding, output_padding, dilation: one value or (h, w). Formulas above.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const std::vector<std::int64_t>& stride = {1}, const std::vector<std::int64_t>& padding = {0},
                        const std::vector<std::int64_t>& output_padding = {0}, std::int64_t groups = 1,
                        const std::vector<std::int64_t>& dilation = {1});

}  // namespace xgrad
