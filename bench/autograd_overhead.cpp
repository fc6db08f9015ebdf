// Per-op autograd overhead, ours. The libtorch twin is torch_autograd_overhead.cpp: both build the
// same graphs with the same shapes and print CSV rows `case,impl,threads,metric,value`, where value
// is the median over repetitions of the mean time of one iteration in microseconds.
//
// Cases:
//   tanh_1x1, tanh_64x64   y = tanh(a*b + c).sum(); y.backward()   (a, b, c leaves, float32)
//   mlp_784_256_10_b64     one training step of nn::Sequential{Linear(784, 256), ReLU, Linear(256, 10)} on a
//                          batch of 64 float32 rows: cross_entropy(logits, class indices), backward,
//                          nn::SGD(lr 0.01, momentum 0.9).step(), grads set to none (zero_grad(true))
//
// usage: autograd_overhead [--threads N] [--iters N] [--mlp-iters N] [--reps N] [--case NAME]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "overhead_harness.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/reduction.hpp"

namespace {

using namespace xgrad;
using overhead::median_us;
using overhead::Options;

void row(const char* name, int threads, double us) { overhead::row(name, "xgrad", threads, us); }

void tanh_case(const char* name, std::int64_t n, const Options& o) {
  Generator gen(1);
  Tensor a = Tensor::randn({n, n}, gen).set_requires_grad();
  Tensor b = Tensor::randn({n, n}, gen).set_requires_grad();
  Tensor c = Tensor::randn({n, n}, gen).set_requires_grad();
  double sink = 0;
  const double us = median_us(o.iters, o.reps, [&] {
    Tensor y = sum(tanh(a * b + c));
    y.backward();
    sink += static_cast<double>(a.grad().data<float>()[0]);
    a.zero_grad();
    b.zero_grad();
    c.zero_grad();
  });
  if (sink == 12345.678) std::puts("");  // keeps the work observable
  row(name, o.threads, us);
}

void mlp_case(const Options& o) {
  constexpr std::int64_t kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;
  Generator gen(2);
  Tensor x = Tensor::randn({kBatch, kIn}, gen);
  std::vector<std::int64_t> target(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) target[static_cast<std::size_t>(i)] = i % kOut;
  nn::Sequential model{std::make_shared<nn::Linear>(kIn, kHidden, gen), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(kHidden, kOut, gen)};
  nn::SGD opt(model.parameters(), nn::SGDOptions(0.01).momentum(0.9));
  double sink = 0;
  const double us = median_us(o.mlp_iters, o.reps, [&] {
    opt.zero_grad(/*set_to_none=*/true);
    Tensor loss = cross_entropy(model(x), target);
    loss.backward();
    opt.step();
    sink += loss.item();
  });
  if (sink == 12345.678) std::puts("");
  row("mlp_784_256_10_b64", o.threads, us);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = overhead::parse(argc, argv);
  set_num_threads(o.threads);
  auto want = [&](const char* name) { return o.only.empty() || o.only == name; };
  if (want("tanh_1x1")) tanh_case("tanh_1x1", 1, o);
  if (want("tanh_64x64")) tanh_case("tanh_64x64", 64, o);
  if (want("mlp_784_256_10_b64")) mlp_case(o);
  return 0;
}
