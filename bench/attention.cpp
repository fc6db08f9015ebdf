// Attention for long sequences, ours: scaled_dot_product_attention (the fused, tiled kernels of issue
// 51) on q, k, v of shape (heads, L, 64), float32, forward and backward to q, k and v (the loss is
// sum(out * w) for a fixed random w). torch_attention.py is the PyTorch 1.13 peer (bmm-softmax-bmm,
// the formulation 1.13's nn.MultiheadAttention runs); bench/run_attention.sh runs both at 1 and 2
// threads and prints the ratios. Rows `case,impl,threads,metric,value`: fwdbwd_ms and fwd_ms (median
// over --reps after one warm-up), peak_mb (the process's peak resident set, VmHWM, at the end: run
// one --length per process to read it per length) and alloc_peak_mb (xgrad's own peak of live tensor
// bytes during the timed calls, inputs included). Also block_sparse_attention over a window + global
// layout of 64-blocks (case suffix _window3_global1_b64), against our dense fused attention.
//
// usage: attention_bench [--threads N] [--reps N] [--heads H] [--length L]...  (default L: 1024 2048 4096)
#include "xgrad/ops/attention.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "overhead_harness.hpp"
#include "xgrad/core/allocator.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/attention_layout.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

namespace {

using namespace xgrad;  // NOLINT(google-build-using-namespace)

double vm_hwm_mb() { return static_cast<double>(overhead::status_kb("VmHWM:")) / 1024; }

// One warm-up call, then the median over reps single calls, in ms.
template <class Fn>
double median_ms(int reps, Fn&& fn) {
  return overhead::median_us(1, reps, fn) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  std::int64_t heads = 8;
  std::vector<std::int64_t> lengths;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--heads") == 0)
      heads = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--length") == 0)
      lengths.push_back(std::atoll(argv[++i]));
  }
  if (lengths.empty()) lengths = {1024, 2048, 4096};
  if (threads < 1 || reps < 1 || heads < 1) {
    std::fprintf(stderr, "usage: attention_bench [--threads N] [--reps N] [--heads H] [--length L]...\n");
    return 2;
  }
  set_num_threads(threads);
  constexpr std::int64_t kE = 64;
  for (const std::int64_t L : lengths) {
    Generator gen(0);
    Tensor q = Tensor::randn({heads, L, kE}, gen), k = Tensor::randn({heads, L, kE}, gen),
           v = Tensor::randn({heads, L, kE}, gen);
    const Tensor w = Tensor::randn({heads, L, kE}, gen);
    q.set_requires_grad();
    k.set_requires_grad();
    v.set_requires_grad();
    char name_buf[64];
    std::snprintf(name_buf, sizeof name_buf, "L%lld_h%lld_e64", static_cast<long long>(L),
                  static_cast<long long>(heads));
    const std::string name = name_buf;
    double sink = 0;
    const double fwd = median_ms(reps, [&] {
      NoGradGuard no_grad;
      sink += scaled_dot_product_attention(q, k, v).numel();
    });
    reset_peak_memory_stats();
    const double base = static_cast<double>(memory_stats().allocated_bytes);
    const double fb = median_ms(reps, [&] {
      q.zero_grad();
      k.zero_grad();
      v.zero_grad();
      sum(mul(scaled_dot_product_attention(q, k, v), w)).backward();
      sink += q.grad().numel();
    });
    const double alloc_peak = static_cast<double>(memory_stats().peak_allocated_bytes);
    std::printf("%s,xgrad,%d,fwd_ms,%.4f\n", name.c_str(), threads, fwd);
    std::printf("%s,xgrad,%d,fwdbwd_ms,%.4f\n", name.c_str(), threads, fb);
    std::printf("%s,xgrad,%d,alloc_peak_mb,%.2f\n", name.c_str(), threads, alloc_peak / 1e6);
    std::printf("%s,xgrad,%d,alloc_extra_mb,%.2f\n", name.c_str(), threads, (alloc_peak - base) / 1e6);
    // Block-sparse: blocks of 64, a sliding window of 3 blocks each side and global block 0 (8 of
    // the L / 64 key blocks per row: density 1/16 at L = 8192).
    const std::int64_t nb = (L + 63) / 64;
    const CsrPattern layout = layout_union({sliding_window_layout(nb, nb, 3), global_layout(nb, nb, {0})});
    const double bs = median_ms(reps, [&] {
      q.zero_grad();
      k.zero_grad();
      v.zero_grad();
      sum(mul(block_sparse_attention(q, k, v, layout, 64), w)).backward();
      sink += q.grad().numel();
    });
    std::printf("%s_window3_global1_b64,xgrad_block_sparse,%d,fwdbwd_ms,%.4f\n", name.c_str(), threads, bs);
    std::printf("%s_window3_global1_b64,xgrad_block_sparse,%d,density,%.5f\n", name.c_str(), threads,
                static_cast<double>(layout.nnz()) / static_cast<double>(nb * nb));
    std::printf("%s,xgrad,%d,peak_mb,%.1f\n", name.c_str(), threads, vm_hwm_mb());
    if (sink < 0) std::printf("#\n");
  }
}
