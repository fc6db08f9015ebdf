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
//   conv1d_fwdbwd_b64      conv1d x (64, 32, 256), w (64, 32, 5), padding 2: forward and backward to x, w
//   depthwise_fwdbwd_b64   conv2d x (64, 64, 28, 28), w (64, 1, 3, 3), groups 64 (depthwise), padding 1
//   grouped4_fwdbwd_b64    conv2d x (64, 64, 14, 14), w (64, 16, 3, 3), groups 4, padding 1
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
  // Convolution shapes beyond the fashion_cnn model, forward and backward to x and w (seed ones).
  struct ConvCase {
    const char* name;
    Shape x, w;
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
    const Tensor cx = Tensor::randn(c.x, gen).set_requires_grad();
    const Tensor cw = Tensor::randn(c.w, gen).mul_(0.1).set_requires_grad();
    const double us = median_us(o.iters, o.reps, [&] {
      Tensor gx = cx, gw = cw;
      gx.zero_grad();
      gw.zero_grad();
      const Tensor y = c.one_d ? conv1d(cx, cw, Tensor(), {1}, c.padding, {1}, c.groups)
                               : conv2d(cx, cw, Tensor(), {1}, c.padding, {1}, c.groups);
      y.backward(Tensor::ones(y.shape()));
    });
    row(c.name, o.threads, us);
  }
  if (sink == 12345.678) std::puts("");
  return 0;
}
