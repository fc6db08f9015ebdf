// Block-sparse linear, ours, plus OpenBLAS dense sgemm on the full shape as the throughput reference.
// The PyTorch peers (ModuleList loop, grouped bmm, masked dense nn.Linear) are in
// torch_block_sparse_linear.py; run_block_sparse.sh runs both in one go and prints the ratios and the
// crossover table. Rows: `case,impl,threads,metric,value` (metric fwd_ms / fwdbwd_ms: median of --reps
// timed runs after a warm-up of at least 1 s; param_bytes; peak_bytes).
//
// Shapes (the seed-004 workload): in = out = 4096, batch 256, float32.
//   rand_b{8,32,64,128}_d{64,16,4}   random block masks of density 1/64, 1/16, 1/4
//   rand_b{..}_d{2,1}                densities 1/2 and 1 (for the crossover table only)
//   diag_g64x64, diag_g16x256        block-diagonal: 64 groups of 64, 16 groups of 256
//   dense                            OpenBLAS sgemm: forward Y = X W^T; forward+backward adds
//                                    dX = G W and dW = G^T X (3 GEMMs, like a dense layer)
// A training step (fwdbwd) computes y, then the gradients of x, the stored blocks and the bias.
//
// usage: block_sparse_linear [--threads N] [--reps N] [--case SUBSTRING] [--peak CASE] [--passes] [--dense-impl NAME]
//   --passes also times each kernel alone (forward, input, weight and bias gradient; pass_*_ms rows)
//   --dense-impl names the OpenBLAS reference rows (default openblas_sgemm)
//   --peak CASE runs one training step of CASE only and prints the growth of the resident set
//   (VmHWM after - VmRSS before), so run it in a fresh process per case.
#include "xgrad/ops/block_sparse_linear.hpp"

#include <cblas.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "overhead_harness.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/kernels/block_sparse_kernels.hpp"

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;
constexpr std::int64_t kIn = 4096, kOut = 4096, kBatch = 256;

struct Options {
  int threads = 1;
  int reps = 5;
  std::string only;
  std::string peak;
  bool passes = false;
  std::string dense_impl = "openblas_sgemm";
};

// Minor page faults of this process so far (fresh pages touched: what a storage cache avoids).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Median wall time and median process CPU time (all threads) of one call, in ms. The CPU time helps
// read results taken on a busy machine: with 1 thread it is close to the wall time of a quiet run.
// Warm-up: calls for at least 1 s (and twice). One call (or 0.3 s) was not enough here: the first case timed
// in a process ran much slower than the same case timed later (fresh heap pages, the VM's memory
// manager), which made a forward look slower than forward+backward (bench/results/build_and_run_times.md).
struct Timing {
  double wall_ms, cpu_ms, minflt;  // medians of wall and CPU time; minor page faults per call (mean)
};
Timing median_ms(int reps, const std::function<void()>& fn) {
  const auto w0 = Clock::now();
  for (int i = 0; i < 2 || Clock::now() - w0 < std::chrono::milliseconds(1000); ++i) fn();
  std::vector<double> t, c;
  const long f0 = minor_faults();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    const double c0 = cpu_ms();
    fn();
    c.push_back(cpu_ms() - c0);
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double faults = static_cast<double>(minor_faults() - f0) / reps;
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  return {t[t.size() / 2], c[c.size() / 2], faults};
}

void row(const std::string& c, const char* impl, int threads, const char* metric, double v) {
  std::printf("%s,%s,%d,%s,%.6g\n", c.c_str(), impl, threads, metric, v);
  std::fflush(stdout);
}
void time_rows(const std::string& c, const char* impl, int threads, const char* metric, const Timing& v) {
  const std::string stem = std::string(metric).substr(0, std::string(metric).size() - 3);
  row(c, impl, threads, metric, v.wall_ms);
  row(c, impl, threads, (stem + "_cpu_ms").c_str(), v.cpu_ms);
  row(c, impl, threads, (stem + "_minflt").c_str(), v.minflt);
}

struct Case {
  std::string name;
  std::function<BlockSparsePattern()> make;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (std::int64_t bs : {8, 32, 64, 128})
    for (std::int64_t inv : {64, 16, 4, 2, 1})
      v.push_back({"rand_b" + std::to_string(bs) + "_d" + std::to_string(inv), [bs, inv] {
                     // Random mask with exactly round(n / inv) blocks (a fixed seed per case).
                     const std::int64_t nr = kOut / bs, nc = kIn / bs, n = nr * nc, keep = n / inv;
                     Generator gen(static_cast<std::uint64_t>(1000 * bs + inv));
                     std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
                     for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
                     partial_shuffle(ids, static_cast<std::size_t>(keep), gen);
                     std::vector<std::pair<std::int64_t, std::int64_t>> coords;
                     for (std::int64_t i = 0; i < keep; ++i)
                       coords.emplace_back(ids[static_cast<std::size_t>(i)] / nc,
                                           ids[static_cast<std::size_t>(i)] % nc);
                     return BlockSparsePattern::from_block_coords(InFeatures{kIn}, OutFeatures{kOut},
                                                                  {InFeatures{bs}, OutFeatures{bs}}, coords);
                   }});
  v.push_back({"diag_g64x64", [] {
                 return BlockSparsePattern::block_diagonal(
                     std::vector<BlockSparsePattern::DiagonalGroup>(64, {InFeatures{64}, OutFeatures{64}}));
               }});
  v.push_back({"diag_g16x256", [] {
                 return BlockSparsePattern::block_diagonal(
                     std::vector<BlockSparsePattern::DiagonalGroup>(16, {InFeatures{256}, OutFeatures{256}}));
               }});
  return v;
}

using overhead::status_kb;

struct Layer {
  BlockSparsePattern p;
  Tensor x, w, b, seed;
  explicit Layer(BlockSparsePattern pattern) : p(std::move(pattern)) {
    Generator gen(7);
    x = Tensor::randn({kBatch, kIn}, gen).set_requires_grad();
    w = Tensor::randn(p.weight_shape(), gen).mul_(0.01).set_requires_grad();
    b = Tensor::randn({kOut}, gen).set_requires_grad();
    seed = Tensor::ones({kBatch, kOut});
  }
  void forward() const { (void)block_sparse_linear(x, w, b, p); }
  void train_step() {
    Tensor y = block_sparse_linear(x, w, b, p);
    y.backward(seed);
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
  }
};

void run_dense(const Options& o) {
  // The throughput reference runs OpenBLAS with the same thread count as ours (xgrad keeps OpenBLAS
  // itself single-threaded, Note [Deterministic GEMM]; restored below).
  openblas_set_num_threads(o.threads);
  std::vector<float> x(kBatch * kIn), w(kOut * kIn), y(kBatch * kOut), g(kBatch * kOut), dx(kBatch * kIn),
      dw(kOut * kIn);
  Generator gen(3);
  for (auto* v : {&x, &w, &g})
    for (auto& e : *v) e = static_cast<float>(gen.uniform(-1, 1));
  auto fwd = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kOut, kIn, 1.f, x.data(), kIn, w.data(), kIn, 0.f,
                y.data(), kOut);
  };
  auto fb = [&] {
    fwd();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, kIn, kOut, 1.f, g.data(), kOut, w.data(), kIn, 0.f,
                dx.data(), kIn);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kOut, kIn, kBatch, 1.f, g.data(), kOut, x.data(), kIn, 0.f,
                dw.data(), kIn);
  };
  // OpenBLAS picks its kernels at load time, by CPU or by OPENBLAS_CORETYPE (this machine's environment
  // sets Haswell: AVX2). The rows are named o.dense_impl (run_block_sparse.sh names its second, AVX-512
  // reference openblas_sgemm_avx512); the core OpenBLAS reports is printed to stderr.
  const std::string& impl = o.dense_impl;
  std::fprintf(stderr, "%s: OpenBLAS core %s\n", impl.c_str(), openblas_get_corename());
  time_rows("dense", impl.c_str(), o.threads, "fwd_ms", median_ms(o.reps, fwd));
  time_rows("dense", impl.c_str(), o.threads, "fwdbwd_ms", median_ms(o.reps, fb));
  row("dense", impl.c_str(), o.threads, "param_bytes", double(kOut * kIn + kOut) * 4);
  openblas_set_num_threads(1);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--threads"))
      o.threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--reps"))
      o.reps = std::atoi(next());
    else if (!std::strcmp(argv[i], "--case"))
      o.only = next();
    else if (!std::strcmp(argv[i], "--peak"))
      o.peak = next();
    else if (!std::strcmp(argv[i], "--passes"))
      o.passes = true;
    else if (!std::strcmp(argv[i], "--dense-impl") && i + 1 < argc)
      o.dense_impl = argv[++i];
    else {
      std::fprintf(
          stderr,
          "usage: %s [--threads N] [--reps N] [--case SUBSTRING] [--peak CASE] [--passes] [--dense-impl NAME]\n",
          argv[0]);
      return 2;
    }
  }
  set_num_threads(o.threads);
  if (!o.peak.empty()) {
    for (const auto& c : cases())
      if (c.name == o.peak) {
        const BlockSparsePattern p = c.make();
        const long before = status_kb("VmRSS:");
        {
          Layer layer(p);
          layer.train_step();
        }
        const long peak = status_kb("VmHWM:");
        row(c.name, "xgrad", o.threads, "peak_bytes", double(peak - before) * 1024);
        return 0;
      }
    std::fprintf(stderr, "unknown case %s\n", o.peak.c_str());
    return 2;
  }
  if (o.only.empty() || std::string("dense").find(o.only) != std::string::npos) run_dense(o);
  for (const auto& c : cases()) {
    if (!o.only.empty() && c.name.find(o.only) == std::string::npos) continue;
    Layer layer(c.make());
    row(c.name, "xgrad", o.threads, "param_bytes", double(layer.w.nbytes() + layer.b.nbytes()));
    row(c.name, "xgrad", o.threads, "density", double(layer.p.stored_elements()) / double(kIn * kOut));
    time_rows(c.name, "xgrad", o.threads, "fwd_ms", median_ms(o.reps, [&] { layer.forward(); }));
    time_rows(c.name, "xgrad", o.threads, "fwdbwd_ms", median_ms(o.reps, [&] { layer.train_step(); }));
    if (o.passes) {
      // Each kernel alone on raw buffers (no autograd, no allocation): where a training step's time goes.
      const BlockSparsePattern& p = layer.p;
      const float* x = layer.x.data<float>();
      const float* w = layer.w.data<float>();
      const float* b = layer.b.data<float>();
      std::vector<float> y(kBatch * kOut), dx(kBatch * kIn), dw(static_cast<std::size_t>(p.stored_elements())),
          db(kOut);
      const std::vector<float> g(kBatch * kOut, 1.0f);
      time_rows(c.name, "xgrad", o.threads, "pass_forward_ms",
                median_ms(o.reps, [&] { detail::bsl_forward<float>(p.csr(), x, kBatch, w, b, y.data()); }));
      time_rows(c.name, "xgrad", o.threads, "pass_input_grad_ms",
                median_ms(o.reps, [&] { detail::bsl_input_grad<float>(p.csr(), g.data(), kBatch, w, dx.data()); }));
      time_rows(c.name, "xgrad", o.threads, "pass_weight_grad_ms",
                median_ms(o.reps, [&] { detail::bsl_weight_grad<float>(p.csr(), g.data(), x, kBatch, dw.data()); }));
      time_rows(c.name, "xgrad", o.threads, "pass_bias_grad_ms",
                median_ms(o.reps, [&] { detail::bsl_bias_grad<float>(g.data(), kBatch, kOut, db.data()); }));
    }
  }
  return 0;
}
