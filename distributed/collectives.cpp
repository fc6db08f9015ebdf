// The free collectives: barrier, broadcast_, all_reduce_mean / _max, the differentiable
// all_reduce_sum, and save_on_rank0. Each starts with detail::require_mpi and completes through the
// waiting of process_group.cpp (Note [Waiting in collectives]).
#include <mpi.h>

#include <algorithm>
#include <climits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/distributed/detail/process_group.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/nn/serialize.hpp"

namespace xgrad::distributed {

namespace {

// MPI counts are int: split larger transfers into pieces (never needed below 2^31 elements).
constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX) / 2;

template <class Fn>
void in_chunks(std::size_t count, std::size_t elem_bytes, unsigned char* data, Fn&& fn) {
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(kMaxCount, count - done);
    fn(data + done * elem_bytes, static_cast<int>(n));
    done += n;
  }
}

// Calls of broadcast_ and all_reduce_sum so far on this rank, named in timeout messages (only the
// thread that communicates counts them).
std::int64_t g_broadcast_calls = 0, g_all_reduce_sum_calls = 0;
}  // namespace

void barrier() {
  detail::require_mpi("distributed::barrier");
  MPI_Request req;
  detail::mpi(MPI_Ibarrier, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, "distributed::barrier");
}

void broadcast_(const std::vector<Tensor>& tensors, int root) {
  detail::require_mpi("distributed::broadcast_");
  const int n = world_size();
  XGRAD_CHECK(root >= 0 && root < n,
              "distributed::broadcast_: argument 'root' ({}) is not a rank of a world of size {}", root, n);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    XGRAD_CHECK(tensors[i].defined(), "distributed::broadcast_: tensor {} is undefined", i);
  const auto start = detail::Clock::now();
  const std::string what = fmt::format("distributed::broadcast_ (call {})", ++g_broadcast_calls);
  detail::arrive_collective(what, start);
  std::vector<MPI_Request> reqs;
  for (const Tensor& t : tensors) {
    auto* data = static_cast<unsigned char*>(t.impl()->storage->data);
    in_chunks(t.nbytes(), 1, data, [&](unsigned char* p, int count) {
      reqs.emplace_back();
      detail::mpi(MPI_Ibcast, p, count, MPI_BYTE, root, MPI_COMM_WORLD, &reqs.back());
    });
  }
  detail::wait_transfer(reqs, fmt::format("{}: MPI_Ibcast of {} tensors", what, tensors.size()), start);
  for (const Tensor& t : tensors) ++t.impl()->storage->version;
}

double all_reduce_mean(double value) {
  detail::require_mpi("distributed::all_reduce_mean");
  double sum = 0.0;
  MPI_Request req;
  detail::mpi(MPI_Iallreduce, &value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, "distributed::all_reduce_mean");
  return sum / world_size();
}

double all_reduce_max(double value) {
  detail::require_mpi("distributed::all_reduce_max");
  double m = 0.0;
  MPI_Request req;
  detail::mpi(MPI_Iallreduce, &value, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, "distributed::all_reduce_max");
  return m;
}

// ---- all_reduce_sum ---------------------------------------------------------------------------

namespace {

Tensor all_reduce_sum_impl(const Tensor& x);

struct AllReduceSumFn : Function<AllReduceSumFn> {
  static constexpr const char* kName = "all_reduce_sum";
  static constexpr bool kDifferentiableBackward = true;  // backward is all_reduce_sum again
  Tensor forward(const Tensor& x) {
    Tensor out = x.clone_data();
    if (out.numel() == 0) return out;
    const auto start = detail::Clock::now();
    const std::string what = fmt::format("distributed::all_reduce_sum (call {})", ++g_all_reduce_sum_calls);
    auto* bytes = static_cast<unsigned char*>(out.impl()->storage->data);
    const MPI_Datatype type = detail::mpi_type(out.dtype());
    detail::arrive_collective(what, start);
    std::vector<MPI_Request> reqs;
    in_chunks(static_cast<std::size_t>(out.numel()), dtype_size(out.dtype()), bytes, [&](unsigned char* p, int count) {
      reqs.emplace_back();
      detail::mpi(MPI_Iallreduce, MPI_IN_PLACE, p, count, type, MPI_SUM, MPI_COMM_WORLD, &reqs.back());
    });
    detail::wait_transfer(reqs, fmt::format("{}: MPI_Iallreduce of {} elements", what, out.numel()), start);
    return out;
  }
  Tensors backward(const Tensors& grads) { return {all_reduce_sum_impl(grads[0])}; }
};

Tensor all_reduce_sum_impl(const Tensor& x) { return apply<AllReduceSumFn>(x); }

}  // namespace

Tensor all_reduce_sum(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "distributed::all_reduce_sum: argument 'x' is undefined");
  XGRAD_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64,
              "distributed::all_reduce_sum: argument 'x' must be float32 or float64, got {} (shape {})", x.dtype(),
              shape_str(x.shape()));
  detail::require_mpi("distributed::all_reduce_sum");
  return all_reduce_sum_impl(x);
}

// ---- checkpoints ------------------------------------------------------------------------------

void save_on_rank0(const std::function<void()>& write) {
  detail::require_mpi("distributed::save_on_rank0");
  XGRAD_CHECK(static_cast<bool>(write), "distributed::save_on_rank0: argument 'write' is empty");
  if (rank() == 0) write();
  barrier();
}

void save_on_rank0(const nn::Module& module, const std::string& path) {
  save_on_rank0([&] { nn::save(module, path); });
}

}  // namespace xgrad::distributed
