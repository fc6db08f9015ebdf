#include "xgrad/distributed/sync_batch_norm.hpp"

#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/distributed/detail/process_group.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad::distributed {

void SyncBatchNorm::check_input_dim(const Tensor& x) const {
  XGRAD_CHECK(x.dim() >= 2, "SyncBatchNorm: expected at least 2D input (got {}D input of shape {})", x.dim(),
              shape_str(x.shape()));
}

namespace {
std::int64_t g_forward_calls = 0;  // training-mode forwards on this rank, named in timeout messages
}

double SyncBatchNorm::gather_counts_and_check(double local, Dtype dtype) const {
  detail::require_mpi("SyncBatchNorm::forward");
  constexpr int kFields = 7;
  static constexpr const char* kNames[kFields] = {"values per channel",  "num_features", "eps", "momentum", "affine",
                                                  "track_running_stats", "dtype of x"};
  const double mine[kFields] = {local,
                                static_cast<double>(num_features()),
                                eps(),
                                momentum() ? *momentum() : -1.0,
                                affine() ? 1.0 : 0.0,
                                track_running_stats() ? 1.0 : 0.0,
                                dtype == kFloat32 ? 32.0 : 64.0};
  const int n = detail::world_size_raw();
  std::vector<double> all(static_cast<std::size_t>(n * kFields));
  MPI_Request req;
  detail::mpi(MPI_Iallgather, mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, fmt::format("SyncBatchNorm::forward (call {}): MPI_Iallgather of the ranks' batch "
                                           "sizes and options",
                                           ++g_forward_calls));
  const auto show = [](int field, double v) -> std::string {
    if (field == 3 && v < 0) return "unset (cumulative average)";
    if (field == 4 || field == 5) return v != 0 ? "true" : "false";
    if (field == 6) return v == 32.0 ? "float32" : "float64";
    return fmt::format("{}", v);
  };
  double total = 0;
  for (int r = 0; r < n; ++r) {
    const double* theirs = all.data() + static_cast<std::size_t>(r * kFields);
    total += theirs[0];
    for (int f = 1; f < kFields; ++f)
      XGRAD_CHECK(theirs[f] == all[static_cast<std::size_t>(f)],
                  "SyncBatchNorm::forward: the ranks' layers differ in {}: rank 0 has {}, rank {} has {} (every rank "
                  "must build the same SyncBatchNorm)",
                  kNames[f], show(f, all[static_cast<std::size_t>(f)]), r, show(f, theirs[f]));
  }
  return total;
}

Tensor SyncBatchNorm::forward(const Tensor& x) {
  if (!is_training()) return BatchNormBase::forward(x);
  XGRAD_CHECK(x.defined(), "SyncBatchNorm: argument 'x' is an undefined tensor");
  check_input_dim(x);
  const std::int64_t c = num_features();
  XGRAD_CHECK(x.size(1) == c,
              "SyncBatchNorm: argument 'x' has shape {} but must have num_features = {} channels (dim 1)",
              shape_str(x.shape()), c);
  XGRAD_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64,
              "SyncBatchNorm: argument 'x' must be float32 or float64, got {}", x.dtype());
  std::vector<std::int64_t> axes{0};
  Shape per_channel{1, c};  // (1, C, 1, ...): the statistics broadcast over x
  for (std::int64_t d = 2; d < x.dim(); ++d) {
    axes.push_back(d);
    per_channel.push_back(1);
  }
  // Values per channel over all ranks, and every rank's options: all-gathered, so every rank reaches
  // the same verdict (Note [Collective errors and hangs] in distributed.hpp).
  const double local = static_cast<double>(x.numel() / c);
  const double total = gather_counts_and_check(local, x.dtype());
  XGRAD_CHECK(total > 1,
              "SyncBatchNorm: expected more than 1 value per channel when training, got input of shape {} "
              "on this rank and {} values per channel over all ranks",
              shape_str(x.shape()), total);
  const Tensor mean = mul(all_reduce_sum(sum(x, axes)), 1.0 / total);
  const Tensor centred = sub(x, reshape(mean, per_channel));
  const Tensor sq = all_reduce_sum(sum(mul(centred, centred), axes));
  const Tensor var = mul(sq, 1.0 / total);
  Tensor y = mul(centred, reshape(rsqrt(add(var, eps())), per_channel));
  if (affine()) y = add(mul(y, reshape(weight(), per_channel)), reshape(bias(), per_channel));
  if (track_running_stats()) {
    // As BatchNormBase::forward: the count, then the averaging factor (1 / count without a momentum).
    NoGradGuard guard;
    const std::int64_t batches = num_batches_tracked().item<std::int64_t>() + 1;
    const double f = momentum() ? *momentum() : 1.0 / static_cast<double>(batches);
    Tensor rm = running_mean(), rv = running_var(), nb = num_batches_tracked();
    rm.mul_(1.0 - f).add_(mean.detach().to(rm.dtype()), f);
    rv.mul_(1.0 - f).add_(mul(sq.detach(), 1.0 / (total - 1.0)).to(rv.dtype()), f);
    nb.fill_(static_cast<double>(batches));
  }
  return y;
}

}  // namespace xgrad::distributed
