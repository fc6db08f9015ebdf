// Recurrent training step, the libtorch peer of rnn_step.cpp: torch::nn::GRU and torch::nn::LSTM with
// the same shapes, loss and rows (impl = libtorch). Threads: torch::set_num_threads (intra-op) and
// one inter-op thread.
//
// usage: torch_rnn_step [--threads N] [--reps N]
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "overhead_harness.hpp"

namespace {

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
    std::fprintf(stderr, "usage: torch_rnn_step [--threads N >= 1] [--reps N >= 1]\n");
    return 2;
  }
  torch::set_num_threads(threads);
  torch::set_num_interop_threads(1);
  torch::manual_seed(0);
  const auto x = torch::randn({kSteps, kBatch, kInput});
  for (const bool lstm : {false, true})
    for (const std::int64_t layers : {1, 2}) {
      torch::nn::GRU gru(torch::nn::GRUOptions(kInput, kHidden).num_layers(layers));
      torch::nn::LSTM lstm_net(torch::nn::LSTMOptions(kInput, kHidden).num_layers(layers));
      double sink = 0;
      const double ms = median_ms(reps, [&] {
        const auto out = lstm ? std::get<0>(lstm_net->forward(x)) : std::get<0>(gru->forward(x));
        (out * out).sum().backward();
        auto p = lstm ? lstm_net->parameters()[0] : gru->parameters()[0];
        sink += p.grad().data_ptr<float>()[0];
        if (lstm)
          lstm_net->zero_grad();
        else
          gru->zero_grad();
      });
      if (sink == 12345.678) std::puts("");
      std::printf("%s_%lldl_b%lld_t%lld_h%lld,libtorch,%d,ms,%.4f\n", lstm ? "lstm" : "gru",
                  static_cast<long long>(layers), static_cast<long long>(kBatch), static_cast<long long>(kSteps),
                  static_cast<long long>(kHidden), threads, ms);
      std::printf("%s_%lldl_b%lld_t%lld_h%lld,libtorch,%d,minflt,%.1f\n", lstm ? "lstm" : "gru",
                  static_cast<long long>(layers), static_cast<long long>(kBatch), static_cast<long long>(kSteps),
                  static_cast<long long>(kHidden), threads, overhead::last_minflt);
      std::fflush(stdout);
    }
  return 0;
}
