#include "xgrad/nn/block_sparse_linear.hpp"

#include <cmath>
#include <new>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"

namespace xgrad::nn {

namespace {

// Packed weights and bias drawn row by row: U(-1/sqrt(fan_in_i), 1/sqrt(fan_in_i)) for output row i.
std::pair<Tensor, Tensor> init(const BlockSparsePattern& p, Generator& gen, bool with_bias, Dtype dtype) {
  // Sizes and memory checked first (Note [Checked sizes]): the weight is drawn in double before the cast.
  check_host_memory(
      checked_nbytes(p.stored_elements(), sizeof(double), "BlockSparseLinear", "pattern (stored elements)"),
      "BlockSparseLinear", "pattern (stored elements)");
  checked_nbytes(p.out_features(), sizeof(std::int64_t), "BlockSparseLinear", "pattern (out_features)");
  std::vector<std::int64_t> fan;
  std::vector<double> w;
  try {
    fan = p.row_fan_in();
    w.resize(static_cast<std::size_t>(p.stored_elements()));
  } catch (const std::bad_alloc&) {
    detail::throw_error(fmt::format("BlockSparseLinear: out of memory: {} stored weights ({} bytes in double) for {}",
                                    p.stored_elements(), p.stored_elements() * 8, p.str()));
  }
  // One bulk draw of uniforms on [0, 1) for the weights, one for the biases (in storage order),
  // each scaled to U(-bound, bound) of its output row.
  const Tensor uw = Tensor::rand({p.stored_elements()}, gen, kFloat64);
  const double* u = uw.data<double>();
  for (const auto& b : p.blocks())
    for (std::int64_t i = 0; i < b.rows; ++i) {
      const double bound = 1.0 / std::sqrt(double(fan[static_cast<std::size_t>(b.row + i)]));
      for (std::int64_t j = 0; j < b.cols; ++j) {
        const auto k = static_cast<std::size_t>(b.offset + i * b.cols + j);
        w[k] = -bound + 2.0 * bound * u[k];
      }
    }
  Tensor bias;
  if (with_bias) {
    std::vector<double> bv(static_cast<std::size_t>(p.out_features()));
    const Tensor ub = Tensor::rand({p.out_features()}, gen, kFloat64);
    for (std::size_t i = 0; i < bv.size(); ++i) {
      const double bound = fan[i] > 0 ? 1.0 / std::sqrt(double(fan[i])) : 0.0;
      bv[i] = bound > 0 ? -bound + 2.0 * bound * ub.data<double>()[i] : 0.0;
    }
    bias = Tensor::from_vector(bv, {p.out_features()}, dtype);
  }
  return {Tensor::from_vector(w, p.weight_shape(), dtype), bias};
}

}  // namespace

BlockSparseLinear::BlockSparseLinear(BlockSparsePattern pattern, std::pair<Tensor, Tensor> params)
    : UnaryModule("BlockSparseLinear"), pattern_(std::move(pattern)) {
  weight_ = register_parameter("weight", std::move(params.first));
  if (params.second.defined()) bias_ = register_parameter("bias", std::move(params.second));
}

BlockSparseLinear::BlockSparseLinear(BlockSparsePattern pattern, Generator& gen, bool with_bias, Dtype dtype)
    : BlockSparseLinear(pattern, init(pattern, gen, with_bias, dtype)) {}

BlockSparseLinear::BlockSparseLinear(BlockSparsePattern pattern, bool with_bias, Dtype dtype,
                                     std::optional<std::uint64_t> seed)
    : BlockSparseLinear(pattern, init(pattern, SeedOrDefault(seed), with_bias, dtype)) {}

std::shared_ptr<BlockSparseLinear> BlockSparseLinear::from_dense(const Tensor& weight,
                                                                 const BlockSparsePattern& pattern,
                                                                 const Tensor& bias) {
  Tensor packed = block_sparse_from_dense(weight, pattern);
  if (bias.defined()) {
    XGRAD_CHECK(bias.shape() == Shape{pattern.out_features()} && bias.dtype() == weight.dtype(),
                "BlockSparseLinear::from_dense: argument 'bias' is {} {} but must be ({},) {}", bias.dtype(),
                shape_str(bias.shape()), pattern.out_features(), weight.dtype());
  }
  return std::shared_ptr<BlockSparseLinear>(
      new BlockSparseLinear(pattern, std::make_pair(packed, bias.defined() ? bias.detach().clone_data() : Tensor())));
}

Tensor BlockSparseLinear::forward(const Tensor& x) {
  Tensor y = block_sparse_linear(x, weight_, bias_, pattern_);
  if (capture_->armed && y.requires_grad()) {
    capture_->x = x.detach();
    capture_->g = Tensor();
    y.register_hook([c = std::weak_ptr<Capture>(capture_)](const Tensor& g) {
      if (auto cap = c.lock(); cap && cap->armed) cap->g = g.detach();
    });
  }
  return y;
}

void BlockSparseLinear::set_capture(bool on) {
  capture_->armed = on;
  if (!on) capture_->x = capture_->g = Tensor();
}

std::pair<Tensor, Tensor> BlockSparseLinear::captured() const {
  if (!capture_->g.defined()) return {};
  return {capture_->x, capture_->g};
}

void BlockSparseLinear::set_pattern(const BlockSparsePattern& pattern) {
  XGRAD_CHECK(pattern.weight_shape() == weight_.shape(),
              "BlockSparseLinear::set_pattern: argument 'pattern' ({}) has weight shape {} but the layer's weight is "
              "{}",
              pattern.str(), shape_str(pattern.weight_shape()), shape_str(weight_.shape()));
  Tensor moved = block_sparse_remap(weight_, pattern_, pattern);  // checks the grid
  Tensor grad = weight_.grad();
  if (grad.defined()) grad = block_sparse_remap(grad, pattern_, pattern);
  {
    NoGradGuard guard;
    weight_.copy_(moved);
  }
  if (grad.defined()) weight_.set_grad(grad);
  pattern_ = pattern;
}

Tensor BlockSparseLinear::to_dense() const { return block_sparse_to_dense(weight_, pattern_); }

}  // namespace xgrad::nn
