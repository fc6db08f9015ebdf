// Dense GEMM benchmark: xgrad's one entry point detail::blas::gemm (ops/kernels/blas.hpp) on each
// backend, one thread, against the machine's single-core FMA peak. run_gemm.sh runs it twice: once as
// the environment is, once with OPENBLAS_CORETYPE=Prescott (OpenBLAS reads it when it loads, so it
// takes a second process), and prints the table.
//
// Rows: `gemm,<impl>,<isa>,<dtype>,<shape>,<metric>,<value>`:
//   peak rows (impl "fma_peak", shape "-"): GFLOP/s (best of 7) of a register-only loop of 12 independent
//     chains of vector FMAs in the widest instruction set the CPU has (avx512 if it has it, else avx2), float32 and
//     float64; "fma_peak_avx2" the same at 256 bits (on a CPU with AVX-512);
//   gemm rows: `gflops` (2 m n k / median time of REPS timings, each of as many calls as last >= 20 ms,
//     after one warm-up call) and `of_peak` (gflops / fma_peak of that dtype: the machine's peak);
//   impl: `xgrad` (its own GEMM, the kernel family the CPU dispatches to), `xgrad_avx2` (its AVX2
//     family forced, as XGRAD_CPU_CAPABILITY=avx2 would), `openblas` (whatever core it loaded: isa says
//     which; with OPENBLAS_CORETYPE=Prescott that is the misdetected case);
//   shape `<m>x<n>x<k>` (C is m x n, inner size k), row-major, op(A) = A, op(B) = B, alpha 1, beta 0.
// Shapes: square 256, 512, 1024; the MLP of the examples (batch 64: 784 -> 256 forward; its weight
// gradient 784 x 256 over the batch); conv im2col GEMMs of the fashion_cnn step (3x3 convolutions on
// 28 x 28 and 14 x 14 maps, 32 and 64 channels, per image: C[out_ch, pixels] = W[out_ch, in_ch*9] x cols).
//
// --matmul-threads N adds rows `<impl>_matmul_t<N>`: xgrad::matmul (the public op, which cuts large
// products into tiles run as TBB tasks, Note [Deterministic GEMM]) on the square shapes at N threads,
// gflops against N times the peak.
//
// usage: gemm_bench [--reps N] [--impl xgrad,xgrad_avx2,openblas] [--quick] [--matmul-threads N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "xgrad/core/cpu_info.hpp"
#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/kernel_info.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/matmul.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;

int g_reps = 7;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- FMA peak: kAcc independent accumulators (more than FMA latency x FMA ports), no memory ----
constexpr int kAcc = 12;  // chains in XGRAD_FMA_CHAINS
constexpr std::int64_t kIters = 1 << 24;

#if defined(__x86_64__)
// kAcc = 12 chains of r = fma(r, x, y) in named locals (an array would be stored to the stack every
// iteration); the empty asm keeps each in a register and stops the compiler from folding the chains.
#define XGRAD_FMA_CHAINS(V, FMA, SET1, CONSTRAINT)                                                            \
  V r0 = SET1(1), r1 = SET1(1), r2 = SET1(1), r3 = SET1(1), r4 = SET1(1), r5 = SET1(1);                       \
  V r6 = SET1(1), r7 = SET1(1), r8 = SET1(1), r9 = SET1(1), r10 = SET1(1), r11 = SET1(1);                     \
  const V x = SET1(1.0000001), y = SET1(0.9999999);                                                           \
  for (std::int64_t i = 0; i < kIters; ++i) {                                                                 \
    r0 = FMA(r0, x, y), r1 = FMA(r1, x, y), r2 = FMA(r2, x, y), r3 = FMA(r3, x, y);                           \
    r4 = FMA(r4, x, y), r5 = FMA(r5, x, y), r6 = FMA(r6, x, y), r7 = FMA(r7, x, y);                           \
    r8 = FMA(r8, x, y), r9 = FMA(r9, x, y), r10 = FMA(r10, x, y), r11 = FMA(r11, x, y);                       \
    asm(""                                                                                                    \
        : "+" CONSTRAINT(r0), "+" CONSTRAINT(r1), "+" CONSTRAINT(r2), "+" CONSTRAINT(r3), "+" CONSTRAINT(r4), \
          "+" CONSTRAINT(r5), "+" CONSTRAINT(r6), "+" CONSTRAINT(r7), "+" CONSTRAINT(r8), "+" CONSTRAINT(r9), \
          "+" CONSTRAINT(r10), "+" CONSTRAINT(r11));                                                          \
  }                                                                                                           \
  V sum = r0 + r1 + r2 + r3 + r4 + r5 + r6 + r7 + r8 + r9 + r10 + r11;

__attribute__((target("avx512f"), noinline)) double fma_loop_512_ps() {
  XGRAD_FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps, "v")
  alignas(64) float v[16];
  _mm512_store_ps(v, sum);
  return v[0] + v[15];
}
__attribute__((target("avx512f"), noinline)) double fma_loop_512_pd() {
  XGRAD_FMA_CHAINS(__m512d, _mm512_fmadd_pd, _mm512_set1_pd, "v")
  alignas(64) double v[8];
  _mm512_store_pd(v, sum);
  return v[0] + v[7];
}
__attribute__((target("avx2,fma"), noinline)) double fma_loop_256_ps() {
  XGRAD_FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps, "x")
  alignas(32) float v[8];
  _mm256_store_ps(v, sum);
  return v[0] + v[7];
}
__attribute__((target("avx2,fma"), noinline)) double fma_loop_256_pd() {
  XGRAD_FMA_CHAINS(__m256d, _mm256_fmadd_pd, _mm256_set1_pd, "x")
  alignas(32) double v[4];
  _mm256_store_pd(v, sum);
  return v[0] + v[3];
}
#undef XGRAD_FMA_CHAINS
double fma_loop_512(bool dbl) { return dbl ? fma_loop_512_pd() : fma_loop_512_ps(); }
double fma_loop_256(bool dbl) { return dbl ? fma_loop_256_pd() : fma_loop_256_ps(); }
#endif

// GFLOP/s of the register-only FMA loop at 512 or 256 bits: the best of 7 runs of kIters iterations,
// each long enough for the clock (a peak is an upper bound: a run that lost the core to another
// process only measures less).
double fma_peak(bool dbl, bool w512) {
#if defined(__x86_64__)
  const int lanes = (w512 ? 16 : 8) / (dbl ? 2 : 1);
  double best = 0;
  volatile double sink = 0;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = Clock::now();
    sink = sink + (w512 ? fma_loop_512(dbl) : fma_loop_256(dbl));
    best = std::max(best, 2.0 * lanes * kAcc * static_cast<double>(kIters) / seconds_since(t0) / 1e9);
  }
  return best;
#else
  (void)dbl;
  (void)w512;
  return 0;
#endif
}

struct Shape3 {
  std::int64_t m, n, k;
};

// GFLOP/s of `call` doing `flops`: the median of REPS timings, each of as many calls as last >= 20 ms,
// after one warm-up call (workspace, caches, OpenBLAS's buffers).
template <class F>
double gflops_of(double flops, const F& call) {
  call();
  int inner = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) call();
    if (seconds_since(t0) >= 0.02) break;
    inner *= 2;
  }
  std::vector<double> t;
  for (int r = 0; r < g_reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) call();
    t.push_back(seconds_since(t0) / inner);
  }
  std::sort(t.begin(), t.end());
  return flops / t[t.size() / 2] / 1e9;
}

template <class T>
double gemm_gflops(const Shape3& s) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.k * s.n)),
      c(static_cast<std::size_t>(s.m * s.n));
  for (T& x : a) x = static_cast<T>(u(gen));
  for (T& x : b) x = static_cast<T>(u(gen));
  return gflops_of(2.0 * static_cast<double>(s.m * s.n * s.k), [&] {
    detail::blas::gemm<T>(false, false, s.m, s.n, s.k, T(1), a.data(), s.k, b.data(), s.n, T(0), c.data(), s.n);
  });
}

// xgrad::matmul (the public op: detail::gemm's tiles as TBB tasks) at the current thread limit.
double matmul_gflops(const Shape3& s, Dtype dt) {
  Generator gen(8);
  const Tensor a = Tensor::randn({s.m, s.k}, gen, dt), b = Tensor::randn({s.k, s.n}, gen, dt);
  return gflops_of(2.0 * static_cast<double>(s.m * s.n * s.k), [&] { (void)matmul(a, b); });
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string impls = "xgrad,xgrad_avx2,openblas";
  bool quick = false;
  int matmul_threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      g_reps = std::atoi(argv[++i]);
    } else if (a == "--impl" && i + 1 < argc) {
      impls = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--matmul-threads" && i + 1 < argc) {
      matmul_threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: gemm_bench [--reps N] [--impl xgrad,xgrad_avx2,openblas] [--quick] [--matmul-threads N]\n");
      return 2;
    }
  }
  set_num_threads(1);
  const KernelInfo info = kernel_info();
  {
    std::stringstream ss(info.str());
    for (std::string line; std::getline(ss, line);) std::printf("# %s\n", line.c_str());
    if (!info.warning().empty()) std::printf("# %s\n", info.warning().c_str());
  }
  // The peak is the widest instruction set's (the machine's); the AVX2 one is printed too (on CPUs
  // that run AVX-512 at full width it is half, on Zen 4 the same).
  const bool w512 = cpu_info().best_isa == Isa::avx512;
  if (cpu_info().best_isa < Isa::avx2) {
    std::fprintf(stderr, "gemm_bench: needs AVX2 + FMA\n");
    return 1;
  }
  const double peak_s = fma_peak(false, w512), peak_d = fma_peak(true, w512);
  const char* peak_isa = w512 ? "avx512" : "avx2";
  std::printf("gemm,fma_peak,%s,float32,-,gflops,%.1f\n", peak_isa, peak_s);
  std::printf("gemm,fma_peak,%s,float64,-,gflops,%.1f\n", peak_isa, peak_d);
  if (w512) {
    std::printf("gemm,fma_peak_avx2,avx2,float32,-,gflops,%.1f\n", fma_peak(false, false));
    std::printf("gemm,fma_peak_avx2,avx2,float64,-,gflops,%.1f\n", fma_peak(true, false));
  }
  std::vector<Shape3> shapes = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {64, 256, 784},
                                {784, 256, 64},  {32, 784, 9},    {64, 784, 288},     {64, 196, 576}};
  if (quick) shapes = {{1024, 1024, 1024}, {64, 256, 784}, {32, 784, 9}, {64, 196, 576}};
  for (const std::string& impl : split(impls)) {
    const bool own = impl == "xgrad" || impl == "xgrad_avx2";
    if (!own && impl != "openblas") {
      std::fprintf(stderr, "gemm_bench: unknown impl %s\n", impl.c_str());
      return 2;
    }
    detail::blas::set_backend(own ? detail::blas::Backend::xgrad : detail::blas::Backend::openblas);
    detail::set_avx512_enabled(impl != "xgrad_avx2");
    const std::string isa =
        own ? isa_name(detail::blas::own_gemm_isa()) : info.openblas_core + "/" + isa_name(info.openblas_isa);
    if (impl == "xgrad_avx2" && cpu_info().best_isa < Isa::avx2) continue;
    for (const Shape3& s : shapes) {
      const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      const double gs = gemm_gflops<float>(s);
      std::printf("gemm,%s,%s,float32,%s,gflops,%.1f\n", impl.c_str(), isa.c_str(), shape.c_str(), gs);
      std::printf("gemm,%s,%s,float32,%s,of_peak,%.3f\n", impl.c_str(), isa.c_str(), shape.c_str(), gs / peak_s);
      const double gd = gemm_gflops<double>(s);
      std::printf("gemm,%s,%s,float64,%s,gflops,%.1f\n", impl.c_str(), isa.c_str(), shape.c_str(), gd);
      std::printf("gemm,%s,%s,float64,%s,of_peak,%.3f\n", impl.c_str(), isa.c_str(), shape.c_str(), gd / peak_d);
      std::fflush(stdout);
    }
    if (matmul_threads > 0) {
      set_num_threads(matmul_threads);
      const std::string label = impl + "_matmul_t" + std::to_string(matmul_threads);
      for (const Shape3& s : std::vector<Shape3>{{512, 512, 512}, {1024, 1024, 1024}}) {
        const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
        for (Dtype dt : {kFloat32, kFloat64}) {
          const double g = matmul_gflops(s, dt);
          const double peak = (dt == kFloat32 ? peak_s : peak_d) * matmul_threads;
          const char* dn = dt == kFloat32 ? "float32" : "float64";
          std::printf("gemm,%s,%s,%s,%s,gflops,%.1f\n", label.c_str(), isa.c_str(), dn, shape.c_str(), g);
          std::printf("gemm,%s,%s,%s,%s,of_peak,%.3f\n", label.c_str(), isa.c_str(), dn, shape.c_str(), g / peak);
        }
        std::fflush(stdout);
      }
      set_num_threads(1);
    }
  }
  detail::set_avx512_enabled(true);
  detail::blas::reset_backend();
  return 0;
}
