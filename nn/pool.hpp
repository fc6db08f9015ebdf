#pragma once
// Pooling layers over the ops of ops/pool.hpp, like torch's: nn::MaxPool1d/2d, nn::AvgPool1d/2d,
// nn::AdaptiveAvgPool1d/2d. No parameters. Size arguments take one value or one per spatial dimension
// (an empty stride means stride = kernel_size), and are printed as given, as torch prints them.
//
//   nn::MaxPool2d pool({2});            // (N, C, H, W) -> (N, C, H / 2, W / 2)
//
// MaxPool1d/2d::forward_with_indices returns {values, indices} (torch's return_indices=True, libtorch's
// forward_with_indices): the int64 arg-max positions of max_pool1d/2d_with_indices.
//
// Errors (forward): the op's.
#include <cstdint>
#include <optional>
#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class MaxPool1d : public UnaryModule {
 public:
  explicit MaxPool1d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride = {},
                     std::vector<std::int64_t> padding = {0}, std::vector<std::int64_t> dilation = {1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  /// {values, indices}: forward's values and max_pool1d_with_indices' int64 indices (no gradient).
  Tensors forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride = {},
                     std::vector<std::int64_t> padding = {0}, std::vector<std::int64_t> dilation = {1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  /// {values, indices}: forward's values and max_pool2d_with_indices' int64 indices (no gradient).
  Tensors forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

class AvgPool1d : public UnaryModule {
 public:
  explicit AvgPool1d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride = {},
                     std::vector<std::int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(std::vector<std::int64_t> kernel_size, std::vector<std::int64_t> stride = {},
                     std::vector<std::int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<std::int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<std::int64_t> divisor_override_;
};

class AdaptiveAvgPool1d : public UnaryModule {
 public:
  explicit AdaptiveAvgPool1d(std::vector<std::int64_t> output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> output_size_;
};

class AdaptiveAvgPool2d : public UnaryModule {
 public:
  explicit AdaptiveAvgPool2d(std::vector<std::int64_t> output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::vector<std::int64_t> output_size_;
};

}  // namespace xgrad::nn
