#include "xgrad/nn/pool.hpp"

#include <utility>

#include "xgrad/ops/pool.hpp"

namespace xgrad::nn {

MaxPool1d::MaxPool1d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride,
                     std::vector<std::int64_t> padding, std::vector<std::int64_t> dilation, bool ceil_mode)
    : UnaryModule("MaxPool1d"),
      kernel_size_(std::move(kernel_size)),
      stride_(stride.empty() ? kernel_size_ : std::move(stride)),
      padding_(std::move(padding)),
      dilation_(std::move(dilation)),
      ceil_mode_(ceil_mode) {}
Tensor MaxPool1d::forward(const Tensor& x) {
  return max_pool1d(x, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}
Tensors MaxPool1d::forward_with_indices(const Tensor& x) {
  return max_pool1d_with_indices(x, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}

MaxPool2d::MaxPool2d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride,
                     std::vector<std::int64_t> padding, std::vector<std::int64_t> dilation, bool ceil_mode)
    : UnaryModule("MaxPool2d"),
      kernel_size_(std::move(kernel_size)),
      stride_(stride.empty() ? kernel_size_ : std::move(stride)),
      padding_(std::move(padding)),
      dilation_(std::move(dilation)),
      ceil_mode_(ceil_mode) {}
Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}
Tensors MaxPool2d::forward_with_indices(const Tensor& x) {
  return max_pool2d_with_indices(x, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}

AvgPool1d::AvgPool1d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride,
                     std::vector<std::int64_t> padding, bool ceil_mode, bool count_include_pad)
    : UnaryModule("AvgPool1d"),
      kernel_size_(std::move(kernel_size)),
      stride_(stride.empty() ? kernel_size_ : std::move(stride)),
      padding_(std::move(padding)),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad) {}
Tensor AvgPool1d::forward(const Tensor& x) {
  return avg_pool1d(x, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_);
}

AvgPool2d::AvgPool2d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride,
                     std::vector<std::int64_t> padding, bool ceil_mode, bool count_include_pad,
                     std::optional<std::int64_t> divisor_override)
    : UnaryModule("AvgPool2d"),
      kernel_size_(std::move(kernel_size)),
      stride_(stride.empty() ? kernel_size_ : std::move(stride)),
      padding_(std::move(padding)),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad),
      divisor_override_(divisor_override) {}
Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_, divisor_override_);
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(std::vector<std::int64_t> output_size)
    : UnaryModule("AdaptiveAvgPool1d"), output_size_(std::move(output_size)) {}
Tensor AdaptiveAvgPool1d::forward(const Tensor& x) { return adaptive_avg_pool1d(x, output_size_); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::vector<std::int64_t> output_size)
    : UnaryModule("AdaptiveAvgPool2d"), output_size_(std::move(output_size)) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size_); }

}  // namespace xgrad::nn
