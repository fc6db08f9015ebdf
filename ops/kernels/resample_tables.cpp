// Tables of resample_conv: piecewise-polynomial fits of a response (polyphase and lattice), their
// search and cache, and a sampled response's cells (see ops/kernels/resample_kernels.hpp for the notes).
// The kernels that read them are in resample_kernels.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/resample_kernels.hpp"

namespace xgrad::detail::resample {

// ---- polynomial interpolation at Chebyshev-Lobatto nodes ---------------------------------------
Interpolator::Interpolator(int degree) : D(degree), inv(static_cast<std::size_t>((degree + 1) * (degree + 1))) {
  const int n = D + 1;
  for (int i = 0; i < n; ++i) nodes[i] = -std::cos(M_PI * i / D);
  for (int i = 0; i < D; ++i) tests[i] = -std::cos(M_PI * (i + 0.5) / D);
  // Gauss-Jordan inverse of the Vandermonde matrix V[i][k] = nodes[i]^k.
  std::vector<double> a(static_cast<std::size_t>(n * 2 * n), 0.0);
  auto at = [&](int r, int c) -> double& { return a[static_cast<std::size_t>(r * 2 * n + c)]; };
  for (int i = 0; i < n; ++i) {
    double p = 1;
    for (int k = 0; k < n; ++k, p *= nodes[i]) at(i, k) = p;
    at(i, n + i) = 1;
  }
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(at(r, c)) > std::abs(at(piv, c))) piv = r;
    for (int k = 0; k < 2 * n; ++k) std::swap(at(c, k), at(piv, k));
    const double d = at(c, c);
    for (int k = 0; k < 2 * n; ++k) at(c, k) /= d;
    for (int r = 0; r < n; ++r)
      if (r != c) {
        const double m = at(r, c);
        for (int k = 0; k < 2 * n; ++k) at(r, k) -= m * at(c, k);
      }
  }
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < n; ++i) inv[static_cast<std::size_t>(k * n + i)] = at(k, n + i);
}

void Interpolator::fit(const double* values, double* coef) const {
  const int n = D + 1;
  for (int k = 0; k < n; ++k) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += inv[static_cast<std::size_t>(k * n + i)] * values[i];
    coef[k] = s;
  }
}

namespace {

constexpr std::size_t kTableByteCap = std::size_t(8) << 20;  // per table (both precisions)
constexpr double kSlop = 1e-9;                               // in units of dx (tap counting)

inline double horner_cell(const double* a, double s) { return ((a[3] * s + a[2]) * s + a[1]) * s + a[0]; }

// Fits `pieces` polynomials; piece q maps sigma to the argument d = arg(q, sigma). Writes
// coefficients through store(q, k, value) and returns the max error at the test points relative
// to the max |fn| seen. Pieces are fitted in parallel (fn is called from several threads, as in
// the kernels); the maxima do not depend on the order, so neither does the result.
template <class Fn, class Arg, class Store>
double fit_pieces(const Fn& fn, const Interpolator& ip, std::int64_t pieces, Arg arg, Store store) {
  const int D = ip.D;
  constexpr std::int64_t kChunk = 256;
  const std::int64_t nch = (pieces + kChunk - 1) / kChunk;
  std::vector<double> chunk_abs(static_cast<std::size_t>(nch), 0.0), chunk_err(static_cast<std::size_t>(nch), 0.0);
  // Callers hold a table mutex: parallel_for is isolated (Note [Task state]), so a waiting thread
  // does not pick up an outer task that could ask for the same table.
  parallel_for(0, nch, 1, [&](std::int64_t c0, std::int64_t c1) {
    double vals[kMaxDegree + 1], coef[kMaxDegree + 1];
    for (std::int64_t ch = c0; ch < c1; ++ch) {
      double maxabs = 0, maxerr = 0;
      for (std::int64_t q = ch * kChunk; q < std::min(pieces, (ch + 1) * kChunk); ++q) {
        for (int i = 0; i <= D; ++i) {
          vals[i] = fn(arg(q, ip.nodes[i]));
          maxabs = std::max(maxabs, std::abs(vals[i]));
        }
        ip.fit(vals, coef);
        for (int k = 0; k <= D; ++k) store(q, k, coef[k]);
        for (int i = 0; i < D; ++i) {
          const double exact = fn(arg(q, ip.tests[i]));
          maxabs = std::max(maxabs, std::abs(exact));
          const double e = std::abs(Interpolator::eval(coef, D, ip.tests[i]) - exact);
          maxerr = std::max(maxerr, std::isfinite(e) ? e : HUGE_VAL);
        }
      }
      chunk_abs[static_cast<std::size_t>(ch)] = maxabs;
      chunk_err[static_cast<std::size_t>(ch)] = maxerr;
    }
  });
  double maxabs = 0, maxerr = 0;
  for (std::int64_t ch = 0; ch < nch; ++ch) {
    maxabs = std::max(maxabs, chunk_abs[static_cast<std::size_t>(ch)]);
    maxerr = std::max(maxerr, chunk_err[static_cast<std::size_t>(ch)]);
  }
  return maxabs > 0 ? maxerr / maxabs : maxerr;
}

// Note [Breakpoints]: the distance from a breakpoint at which the nodes next to it are evaluated,
// a few units of rounding of the support's coordinates: far enough that fn (which may divide or
// compare the argument) sees the correct side, near enough that the fit does not notice.
double breakpoint_nudge(double lo, double hi) { return 4 * DBL_EPSILON * std::max(std::abs(lo), std::abs(hi)); }

// The interval [a, b] of the arguments of a piece whose arguments lie around `mid`: between the
// breakpoints (sorted, inside (lo, hi)) that enclose mid, nudged inside them; lo and hi are exact.
void breakpoint_interval(const std::vector<double>& bps, double lo, double hi, double nudge, double mid, double& a,
                         double& b) {
  const auto it = std::upper_bound(bps.begin(), bps.end(), mid);
  a = it == bps.begin() ? lo : *(it - 1) + nudge;
  b = it == bps.end() ? hi : *it - nudge;
}

template <class Fn>
std::shared_ptr<Table> try_polyphase(const Fn& fn, double lo, double hi, double dx, int D, int m,
                                     const std::vector<double>* bps = nullptr) {
  auto t = std::make_shared<Table>();
  t->polyphase = true;
  t->degree = D;
  t->L = (hi - lo) / dx;
  double phi = t->L - std::floor(t->L);
  if (phi < kSlop || phi > 1 - kSlop) phi = 0;
  t->phi = phi;
  const bool with_bps = bps != nullptr && !bps->empty();
  if (with_bps) {
    // Segments of [0, 1) cut at frac(L) and at every breakpoint's frac((hi - beta)/dx); about m
    // phases in all, spread by length, at least one per segment.
    std::vector<double> cuts;
    auto add = [&](double x) {
      const double fr = x - std::floor(x);
      if (fr > kSlop && fr < 1 - kSlop) cuts.push_back(fr);
    };
    add(t->L);
    for (const double b : *bps) add((hi - b) / dx);
    std::sort(cuts.begin(), cuts.end());
    t->seg.push_back(0.0);
    for (const double c : cuts)
      if (c - t->seg.back() > kSlop) t->seg.push_back(c);
    if (1.0 - t->seg.back() <= kSlop && t->seg.size() > 1) t->seg.pop_back();
    t->seg.push_back(1.0);
    t->seg_phase.push_back(0);
    for (std::size_t g = 0; g + 1 < t->seg.size(); ++g)
      t->seg_phase.push_back(t->seg_phase.back() +
                             std::max(1, static_cast<int>(std::lround(m * (t->seg[g + 1] - t->seg[g])))));
  } else if (phi == 0) {
    t->m1 = 0;
    t->m2 = m;
  } else {
    t->m1 = std::clamp(static_cast<int>(std::lround(m * phi)), 1, std::max(1, m - 1));
    t->m2 = std::max(1, m - t->m1);
  }
  const double nudge = with_bps ? breakpoint_nudge(lo, hi) : 0.0;
  const int P = t->phases();
  auto bounds = [&](int p, double& ta, double& tb) { t->phase_bounds(p, ta, tb); };
  t->count.resize(static_cast<std::size_t>(P));
  std::int64_t maxc = 0;
  for (int p = 0; p < P; ++p) {
    double ta, tb;
    bounds(p, ta, tb);
    const std::int64_t c = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(t->L - tb + kSlop)) + 1);
    t->count[static_cast<std::size_t>(p)] = c;
    maxc = std::max(maxc, c);
  }
  t->stride = (maxc + 7) / 8 * 8 + 8;
  const std::size_t n =
      static_cast<std::size_t>(P) * static_cast<std::size_t>(D + 1) * static_cast<std::size_t>(t->stride);
  if (n * (sizeof(double) + sizeof(float)) > kTableByteCap) return nullptr;
  t->coef.assign(n, 0.0);
  // Per phase, fn at every node (and test point) for all taps j at once: loops over j that the
  // compiler keeps tight, then the fit as (D+1)x(D+1) combinations of those rows. Phases run in
  // parallel; the maxima do not depend on the order. (This runs on every forward of a sampled
  // response, so it must cost little next to the forward itself.)
  const Interpolator ip(D);
  const std::int64_t S = t->stride;
  std::vector<double> phase_abs(static_cast<std::size_t>(P), 0.0), phase_err(static_cast<std::size_t>(P), 0.0);
  parallel_for(0, P, 1, [&](std::int64_t p0, std::int64_t p1) {
    std::vector<double> vals(static_cast<std::size_t>((2 * D + 1) * S));
    std::vector<double> ca, cb;  // with breakpoints: each tap's argument interval
    for (std::int64_t p = p0; p < p1; ++p) {
      double ta, tb;
      t->phase_bounds(static_cast<int>(p), ta, tb);
      const std::int64_t cnt = t->count[static_cast<std::size_t>(p)];
      if (with_bps) {
        ca.resize(static_cast<std::size_t>(cnt));
        cb.resize(static_cast<std::size_t>(cnt));
        for (std::int64_t j = 0; j < cnt; ++j)
          breakpoint_interval(*bps, lo, hi, nudge, hi - (static_cast<double>(j) + 0.5 * (ta + tb)) * dx,
                              ca[static_cast<std::size_t>(j)], cb[static_cast<std::size_t>(j)]);
      }
      // rows 0..D: the nodes; rows D+1..2D: the test points
      for (int i = 0; i < 2 * D + 1; ++i) {
        const double sg =
            i <= D ? ip.nodes[static_cast<std::size_t>(i)] : ip.tests[static_cast<std::size_t>(i - D - 1)];
        const double tau = ta + (sg + 1) * 0.5 * (tb - ta);
        double* v = vals.data() + i * S;
        if constexpr (requires { fn.row(lo, hi, tau, dx, cnt, v); }) {
          if (!with_bps) {
            fn.row(lo, hi, tau, dx, cnt, v);  // the same values, a cell at a time
            continue;
          }
        }
        if (with_bps) {
          for (std::int64_t j = 0; j < cnt; ++j)
            v[j] = fn(std::clamp(hi - (static_cast<double>(j) + tau) * dx, ca[static_cast<std::size_t>(j)],
                                 cb[static_cast<std::size_t>(j)]));
        } else {
          for (std::int64_t j = 0; j < cnt; ++j)
            v[j] = fn(std::clamp(hi - (static_cast<double>(j) + tau) * dx, lo, hi));
        }
      }
      double* cp = t->coef.data() + p * (D + 1) * S;
      for (int k = 0; k <= D; ++k) {
        double* c = cp + k * S;
        for (std::int64_t j = 0; j < cnt; ++j) c[j] = 0;
        for (int i = 0; i <= D; ++i) {
          const double w = ip.inv[static_cast<std::size_t>(k * (D + 1) + i)];
          const double* v = vals.data() + i * S;
          for (std::int64_t j = 0; j < cnt; ++j) c[j] += w * v[j];
        }
      }
      double maxabs = 0, maxerr = 0;
      for (int i = 0; i < 2 * D + 1; ++i) {
        const double* v = vals.data() + i * S;
        for (std::int64_t j = 0; j < cnt; ++j) maxabs = std::max(maxabs, std::abs(v[j]));
      }
      for (int i = 0; i < D; ++i) {
        const double sg = ip.tests[static_cast<std::size_t>(i)];
        const double* v = vals.data() + (D + 1 + i) * S;
        for (std::int64_t j = 0; j < cnt; ++j) {
          double e = cp[D * S + j];
          for (int k = D - 1; k >= 0; --k) e = e * sg + cp[k * S + j];
          e = std::abs(e - v[j]);
          maxerr = std::max(maxerr, std::isfinite(e) ? e : HUGE_VAL);
        }
      }
      phase_abs[static_cast<std::size_t>(p)] = maxabs;
      phase_err[static_cast<std::size_t>(p)] = maxerr;
    }
  });
  double maxabs = 0, maxerr = 0;
  for (int p = 0; p < P; ++p) {
    maxabs = std::max(maxabs, phase_abs[static_cast<std::size_t>(p)]);
    maxerr = std::max(maxerr, phase_err[static_cast<std::size_t>(p)]);
  }
  t->measured_error = maxabs > 0 ? maxerr / maxabs : maxerr;
  t->coef_f.assign(t->coef.begin(), t->coef.end());
  return t;
}

std::shared_ptr<Table> try_lattice(const std::function<double(double)>& fn, double lo, double hi, int D,
                                   std::int64_t cells, const std::vector<double>* bps = nullptr) {
  const std::size_t n = static_cast<std::size_t>(cells) * static_cast<std::size_t>(D + 1);
  if (n * (sizeof(double) + sizeof(float)) > kTableByteCap) return nullptr;
  auto t = std::make_shared<Table>();
  t->polyphase = false;
  t->degree = D;
  t->lo = lo;
  t->cells = cells;
  t->h = (hi - lo) / static_cast<double>(cells);
  t->coef.assign(n, 0.0);
  const double h = t->h;
  const double nudge = bps != nullptr ? breakpoint_nudge(lo, hi) : 0.0;
  t->measured_error = fit_pieces(
      fn, Interpolator(D), cells,
      [&](std::int64_t q, double sigma) {
        const double d = lo + (static_cast<double>(q) + (sigma + 1) * 0.5) * h;
        if (bps == nullptr) return std::clamp(d, lo, hi);
        // Cells end on breakpoints (Note [Breakpoints]): stay on the cell's side of them.
        double a, b;
        breakpoint_interval(*bps, lo, hi, nudge, lo + (static_cast<double>(q) + 0.5) * h, a, b);
        return std::clamp(d, a, b);
      },
      [&](std::int64_t q, int k, double c) {
        t->coef[static_cast<std::size_t>(q) * static_cast<std::size_t>(D + 1) + static_cast<std::size_t>(k)] = c;
      });
  t->coef_f.assign(t->coef.begin(), t->coef.end());
  return t;
}

// The cheapest (lowest degree, then fewest pieces) table meeting tol. Errors fall like
// pieces^-(D+1), or like pieces^-order for a function that is only C^(order-1) (order 0: it jumps,
// more pieces do not help): a degree is abandoned when the predicted piece count passes the cap.
// With `jump`, a failed trial is followed by the first doubling of m that reaches the predicted
// count rather than by the next doubling: fewer trials (a sampled response's table is searched on
// every forward), at the price of a table up to twice as large as the smallest that fits when the
// prediction overshoots. Either way the result is a function of the arguments only.
template <class Try>
std::shared_ptr<const Table> search(double tol, std::int64_t first, std::int64_t cap, Try try_table,
                                    int max_degree = kMaxDegree, int order = kMaxDegree + 1, double* best = nullptr,
                                    bool jump = false) {
  for (int D = 1; D <= max_degree; ++D) {
    for (std::int64_t m = D == 1 ? first : 1; m <= cap; m *= 2) {
      auto t = try_table(D, m);
      if (!t) break;
      if (best != nullptr) *best = std::min(*best, t->measured_error);
      if (t->measured_error <= tol) return t;
      const int q = std::min(D + 1, order);
      if (q <= 0) break;
      const double need = static_cast<double>(m) * std::pow(t->measured_error / tol, 1.0 / q);
      if (!std::isfinite(need) || need > 1.5 * static_cast<double>(cap)) break;
      if (jump)  // the next trial at the first doubling that reaches the predicted count
        while (static_cast<double>(2 * m) < need && 2 * m < cap) m *= 2;
    }
  }
  return nullptr;
}

}  // namespace

template <>
const double* Table::data<double>() const {
  return coef.data();
}
template <>
const float* Table::data<float>() const {
  return coef_f.data();
}

void Table::phase_bounds(int p, double& ta, double& tb) const {
  if (!seg.empty()) {  // Note [Breakpoints]
    const std::size_t g =
        static_cast<std::size_t>(std::upper_bound(seg_phase.begin(), seg_phase.end(), p) - seg_phase.begin()) - 1;
    const int m = seg_phase[g + 1] - seg_phase[g], q = p - seg_phase[g];
    ta = seg[g] + (seg[g + 1] - seg[g]) * q / m;
    tb = seg[g] + (seg[g + 1] - seg[g]) * (q + 1) / m;
    return;
  }
  if (p < m1) {
    ta = phi * p / m1;
    tb = phi * (p + 1) / m1;
  } else {
    const int q = p - m1;
    ta = phi + (1 - phi) * q / m2;
    tb = phi + (1 - phi) * (q + 1) / m2;
  }
}

void Table::locate(double tau, int& phase, double& sigma) const {
  double x;
  int p;
  if (!seg.empty()) {  // Note [Breakpoints]: the segment holding tau, then its phase
    const std::size_t G = seg.size() - 1;
    std::size_t g = 0;
    while (g + 1 < G && tau >= seg[g + 1]) ++g;
    const int m = seg_phase[g + 1] - seg_phase[g];
    x = (tau - seg[g]) / (seg[g + 1] - seg[g]) * m;
    p = std::clamp(static_cast<int>(x), 0, m - 1);
    sigma = 2 * (x - p) - 1;
    phase = seg_phase[g] + p;
    return;
  }
  if (m1 > 0 && tau < phi) {
    x = tau / phi * m1;
    p = std::clamp(static_cast<int>(x), 0, m1 - 1);
    sigma = 2 * (x - p) - 1;
    phase = p;
  } else {
    x = (tau - phi) / (1 - phi) * m2;
    p = std::clamp(static_cast<int>(x), 0, m2 - 1);
    sigma = 2 * (x - p) - 1;
    phase = m1 + p;
  }
}

namespace {
std::string no_table_reason(double tol, double best) {
  return fmt::format(
      "no table of degree <= {} within the {} MB cap meets the tolerance {:g} (relative to max|r|; the best "
      "tried measured {:.3g})",
      kMaxDegree, kTableByteCap >> 20, tol, best);
}
}  // namespace

std::shared_ptr<const Table> build_polyphase(const std::function<double(double)>& fn, double lo, double hi, double dx,
                                             double tol, const std::vector<double>& breakpoints, std::string* why) {
  // Rows too long to tabulate, or a support so narrow that the tap-counting slack (kSlop) would
  // reach its interior (Note [Support width and rounding] in resample_conv.cpp): evaluate per tap.
  if ((hi - lo) / dx > 1e6 || (hi - lo) / dx < 1e-6) {
    if (why)
      *why = fmt::format("the support spans {:g} fine spacings, outside the [1e-6, 1e6] a table row can hold",
                         (hi - lo) / dx);
    return nullptr;
  }
  double best = HUGE_VAL;
  const std::vector<double>* bps = breakpoints.empty() ? nullptr : &breakpoints;
  auto t = search(
      tol, 1, 256, [&](int D, std::int64_t m) { return try_polyphase(fn, lo, hi, dx, D, static_cast<int>(m), bps); },
      kMaxDegree, kMaxDegree + 1, &best);
  if (!t && why) *why = no_table_reason(tol, best);
  return t;
}

// Note [Deterministic table search]: a sampled response's table is searched on every forward (its
// values change between steps), so the search must be cheap, and it must be a function of its
// arguments only, never of what ran before (caches may make a call faster, never different): no
// state is kept between calls, so the same values, grid and tolerance give the same table whichever
// grids or responses were used before and whatever the thread count. What keeps it cheap is the
// smoothness of the interpolation, known in advance: a cubic one is C1 (its error falls like
// phases^-2 at any degree, so degrees up to 3 are tried), a linear one and a cubic one's derivative
// are only C0 (phases^-1: degree 1 only), a linear one's derivative jumps (no table can fit it
// unless one phase does). A search that cannot succeed is then abandoned after its first, cheapest
// trial instead of trying every degree up to the phase cap on every call. A failed trial is followed
// by the first doubling of the phase count that reaches the predicted count (search's `jump`), and
// each trial's rows are fitted a cell at a time (CellInterpolant::row): both keep the result a
// function of the arguments, the second gives the very values of a per-tap evaluation.
namespace {
// Note [Probe memo]: the probe's error at a trial degree and phase count is a function of the probe's
// cells, the support, the grid step and the trial only, and the probe is the same on every forward
// of a learnable response: it is fitted once and remembered (a bounded map under a mutex; the fit
// runs outside the lock, and two threads fitting the same key store the same number). A memo of a
// pure function: calls get faster, never different (Note [Deterministic table search]).
using ProbeKey = std::tuple<std::vector<double>, double, double, double, int, std::int64_t>;
std::mutex g_probe_mutex;
std::map<ProbeKey, double>& probe_errors() {
  static std::map<ProbeKey, double> m;
  return m;
}
bool probe_error_memo(const ProbeKey& key, double& e) {
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  const auto it = probe_errors().find(key);
  if (it == probe_errors().end()) return false;
  e = it->second;
  return true;
}
void remember_probe_error(const ProbeKey& key, double e) {
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  if (probe_errors().size() >= 4096) probe_errors().clear();  // bounded: a few MB at most
  probe_errors().emplace(key, e);
}
}  // namespace

void clear_probe_memo() {
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  probe_errors().clear();
}

namespace {
// A sampled response's interpolant: cubic cells (coefficients in s in [0, 1)) on a lattice of step
// delta from lo.
struct CellInterpolant {
  const double* c;
  std::int64_t ncells;
  double lo, delta;
  std::int64_t cell(double u) const {
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(u)), 0, ncells - 1);
  }
  double operator()(double d) const {
    const double u = (d - lo) / delta;
    const std::int64_t i = cell(u);
    return horner_cell(c + i * 4, u - static_cast<double>(i));
  }
  // v[j] = (*this)(clamp(shi - (j + tau) dx, slo, shi)) for j < cnt, bit for bit, for try_polyphase:
  // the arguments fall with j, so the taps of one cell are consecutive; each run is a loop with
  // fixed coefficients the compiler vectorises instead of a floor and a dependent load per tap.
  void row(double slo, double shi, double tau, double dx, std::int64_t cnt, double* v) const {
    const auto u_at = [&](std::int64_t q) {
      return (std::clamp(shi - (static_cast<double>(q) + tau) * dx, slo, shi) - lo) / delta;
    };
    const double per_cell = delta / dx;  // taps per cell
    std::int64_t j = 0;
    while (j < cnt) {
      const double uj = u_at(j);
      const std::int64_t i = cell(uj);
      // The run's end: estimated, then corrected so that [j, je) are exactly the taps in cell i.
      const double left = std::clamp((uj - static_cast<double>(i)) * per_cell, 0.0, static_cast<double>(cnt));
      std::int64_t je = std::min(cnt, j + 1 + static_cast<std::int64_t>(left));
      while (je > j + 1 && cell(u_at(je - 1)) != i) --je;
      while (je < cnt && cell(u_at(je)) == i) ++je;
      // horner_cell's expression, its coefficients in locals: v may alias c as far as the compiler
      // knows, and re-reading them after every store would stop the loop from vectorising.
      const double a0 = c[i * 4], a1 = c[i * 4 + 1], a2 = c[i * 4 + 2], a3 = c[i * 4 + 3];
      const double fi = static_cast<double>(i);
      for (std::int64_t q = j; q < je; ++q) {
        const double s = u_at(q) - fi;
        v[q] = ((a3 * s + a2) * s + a1) * s + a0;
      }
      j = je;
    }
  }
};
}  // namespace

std::shared_ptr<const Table> build_polyphase_sampled(const std::vector<double>& cells,
                                                     const std::vector<double>& probe_cells, double delta, double lo,
                                                     double hi, double dx, double tol, int smoothness) {
  if ((hi - lo) / dx > 1e5 || (hi - lo) / dx < 1e-6) return nullptr;  // as in build_polyphase
  const auto interpolant = [&](const std::vector<double>& c) {
    return CellInterpolant{c.data(), static_cast<std::int64_t>(c.size() / 4), lo, delta};
  };
  const auto fn = interpolant(cells), probe = interpolant(probe_cells);
  // Each trial degree and phase count must fit the probe as well (Note [Values gradient through the
  // table]): the table is the actual response's, its error the larger of the two.
  return search(
      tol, 1, 64,
      [&](int D, std::int64_t m) {
        auto t = try_polyphase(fn, lo, hi, dx, D, static_cast<int>(m));
        if (t && t->measured_error <= tol) {
          const ProbeKey key{probe_cells, lo, hi, dx, D, m};
          double e = 0;
          if (!probe_error_memo(key, e)) {
            const auto tp = try_polyphase(probe, lo, hi, dx, D, static_cast<int>(m));
            e = tp ? tp->measured_error : HUGE_VAL;
            remember_probe_error(key, e);
          }
          t->measured_error = std::max(t->measured_error, e);
        }
        return t;
      },
      smoothness >= 2 ? 3 : 1, smoothness, nullptr, /*jump=*/true);
}

std::shared_ptr<const Table> build_lattice(const std::function<double(double)>& fn, double lo, double hi, double tol,
                                           const std::vector<double>& breakpoints, std::string* why) {
  // Note [Breakpoints]: the cell count is a multiple of the smallest M that puts every breakpoint on
  // a cell boundary (within 1e-9 of a cell).
  std::int64_t M = 1;
  if (!breakpoints.empty()) {
    M = 0;
    for (std::int64_t m = 1; m <= 64 && M == 0; ++m) {
      bool on = true;
      for (const double b : breakpoints) {
        const double u = (b - lo) / (hi - lo) * static_cast<double>(m);
        on = on && std::abs(u - std::round(u)) <= 1e-9;
      }
      if (on) M = m;
    }
    if (M == 0) {
      if (why)
        *why =
            "its breakpoints do not all lie on cell boundaries lo + k (hi - lo) / M for one M <= 64, which the "
            "lattice of a non-uniform grid needs (a uniform grid has no such limit)";
      return nullptr;
    }
  }
  double best = HUGE_VAL;
  const std::vector<double>* bps = breakpoints.empty() ? nullptr : &breakpoints;
  auto t = search(
      tol, 16, std::int64_t(1) << 20,
      [&](int D, std::int64_t cells) { return try_lattice(fn, lo, hi, D, (cells + M - 1) / M * M, bps); }, kMaxDegree,
      kMaxDegree + 1, &best);
  if (!t && why) *why = no_table_reason(tol, best);
  return t;
}

// ---- sampled responses --------------------------------------------------------------------------
namespace {
// Catmull-Rom weights: r(s) = sum_{q=-1..2} v[i+q] * sum_k kCubic[q+1][k] s^k.
constexpr double kCubic[4][4] = {{0, -0.5, 1, -0.5}, {1, 0, -2.5, 1.5}, {0, 0.5, 2, -1.5}, {0, 0, -0.5, 0.5}};
}  // namespace

std::vector<double> sampled_cells(const std::vector<double>& v, bool linear, double delta, int order) {
  const std::int64_t K = static_cast<std::int64_t>(v.size());
  std::vector<double> a(static_cast<std::size_t>((K - 1) * 4), 0.0);
  auto vx = [&](std::int64_t i) {
    if (i < 0) return 2 * v[0] - v[1];
    if (i >= K) return 2 * v[static_cast<std::size_t>(K - 1)] - v[static_cast<std::size_t>(K - 2)];
    return v[static_cast<std::size_t>(i)];
  };
  for (std::int64_t i = 0; i + 1 < K; ++i) {
    double c[4] = {0, 0, 0, 0};
    if (linear) {
      c[0] = vx(i);
      c[1] = vx(i + 1) - vx(i);
    } else {
      for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 4; ++k) c[k] += kCubic[q][k] * vx(i + q - 1);
    }
    for (int m = 0; m < order; ++m) {  // differentiate in d = lo + (i + s) delta
      for (int k = 0; k < 3; ++k) c[k] = (k + 1) * c[k + 1] / delta;
      c[3] = 0;
    }
    double* out = &a[static_cast<std::size_t>(i * 4)];
    for (int k = 0; k < 4; ++k) out[k] = c[k];
  }
  return a;
}

std::vector<double> sampled_cells_adjoint(const std::vector<double>& grad_cells, std::int64_t K, bool linear,
                                          double delta, int order) {
  // Back through the `order` differentiations first (the adjoint of c[k] = (k+1) c[k+1] / delta).
  std::vector<double> ga = grad_cells;
  for (int m = 0; m < order; ++m)
    for (std::size_t i = 0; i + 4 <= ga.size(); i += 4) {
      double* g = &ga[i];
      for (int k = 3; k >= 1; --k) g[k] = k * g[k - 1] / delta;
      g[0] = 0;
    }
  std::vector<double> gv(static_cast<std::size_t>(K), 0.0);
  auto add = [&](std::int64_t i, double w) {
    if (i < 0) {
      gv[0] += 2 * w;
      gv[1] -= w;
    } else if (i >= K) {
      gv[static_cast<std::size_t>(K - 1)] += 2 * w;
      gv[static_cast<std::size_t>(K - 2)] -= w;
    } else {
      gv[static_cast<std::size_t>(i)] += w;
    }
  };
  for (std::int64_t i = 0; i + 1 < K; ++i) {
    const double* g = &ga[static_cast<std::size_t>(i * 4)];
    if (linear) {
      add(i, g[0] - g[1]);
      add(i + 1, g[1]);
    } else {
      for (int q = 0; q < 4; ++q) {
        double w = 0;
        for (int k = 0; k < 4; ++k) w += kCubic[q][k] * g[k];
        add(i + q - 1, w);
      }
    }
  }
  return gv;
}

}  // namespace xgrad::detail::resample
