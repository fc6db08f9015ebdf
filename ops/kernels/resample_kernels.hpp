#pragma once
// Internal to ops/resample_conv.cpp: response tables and the TBB kernels of resample_conv.
//
// Note [Polyphase table]: on a uniform grid x_b = x0 + b*dx, the taps of the output at coarse
// point c are r(c - x_b) for the consecutive b from b_first = ceil((c - hi - x0)/dx). With
// tau = b_first - (c - hi - x0)/dx in [0, 1), tap j is g(j + tau) where g(y) = r(hi - y*dx):
// all outputs share the same row of taps up to the shift tau. [0, 1) is cut into phases; in each
// phase g(j + tau) is a polynomial of degree D in sigma (tau mapped to [-1, 1]) per tap j,
// interpolated at Chebyshev-Lobatto nodes (so pieces join continuously). Stored phase-major with
// each coefficient row contiguous in j, an output is sum_k sigma^k * dot(C_k[phase], f segment):
// D+1 contiguous FMA streams. The phases are split at frac((hi-lo)/dx) so that every tap of a
// phase stays inside [lo, hi]: fn is never evaluated outside its support and the tap count is
// constant within a phase. The degree and the phase count are the cheapest that meet the
// tolerance, measured against fn between the interpolation nodes.
//
// Note [Breakpoints]: a callable may declare breakpoints beta inside (lo, hi) where it (or its
// derivative) is not smooth. On a uniform grid tap j meets beta at tau = (hi - beta)/dx - j, so
// every breakpoint is one more split point frac((hi - beta)/dx) of [0, 1), like frac((hi - lo)/dx):
// [0, 1) is cut into segments at all of them and each segment into phases, so that no tap's
// argument crosses a breakpoint inside a phase and each piece is fitted to a smooth function. The
// nodes at a phase's ends are evaluated just inside the tap's breakpoint interval (one ulp from
// the breakpoint), so a jump (of fn, or of dfn at a kink of fn) is taken from the correct side. On
// a non-uniform grid the lattice's cell count is a multiple of M (the smallest M <= 64 that puts
// every breakpoint on a cell boundary, within 1e-9 of a cell); breakpoints that admit no such M
// get no lattice table (per-tap evaluation, reported as a fallback). Without breakpoints the
// tables are built exactly as before (two segments split at frac((hi - lo)/dx)).
//
// Note [Scatter without atomics]: the gradient with respect to f is the transpose of the forward
// gather. Rows (batch*N) are owned by one task each; when there are few rows, a row's coarse
// points are cut into fixed chunks, each spread into a private buffer covering only the fine range
// it touches, and the buffers are added to the row in chunk order. The chunking depends on the
// shapes only, never on the thread count, so results are bit-identical for any number of threads.
// A gather was measured instead (for each block of 64 consecutive fine points, the sum over the
// outputs covering it, the table's rows zero-padded, accumulated in registers and stored once: no
// load and store of gf per tap) and was not faster on the seed workload, and slower with the sampled
// response (bench/results/tuning_notes.md, "resample_conv traversal"): each (output, block) pair
// reads its degree + 1 rows from L2, as the
// ~16 outputs covering a block have different phases, while the scatter's phase-ordered runs
// (Note [Phase-ordered traversal]) read each row from L1 for several outputs.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xgrad/core/allocator.hpp"

namespace xgrad::detail::resample {

/// Highest polynomial degree of a table piece.
inline constexpr int kMaxDegree = 7;

// ---- polynomial interpolation at Chebyshev-Lobatto nodes (the table fits of resample_tables.cpp;
// the values gradient through a table in resample_kernels.cpp) ----------------------------------
struct Interpolator {
  int D;
  std::array<double, kMaxDegree + 1> nodes{}, tests{};  // sigma in [-1, 1]
  std::vector<double> inv;                              // (D+1)^2, monomial coefs = inv * values
  /// Nodes, test points and the inverse Vandermonde matrix of degree `degree` (resample_tables.cpp:
  /// defined once, so every caller uses the same rounding).
  explicit Interpolator(int degree);
  /// Coefficients (in sigma) of the interpolant of values at the nodes.
  void fit(const double* values, double* coef) const;
  static double eval(const double* coef, int D, double sigma) {
    double s = coef[D];
    for (int k = D - 1; k >= 0; --k) s = s * sigma + coef[k];
    return s;
  }
};

/// Piecewise polynomial tables. Polyphase: pieces = phases, each with `stride` taps.
/// Lattice: pieces = cells of width h over [lo, hi], one polynomial each (stride = 1).
struct Table {
  bool polyphase = true;
  int degree = 1;
  // polyphase geometry
  double L = 0;    // (hi - lo) / dx
  double phi = 0;  // phase split point in [0, 1)
  int m1 = 0, m2 = 1;
  // With breakpoints (Note [Breakpoints]): segment bounds seg[0] = 0 < ... < seg[G] = 1 of tau and
  // the first phase of each segment, seg_phase[G] = phases(); empty otherwise (m1, m2, phi apply).
  std::vector<double> seg;
  std::vector<int> seg_phase;
  std::int64_t stride = 0;
  std::vector<std::int64_t> count;  // taps per phase
  // lattice geometry
  double lo = 0, h = 1;
  std::int64_t cells = 0;
  // coefficients: polyphase [phase][k][j], lattice [cell][k]; in both precisions. A sampled
  // response's table is rebuilt on every forward: from the storage cache (core/allocator.hpp).
  CachedVector<double> coef;
  CachedVector<float> coef_f;
  double measured_error = 0;
  std::size_t bytes() const { return coef.size() * (sizeof(double) + sizeof(float)); }
  int phases() const { return seg.empty() ? m1 + m2 : seg_phase.back(); }
  /// The phase of tau in [0, 1) and sigma in [-1, 1] within it.
  void locate(double tau, int& phase, double& sigma) const;
  /// The tau interval [ta, tb) of a phase.
  void phase_bounds(int phase, double& ta, double& tb) const;
  template <class T>
  const T* data() const;
};

/// Builds the cheapest table meeting `tol` (relative to max|fn| on [lo, hi]); null if none does
/// within the memory cap.
/// `breakpoints`: sorted, strictly inside (lo, hi) (Note [Breakpoints]). `why` (optional) says why
/// no table was built.
std::shared_ptr<const Table> build_polyphase(const std::function<double(double)>& fn, double lo, double hi, double dx,
                                             double tol, const std::vector<double>& breakpoints = {},
                                             std::string* why = nullptr);
/// A polyphase table of a sampled response (its per-cell coefficients, see sampled_cells) meeting
/// tol with degree <= 3 and <= 64 phases, or null. Built per forward: the values change. The result
/// is a function of the arguments only (Note [Deterministic table search] in resample_tables.cpp).
/// `smoothness`: 2 when the interpolated function is C1 (cubic values), 1 when C0 (linear values, a
/// cubic one's derivative), 0 when it jumps (a linear one's derivative). `probe_cells`: the cells of a
/// generic response on the same lattice (same interpolation and order); the table must meet tol on
/// it too, with the same degree and phases (Note [Values gradient through the table]).
std::shared_ptr<const Table> build_polyphase_sampled(const std::vector<double>& cells,
                                                     const std::vector<double>& probe_cells, double delta, double lo,
                                                     double hi, double dx, double tol, int smoothness);
/// Forgets the probe errors build_polyphase_sampled remembers (Note [Probe memo]; for tests that
/// check that results do not depend on it).
void clear_probe_memo();
std::shared_ptr<const Table> build_lattice(const std::function<double(double)>& fn, double lo, double hi, double tol,
                                           const std::vector<double>& breakpoints = {}, std::string* why = nullptr);

/// Per-cell coefficients a_k(i), k < 4, of a sampled response in the local s in [0, 1) of cell
/// i < K-1, so that r(lo + (i + s)*delta) = sum_k a_k(i) s^k. With order m > 0: the coefficients of
/// its m-th derivative, differentiated m times (each time a'_k = (k+1) a_(k+1) / delta, a'_3 = 0).
std::vector<double> sampled_cells(const std::vector<double>& v, bool linear, double delta, int order);
/// Adjoint of sampled_cells: d loss / d v from d loss / d a (the cells of the given order).
std::vector<double> sampled_cells_adjoint(const std::vector<double>& grad_cells, std::int64_t K, bool linear,
                                          double delta = 1, int order = 0);

/// How the kernels evaluate r (or r') at taps.
struct Evaluator {
  enum Kind { polyphase, lattice, sampled, exact } kind = exact;
  const Table* table = nullptr;                       // polyphase, lattice
  const double* cells = nullptr;                      // sampled: 4 coefficients per cell
  std::int64_t ncells = 0;                            // sampled
  double delta = 1;                                   // sampled lattice spacing
  const std::function<double(double)>* fn = nullptr;  // exact
};

struct Geometry {
  bool uniform = true;
  double x0 = 0, dx = 1;
  std::int64_t B = 0;
  const double* xs = nullptr;
  double lo = 0, hi = 0;
};

/// The taps of one output: fine indices b0 + j for j in [j0, j1). For polyphase evaluation also
/// the phase and sigma; otherwise weights are written to a scratch buffer w[j - j0].
struct Taps {
  std::int64_t b0 = 0, j0 = 0, j1 = 0;
  int phase = 0;
  double sigma = 0;
  std::int64_t n() const { return j1 - j0; }
};
// Every output's taps, rebuilt on every call (N*A of them): from the storage cache, not fresh pages.
using TapsVector = CachedVector<Taps>;

struct Problem {
  std::int64_t P = 1, N = 0, A = 0;  // f is (P, N, B), coarse (N, A), out (P, N, A)
  const double* coarse = nullptr;    // (N, A), in double
  // Optional: every output's polyphase taps (N*A, index order) from plan_taps with the same
  // evaluator, so that the forward and both backward passes locate each output once, not three times.
  const Taps* taps = nullptr;
};

/// Every output's taps for a polyphase evaluator (empty for other kinds), computed in parallel.
TapsVector plan_taps(const Geometry& geo, const Evaluator& ev, const Problem& pr);

/// out[p, n, a] = sum_b r(coarse[n,a] - x_b) f[p, n, b].
template <class T>
void forward(const Geometry& geo, const Evaluator& ev, const Problem& pr, const T* f, T* out);
/// gf[p, n, b] = sum_a g[p, n, a] r(coarse[n,a] - x_b)  (gf is overwritten).
template <class T>
void backward_f(const Geometry& geo, const Evaluator& ev, const Problem& pr, const T* g, T* gf);
/// The same gradient when the forward evaluated the sampled response through `table` (a polyphase
/// table built from the cells, uniform grids): the exact adjoint of that tabulated forward
/// (Note [Values gradient through the table] in resample_kernels.cpp).
template <class T>
std::vector<double> backward_cells_polyphase(const Geometry& geo, const Table& table, std::int64_t ncells, double delta,
                                             const Problem& pr, const T* f, const T* g);
/// grad_cells[i*4 + k] = sum g[p,n,a] sum_{b in cell i} s^k f[p,n,b]  (sampled responses).
template <class T>
std::vector<double> backward_cells(const Geometry& geo, std::int64_t ncells, double delta, const Problem& pr,
                                   const T* f, const T* g);

}  // namespace xgrad::detail::resample
