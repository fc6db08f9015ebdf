// The fashion_cnn training step, the libtorch peer of conv_step.cpp: the same layers, batch, cases
// and CSV rows (impl = libtorch), with Debian's libtorch (convolutions through oneDNN) and its Adam.
// Dropout masks and init differ (their costs do not).
//
// The model is written with the functions torch::nn's modules call in their forward (conv2d,
// batch_norm with running statistics, relu, max_pool2d, flatten, dropout, linear), on parameter
// tensors held here, instead of a torch::nn::Sequential of those modules: torch/torch.h and the
// modules' headers made this the slowest file of the build, most of it parsing, and a module's forward
// adds only a call around the same function (docs/design.md, Compile time; figures in
// bench/results/compile_time.csv).
//
// usage: torch_conv_step [--threads N] [--iters N] [--reps N] [--case NAME]
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "overhead_harness.hpp"

namespace {

using overhead::median_us;

void row(const char* name, int threads, double us) { overhead::row(name, "libtorch", threads, us); }

/// A parameter drawn uniformly from [-1/sqrt(fan_in), 1/sqrt(fan_in)] (torch::nn's default bound).
torch::Tensor param(at::IntArrayRef shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return ((torch::rand(shape) * 2 - 1) * bound).requires_grad_();
}

/// Conv2d(cin, 32, 3, padding 1, no bias) -> BatchNorm2d(32) -> ReLU -> MaxPool2d(2), as torch::nn's
/// modules compute it (BatchNorm2d: momentum 0.1, eps 1e-5, running statistics updated in training).
struct ConvBlock {
  torch::Tensor w, gamma, beta, running_mean, running_var;
  explicit ConvBlock(int64_t cin)
      : w(param({32, cin, 3, 3}, cin * 9)),
        gamma(torch::ones({32}).requires_grad_()),
        beta(torch::zeros({32}).requires_grad_()),
        running_mean(torch::zeros({32})),
        running_var(torch::ones({32})) {}
  torch::Tensor forward(const torch::Tensor& x, bool training) const {
    auto y = torch::conv2d(x, w, {}, 1, 1);
    y = torch::batch_norm(y, gamma, beta, running_mean, running_var, training, 0.1, 1e-5, false);
    return torch::max_pool2d(torch::relu(y), 2);
  }
};

struct FashionCnn {
  ConvBlock b1{1}, b2{32};
  torch::Tensor w3 = param({128, 32 * 7 * 7}, 32 * 7 * 7), c3 = param({128}, 32 * 7 * 7);
  torch::Tensor w4 = param({10, 128}, 128), c4 = param({10}, 128);
  std::vector<torch::Tensor> parameters() const {
    return {b1.w, b1.gamma, b1.beta, b2.w, b2.gamma, b2.beta, w3, c3, w4, c4};
  }
  torch::Tensor forward(const torch::Tensor& x, bool training) const {
    auto h = b2.forward(b1.forward(x, training), training).flatten(1);
    h = torch::relu(torch::linear(torch::dropout(h, 0.25, training), w3, c3));
    return torch::linear(torch::dropout(h, 0.25, training), w4, c4);
  }
};

}  // namespace

int main(int argc, char** argv) {
  overhead::Options o = overhead::parse(argc, argv);
  if (o.iters == 20000) o.iters = 10;
  torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  auto x = torch::rand({64, 1, 28, 28});
  auto target = torch::arange(64, torch::kLong).remainder(10);
  FashionCnn model;
  const std::vector<torch::Tensor> params = model.parameters();
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-3));
  double sink = 0;

  if (o.only.empty() || o.only == "fashion_cnn_step_b64") {
    const double us = median_us(o.iters, o.reps, [&] {
      for (const auto& p : params) p.mutable_grad().reset();  // Module::zero_grad(set_to_none)
      auto loss = torch::cross_entropy_loss(model.forward(x, /*training=*/true), target);
      loss.backward();
      opt.step();
      sink += loss.item<double>();
    });
    row("fashion_cnn_step_b64", o.threads, us);
  }
  if (o.only.empty() || o.only == "fashion_cnn_eval_b64") {
    const double us = median_us(o.iters, o.reps, [&] {
      torch::NoGradGuard no_grad;
      sink += model.forward(x, /*training=*/false).data_ptr<float>()[0];
    });
    row("fashion_cnn_eval_b64", o.threads, us);
  }
  if (o.only.empty() || o.only == "conv_block_fwdbwd_b64") {
    auto h = torch::randn({64, 32, 14, 14});
    auto w = (torch::randn({32, 32, 3, 3}) * 0.06).requires_grad_();
    auto gamma = torch::ones({32}).requires_grad_(), beta = torch::zeros({32}).requires_grad_();
    auto seed = torch::ones({64, 32, 7, 7});
    const double us = median_us(o.iters, o.reps, [&] {
      for (auto* p : {&w, &gamma, &beta}) p->mutable_grad().reset();
      auto y = torch::conv2d(h, w, {}, 1, 1);
      auto z = torch::max_pool2d(torch::relu(torch::batch_norm(y, gamma, beta, {}, {}, true, 0.1, 1e-5, false)), 2);
      z.backward(seed);
    });
    row("conv_block_fwdbwd_b64", o.threads, us);
  }
  // conv_step.cpp's extra convolution shapes, forward and backward to x and w (seed ones)
  struct ConvCase {
    const char* name;
    std::vector<std::int64_t> x, w;
    std::int64_t padding, groups;
    bool one_d;
  };
  const ConvCase conv_cases[] = {
      {"conv1d_fwdbwd_b64", {64, 32, 256}, {64, 32, 5}, 2, 1, true},
      {"depthwise_fwdbwd_b64", {64, 64, 28, 28}, {64, 1, 3, 3}, 1, 64, false},
      {"grouped4_fwdbwd_b64", {64, 64, 14, 14}, {64, 16, 3, 3}, 1, 4, false},
  };
  for (const ConvCase& c : conv_cases) {
    if (!o.only.empty() && o.only != c.name) continue;
    auto cx = torch::randn(c.x).requires_grad_();
    auto cw = (torch::randn(c.w) * 0.1).requires_grad_();
    const double us = median_us(o.iters, o.reps, [&] {
      cx.mutable_grad().reset();
      cw.mutable_grad().reset();
      auto y = c.one_d ? torch::conv1d(cx, cw, {}, 1, c.padding, 1, c.groups)
                       : torch::conv2d(cx, cw, {}, 1, c.padding, 1, c.groups);
      y.backward(torch::ones_like(y));
    });
    row(c.name, o.threads, us);
  }
  if (sink == 12345.678) std::puts("");
  return 0;
}
