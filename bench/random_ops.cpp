// Random ops benchmark, ours. The PyTorch peer is torch_random_ops.py (the same cases and sizes);
// run_random_ops.sh runs both with 1 and 2 threads and prints the ratios. Rows:
// `case,impl,threads,metric,value`.
//
// The size is a graph user's hidden layer: 82,115 nodes x 128 features, float32 (10.5 M elements).
// Cases (fwd_ms: forward without grad; fwdbwd_ms: forward on a leaf that requires grad and backward
// with a seed of ones):
//   dropout   xgrad::dropout(x, 0.5, train) (torch.nn.functional.dropout(x, 0.5, training=True))
//   rand      Tensor::rand (torch.rand), fwd only
//   randn     Tensor::randn (torch.randn), fwd only
//
// usage: random_ops_bench [--threads N] [--reps N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gcn_graph.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/dropout.hpp"

namespace {

using namespace xgrad;
using namespace xgrad::bench;  // NOLINT(google-build-using-namespace)

constexpr std::int64_t kRows = 82115, kCols = 128;

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: random_ops_bench [--threads N] [--reps N]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  manual_seed(1);
  const Tensor x = Tensor::randn({kRows, kCols});
  Tensor xg = x.detach().set_requires_grad();
  const Tensor seed = Tensor::ones({kRows, kCols});
  const auto row = [&](const char* c, const char* metric, double v) { print_row(c, threads, metric, v); };
  row("dropout", "fwd_ms",
      median_ms(
          [&] {
            NoGradGuard no_grad;
            (void)dropout(x, 0.5, true);
          },
          reps));
  row("dropout", "fwdbwd_ms",
      median_ms(
          [&] {
            xg.zero_grad();
            dropout(xg, 0.5, true).backward(seed);
          },
          reps));
  row("rand", "fwd_ms", median_ms([&] { (void)Tensor::rand({kRows, kCols}); }, reps));
  row("randn", "fwd_ms", median_ms([&] { (void)Tensor::randn({kRows, kCols}); }, reps));
  return 0;
}
