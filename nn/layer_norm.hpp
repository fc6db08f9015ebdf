#pragma once
// nn::LayerNorm, like torch::nn::LayerNorm: normalises over the trailing dims given by
// normalized_shape (D of them, N elements):
//   mu = mean(x), var = mean((x - mu)^2)  (biased, over the last D dims)
//   y  = (x - mu) / sqrt(var + eps) * weight + bias
// weight (ones) and bias (zeros) have shape normalized_shape and exist when elementwise_affine.
// Built from differentiable ops (sub, mul, mean, sqrt, div, add), so its gradient is theirs.
#include <cstdint>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

namespace functional {
/// The formula above; weight and bias may be undefined (no affine step). x's trailing dims must equal
/// normalized_shape. Errors: undefined x, empty normalized_shape, x's trailing dims differ, eps < 0
/// or not finite, weight or bias not of shape normalized_shape or of another dtype.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
}  // namespace functional

class LayerNorm : public UnaryModule {
 public:
  /// Errors: empty normalized_shape or a negative dim, eps < 0.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, Dtype dtype = kFloat32);
  /// Adopts weight and bias (both of shape normalized_shape, or both undefined) as the parameters
  /// themselves (shared, not copied).
  LayerNorm(Shape normalized_shape, Tensor weight, Tensor bias, double eps = 1e-5);

  /// x: (..., normalized_shape...) -> same shape. Errors: x's trailing dims differ from normalized_shape.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  /// The scale, undefined without elementwise_affine.
  const Tensor& weight() const { return weight_; }
  /// The shift, undefined without elementwise_affine.
  const Tensor& bias() const { return bias_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace xgrad::nn
