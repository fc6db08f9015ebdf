#include "xgrad/distributed/zero.hpp"

#include <climits>
#include <cstring>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/distributed/detail/process_group.hpp"
#include "xgrad/distributed/distributed.hpp"

namespace xgrad::distributed {

namespace {
// Note [Ring reduce-scatter]: Open MPI 4.1's MPI_Reduce_scatter of a 5.8M-parameter MLP's gradients at
// 2 ranks took about twice as long as an MPI_Allreduce of all of them (bench/ddp_allreduce.cpp;
// bench/results/tuning_notes.md, "ZeRO's ring reduce-scatter"),
// so step() runs the ring algorithm itself: in step s = 0 .. W-2 rank r sends its running sum of
// share (r - s - 1) mod W to rank r + 1 and adds what rank r - 1 sends of share (r - s - 2) mod W into
// its own; after W - 1 steps share r holds the sum of every rank's on rank r. Each element is summed
// once along the ring, so the result does not depend on timing; with 2 ranks it is a + b, the sum
// MPI_Allreduce gives, bit for bit. Each step's messages are non-blocking and completed against the
// step()'s deadline (Note [Waiting in collectives] in process_group.cpp).
template <class T>
void ring_reduce_scatter(T* data, const std::vector<int>& counts, const std::vector<int>& displs, int me, int n,
                         std::vector<T>& scratch, const std::string& what, detail::Clock::time_point start) {
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int s = 0; s + 1 < n; ++s) {
    const auto send = static_cast<std::size_t>(((me - s - 1) % n + n) % n);
    const auto recv = static_cast<std::size_t>(((me - s - 2) % n + n) % n);
    scratch.resize(static_cast<std::size_t>(counts[recv]));
    std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
    detail::mpi(MPI_Irecv, scratch.data(), counts[recv], type, prev, 7100 + s, MPI_COMM_WORLD, &reqs[0]);
    detail::mpi(MPI_Isend, data + displs[send], counts[send], type, next, 7100 + s, MPI_COMM_WORLD, &reqs[1]);
    detail::wait_transfer(
        reqs, fmt::format("{}: MPI_Isend/MPI_Irecv of the ring reduce-scatter (step {} of {})", what, s + 1, n - 1),
        start);
    T* own = data + displs[recv];
    for (int e = 0; e < counts[recv]; ++e) own[e] += scratch[static_cast<std::size_t>(e)];
  }
}
}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params, Factory make_optimizer)
    : params_(std::move(params)) {
  constexpr const char* op = "ZeroRedundancyOptimizer";
  XGRAD_CHECK(!params_.empty(), "{}: argument 'params' is empty", op);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    XGRAD_CHECK(params_[i].defined(), "{}: parameter {} is undefined", op, i);
    XGRAD_CHECK(params_[i].dtype() == kFloat32 || params_[i].dtype() == kFloat64,
                "{}: parameter {} must be float32 or float64, got {}", op, i, params_[i].dtype());
  }
  XGRAD_CHECK(static_cast<bool>(make_optimizer), "{}: argument 'make_optimizer' is empty", op);
  XGRAD_CHECK(is_initialized(), "{}: MPI is not initialised (create an xgrad::distributed::MpiContext in main first)",
              op);
  // The same parameters everywhere, rank 0's values: DistributedDataParallel's checks and broadcast.
  {
    DdpOptions check_only;  // no hooks, no communicator: only the check and the broadcast
    check_only.overlap = false;
    DistributedDataParallel check(params_, check_only);
  }
  const int n = world_size(), me = rank();
  for (Dtype d : {kFloat32, kFloat64}) {
    Flat f{d, {}, std::vector<int>(static_cast<std::size_t>(n)), std::vector<int>(static_cast<std::size_t>(n)), {}, 0};
    std::int64_t total = 0;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].dtype() == d) {
        f.params.push_back(i);
        total += params_[i].numel();
      }
    if (total == 0) continue;
    XGRAD_CHECK(total <= INT_MAX, "{}: the {} parameters have {} elements, beyond MPI's int counts", op, d, total);
    for (int r = 0; r < n; ++r) {
      const std::int64_t lo = total * r / n, hi = total * (r + 1) / n;
      f.displs[static_cast<std::size_t>(r)] = static_cast<int>(lo);
      f.counts[static_cast<std::size_t>(r)] = static_cast<int>(hi - lo);
    }
    const std::int64_t lo = f.displs[static_cast<std::size_t>(me)], hi = lo + f.counts[static_cast<std::size_t>(me)];
    f.first_piece = pieces_.size();
    std::int64_t at = 0;  // flat offset of the current parameter
    for (std::size_t i : f.params) {
      const std::int64_t m = params_[i].numel(), a = std::max(lo, at), b = std::min(hi, at + m);
      if (a < b) {
        f.pieces.push_back({i, a - at, b - a});
        Tensor piece = Tensor::empty({b - a}, d);
        std::memcpy(piece.impl()->storage->data,
                    static_cast<const unsigned char*>(params_[i].impl()->storage->data) +
                        static_cast<std::size_t>(a - at) * dtype_size(d),
                    static_cast<std::size_t>(b - a) * dtype_size(d));
        pieces_.push_back(piece.set_requires_grad());
      }
      at += m;
    }
    flats_.push_back(std::move(f));
  }
  if (!pieces_.empty()) {
    local_ = make_optimizer(pieces_);
    XGRAD_CHECK(local_ != nullptr, "{}: 'make_optimizer' returned null", op);
    XGRAD_CHECK(local_->name() != "LBFGS",
                "{}: LBFGS is not elementwise (its directions use whole-vector dot products); shard an elementwise "
                "optimizer (SGD, Adam, AdamW, RMSprop, Adagrad)",
                op);
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  NoGradGuard guard;
  for (Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none || p.grad().requires_grad())
      p.set_grad(set_to_none ? Tensor() : Tensor::zeros(p.shape(), p.dtype()));
    else
      p.grad().zero_();
  }
}

void ZeroRedundancyOptimizer::step() {
  XGRAD_CHECK(is_initialized(), "ZeroRedundancyOptimizer::step: MPI is not initialised");
  detail::quiesce();
  const int n = world_size(), me = rank();
  ++steps_;
  for (const Flat& f : flats_)
    for (std::size_t i : f.params) {
      const Tensor g = params_[i].grad();
      XGRAD_CHECK(!g.defined() || (g.dtype() == f.dtype && g.numel() == params_[i].numel()),
                  "ZeroRedundancyOptimizer::step: parameter {} ({}, {}) has a gradient of shape {} and dtype {}", i,
                  shape_str(params_[i].shape()), f.dtype, shape_str(g.shape()), g.dtype());
    }
  const auto start = detail::Clock::now();
  const std::string what = fmt::format("ZeroRedundancyOptimizer::step (call {})", steps_);
  detail::arrive_collective(what, start);
  // 1. the sums of this rank's share of the gradients, divided by the world size, into the pieces
  for (const Flat& f : flats_) {
    dispatch(f.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::size_t total = static_cast<std::size_t>(f.displs.back()) + static_cast<std::size_t>(f.counts.back());
      std::vector<T> packed(total), scratch;
      std::size_t off = 0;
      for (std::size_t i : f.params) {
        const auto m = static_cast<std::size_t>(params_[i].numel());
        const Tensor g = params_[i].grad();
        if (g.defined())
          std::memcpy(packed.data() + off, g.data<T>(), m * sizeof(T));
        else
          std::fill(packed.data() + off, packed.data() + off + m, T(0));
        off += m;
      }
      ring_reduce_scatter(packed.data(), f.counts, f.displs, me, n, scratch, fmt::format("{} ({})", what, f.dtype),
                          start);
      const T* mine = packed.data() + f.displs[static_cast<std::size_t>(me)];
      const T world = static_cast<T>(n);
      std::size_t at = 0;
      for (std::size_t k = 0; k < f.pieces.size(); ++k) {
        Tensor& piece = pieces_[f.first_piece + k];
        const auto m = static_cast<std::size_t>(f.pieces[k].len);
        Tensor g = piece.grad();
        const bool in_place = g.defined() && g.impl()->storage.use_count() == 1;
        if (!in_place) g = Tensor::empty(piece.shape(), f.dtype);
        T* dst = g.data<T>();
        for (std::size_t e = 0; e < m; ++e) dst[e] = mine[at + e] / world;  // as average_gradients
        if (in_place)
          ++g.impl()->storage->version;
        else
          piece.set_grad(g);
        at += m;
      }
    });
  }
  // 2. the local step
  if (local_) local_->step();
  // 3. every share's new values into every rank's parameters
  for (const Flat& f : flats_) {
    dispatch(f.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::size_t total = static_cast<std::size_t>(f.displs.back()) + static_cast<std::size_t>(f.counts.back());
      std::vector<T> all(total);
      auto off = static_cast<std::size_t>(f.displs[static_cast<std::size_t>(me)]);
      for (std::size_t k = 0; k < f.pieces.size(); ++k) {
        const auto m = static_cast<std::size_t>(f.pieces[k].len);
        std::memcpy(all.data() + off, pieces_[f.first_piece + k].data<T>(), m * sizeof(T));
        off += m;
      }
      MPI_Request req;
      detail::mpi(MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), f.counts.data(), f.displs.data(),
                  detail::mpi_type(f.dtype), MPI_COMM_WORLD, &req);
      detail::wait_transfer(req, fmt::format("{}: MPI_Iallgatherv of the {} parameters", what, f.dtype), start);
      off = 0;
      for (std::size_t i : f.params) {
        const auto m = static_cast<std::size_t>(params_[i].numel());
        std::memcpy(params_[i].data<T>(), all.data() + off, m * sizeof(T));
        ++params_[i].impl()->storage->version;
        off += m;
      }
    });
  }
}

std::size_t ZeroRedundancyOptimizer::local_state_bytes() const {
  if (!local_) return 0;
  std::size_t bytes = 0;
  for (const auto& entry : local_->state_dict())
    if (entry.first.rfind("state.", 0) == 0) bytes += entry.second.nbytes();
  return bytes;
}

}  // namespace xgrad::distributed
