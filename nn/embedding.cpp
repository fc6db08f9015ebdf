#include "xgrad/nn/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "xgrad/core/checked.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace {
Tensor make_weight(std::int64_t num, std::int64_t dim, Generator& gen, Dtype dtype) {
  XGRAD_CHECK(num >= 0 && dim >= 0, "Embedding: num_embeddings and embedding_dim must be >= 0, got {} and {}", num,
              dim);
  // Named size checks (Note [Checked sizes]): the table's element and byte counts must exist.
  checked_nbytes(checked_numel({num, dim}, "Embedding", "num_embeddings * embedding_dim"), dtype_size(dtype),
                 "Embedding", "num_embeddings * embedding_dim");
  Tensor w = Tensor::empty({num, dim}, dtype);
  init::normal_(w, gen);
  return w;
}

void check_weight(const Tensor& w) {
  XGRAD_CHECK(w.defined() && w.dim() == 2,
              "Embedding: argument 'weight' must be a 2-d (num_embeddings, embedding_dim) tensor, got {}",
              w.defined() ? shape_str(w.shape()) : std::string("an undefined tensor"));
}
}  // namespace

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Generator& gen, Dtype dtype)
    : Embedding(make_weight(num_embeddings, embedding_dim, gen, dtype), true) {}

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Dtype dtype,
                     std::optional<std::uint64_t> seed)
    : Embedding(make_weight(num_embeddings, embedding_dim, SeedOrDefault(seed), dtype), true) {}

Embedding::Embedding(Tensor weight) : Embedding((check_weight(weight), std::move(weight)), true) {}

Embedding::Embedding(Tensor weight, bool requires_grad)
    : UnaryModule("Embedding"), num_embeddings_(0), embedding_dim_(0) {
  check_weight(weight);
  num_embeddings_ = weight.size(0);
  embedding_dim_ = weight.size(1);
  weight_ = register_parameter("weight", std::move(weight), requires_grad);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze) {
  check_weight(embeddings);
  return std::shared_ptr<Embedding>(new Embedding(embeddings.detach(), !freeze));
}

Tensor Embedding::lookup(std::span<const std::int64_t> indices, const Shape& out_batch_shape) {
  if (!all_in_range(indices, num_embeddings_))  // the bad index is looked for only if there is one
    for (std::size_t i = 0; i < indices.size(); ++i)
      XGRAD_CHECK(indices[i] >= 0 && indices[i] < num_embeddings_,
                  "Embedding: index {} at position {} is out of range for {} embeddings", indices[i], i,
                  num_embeddings_);
  // index_select's backward is the row scatter (Note [Row scatter]): one index per looked-up row.
  // The indices are read where they are: copied only when the weight takes a gradient.
  Tensor rows = index_select_checked(weight_, 0, indices);  // checked above
  Shape out = out_batch_shape;
  out.push_back(embedding_dim_);
  return out == rows.shape() ? rows : reshape(rows, out);
}

Tensor Embedding::forward(const std::vector<std::int64_t>& indices) {
  return lookup(indices, {static_cast<std::int64_t>(indices.size())});
}

Tensor Embedding::forward(const Tensor& indices) {
  XGRAD_CHECK(indices.defined(), "Embedding: argument 'indices' is undefined");
  XGRAD_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "Embedding: argument 'indices' must be an int64 (or int32) tensor, got {} of shape {} (convert "
              "with indices.to(xgrad::kInt64))",
              indices.dtype(), shape_str(indices.shape()));
  const auto n = static_cast<std::size_t>(indices.numel());
  if (indices.dtype() == kInt64) return lookup({indices.data<std::int64_t>(), n}, indices.shape());
  const std::int32_t* p = indices.data<std::int32_t>();
  return lookup(std::vector<std::int64_t>(p, p + n), indices.shape());
}

}  // namespace xgrad::nn
