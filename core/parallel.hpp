#pragma once
// Parallel helpers. Note [Determinism]: results must be bit-identical whatever the thread count.
// Every helper here partitions work so that each output element is written by exactly one task
// and every reduction is split at fixed, thread-count-independent boundaries and combined in a
// fixed order.
//
// Note [Thread arena]: xgrad runs its parallel work in a tbb::task_arena that the library owns;
// set_num_threads(n) sets that arena's concurrency. It never touches tbb::global_control, so an
// application's own TBB limits and arenas are left alone (and still cap xgrad's: get_num_threads
// reports the effective value). The limit is library-wide, not per calling thread: parallel calls
// from several user threads share the arena's n threads, and a call already running finishes in the
// arena it started in.
//
// Only the serial fast path is templated here; the TBB part of parallel_for / parallel_invoke is
// out of line in parallel.cpp behind a type-erased FunctionRef (as PyTorch's ParallelNative.h), so
// the TBB headers are not compiled into every kernel file.
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace xgrad {

/// Limits xgrad's parallel work to n threads (its task arena's concurrency); n <= 0 restores the
/// default (all cores). The limit at start is the environment variable XGRAD_NUM_THREADS when it holds
/// a positive integer (as OMP_NUM_THREADS for PyTorch; another value is reported on stderr and
/// ignored), else the default. Any n is accepted: above the cores TBB may use in this process (the
/// machine's, or an application's tbb::global_control limit) the arena is clamped to that number
/// (no more threads would run), and get_num_threads reports the clamped value. Safe to call while
/// other threads run xgrad ops (they finish with the limit they started with). OpenBLAS always runs single-threaded
/// (GEMMs are parallelised over fixed blocks: Note [Deterministic GEMM]).
void set_num_threads(int n);
/// The effective limit: the requested one, capped by the cores TBB may use in this process (an
/// application's tbb::global_control included).
int get_num_threads();

/// A non-owning reference to a callable (like C++26 std::function_ref): two pointers, no allocation.
/// The callable must outlive the FunctionRef.
template <class Sig>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, FunctionRef>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): built implicitly from lambdas
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))), call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::add_pointer_t<std::remove_reference_t<F>>>(obj))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

/// A host thread pool's parallel loop (Note [Host thread pool]): runs fn over [begin, end) split into
/// chunks, every item exactly once, returns when all are done and rethrows the first exception a
/// chunk threw. `grain` is a hint: the size below which a chunk is not worth a thread of its own (as
/// for TBB's blocked_range and ATen's at::parallel_for, which may cut chunks somewhat smaller).
using HostParallelFor = void (*)(std::int64_t begin, std::int64_t end, std::int64_t grain,
                                 FunctionRef<void(std::int64_t, std::int64_t)> fn);

/// Note [Host thread pool]: an application that runs its own thread pool (an OpenMP team, as
/// PyTorch does) can have xgrad's parallel loops run in it instead of in xgrad's TBB arena, so that
/// the two pools do not take turns on the same cores: an OpenMP team spin-waits for a while after
/// each parallel region (libgomp's default wait policy), and TBB workers started in that time share
/// the cores with the spinning threads. With a host pool set, parallel_for hands its multi-threaded
/// case to `fn` and parallel_invoke runs a() then b() (each may use parallel_for). Results do not
/// change (Note [Determinism]: no kernel depends on how a range is split). set_num_threads still
/// decides when a loop runs serially (a limit of 1 never calls the host); the host decides how many
/// threads run the rest, and how a call from inside one of its chunks runs (ATen's at::parallel_for
/// runs it serially). A call already inside xgrad's arena stays there. nullptr restores the arena.
/// The Python bridge (python/src/module.cpp) sets at::parallel_for while xgrad follows torch's
/// thread count.
void set_host_parallel_for(HostParallelFor fn);
/// The host pool's loop set by set_host_parallel_for, or nullptr (xgrad's TBB arena).
HostParallelFor host_parallel_for();

namespace detail {
/// The limit last passed to set_num_threads (0 when it was never called or the default was restored).
int requested_num_threads();

/// The multi-threaded paths (parallel.cpp): the host pool's loop when one is set, else xgrad's task arena.
void parallel_for_threads(std::int64_t begin, std::int64_t end, std::int64_t grain,
                          FunctionRef<void(std::int64_t, std::int64_t)> fn);
void parallel_invoke_threads(FunctionRef<void()> a, FunctionRef<void()> b);
}  // namespace detail

/// Runs fn with the thread limit set to n, then restores the previous limit (also on an exception).
/// The limit is library-wide: other threads' xgrad calls started meanwhile see it too.
template <class Fn>
decltype(auto) with_num_threads(int n, Fn&& fn) {
  const int prev = detail::requested_num_threads();
  set_num_threads(n);
  struct Restore {
    int p;
    ~Restore() { set_num_threads(p); }
  } restore{prev};
  return fn();
}

/// Elements below which elementwise kernels run serially (tasks cost more than they save).
inline constexpr std::int64_t kParallelGrain = 32768;

/// Items per task when an item costs `work_per_item` elements: kParallelGrain / work_per_item, at
/// least 1 (and kParallelGrain for an item that costs nothing). A function of the sizes alone, so
/// the chunks, and with them the results, do not depend on the thread count.
constexpr std::int64_t grain_for(std::int64_t work_per_item) {
  const std::int64_t g = work_per_item > 1 ? kParallelGrain / work_per_item : kParallelGrain;
  return g > 1 ? g : 1;
}

/// fn(begin, end) over [begin, end) in chunks of about `grain` items or more (TBB halves a range while
/// it holds more than `grain`, so a chunk may hold as few as half of it); serial when the range is
/// at most one grain or only one thread is allowed. fn must write disjoint outputs per index.
template <class Fn>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, Fn&& fn) {
  if (end <= begin) return;
  if (end - begin <= grain || get_num_threads() == 1) {
    fn(begin, end);
    return;
  }
  detail::parallel_for_threads(begin, end, grain, fn);
}

/// Runs a() and b(), concurrently when more than one thread is allowed (each may use parallel_for
/// itself: TBB lets the idle thread of one join the other's tasks instead of waiting at a barrier);
/// one after the other under a host pool (Note [Host thread pool]).
/// a and b must write disjoint outputs; an exception from either is rethrown.
template <class FnA, class FnB>
void parallel_invoke(FnA&& a, FnB&& b) {
  if (get_num_threads() == 1) {
    a();
    b();
    return;
  }
  detail::parallel_invoke_threads(a, b);
}

/// Deterministic parallel sum: [begin, end) is cut into fixed chunks of `chunk` items (independent
/// of the thread count), chunk_sum(b, e) is computed for each, possibly in parallel, and the partial
/// sums are added left to right.
template <class T, class ChunkSum>
T deterministic_sum(std::int64_t begin, std::int64_t end, std::int64_t chunk, ChunkSum&& chunk_sum) {
  if (end <= begin) return T(0);
  const std::int64_t n = end - begin;
  const std::int64_t nchunks = (n + chunk - 1) / chunk;
  if (nchunks == 1) return chunk_sum(begin, end);
  std::vector<T> partial(static_cast<std::size_t>(nchunks));
  parallel_for(0, nchunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t b = begin + c * chunk;
      partial[static_cast<std::size_t>(c)] = chunk_sum(b, end < b + chunk ? end : b + chunk);
    }
  });
  T acc = partial[0];
  for (std::size_t c = 1; c < partial.size(); ++c) acc += partial[c];
  return acc;
}

}  // namespace xgrad
