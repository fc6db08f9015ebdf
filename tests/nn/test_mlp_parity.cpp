// End-to-end parity with PyTorch 1.13: the same 784-256-10 MLP (nn::Sequential of Linear, ReLU,
// Linear), trained with cross_entropy on class indices and SGD (lr 0.01, momentum 0.9) for 50
// steps of 64 samples from the same initial weights and data, must give the same loss at every step
// (1e-4 relative in float32, 1e-10 in float64) and the same final parameters. The data and the
// initial weights are made here and handed to tests/nn/mlp_parity.py as .npy files; the script
// trains torch.nn.Linear layers loaded from them with torch.optim.SGD and writes its losses and final
// parameters back. Training is also repeated with 1 and 2 threads and must be bit-identical, and the
// fused linear op is checked against its composite formula.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;

namespace {

constexpr std::int64_t kSteps = 50, kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;

// Synthetic data: kSteps batches of kBatch standard-normal rows and uniform class indices.
struct Data {
  Tensor x;                     // (kSteps, kBatch, kIn)
  std::vector<std::int64_t> y;  // kSteps * kBatch class indices
  Tensor y_tensor() const {     // the same as float64 (kSteps, kBatch), for the .npy file
    std::vector<double> v(y.begin(), y.end());
    return Tensor::from_vector(v, {kSteps, kBatch}, kFloat64);
  }
};

Data make_data(Dtype dtype) {
  Generator gen(2024);
  Data d;
  d.x = Tensor::randn({kSteps, kBatch, kIn}, gen, dtype);
  d.y.resize(static_cast<std::size_t>(kSteps * kBatch));
  for (auto& label : d.y) label = static_cast<std::int64_t>(gen.integer(kOut));
  return d;
}

nn::Sequential make_model(Dtype dtype) {
  Generator gen(7);
  return nn::Sequential{std::make_shared<nn::Linear>(kIn, kHidden, gen, true, dtype), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(kHidden, kOut, gen, true, dtype)};
}

// Batch b of the stacked data, as its own (kBatch, kIn) tensor.
Tensor batch_x(const Tensor& x, std::int64_t b) {
  return dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Tensor::from_data<T>(std::span<const T>(x.data<T>() + b * kBatch * kIn, kBatch * kIn), {kBatch, kIn});
  });
}

struct Trained {
  Tensor losses;   // (kSteps) float64: the loss of each step, before its update
  Tensors params;  // final parameters: 0.weight, 0.bias, 2.weight, 2.bias
};

Trained train(nn::Sequential& model, const Data& data) {
  nn::SGD opt(model.parameters(), nn::SGDOptions(0.01).momentum(0.9));
  std::vector<double> losses;
  for (std::int64_t b = 0; b < kSteps; ++b) {
    opt.zero_grad();
    const auto first = data.y.begin() + b * kBatch;
    Tensor loss = cross_entropy(model(batch_x(data.x, b)), std::vector<std::int64_t>(first, first + kBatch));
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  Trained t{Tensor::from_vector(losses, {kSteps}, kFloat64), {}};
  for (const auto& p : model.parameters()) t.params.push_back(p.detach().clone_data());
  return t;
}

}  // namespace

TEST_CASE("MLP training matches PyTorch step by step (float32 and float64)", "[mlp][parity][python]") {
  const auto dir = std::filesystem::temp_directory_path() / ("xgrad_mlp_parity_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> names{"0.weight", "0.bias", "2.weight", "2.bias"};
  struct Run {
    Dtype dtype;
    Tensors init;
    Trained ours;
  };
  std::vector<Run> runs;
  for (Dtype dtype : {kFloat32, kFloat64}) {
    const std::string prefix = (dir / dtype_name(dtype)).string() + "__";
    const Data data = make_data(dtype);
    nn::Sequential model = make_model(dtype);
    const auto named = model.named_parameters();
    REQUIRE(named.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      REQUIRE(named[i].first == names[i]);
      save_npy(prefix + "init_" + names[i] + ".npy", named[i].second);
    }
    save_npy(prefix + "x.npy", data.x);
    save_npy(prefix + "y.npy", data.y_tensor());
    Tensors init;
    for (const auto& p : model.parameters()) init.push_back(p.detach().clone_data());
    runs.push_back({dtype, init, train(model, data)});
  }
  test::run_python_script("tests/nn/mlp_parity.py", dir.string());

  for (const auto& run : runs) {
    const bool f32 = run.dtype == kFloat32;
    const double rtol = f32 ? 1e-4 : 1e-10;
    const std::string prefix = (dir / dtype_name(run.dtype)).string() + "__";
    INFO("dtype " << dtype_name(run.dtype));
    const Tensor ref = load_npy(prefix + "torch_losses.npy");
    REQUIRE(ref.shape() == Shape{kSteps});
    const std::vector<double> ours = run.ours.losses.to_vector(), theirs = ref.to_vector();
    for (std::int64_t s = 0; s < kSteps; ++s) {
      const double a = ours[static_cast<std::size_t>(s)], b = theirs[static_cast<std::size_t>(s)];
      INFO("step " << s << ": ours " << a << ", torch " << b);
      CHECK(std::isfinite(a));
      CHECK(std::abs(a - b) <= rtol * std::abs(b));
    }
    // Training must have done something, or equal losses would prove little (the batches are new
    // random data each step, so the loss itself need not fall).
    for (std::size_t i = 0; i < run.init.size(); ++i) CHECK_FALSE(bit_equal(run.init[i], run.ours.params[i]));
    for (std::size_t i = 0; i < names.size(); ++i) {
      const Tensor p = load_npy(prefix + "torch_final_" + names[i] + ".npy");
      INFO("final parameter " << names[i]);
      REQUIRE(p.shape() == run.ours.params[i].shape());
      CHECK(allclose(run.ours.params[i], p, rtol, f32 ? 1e-6 : 1e-13));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("MLP training is bit-identical with 1 and 2 threads", "[mlp][threads]") {
  for (Dtype dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    const Data data = make_data(dtype);
    test::require_thread_deterministic([&] {
      nn::Sequential model = make_model(dtype);
      Trained t = train(model, data);
      Tensors out{t.losses};
      out.insert(out.end(), t.params.begin(), t.params.end());
      return out;
    });
  }
}

// nn::functional::linear is one fused op (Note [Fused linear], ops/linear.cpp); check it against the
// composite matmul(x, transpose(W)) + b, values and all three gradients, at shapes that reach its
// edges: a product large enough to be cut into parallel GEMM tiles with more than one block of bias
// columns, (batch..., in) and (in) inputs, no rows, and in = 0.
TEST_CASE("fused linear equals matmul(x, W^T) + b, and is thread-deterministic", "[mlp][linear]") {
  struct Case {
    Shape x;
    std::int64_t out;
  };
  Generator gen(11);
  for (const Case& c : {Case{{200, 300}, 600}, Case{{4, 5, 7}, 3}, Case{{7}, 3}, Case{{0, 7}, 3}, Case{{4, 0}, 3}}) {
    const std::int64_t in = c.x.back();
    INFO("x " << shape_str(c.x) << ", out " << c.out);
    const Tensor x0 = Tensor::randn(c.x, gen, kFloat64), w0 = Tensor::randn({c.out, in}, gen, kFloat64),
                 b0 = Tensor::randn({c.out}, gen, kFloat64);
    auto run = [&](bool fused) {
      Tensor x = x0.clone_data().set_requires_grad(), w = w0.clone_data().set_requires_grad(),
             b = b0.clone_data().set_requires_grad();
      Tensor y = fused ? nn::functional::linear(x, w, b) : add(matmul(x, transpose(w, 0, 1)), b);
      Generator seed_gen(3);
      y.backward(Tensor::randn(y.shape(), seed_gen, kFloat64));
      return Tensors{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const Tensors fused = run(true), ref = run(false);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      INFO("result " << i << " (y, dx, dW, db)");
      REQUIRE(fused[i].shape() == ref[i].shape());
      CHECK(allclose(fused[i], ref[i], 1e-12, 1e-12));
    }
    test::require_thread_deterministic([&] { return run(true); });
  }
}
