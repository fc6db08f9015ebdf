// Concurrency in the nn layer: separate models trained at once, data loaders over one dataset,
// checkpoints saved and loaded from several threads ("Threads" in docs/concepts.md).
#include <atomic>
#include <latch>
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
      std::make_shared<nn::Linear>(8, 16, gen, true, kFloat64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3, gen, true, kFloat64)});
}

// Trains a fresh model from `seed` for a few Adam (or SGD with momentum) steps; returns its parameters.
Tensors train(std::uint64_t seed, bool adam) {
  auto net = small_mlp(seed);
  std::unique_ptr<nn::Optimizer> opt;
  if (adam)
    opt = std::make_unique<nn::Adam>(net->parameters(), nn::AdamOptions(1e-2));
  else
    opt = std::make_unique<nn::SGD>(net->parameters(), nn::SGDOptions(0.05).momentum(0.9));
  Generator gen(seed + 17);
  for (int step = 0; step < 15; ++step) {
    Tensor x = Tensor::randn({10, 8}, gen, kFloat64);
    Tensor y = Tensor::randn({10, 3}, gen, kFloat64);
    opt->zero_grad();
    mse_loss((*net)(x), y).backward();
    opt->step();
  }
  Tensors out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone_data());
  return out;
}
}  // namespace

TEST_CASE("optimizers stepped concurrently on separate models: same parameters as serially", "[concurrency]") {
  std::vector<Tensors> serial;
  for (int t = 0; t < kThreads; ++t) serial.push_back(train(50 + t, t % 2 == 0));
  std::vector<Tensors> got(kThreads);
  run_threads(kThreads, [&](int t) { got[t] = train(50 + t, t % 2 == 0); });
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(got[t].size() == serial[t].size());
    for (std::size_t k = 0; k < got[t].size(); ++k) CHECK(bit_equal(got[t][k], serial[t][k]));
  }
}

TEST_CASE("one DataLoader per thread over a shared dataset: the same batches as serially", "[concurrency]") {
  Generator gen(3);
  auto ds = std::make_shared<nn::TensorDataset>(Tensor::randn({37, 4}, gen), Tensor::arange(0, 37, 1));
  auto batches = [&](std::uint64_t seed) {
    nn::DataLoader loader(ds, nn::DataLoaderOptions().batch_size(5).shuffle(true).seed(seed));
    Tensors out;
    for (int epoch = 0; epoch < 3; ++epoch)
      for (auto& b : loader) {
        out.push_back(b.data);
        out.push_back(b.target);
      }
    return out;
  };
  std::vector<Tensors> serial;
  for (int t = 0; t < kThreads; ++t) serial.push_back(batches(t % 2));  // two threads share each seed
  std::vector<Tensors> got(kThreads);
  run_threads(kThreads, [&](int t) { got[t] = batches(t % 2); });
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(got[t].size() == serial[t].size());
    for (std::size_t k = 0; k < got[t].size(); ++k) CHECK(bit_equal(got[t][k], serial[t][k]));
  }
}

TEST_CASE("checkpoints: concurrent saves of different files and loads of one file and saves to one path",
          "[concurrency]") {
  test::TempDir dir("concurrency_ckpt");
  std::vector<std::shared_ptr<nn::Sequential>> nets;
  for (int t = 0; t < kThreads; ++t) nets.push_back(small_mlp(200 + t));

  SECTION("different files, saved and loaded back at once") {
    std::atomic<int> failures{0};
    run_threads(kThreads, [&](int t) {
      const std::string path = dir.file(std::string("m").append(std::to_string(t)).append(".safetensors"));
      for (int i = 0; i < 5; ++i) {
        nn::save(*nets[t], path);
        auto fresh = small_mlp(999);
        nn::load(*fresh, path);
        const auto a = nets[t]->parameters(), b = fresh->parameters();
        for (std::size_t k = 0; k < a.size(); ++k)
          if (!bit_equal(a[k], b[k])) ++failures;
      }
    });
    CHECK(failures.load() == 0);
  }
  SECTION("one file loaded by every thread while one model is read by every save") {
    const std::string path = dir.file("shared.safetensors");
    nn::save(*nets[0], path);
    std::atomic<int> failures{0};
    run_threads(kThreads, [&](int t) {
      for (int i = 0; i < 5; ++i) {
        auto fresh = small_mlp(999);
        nn::load(*fresh, path);
        const auto a = nets[0]->parameters(), b = fresh->parameters();
        for (std::size_t k = 0; k < a.size(); ++k)
          if (!bit_equal(a[k], b[k])) ++failures;
        // every thread's save reads nets[0] at once
        nn::save(*nets[0], dir.file(std::string("copy").append(std::to_string(t)).append(".safetensors")));
      }
    });
    CHECK(failures.load() == 0);
  }
  SECTION("every thread saves its own model to the same path: the file is one of them, whole") {
    const std::string path = dir.file("race.safetensors");
    run_threads(kThreads, [&](int t) {
      for (int i = 0; i < 5; ++i) nn::save(*nets[t], path);
    });
    auto fresh = small_mlp(999);
    nn::load(*fresh, path);
    int matches = 0;
    for (int t = 0; t < kThreads; ++t) {
      const auto a = nets[t]->parameters(), b = fresh->parameters();
      bool all = true;
      for (std::size_t k = 0; k < a.size(); ++k) all = all && bit_equal(a[k], b[k]);
      matches += all ? 1 : 0;
    }
    CHECK(matches == 1);
    CHECK(dir.entries() == std::vector<std::string>{"race.safetensors"});  // no temporary left behind
  }
}

TEST_CASE("Module::to while other threads read the parameters' grad()", "[concurrency]") {
  // Module::to replaces each parameter's .grad under the gradient lock (Note [Leaf accumulation]),
  // so readers of grad() see the gradient before or after its conversion, never a torn handle (under
  // TSan an unlocked write is reported here).
  auto net = small_mlp(7);
  sum((*net)(Tensor::ones({2, 8}, kFloat64))).backward();
  const Tensors params = net->parameters();
  std::vector<std::vector<double>> expected;
  for (const auto& p : params) expected.push_back(p.grad().to_vector());
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<long> reads{0};
  run_threads(kThreads, [&](int t) {
    if (t == 0) {
      for (int i = 0; i < 40; ++i) net->to(i % 2 == 0 ? kFloat32 : kFloat64);
      done = true;
      return;
    }
    do {  // at least one pass, however fast thread 0 is
      for (std::size_t k = 0; k < params.size(); ++k) {
        const Tensor g = params[k].grad();
        if (!g.defined() || g.numel() != static_cast<std::int64_t>(expected[k].size()) ||
            (g.dtype() != kFloat32 && g.dtype() != kFloat64))
          ++failures;
        else if (g.dtype() == kFloat32 && g.to_vector()[0] != static_cast<double>(static_cast<float>(expected[k][0])))
          ++failures;
        ++reads;
      }
    } while (!done);
  });
  CHECK(failures == 0);
  CHECK(reads > 0);
  // 40 conversions end in float64; the values went through float32 once (rounded).
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Tensor g = params[k].grad();
    REQUIRE(g.dtype() == kFloat64);
    const std::vector<double> v = g.to_vector();
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<double>(static_cast<float>(expected[k][i])));
  }
}
