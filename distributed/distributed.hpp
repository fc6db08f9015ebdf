#pragma once
// xgrad::distributed: data-parallel training over MPI (optional component, CMake option
// XGRAD_WITH_MPI, target xgrad::distributed). Every process ("rank") holds a full copy of the model,
// trains on its own share of each batch (DistributedSampler in nn/data.hpp), and averages gradients
// with the others after backward, so all copies take the same optimizer step. Like torch's
// DistributedDataParallel, but explicit: call average_gradients() between backward() and step().
//
//   int main(int argc, char** argv) {
//     xgrad::distributed::MpiContext mpi(argc, argv);
//     auto model = make_model();                                   // any init: rank 0's wins
//     xgrad::distributed::DistributedDataParallel ddp(model);      // checks + broadcasts parameters
//     auto sampler = std::make_shared<nn::DistributedSampler>(n, world_size(), rank());
//     nn::DataLoader loader(dataset, nn::DataLoaderOptions(per_rank_batch), sampler);
//     for (epoch ...) for (auto& b : loader) {
//       model->zero_grad(); loss(model, b).backward(); ddp.average_gradients(); opt.step();
//     }
//     xgrad::distributed::save_on_rank0(*model, "model.safetensors");
//   }
//
// Launch: `mpirun -np 2 ./train` (see docs/distributed.md). All collectives use MPI_COMM_WORLD.
//
// Note [Collective errors and hangs]: a collective completes only when every rank calls it, so an
// error that only some ranks see could leave the others waiting forever. Therefore
//  - checks that depend on data from several ranks (the parameter signature check) are made after
//    exchanging that data, so every rank reaches the same verdict and throws the same xgrad::Error;
//  - local argument checks run before any communication;
//  - when an exception leaves the scope of an MpiContext (stack unwinding), its destructor calls
//    MPI_Abort instead of MPI_Finalize: Open MPI's MPI_Finalize waits for every rank, which would
//    hang if another rank is blocked in a collective. MPI_Abort makes mpirun kill the whole job.
//  - a rank that dies (signal, std::terminate, exit without MPI_Finalize) is noticed by mpirun,
//    which then kills the other ranks and exits non-zero (Open MPI's default; tests/distributed
//    checks it); a rank ended so (SIGTERM) while it waits in a collective prints which (Note [Ended
//    while waiting] in process_group.cpp). MPI's default error handler MPI_ERRORS_ARE_FATAL aborts
//    the job on MPI errors.
//  - a rank that returns from main normally (e.g. after catching an error and returning 1) tells
//    the others as its MpiContext finalises; a rank waiting in a collective that rank never joined
//    aborts the job 5 s later with a message (Note [Leaving] in process_group.cpp);
//  - every collective has a timeout (set_timeout; 5 minutes by default) after which the job aborts
//    with a message naming the rank, the collective and the call (a rank stuck elsewhere);
//  - waiting ranks sleep between progress tests after 20 ms instead of polling a core at 100%, and
//    init() sets Open MPI's mpi_yield_when_idle unless the user set it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::distributed {

class ZeroRedundancyOptimizer;  // zero.hpp

/// Initialises MPI (MPI_Init_thread with MPI_THREAD_SERIALIZED: the thread that called init
/// communicates, and DistributedDataParallel's progress thread while no other xgrad call does; TBB
/// workers never call MPI) unless it already is, with OMPI_MCA_mpi_yield_when_idle=1
/// unless the environment sets it; reads XGRAD_DISTRIBUTED_TIMEOUT; sets up the notices of ranks that
/// leave (collective: every rank calls it). Idempotent.
void init(int& argc, char**& argv);
/// Tells the other ranks this one is leaving, waits until each has left too (or aborts the job, when
/// one is stranded in a collective), then MPI_Finalize; nothing if MPI is not initialised. Every rank
/// must call it.
void finalize();
/// True between init() and finalize().
bool is_initialized();
/// MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job. Use instead of returning from main
/// after an error that other ranks may not have seen (Note [Collective errors and hangs]).
[[noreturn]] void abort(int code = 1);

/// The collective timeout: a collective (barrier, broadcast_, all_reduce_*, DistributedDataParallel's
/// construction and average_gradients) that has not completed after this long aborts the whole job
/// (MPI_Abort) after printing, on stderr, this rank, the collective and the call (Note [Waiting in
/// collectives] in process_group.cpp). Default 5 minutes; the environment variable
/// XGRAD_DISTRIBUTED_TIMEOUT (seconds) sets it at init(). Applies to collectives started afterwards
/// on this rank. Error: a timeout that is not positive.
void set_timeout(std::chrono::milliseconds timeout);
/// The current collective timeout.
std::chrono::milliseconds timeout();

/// RAII: init() in the constructor; finalize() in the destructor, or abort(1) when the destructor
/// runs because an exception is propagating. Create one at the top of main(), before anything else
/// uses MPI. Copying and moving are not allowed.
class MpiContext {
 public:
  MpiContext(int& argc, char**& argv);
  MpiContext();
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

 private:
  int uncaught_at_start_;
  bool owns_;
};

/// This process's rank in MPI_COMM_WORLD, 0 <= rank() < world_size(). Error: MPI not initialised.
int rank();
/// Number of ranks in MPI_COMM_WORLD. Error: MPI not initialised.
int world_size();
/// MPI_Barrier on MPI_COMM_WORLD.
void barrier();

/// Copies rank `root`'s values of every tensor into the others' tensors, in place (MPI_Bcast on the
/// raw bytes; the version counter is bumped as for any in-place write). Collective: every rank passes
/// tensors of the same shapes and dtypes in the same order (not checked here; see
/// DistributedDataParallel for a checked version). Errors: undefined tensor, root out of range.
void broadcast_(const std::vector<Tensor>& tensors, int root = 0);

/// Mean over ranks of one number per rank (MPI_Allreduce of a double), e.g. to log the loss of the
/// whole batch from the ranks' losses of their shares. Collective.
double all_reduce_mean(double value);
/// Maximum over ranks of one number per rank (e.g. the slowest rank's step time). Collective.
double all_reduce_max(double value);

/// The sum over ranks of a floating-point tensor of the same shape and dtype on every rank, as a new
/// tensor (torch.distributed.nn.functional.all_reduce with SUM): out = Σ_r x_r. Differentiable: the
/// gradient of x_r is Σ_r' g_r' (the sum over ranks of the gradients of out), itself an all_reduce_sum,
/// so backward is collective too (every rank must run it, in the same order) and create_graph works.
/// Collective. Errors (local): undefined or non-floating x, MPI not initialised.
Tensor all_reduce_sum(const Tensor& x);

/// How average_gradients() sums across ranks.
enum class ReduceMode {
  /// One MPI_Iallreduce(SUM) per bucket. Every MPI implementation we know of (Open MPI's recursive
  /// doubling, ring, Rabenseifner; MPICH's) hands every rank the same bits, because float addition
  /// is commutative and each partial sum is computed once and then copied; MPI itself only
  /// "recommends" this. Two ranks: a + b on both, exactly.
  allreduce,
  /// MPI_Ireduce(SUM) to rank 0, then MPI_Ibcast: identical bits on every rank by construction, at
  /// about twice the communication time.
  reduce_broadcast,
};

struct DdpOptions {
  /// Gradients are packed into contiguous buckets of at most this many bytes (one dtype per bucket;
  /// a parameter larger than this gets a bucket of its own) and each bucket is reduced with one MPI
  /// call: fewer, larger messages than one call per parameter. torch's default is 25 MiB.
  std::size_t bucket_bytes = std::size_t{4} << 20;
  ReduceMode mode = ReduceMode::allreduce;
  /// Copy rank 0's buffers (BatchNorm's running statistics and counts: Module::named_buffers) to
  /// every rank at construction and at the end of each average_gradients(), so that the next forward
  /// uses rank 0's, as torch's DDP(broadcast_buffers=True) does at the start of each forward. Off: each
  /// rank keeps its own (use SyncBatchNorm to compute the statistics over all ranks instead).
  bool broadcast_buffers = true;
  /// Overlap the all-reduce with backward (Note [Overlapped averaging] in data_parallel.cpp): each
  /// parameter's post-accumulate-grad hook puts its gradient into its bucket, and a bucket whose
  /// gradients are all in is all-reduced (a ring of non-blocking messages, moved on by a progress
  /// thread) while backward goes on; average_gradients() then completes what is still in flight.
  /// Buckets follow the gradients' ready order, taken from rank 0's first backward. Same result, bit
  /// for bit with 2 ranks, as without (with more ranks the ring sums in another order than
  /// MPI_Allreduce: equal to rounding, the same on every rank). ReduceMode::reduce_broadcast always
  /// runs at average_gradients() (no overlap). Measured in docs/distributed.md ("Overlap").
  bool overlap = true;
};

/// Keeps the model replicas of all ranks in step.
/// Construction (collective): checks that every rank passes the same DdpOptions (bucket_bytes,
/// overlap, mode, broadcast_buffers; on a difference EVERY rank throws xgrad::Error naming the option
/// and rank 0's and the other rank's values) and has the same number of parameters (and
/// buffers, for a module), with the same names, shapes and dtypes in the same order (a 64-bit hash and the count are
/// all-gathered; on a mismatch the full descriptions are all-gathered and EVERY rank throws xgrad::Error naming the
/// first differing parameter and both ranks' descriptions), then broadcasts rank 0's parameter
/// values (and buffers, with broadcast_buffers) to all ranks (so ranks may initialise differently).
/// Errors (local, before any communication): null module, an undefined parameter, bucket_bytes 0,
/// MPI not initialised.
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DdpOptions options = {});
  /// A parameter list; names are used only in error messages.
  explicit DistributedDataParallel(std::vector<std::pair<std::string, Tensor>> named_parameters,
                                   DdpOptions options = {});
  explicit DistributedDataParallel(const std::vector<Tensor>& parameters, DdpOptions options = {});
  /// Removes the hooks it registered on the parameters (their .grad stay as they are).
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// Collective, after backward() and before the optimizer step: replaces every parameter's .grad by
  /// the mean over ranks, g <- (sum over ranks of g) / world_size(). An undefined .grad counts as
  /// zeros (and is set, so every rank ends with the same defined gradients). The result is the same
  /// on every rank (see ReduceMode). With each rank's loss the mean over an equal share of the
  /// batch, the result equals the gradient of the mean loss over the whole batch.
  /// With DdpOptions::overlap the reduction of most buckets has already run during backward; this
  /// call completes the rest (a parameter that received no gradient in this backward contributes
  /// its .grad as it is, zeros when undefined) and leaves every .grad a view into its bucket.
  /// Error: called inside no_sync().
  void average_gradients();

  /// RAII: while one lives, backward passes only accumulate gradients locally (no reduction starts);
  /// the first average_gradients() after it averages the accumulated sums (torch's no_sync() for
  /// gradient accumulation). Returned by no_sync().
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp) { ddp_->sync_ = false; }
    ~NoSync() { ddp_->sync_ = true; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* ddp_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  /// Copies rank 0's buffers to every rank now (what average_gradients does with broadcast_buffers).
  /// Collective. Nothing when built from a parameter list.
  void broadcast_buffers();

  const std::vector<Tensor>& parameters() const { return params_; }
  friend class Join;
  /// The wrapped module (null when built from a parameter list).
  const std::shared_ptr<nn::Module>& module() const { return module_; }
  /// Number of gradient buckets (all dtypes), fixed at construction (for benchmarks and tests).
  std::size_t num_buckets() const { return buckets_.size(); }
  /// The parameter indices of each bucket, in launch order (after the first average_gradients with
  /// overlap: rank 0's gradient-ready order of that first backward).
  std::vector<std::vector<std::size_t>> bucket_parameters() const;
  /// Buckets whose gradients were all in before the last average_gradients() (with overlap, the ones
  /// whose all-reduce could start during backward; when it does start depends on the scheduling of
  /// the progress thread).
  std::size_t buckets_ready_in_backward() const { return last_ready_in_backward_; }
  /// Gradients copied into their bucket slot so far. With overlap, backward adds a gradient straight
  /// into its slot once .grad is the slot's view (from the second average_gradients() on, while
  /// .grad is zeroed rather than set to none: Optimizer::zero_grad()'s default); a gradient is copied
  /// in only when .grad is some other tensor (the first step, after zero_grad(true), or one set by
  /// the caller).
  std::size_t gradient_copies() const { return copies_; }

 private:
  void setup(std::vector<std::pair<std::string, Tensor>> named,
             const std::vector<std::pair<std::string, Tensor>>& named_buffers = {});
  struct Bucket {
    Dtype dtype;
    std::vector<std::size_t> params;  // indices into params_
    std::size_t numel = 0;
  };
  std::shared_ptr<nn::Module> module_;
  DdpOptions options_;
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<Tensor> buffers_;  // the module's buffers (none for a parameter list)
  std::int64_t steps_ = 0;       // average_gradients calls, named in timeout messages

  // ---- overlap (Note [Overlapped averaging]) ----
  void make_buckets(const std::vector<std::size_t>& order);
  void on_ready(std::size_t i);
  void put_in_bucket(std::size_t i);
  void launch_complete_buckets();
  void launch_complete_buckets_one();
  bool progress();  // true while a started bucket is still in flight
  bool advance_ring(std::size_t b);
  void progress_loop();
  void stop_progress();
  void finish_bucket(std::size_t b);
  struct Flight;                                        // a bucket's storage and request (data_parallel.cpp)
  std::vector<std::shared_ptr<Flight>> flights_;        // per bucket
  std::vector<std::size_t> slot_bucket_, slot_offset_;  // per parameter: its bucket, element offset
  std::vector<Tensor> views_;                           // per parameter: its slot as a tensor of its shape
  std::vector<unsigned> hook_ids_;
  std::vector<char> ready_;           // per parameter, this round
  std::vector<std::size_t> pending_;  // per bucket: parameters not ready yet
  std::size_t next_launch_ = 0;
  std::size_t last_ready_in_backward_ = 0;
  std::size_t copies_ = 0;
  void set_in_place(bool on);
  std::vector<std::size_t> observed_;  // ready order of the first round
  bool rebuilt_ = false;
  bool sync_ = true;
  // ---- uneven inputs (Note [Join] in data_parallel.cpp) ----
  void sync_round(bool shadow, int root);
  int join_round(bool active);
  void join_finish();
  bool joining_ = false;
  int join_last_root_ = -1;
  // the progress thread, its mutex and condition variable: defined in data_parallel.cpp, so that this
  // header includes no <thread> or <mutex> (Note [Progress thread])
  struct Impl;
  std::unique_ptr<Impl> impl_;
  struct CommHolder;  // the ring's communicator (an MPI_Comm; data_parallel.cpp)
  std::shared_ptr<CommHolder> comm_holder_;
};

/// Uneven inputs (torch.distributed.algorithms.Join for DistributedDataParallel): ranks may run
/// different numbers of training steps. Create one on every rank before the training loop and call
/// finish() on every rank when its loop ends:
///
///   { Join join(ddp);
///     for (auto& batch : my_batches) { zero_grad(); loss(batch).backward(); ddp.average_gradients(); opt.step(); }
///     join.finish(); }
///
/// While a Join lives, each average_gradients() first all-gathers which ranks still train; a rank
/// inside finish() answers that it does not and shadows each remaining average with zero gradients,
/// so the gradient of a step is (sum of the training ranks' gradients) / world_size(), as torch's
/// default (divide_by_initial_world_size). The lowest training rank takes rank 0's part (the bucket
/// order, the buffers broadcast). When every rank is in finish(), the lowest rank of the last step
/// with a training rank broadcasts its parameters and buffers to all, so every replica ends equal
/// (the optimizer state of a rank that finished early is not updated). Collective: every rank creates
/// its Join before its first average_gradients() of the loop. The destructor calls finish() if it was
/// not called (aborting the job if it fails), and does nothing while an exception unwinds.
/// Errors: a second Join on the same object; finish() inside no_sync().
///
/// With a ZeroRedundancyOptimizer (zero.hpp) instead: Join join(zero); ... zero.step() ...;
/// join.finish(). A rank inside finish() shadows each remaining step() with zero gradients and runs
/// the whole step, its share's update included (the others' parameters need it): the gradient of a
/// step is again (sum of the training ranks' gradients) / world_size(), every rank's parameters
/// stay equal at every step, and every share's optimizer state is updated (Note [Join for ZeRO] in
/// zero.cpp).
class Join {
 public:
  explicit Join(DistributedDataParallel& ddp);
  explicit Join(ZeroRedundancyOptimizer& zero);
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;
  /// Shadows the other ranks' gradient averages until every rank has called finish(), then makes
  /// every replica's parameters and buffers equal (see the class comment). Collective.
  void finish();

 private:
  DistributedDataParallel* ddp_ = nullptr;
  ZeroRedundancyOptimizer* zero_ = nullptr;
  int uncaught_at_start_;
  bool finished_ = false;
};

/// Runs `write` on rank 0 only, then waits at a barrier so that when save_on_rank0 returns on any
/// rank the checkpoint is complete (on a shared file system). Collective. An exception from `write`
/// propagates on rank 0 only; let it escape the MpiContext (Note [Collective errors and hangs]).
void save_on_rank0(const std::function<void()>& write);
/// nn::save(module, path) (safetensors) on rank 0 only, then a barrier.
void save_on_rank0(const nn::Module& module, const std::string& path);

}  // namespace xgrad::distributed
