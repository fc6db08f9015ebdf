// Cost of a Hessian-vector product, ours: for each workload one gradient
// (forward + backward, xgrad::grad), vhp (gradient recorded with create_graph, then one backward
// through it: what torch users write as double backward) and hvp (the double-vjp construction of
// core/functional.hpp, one backward more). torch_hvp.cpp is the libtorch peer of the MLP case;
// bench/run_hvp.sh runs both with 1 and 2 threads and prints the ratios.
//
//   mlp      784-256-10 tanh MLP, batch 64, float32, loss -(log_softmax(z) * onehot).sum() / 64,
//            derivatives with respect to the four parameters;
//   resample the seed resampling convolution (N=20, A=500, B=50,000, fine uniform on [0,1],
//            cos^2 response of width 0.03, float32), loss sum((resample_conv(f) - y)^2),
//            derivatives with respect to f (the op supports create_graph in f).
//
// Rows: `case,impl,threads,metric,value`, metrics grad_ms, vhp_ms, hvp_ms (medians over --reps after
// one warm-up) hvp_minflt (minor page faults per hvp) and the ratios vhp_over_grad, hvp_over_grad
// (target <= 4).
//
// usage: hvp_bench [--threads N] [--reps N] [--case mlp|resample]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "overhead_harness.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/functional.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/softmax.hpp"

namespace {

using namespace xgrad;

// One warm-up step, then the median over reps single steps, in ms (bench/overhead_harness.hpp's
// timer, which also counts minor page faults per step: overhead::last_minflt).
template <class Fn>
double median_ms(int reps, Fn&& fn) {
  return overhead::median_us(1, reps, fn) / 1000.0;
}

double g_sink = 0;
void consume(const Tensors& ts) {
  for (const auto& t : ts) g_sink += t.to(kFloat64).data<double>()[0];
}

void report(const char* name, int threads, const std::function<Tensor(const Tensors&)>& loss, const Tensors& params,
            int reps) {
  Generator gen(1);
  Tensors v;
  for (const auto& p : params) v.push_back(Tensor::randn(p.shape(), gen, p.dtype()));
  const double g_ms = median_ms(reps, [&] { consume(grad({loss(params)}, params)); });
  const double vhp_ms = median_ms(reps, [&] { consume(vhp(loss, params, v).second); });
  const double hvp_ms = median_ms(reps, [&] { consume(hvp(loss, params, v).second); });
  const double hvp_minflt = overhead::last_minflt;
  std::printf("%s,xgrad,%d,grad_ms,%.4f\n%s,xgrad,%d,vhp_ms,%.4f\n%s,xgrad,%d,hvp_ms,%.4f\n", name, threads, g_ms, name,
              threads, vhp_ms, name, threads, hvp_ms);
  std::printf("%s,xgrad,%d,hvp_minflt,%.1f\n", name, threads, hvp_minflt);
  std::printf("%s,xgrad,%d,vhp_over_grad,%.3f\n%s,xgrad,%d,hvp_over_grad,%.3f\n", name, threads, vhp_ms / g_ms, name,
              threads, hvp_ms / g_ms);
  std::fflush(stdout);
}

void mlp_case(int threads, int reps) {
  constexpr std::int64_t kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;
  Generator gen(0);
  const Tensor x = Tensor::randn({kBatch, kIn}, gen);
  std::vector<double> onehot(static_cast<std::size_t>(kBatch * kOut), 0.0);
  for (std::int64_t b = 0; b < kBatch; ++b) onehot[static_cast<std::size_t>(b * kOut + b % kOut)] = 1.0;
  const Tensor target = Tensor::from_vector(onehot, {kBatch, kOut});
  auto scaled = [&](const Shape& s, double k) { return mul(Tensor::randn(s, gen), k).set_requires_grad(); };
  const Tensors params = {scaled({kHidden, kIn}, 1 / std::sqrt(double(kIn))), scaled({kHidden}, 0.1),
                          scaled({kOut, kHidden}, 1 / std::sqrt(double(kHidden))), scaled({kOut}, 0.1)};
  auto loss = [&](const Tensors& p) {
    const Tensor h = tanh(linear(x, p[0], p[1]));
    const Tensor z = linear(h, p[2], p[3]);
    return mul(sum(mul(log_softmax(z, -1), target)), -1.0 / kBatch);
  };
  report("mlp_784_256_10_b64", threads, loss, params, reps);
}

void resample_case(int threads, int reps) {
  constexpr std::int64_t N = 20, A = 500, B = 50000;
  constexpr double w = 0.03;
  Generator gen(0);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (std::int64_t n = 0; n < N; ++n) {
    auto* r = &c[static_cast<std::size_t>(n * A)];
    for (std::int64_t a = 0; a < A; ++a) r[a] = gen.uniform() * (1 - w) + w / 2;
    std::sort(r, r + A);
  }
  const Tensor coarse = Tensor::from_vector(c, {N, A});
  const Response resp = Response::callable([](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                                           [](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
  const Tensor y = Tensor::randn({N, A}, gen);
  const Tensors params = {Tensor::randn({N, B}, gen).set_requires_grad()};
  auto loss = [&](const Tensors& p) {
    const Tensor r = sub(resample_conv(p[0], coarse, grid, resp), y);
    return sum(mul(r, r));
  };
  report("resample_seed_f", threads, loss, params, reps);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 9;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--case") == 0)
      only = argv[++i];
  }
  if (threads < 1 || reps < 1) {
    std::fprintf(stderr, "usage: hvp_bench [--threads N >= 1] [--reps N >= 1] [--case mlp|resample]\n");
    return 2;
  }
  set_num_threads(threads);
  if (only.empty() || only == "mlp") mlp_case(threads, reps);
  if (only.empty() || only == "resample") resample_case(threads, reps);
  if (g_sink == 12345.678) std::puts("");
  return 0;
}
