#pragma once
// xgrad::distributed::ZeroRedundancyOptimizer: ZeRO stage 1 (Rajbhandari et al., 2020; torch's
// torch.distributed.optim.ZeroRedundancyOptimizer): the optimizer state is sharded across the ranks.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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
///  2. the pieces are refreshed from the parameters (so a parameter written since the last step, e.g.
///     by loading a model checkpoint, is what this step updates) and the wrapped optimizer steps on
///     them;
///  3. all-gather: every rank receives every share's new values into the parameters (MPI_Allgatherv).
/// Since the optimizers are elementwise, the trajectory is the one of DistributedDataParallel
/// (ReduceMode::allreduce) + the unsharded optimizer; with 2 ranks bit for bit (tests/distributed
/// checks SGD with momentum and Adam). The parameters' own .grad keep this rank's (unaveraged)
/// gradients. Memory per rank: the state of T / W elements per dtype, the pieces (T / W elements), and
/// during step() transient buffers of T elements.
/// Construction is collective (DistributedDataParallel's check that every rank passes the same
/// parameter shapes and dtypes, then rank 0's values broadcast; then every rank's wrapped optimizer
/// must be of the same kind with the same options, or every rank throws xgrad::Error naming the first
/// differing option and two ranks' values).
/// Errors: no parameters, an undefined or non-floating parameter, a null factory or a factory
/// returning null, an LBFGS optimizer, MPI not initialised, a flat vector beyond MPI's int counts.
///
/// Checkpoints (Note [ZeRO checkpoints] in zero.cpp). The full form of the state is what the wrapped
/// optimizer's state_dict() gives over all the parameters in one group, in position order (the
/// "unsharded optimizer": nn::Optimizer::state_dict's names, "state.0.<i>.<buffer>" shaped like
/// parameter i): it loads into a plain nn::Optimizer of the same kind over the same parameters, or
/// into a ZeroRedundancyOptimizer at any world size. Two ways to save:
///  - consolidate_state_dict(to) gathers the full state on rank `to`, whose state_dict() returns it;
///    load_state_dict(full) on every rank takes each rank's share of it;
///  - save_sharded(dir) writes one file per rank (its share and where each piece lies in the
///    parameters) and load_sharded(dir) reads, at any world size, the files that overlap each rank's
///    share.
/// With Join (distributed.hpp) the ranks may run different numbers of steps (uneven inputs).
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

  /// Collective (torch's name): gathers every rank's share of the optimizer state on rank `to`
  /// (MPI_Igatherv of each share's bytes), where state_dict() then returns the full state (see the
  /// class comment). Every rank passes the same `to`. Errors: (every rank) `to` not a rank of the
  /// world, the shares' bytes together beyond MPI's int counts; (rank `to`) shares that do not fit
  /// together (options that differ, a partial state); (before any communication, on each rank whose
  /// wrapped optimizer has them) more than one parameter group in the wrapped optimizer.
  void consolidate_state_dict(int to = 0);
  /// The full state from the last consolidate_state_dict() (a copy). Error: this rank holds none (it
  /// was not the `to` of the last consolidation, or step() or a load ran since, so it would be stale).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Takes this rank's share of a full state (from state_dict() after consolidate_state_dict(), or
  /// from the state_dict() of a plain nn::Optimizer of the same kind over the same parameters in one
  /// group), saved at any world size. Local: no communication; call it on every rank with the same
  /// state. Validated before anything changes: every entry must name group 0 and a parameter of this
  /// optimizer, 'param_groups.0.num_params' must be the parameter count, each buffer must have its
  /// parameter's shape and dtype, and the wrapped optimizer then checks the options and its share
  /// (nn::Optimizer::load_state_dict); errors name the entry and what differs.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& full);
  /// Collective: rank r writes `dir`/zero-shard-<r>.safetensors (creating `dir` if needed) holding
  /// its share of the state and, as metadata, the world size, its rank, the parameters' shapes and
  /// dtypes, the wrapped optimizer's name and an identifier common to the files of this save. Each
  /// file is written atomically (nn::save_state); a shard of another save left from an earlier, larger
  /// world size is not removed (load_sharded reads only the files of shard 0's save). Error on every
  /// rank when any rank's write fails (the failing rank's exception names the file and the OS reason).
  void save_sharded(const std::string& dir);
  /// Collective: loads what save_sharded(dir) wrote, at this or another world size. Every rank reads
  /// zero-shard-0 (the world size W of the save) and the shards of the save's partition (the
  /// partition rule of the class comment at W) that overlap its own share, and takes its elements
  /// from them. Errors (on every rank, with the message on the rank that found it; nothing changes
  /// on any rank): a missing or unreadable file (named, with the OS reason), a file that is not a
  /// ZeRO shard, a shard of another save or world size than shard 0, parameters whose count, shapes or
  /// dtypes differ from this optimizer's (the first differing parameter named), another optimizer
  /// kind, a state that does not cover the share, and the wrapped optimizer's own checks.
  void load_sharded(const std::string& dir);

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
  std::int64_t consolidations_ = 0;
  std::optional<std::vector<std::pair<std::string, Tensor>>> consolidated_;

  struct Target {
    std::size_t param;
    std::int64_t offset, len;
  };
  std::vector<Target> local_targets() const;
  std::vector<std::pair<std::string, Tensor>> share_records(const char* who) const;
  void load_local(const std::vector<std::pair<std::string, Tensor>>& local, const char* who);
  std::vector<std::pair<std::int64_t, std::int64_t>> old_shares(Dtype d, int world) const;
  void step_impl(bool shadow);
  void check_same_optimizer() const;
  // ---- uneven inputs (Note [Join for ZeRO] in zero.cpp) ----
  friend class Join;
  bool joining_ = false;
  int join_round(bool active);
  void join_finish();
};

}  // namespace xgrad::distributed
