// DistributedDataParallel: the parameter check and broadcast at construction, the gradient buckets,
// their ring all-reduce overlapped with backward through post-accumulate-grad hooks, and the
// progress thread that moves the rings on (Notes [Overlapped averaging], [Ring all-reduce],
// [Progress thread]). The thread and its lock live in DistributedDataParallel::Impl, here.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/from_blob.hpp"
#include "xgrad/distributed/detail/process_group.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/zero.hpp"

namespace xgrad::distributed {

namespace {

std::string describe(const std::string& name, const Tensor& t) {
  return fmt::format("'{}' {} {}", name, shape_str(t.shape()), t.dtype());
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// DistributedDataParallel objects whose progress thread runs (Note [Progress thread]).
std::mutex g_progress_mutex;
std::vector<std::function<void()>*> g_progress_stoppers;
}  // namespace

namespace detail {
void quiesce() {
  std::vector<std::function<void()>*> stoppers;
  {
    std::lock_guard<std::mutex> lock(g_progress_mutex);
    stoppers = g_progress_stoppers;
  }
  for (auto* stop : stoppers) (*stop)();
}
}  // namespace detail

// ---- DistributedDataParallel ------------------------------------------------------------------

struct DistributedDataParallel::CommHolder {
  MPI_Comm comm = MPI_COMM_NULL;
  CommHolder() = default;
  CommHolder(const CommHolder&) = delete;
  CommHolder& operator=(const CommHolder&) = delete;
  ~CommHolder() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && finalized == 0) detail::mpi(MPI_Comm_free, &comm);
  }
};

// The progress thread (Note [Progress thread]). `mutex` guards `stop` and the object's pending_ and
// next_launch_, which the hooks and the thread share; `stopper` is what quiesce() calls.
struct DistributedDataParallel::Impl {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::function<void()> stopper;
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DdpOptions options)
    : module_(std::move(module)), options_(options), impl_(std::make_unique<Impl>()) {
  XGRAD_CHECK(module_ != nullptr, "DistributedDataParallel: argument 'module' is null");
  setup(module_->named_parameters(), module_->named_buffers());
}

DistributedDataParallel::DistributedDataParallel(std::vector<std::pair<std::string, Tensor>> named_parameters,
                                                 DdpOptions options)
    : options_(options), impl_(std::make_unique<Impl>()) {
  setup(std::move(named_parameters));
}

namespace {
std::vector<std::pair<std::string, Tensor>> numbered(const std::vector<Tensor>& params) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(const std::vector<Tensor>& parameters, DdpOptions options)
    : DistributedDataParallel(numbered(parameters), options) {}

void DistributedDataParallel::setup(std::vector<std::pair<std::string, Tensor>> named,
                                    const std::vector<std::pair<std::string, Tensor>>& named_buffers) {
  // Local checks first: they fail on the ranks that see them before any collective is entered.
  XGRAD_CHECK(options_.bucket_bytes > 0, "DistributedDataParallel: option 'bucket_bytes' must be positive, got 0");
  for (const auto& [name, t] : named)
    XGRAD_CHECK(t.defined(), "DistributedDataParallel: parameter '{}' is undefined", name);
  detail::require_mpi("DistributedDataParallel");

  // 1. Same options and parameters everywhere? Exchange the options and (count, hash), then details
  //    only on a mismatch, so every rank reaches the same verdict. Options that differ would make the
  //    ranks run different collectives (other bucket sizes, a ring against an MPI_Iallreduce).
  std::string signature;
  for (const auto& [name, t] : named) signature += describe(name, t) + "\n";
  for (const auto& [name, t] : named_buffers) signature += "buffer " + describe(name, t) + "\n";
  constexpr int kFields = 6;
  static constexpr const char* kOptionNames[] = {"bucket_bytes", "overlap", "mode", "broadcast_buffers"};
  const std::uint64_t mine[kFields] = {options_.bucket_bytes,
                                       options_.overlap ? 1u : 0u,
                                       static_cast<std::uint64_t>(options_.mode),
                                       options_.broadcast_buffers ? 1u : 0u,
                                       named.size(),
                                       fnv1a(signature)};
  const auto option_str = [](int k, std::uint64_t v) -> std::string {
    if (k == 1 || k == 3) return v != 0 ? "true" : "false";
    if (k == 2) return v == 0 ? "ReduceMode::allreduce" : "ReduceMode::reduce_broadcast";
    return std::to_string(v);
  };
  const int n = world_size(), me = rank();
  std::vector<std::uint64_t> all(kFields * static_cast<std::size_t>(n));
  const char* what = "DistributedDataParallel (the parameter check)";
  MPI_Request req;
  detail::mpi(MPI_Iallgather, mine, kFields, MPI_UINT64_T, all.data(), kFields, MPI_UINT64_T, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, what);
  for (int k = 0; k < 4; ++k)
    for (int r = 1; r < n; ++r)
      if (all[kFields * r + k] != all[k])
        throw Error(
            fmt::format("DistributedDataParallel: the ranks' options differ (every rank must pass the same "
                        "DdpOptions): option '{}' is {} on rank 0 and {} on rank {} (seen on rank {})",
                        kOptionNames[k], option_str(k, all[k]), option_str(k, all[kFields * r + k]), r, me));
  int bad = -1;
  for (int r = 1; r < n && bad < 0; ++r)
    if (all[kFields * r + 4] != all[4] || all[kFields * r + 5] != all[5]) bad = r;
  if (bad >= 0) {
    const int len = static_cast<int>(signature.size());
    std::vector<int> lens(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n));
    detail::mpi(MPI_Iallgather, &len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
    detail::wait_collective(req, what);
    int total = 0;
    for (int r = 0; r < n; ++r) {
      offs[r] = total;
      total += lens[r];
    }
    std::string gathered(static_cast<std::size_t>(total), '\0');
    detail::mpi(MPI_Iallgatherv, signature.data(), len, MPI_CHAR, gathered.data(), lens.data(), offs.data(), MPI_CHAR,
                MPI_COMM_WORLD, &req);
    detail::wait_collective(req, what);
    const auto lines_of = [&](int r) {
      return split_lines(gathered.substr(static_cast<std::size_t>(offs[r]), static_cast<std::size_t>(lens[r])));
    };
    const auto ref = lines_of(0), other = lines_of(bad);
    std::size_t k = 0;
    while (k < ref.size() && k < other.size() && ref[k] == other[k]) ++k;
    const std::string a = k < ref.size() ? ref[k] : std::string("(none)");
    const std::string b = k < other.size() ? other[k] : std::string("(none)");
    throw Error(fmt::format(
        "DistributedDataParallel: the ranks' parameters differ (every rank must build the same model): rank 0 has "
        "{} parameters, rank {} has {}; first difference at parameter {}: rank 0 {} vs rank {} {} (seen on rank {})",
        ref.size(), bad, other.size(), k, a, bad, b, me));
  }

  for (auto& [name, t] : named) {
    names_.push_back(name);
    params_.push_back(t);
  }
  // 2. Rank 0's values everywhere.
  for (const auto& nb : named_buffers)
    if (nb.second.defined()) buffers_.push_back(nb.second);
  broadcast_(params_, 0);
  if (options_.broadcast_buffers) broadcast_buffers();

  // 3. Buckets, in parameter order until the first average_gradients() with overlap.
  std::vector<std::size_t> order(params_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  make_buckets(order);
  impl_->stopper = [this] { stop_progress(); };
  if (options_.overlap) {
    comm_holder_ = std::make_shared<CommHolder>();
    MPI_Request dup_req;
    detail::mpi(MPI_Comm_idup, MPI_COMM_WORLD, &comm_holder_->comm,
                &dup_req);  // the ring's messages (Note [Ring all-reduce])
    detail::wait_collective(dup_req, "DistributedDataParallel (construction): MPI_Comm_idup");
  }
  if (options_.overlap)
    for (std::size_t i = 0; i < params_.size(); ++i)
      hook_ids_.push_back(params_[i].requires_grad()
                              ? params_[i].register_post_accumulate_grad_hook([this, i](Tensor&) { on_ready(i); })
                              : ~0u);
}

DistributedDataParallel::~DistributedDataParallel() {
  stop_progress();
  set_in_place(false);  // a .grad that outlives this object is an ordinary tensor again
  comm_holder_.reset();
  for (std::size_t i = 0; i < hook_ids_.size(); ++i)
    if (hook_ids_[i] != ~0u) params_[i].remove_post_accumulate_grad_hook(hook_ids_[i]);
}

// Note [Overlapped averaging]: every parameter's gradient has a slot in one bucket's storage (a 1-d
// tensor; slots 64-byte aligned), and after averaging its .grad is a view of that slot (from_blob
// sharing the bucket's storage): no copy out. With DdpOptions::overlap, the views are marked
// (set_accumulate_in_place) from the end of each average_gradients() until their parameter's
// hook runs, so the next backward adds each gradient straight into its slot (no copy in, as torch's
// AccumulateGrad adds into a bucket view); a post-accumulate-grad hook on each parameter then finds
// it there, or copies it in when .grad was another tensor (the first step, after zero_grad(true)),
// makes .grad the view and unmarks it: a bucket whose all-reduce may be in flight is never written;
// when a bucket's last parameter is in, the bucket, and every complete one after the last
// started, starts its ring all-reduce (Note [Ring all-reduce]; in bucket order, the same on every
// rank), moved on by the progress thread (Note [Progress thread]), the division by the world size
// folded into it. average_gradients() puts in the parameters that got no gradient (their
// .grad as it is, zeros when undefined), starts the rest and moves every ring on until done
// (wait_until, with the collective timeout and the stranded-rank rule). The first call also rebuilds the buckets in
// rank 0's ready order of that backward (broadcast, so all ranks agree), so that from the second step on the buckets
// fill in the order backward produces them, the last layers' first. With 2 ranks every element is a + b, then divided
// by 2, as without overlap: the same bits. Hooks run on the thread that called backward and make no MPI call: a
// progress thread starts and tests the buckets (Note [Progress thread]).
struct DistributedDataParallel::Flight {
  Tensor storage;
  bool launched = false, done = false;
  // Note [Ring all-reduce]: the step of the ring, its two requests, the received chunk
  int step = 0;
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::vector<unsigned char> scratch;
};

// Note [Ring all-reduce]: an overlapped bucket is summed by the ring algorithm over non-blocking
// point-to-point messages on DDP's own communicator, one step at a time (advance_ring): Open MPI's
// MPI_Iallreduce (libnbc) measured slower than its blocking MPI_Allreduce, over the link of
// bench/run_ddp_netns.sh and on shared memory (bench/results/tuning_notes.md, "DDP's ring
// all-reduce"), and a
// blocking call in the progress thread would poll a core that backward needs. The bucket is cut
// into W chunks; in reduce-scatter step s = 0 .. W-2 rank r sends chunk (r - s) mod W to rank r + 1
// and adds chunk (r - s - 1) mod W from rank r - 1 into its own; then rank r holds the sum of chunk
// (r + 1) mod W, and W - 1 all-gather steps pass the sums on (rank r sends (r + 1 - s) mod W, receives
// (r - s) mod W in place). Each element is summed once along the ring, so every rank gets the same
// bits; with 2 ranks the sum is a + b, MPI_Allreduce's, so overlap changes no bit. The division by
// the world size is folded into the last reduce-scatter step, (sum + last) / W: the same operations
// as summing, then dividing, without a pass of its own. The bytes each rank sends, 2 (W-1)/W of the
// bucket, are the ring bound.

void DistributedDataParallel::make_buckets(const std::vector<std::size_t>& order) {
  buckets_.clear();
  struct Open {
    Bucket b;
    bool used = false;
  };
  Open open[2] = {{{kFloat32, {}, 0}, false}, {{kFloat64, {}, 0}, false}};
  for (std::size_t i : order) {
    if (params_[i].numel() == 0) continue;
    const int k = params_[i].dtype() == kFloat32 ? 0 : 1;
    Open& o = open[k];
    const std::size_t cap = std::max<std::size_t>(1, options_.bucket_bytes / dtype_size(o.b.dtype));
    const auto m = static_cast<std::size_t>(params_[i].numel());
    if (!o.b.params.empty() && o.b.numel + m > cap) {
      buckets_.push_back(o.b);
      o.b = Bucket{o.b.dtype, {}, 0};
    }
    o.b.params.push_back(i);
    o.b.numel += m;
  }
  for (Open& o : open)
    if (!o.b.params.empty()) buckets_.push_back(o.b);
  // storage and slots
  slot_bucket_.assign(params_.size(), 0);
  slot_offset_.assign(params_.size(), 0);
  views_.assign(params_.size(), Tensor());
  flights_.clear();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Dtype d = buckets_[b].dtype;
    const std::size_t align = 64 / dtype_size(d);
    std::size_t off = 0;
    for (std::size_t i : buckets_[b].params) {
      slot_bucket_[i] = b;
      slot_offset_[i] = off;
      off += (static_cast<std::size_t>(params_[i].numel()) + align - 1) / align * align;
    }
    XGRAD_CHECK(off <= static_cast<std::size_t>(INT_MAX),
                "DistributedDataParallel: a bucket of {} elements exceeds MPI's int counts (a parameter of more than "
                "2^31 elements)",
                off);
    auto f = std::make_shared<Flight>();
    f->storage = Tensor::zeros({static_cast<std::int64_t>(off)}, d);
    const std::shared_ptr<TensorImpl> owner = f->storage.impl();
    auto* base = static_cast<unsigned char*>(owner->storage->data);
    for (std::size_t i : buckets_[b].params)
      views_[i] = from_blob(base + slot_offset_[i] * dtype_size(d), params_[i].shape(), d, owner);
    flights_.push_back(std::move(f));
  }
  ready_.assign(params_.size(), 0);
  pending_.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  next_launch_ = 0;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_parameters() const {
  std::vector<std::vector<std::size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void DistributedDataParallel::put_in_bucket(std::size_t i) {
  if (params_[i].numel() == 0) return;
  const Tensor& view = views_[i];
  const Tensor g = params_[i].grad();
  if (g.defined() && g.impl()->storage == view.impl()->storage) return;  // already in its slot
  void* slot = view.impl()->storage->data;                               // from_blob's storage: the slot itself
  if (g.defined()) {
    XGRAD_CHECK(g.dtype() == params_[i].dtype() && g.numel() == params_[i].numel(),
                "DistributedDataParallel::average_gradients: parameter '{}' ({}, {}) has a gradient of shape {} and "
                "dtype {}",
                names_[i], shape_str(params_[i].shape()), params_[i].dtype(), shape_str(g.shape()), g.dtype());
    std::memcpy(slot, g.impl()->storage->data, g.nbytes());
    ++copies_;
  } else {
    std::memset(slot, 0, view.nbytes());
  }
  ++view.impl()->storage->version;
  params_[i].set_grad(view);
}

void DistributedDataParallel::on_ready(std::size_t i) {
  if (!sync_) return;
  XGRAD_CHECK(!ready_[i],
              "DistributedDataParallel: parameter '{}' received a second gradient before average_gradients() (two "
              "backward passes without averaging in between: accumulate inside no_sync())",
              names_[i]);
  if (!rebuilt_) observed_.push_back(i);
  put_in_bucket(i);  // a slot of a bucket not complete yet: nobody else touches it
  // From now until average_gradients() ends, the slot may be in flight: a second gradient must not
  // be added into it (the check above refuses it, after backward has added it elsewhere).
  if (params_[i].numel() > 0) set_accumulate_in_place(params_[i], views_[i], false);
  ready_[i] = 1;
  const std::size_t b = slot_bucket_[i];
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    --pending_[b];
  }
  if (options_.mode != ReduceMode::allreduce) return;
  if (detail::thread_level() >= MPI_THREAD_SERIALIZED) {
    if (!impl_->thread.joinable()) {
      impl_->stop = false;
      impl_->thread = std::thread([this] { progress_loop(); });
      std::lock_guard<std::mutex> lock(g_progress_mutex);
      g_progress_stoppers.push_back(&impl_->stopper);
    }
    impl_->cv.notify_one();
    return;
  }
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  if (main_thread == 0) return;  // below MPI_THREAD_SERIALIZED: average_gradients() starts everything
  launch_complete_buckets();
  progress();
}

// Note [Progress thread]: Open MPI moves a non-blocking collective on only inside MPI calls, and
// backward makes none between two parameters' hooks (a large layer's gradient can take as long as
// the whole all-reduce). So once backward completes its first bucket, a thread of this object starts
// the complete buckets' rings in order and moves them on every 100 µs (or when a hook signals a new
// complete bucket), sleeping in between, dividing each finished bucket by the world size. It is the only thread in MPI
// meanwhile: MPI is initialised with MPI_THREAD_SERIALIZED, and every public function of
// xgrad::distributed (require_mpi) first stops such threads (quiesce), as average_gradients() does
// before it waits for the rest itself. Without MPI_THREAD_SERIALIZED, the hooks start and move the
// rings themselves (progress only at hooks).
void DistributedDataParallel::progress_loop() {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  for (;;) {
    while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
      lock.unlock();
      launch_complete_buckets_one();
      lock.lock();
    }
    lock.unlock();
    const bool in_flight = progress();
    lock.lock();
    if (impl_->stop) return;
    const bool can_launch = next_launch_ < buckets_.size() && pending_[next_launch_] == 0;
    if (can_launch) continue;
    if (in_flight)
      impl_->cv.wait_for(lock, std::chrono::microseconds(100));  // longer waits measured the same
    else
      impl_->cv.wait(lock,
                     [&] { return impl_->stop || (next_launch_ < buckets_.size() && pending_[next_launch_] == 0); });
    if (impl_->stop) return;
  }
}

void DistributedDataParallel::stop_progress() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->cv.notify_one();
  impl_->thread.join();
  impl_->stop = false;
  std::lock_guard<std::mutex> lock(g_progress_mutex);
  g_progress_stoppers.erase(std::remove(g_progress_stoppers.begin(), g_progress_stoppers.end(), &impl_->stopper),
                            g_progress_stoppers.end());
}

// Starts bucket next_launch_ (complete) and advances next_launch_.
void DistributedDataParallel::launch_complete_buckets_one() {
  Flight& f = *flights_[next_launch_];
  f.launched = true;
  f.step = 0;
  advance_ring(next_launch_);
  ++next_launch_;
}

// Moves bucket b's ring on as far as its messages allow (Note [Ring all-reduce]); true when done.
bool DistributedDataParallel::advance_ring(std::size_t b) {
  Flight& f = *flights_[b];
  if (f.done) return true;
  const int n = detail::world_size_raw(), me = detail::rank_raw();
  const Dtype d = f.storage.dtype();
  const std::size_t es = dtype_size(d);
  const auto count = static_cast<std::int64_t>(f.storage.numel());
  const auto lo = [&](int c) { return count * c / n; };
  auto* base = static_cast<unsigned char*>(f.storage.impl()->storage->data);
  const int tag = static_cast<int>(b % 30000);
  for (;;) {
    if (f.reqs[0] != MPI_REQUEST_NULL || f.reqs[1] != MPI_REQUEST_NULL) {
      int flag = 0;
      detail::mpi(MPI_Testall, 2, f.reqs, &flag, MPI_STATUSES_IGNORE);
      if (flag == 0) return false;
      if (f.step < n - 1) {  // a reduce-scatter step: add the received chunk into ours
        const int c = ((me - f.step - 1) % n + n) % n;
        const bool last = f.step == n - 2;  // the chunk's sum is complete: divide it here
        dispatch(d, [&](auto tag_t) {
          using T = typename decltype(tag_t)::type;
          T* own = reinterpret_cast<T*>(base) + lo(c);
          const T* got = reinterpret_cast<const T*>(f.scratch.data());
          const std::int64_t m = lo(c + 1) - lo(c);
          const T world = static_cast<T>(n);
          if (last)
            for (std::int64_t e = 0; e < m; ++e) own[e] = (own[e] + got[e]) / world;
          else
            for (std::int64_t e = 0; e < m; ++e) own[e] += got[e];
        });
      }
      ++f.step;
    }
    if (f.step >= 2 * (n - 1)) {
      // divided in the last reduce-scatter step (nothing to divide with one rank)
      ++f.storage.impl()->storage->version;
      f.done = true;
      return true;
    }
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    int send_c = 0, recv_c = 0;
    void* recv_to = nullptr;
    if (f.step < n - 1) {
      send_c = ((me - f.step) % n + n) % n;
      recv_c = ((me - f.step - 1) % n + n) % n;
      f.scratch.resize(static_cast<std::size_t>(lo(recv_c + 1) - lo(recv_c)) * es);
      recv_to = f.scratch.data();
    } else {
      const int s = f.step - (n - 1);
      send_c = ((me + 1 - s) % n + n) % n;
      recv_c = ((me - s) % n + n) % n;
      recv_to = base + static_cast<std::size_t>(lo(recv_c)) * es;
    }
    detail::mpi(MPI_Irecv, recv_to, static_cast<int>(lo(recv_c + 1) - lo(recv_c)), detail::mpi_type(d), prev, tag,
                comm_holder_->comm, &f.reqs[0]);
    detail::mpi(MPI_Isend, base + static_cast<std::size_t>(lo(send_c)) * es,
                static_cast<int>(lo(send_c + 1) - lo(send_c)), detail::mpi_type(d), next, tag, comm_holder_->comm,
                &f.reqs[1]);
  }
}

void DistributedDataParallel::launch_complete_buckets() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch_complete_buckets_one();
}

bool DistributedDataParallel::progress() {
  bool in_flight = false;
  for (std::size_t b = 0; b < next_launch_; ++b) {
    Flight& f = *flights_[b];
    if (!f.launched || f.done) continue;
    if (!advance_ring(b)) in_flight = true;
  }
  return in_flight;
}

void DistributedDataParallel::finish_bucket(std::size_t b) {
  Flight& f = *flights_[b];
  const int n = detail::world_size_raw();  // no require_mpi here: the progress thread runs this
  dispatch(f.storage.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = f.storage.data<T>();
    const T world = static_cast<T>(n);
    const std::int64_t m = f.storage.numel();
    for (std::int64_t k = 0; k < m; ++k) p[k] = p[k] / world;
  });
  ++f.storage.impl()->storage->version;
  f.done = true;
}

void DistributedDataParallel::average_gradients() {
  detail::require_mpi("DistributedDataParallel::average_gradients");
  XGRAD_CHECK(sync_,
              "DistributedDataParallel::average_gradients: called inside no_sync() (leave the no_sync scope "
              "first: the next average_gradients() averages the accumulated gradients)");
  const int root = joining_ ? join_round(true) : 0;
  sync_round(false, root);
}

// Note [Join]: with a Join alive on every rank, each average_gradients() first all-gathers one flag
// per rank (1: this rank trains), and a rank that left its loop (Join::finish) answers 0 in a loop
// of its own; while any rank trains, the finished ones shadow its gradient average with zero
// gradients (sync_round(true)): the same collectives, so nobody waits for a rank that ran out of
// batches. The divisor stays the world size (torch's divide_by_initial_world_size). Rank 0's role as
// the source of the bucket order and of the buffers passes to the lowest rank still training, and
// when every rank has finished, that rank of the last round sends its parameters and buffers to all.
int DistributedDataParallel::join_round(bool active) {
  const int n = detail::world_size_raw();
  const int flag = active ? 1 : 0;
  std::vector<int> flags(static_cast<std::size_t>(n), 0);
  MPI_Request req;
  detail::mpi(MPI_Iallgather, &flag, 1, MPI_INT, flags.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, fmt::format("DistributedDataParallel::average_gradients (call {}): Join's "
                                           "MPI_Iallgather of the ranks still training",
                                           steps_ + 1));
  for (int r = 0; r < n; ++r)
    if (flags[static_cast<std::size_t>(r)] != 0) {
      join_last_root_ = r;
      return r;
    }
  return -1;
}

void DistributedDataParallel::join_finish() {
  detail::require_mpi("Join::finish");
  XGRAD_CHECK(sync_, "Join::finish: called inside no_sync()");
  for (int root = join_round(false); root >= 0; root = join_round(false)) sync_round(true, root);
  if (join_last_root_ >= 0) {
    broadcast_(params_, join_last_root_);
    if (!buffers_.empty()) broadcast_(buffers_, join_last_root_);
  }
}

void DistributedDataParallel::sync_round(bool shadow, int root) {
  ++steps_;
  const std::string what = fmt::format("DistributedDataParallel::average_gradients (call {}{})", steps_,
                                       shadow ? ", shadowed by a rank that has joined" : "");
  last_ready_in_backward_ = 0;
  if (options_.overlap && !shadow)
    for (std::size_t b = 0; b < buckets_.size(); ++b) last_ready_in_backward_ += pending_[b] == 0 ? 1 : 0;
  if (shadow) {
    // a rank that ran out of batches contributes zeros (Note [Join])
    for (auto& f : flights_) std::memset(f->storage.impl()->storage->data, 0, f->storage.nbytes());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i] || params_[i].numel() == 0) continue;
      ready_[i] = 1;
      --pending_[slot_bucket_[i]];
    }
  } else {
    // the parameters backward did not give a gradient this round (or every one, without overlap)
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i] || params_[i].numel() == 0) continue;
      put_in_bucket(i);
      ready_[i] = 1;
      --pending_[slot_bucket_[i]];
    }
  }
  const auto start = detail::Clock::now();
  if (options_.overlap && options_.mode == ReduceMode::allreduce) {
    launch_complete_buckets();
    detail::wait_until(
        [&] { return !progress(); },
        fmt::format("{}: the ring all-reduce of {} buckets (MPI_Isend, MPI_Irecv)", what, buckets_.size()), start);
  } else {
    // Every bucket's transfer started at once, non-blocking, then completed in order (Note [Waiting in
    // collectives]: no blocking call, so a peer that stalls mid-transfer meets the timeout).
    // MPI_Ireduce goes in pieces of at most kReducePiece bytes: Open MPI 4.1's libnbc reduces a large
    // message on up to 4 ranks with its chain algorithm, one round per segment, and recurses once per
    // round that completes at once; a 64 MB bucket overflowed the stack (tests/distributed/fault_drill.cpp).
    constexpr std::size_t kReducePiece = std::size_t{1} << 20;
    const bool is_rank0 = rank() == 0;
    const std::size_t nb = flights_.size();
    enum Call { kAllreduce, kReduce, kBcast };
    const auto run_all = [&](Call call) {
      static constexpr const char* kNames[] = {"MPI_Iallreduce", "MPI_Ireduce", "MPI_Ibcast"};
      std::vector<std::vector<MPI_Request>> reqs(nb);
      for (std::size_t b = 0; b < nb; ++b) {
        auto* p = static_cast<unsigned char*>(flights_[b]->storage.impl()->storage->data);
        const auto count = static_cast<std::size_t>(flights_[b]->storage.numel());
        const Dtype d = flights_[b]->storage.dtype();
        const MPI_Datatype type = detail::mpi_type(d);
        const std::size_t piece = call == kReduce ? kReducePiece / dtype_size(d) : std::max<std::size_t>(count, 1);
        for (std::size_t at = 0; at < count; at += piece) {
          const int m = static_cast<int>(std::min(piece, count - at));
          unsigned char* q = p + at * dtype_size(d);
          MPI_Request& req = reqs[b].emplace_back(MPI_REQUEST_NULL);
          if (call == kAllreduce)
            detail::mpi(MPI_Iallreduce, MPI_IN_PLACE, q, m, type, MPI_SUM, MPI_COMM_WORLD, &req);
          else if (call == kReduce)
            detail::mpi(MPI_Ireduce, is_rank0 ? MPI_IN_PLACE : q, is_rank0 ? q : nullptr, m, type, MPI_SUM, 0,
                        MPI_COMM_WORLD, &req);
          else
            detail::mpi(MPI_Ibcast, q, m, type, 0, MPI_COMM_WORLD, &req);
        }
      }
      for (std::size_t b = 0; b < nb; ++b)
        detail::wait_transfer(reqs[b], fmt::format("{}: {} of bucket {} of {}", what, kNames[call], b + 1, nb), start);
    };
    detail::arrive_collective(what, start);
    if (options_.mode == ReduceMode::allreduce) {
      run_all(kAllreduce);
    } else {
      run_all(kReduce);  // rank 0's sums complete before its broadcast reads them
      run_all(kBcast);
    }
    for (std::size_t b = 0; b < nb; ++b) finish_bucket(b);
  }
  // the next round
  for (auto& f : flights_) {
    f->launched = f->done = false;
    f->step = 0;
  }
  ready_.assign(params_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  next_launch_ = 0;
  if (options_.overlap && !rebuilt_) {
    // Rank 0's ready order of this first backward (then the parameters it did not see, in position
    // order), the same on every rank, and the buckets rebuilt in it; the averaged gradients move along.
    std::vector<char> seen(params_.size(), 0);
    std::vector<std::int64_t> order;
    for (std::size_t i : observed_)
      if (!seen[i]) {
        seen[i] = 1;
        order.push_back(static_cast<std::int64_t>(i));
      }
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!seen[i]) order.push_back(static_cast<std::int64_t>(i));
    Tensor t = Tensor::from_vector(order, {static_cast<std::int64_t>(order.size())});
    broadcast_({t}, root);
    std::vector<std::size_t> new_order;
    for (double v : t.to_vector()) new_order.push_back(static_cast<std::size_t>(v));
    make_buckets(new_order);
    for (std::size_t i = 0; i < params_.size(); ++i) put_in_bucket(i);
    rebuilt_ = true;
    observed_.clear();
  }
  // Every ring is done: backward may add the next gradients into the slots (Note [Overlapped averaging]).
  if (options_.overlap) set_in_place(true);
  if (options_.broadcast_buffers && !buffers_.empty()) broadcast_(buffers_, root);
}

void DistributedDataParallel::set_in_place(bool on) {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].numel() > 0 && views_[i].defined()) set_accumulate_in_place(params_[i], views_[i], on);
}

void DistributedDataParallel::broadcast_buffers() {
  detail::require_mpi("DistributedDataParallel::broadcast_buffers");
  if (!buffers_.empty()) broadcast_(buffers_, 0);
}

}  // namespace xgrad::distributed

namespace xgrad::distributed {

Join::Join(DistributedDataParallel& ddp) : ddp_(&ddp), uncaught_at_start_(std::uncaught_exceptions()) {
  XGRAD_CHECK(!ddp_->joining_, "Join: this DistributedDataParallel already has a Join");
  ddp_->joining_ = true;
  ddp_->join_last_root_ = -1;
}

void Join::finish() {
  if (finished_) return;
  finished_ = true;
  if (ddp_ != nullptr) {
    ddp_->join_finish();
    ddp_->joining_ = false;
  } else {
    zero_->join_finish();
    zero_->joining_ = false;
  }
}

Join::~Join() {
  if (finished_ || std::uncaught_exceptions() > uncaught_at_start_) {
    if (ddp_ != nullptr)
      ddp_->joining_ = false;
    else
      zero_->joining_ = false;
    return;
  }
  try {
    finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xgrad::distributed: Join: %s\n", e.what());
    abort(1);
  }
}

}  // namespace xgrad::distributed
