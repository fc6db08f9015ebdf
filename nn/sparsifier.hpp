#pragma once
// nn::Sparsifier: sparse training whose structure learns (dynamic sparsity at a fixed density). The
// block-sparse layers it holds keep their number of stored blocks; every `update_every` optimizer steps
// until `end_step`, each layer drops the fraction f(t) of its stored blocks with the smallest magnitude
// and grows as many of the blocks it does not store:
//   - GrowMode::gradient (RigL, Evci et al. 2020): those where the dense weight gradient of the last
//     batch has the largest block norm (block_grad_norms, one block row at a time: the dense gradient is
//     never held, and it is computed on update steps only);
//   - GrowMode::random (SET, Mocanu et al. 2018): uniformly at random, from the sparsifier's generator.
// f(t) = drop_fraction / 2 · (1 + cos(π t / end_step)), RigL's cosine decay. Grown blocks start at zero,
// surviving blocks keep their weights, and the optimizer's state per element (momentum, Adam's moments)
// moves with them: zero for grown blocks (BlockSparseLinear::set_pattern, Optimizer::state_buffers).
//
//   nn::Adam opt(model->parameters(), 1e-3);
//   nn::Sparsifier sparsifier({fc1, fc2}, opt, nn::SparsifierOptions(100, total_steps * 3 / 4));
//   for (...) { opt.zero_grad(); loss = ...; loss.backward(); opt.step(); sparsifier.step(); }
//
// Selections are exact and do not depend on the thread count: the drop ranks the blocks' squared
// Frobenius norms (summed in a fixed order in double), ties to the lower block index; the growth ranks
// the gradient norms the same way. Memory beyond the layers: the last batch's input and output gradient
// of each layer, kept on the step before an update only, one (block rows x in) panel per running task
// and the (out/bo x in/bi) grid of norms during an update, and one copy of a layer's stored weights while
// they are moved.
#include <cstdint>
#include <memory>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/nn/block_sparse_linear.hpp"
#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// How a Sparsifier chooses the blocks it grows.
enum class GrowMode {
  gradient,  ///< RigL: the largest block norms of the dense weight gradient
  random,    ///< SET: uniformly at random among the blocks not stored
};

/// Options of a Sparsifier: structure updates every `update_every` steps while the step count is below
/// `end_step` (RigL's ΔT and T_end); `drop_fraction` (α, default 0.3) is the fraction dropped at step 0,
/// decayed to 0 at end_step by a cosine; grow mode (default gradient, RigL); seed of the random growth.
class SparsifierOptions {
 public:
  SparsifierOptions(std::int64_t update_every, std::int64_t end_step)
      : update_every_(update_every), end_step_(end_step) {}
  SparsifierOptions& drop_fraction(double v) {
    drop_fraction_ = v;
    return *this;
  }
  SparsifierOptions& grow(GrowMode v) {
    grow_ = v;
    return *this;
  }
  SparsifierOptions& seed(std::uint64_t v) {
    seed_ = v;
    return *this;
  }
  std::int64_t update_every() const { return update_every_; }
  std::int64_t end_step() const { return end_step_; }
  double drop_fraction() const { return drop_fraction_; }
  GrowMode grow() const { return grow_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::int64_t update_every_, end_step_;
  double drop_fraction_ = 0.3;
  GrowMode grow_ = GrowMode::gradient;
  std::uint64_t seed_ = 0;
};

/// Dynamic sparse training of block-sparse layers (see above). Errors (xgrad::Error naming
/// Sparsifier): no layers, a null or repeated layer, a layer whose blocks are not a uniform grid,
/// update_every < 1, end_step < 0, drop_fraction outside [0, 1].
class Sparsifier {
 public:
  Sparsifier(std::vector<std::shared_ptr<BlockSparseLinear>> layers, Optimizer& optimizer, SparsifierOptions options);
  ~Sparsifier();
  Sparsifier(const Sparsifier&) = delete;
  Sparsifier& operator=(const Sparsifier&) = delete;

  /// Call once after each optimizer.step(): counts the step t and, when t is an update step (t %
  /// update_every == 0, t < end_step), drops and grows blocks in every layer. Returns the number of
  /// blocks dropped (and grown) over all layers at this step, 0 on other steps. With GrowMode::gradient
  /// an update step needs the gradient of that step's batch, which each layer captured because the
  /// previous step() armed it: an update without one is an error naming the layer.
  std::int64_t step();
  /// Steps counted so far.
  std::int64_t step_count() const { return step_; }
  /// True when step t is an update step: t > 0, t % update_every == 0 and t < end_step (so after
  /// step(), is_update(step_count()) says whether that call updated, even when it moved no block).
  bool is_update(std::int64_t t) const;
  /// f(t), the fraction of stored blocks an update at step t drops.
  double drop_fraction(std::int64_t t) const;
  const SparsifierOptions& options() const { return options_; }
  const std::vector<std::shared_ptr<BlockSparseLinear>>& layers() const { return layers_; }

 private:
  std::int64_t update_layer(BlockSparseLinear& layer, std::size_t index, double fraction);

  std::vector<std::shared_ptr<BlockSparseLinear>> layers_;
  Optimizer& optimizer_;
  SparsifierOptions options_;
  Generator gen_;
  std::int64_t step_ = 0;
};

}  // namespace xgrad::nn
