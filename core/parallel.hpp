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
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace xgrad {

/// Limits xgrad's parallel work to n threads (its task arena's concurrency); n <= 0 restores the
/// default (all cores). Safe to call while other threads run xgrad ops (they finish with the limit
/// they started with). OpenBLAS always runs single-threaded (GEMMs are parallelised over fixed
/// blocks: Note [Deterministic GEMM]).
void set_num_threads(int n);
/// The effective limit: the requested one, capped by the cores TBB may use in this process (an
/// application's tbb::global_control included).
int get_num_threads();

namespace detail {
/// The limit last passed to set_num_threads (0 when it was never called or the default was restored).
int requested_num_threads();

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

/// The TBB paths (parallel.cpp): run inside xgrad's task arena.
void parallel_for_tbb(std::int64_t begin, std::int64_t end, std::int64_t grain,
                      FunctionRef<void(std::int64_t, std::int64_t)> fn);
void parallel_invoke_tbb(FunctionRef<void()> a, FunctionRef<void()> b);
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

/// fn(begin, end) over [begin, end) in chunks of at least `grain` items; serial when the range is
/// at most one grain or only one thread is allowed. fn must write disjoint outputs per index.
template <class Fn>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, Fn&& fn) {
  if (end <= begin) return;
  if (end - begin <= grain || get_num_threads() == 1) {
    fn(begin, end);
    return;
  }
  detail::parallel_for_tbb(begin, end, grain, fn);
}

/// Runs a() and b(), concurrently when more than one thread is allowed (each may use parallel_for
/// itself: TBB lets the idle thread of one join the other's tasks instead of waiting at a barrier).
/// a and b must write disjoint outputs; an exception from either is rethrown.
template <class FnA, class FnB>
void parallel_invoke(FnA&& a, FnB&& b) {
  if (get_num_threads() == 1) {
    a();
    b();
    return;
  }
  detail::parallel_invoke_tbb(a, b);
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
      partial[static_cast<std::size_t>(c)] = chunk_sum(b, std::min(end, b + chunk));
    }
  });
  T acc = partial[0];
  for (std::size_t c = 1; c < partial.size(); ++c) acc += partial[c];
  return acc;
}

}  // namespace xgrad
