#pragma once
// nn::BatchNorm1d, nn::BatchNorm2d and nn::GroupNorm, like torch.nn's (PyTorch 1.13), on the ops
// batch_norm and group_norm (ops/normalization.hpp: formulas, gradients, errors).
//
// BatchNorm: in training mode (Module::train) each batch is normalised with its own statistics and,
// with track_running_stats, the buffers running_mean (zeros) and running_var (ones) are updated in
// place: x_run = (1 - f) x_run + f x_batch (unbiased variance), f = momentum, or with momentum
// unset (torch's momentum=None) the cumulative average f = 1 / num_batches_tracked. In eval mode
// (Module::eval) the running statistics normalise, or the batch's own without track_running_stats.
// State names equal torch's: weight, bias (with affine), running_mean, running_var,
// num_batches_tracked (with track_running_stats).
// num_batches_tracked is a 0-d int64 buffer, as torch's (Module::to leaves it int64).
#include <cstdint>
#include <optional>
#include <string>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

/// What BatchNorm1d and BatchNorm2d share (torch's _BatchNorm); `input_dims` lists the accepted
/// input ranks.
class BatchNormBase : public UnaryModule {
 public:
  /// Errors: num_features <= 0, eps < 0 or not finite, momentum not finite.
  BatchNormBase(std::string type_name, std::int64_t num_features, double eps, std::optional<double> momentum,
                bool affine, bool track_running_stats, Dtype dtype);

  /// x (N, C, ...) -> same shape. Errors: x's rank not accepted, x's channels != num_features, and
  /// those of batch_norm (e.g. one value per channel in training mode).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  /// Unset: the cumulative moving average (torch's momentum=None).
  std::optional<double> momentum() const { return momentum_; }
  bool affine() const { return weight_.defined(); }
  bool track_running_stats() const { return running_mean_.defined(); }
  /// The scale and shift (C), undefined without affine.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  /// The running statistics (C) and the batch count (0-d int64), undefined without
  /// track_running_stats.
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }
  /// Running stats back to zeros and ones, the count to 0 (torch's reset_running_stats).
  void reset_running_stats();

 protected:
  /// Refuses an input rank the layer does not take (torch's _check_input_dim).
  virtual void check_input_dim(const Tensor& x) const = 0;

 private:
  std::int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

/// Input (N, C) or (N, C, L).
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, Dtype dtype = kFloat32)
      : BatchNormBase("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats, dtype) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

/// Input (N, C, H, W).
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, Dtype dtype = kFloat32)
      : BatchNormBase("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats, dtype) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

/// torch.nn.GroupNorm: x (N, C, *) normalised per sample over groups of C / num_groups channels;
/// weight (ones) and bias (zeros) of shape (C) with affine. The same in training and eval mode.
class GroupNorm : public UnaryModule {
 public:
  /// Errors: num_groups <= 0, num_channels < 0 or not divisible by num_groups, eps < 0.
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true,
            Dtype dtype = kFloat32);
  /// Errors: those of group_norm (x's channels != num_channels included).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::int64_t num_groups() const { return num_groups_; }
  std::int64_t num_channels() const { return num_channels_; }
  double eps() const { return eps_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t num_groups_, num_channels_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace xgrad::nn
