#include "xgrad/core/parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/detail/thread_state.hpp"

namespace xgrad {
namespace {

// Note [Thread arena] (parallel.hpp). The arena is held by shared_ptr: set_num_threads swaps in a
// new one under the mutex, and a parallel call copies the pointer under the same mutex, so an arena
// lives until the last call that entered it has returned. Nested calls (from inside a task) run in
// the arena they are in (t_in_arena below).
struct ArenaState {
  std::mutex mutex;
  std::shared_ptr<tbb::task_arena> arena;                  // created on first use
  std::atomic<int> requested{threads_from_environment()};  // 0: the default (all cores)

  // XGRAD_NUM_THREADS (as OMP_NUM_THREADS for PyTorch): a positive integer sets the initial limit; any
  // other value is reported on stderr and ignored, as torch does with a bad OMP_NUM_THREADS.
  static int threads_from_environment() {
    const char* text = std::getenv("XGRAD_NUM_THREADS");
    if (text == nullptr || *text == '\0') return 0;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text, &end, 10);
    if (errno == 0 && *end == '\0' && n > 0 && n <= std::numeric_limits<int>::max()) return static_cast<int>(n);
    std::fprintf(stderr, "xgrad: ignoring XGRAD_NUM_THREADS='%s': not a positive integer; using all cores\n", text);
    return 0;
  }
};

ArenaState& state() {
  static ArenaState s;  // function-local: usable from other libraries' static initialisers
  return s;
}

std::shared_ptr<tbb::task_arena> make_arena(int n) {
  return n > 0 ? std::make_shared<tbb::task_arena>(n) : std::make_shared<tbb::task_arena>();
}

std::shared_ptr<tbb::task_arena> current_arena() {
  ArenaState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.arena) s.arena = make_arena(s.requested.load(std::memory_order_relaxed));
  return s.arena;
}

// Note [Host thread pool] (parallel.hpp): the host pool's loop, or nullptr.
std::atomic<HostParallelFor> g_host_parallel_for{nullptr};

// > 0 while this thread runs xgrad work inside the arena (a task body): a parallel call from there
// is nested and runs in the arena it is in.
thread_local int t_in_arena = 0;
struct InArena {
  InArena() { ++t_in_arena; }
  ~InArena() { --t_in_arena; }
  InArena(const InArena&) = delete;
  InArena& operator=(const InArena&) = delete;
};

// A call from outside the arena enters it; the call itself is isolated (Note [Task state]), so while
// it waits for its own tasks the calling thread runs only those, never another user thread's (which
// might need a lock the caller holds).
template <class Run>
void enter_arena(const Run& run) {
  const std::shared_ptr<tbb::task_arena> arena = current_arena();
  arena->execute([&] {
    const InArena in;
    run();
  });
}

}  // namespace

void set_num_threads(int n) {
  if (n < 0) n = 0;
  ArenaState& s = state();
  std::shared_ptr<tbb::task_arena> old;  // released after the lock: the last user may be us
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.arena && s.requested.load(std::memory_order_relaxed) == n) return;
  old = std::move(s.arena);
  // The arena is built for at most the cores TBB may use in this process (TBB never runs more
  // threads in it), while the request is kept as asked (get_num_threads reports the effective
  // value): an arena built for a huge n (10^7, INT_MAX as "use everything") crashed inside TBB.
  const int allowed = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  s.arena = make_arena(n > 0 ? std::min(n, std::max(allowed, 1)) : 0);
  s.requested.store(n, std::memory_order_relaxed);
}

int get_num_threads() {
  const int requested = state().requested.load(std::memory_order_relaxed);
  // The cores TBB may use in this process: the machine's (or the affinity mask's), unless the
  // application lowered or raised it with its own tbb::global_control.
  const int allowed = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  const int wanted = requested > 0 ? requested : static_cast<int>(tbb::info::default_concurrency());
  return std::max(std::min(wanted, allowed), 1);
}

void set_host_parallel_for(HostParallelFor fn) { g_host_parallel_for.store(fn, std::memory_order_release); }

HostParallelFor host_parallel_for() { return g_host_parallel_for.load(std::memory_order_acquire); }

namespace detail {

int requested_num_threads() { return state().requested.load(std::memory_order_relaxed); }

void parallel_for_threads(std::int64_t begin, std::int64_t end, std::int64_t grain,
                          FunctionRef<void(std::int64_t, std::int64_t)> fn) {
  const ThreadState caller = capture_thread_state();  // Note [Task state]
  const auto chunk = [&](std::int64_t b, std::int64_t e) {
    const ThreadStateGuard state(caller);
    fn(b, e);
  };
  const auto run = [&] {
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(begin, end, grain),
                        [&](const tbb::blocked_range<std::int64_t>& r) {
                          const InArena in;
                          chunk(r.begin(), r.end());
                        });
    });
  };
  if (t_in_arena > 0) return run();  // a nested call, already inside the arena
  if (const HostParallelFor host = host_parallel_for()) return host(begin, end, grain, chunk);
  enter_arena(run);
}

void parallel_invoke_threads(FunctionRef<void()> a, FunctionRef<void()> b) {
  const ThreadState caller = capture_thread_state();  // Note [Task state]
  const auto run = [&] {
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_invoke(
          [&] {
            const InArena in;
            const ThreadStateGuard state(caller);
            a();
          },
          [&] {
            const InArena in;
            const ThreadStateGuard state(caller);
            b();
          });
    });
  };
  if (t_in_arena > 0) return run();
  if (host_parallel_for()) {  // one after the other, each with the whole host pool
    a();
    b();
    return;
  }
  enter_arena(run);
}

}  // namespace detail
bool detail::all_in_range_parallel(std::span<const std::int64_t> v, std::int64_t n) {
  std::atomic<bool> ok{true};  // a yes/no answer: the same whatever the chunks' order
  parallel_for(0, static_cast<std::int64_t>(v.size()), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    std::int64_t lo = 0, hi = -1;
    for (std::int64_t k = b; k < e; ++k) {
      const std::int64_t i = v[static_cast<std::size_t>(k)];
      lo = i < lo ? i : lo;
      hi = i > hi ? i : hi;
    }
    if (lo < 0 || hi >= n) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load(std::memory_order_relaxed);
}

}  // namespace xgrad
