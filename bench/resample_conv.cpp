// resample_conv benchmark, ours. The PyTorch peer is torch_resample_conv.py (einsum with a dense T,
// and to_sparse() + bmm, as in /work/shared/reference/torch_seed_workloads.py); run_resample_conv.sh
// runs both with 1 and 2 threads and prints the ratios. Rows: `case,impl,threads,metric,value`.
//
// Cases (float32 unless said):
//   seed_callable      N=20, A=500, B=50000, fine uniform on [0,1], coarse sorted uniform random per
//                      row, response cos^2(pi d / w) on |d| <= w/2, w = 0.03 (1500 taps per output)
//   seed_callable_f64  the same in float64 (its default table meets the 1e-12 contract)
//   seed_sampled       the same geometry with a learnable sampled response (K = 64, cubic)
//   scale_B*, scale_S*, scale_A*   time vs B (support fixed at 1500 points), vs support points, vs A
//   peak               measured float FMA rate of one core (16-wide AVX-512 where the CPU has it, else
//                      8-wide AVX2; register-only loop, per CPU second), times the thread count
// Metrics: fwd_ms, fwdbwd_ms (gradient to f; + values for seed_sampled), fwdbwd_coarse_ms (also
// to coarse), setup_ms (building the tables from scratch), bytes (held by the op: its tables, or
// the per-cell coefficients of a sampled response), taps (per forward), taps_per_s, fma_per_s.
//
// usage: resample_conv_bench [--threads N] [--reps N] [--quick] [--case NAME]
#include "xgrad/ops/resample_conv.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;

int g_threads = 1;
int g_reps = 7;
std::string g_only;  // --case: run only this case

void row(const std::string& c, const char* metric, double v) {
  std::printf("%s,xgrad,%d,%s,%.6g\n", c.c_str(), g_threads, metric, v);
  std::fflush(stdout);
}

double cpu_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// CPU time (all threads) of the last median_ms call's median repetition: with other processes on
// the machine, wall time is inflated by waiting but CPU time is not.
double g_last_cpu_ms = 0;
// Minor page faults per call (mean over the timed repetitions) of the last median_ms call.
double g_last_minflt = 0;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

template <class Fn>
double median_ms(Fn&& fn, int reps) {
  // Warm up for at least 0.3 s (and twice): in this VM the first calls in a process run much slower
  // (fresh heap pages), as bench/block_sparse_linear.cpp found.
  const auto w0 = Clock::now();
  for (int i = 0; i < 2 || Clock::now() - w0 < std::chrono::milliseconds(300); ++i) fn();
  std::vector<std::pair<double, double>> ts;
  const long f0 = minor_faults();
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_now_ms();
    const auto t0 = Clock::now();
    fn();
    ts.emplace_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), cpu_now_ms() - c0);
  }
  g_last_minflt = static_cast<double>(minor_faults() - f0) / reps;
  std::sort(ts.begin(), ts.end());
  g_last_cpu_ms = ts[ts.size() / 2].second;
  return ts[ts.size() / 2].first;
}

Response cos2(double w) {
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
}

// The seed's coarse points: per row, sorted uniform random in [w/2, 1 - w/2].
Tensor seed_coarse(std::int64_t N, std::int64_t A, double w, Generator& gen, Dtype dt) {
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (std::int64_t n = 0; n < N; ++n) {
    auto* r = &c[static_cast<std::size_t>(n * A)];
    for (std::int64_t a = 0; a < A; ++a) r[a] = gen.uniform() * (1 - w) + w / 2;
    std::sort(r, r + A);
  }
  return Tensor::from_vector(c, {N, A}, dt);
}

struct Geometry {
  std::int64_t N, A, B;
  double w;
};

// Taps per forward: fine points inside each output's support.
double count_taps(const Geometry& g) {
  const double dx = 1.0 / static_cast<double>(g.B - 1);
  return static_cast<double>(g.N * g.A) * std::floor(g.w / dx);
}

void run_case(const std::string& name, const Geometry& geo, Dtype dt, bool sampled, bool full, int reps,
              double tolerance = 0) {
  ResampleConvOptions opt;
  opt.tolerance = tolerance;
  if (!g_only.empty() && g_only != name) return;
  Generator gen(0);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(geo.B - 1), geo.B);
  const Tensor coarse = seed_coarse(geo.N, geo.A, geo.w, gen, dt);
  Tensor f = Tensor::randn({geo.N, geo.B}, gen, dt);
  const Tensor g = Tensor::randn({geo.N, geo.A}, gen, dt);
  Tensor values;
  Response resp = cos2(geo.w);
  if (sampled) {
    const std::int64_t K = 64;
    std::vector<double> v(K);
    for (std::int64_t k = 0; k < K; ++k)
      v[static_cast<std::size_t>(k)] = resp(-geo.w / 2 + geo.w * static_cast<double>(k) / (K - 1));
    values = Tensor::from_vector(v, {K}, dt).set_requires_grad();
    resp = Response::sampled(values, -geo.w / 2, geo.w / 2, Interp::cubic);
  } else if (full) {
    // Setup: building the tables from scratch (fresh responses: no cache), forward table only.
    const double setup = median_ms([&] { resample_conv_prepare(grid, cos2(geo.w), dt, opt); }, std::max(3, reps / 2));
    row(name, "setup_ms", setup);
    row(name, "setup_cpu_ms", g_last_cpu_ms);
    const double setup_d = median_ms(
        [&] {
          const Response r = cos2(geo.w);
          resample_conv_prepare(grid, r, dt, opt);
          resample_conv_prepare(grid, r, dt, opt, true);
        },
        std::max(3, reps / 2));
    row(name, "setup_with_derivative_ms", setup_d);
  }
  {
    NoGradGuard ng;
    resample_conv(f, coarse, grid, resp, opt);  // builds the tables (cached in resp)
  }
  const double fwd = median_ms(
      [&] {
        NoGradGuard ng;
        resample_conv(f, coarse, grid, resp, opt);
      },
      reps);
  row(name, "fwd_ms", fwd);
  row(name, "fwd_cpu_ms", g_last_cpu_ms);
  row(name, "fwd_minflt", g_last_minflt);
  const double taps = count_taps(geo);
  row(name, "taps", taps);
  row(name, "taps_per_s", taps / (fwd * 1e-3));
  f.set_requires_grad();
  const double fb = median_ms(
      [&] {
        Tensor y = resample_conv(f, coarse, grid, resp, opt);
        y.backward(g);
        f.zero_grad();
        if (values.defined()) values.zero_grad();
      },
      reps);
  row(name, "fwdbwd_ms", fb);
  row(name, "fwdbwd_cpu_ms", g_last_cpu_ms);
  row(name, "fwdbwd_minflt", g_last_minflt);
  if (full) {
    Tensor c = coarse.clone_data().set_requires_grad();
    const double fbc = median_ms(
        [&] {
          Tensor y = resample_conv(f, c, grid, resp, opt);
          y.backward(g);
          f.zero_grad();
          c.zero_grad();
          if (values.defined()) values.zero_grad();
        },
        reps);
    row(name, "fwdbwd_coarse_ms", fbc);
  }
  f.set_requires_grad(false);
  if (!sampled) {
    const ResampleConvTableInfo info = resample_conv_prepare(grid, resp, dt, opt);
    row(name, "degree", info.degree);
    row(name, "pieces", static_cast<double>(info.pieces));
    row(name, "table_error", info.measured_error);
  }
  // Sampled: the cell coefficients and the table each forward builds (held by its graph).
  const double bytes = sampled ? static_cast<double>(resample_conv_prepare(grid, resp, dt, opt).bytes)
                               : static_cast<double>(resample_conv_cached_bytes(resp));
  row(name, "bytes", bytes);
  // Per forward, held with its graph until the backward: every output's located taps.
  row(name, "graph_bytes", static_cast<double>(resample_conv_graph_bytes(geo.N * geo.A)));
}

typedef float v8f __attribute__((vector_size(32)));

// Peak float FMA rate of one core: 12 independent FMA chains (enough to cover latency x ports), in
// CPU time, with 8-wide (AVX2) or 16-wide (AVX-512) vectors. (An earlier version put a compiler
// barrier after every FMA, which serialised the chains and measured a third of the AVX2 rate.)
template <class V, int L>
__attribute__((always_inline)) inline double peak_loop() {
  V acc[12];
  for (int i = 0; i < 12; ++i)
    for (int l = 0; l < L; ++l) acc[i][l] = static_cast<float>(i + l) * 1e-3f;
  V m, a;
  for (int l = 0; l < L; ++l) m[l] = 0.999999f, a[l] = 1e-7f;
  __asm__("" : "+v"(m), "+v"(a));  // opaque constants: nothing folds
  const long iters = 50000000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double c0 = cpu_now_ms();  // CPU time: other processes on the core do not count
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = acc[i] * m + a;
    }
    const double s = (cpu_now_ms() - c0) * 1e-3;
    best = std::max(best, static_cast<double>(iters) * 12 * L / s);
  }
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += acc[i][0];
  if (sink == 12345.f) std::printf("#\n");
  return best;
}

typedef float v16f __attribute__((vector_size(64)));
double peak_fma_avx2() { return peak_loop<v8f, 8>(); }
__attribute__((target("avx512f"))) double peak_fma_avx512() { return peak_loop<v16f, 16>(); }

// The higher of the two rates this CPU offers (the library's kernels use AVX-512 where available).
double peak_fma_per_s() {
  const double p8 = peak_fma_avx2();
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? std::max(p8, peak_fma_avx512()) : p8;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      g_threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      g_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--case") && i + 1 < argc)
      g_only = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else {
      std::fprintf(stderr, "usage: resample_conv_bench [--threads N] [--reps N] [--quick] [--case NAME]\n");
      return 2;
    }
  }
  set_num_threads(g_threads);
  const Geometry seed{20, 500, 50000, 0.03};
  run_case("seed_callable", seed, kFloat32, false, true, g_reps);
  run_case("seed_sampled", seed, kFloat32, true, true, g_reps);
  run_case("seed_callable_f64", seed, kFloat64, false, false, g_reps);
  run_case("seed_callable_tol1e-6", seed, kFloat32, false, false, g_reps, 1e-6);
  run_case("seed_callable_tol1e-4", seed, kFloat32, false, false, g_reps, 1e-4);
  if (quick) return 0;
  // Time vs B with the support fixed at 1500 fine points (w scales with dx).
  for (std::int64_t B : {12500, 25000, 50000, 100000, 200000})
    run_case("scale_B" + std::to_string(B), {20, 500, B, 1500.0 / static_cast<double>(B - 1)}, kFloat32, false, false,
             g_reps);
  // Time vs support width in fine points at B = 50000.
  for (int S : {100, 375, 1500, 6000})
    run_case("scale_S" + std::to_string(S), {20, 500, 50000, S / 49999.0}, kFloat32, false, false, g_reps);
  // Time vs A.
  for (std::int64_t A : {125, 250, 500, 1000, 2000})
    run_case("scale_A" + std::to_string(A), {20, A, 50000, 0.03}, kFloat32, false, false, g_reps);
  if (g_only.empty() || g_only == "peak")
    std::printf("peak,xgrad,%d,fma_per_s,%.6g\n", g_threads, peak_fma_per_s() * g_threads);
  return 0;
}
