#include "xgrad/core/parallel.hpp"

#include <cblas.h>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <atomic>
#include <memory>
#include <mutex>

namespace xgrad {
namespace {
std::mutex g_mutex;
std::unique_ptr<tbb::global_control> g_control;
std::atomic<int> g_threads{0};  // 0: not read yet
int default_threads() { return static_cast<int>(tbb::info::default_concurrency()); }
// OpenBLAS stays single-threaded: its own threading rounds differently with different thread
// counts; xgrad parallelises GEMMs over fixed blocks instead (Note [Deterministic GEMM], ops/matmul.cpp).
[[maybe_unused]] const bool g_openblas_single_threaded = (openblas_set_num_threads(1), true);
}  // namespace

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_control.reset();
  if (n <= 0) n = default_threads();
  g_control =
      std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(n));
  openblas_set_num_threads(1);  // not n: see g_openblas_single_threaded
  g_threads.store(n, std::memory_order_relaxed);
}

int get_num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace xgrad
