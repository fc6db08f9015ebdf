#pragma once
// nn::Linear: y = x W^T + b, like torch::nn::Linear.
//
//   auto fc = std::make_shared<nn::Linear>(4, 8);      // in 4 -> out 8, seed 0, float32
//   Tensor y = (*fc)(x);                               // x: (4) or (batch..., 4) -> (8) or (batch..., 8)
//   Tensor z = (*fc)(a);                               // a: SparseCsr (rows, 4) -> dense (rows, 8)
//
// Parameters: `weight` (out, in) and `bias` (out) unless disabled. Init is torch's:
// kaiming_uniform_(weight, a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and the bias uniform on the
// same interval (zeros when in = 0). Gradients: dx = g W, dW = sum over batch of g^T x, db = sum of g.
#include <cstdint>
#include <optional>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::nn {

namespace functional {
/// y = x W^T + b (torch::nn::functional::linear): the op xgrad::linear (ops/linear.hpp).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// The same on a sparse x (rows, in): the op xgrad::linear(const SparseCsr&, ...) (ops/sparse.hpp).
Tensor linear(const SparseCsr& x, const Tensor& weight, const Tensor& bias = Tensor());
}  // namespace functional

class Linear : public UnaryModule {
 public:
  /// Initialised from `gen` (see above). Errors: negative sizes.
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true, Dtype dtype = kFloat32);
  /// Same with a Generator seeded with `seed`.
  explicit Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, Dtype dtype = kFloat32,
                  std::optional<std::uint64_t> seed = std::nullopt);
  /// Adopts `weight` (out, in) and `bias` (out) or undefined as the parameters themselves (shared, not
  /// copied: this ties weights between layers, e.g. an Embedding's weight and an output Linear's).
  /// Errors: weight not 2-d, bias of the wrong shape or dtype.
  explicit Linear(Tensor weight, Tensor bias = Tensor());

  /// x: (in) or (batch..., in) -> (out) or (batch..., out). Errors: x's last dim != in_features.
  Tensor forward(const Tensor& x) override;
  /// A sparse x (rows, in_features), e.g. bag-of-words rows -> dense (rows, out): y = x Wᵀ + b without a
  /// dense x (xgrad::linear on a SparseCsr). Errors: x.cols() != in_features.
  Tensor forward(const SparseCsr& x);
  using UnaryModule::operator();
  Tensor operator()(const SparseCsr& x) { return forward(x); }
  std::string extra_repr() const override;

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }
  /// The (out, in) weight (a registered parameter).
  const Tensor& weight() const { return weight_; }
  /// The bias, undefined when the layer has none.
  const Tensor& bias() const { return bias_; }

 private:
  void init_parameters(Generator& gen, bool bias, Dtype dtype);
  std::int64_t in_features_, out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace xgrad::nn
