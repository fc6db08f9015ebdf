// TBB kernels of resample_conv (see ops/kernels/resample_kernels.hpp for the notes); the tables are
// fitted in resample_tables.cpp.
#include "xgrad/ops/kernels/resample_kernels.hpp"

#include <fmt/format.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/resample_loops.hpp"
#include "xgrad/ops/kernels/resample_simd512.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail::resample {

namespace {

// ---- SIMD helpers (xsimd batches of this file's architecture: Note [Kernel architectures] in
// ops/kernels/simd.hpp) ------------------------------------------------------------------------------
using Arch = xsimd::default_arch;
using VD = simd::batch<double, Arch>;  // the double accumulators (W / 2 lanes for float)

template <class T>
inline simd::batch<T, Arch> load(const T* p) {
  return simd::load<T, Arch>(p);
}
template <class T>
inline double hsum(const simd::batch<T, Arch>& v) {
  double s = 0;
  for (int i = 0; i < simd::lanes<T, Arch>; ++i) s += static_cast<double>(simd::lane(v, i));
  return s;
}
// Sum of the double lanes by a fixed tree of pairwise sums ((t0 + t1) + (t2 + t3) for 4 lanes).
inline double tree_sum(const VD& v) { return simd::tree_sum(v); }
// dot_rows_multi and combine_rows, which also run 16 lanes wide, are templates over the architecture in
// resample_loops.hpp: instantiated here for Arch, in resample_simd512.cpp for AVX-512.

// res[k] = sum_j rows[k][j] * f[j], k < NK, accumulated in T within blocks of 256 taps and in
// double across blocks (the float32 accuracy contract needs the double level for long rows). The
// block sums are added lane-wise in double; one horizontal sum per output and k.
template <class T, int NK>
void dot_rows(const T* const* rows, const T* f, std::int64_t n, double* res) {
  using V = simd::batch<T, Arch>;
  constexpr int W = simd::lanes<T, Arch>;
  constexpr std::int64_t kBlock = 256;
  // U independent accumulators per k: enough chains to cover the FMA latency (the loop is
  // latency-bound with fewer), not so many that they spill.
  constexpr int U = NK <= 2 ? 4 : 2;
  VD tot[NK] = {};
  double tail[NK] = {};
  std::int64_t j = 0;
  while (j < n) {
    const std::int64_t e = std::min(n, j + kBlock);
    V acc[NK][U] = {};
    for (; j + U * W <= e; j += U * W) {
      V fv[U];
      for (int u = 0; u < U; ++u) fv[u] = load(f + j + u * W);
      for (int k = 0; k < NK; ++k)
        for (int u = 0; u < U; ++u) acc[k][u] += load(rows[k] + j + u * W) * fv[u];
    }
    for (; j + W <= e; j += W) {
      const V fv = load(f + j);
      for (int k = 0; k < NK; ++k) acc[k][0] += load(rows[k] + j) * fv;
    }
    for (int k = 0; k < NK; ++k) {
      V sum = acc[k][0];
      for (int u = 1; u < U; ++u) sum += acc[k][u];
      add_wide(tot[k], sum);
    }
    for (; j < e; ++j)
      for (int k = 0; k < NK; ++k) tail[k] += static_cast<double>(rows[k][j]) * static_cast<double>(f[j]);
  }
  for (int k = 0; k < NK; ++k) res[k] = tree_sum(tot[k]) + tail[k];
}

template <class T>
void dot_rows_n(int nk, const T* const* rows, const T* f, std::int64_t n, double* res) {
  switch (nk) {
    case 1:
      return dot_rows<T, 1>(rows, f, n, res);
    case 2:
      return dot_rows<T, 2>(rows, f, n, res);
    case 3:
      return dot_rows<T, 3>(rows, f, n, res);
    case 4:
      return dot_rows<T, 4>(rows, f, n, res);
    case 5:
      return dot_rows<T, 5>(rows, f, n, res);
    case 6:
      return dot_rows<T, 6>(rows, f, n, res);
    case 7:
      return dot_rows<T, 7>(rows, f, n, res);
    default:
      return dot_rows<T, 8>(rows, f, n, res);
  }
}

template <class T>
void dot_rows_multi_n(int nk, const T* const* rows, const T* const* fs, std::int64_t n, double* res) {
  if constexpr (std::is_same_v<T, float>)
    if (const Simd512Kernels* k = simd512_kernels(); k && nk <= 4) return k->dot_multi[nk - 1](rows, fs, n, res);
  switch (nk) {
    case 1:
      return dot_rows_multi<T, Arch, 1, multi_width(1)>(rows, fs, n, res);
    case 2:
      return dot_rows_multi<T, Arch, 2, multi_width(2)>(rows, fs, n, res);
    case 3:
      return dot_rows_multi<T, Arch, 3, multi_width(3)>(rows, fs, n, res);
    default:
      return dot_rows_multi<T, Arch, 4, multi_width(4)>(rows, fs, n, res);
  }
}

// One output with the same summation as dot_rows_multi (so grouping never changes a value).
template <class T>
void dot_rows_one(int nk, const T* const* rows, const T* f, std::int64_t n, double* res) {
  if constexpr (std::is_same_v<T, float>)
    if (const Simd512Kernels* k = simd512_kernels(); k && nk <= 4) return k->dot_one[nk - 1](rows, &f, n, res);
  switch (nk) {
    case 1:
      return dot_rows_multi<T, Arch, 1, 1>(rows, &f, n, res);
    case 2:
      return dot_rows_multi<T, Arch, 2, 1>(rows, &f, n, res);
    case 3:
      return dot_rows_multi<T, Arch, 3, 1>(rows, &f, n, res);
    case 4:
      return dot_rows_multi<T, Arch, 4, 1>(rows, &f, n, res);
    default:
      return dot_rows_n<T>(nk, rows, f, n, res);
  }
}

// dst[j] += sum_k alpha[k] * rows[k][j]
template <class T, int NK>
void axpy_rows(const T* const* rows, const T* alpha, T* __restrict dst, std::int64_t n) {
  T al[NK];
  const T* r[NK];
  for (int k = 0; k < NK; ++k) al[k] = alpha[k], r[k] = rows[k];
  for (std::int64_t j = 0; j < n; ++j) {
    T s = dst[j];
    for (int k = 0; k < NK; ++k) s += al[k] * r[k][j];
    dst[j] = s;
  }
}

template <class T>
void axpy_rows_n(int nk, const T* const* rows, const T* alpha, T* dst, std::int64_t n) {
  switch (nk) {
    case 1:
      return axpy_rows<T, 1>(rows, alpha, dst, n);
    case 2:
      return axpy_rows<T, 2>(rows, alpha, dst, n);
    case 3:
      return axpy_rows<T, 3>(rows, alpha, dst, n);
    case 4:
      return axpy_rows<T, 4>(rows, alpha, dst, n);
    case 5:
      return axpy_rows<T, 5>(rows, alpha, dst, n);
    case 6:
      return axpy_rows<T, 6>(rows, alpha, dst, n);
    case 7:
      return axpy_rows<T, 7>(rows, alpha, dst, n);
    default:
      return axpy_rows<T, 8>(rows, alpha, dst, n);
  }
}

// Calls fn(std::integral_constant<int, NK>{}) for nk in 1..4 (the degrees the grouped kernels serve).
template <class Fn>
void with_nk(int nk, Fn&& fn) {
  switch (nk) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    default:
      return fn(std::integral_constant<int, 4>{});
  }
}

// dsts[m][j] += sum_k alpha[m * nk + k] * rows[k][j] for the multi_width(nk) outputs of one run.
template <class T>
void axpy_rows_multi_n(int nk, const T* const* rows, const T* alpha, T* const* dsts, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (const Simd512Kernels* k = simd512_kernels(); k && nk <= 4) return k->spread[nk - 1](rows, dsts, alpha, n);
  with_nk(nk, [&](auto k) { combine_rows<T, Arch, k(), multi_width(k())>(rows, dsts, alpha, n); });
}

// acc[k][j] += sum_m alpha[m * nk + k] * fs[m][j] for M outputs of one phase (nk <= kMaxDegree + 1).
template <class T, int M>
void accumulate_rows_n(int nk, T* const* acc, const T* const* fs, const T* alpha, std::int64_t n) {
  T ct[(kMaxDegree + 1) * M];  // coefficients as [k][m]
  for (int k = 0; k < nk; ++k)
    for (int m = 0; m < M; ++m) ct[k * M + m] = alpha[m * nk + k];
  if constexpr (std::is_same_v<T, float> && (M == 1 || M == 4))
    if (const Simd512Kernels* k = simd512_kernels(); k && nk <= 4)
      return (M == 4 ? k->accumulate4 : k->accumulate1)[nk - 1](fs, acc, ct, n);
  if (nk <= 4) return with_nk(nk, [&](auto k) { combine_rows<T, Arch, M, k()>(fs, acc, ct, n); });
  for (int k = 0; k < nk; ++k) combine_rows<T, Arch, M, 1>(fs, acc + k, ct + k * M, n);
}

}  // namespace

// ---- kernels ------------------------------------------------------------------------------------
namespace {

double clamp_index(double u) { return std::clamp(u, -4e15, 4e15); }

// Fine index range [ba, bb] of fine points within [c - hi, c - lo], clipped to the grid.
void fine_range(const Geometry& geo, double c, std::int64_t& ba, std::int64_t& bb) {
  if (geo.uniform) {
    ba = static_cast<std::int64_t>(std::ceil(clamp_index((c - geo.hi - geo.x0) / geo.dx)));
    bb = static_cast<std::int64_t>(std::floor(clamp_index((c - geo.lo - geo.x0) / geo.dx)));
  } else {
    ba = std::lower_bound(geo.xs, geo.xs + geo.B, c - geo.hi) - geo.xs;
    bb = (std::upper_bound(geo.xs, geo.xs + geo.B, c - geo.lo) - geo.xs) - 1;
  }
  ba = std::max<std::int64_t>(ba, 0);
  bb = std::min<std::int64_t>(bb, geo.B - 1);
}

template <class T>
inline T horner(const double* a, int D, T s) {
  T r = static_cast<T>(a[D]);
  for (int k = D - 1; k >= 0; --k) r = r * s + static_cast<T>(a[k]);
  return r;
}

/// Computes the taps of the output at c; for non-polyphase evaluators fills w (resized).
template <class T>
Taps taps_for(const Geometry& geo, const Evaluator& ev, double c, std::vector<T>& w) {
  Taps tp;
  if (ev.kind == Evaluator::polyphase) {
    const Table& t = *ev.table;
    const double u = clamp_index((c - geo.hi - geo.x0) / geo.dx);
    const double bf = std::ceil(u);
    t.locate(bf - u, tp.phase, tp.sigma);
    tp.b0 = static_cast<std::int64_t>(bf);
    const std::int64_t S = t.count[static_cast<std::size_t>(tp.phase)];
    tp.j0 = std::max<std::int64_t>(0, -tp.b0);
    tp.j1 = std::min<std::int64_t>(S, geo.B - tp.b0);
    if (tp.j1 < tp.j0) tp.j1 = tp.j0;
    return tp;
  }
  std::int64_t ba, bb;
  fine_range(geo, c, ba, bb);
  tp.b0 = ba;
  tp.j0 = 0;
  tp.j1 = std::max<std::int64_t>(0, bb - ba + 1);
  const std::int64_t n = tp.j1;
  if (static_cast<std::int64_t>(w.size()) < n) w.resize(static_cast<std::size_t>(n));
  T* wp = w.data();
  if (n == 0) return tp;
  if (ev.kind == Evaluator::sampled && geo.uniform) {
    // Cells of the sampled lattice cover consecutive taps: Horner with per-cell coefficients.
    const double U0 = (c - geo.x0 - geo.lo - static_cast<double>(ba) * geo.dx) / ev.delta;
    const double du = geo.dx / ev.delta, inv_du = ev.delta / geo.dx;
    const std::int64_t last = ev.ncells - 1;
    std::int64_t j = 0;
    while (j < n) {
      // Truncation instead of floor (values below 0 clamp to cell 0 either way), a multiply
      // instead of a divide: this runs once per cell.
      const std::int64_t i =
          std::clamp<std::int64_t>(static_cast<std::int64_t>(std::max(0.0, U0 - static_cast<double>(j) * du)), 0, last);
      std::int64_t je =
          i == 0 ? n : static_cast<std::int64_t>(std::max(-1.0, (U0 - static_cast<double>(i)) * inv_du)) + 1;
      je = std::clamp<std::int64_t>(je, j + 1, n);
      const double* a = ev.cells + i * 4;
      const T a0 = static_cast<T>(a[0]), a1 = static_cast<T>(a[1]), a2 = static_cast<T>(a[2]),
              a3 = static_cast<T>(a[3]);
      // s relative to the cell's first tap, with a 32-bit counter (vectorisable conversions).
      const T sj = static_cast<T>(U0 - static_cast<double>(i) - static_cast<double>(j) * du), ds = static_cast<T>(du);
      const int cnt = static_cast<int>(je - j);
      T* wq = wp + j;
      for (int q = 0; q < cnt; ++q) {
        const T s = sj - static_cast<T>(q) * ds;
        wq[q] = ((a3 * s + a2) * s + a1) * s + a0;
      }
      j = je;
    }
    return tp;
  }
  const auto xb = [&](std::int64_t b) { return geo.uniform ? geo.x0 + static_cast<double>(b) * geo.dx : geo.xs[b]; };
  switch (ev.kind) {
    case Evaluator::lattice: {
      const Table& t = *ev.table;
      const int D = t.degree;
      for (std::int64_t j = 0; j < n; ++j) {
        const double x = (c - xb(ba + j) - t.lo) / t.h;
        const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(x)), 0, t.cells - 1);
        wp[j] = static_cast<T>(horner<double>(t.coef.data() + i * (D + 1), D, 2 * (x - static_cast<double>(i)) - 1));
      }
      break;
    }
    case Evaluator::sampled: {
      for (std::int64_t j = 0; j < n; ++j) {
        const double u = (c - xb(ba + j) - geo.lo) / ev.delta;
        const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(u)), 0, ev.ncells - 1);
        wp[j] = static_cast<T>(horner<double>(ev.cells + i * 4, 3, u - static_cast<double>(i)));
      }
      break;
    }
    default: {
      for (std::int64_t j = 0; j < n; ++j) wp[j] = static_cast<T>((*ev.fn)(std::clamp(c - xb(ba + j), geo.lo, geo.hi)));
      break;
    }
  }
  return tp;
}

// Rows of the polyphase table for one output, offset to the first tap.
template <class T>
int table_rows(const Evaluator& ev, const Taps& tp, const std::vector<T>& w, const T** rows) {
  if (ev.kind != Evaluator::polyphase) {
    rows[0] = w.data();
    return 1;
  }
  const Table& t = *ev.table;
  const int nk = t.degree + 1;
  for (int k = 0; k < nk; ++k)
    rows[k] = t.data<T>() + (static_cast<std::int64_t>(tp.phase) * nk + k) * t.stride + tp.j0;
  return nk;
}

// Outputs per task: enough taps per task to amortise scheduling.
std::int64_t output_grain(const Geometry& geo) {
  const double taps = geo.uniform ? (geo.hi - geo.lo) / geo.dx + 1 : 64.0;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(4096.0 / std::max(1.0, taps)), 1, 256);
}

// s_q = s0 - q*du for q < n; sum_q s_q^k f[q], k < 4, split into per-lane vector sums mv[k] (whole
// vectors) and scalar sums M[k] (the tail): the caller accumulates the lanes across cells and
// outputs and reduces them once, instead of a horizontal sum per cell.
template <class T>
void moments4(const T* f, std::int64_t n, double s0, double du, simd::batch<T, Arch>* mv, double* M) {
  using V = simd::batch<T, Arch>;
  constexpr int W = simd::lanes<T, Arch>;
  const V lane = simd::iota<T, Arch>(T(0));
  V m0 = {}, m1 = {}, m2 = {}, m3 = {};
  const T s0t = static_cast<T>(s0), dut = static_cast<T>(du);
  int q = 0;
  const int n32 = static_cast<int>(n);
  for (; q + W <= n32; q += W) {
    const V s = s0t - (lane + static_cast<T>(q)) * dut;
    const V fv = load(f + q);
    m0 += fv;
    V t = fv * s;
    m1 += t;
    t *= s;
    m2 += t;
    t *= s;
    m3 += t;
  }
  mv[0] = m0, mv[1] = m1, mv[2] = m2, mv[3] = m3;
  M[0] = M[1] = M[2] = M[3] = 0;
  for (; q < n32; ++q) {
    const double sq = s0 - static_cast<double>(q) * du;
    double t = static_cast<double>(f[q]);
    M[0] += t;
    t *= sq;
    M[1] += t;
    t *= sq;
    M[2] += t;
    t *= sq;
    M[3] += t;
  }
}

}  // namespace

TapsVector plan_taps(const Geometry& geo, const Evaluator& ev, const Problem& pr) {
  TapsVector taps;
  if (ev.kind != Evaluator::polyphase) return taps;
  const std::int64_t n = pr.N * pr.A;
  taps.resize(static_cast<std::size_t>(n));
  parallel_for(0, n, 2048, [&](std::int64_t a, std::int64_t b) {
    std::vector<float> unused;
    for (std::int64_t i = a; i < b; ++i)
      taps[static_cast<std::size_t>(i)] = taps_for<float>(geo, ev, pr.coarse[i], unused);
  });
  return taps;
}

// Note [Phase-ordered traversal]: with a polyphase table, outputs are visited grouped by phase
// (stable, so in index order within a phase): consecutive outputs then read the same table rows,
// which stay in L1, instead of streaming all phases' rows from L2 (the kernel is bound by loads).
// Each output's value does not depend on the order; scatters sum in this order, which depends on the
// data only, never on the thread count. A tap-tiled forward was measured against this (outputs in
// order of their f segments, taps in blocks of 256 for all outputs of a chunk, so that a block's rows
// of every phase and the overlapping f windows all stay in L1; four outputs at a time): bit-identical
// values, but slower (bench/results/tuning_notes.md, "resample_conv traversal"),
// because each output then loads its own rows: the loads a run's outputs share here cost more than
// reading their f segments from L2.
template <class T>
const Taps* phase_order(const Geometry& geo, const Evaluator& ev, const Problem& pr, std::int64_t i0, std::int64_t i1,
                        TapsVector& scratch, std::vector<std::int64_t>& order, std::vector<T>& w) {
  const std::int64_t n = i1 - i0;
  order.resize(static_cast<std::size_t>(n));
  const Taps* taps = nullptr;
  if (pr.taps && ev.kind == Evaluator::polyphase) {
    taps = pr.taps + i0;
  } else {
    scratch.resize(static_cast<std::size_t>(n));
    if (ev.kind == Evaluator::polyphase && n >= 8192) {  // whole problems (the values gradient): in parallel
      parallel_for(0, n, 2048, [&](std::int64_t a, std::int64_t b) {
        std::vector<T> unused;
        for (std::int64_t i = a; i < b; ++i)
          scratch[static_cast<std::size_t>(i)] = taps_for<T>(geo, ev, pr.coarse[i0 + i], unused);
      });
    } else {
      for (std::int64_t i = 0; i < n; ++i)
        scratch[static_cast<std::size_t>(i)] = taps_for<T>(geo, ev, pr.coarse[i0 + i], w);
    }
    taps = scratch.data();
  }
  if (ev.kind != Evaluator::polyphase) {
    for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    return taps;
  }
  const int P = ev.table->phases();
  std::vector<std::int64_t> start(static_cast<std::size_t>(P) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) ++start[static_cast<std::size_t>(taps[i].phase) + 1];
  for (int q = 0; q < P; ++q) start[static_cast<std::size_t>(q) + 1] += start[static_cast<std::size_t>(q)];
  for (std::int64_t i = 0; i < n; ++i)
    order[static_cast<std::size_t>(start[static_cast<std::size_t>(taps[i].phase)]++)] = i;
  return taps;
}

template <class T>
void forward(const Geometry& geo, const Evaluator& ev, const Problem& pr, const T* f, T* out) {
  const std::int64_t N = pr.N, A = pr.A, B = geo.B;
  const bool poly = ev.kind == Evaluator::polyphase;
  // Polyphase: fixed chunks of outputs, each visited in phase order; otherwise per-output grains.
  // The chunks are [c * grain, (c + 1) * grain) whatever the thread count: tasks get whole chunks
  // (TBB splits a range of outputs at points that depend on the thread count, and the grouping of
  // outputs into runs within a chunk decides which kernel sums them).
  const std::int64_t grain = poly ? 256 : output_grain(geo);
  const std::int64_t chunks = (N * A + grain - 1) / grain;
  parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<T> w;
    TapsVector taps;
    std::vector<std::int64_t> order;
    const T* rows[kMaxDegree + 1];
    double res[kMaxDegree + 1];
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t i0 = c * grain, i1 = std::min(N * A, i0 + grain);
      if (!poly) {
        for (std::int64_t idx = i0; idx < i1; ++idx) {
          const std::int64_t n = idx / A, a = idx % A;
          const Taps tp = taps_for<T>(geo, ev, pr.coarse[idx], w);
          const int nk = table_rows<T>(ev, tp, w, rows);
          for (std::int64_t p = 0; p < pr.P; ++p) {
            T& o = out[(p * N + n) * A + a];
            if (tp.n() <= 0) {
              o = T(0);
              continue;
            }
            dot_rows_n<T>(nk, rows, f + (p * N + n) * B + tp.b0 + tp.j0, tp.n(), res);
            double v = res[nk - 1];
            for (int k = nk - 2; k >= 0; --k) v = v * tp.sigma + res[k];
            o = static_cast<T>(v);
          }
        }
        continue;
      }
      // Polyphase: outputs in phase order; runs with the same rows (phase, first tap, tap count)
      // are evaluated M at a time (all batch rows p of an output share its rows too).
      const Taps* tps = phase_order<T>(geo, ev, pr, i0, i1, taps, order, w);
      const int nk = ev.table->degree + 1;
      const int M = multi_width(nk);
      const T* fs[4];
      T* os[4];
      double sig[4];
      int nj = 0;
      const Taps* run = nullptr;
      auto combine = [&](const double* r, double sigma) {
        double v = r[nk - 1];
        for (int k = nk - 2; k >= 0; --k) v = v * sigma + r[k];
        return v;
      };
      auto flush = [&]() {
        if (nj == 0) return;
        table_rows<T>(ev, *run, w, rows);
        if (nj == M) {
          double r[4 * (kMaxDegree + 1)];
          dot_rows_multi_n<T>(nk, rows, fs, run->n(), r);
          for (int m = 0; m < nj; ++m) *os[m] = static_cast<T>(combine(r + m * nk, sig[m]));
        } else {
          for (int m = 0; m < nj; ++m) {
            dot_rows_one<T>(nk, rows, fs[m], run->n(), res);
            *os[m] = static_cast<T>(combine(res, sig[m]));
          }
        }
        nj = 0;
      };
      for (std::int64_t q = 0; q < i1 - i0; ++q) {
        const std::int64_t idx = i0 + order[static_cast<std::size_t>(q)];
        const std::int64_t n = idx / A, a = idx % A;
        const Taps& tp = tps[idx - i0];
        if (tp.n() <= 0) {
          for (std::int64_t p = 0; p < pr.P; ++p) out[(p * N + n) * A + a] = T(0);
          continue;
        }
        if (run && (tp.phase != run->phase || tp.j0 != run->j0 || tp.n() != run->n())) flush();
        run = &tp;
        for (std::int64_t p = 0; p < pr.P; ++p) {
          fs[nj] = f + (p * N + n) * B + tp.b0 + tp.j0;
          os[nj] = out + (p * N + n) * A + a;
          sig[nj] = tp.sigma;
          if (++nj == std::max(M, 1)) flush();
        }
      }
      flush();
    }
  });
}

template <class T>
void backward_f(const Geometry& geo, const Evaluator& ev, const Problem& pr, const T* g, T* gf) {
  const std::int64_t N = pr.N, A = pr.A, B = geo.B, P = pr.P;
  if (N == 0 || P == 0 || B == 0) return;  // gf is empty (and per_row below would divide by N = 0)
  // Chunks per row depend on the shapes only (Note [Scatter without atomics]).
  std::int64_t per_row = N >= 16 ? 1 : std::min<std::int64_t>(std::max<std::int64_t>(A, 1), (32 + N - 1) / N);
  const std::int64_t chunk = (A + per_row - 1) / std::max<std::int64_t>(per_row, 1);
  per_row = chunk > 0 ? (A + chunk - 1) / chunk : 1;

  // Spreads outputs [a0, a1) of row n into dst (P rows of `len` values, starting at fine index b_first).
  auto spread = [&](std::int64_t n, std::int64_t a0, std::int64_t a1, T* dst, std::int64_t b_first, std::int64_t len,
                    std::vector<T>& w) {
    const T* rows[kMaxDegree + 1];
    T alpha[4 * (kMaxDegree + 1)];
    T* dsts[4];
    if (ev.kind != Evaluator::polyphase) {
      for (std::int64_t a = a0; a < a1; ++a) {
        const Taps tp = taps_for<T>(geo, ev, pr.coarse[n * A + a], w);  // w: this output's taps
        if (tp.n() <= 0) continue;
        const int nk = table_rows<T>(ev, tp, w, rows);
        for (std::int64_t p = 0; p < P; ++p) {
          const double gv = static_cast<double>(g[(p * N + n) * A + a]);
          if (gv == 0) continue;
          double sk = gv;
          for (int k = 0; k < nk; ++k, sk *= tp.sigma) alpha[k] = static_cast<T>(sk);
          axpy_rows_n<T>(nk, rows, alpha, dst + p * len + (tp.b0 + tp.j0 - b_first), tp.n());
        }
      }
      return;
    }
    // Polyphase: phase order (Note [Phase-ordered traversal]), runs sharing the rows M at a time.
    TapsVector taps;
    std::vector<std::int64_t> order;
    const Taps* tps = phase_order<T>(geo, ev, pr, n * A + a0, n * A + a1, taps, order, w);
    const int nk = ev.table->degree + 1;
    const int M = multi_width(nk);
    int nj = 0;
    const Taps* run = nullptr;
    auto flush = [&]() {
      if (nj == 0) return;
      table_rows<T>(ev, *run, w, rows);
      if (nj == M)
        axpy_rows_multi_n<T>(nk, rows, alpha, dsts, run->n());
      else
        for (int m = 0; m < nj; ++m) axpy_rows_n<T>(nk, rows, alpha + m * nk, dsts[m], run->n());
      nj = 0;
    };
    for (std::int64_t q = 0; q < a1 - a0; ++q) {
      const std::int64_t a = a0 + order[static_cast<std::size_t>(q)];
      const Taps& tp = tps[a - a0];
      if (tp.n() <= 0) continue;
      if (run && (tp.phase != run->phase || tp.j0 != run->j0 || tp.n() != run->n())) flush();
      run = &tp;
      for (std::int64_t p = 0; p < P; ++p) {
        const double gv = static_cast<double>(g[(p * N + n) * A + a]);
        if (gv == 0) continue;
        double sk = gv;
        for (int k = 0; k < nk; ++k, sk *= tp.sigma) alpha[nj * nk + k] = static_cast<T>(sk);
        dsts[nj] = dst + p * len + (tp.b0 + tp.j0 - b_first);
        if (++nj == std::max(M, 1)) flush();
      }
    }
    flush();
  };

  if (per_row == 1) {
    parallel_for(0, N, 1, [&](std::int64_t n0, std::int64_t n1) {
      std::vector<T> w;
      for (std::int64_t n = n0; n < n1; ++n) {
        for (std::int64_t p = 0; p < P; ++p) std::fill_n(gf + (p * N + n) * B, B, T(0));
        spread(n, 0, A, gf + n * B, 0, N * B, w);
      }
    });
    return;
  }
  const std::int64_t tasks = N * per_row;
  std::vector<std::vector<T>> bufs(static_cast<std::size_t>(tasks));
  std::vector<std::int64_t> blo(static_cast<std::size_t>(tasks)), bhi(static_cast<std::size_t>(tasks));
  parallel_for(0, tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<T> w;
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t n = t / per_row, a0 = (t % per_row) * chunk, a1 = std::min(A, a0 + chunk);
      std::int64_t lo = B, hi = 0;
      for (std::int64_t a = a0; a < a1; ++a) {
        const Taps tp = taps_for<T>(geo, ev, pr.coarse[n * A + a], w);
        if (tp.n() <= 0) continue;
        lo = std::min(lo, tp.b0 + tp.j0);
        hi = std::max(hi, tp.b0 + tp.j1);
      }
      const auto ts = static_cast<std::size_t>(t);
      if (hi <= lo) {
        blo[ts] = bhi[ts] = 0;
        continue;
      }
      blo[ts] = lo;
      bhi[ts] = hi;
      bufs[ts].assign(static_cast<std::size_t>(P * (hi - lo)), T(0));
      spread(n, a0, a1, bufs[ts].data(), lo, hi - lo, w);
    }
  });
  parallel_for(0, N, 1, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t p = 0; p < P; ++p) {
        T* row = gf + (p * N + n) * B;
        std::fill_n(row, B, T(0));
        for (std::int64_t c = 0; c < per_row; ++c) {
          const auto ts = static_cast<std::size_t>(n * per_row + c);
          const std::int64_t len = bhi[ts] - blo[ts];
          if (len <= 0) continue;
          const T* src = bufs[ts].data() + p * len;
          T* d = row + blo[ts];
          for (std::int64_t j = 0; j < len; ++j) d[j] += src[j];
        }
      }
  });
}

// Note [Values gradient through the table]: a float32 forward with a sampled response evaluates
// out = sum_k sigma^k dot(C_k[phase], f segment) with the polyphase table C built from the cell
// coefficients a (Note [Sampled responses on a uniform grid] in resample_conv.cpp). C is linear in
// a: C_k[ph][j] = sum_i inv[k][i] r(d(ph, j, i)), r(d) = sum_q a_q(cell(d)) s(d)^q at the
// interpolation nodes d(ph, j, i) = hi - (j + tau_i(ph)) dx. The gradient is the adjoint of that
// forward: (1) G_k[ph][j] = sum over outputs of phase ph of g sigma^k f[b0 + j] -- per phase, like
// the forward, M outputs at a time into rows kept in L1; (2) back through C's construction, a few
// operations per table entry. It is the exact gradient of what the forward computed, at the cost of
// one pass over the taps instead of per-cell moments of every tap. It is within the tolerance of
// the exact interpolation's gradient only if the table's degree and phases fit every direction of
// the values, not just the values it was fitted to: a table fitted to degenerate values (all zero,
// constant or linear: exact at degree 1 with one phase) gave values gradients 1.5% off in float32.
// So build_polyphase_sampled accepts a degree and phase count only when they also fit a generic
// response on the same lattice (a raised-cosine bump, the probe; make_evaluator in
// resample_conv.cpp); for smooth responses this is the table the values alone would get.
template <class T>
std::vector<double> backward_cells_polyphase(const Geometry& geo, const Table& t, std::int64_t ncells, double delta,
                                             const Problem& pr, const T* f, const T* g) {
  const std::int64_t N = pr.N, A = pr.A, B = geo.B, NA = N * A, P = pr.P;
  const int nk = t.degree + 1, PH = t.phases();
  const std::int64_t stride = t.stride;
  // Every output's taps, bucketed by phase (stable: index order within a phase).
  TapsVector taps;
  std::vector<std::int64_t> order;
  std::vector<T> w;
  Evaluator ev;
  ev.kind = Evaluator::polyphase;
  ev.table = &t;
  const Taps* tps = phase_order<T>(geo, ev, pr, 0, NA, taps, order, w);
  std::vector<std::int64_t> start(static_cast<std::size_t>(PH) + 1, 0);
  for (std::int64_t i = 0; i < NA; ++i) ++start[static_cast<std::size_t>(tps[i].phase) + 1];
  for (int q = 0; q < PH; ++q) start[static_cast<std::size_t>(q) + 1] += start[static_cast<std::size_t>(q)];

  const Interpolator ip(t.degree);
  const std::size_t G4 = static_cast<std::size_t>(ncells * 4);
  std::vector<std::vector<double>> part(static_cast<std::size_t>(PH));
  parallel_for(0, PH, 1, [&](std::int64_t h0, std::int64_t h1) {
    std::vector<T> acc(static_cast<std::size_t>(nk * stride));
    std::vector<double> G(static_cast<std::size_t>(nk * stride));
    for (std::int64_t ph = h0; ph < h1; ++ph) {
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(G.begin(), G.end(), 0.0);
      T* rows[kMaxDegree + 1];
      constexpr int M = 4;
      const T* fs[M];
      T alpha[M * (kMaxDegree + 1)];
      int nj = 0, since_flush = 0;
      const Taps* run = nullptr;
      // acc (in T, L1-resident) is added to G (double) every 64 outputs: float32 sums stay short.
      auto flush_acc = [&]() {
        for (std::size_t q = 0; q < acc.size(); ++q) G[q] += static_cast<double>(acc[q]);
        std::fill(acc.begin(), acc.end(), T(0));
        since_flush = 0;
      };
      auto flush = [&]() {
        if (nj == 0) return;
        for (int k = 0; k < nk; ++k) rows[k] = acc.data() + k * stride + run->j0;
        if (nj == M) {
          accumulate_rows_n<T, M>(nk, rows, fs, alpha, run->n());
        } else {
          for (int m = 0; m < nj; ++m) accumulate_rows_n<T, 1>(nk, rows, fs + m, alpha + m * nk, run->n());
        }
        since_flush += nj;
        nj = 0;
        if (since_flush >= 64) flush_acc();
      };
      for (std::int64_t q = start[static_cast<std::size_t>(ph)]; q < start[static_cast<std::size_t>(ph) + 1]; ++q) {
        const std::int64_t idx = order[static_cast<std::size_t>(q)];
        const Taps& tp = tps[idx];
        if (tp.n() <= 0) continue;
        if (run && (tp.j0 != run->j0 || tp.n() != run->n())) flush();
        run = &tp;
        const std::int64_t n = idx / A, a = idx % A;
        for (std::int64_t p = 0; p < P; ++p) {
          const double gv = static_cast<double>(g[(p * N + n) * A + a]);
          if (gv == 0) continue;
          fs[nj] = f + (p * N + n) * B + tp.b0 + tp.j0;
          double sk = gv;
          for (int k = 0; k < nk; ++k, sk *= tp.sigma) alpha[nj * nk + k] = static_cast<T>(sk);
          if (++nj == M) flush();
        }
      }
      flush();
      flush_acc();
      // (2) back through the table's construction into this phase's share of the cell gradient.
      // Per node i, the positions d = hi - (j + tau_i) dx fall with j, so the cell changes every
      // delta / dx taps: the four moments sum H s^q in registers over each run of one cell.
      std::vector<double>& out = part[static_cast<std::size_t>(ph)];
      out.assign(G4, 0.0);
      double ta, tb;
      t.phase_bounds(static_cast<int>(ph), ta, tb);
      const std::int64_t cnt = t.count[static_cast<std::size_t>(ph)];
      for (int i = 0; i <= t.degree; ++i) {
        double inv_i[kMaxDegree + 1];
        for (int k = 0; k < nk; ++k) inv_i[k] = ip.inv[static_cast<std::size_t>(k * nk + i)];
        const double tau = ta + (ip.nodes[static_cast<std::size_t>(i)] + 1) * 0.5 * (tb - ta);
        std::int64_t cur = -1;
        double m0 = 0, m1 = 0, m2 = 0, m3 = 0;
        auto flush_cell = [&]() {
          if (cur < 0) return;
          double* o = &out[static_cast<std::size_t>(cur * 4)];
          o[0] += m0, o[1] += m1, o[2] += m2, o[3] += m3;
          m0 = m1 = m2 = m3 = 0;
        };
        for (std::int64_t j = 0; j < cnt; ++j) {
          double H = 0;
          for (int k = 0; k < nk; ++k) H += inv_i[k] * G[static_cast<std::size_t>(k * stride + j)];
          const double d = std::clamp(geo.hi - (static_cast<double>(j) + tau) * geo.dx, geo.lo, geo.hi);
          const double u = (d - geo.lo) / delta;
          const std::int64_t c = std::min<std::int64_t>(static_cast<std::int64_t>(u), ncells - 1);  // u >= 0
          if (c != cur) {
            flush_cell();
            cur = c;
          }
          const double s = u - static_cast<double>(c), hs = H * s, hs2 = hs * s;
          m0 += H, m1 += hs, m2 += hs2, m3 += hs2 * s;
        }
        flush_cell();
      }
    }
  });
  std::vector<double> res(G4, 0.0);
  for (const auto& pv : part)
    for (std::size_t k = 0; k < G4; ++k) res[k] += pv[k];
  return res;
}

template <class T>
std::vector<double> backward_cells(const Geometry& geo, std::int64_t ncells, double delta, const Problem& pr,
                                   const T* f, const T* g) {
  const std::int64_t N = pr.N, A = pr.A, B = geo.B, P = pr.P;
  const std::int64_t NA = N * A, chunk = 64, nch = (NA + chunk - 1) / chunk;
  const std::size_t G = static_cast<std::size_t>(ncells * 4);
  std::vector<std::vector<double>> part(static_cast<std::size_t>(nch));
  parallel_for(0, nch, 1, [&](std::int64_t c0, std::int64_t c1) {
    using V = simd::batch<T, Arch>;
    std::vector<V> lanes(G);  // per-lane partial sums of this chunk, reduced at its end
    for (std::int64_t ch = c0; ch < c1; ++ch) {
      std::vector<double>& acc = part[static_cast<std::size_t>(ch)];
      acc.assign(G, 0.0);
      std::fill(lanes.begin(), lanes.end(), V(T(0)));
      for (std::int64_t idx = ch * chunk; idx < std::min(NA, (ch + 1) * chunk); ++idx) {
        const std::int64_t n = idx / A, a = idx % A;
        const double c = pr.coarse[idx];
        std::int64_t ba, bb;
        fine_range(geo, c, ba, bb);
        if (bb < ba) continue;
        const std::int64_t nt = bb - ba + 1;
        if (geo.uniform) {
          const double U0 = (c - geo.x0 - geo.lo - static_cast<double>(ba) * geo.dx) / delta;
          const double du = geo.dx / delta;
          std::int64_t j = 0;
          while (j < nt) {
            const std::int64_t i = std::clamp<std::int64_t>(
                static_cast<std::int64_t>(std::floor(U0 - static_cast<double>(j) * du)), 0, ncells - 1);
            std::int64_t je =
                i == 0 ? nt : static_cast<std::int64_t>(std::floor((U0 - static_cast<double>(i)) / du)) + 1;
            je = std::clamp<std::int64_t>(je, j + 1, nt);
            const double s0 = U0 - static_cast<double>(i) - static_cast<double>(j) * du;
            for (std::int64_t p = 0; p < P; ++p) {
              const double gv = static_cast<double>(g[(p * N + n) * A + a]);
              if (gv == 0) continue;
              V mv[4];
              double M[4];
              moments4<T>(f + (p * N + n) * B + ba + j, je - j, s0, du, mv, M);
              const T gt = static_cast<T>(gv);
              for (int k = 0; k < 4; ++k) {
                lanes[static_cast<std::size_t>(i * 4 + k)] += gt * mv[k];
                acc[static_cast<std::size_t>(i * 4 + k)] += gv * M[k];
              }
            }
            j = je;
          }
        } else {
          for (std::int64_t j = 0; j < nt; ++j) {
            const double u = (c - geo.xs[ba + j] - geo.lo) / delta;
            const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(u)), 0, ncells - 1);
            const double s = u - static_cast<double>(i);
            for (std::int64_t p = 0; p < P; ++p) {
              double t = static_cast<double>(g[(p * N + n) * A + a]) * static_cast<double>(f[(p * N + n) * B + ba + j]);
              for (int k = 0; k < 4; ++k, t *= s) acc[static_cast<std::size_t>(i * 4 + k)] += t;
            }
          }
        }
      }
      for (std::size_t q = 0; q < G; ++q) acc[q] += hsum<T>(lanes[q]);
    }
  });
  std::vector<double> out(G, 0.0);
  for (const auto& pv : part)
    for (std::size_t k = 0; k < G; ++k) out[k] += pv[k];
  return out;
}

const Simd512Kernels* simd512_kernels() { return avx512_enabled() ? simd512_table() : nullptr; }

XGRAD_INSTANTIATE_FLOATING(forward);
XGRAD_INSTANTIATE_FLOATING(backward_f);
XGRAD_INSTANTIATE_FLOATING(backward_cells);
XGRAD_INSTANTIATE_FLOATING(backward_cells_polyphase);

}  // namespace xgrad::detail::resample
