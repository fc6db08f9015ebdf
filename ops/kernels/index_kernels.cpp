#include "xgrad/ops/kernels/index_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail {

void widen_indices(const std::int32_t* p, std::int64_t n, std::int64_t* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = p[i];
}

std::int64_t first_out_of_range(const std::int64_t* p, std::int64_t count, std::int64_t n) {
  constexpr std::int64_t kChunk = 65536;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<std::int64_t> bad(static_cast<std::size_t>(chunks), -1);
  parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t k = c * kChunk; k < std::min(count, (c + 1) * kChunk); ++k)
        if (p[k] < 0 || p[k] >= n) {
          bad[static_cast<std::size_t>(c)] = k;
          break;
        }
  });
  for (const std::int64_t k : bad)
    if (k >= 0) return k;
  return -1;
}

// ---- gather / scatter along a dim with a full index (Note [Index along a dim] in ops/indexing.cpp) --

DimOffsets dim_offsets(const Shape& s, const Shape& is, std::size_t a) {
  const Shape st = contiguous_strides(s);
  DimOffsets off;
  off.stride = st[a];
  std::int64_t lead = 1, trail = 1;
  for (std::size_t d = 0; d < is.size(); ++d) (d < a ? lead : trail) *= d == a ? 1 : is[d];
  off.lead.resize(static_cast<std::size_t>(lead));
  off.trail.resize(static_cast<std::size_t>(trail));
  parallel_for(0, lead, kParallelGrain / 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      std::int64_t rem = o, v = 0;
      for (std::size_t d = a; d-- > 0;) {
        v += (rem % is[d]) * st[d];
        rem /= is[d];
      }
      off.lead[static_cast<std::size_t>(o)] = v;
    }
  });
  off.trail_identity = true;
  for (std::size_t d = a + 1; d < is.size(); ++d) off.trail_identity = off.trail_identity && is[d] == s[d];
  for (std::int64_t i = 0; i < trail; ++i) {
    std::int64_t rem = i, v = 0;
    for (std::size_t d = is.size(); d-- > a + 1;) {
      v += (rem % is[d]) * st[d];
      rem /= is[d];
    }
    off.trail[static_cast<std::size_t>(i)] = v;
  }
  return off;
}

template <class T>
bool gather_along_kernel(const T* x, T* y, const std::int64_t* ip, std::int64_t lead, std::int64_t m,
                         std::int64_t trail, std::int64_t n, const DimOffsets& xo, const DimOffsets& yo) {
  const bool id = xo.trail_identity && yo.trail_identity;
  const auto un = static_cast<std::uint64_t>(n);
  std::atomic<bool> bad{false};  // a flag, set at most once per task (no float atomics)
  parallel_for(0, lead * m, grain_for(trail), [&](std::int64_t r0, std::int64_t r1) {
    bool task_bad = false;
    for (std::int64_t r = r0; r < r1; ++r) {
      const auto o = static_cast<std::size_t>(r / m);
      const std::int64_t* ir = ip + r * trail;
      const T* xb = x + xo.lead[o];
      T* yb = y + yo.lead[o] + (r % m) * yo.stride;
      for (std::int64_t i = 0; i < trail; ++i) {
        if (static_cast<std::uint64_t>(ir[i]) >= un) {
          task_bad = true;
          continue;
        }
        if (id)
          yb[i] = xb[ir[i] * xo.stride + i];
        else
          yb[yo.trail[static_cast<std::size_t>(i)]] = xb[ir[i] * xo.stride + xo.trail[static_cast<std::size_t>(i)]];
      }
    }
    if (task_bad) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

namespace {

// torch's max/min update: a NaN from either side stays (std::max(NaN, x) is NaN).
template <class T>
T nan_max(T a, T b) {
  return std::isnan(b) ? b : std::max(a, b);
}
template <class T>
T nan_min(T a, T b) {
  return std::isnan(b) ? b : std::min(a, b);
}

// The loop of scatter_along_kernel with its combine inlined.
template <class T, class Combine>
bool scatter_lines(const T* s, T* d, const std::int64_t* ip, std::int64_t lead, std::int64_t m, std::int64_t trail,
                   std::int64_t n, const DimOffsets& xo, const DimOffsets& so, Combine combine) {
  const bool id = xo.trail_identity && so.trail_identity;
  const auto un = static_cast<std::uint64_t>(n);
  std::atomic<bool> bad{false};
  // Column ranges only split the work (any split gives the same sums), and only long ones: two
  // threads on the two halves of 64-float rows (the row-broadcast scatter of bench/index_ops.cpp)
  // ran slower than one thread alone (bench/results/tuning_notes.md, "Row scatter over column
  // ranges"), each core streaming the whole index and src through
  // its prefetchers. Below kMinCols columns a scatter is parallel over its leading positions only.
  constexpr std::int64_t kMinCols = 2048;
  const std::int64_t cw = std::min(trail, kMinCols);
  const std::int64_t nc = (trail + cw - 1) / cw;
  parallel_for(0, lead * nc, grain_for(m * cw), [&](std::int64_t t0, std::int64_t t1) {
    bool task_bad = false;
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / nc, i0 = (t % nc) * cw, i1 = std::min(trail, i0 + cw);
      T* db = d + xo.lead[static_cast<std::size_t>(o)];
      const T* sb = s + so.lead[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < m; ++k) {
        const std::int64_t* ir = ip + (o * m + k) * trail;
        const T* sr = sb + k * so.stride;
        for (std::int64_t i = i0; i < i1; ++i) {
          if (static_cast<std::uint64_t>(ir[i]) >= un) {
            task_bad = true;
            continue;
          }
          T& dst = id ? db[ir[i] * xo.stride + i] : db[ir[i] * xo.stride + xo.trail[static_cast<std::size_t>(i)]];
          dst = combine(dst, id ? sr[i] : sr[so.trail[static_cast<std::size_t>(i)]]);
        }
      }
    }
    if (task_bad) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

}  // namespace

template <class T>
bool scatter_along_kernel(const T* s, T* d, const std::int64_t* ip, std::int64_t lead, std::int64_t m,
                          std::int64_t trail, std::int64_t n, const DimOffsets& xo, const DimOffsets& so,
                          ScatterCombine combine, double fill) {
  switch (combine) {
    case ScatterCombine::Sum:
      return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [](T a, T v) { return a + v; });
    case ScatterCombine::Prod:
      return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [](T a, T v) { return a * v; });
    case ScatterCombine::Max:
      return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [](T a, T v) { return nan_max(a, v); });
    case ScatterCombine::Min:
      return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [](T a, T v) { return nan_min(a, v); });
    case ScatterCombine::Count:
      return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [](T a, T) { return static_cast<T>(a + 1); });
    case ScatterCombine::Fill:
      break;
  }
  const auto value = static_cast<T>(fill);
  return scatter_lines(s, d, ip, lead, m, trail, n, xo, so, [value](T, T) { return value; });
}

template <class T>
void divide_by_count(T* y, T* count, std::int64_t numel) {
  for (std::int64_t e = 0; e < numel; ++e) {
    if (count[e] == T(0)) count[e] = T(1);
    y[e] /= count[e];
  }
}

// ---- index maps ----------------------------------------------------------------------------------

void fill_row_map(std::int64_t* map, const std::int64_t* rows, std::int64_t count, std::int64_t inner) {
  parallel_for(0, count, grain_for(inner), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t i = 0; i < inner; ++i) map[r * inner + i] = rows[r] * inner + i;
  });
}

std::vector<std::int64_t> true_positions(const bool* m, std::int64_t n) {
  std::vector<std::int64_t> rows;
  for (std::int64_t p = 0; p < n; ++p)
    if (m[p]) rows.push_back(p);
  return rows;
}

void broadcast_indices(const std::int64_t* idx, const Shape& is, const Shape& bshape, std::int64_t* out) {
  const std::int64_t total = shape_numel(bshape);
  const Shape istr = contiguous_strides(is);
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t rem = e, off = 0;
    for (std::size_t d = bshape.size(); d-- > 0;) {
      const std::int64_t i = rem % bshape[d];
      rem /= bshape[d];
      if (is[d] != 1) off += i * istr[d];
    }
    out[e] = idx[off];
  }
}

// ---- arg-reductions, sort, topk --------------------------------------------------------------------

namespace {

// "a comes before b" in ascending order with NaN above every number (torch's sort order).
template <class T>
inline bool less_nan_last(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b != b) return a == a;
    if (a != a) return false;
  }
  return a < b;
}

// "v replaces the best so far w" for argmax / argmin: a NaN beats every number and then stays (NaN
// counts as both the maximum and the minimum, as torch); otherwise strictly larger / smaller, so
// the first of tied values is kept.
template <bool kMax, class T>
inline bool arg_beats(T v, T w) {
  if constexpr (std::is_floating_point_v<T>) {
    if (w != w) return false;
    if (v != v) return true;
  }
  return kMax ? w < v : v < w;
}

template <bool kMax, class T>
void arg_lines(const T* xp, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t* yp) {
  parallel_for(0, outer * inner, grain_for(n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const T* p = xp + (t / inner) * n * inner + t % inner;
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < n; ++j)
        if (arg_beats<kMax>(p[j * inner], p[best * inner])) best = j;
      yp[t] = best;
    }
  });
}

}  // namespace

template <class T>
void arg_extreme(const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner, bool is_max, std::int64_t* y) {
  if (is_max)
    arg_lines<true>(x, outer, n, inner, y);
  else
    arg_lines<false>(x, outer, n, inner, y);
}

template <class T>
void sort_lines(const T* xp, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t k, bool descending,
                std::int64_t* pp) {
  parallel_for(0, outer * inner, grain_for(n * 8), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t o = t / inner, i = t % inner;
      const T* p = xp + o * n * inner + i;
      std::iota(order.begin(), order.end(), std::int64_t{0});
      auto cmp = [&](std::int64_t u, std::int64_t v) {
        return descending ? less_nan_last(p[v * inner], p[u * inner]) : less_nan_last(p[u * inner], p[v * inner]);
      };
      if (k < n)
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t u, std::int64_t v) {
          return cmp(u, v) || (!cmp(v, u) && u < v);  // ties by position: stable
        });
      else
        std::stable_sort(order.begin(), order.end(), cmp);
      for (std::int64_t j = 0; j < k; ++j) pp[(o * k + j) * inner + i] = order[static_cast<std::size_t>(j)];
    }
  });
}

void sorted_map(const std::int64_t* pp, std::int64_t count, std::int64_t n, std::int64_t inner, std::int64_t k,
                std::int64_t* map) {
  parallel_for(0, count, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const std::int64_t i = q % inner, o = q / (inner * k);
      map[q] = (o * n + pp[q]) * inner + i;
    }
  });
}

// ---- nonzero, one_hot ----------------------------------------------------------------------------

namespace {
constexpr std::int64_t kNonzeroChunk = kParallelGrain;
}  // namespace

template <class T>
NonzeroFlags nonzero_flags(const T* xp, std::int64_t total) {
  constexpr std::int64_t kChunk = kNonzeroChunk;
  const std::int64_t chunks = (total + kChunk - 1) / kChunk;
  NonzeroFlags f;
  f.start.assign(static_cast<std::size_t>(chunks) + 1, 0);
  f.nz.resize(static_cast<std::size_t>(total));
  std::int64_t* count = f.start.data();
  std::uint8_t* nz = f.nz.data();
  parallel_for(0, chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t cnt = 0;
      for (std::int64_t i = c * kChunk; i < std::min(total, (c + 1) * kChunk); ++i) {
        nz[i] = xp[i] != T(0);
        cnt += nz[i];
      }
      count[c + 1] = cnt;
    }
  });
  for (std::int64_t c = 0; c < chunks; ++c) count[c + 1] += count[c];
  return f;
}

void nonzero_coords(const NonzeroFlags& f, const Shape& s, std::int64_t total, std::int64_t* yp) {
  constexpr std::int64_t kChunk = kNonzeroChunk;
  const std::int64_t chunks = (total + kChunk - 1) / kChunk;
  const auto nd = static_cast<std::int64_t>(s.size());
  const std::uint8_t* nz = f.nz.data();
  parallel_for(0, chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t r = f.start[static_cast<std::size_t>(c)];
      for (std::int64_t i = c * kChunk; i < std::min(total, (c + 1) * kChunk); ++i) {
        if (!nz[i]) continue;
        std::int64_t rem = i;
        for (std::int64_t d = nd; d-- > 0;) {
          yp[r * nd + d] = rem % s[static_cast<std::size_t>(d)];
          rem /= s[static_cast<std::size_t>(d)];
        }
        ++r;
      }
    }
  });
}

void one_hot_fill(const std::int64_t* labels, std::int64_t count, std::int64_t classes, std::int64_t* y) {
  parallel_for(0, count, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i * classes + labels[i]] = 1;
  });
}

// The kernels that only move or compare elements serve every dtype.
#define XGRAD_INSTANTIATE_ALL_DTYPES(kernel)                    \
  XGRAD_INSTANTIATE_FLOATING(kernel);                           \
  template decltype(kernel<std::int64_t>) kernel<std::int64_t>; \
  template decltype(kernel<std::int32_t>) kernel<std::int32_t>; \
  template decltype(kernel<std::uint8_t>) kernel<std::uint8_t>; \
  template decltype(kernel<bool>) kernel<bool>

XGRAD_INSTANTIATE_ALL_DTYPES(gather_along_kernel);
XGRAD_INSTANTIATE_ALL_DTYPES(arg_extreme);
XGRAD_INSTANTIATE_ALL_DTYPES(nonzero_flags);
XGRAD_INSTANTIATE_FLOATING(scatter_along_kernel);
XGRAD_INSTANTIATE_FLOATING(divide_by_count);
XGRAD_INSTANTIATE_FLOATING(sort_lines);

#undef XGRAD_INSTANTIATE_ALL_DTYPES

}  // namespace xgrad::detail
