// Tests for core/parallel.* (Note [Thread arena], Note [Host thread pool]) and ops/kernels/blas.*
// (Note [OpenBLAS threading]): the thread limit is xgrad's own task arena and leaves TBB's
// process-wide limit alone, an application's global_control still caps it, limits change safely while
// other threads run ops, nested and throwing bodies work, a host pool runs the loops with the same
// bits, and OpenBLAS is single-threaded whenever xgrad runs a GEMM.
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"

// OpenBLAS's own C interface (the library is linked through xgrad::ops; its header is private to it).
extern "C" int openblas_get_num_threads(void);
extern "C" void openblas_set_num_threads(int num_threads);

using namespace xgrad;

namespace {
std::size_t tbb_limit() { return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism); }
int cores() { return std::min(static_cast<int>(tbb::info::default_concurrency()), static_cast<int>(tbb_limit())); }

// A host pool for Note [Host thread pool], made to differ from TBB's splitting: chunks of exactly
// `grain` items (TBB's chunks hold grain/2 to grain and more), handed out last to first to three std::threads, every
// call counted; the first exception is rethrown.
std::atomic<int> g_host_calls{0};
void reverse_chunk_pool(std::int64_t begin, std::int64_t end, std::int64_t grain,
                        FunctionRef<void(std::int64_t, std::int64_t)> fn) {
  ++g_host_calls;
  const std::int64_t chunks = (end - begin + grain - 1) / grain;
  std::atomic<std::int64_t> next{chunks - 1};
  std::exception_ptr error;
  std::mutex mutex;
  const auto work = [&] {
    for (std::int64_t c; (c = next.fetch_sub(1)) >= 0;) {
      try {
        fn(begin + c * grain, std::min(end, begin + (c + 1) * grain));
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// Sum of i over [0, n) computed through parallel_for into per-index slots, then added in order.
std::int64_t slot_sum(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n), 0);
  parallel_for(0, n, 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) v[static_cast<std::size_t>(i)] = i;
  });
  std::int64_t s = 0;
  for (const auto x : v) s += x;
  return s;
}
// parallel_invoke runs both functions (each with nested parallel_for), and an exception thrown in a
// task reaches the caller.
void check_invoke_and_exception() {
  std::int64_t a = 0, b = 0;
  parallel_invoke([&] { a = slot_sum(70000); }, [&] { b = slot_sum(90000); });
  CHECK(a == 70000LL * 69999 / 2);
  CHECK(b == 90000LL * 89999 / 2);
  CHECK_THROWS_AS(parallel_for(0, 1000, 1,
                               [](std::int64_t lo, std::int64_t) {
                                 if (lo == 0) throw std::runtime_error("task failed");
                               }),
                  std::runtime_error);
}
}  // namespace

TEST_CASE("parallel: set_num_threads sets xgrad's arena, not TBB's process-wide limit", "[parallel]") {
  const std::size_t before = tbb_limit();
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  CHECK(tbb_limit() == before);  // no tbb::global_control behind the application's back
  set_num_threads(2);
  CHECK(get_num_threads() == std::min(2, cores()));
  CHECK(tbb_limit() == before);
  set_num_threads(0);
  CHECK(get_num_threads() == cores());
  CHECK(detail::requested_num_threads() == 0);
}

TEST_CASE("parallel: with_num_threads restores the requested limit, also on an exception", "[parallel]") {
  set_num_threads(0);
  CHECK(with_num_threads(1, [] { return get_num_threads(); }) == 1);
  CHECK(detail::requested_num_threads() == 0);
  CHECK_THROWS_AS(with_num_threads(1, []() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
  CHECK(detail::requested_num_threads() == 0);
  // A limit above the cores is kept as asked and restored as asked; the effective value is capped.
  set_num_threads(64);
  with_num_threads(1, [] { CHECK(get_num_threads() == 1); });
  CHECK(detail::requested_num_threads() == 64);
  CHECK(get_num_threads() == cores());
  set_num_threads(0);
}

TEST_CASE("parallel: an application's global_control caps the effective limit", "[parallel]") {
  set_num_threads(4);
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    CHECK(get_num_threads() == 1);
    CHECK(slot_sum(100000) == 100000LL * 99999 / 2);  // runs (serially) under the cap
  }
  CHECK(get_num_threads() == std::min(4, cores()));
  set_num_threads(0);
}

TEST_CASE("parallel: nested calls, exceptions and deterministic_sum inside the arena", "[parallel]") {
  set_num_threads(2);
  // Nested parallel_for inside parallel_for and parallel_invoke.
  std::vector<std::int64_t> rows(64, 0);
  parallel_for(0, 64, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) rows[static_cast<std::size_t>(r)] = slot_sum(5000 + r);
  });
  for (std::int64_t r = 0; r < 64; ++r) CHECK(rows[static_cast<std::size_t>(r)] == (5000 + r) * (4999 + r) / 2);
  check_invoke_and_exception();
  // The fixed-chunk sum is the same with 1 and 2 threads, bit for bit.
  std::vector<double> x(200001);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0 / static_cast<double>(i + 1);
  const auto sum = [&] {
    return deterministic_sum<double>(0, static_cast<std::int64_t>(x.size()), 4096,
                                     [&](std::int64_t lo, std::int64_t hi) {
                                       double s = 0;
                                       for (std::int64_t i = lo; i < hi; ++i) s += x[static_cast<std::size_t>(i)];
                                       return s;
                                     });
  };
  const double one = with_num_threads(1, sum), two = with_num_threads(2, sum);
  CHECK(std::memcmp(&one, &two, sizeof one) == 0);
  set_num_threads(0);
}

TEST_CASE("parallel: changing the limit while other threads run parallel work", "[parallel]") {
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, runs{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t)
    workers.emplace_back([&] {
      while (!stop.load()) {
        if (slot_sum(200000) != 200000LL * 199999 / 2) ++wrong;
        ++runs;
      }
    });
  for (int i = 0; i < 200; ++i) set_num_threads(1 + i % 3);
  while (runs.load() < 30) std::this_thread::yield();
  stop = true;
  for (auto& w : workers) w.join();
  set_num_threads(0);
  CHECK(wrong.load() == 0);
}

TEST_CASE("parallel: a host pool runs the parallel loops, and results stay bit for bit", "[parallel]") {
  // Forward and gradients of a few ops whose kernels split work in different ways: GEMM tiles,
  // fixed-chunk reductions, elementwise loops, both flagship ops.
  const auto run = [] {
    Generator gen(7);
    Tensor a = Tensor::randn({96, 300}, gen), b = Tensor::randn({300, 80}, gen);
    const auto pattern = BlockSparsePattern::block_diagonal(
        {{InFeatures{64}, OutFeatures{64}}, {InFeatures{128}, OutFeatures{128}}, {InFeatures{64}, OutFeatures{64}}});
    Tensor x = Tensor::randn({64, 256}, gen), w = Tensor::randn(pattern.weight_shape(), gen);
    Tensor bias = Tensor::randn({256}, gen);
    Tensor f = Tensor::randn({3, 4000}, gen);
    std::vector<double> c(3 * 50);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = 0.1 + 0.8 * static_cast<double>(i % 50) / 50.0;
    Tensor coarse = Tensor::from_vector(c, {3, 50}, kFloat32);
    for (Tensor* t : {&a, &b, &x, &w, &bias, &f}) t->set_requires_grad();
    Tensor y = block_sparse_linear(x, w, bias, pattern);
    Tensor r = resample_conv(f, coarse, FineGrid::uniform(0.0, 1.0 / 3999, 4000), Response::hann(0.05));
    Tensor loss = sum(exp(matmul(a, b) * 0.01)) + sum(tanh(y)) + sum(r * r);
    Tensors out = grad({loss}, {a, b, x, w, bias, f});
    out.insert(out.begin(), {loss, y, r});
    return out;
  };
  set_num_threads(2);
  const Tensors arena = run();
  g_host_calls = 0;
  set_host_parallel_for(&reverse_chunk_pool);
  CHECK(host_parallel_for() == &reverse_chunk_pool);
  const Tensors host = run();
  const int calls = g_host_calls.load();
  check_invoke_and_exception();  // under the host pool: parallel_invoke runs both, in turn
  set_host_parallel_for(nullptr);
  CHECK(host_parallel_for() == nullptr);
  set_num_threads(0);
  CHECK(calls > 0);  // the loops did go to the host
  REQUIRE(arena.size() == host.size());
  for (std::size_t i = 0; i < arena.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(arena[i].shape() == host[i].shape());
    CHECK(std::memcmp(arena[i].raw_data(), host[i].raw_data(), arena[i].nbytes()) == 0);
  }
  // With a limit of 1 the host is never called.
  set_host_parallel_for(&reverse_chunk_pool);
  g_host_calls = 0;
  with_num_threads(1, [&] { CHECK(slot_sum(200000) == 200000LL * 199999 / 2); });
  set_host_parallel_for(nullptr);
  CHECK(g_host_calls.load() == 0);
}

TEST_CASE("blas: one entry point, OpenBLAS single-threaded whenever xgrad runs a GEMM", "[parallel][blas]") {
  // C = alpha op(A) op(B) + beta C against a triple loop (transposed A, plain B).
  const std::int64_t m = 3, n = 4, k = 5;
  std::vector<double> at(static_cast<std::size_t>(k * m)), bm(static_cast<std::size_t>(k * n)), c(12, 1.0);
  for (std::size_t i = 0; i < at.size(); ++i) at[i] = static_cast<double>(i) * 0.5 - 3;
  for (std::size_t i = 0; i < bm.size(); ++i) bm[i] = static_cast<double>(i % 7) - 2;
  detail::blas::gemm<double>(true, false, m, n, k, 2.0, at.data(), m, bm.data(), n, 0.5, c.data(), n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0.5;
      for (std::int64_t p = 0; p < k; ++p)
        want += 2.0 * at[static_cast<std::size_t>(p * m + i)] * bm[static_cast<std::size_t>(p * n + j)];
      CHECK(c[static_cast<std::size_t>(i * n + j)] == Approx(want).epsilon(1e-12));
    }
  // k = 0: C = beta C, and beta = 0 writes zeros over whatever C held (NaN included).
  std::vector<float> cf = {1.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 4.f};
  detail::blas::gemm<float>(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 3.f, cf.data(), 2);
  CHECK(cf[0] == 3.f);
  CHECK(cf[1] == 6.f);
  detail::blas::gemm<float>(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.f, cf.data(), 2);
  CHECK((cf[2] == 0.f && cf[3] == 0.f));
  xgrad::test::require_error(
      [] {
        float z = 0;
        detail::blas::gemm<float>(false, false, 1, 1, std::int64_t{1} << 32, 1.f, &z, 1, &z, 1, 0.f, &z, 1);
      },
      {"gemm", "k=4294967296", "32-bit BLAS"});
  // An application that turned OpenBLAS's threads up gets them turned down by xgrad's next GEMM on
  // OpenBLAS (forced here: under OPENBLAS_CORETYPE=Prescott the auto backend is xgrad's own GEMM,
  // which leaves OpenBLAS alone; Note [GEMM backend] in ops/kernels/blas.cpp).
  openblas_set_num_threads(2);
  Generator gen(7);
  const Tensor a = Tensor::randn({8, 8}, gen), b = Tensor::randn({8, 8}, gen);
  detail::blas::set_backend(detail::blas::Backend::openblas);
  (void)matmul(a, b);
  detail::blas::reset_backend();
  CHECK(openblas_get_num_threads() == 1);
  CHECK(std::string(detail::blas::core_name()).size() > 0);
}

TEST_CASE("parallel: any thread count is accepted, the arena clamped to the cores TBB may use", "[parallel]") {
  // 10^7 or INT_MAX ("use everything") once crashed inside TBB at the first parallel op
  for (const int n : {10000000, std::numeric_limits<int>::max()}) {
    INFO("set_num_threads(" << n << ")");
    set_num_threads(n);
    CHECK(detail::requested_num_threads() == n);  // kept as asked
    CHECK(get_num_threads() == cores());          // the effective value
    CHECK(slot_sum(100000) == 100000LL * 99999 / 2);
    const Tensor x = Tensor::ones({300000}, kFloat64);
    CHECK(sum(x).item() == 300000.0);
    CHECK(with_num_threads(n, [] { return slot_sum(100000); }) == 100000LL * 99999 / 2);
  }
  set_num_threads(0);
}

// Run by ctest with the environment variable set (tests/CMakeLists.txt): the limit at start.
TEST_CASE("XGRAD_NUM_THREADS=1 at start: one thread", "[.][env_threads_1]") {
  CHECK(get_num_threads() == 1);
  set_num_threads(0);  // the default is all cores again, not the variable's value
  CHECK(get_num_threads() >= 1);
}

TEST_CASE("XGRAD_NUM_THREADS=abc at start: ignored, the default limit", "[.][env_threads_bad]") {
  const int at_start = get_num_threads();
  set_num_threads(0);
  CHECK(at_start == get_num_threads());
}
