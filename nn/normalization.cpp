#include "xgrad/nn/normalization.hpp"

#include <cmath>
#include <utility>

#include "xgrad/core/autograd.hpp"
#include "xgrad/ops/normalization.hpp"

namespace xgrad::nn {

BatchNormBase::BatchNormBase(std::string type_name, std::int64_t num_features, double eps,
                             std::optional<double> momentum, bool affine, bool track_running_stats, Dtype dtype)
    : UnaryModule(std::move(type_name)), num_features_(num_features), eps_(eps), momentum_(momentum) {
  XGRAD_CHECK(num_features > 0, "{}: argument 'num_features' must be positive, got {}", this->type_name(),
              num_features);
  XGRAD_CHECK(std::isfinite(eps) && eps >= 0, "{}: argument 'eps' must be finite and >= 0, got {}", this->type_name(),
              eps);
  XGRAD_CHECK(!momentum || std::isfinite(*momentum), "{}: argument 'momentum' must be finite, got {}",
              this->type_name(), momentum.value_or(0.0));
  if (affine) {
    weight_ = register_parameter("weight", Tensor::ones({num_features}, dtype));
    bias_ = register_parameter("bias", Tensor::zeros({num_features}, dtype));
  }
  if (track_running_stats) {
    running_mean_ = register_buffer("running_mean", Tensor::zeros({num_features}, dtype));
    running_var_ = register_buffer("running_var", Tensor::ones({num_features}, dtype));
    num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, kInt64));
  }
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats()) return;
  NoGradGuard guard;
  running_mean_.zero_();
  running_var_.fill_(1.0);
  num_batches_tracked_.zero_();
}

Tensor BatchNormBase::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", type_name());
  check_input_dim(x);
  XGRAD_CHECK(x.size(1) == num_features_,
              "{}: argument 'x' has shape {} but must have num_features = {} channels (dim 1)", type_name(),
              shape_str(x.shape()), num_features_);
  // As torch's _BatchNorm.forward: count the batch, pick the averaging factor (1 / count without a
  // momentum), and normalise with the batch statistics in training mode or when there are no running
  // statistics. The count is advanced only after batch_norm accepted the input.
  const bool count = is_training() && track_running_stats();
  double factor = momentum_.value_or(0.0);
  const std::int64_t batches = count ? num_batches_tracked_.item<std::int64_t>() + 1 : 0;
  if (count && !momentum_) factor = 1.0 / static_cast<double>(batches);
  const bool use_batch_stats = is_training() || !track_running_stats();
  Tensor y = batch_norm(x, running_mean_, running_var_, weight_, bias_, use_batch_stats, factor, eps_);
  if (count) {
    NoGradGuard guard;
    num_batches_tracked_.fill_(static_cast<double>(batches));
  }
  return y;
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  XGRAD_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got {}D input of shape {})", x.dim(),
              shape_str(x.shape()));
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  XGRAD_CHECK(x.dim() == 4, "BatchNorm2d: expected 4D input (got {}D input of shape {})", x.dim(),
              shape_str(x.shape()));
}

GroupNorm::GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps, bool affine, Dtype dtype)
    : UnaryModule("GroupNorm"), num_groups_(num_groups), num_channels_(num_channels), eps_(eps) {
  XGRAD_CHECK(num_groups > 0, "GroupNorm: argument 'num_groups' must be positive, got {}", num_groups);
  XGRAD_CHECK(num_channels >= 0, "GroupNorm: argument 'num_channels' must be >= 0, got {}", num_channels);
  XGRAD_CHECK(num_channels % num_groups == 0,
              "GroupNorm: argument 'num_channels' = {} must be divisible by 'num_groups' = {}", num_channels,
              num_groups);
  XGRAD_CHECK(std::isfinite(eps) && eps >= 0, "GroupNorm: argument 'eps' must be finite and >= 0, got {}", eps);
  if (affine) {
    weight_ = register_parameter("weight", Tensor::ones({num_channels}, dtype));
    bias_ = register_parameter("bias", Tensor::zeros({num_channels}, dtype));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "GroupNorm: argument 'x' is an undefined tensor");
  XGRAD_CHECK(x.dim() >= 2 && x.size(1) == num_channels_,
              "GroupNorm: argument 'x' has shape {} but must be (N, num_channels = {}, *)", shape_str(x.shape()),
              num_channels_);
  return group_norm(x, num_groups_, weight_, bias_, eps_);
}

}  // namespace xgrad::nn
