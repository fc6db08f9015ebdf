// Concurrency: forward and backward on several std::threads through shared leaves (Note [Leaf
// accumulation] in core/autograd.hpp, "Threads" in docs/concepts.md). Run under the `tsan` preset
// too (ctest --preset tsan -L concurrency), where a data race fails the test.
#include <atomic>
#include <cmath>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

#include "concurrency.hpp"
#include "support.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;

namespace {
using test::kThreads;
using test::run_threads;

std::shared_ptr<nn::Sequential> small_mlp(std::uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(8, 16, gen, true, kFloat64), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(16, 4, gen, true, kFloat64)});
}

// The loss of one thread's batch.
Tensor batch_loss(nn::Sequential& net, std::uint64_t seed) {
  Generator gen(seed);
  Tensor x = Tensor::randn({6, 8}, gen, kFloat64);
  Tensor target = Tensor::randn({6, 4}, gen, kFloat64);
  return mse_loss(net(x), target);
}
}  // namespace

TEST_CASE("concurrent forwards read shared parameters: same results as serial", "[concurrency]") {
  auto net = small_mlp(1);
  constexpr int kIters = 20;
  std::vector<Tensors> serial(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIters; ++i) serial[t].push_back(batch_loss(*net, 100 * t + i).detach());
  std::vector<Tensors> got(kThreads);
  run_threads(kThreads, [&](int t) {
    for (int i = 0; i < kIters; ++i) {
      if (i % 2 == 0) {
        got[t].push_back(batch_loss(*net, 100 * t + i));  // records a graph into the shared leaves
      } else {
        NoGradGuard no_grad;
        got[t].push_back(batch_loss(*net, 100 * t + i));
      }
    }
  });
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIters; ++i) CHECK(bit_equal(got[t][i].detach(), serial[t][i]));
  for (const auto& p : net->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("two concurrent backwards into shared leaves: .grad is bit-exactly a + b", "[concurrency]") {
  // Each backward adds its whole gradient for a leaf at once; a + b == b + a, so with two threads
  // and an undefined .grad the result is bit-exact whatever the order, for any values.
  auto net = small_mlp(2);
  const auto params = net->parameters();
  std::vector<Tensors> per_thread;
  for (int t = 0; t < 2; ++t) {
    Tensor loss = batch_loss(*net, 7 + t);
    per_thread.push_back(xgrad::grad({loss}, params));
  }
  for (int round = 0; round < 50; ++round) {
    net->zero_grad();
    run_threads(2, [&](int t) { batch_loss(*net, 7 + t).backward(); });
    for (std::size_t k = 0; k < params.size(); ++k) {
      Tensor want = add(per_thread[0][k], per_thread[1][k]);
      INFO("round " << round << ", parameter " << k);
      REQUIRE(params[k].grad().defined());
      CHECK(bit_equal(params[k].grad(), want));
    }
  }
}

TEST_CASE("many threads accumulate into shared leaves: exact sums where the values make them exact", "[concurrency]") {
  // loss = sum(x * w) + sum(matmul(a, w2)) * 2 + sum(w * x): w gets 2x per backward (two edges,
  // summed in the engine first), w2 gets 2 * a^T 1; all small integers, so every order of the
  // float sums gives the same bits.
  Tensor w = Tensor::zeros({3, 5}, kFloat32).set_requires_grad();
  Tensor w2 = Tensor::zeros({5, 2}, kFloat32).set_requires_grad();
  constexpr int kIters = 60;
  auto make_inputs = [](int t) {
    Tensor x = Tensor::arange(0, 15, 1, kFloat32);
    Tensor xs = add(Tensor::full({15}, static_cast<double>(t % 3), kFloat32), x);
    Tensor a = Tensor::full({4, 5}, static_cast<double>(t + 1), kFloat32);
    return std::pair{reshape(xs, {3, 5}), a};
  };
  run_threads(kThreads, [&](int t) {
    auto [x, a] = make_inputs(t);
    for (int i = 0; i < kIters; ++i) {
      Tensor loss = add(add(sum(mul(x, w)), mul(sum(matmul(a, w2)), 2.0)), sum(mul(w, x)));
      loss.backward();
    }
  });
  Tensor want_w = Tensor::zeros({3, 5}, kFloat32), want_w2 = Tensor::zeros({5, 2}, kFloat32);
  for (int t = 0; t < kThreads; ++t) {
    auto [x, a] = make_inputs(t);
    want_w = add(want_w, mul(x, 2.0 * kIters));
    want_w2 = add(want_w2, mul(Tensor::ones({5, 2}, kFloat32), 2.0 * kIters * 4 * (t + 1)));
  }
  CHECK(bit_equal(w.grad(), want_w));
  CHECK(bit_equal(w2.grad(), want_w2));
}

TEST_CASE("Hogwild-style: threads run forward and backward through one model and .grad is the sum", "[concurrency]") {
  auto net = small_mlp(3);
  const auto params = net->parameters();
  constexpr int kIters = 10;
  // Serial reference: the sum of every batch's gradient, in one fixed order.
  std::vector<Tensor> want(params.size());
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIters; ++i) {
      Tensors g = xgrad::grad({batch_loss(*net, 1000 * t + i)}, params);
      for (std::size_t k = 0; k < params.size(); ++k) want[k] = want[k].defined() ? add(want[k], g[k]) : g[k];
    }
  run_threads(kThreads, [&](int t) {
    for (int i = 0; i < kIters; ++i) batch_loss(*net, 1000 * t + i).backward();
  });
  // Float sums in another order: equal within rounding, not bit for bit (see docs/concepts.md).
  for (std::size_t k = 0; k < params.size(); ++k) CHECK(allclose(params[k].grad(), want[k], 1e-12, 1e-14));
}

TEST_CASE("grad() and zero_grad() and set_grad() while other threads accumulate", "[concurrency]") {
  // Each backward adds 1 to every element of w.grad: a reader must see every element equal (an
  // accumulation is never half visible) and, between its own resets, never decreasing.
  Tensor w = Tensor::zeros({256}, kFloat64).set_requires_grad();
  constexpr int kIters = 200;
  std::atomic<int> writers_left{kThreads - 1};
  std::atomic<int> torn{0}, bad_grad_shape{0};
  run_threads(kThreads, [&](int t) {
    if (t == 0) {
      int resets = 0;
      while (writers_left.load() > 0) {
        Tensor g = w.grad();
        if (g.defined()) {
          if (g.numel() != 256) ++bad_grad_shape;
          const double* p = g.data<double>();
          for (std::int64_t i = 1; i < g.numel(); ++i)
            if (p[i] != p[0]) ++torn;
        }
        if (++resets % 50 == 0) w.zero_grad();
        if (resets % 77 == 0) w.set_grad(Tensor::zeros({256}, kFloat64));
      }
      return;
    }
    for (int i = 0; i < kIters; ++i) sum(w).backward();
    --writers_left;
  });
  CHECK(torn.load() == 0);
  CHECK(bad_grad_shape.load() == 0);
  // The reader may have reset .grad after the last accumulation: one more backward defines it.
  sum(w).backward();
  Tensor g = w.grad();
  REQUIRE(g.defined());
  const double v = g.data<double>()[0];
  CHECK(v >= 1);
  CHECK(v <= (kThreads - 1) * kIters + 1);
  CHECK(v == std::floor(v));
}

TEST_CASE("a tensor returned by grad() keeps its values while backwards accumulate", "[concurrency]") {
  Tensor w = Tensor::zeros({64}, kFloat64).set_requires_grad();
  sum(w).backward();
  Tensor snapshot = w.grad();
  const Tensor copy = snapshot.clone_data();
  run_threads(kThreads, [&](int) {
    for (int i = 0; i < 50; ++i) sum(mul(w, 3.0)).backward();
  });
  CHECK(bit_equal(snapshot, copy));
  CHECK(w.grad().to_vector() == std::vector<double>(64, 1.0 + 3.0 * 50 * kThreads));
}

TEST_CASE("independent graphs per thread with retain_grad and grad() and graphs freed elsewhere", "[concurrency]") {
  Tensor shared = Tensor::of({1.0, 2.0, 3.0}, kFloat64).set_requires_grad();
  std::atomic<int> failures{0};
  std::vector<Tensor> handed_over(kThreads);
  run_threads(kThreads, [&](int t) {
    for (int i = 0; i < 100; ++i) {
      Tensor h = mul(shared, static_cast<double>(t + 1));
      h.retain_grad();
      Tensor y = sum(mul(h, h));  // dy/dh = 2h
      Tensors g = xgrad::grad({y}, {shared}, {}, /*retain_graph=*/true);
      y.backward();
      const auto gh = h.grad().to_vector(), hv = h.to_vector(), gs = g[0].to_vector();
      for (std::size_t k = 0; k < 3; ++k) {
        if (gh[k] != 2 * hv[k]) ++failures;
        if (gs[k] != 2 * (t + 1) * hv[k]) ++failures;
      }
    }
    // a live graph handed to another thread, which frees it
    handed_over[t] = exp(mul(shared, 0.5));
  });
  std::thread([&] { handed_over.clear(); }).join();
  CHECK(failures.load() == 0);
  double want = 0;
  for (int t = 0; t < kThreads; ++t) want += 2.0 * (t + 1) * (t + 1) * 100;  // per element, times x
  const auto g = shared.grad().to_vector();
  for (std::size_t k = 0; k < 3; ++k) CHECK(g[k] == Approx(want * (k + 1)).epsilon(1e-14));
}

TEST_CASE("hooks of shared leaves: each concurrent backward runs them once, on its own thread", "[concurrency]") {
  // Note [Hooks]: a leaf's register_hook and post-accumulate-grad hooks run on the thread of the
  // backward that reaches it, once per backward; concurrent backwards run them concurrently (these
  // hooks are thread-safe: atomics and a mutex), and registration happened before the threads.
  auto net = small_mlp(5);
  const auto params = net->parameters();
  constexpr int kIters = 25;
  std::vector<std::atomic<int>> pre(params.size()), post(params.size());
  std::mutex m;
  std::map<std::thread::id, int> post_per_thread;
  std::atomic<int> failures{0};
  for (std::size_t k = 0; k < params.size(); ++k) {
    params[k].register_hook([&pre, k](const Tensor& g) {
      ++pre[k];
      return mul(g, 2.0);  // doubles every gradient: .grad becomes twice the unhooked sum
    });
    params[k].register_post_accumulate_grad_hook([&, k](Tensor& p) {
      ++post[k];
      if (!p.grad().defined()) ++failures;
      const std::lock_guard<std::mutex> lock(m);
      ++post_per_thread[std::this_thread::get_id()];
    });
  }
  std::vector<std::thread::id> ids(kThreads);
  run_threads(kThreads, [&](int t) {
    ids[t] = std::this_thread::get_id();
    for (int i = 0; i < kIters; ++i) batch_loss(*net, 31 + t).backward();
  });
  CHECK(failures.load() == 0);
  for (std::size_t k = 0; k < params.size(); ++k) {
    CHECK(pre[k].load() == kThreads * kIters);
    CHECK(post[k].load() == kThreads * kIters);
  }
  REQUIRE(post_per_thread.size() == static_cast<std::size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) CHECK(post_per_thread[ids[t]] == kIters * static_cast<int>(params.size()));
  // .grad is the sum of the hooked (doubled) gradients, up to the order of the float additions;
  // grad() runs a requested leaf's hooks too, so it returns them doubled
  std::vector<Tensors> per_thread;
  for (int t = 0; t < kThreads; ++t) per_thread.push_back(xgrad::grad({batch_loss(*net, 31 + t)}, params));
  for (std::size_t k = 0; k < params.size(); ++k) {
    Tensor want = Tensor::zeros(params[k].shape(), kFloat64);
    for (int t = 0; t < kThreads; ++t) want = add(want, mul(per_thread[t][k], static_cast<double>(kIters)));
    CHECK(allclose(params[k].grad(), want, 1e-12, 1e-12));
  }
}
