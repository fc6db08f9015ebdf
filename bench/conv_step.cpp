// Convolution benchmark skeleton, ours (issue 17 item 4; not run yet, no numbers in the docs): the
// training step of a fashion_cnn-sized block, batch 64 of 1 x 28 x 28, conv(1->32, 3x3, pad 1) +
// relu + max_pool(2) + conv(32->32) + relu + max_pool(2), forward and backward. The peer is
// torch_conv_step.py (the same model in PyTorch); a libtorch peer and the oneDNN comparison asked by
// the issue are still to come. Rows: `case,impl,threads,metric,value`, metric fwd_ms / fwdbwd_ms (median).
//
// usage: conv_step_bench [--threads N] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/pool.hpp"

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;

template <class Fn>
double median_ms(int reps, Fn&& fn) {
  fn();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 7;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[++i]);
  }
  set_num_threads(threads);
  Generator gen(0);
  const Tensor x = Tensor::randn({64, 1, 28, 28}, gen);
  Tensor w1 = Tensor::randn({32, 1, 3, 3}, gen).mul_(0.3), b1 = Tensor::zeros({32});
  Tensor w2 = Tensor::randn({32, 32, 3, 3}, gen).mul_(0.06), b2 = Tensor::zeros({32});
  for (Tensor* p : {&w1, &b1, &w2, &b2}) p->set_requires_grad();
  auto model = [&] {
    const Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {1}, 1)), {2});
    return max_pool2d(relu(conv2d(h, w2, b2, {1}, 1)), {2});
  };
  const Tensor seed = Tensor::ones({64, 32, 7, 7});
  const double fwd = median_ms(reps, [&] {
    NoGradGuard guard;
    (void)model();
  });
  const double fwdbwd = median_ms(reps, [&] {
    for (Tensor* p : {&w1, &b1, &w2, &b2}) p->zero_grad();
    model().backward(seed);
  });
  std::printf("conv_step_b64,xgrad,%d,fwd_ms,%.6g\n", threads, fwd);
  std::printf("conv_step_b64,xgrad,%d,fwdbwd_ms,%.6g\n", threads, fwdbwd);
  return 0;
}
