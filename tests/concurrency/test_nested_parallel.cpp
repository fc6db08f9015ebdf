// Concurrency: xgrad work inside the chunks of a parallel_for that the user starts (Note [Task
// state] in core/detail/thread_state.hpp). A thread waiting for the chunks of a call it made inside a
// chunk must not run another chunk of the outer call under its own thread-local state (grad mode off
// inside a backward) or inside its own std::call_once.
#include <tbb/global_control.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "concurrency.hpp"
#include "support.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;

namespace {
// Large enough that the ops inside a chunk run their own parallel_for in several chunks (more than
// kParallelGrain elements), so that the threads of the outer loop wait inside inner ones.
constexpr std::int64_t kRows = 512, kCols = 256;
constexpr std::int64_t kSamples = 32;

// 8 threads on any machine (TBB lets an application allow more threads than cores): threads then
// wait for each other's chunks often, which is when a waiting thread takes another task. Under TSan
// the kernels stay serial (concurrency.hpp: TSan cannot see TBB's synchronisation).
#if defined(__SANITIZE_THREAD__)
struct EightThreads {};
#else
struct EightThreads {
  tbb::global_control allow{tbb::global_control::max_allowed_parallelism, 8};
  EightThreads() { set_num_threads(8); }
  ~EightThreads() { set_num_threads(0); }
};
#endif
}  // namespace

TEST_CASE("per-sample gradients in a parallel_for: every chunk records its graph, same bits as serially",
          "[concurrency]") {
  Generator gen(11);
  const Tensor w = Tensor::randn({kRows, kCols}, gen, kFloat64).set_requires_grad();
  const Tensor xs = Tensor::randn({kSamples, kCols}, gen, kFloat64);
  // grad of sum(tanh(w * x_i)) with respect to w, for sample i; the backward runs parallel_for inside.
  const auto sample_grad = [&](std::int64_t i) {
    const Tensor loss = sum(tanh(w * index_select(xs, 0, std::vector<std::int64_t>{i})));
    return grad({loss}, {w})[0];
  };
  std::vector<Tensor> serial;
  for (std::int64_t i = 0; i < kSamples; ++i) serial.push_back(with_num_threads(1, [&] { return sample_grad(i); }));
  const EightThreads threads;
  for (int round = 0; round < 20; ++round) {
    std::vector<Tensor> got(static_cast<std::size_t>(kSamples));
    std::atomic<int> failures{0};
    std::string first_error;
    parallel_for(0, kSamples, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        try {
          got[static_cast<std::size_t>(i)] = sample_grad(i);
        } catch (const std::exception& ex) {
          if (failures.fetch_add(1) == 0) first_error = ex.what();
        }
      }
    });
    INFO("round " << round << ": " << first_error);
    REQUIRE(failures.load() == 0);
    for (std::int64_t i = 0; i < kSamples; ++i)
      CHECK(bit_equal(got[static_cast<std::size_t>(i)], serial[static_cast<std::size_t>(i)]));
  }
}

TEST_CASE("grad mode is the caller's in every chunk, on every thread", "[concurrency]") {
  const EightThreads threads;
  for (const bool mode : {false, true}) {
    std::atomic<int> wrong{0};
    AutoGradMode guard(mode);
    parallel_for(0, 256, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        if (GradMode::is_enabled() != mode) ++wrong;
        // long enough a chunk that the other threads take some
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    });
    CHECK(wrong.load() == 0);
  }
}

TEST_CASE("a cached transpose first built inside the chunks of a parallel_for: no deadlock, one pattern",
          "[concurrency]") {
  // A pattern with more than 2^16 entries, whose transpose is built in parallel inside std::call_once
  // (Note [Cached transpose]); each chunk asks for it. A thread waiting inside the call_once must not
  // run another chunk, which would ask for the same once-flag on the same thread.
  const EightThreads threads;
  for (int round = 0; round < 10; ++round) {
    Generator gen(static_cast<std::uint64_t>(round));
    const Tensor dense = Tensor::rand({512, 512}, gen, kFloat64);
    const SparseCsr a = to_sparse_csr(dense);
    REQUIRE(a.nnz() > (std::int64_t{1} << 16));
    std::vector<Tensor> got(64);
    parallel_for(0, 64, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) got[static_cast<std::size_t>(i)] = a.t().to_dense();
    });
    const Tensor want = transpose(dense, 0, 1);
    for (const Tensor& g : got) CHECK(bit_equal(g, want));
  }
}
