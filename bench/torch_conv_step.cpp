// The fashion_cnn training step, the libtorch peer of conv_step.cpp: the same layers (torch::nn,
// Debian's libtorch: convolutions through oneDNN), the same batch, cases and CSV rows (impl =
// libtorch). Dropout masks and init differ (their costs do not).
//
// usage: torch_conv_step [--threads N] [--iters N] [--reps N] [--case NAME]
#include <torch/torch.h>

#include <cstdio>

#include "overhead_harness.hpp"

namespace {

using overhead::median_us;
namespace tnn = torch::nn;

void row(const char* name, int threads, double us) { overhead::row(name, "libtorch", threads, us); }

}  // namespace

int main(int argc, char** argv) {
  overhead::Options o = overhead::parse(argc, argv);
  if (o.iters == 20000) o.iters = 10;
  torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  auto x = torch::rand({64, 1, 28, 28});
  auto target = torch::arange(64, torch::kLong).remainder(10);
  tnn::Sequential model(tnn::Conv2d(tnn::Conv2dOptions(1, 32, 3).padding(1).bias(false)), tnn::BatchNorm2d(32),
                        tnn::ReLU(), tnn::MaxPool2d(tnn::MaxPool2dOptions(2)),
                        tnn::Conv2d(tnn::Conv2dOptions(32, 32, 3).padding(1).bias(false)), tnn::BatchNorm2d(32),
                        tnn::ReLU(), tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Flatten(), tnn::Dropout(0.25),
                        tnn::Linear(32 * 7 * 7, 128), tnn::ReLU(), tnn::Dropout(0.25), tnn::Linear(128, 10));
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  double sink = 0;

  if (o.only.empty() || o.only == "fashion_cnn_step_b64") {
    model->train();
    const double us = median_us(o.iters, o.reps, [&] {
      model->zero_grad(/*set_to_none=*/true);
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), target);
      loss.backward();
      opt.step();
      sink += loss.item<double>();
    });
    row("fashion_cnn_step_b64", o.threads, us);
  }
  if (o.only.empty() || o.only == "fashion_cnn_eval_b64") {
    model->eval();
    const double us = median_us(o.iters, o.reps, [&] {
      torch::NoGradGuard no_grad;
      sink += model->forward(x).data_ptr<float>()[0];
    });
    model->train();
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
  if (sink == 12345.678) std::puts("");
  return 0;
}
