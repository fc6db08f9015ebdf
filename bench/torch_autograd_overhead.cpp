// Per-op autograd overhead, the libtorch peer of autograd_overhead.cpp: the same graphs, shapes,
// repetitions and CSV rows (`case,impl,threads,metric,value`, impl = libtorch).
//
// usage: torch_autograd_overhead [--threads N] [--iters N] [--mlp-iters N] [--reps N] [--case NAME]
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "overhead_harness.hpp"

namespace {

using overhead::median_us;
using overhead::Options;

void row(const char* name, int threads, double us) { overhead::row(name, "libtorch", threads, us); }

void tanh_case(const char* name, std::int64_t n, const Options& o) {
  torch::manual_seed(1);
  auto a = torch::randn({n, n}).requires_grad_();
  auto b = torch::randn({n, n}).requires_grad_();
  auto c = torch::randn({n, n}).requires_grad_();
  double sink = 0;
  const double us = median_us(o.iters, o.reps, [&] {
    auto y = torch::tanh(a * b + c).sum();
    y.backward();
    sink += static_cast<double>(a.grad().data_ptr<float>()[0]);
    a.mutable_grad().reset();
    b.mutable_grad().reset();
    c.mutable_grad().reset();
  });
  if (sink == 12345.678) std::puts("");
  row(name, o.threads, us);
}

// The same step as ours with the libtorch C++ frontend: torch::nn::Linear, functional cross_entropy
// with class indices, torch::optim::SGD with momentum; grads set to none like ours.
void mlp_case(const Options& o) {
  constexpr std::int64_t kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;
  torch::manual_seed(2);
  auto x = torch::randn({kBatch, kIn});
  auto target = torch::arange(kBatch, torch::kLong).remainder(kOut);
  torch::nn::Sequential model(torch::nn::Linear(kIn, kHidden), torch::nn::ReLU(), torch::nn::Linear(kHidden, kOut));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  double sink = 0;
  const double us = median_us(o.mlp_iters, o.reps, [&] {
    model->zero_grad(/*set_to_none=*/true);
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), target);
    loss.backward();
    opt.step();
    sink += loss.item<double>();
  });
  if (sink == 12345.678) std::puts("");
  row("mlp_784_256_10_b64", o.threads, us);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = overhead::parse(argc, argv);
  torch::set_num_threads(o.threads);
  auto want = [&](const char* name) { return o.only.empty() || o.only == name; };
  if (want("tanh_1x1")) tanh_case("tanh_1x1", 1, o);
  if (want("tanh_64x64")) tanh_case("tanh_64x64", 64, o);
  if (want("mlp_784_256_10_b64")) mlp_case(o);
  return 0;
}
