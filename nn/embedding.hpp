#pragma once
// nn::Embedding: a lookup table of num_embeddings rows of embedding_dim values, like
// torch::nn::Embedding. forward(indices) returns the rows weight[i] for each index, with shape
// indices.shape + (embedding_dim); the gradient of weight row r is the sum of the output gradients
// of every position that looked r up (index_select's backward). Init is torch's: N(0, 1).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class Embedding : public UnaryModule {
 public:
  /// weight (num_embeddings, embedding_dim) ~ N(0, 1) from `gen`. Errors: negative sizes.
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Generator& gen, Dtype dtype = kFloat32);
  /// Same with a Generator seeded with `seed`.
  explicit Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Dtype dtype = kFloat32,
                     std::optional<std::uint64_t> seed = std::nullopt);
  /// Adopts `weight` (num, dim) as the parameter itself (shared, not copied; ties weights).
  /// Errors: weight not 2-d.
  explicit Embedding(Tensor weight);
  /// torch's Embedding::from_pretrained: a layer whose weight shares `embeddings`' storage, trainable
  /// unless `freeze`.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true);

  /// Rows for a list of indices: (n, embedding_dim). Errors: an index outside [0, num_embeddings).
  Tensor forward(const std::vector<std::int64_t>& indices);
  /// Rows for an int64 (or int32) tensor of indices of any shape: indices.shape + (embedding_dim).
  /// Errors: undefined, a float or bool tensor (the message says how to convert), or an index
  /// outside [0, num_embeddings).
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  using UnaryModule::operator();
  Tensor operator()(const std::vector<std::int64_t>& indices) { return forward(indices); }

  std::int64_t num_embeddings() const { return num_embeddings_; }
  std::int64_t embedding_dim() const { return embedding_dim_; }
  const Tensor& weight() const { return weight_; }

 private:
  Embedding(Tensor weight, bool requires_grad);
  Tensor lookup(std::span<const std::int64_t> indices, const Shape& out_batch_shape);
  std::int64_t num_embeddings_, embedding_dim_;
  Tensor weight_;
};

}  // namespace xgrad::nn
