// The fashion_cnn training step, ours: examples/fashion_cnn's model
// (examples/fashion_cnn/model.hpp: two conv 3x3 + batch norm + relu + max-pool blocks, dropout, a
// 1568-128-10 head) on a batch of 64 1x28x28 images: forward, cross-entropy, backward, Adam step.
// The peer is torch_conv_step.cpp (the same layers with libtorch's C++ frontend; Debian's libtorch
// runs its convolutions through oneDNN); torch_conv_step.py is the same step in PyTorch.
// Cases (rows `case,impl,threads,metric,value`, metric us = median over reps of the mean time per
// iteration, minflt = minor page faults per iteration):
//   fashion_cnn_step_b64   training step (train mode), grads set to none before each step
//   fashion_cnn_eval_b64   forward in eval mode without a graph
//   conv_block_fwdbwd_b64  the second conv block alone: conv2d(32->32) + batch_norm + relu +
//                          max_pool2d, forward and backward (the dominant cost of the step)
// run_conv_step.sh runs ours and the peer with 1 and 2 threads and prints the ratios.
//
// usage: conv_step_bench [--threads N] [--iters N] [--reps N] [--case NAME]
#include <cstdio>
#include <string>

#include "../examples/fashion_cnn/model.hpp"
#include "overhead_harness.hpp"
#include "xgrad/xgrad.hpp"

namespace {

using namespace xgrad;
using overhead::median_us;

void row(const char* name, int threads, double us) { overhead::row(name, "xgrad", threads, us); }

}  // namespace

int main(int argc, char** argv) {
  overhead::Options o = overhead::parse(argc, argv);
  if (o.iters == 20000) o.iters = 10;  // the harness's default is for tiny ops
  set_num_threads(o.threads);
  Generator gen(0);
  const Tensor x = Tensor::rand({64, 1, 28, 28}, gen);
  std::vector<double> labels(64);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<double>(i % 10);
  const Tensor target = Tensor::from_vector(labels, {64}, kInt64);
  auto model = examples::make_fashion_cnn(0);
  nn::Adam opt(model->parameters(), nn::AdamOptions(1e-3));
  double sink = 0;

  if (o.only.empty() || o.only == "fashion_cnn_step_b64") {
    model->train();
    const double us = median_us(o.iters, o.reps, [&] {
      opt.zero_grad(true);
      Tensor loss = cross_entropy(model->forward(x), target);
      loss.backward();
      opt.step();
      sink += loss.item();
    });
    row("fashion_cnn_step_b64", o.threads, us);
  }
  if (o.only.empty() || o.only == "fashion_cnn_eval_b64") {
    model->eval();
    const double us = median_us(o.iters, o.reps, [&] {
      NoGradGuard no_grad;
      sink += model->forward(x).data<float>()[0];
    });
    model->train();
    row("fashion_cnn_eval_b64", o.threads, us);
  }
  if (o.only.empty() || o.only == "conv_block_fwdbwd_b64") {
    const Tensor h = Tensor::randn({64, 32, 14, 14}, gen);
    Tensor w = Tensor::randn({32, 32, 3, 3}, gen).mul_(0.06), gamma = Tensor::ones({32}), beta = Tensor::zeros({32});
    for (Tensor* p : {&w, &gamma, &beta}) p->set_requires_grad();
    const Tensor seed = Tensor::ones({64, 32, 7, 7});
    const double us = median_us(o.iters, o.reps, [&] {
      for (Tensor* p : {&w, &gamma, &beta}) p->zero_grad();
      const Tensor y = conv2d(h, w, Tensor(), {1}, 1);
      max_pool2d(relu(batch_norm(y, Tensor(), Tensor(), gamma, beta, true)), {2}).backward(seed);
    });
    row("conv_block_fwdbwd_b64", o.threads, us);
  }
  if (sink == 12345.678) std::puts("");
  return 0;
}
