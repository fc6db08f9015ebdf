#pragma once
// nn::BlockSparseLinear: y = x W^T + b with W stored as its non-zero blocks only (ops/block_sparse_linear.hpp
// has the formulas, gradients and the storage layout).
//
//   auto layer = std::make_shared<nn::BlockSparseLinear>(BlockSparsePattern::block_diagonal(
//       {{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}}));  // in 4 -> out 6, two groups
//   Tensor y = layer->forward(x);                                // x: (batch..., 4) -> (batch..., 6)
//
// Parameters: `weight`, the packed blocks (shape pattern.weight_shape(): (nnz, bo, bi) for equal blocks,
// (stored,) otherwise), and `bias` (out,) unless disabled, so parameter bytes are the stored blocks only.
// Init, like torch.nn.Linear but with the fan-in counted over the connections that exist: the weights of
// output row i and b[i] are uniform on [-1/sqrt(fan_in_i), 1/sqrt(fan_in_i)], fan_in_i = number of inputs
// connected to output i; a row with no connection gets b[i] = 0.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "xgrad/core/random.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"

namespace xgrad::nn {

class BlockSparseLinear : public UnaryModule {
 public:
  /// Initialised from `gen` (see above), float32 or float64.
  BlockSparseLinear(BlockSparsePattern pattern, Generator& gen, bool with_bias = true, Dtype dtype = kFloat32);
  /// Same with a Generator seeded with `seed`.
  explicit BlockSparseLinear(BlockSparsePattern pattern, bool with_bias = true, Dtype dtype = kFloat32,
                             std::optional<std::uint64_t> seed = std::nullopt);

  /// A layer whose blocks are read from a dense (out, in) weight (entries outside the pattern are
  /// dropped); `bias` (out,) or undefined for no bias. Dtype follows `weight`.
  static std::shared_ptr<BlockSparseLinear> from_dense(const Tensor& weight, const BlockSparsePattern& pattern,
                                                       const Tensor& bias = Tensor());

  /// x: (in) or (batch..., in) -> (out) or (batch..., out).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  /// The dense (out, in) weight with zeros outside the blocks (no autograd history).
  Tensor to_dense() const;

  /// Moves the layer to another pattern on the same block grid with the same weight shape (what
  /// nn::Sparsifier does when it drops and grows blocks): blocks stored in both keep their values, new
  /// blocks start at zero (block_sparse_remap); the weight's gradient, when defined, is moved the same
  /// way. `weight` stays the same parameter: its storage is rewritten in place (the version counter
  /// bumps), so optimizers and modules that hold it keep working; their own state per element is the
  /// caller's to move (Optimizer::state_buffers). Errors: another grid or weight shape.
  void set_pattern(const BlockSparsePattern& pattern);

  /// Arms (true) or disarms the capture of the next forward's input x and of the gradient dL/dy that
  /// reaches that forward's output in the backward (a hook, registered only on armed forwards whose output
  /// requires grad). nn::Sparsifier arms it one step before a structure update and reads it with
  /// captured(). A later armed forward replaces the capture; disarming drops it.
  void set_capture(bool on);
  /// The captured (x, dL/dy), both undefined until an armed forward's backward has run.
  std::pair<Tensor, Tensor> captured() const;

  const BlockSparsePattern& pattern() const { return pattern_; }
  std::int64_t in_features() const { return pattern_.in_features(); }
  std::int64_t out_features() const { return pattern_.out_features(); }
  /// The packed blocks (a registered parameter).
  const Tensor& weight() const { return weight_; }
  /// The bias, undefined when the layer has none.
  const Tensor& bias() const { return bias_; }

 private:
  BlockSparseLinear(BlockSparsePattern pattern, std::pair<Tensor, Tensor> params);
  BlockSparsePattern pattern_;
  Tensor weight_;
  Tensor bias_;
  struct Capture {
    bool armed = false;
    Tensor x, g;
  };
  std::shared_ptr<Capture> capture_ = std::make_shared<Capture>();
};

}  // namespace xgrad::nn
