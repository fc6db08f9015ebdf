#include "xgrad/nn/layer_norm.hpp"

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

namespace xgrad::nn {

namespace {
void check_config(const Shape& normalized_shape, double eps) {
  XGRAD_CHECK(!normalized_shape.empty(), "LayerNorm: argument 'normalized_shape' must not be empty");
  for (auto d : normalized_shape)
    XGRAD_CHECK(d >= 0, "LayerNorm: argument 'normalized_shape' {} has a negative dim", shape_str(normalized_shape));
  XGRAD_CHECK(std::isfinite(eps) && eps >= 0, "LayerNorm: argument 'eps' must be finite and >= 0, got {}", eps);
}

void check_affine(const Tensor& t, const char* name, const Shape& normalized_shape, const Tensor& x) {
  if (!t.defined()) return;
  XGRAD_CHECK(t.shape() == normalized_shape && t.dtype() == x.dtype(),
              "layer_norm: argument '{}' is {} {} but must be {} {} (normalized_shape, x's dtype)", name, t.dtype(),
              shape_str(t.shape()), shape_str(normalized_shape), x.dtype());
}
}  // namespace

namespace functional {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  XGRAD_CHECK(x.defined(), "layer_norm: argument 'x' is undefined");
  check_config(normalized_shape, eps);
  const auto nd = static_cast<std::int64_t>(normalized_shape.size());
  XGRAD_CHECK(x.dim() >= nd && Shape(x.shape().end() - nd, x.shape().end()) == normalized_shape,
              "layer_norm: argument 'x' has shape {} but its trailing dims must be normalized_shape {}",
              shape_str(x.shape()), shape_str(normalized_shape));
  check_affine(weight, "weight", normalized_shape, x);
  check_affine(bias, "bias", normalized_shape, x);
  std::vector<std::int64_t> axes(static_cast<std::size_t>(nd));
  std::iota(axes.begin(), axes.end(), x.dim() - nd);
  const Tensor centred = sub(x, mean(x, axes, /*keepdim=*/true));
  const Tensor var = mean(mul(centred, centred), axes, /*keepdim=*/true);  // biased, as torch
  Tensor y = div(centred, sqrt(add(var, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

}  // namespace functional

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, Dtype dtype)
    : UnaryModule("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  check_config(normalized_shape_, eps_);
  if (elementwise_affine) {
    weight_ = register_parameter("weight", Tensor::ones(normalized_shape_, dtype));
    bias_ = register_parameter("bias", Tensor::zeros(normalized_shape_, dtype));
  }
}

LayerNorm::LayerNorm(Shape normalized_shape, Tensor weight, Tensor bias, double eps)
    : UnaryModule("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  check_config(normalized_shape_, eps_);
  XGRAD_CHECK(weight.defined() == bias.defined(),
              "LayerNorm: arguments 'weight' and 'bias' must both be defined or "
              "both undefined");
  if (!weight.defined()) return;
  XGRAD_CHECK(
      weight.shape() == normalized_shape_ && bias.shape() == normalized_shape_ && weight.dtype() == bias.dtype(),
      "LayerNorm: arguments 'weight' {} {} and 'bias' {} {} must both be {} of one dtype", weight.dtype(),
      shape_str(weight.shape()), bias.dtype(), shape_str(bias.shape()), shape_str(normalized_shape_));
  weight_ = register_parameter("weight", std::move(weight));
  bias_ = register_parameter("bias", std::move(bias));
}

Tensor LayerNorm::forward(const Tensor& x) {
  return functional::layer_norm(x, normalized_shape_, weight_, bias_, eps_);
}

}  // namespace xgrad::nn
