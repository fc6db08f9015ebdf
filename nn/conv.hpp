#pragma once
// nn::Conv1d, nn::Conv2d, nn::ConvTranspose1d, nn::ConvTranspose2d: the layers over the ops of
// ops/conv.hpp, like torch's.
//
//   nn::Conv2d conv(nn::ConvOptions(1, 32, {3}).padding(1));        // 1 -> 32 channels, 3x3, seed 0
//   Tensor y = conv(x);                                              // (N, 1, H, W) -> (N, 32, H, W)
//
// Parameters: `weight` (out, in / groups, k...) for Conv1d/Conv2d, (in, out / groups, k...) for
// ConvTranspose1d/2d, and `bias` (out) unless disabled. Init is torch's reset_parameters:
// kaiming_uniform_(weight, a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
// weight.size(1) * prod(kernel_size), and the bias uniform on the same interval (zeros when fan_in = 0).
// padding_mode (Conv1d/Conv2d, as torch): "zeros" passes the padding to the op; "reflect",
// "replicate" and "circular" pad x first (pad() of ops/shape_ops.hpp, circular by slice + cat: the
// last p elements wrap to the front, the first p to the back) by the same amounts (for "same": the
// total dilation (k - 1) split with the extra element at the end) and convolve without padding.
// The transposed layers take "zeros" only, as torch. Gradients are the ops' (ops/conv.hpp,
// ops/shape_ops.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/conv.hpp"

namespace xgrad::nn {

/// The options of Conv1d, Conv2d, ConvTranspose1d and ConvTranspose2d (torch::nn::ConvOptions): set by chained calls,
/// e.g. ConvOptions(3, 8, {3}).stride({2}).padding(1).bias(false). Size arguments take one value for
/// every spatial dimension or one per dimension, as the ops.
class ConvOptions {
 public:
  ConvOptions(std::int64_t in_channels, std::int64_t out_channels, std::vector<std::int64_t> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(std::move(kernel_size)) {}

#define XGRAD_CONV_ARG(type, name, init)       \
 public:                                       \
  ConvOptions& name(type value) {              \
    name##_ = std::move(value);                \
    return *this;                              \
  }                                            \
  const type& name() const { return name##_; } \
                                               \
 private:                                      \
  type name##_ = init;

  XGRAD_CONV_ARG(std::int64_t, in_channels, 0)
  XGRAD_CONV_ARG(std::int64_t, out_channels, 0)
  XGRAD_CONV_ARG(std::vector<std::int64_t>, kernel_size, {})
  XGRAD_CONV_ARG(std::vector<std::int64_t>, stride, {1})
  XGRAD_CONV_ARG(ConvPadding, padding, 0)                         // ConvTranspose1d/2d: numbers only
  XGRAD_CONV_ARG(std::vector<std::int64_t>, output_padding, {0})  // ConvTranspose1d/2d only
  XGRAD_CONV_ARG(std::vector<std::int64_t>, dilation, {1})
  XGRAD_CONV_ARG(std::int64_t, groups, 1)
  XGRAD_CONV_ARG(bool, bias, true)
  XGRAD_CONV_ARG(std::string, padding_mode, "zeros")  // "zeros", "reflect", "replicate", "circular"
  XGRAD_CONV_ARG(Dtype, dtype, kFloat32)
#undef XGRAD_CONV_ARG
};

/// The shared part of the three layers: the options, the parameters and their init.
class ConvBase : public UnaryModule {
 public:
  const ConvOptions& options() const { return options_; }
  const Tensor& weight() const { return weight_; }
  /// The bias, undefined when the layer has none.
  const Tensor& bias() const { return bias_; }
  std::string extra_repr() const override;

 protected:
  /// Checks the options for `dims` spatial dimensions and initialises the parameters from gen.
  ConvBase(const char* name, std::size_t dims, bool transposed, ConvOptions options, Generator& gen);
  ConvOptions options_;
  /// x itself for padding_mode "zeros", else x padded by pad_ in that mode (Conv1d/Conv2d).
  Tensor pad_input(const Tensor& x) const;
  /// The padding the op gets: options().padding() for "zeros", 0 when pad_input pads.
  ConvPadding op_padding() const;
  std::vector<std::int64_t> kernel_, stride_, dilation_, padding_, output_padding_;  // expanded, for repr
  std::vector<std::int64_t> pad_;  // padding_mode other than "zeros": pad()'s (left, right) from the last dim
  bool transposed_;
  Tensor weight_;
  Tensor bias_;
};

/// 1-d convolution layer: (N, in, L) or (in, L) -> (N, out, Lo). Errors (construction): sizes < 0 or
/// kernel < 1, groups not dividing in and out, a padding_mode other than "zeros", "reflect",
/// "replicate", "circular"; (forward) the op's, and pad()'s for the other modes (reflect: each
/// padding < the input's size; circular: each padding <= the input's size).
class Conv1d : public ConvBase {
 public:
  Conv1d(const ConvOptions& options, Generator& gen);
  /// Initialised from a Generator seeded with `seed`.
  explicit Conv1d(const ConvOptions& options, std::optional<std::uint64_t> seed = std::nullopt);
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size)
      : Conv1d(ConvOptions(in_channels, out_channels, {kernel_size})) {}
  Tensor forward(const Tensor& x) override;
};

/// 2-d convolution layer: (N, in, H, W) or (in, H, W) -> (N, out, Ho, Wo). Errors as Conv1d.
class Conv2d : public ConvBase {
 public:
  Conv2d(const ConvOptions& options, Generator& gen);
  explicit Conv2d(const ConvOptions& options, std::optional<std::uint64_t> seed = std::nullopt);
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size)
      : Conv2d(ConvOptions(in_channels, out_channels, {kernel_size})) {}
  Tensor forward(const Tensor& x) override;
};

/// 1-d transposed convolution layer: (N, in, L) or (in, L) -> (N, out, Lo),
/// Lo = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1. Errors as Conv1d, a string
/// padding, and a padding_mode other than "zeros".
class ConvTranspose1d : public ConvBase {
 public:
  ConvTranspose1d(const ConvOptions& options, Generator& gen);
  explicit ConvTranspose1d(const ConvOptions& options, std::optional<std::uint64_t> seed = std::nullopt);
  ConvTranspose1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size)
      : ConvTranspose1d(ConvOptions(in_channels, out_channels, {kernel_size})) {}
  Tensor forward(const Tensor& x) override;
};

/// 2-d transposed convolution layer: (N, in, H, W) or (in, H, W) -> (N, out, Ho, Wo),
/// Ho = (H - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1. Errors as ConvTranspose1d.
class ConvTranspose2d : public ConvBase {
 public:
  ConvTranspose2d(const ConvOptions& options, Generator& gen);
  explicit ConvTranspose2d(const ConvOptions& options, std::optional<std::uint64_t> seed = std::nullopt);
  ConvTranspose2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size)
      : ConvTranspose2d(ConvOptions(in_channels, out_channels, {kernel_size})) {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace xgrad::nn
