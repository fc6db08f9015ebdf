#pragma once
// Shared by the concurrency tests: threads that start together, and serial kernels under TSan.
#include <latch>
#include <thread>
#include <vector>

#include "xgrad/core/parallel.hpp"

namespace xgrad::test {

inline constexpr int kThreads = 4;

#if defined(__SANITIZE_THREAD__)
// libtbb is not built with TSan, which therefore cannot see the synchronisation inside TBB's
// scheduler and would report every parallel_for. Under TSan the kernels run serially (xgrad then
// makes no TBB call); what these tests check is the std::threads sharing xgrad objects.
[[maybe_unused]] inline const bool g_serial_kernels = (set_num_threads(1), true);
#endif

/// Runs body(t) for t in [0, n) on n threads that start together; rethrows nothing (bodies count
/// their failures).
template <class Body>
void run_threads(int n, Body body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  for (auto& th : threads) th.join();
}

}  // namespace xgrad::test
