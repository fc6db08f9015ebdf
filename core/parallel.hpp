#pragma once
// Parallel helpers. Note [Determinism]: results must be bit-identical whatever the thread count.
// Every helper here partitions work so that each output element is written by exactly one task
// and every reduction is split at fixed, thread-count-independent boundaries and combined in a
// fixed order.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>

#include <cstdint>
#include <vector>

namespace xgrad {

/// Limits TBB to n threads process-wide; n <= 0 restores the default (all cores). OpenBLAS always
/// runs single-threaded (GEMMs are parallelised over fixed blocks: Note [Deterministic GEMM]).
void set_num_threads(int n);
/// The current limit.
int get_num_threads();

/// Runs fn with the thread limit set to n, then restores the previous limit.
template <class Fn>
decltype(auto) with_num_threads(int n, Fn&& fn) {
  const int prev = get_num_threads();
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
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(begin, end, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) { fn(r.begin(), r.end()); });
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
  tbb::parallel_invoke([&] { a(); }, [&] { b(); });
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
