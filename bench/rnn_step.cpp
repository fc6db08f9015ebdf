// Recurrent training step, ours: nn::GRU and nn::LSTM of 1 and 2 layers, input and
// hidden size 128, batch 64, 32 time steps, float32; one step is the forward over the sequence, the
// loss sum(output^2), the backward to every parameter and zero_grad. torch_rnn_step.cpp is the
// libtorch peer (torch::nn::GRU / LSTM, the same shapes and rows); bench/run_rnn_step.sh runs both
// with 1 and 2 threads and prints the ratios. Rows: `case,impl,threads,metric,value`, metric ms
// (median over --reps steps, after one warm-up step) and minflt (minor page faults per step).
//
// usage: rnn_step_bench [--threads N] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "overhead_harness.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/nn/rnn.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

namespace {

using namespace xgrad;

constexpr std::int64_t kBatch = 64, kSteps = 32, kInput = 128, kHidden = 128;

// One warm-up step, then the median over reps single steps, in ms (bench/overhead_harness.hpp's
// timer, which also counts minor page faults per step: overhead::last_minflt).
template <class Fn>
double median_ms(int reps, Fn&& fn) {
  return overhead::median_us(1, reps, fn) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 15;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[++i]);
  }
  if (threads < 1 || reps < 1) {
    std::fprintf(stderr, "usage: rnn_step_bench [--threads N >= 1] [--reps N >= 1]\n");
    return 2;
  }
  set_num_threads(threads);
  Generator gen(0);
  const Tensor x = Tensor::randn({kSteps, kBatch, kInput}, gen);
  for (const bool lstm : {false, true})
    for (const std::int64_t layers : {1, 2}) {
      nn::GRU gru(kInput, kHidden, layers);
      nn::LSTM lstm_net(kInput, kHidden, layers);
      nn::Module& m = lstm ? static_cast<nn::Module&>(lstm_net) : static_cast<nn::Module&>(gru);
      double sink = 0;
      const double ms = median_ms(reps, [&] {
        const Tensor out = lstm ? lstm_net.forward(x).output : gru.forward(x).output;
        sum(mul(out, out)).backward();
        sink += m.parameters()[0].grad().data<float>()[0];
        m.zero_grad();
      });
      if (sink == 12345.678) std::puts("");
      std::printf("%s_%lldl_b%lld_t%lld_h%lld,xgrad,%d,ms,%.4f\n", lstm ? "lstm" : "gru",
                  static_cast<long long>(layers), static_cast<long long>(kBatch), static_cast<long long>(kSteps),
                  static_cast<long long>(kHidden), threads, ms);
      std::printf("%s_%lldl_b%lld_t%lld_h%lld,xgrad,%d,minflt,%.1f\n", lstm ? "lstm" : "gru",
                  static_cast<long long>(layers), static_cast<long long>(kBatch), static_cast<long long>(kSteps),
                  static_cast<long long>(kHidden), threads, overhead::last_minflt);
      std::fflush(stdout);
    }
  return 0;
}
