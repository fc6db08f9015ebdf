// The libtorch peer of hvp.cpp's MLP case: the same 784-256-10 tanh MLP, batch 64, float32, loss and
// rows (impl = libtorch): grad_ms (torch::autograd::grad), vhp_ms (the gradient with create_graph,
// then grad of <g, v>: libtorch's double backward) and hvp_ms (the double-vjp construction, as
// torch.autograd.functional.hvp). Threads: torch::set_num_threads (intra-op), one inter-op thread.
//
// usage: torch_hvp [--threads N] [--reps N]
#include <torch/autograd.h>
#include <torch/nn/functional/linear.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "overhead_harness.hpp"

namespace {

using torch::autograd::grad;

// One warm-up step, then the median over reps single steps, in ms (bench/overhead_harness.hpp's
// timer, which also counts minor page faults per step: overhead::last_minflt).
template <class Fn>
double median_ms(int reps, Fn&& fn) {
  return overhead::median_us(1, reps, fn) / 1000.0;
}

double g_sink = 0;
void consume(const std::vector<torch::Tensor>& ts) {
  for (const auto& t : ts) g_sink += t.flatten()[0].item<double>();
}

torch::Tensor dot(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  torch::Tensor s = (a[0] * b[0]).sum();
  for (std::size_t i = 1; i < a.size(); ++i) s = s + (a[i] * b[i]).sum();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 9;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[++i]);
  }
  if (threads < 1 || reps < 1) {
    std::fprintf(stderr, "usage: torch_hvp [--threads N >= 1] [--reps N >= 1]\n");
    return 2;
  }
  torch::set_num_threads(threads);
  torch::set_num_interop_threads(1);
  torch::manual_seed(0);
  constexpr std::int64_t kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;
  const auto x = torch::randn({kBatch, kIn});
  auto target = torch::zeros({kBatch, kOut});
  for (std::int64_t b = 0; b < kBatch; ++b) target[b][b % kOut] = 1.0;
  std::vector<torch::Tensor> p = {torch::randn({kHidden, kIn}) / std::sqrt(double(kIn)), torch::randn({kHidden}) * 0.1,
                                  torch::randn({kOut, kHidden}) / std::sqrt(double(kHidden)),
                                  torch::randn({kOut}) * 0.1};
  for (auto& t : p) t.requires_grad_(true);
  std::vector<torch::Tensor> v;
  for (const auto& t : p) v.push_back(torch::randn(t.sizes()));
  auto loss = [&] {
    const auto h = torch::tanh(torch::nn::functional::linear(x, p[0], p[1]));
    const auto z = torch::nn::functional::linear(h, p[2], p[3]);
    return -(torch::log_softmax(z, -1) * target).sum() / kBatch;
  };
  const double g_ms = median_ms(reps, [&] { consume(grad({loss()}, p)); });
  const double vhp_ms = median_ms(reps, [&] {
    const auto g = grad({loss()}, p, {}, true, true);
    consume(grad({dot(g, v)}, p));
  });
  const double hvp_ms = median_ms(reps, [&] {
    // double-vjp: g(u) = J^T u with u a dummy requiring grad, then d<g(u), v>/du = J v... here on the
    // gradient function: gv = grad(<grad(L, p, create_graph), u>, u) as torch.autograd.functional.hvp.
    const auto g = grad({loss()}, p, {}, true, true);
    std::vector<torch::Tensor> u;
    for (const auto& t : p) u.push_back(torch::zeros(t.sizes(), torch::requires_grad()));
    const auto gu = grad({dot(g, u)}, p, {}, true, true);
    consume(grad({dot(gu, v)}, u));
  });
  std::printf("mlp_784_256_10_b64,libtorch,%d,grad_ms,%.4f\nmlp_784_256_10_b64,libtorch,%d,vhp_ms,%.4f\n", threads,
              g_ms, threads, vhp_ms);
  std::printf("mlp_784_256_10_b64,libtorch,%d,hvp_ms,%.4f\n", threads, hvp_ms);
  std::printf("mlp_784_256_10_b64,libtorch,%d,hvp_minflt,%.1f\n", threads, overhead::last_minflt);
  std::printf("mlp_784_256_10_b64,libtorch,%d,vhp_over_grad,%.3f\nmlp_784_256_10_b64,libtorch,%d,hvp_over_grad,%.3f\n",
              threads, vhp_ms / g_ms, threads, hvp_ms / g_ms);
  if (g_sink == 12345.678) std::puts("");
  return 0;
}
