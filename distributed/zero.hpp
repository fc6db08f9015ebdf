#pragma once
// xgrad::distributed::ZeroRedundancyOptimizer: ZeRO stage 1 (Rajbhandari et al., 2020; torch's
// torch.distributed.optim.ZeroRedundancyOptimizer): the optimizer state is sharded across the ranks.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::distributed {

/// Wraps an elementwise xgrad optimizer (SGD, Adam, AdamW, RMSprop, Adagrad; not LBFGS) so that each
/// rank keeps the state (Adam's moments, SGD's momentum) of its own 1/world_size of the parameters'
/// elements only.
///
/// Partition (at construction, the same on every rank; DeepSpeed's ZeRO-1 rule): the parameters of
/// each dtype, in position order, are laid end to end as one flat vector of T elements, and rank r
/// owns elements [T r / W, T (r + 1) / W) of it (whole parameters or pieces of them: a large matrix is
/// split, so the shares are equal to one element, unlike torch's whole-parameter partition). This
/// rank's share is held as one "piece" tensor per parameter it overlaps (a copy of those elements),
/// and the wrapped optimizer is built by `make_optimizer` over the pieces (not built when the share is
/// empty; one parameter group with the factory's options).
///
/// step() (collective) replaces DistributedDataParallel::average_gradients() + step():
///  1. reduce-scatter: the flat gradients are summed across ranks, each rank receiving the sums of
///     its share (a ring of point-to-point messages, Note [Ring reduce-scatter] in zero.cpp; per
///     dtype), divided by world_size, as the pieces' gradients (an
///     undefined .grad counts as zeros, as in average_gradients);
///  2. the wrapped optimizer steps on the pieces;
///  3. all-gather: every rank receives every share's new values into the parameters (MPI_Allgatherv).
/// Since the optimizers are elementwise, the trajectory is the one of DistributedDataParallel
/// (ReduceMode::allreduce) + the unsharded optimizer; with 2 ranks bit for bit (tests/distributed
/// checks SGD with momentum and Adam). The parameters' own .grad keep this rank's (unaveraged)
/// gradients. Memory per rank: the state of T / W elements per dtype, the pieces (T / W elements), and
/// during step() transient buffers of T elements.
/// Construction is collective (DistributedDataParallel's check that every rank passes the same
/// parameter shapes and dtypes, then rank 0's values broadcast).
/// Errors: no parameters, an undefined or non-floating parameter, a null factory or a factory
/// returning null, an LBFGS optimizer, MPI not initialised, a flat vector beyond MPI's int counts.
class ZeroRedundancyOptimizer {
 public:
  using Factory = std::function<std::unique_ptr<nn::Optimizer>(std::vector<Tensor> shard)>;

  ZeroRedundancyOptimizer(std::vector<Tensor> params, Factory make_optimizer);

  /// See the class comment. Collective.
  void step();
  /// Clears the gradients of every parameter, as nn::Optimizer::zero_grad.
  void zero_grad(bool set_to_none = false);

  /// This rank's pieces (the tensors the wrapped optimizer updates), float32 pieces first.
  const std::vector<Tensor>& shard() const { return pieces_; }
  /// The optimizer over this rank's pieces; null when this rank owns no element.
  nn::Optimizer* local_optimizer() { return local_.get(); }
  /// Bytes of the tensors in this rank's optimizer state (its state_dict()'s "state." entries).
  std::size_t local_state_bytes() const;
  const std::vector<Tensor>& parameters() const { return params_; }

 private:
  struct Piece {
    std::size_t param;         // index into params_
    std::int64_t offset, len;  // elements [offset, offset + len) of the parameter
  };
  struct Flat {
    Dtype dtype;
    std::vector<std::size_t> params;  // this dtype's parameters, in position order
    std::vector<int> counts, displs;  // each rank's share of the flat vector
    std::vector<Piece> pieces;        // this rank's, in flat order
    std::size_t first_piece = 0;      // index of pieces[0] in pieces_
  };
  std::vector<Tensor> params_;
  std::vector<Flat> flats_;
  std::vector<Tensor> pieces_;
  std::unique_ptr<nn::Optimizer> local_;
  std::int64_t steps_ = 0;
};

}  // namespace xgrad::distributed
