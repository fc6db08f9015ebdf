// Note [CSR kernels]: both kernels own whole output rows. The rows are cut into chunks of about
// equal work ((entries + 1) x f per row, so a hub row with many entries is a chunk of its own and a
// run of empty rows costs little), found by binary search on crow; each chunk is one task. A row's
// result is summed in entry order by one task, so the partition (which depends on the thread
// count only through scheduling, never through the arithmetic) cannot change a bit. spmm keeps up
// to eight SIMD registers of the output row in registers over all the row's entries (one load of
// x's row segment and one FMA per register per entry, the rows of x a few entries ahead prefetched),
// then stores them: the output is written once. sddmm is a dot product per entry with SIMD partial sums added by a
// fixed tree. The segment reductions own whole segments in the same way (the compiler vectorises their inner loops).
#include "xgrad/ops/kernels/sparse_kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/scatter_rows.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail {
namespace {

using Arch = xsimd::default_arch;

// Work units per chunk (multiply-adds): enough to pay for a task.
constexpr std::int64_t kChunkWork = 16384;

// Calls fn(r0, r1) over row chunks of about kChunkWork multiply-adds each, in parallel.
template <class Fn>
void for_row_chunks(std::int64_t rows, const std::int64_t* crow, std::int64_t f, Fn&& fn) {
  if (rows <= 0) return;
  const std::int64_t units = crow[rows] + rows;  // (entries + 1) per row
  const std::int64_t per_chunk = std::max<std::int64_t>(1, kChunkWork / std::max<std::int64_t>(f, 1));
  const std::int64_t chunks = (units + per_chunk - 1) / per_chunk;
  if (chunks <= 1) {
    fn(std::int64_t{0}, rows);
    return;
  }
  // First row i whose prefix crow[i] + i reaches u.
  const auto row_at = [&](std::int64_t u) {
    std::int64_t lo = 0, hi = rows;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (crow[mid] + mid < u)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t r0 = row_at(c0 * per_chunk), r1 = c1 == chunks ? rows : row_at(c1 * per_chunk);
    if (r1 > r0) fn(r0, r1);
  });
}

// Entries ahead whose x rows are prefetched: a gather of rows in random order (a power-law graph's
// columns) waits on memory at every entry without it. Measured on R-MAT 2^17 (sparse_ops_bench).
constexpr std::int64_t kPrefetchAhead = 12;

// Columns [j, j + NV·L) of one output row: NV registers accumulate over the row's entries [k0, k1)
// (one load of x's row segment and one FMA per register per entry, one pass over the entries), then
// are stored once.
// The prefetch runs ahead through the entries of the following rows too, up to kend (the end of the
// chunk's entries): on a power-law graph most rows have fewer entries than kPrefetchAhead, and a
// prefetch that stopped at the row's end never ran for them.
template <class T, int NV>
void spmm_row_block(std::int64_t k0, std::int64_t k1, std::int64_t kend, const std::int64_t* col, const T* vals,
                    const T* x, std::int64_t f, std::int64_t j, T* o) {
  using B = simd::batch<T, Arch>;
  constexpr std::int64_t L = simd::lanes<T, Arch>;
  constexpr std::int64_t kLine = 64 / sizeof(T);  // elements per cache line
  B acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = B(T(0));
  for (std::int64_t k = k0; k < k1; ++k) {
    if (k + kPrefetchAhead < kend) {
      const T* ahead = x + col[k + kPrefetchAhead] * f + j;
      for (std::int64_t e = 0; e < NV * L; e += kLine) __builtin_prefetch(ahead + e);
    }
    const B w(vals[k]);
    const T* xr = x + col[k] * f + j;
    for (int v = 0; v < NV; ++v) acc[v] = xsimd::fma(w, simd::load<T, Arch>(xr + v * L), acc[v]);
  }
  for (int v = 0; v < NV; ++v) simd::store<T, Arch>(o + j + v * L, acc[v]);
}

// spmm_row_block<T, NV> for NV = 1 .. 8, by NV - 1.
template <class T, std::size_t... I>
constexpr auto row_blocks(std::index_sequence<I...>) {
  return std::array{&spmm_row_block<T, static_cast<int>(I) + 1>...};
}

// One output row: acc over the entries [k0, k1), written to o (f wide). Up to 8 registers per pass
// over the entries (f <= 8 L in one pass); the last f % L columns in a scalar pass.
template <class T>
void spmm_row(std::int64_t k0, std::int64_t k1, std::int64_t kend, const std::int64_t* col, const T* vals, const T* x,
              std::int64_t f, T* o) {
  constexpr std::int64_t L = simd::lanes<T, Arch>;
  constexpr auto kBlocks = row_blocks<T>(std::make_index_sequence<8>{});
  std::int64_t j = 0;
  for (; j + 8 * L <= f; j += 8 * L) kBlocks[7](k0, k1, kend, col, vals, x, f, j, o);
  if (const std::int64_t vecs = (f - j) / L; vecs > 0) {
    kBlocks[static_cast<std::size_t>(vecs - 1)](k0, k1, kend, col, vals, x, f, j, o);
    j += vecs * L;
  }
  for (; j < f; ++j) {
    T a = 0;
    for (std::int64_t k = k0; k < k1; ++k) a = std::fma(vals[k], x[col[k] * f + j], a);
    o[j] = a;
  }
}

template <class T>
T dot(const T* a, const T* b, std::int64_t f) {
  using B = simd::batch<T, Arch>;
  constexpr std::int64_t L = simd::lanes<T, Arch>;
  std::int64_t j = 0;
  T s = 0;
  if (f >= L) {
    B a0(T(0)), a1(T(0));
    for (; j + 2 * L <= f; j += 2 * L) {
      a0 = xsimd::fma(simd::load<T, Arch>(a + j), simd::load<T, Arch>(b + j), a0);
      a1 = xsimd::fma(simd::load<T, Arch>(a + j + L), simd::load<T, Arch>(b + j + L), a1);
    }
    if (j + L <= f) {
      a0 = xsimd::fma(simd::load<T, Arch>(a + j), simd::load<T, Arch>(b + j), a0);
      j += L;
    }
    s = simd::tree_sum(a0 + a1);
  }
  for (; j < f; ++j) s = std::fma(a[j], b[j], s);
  return s;
}

}  // namespace

template <class T>
void csr_spmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* vals, const T* x,
              std::int64_t f, T* out) {
  if (f == 0) return;
  for_row_chunks(rows, crow, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) spmm_row(crow[i], crow[i + 1], crow[r1], col, vals, x, f, out + i * f);
  });
}

bool coo_to_csr(std::int64_t n, std::int64_t rows, const std::int64_t* r, const std::int64_t* c, std::int64_t* crow,
                std::vector<std::int64_t>& col, std::int64_t* dest) {
  // Stable counting sort by row, then a sort of each row's columns (stable: duplicates keep their order).
  const auto nrows = static_cast<std::size_t>(rows);
  std::vector<std::int64_t> start(nrows + 1, 0);
  for (std::int64_t e = 0; e < n; ++e) ++start[static_cast<std::size_t>(r[e]) + 1];
  for (std::size_t i = 0; i < nrows; ++i) start[i + 1] += start[i];
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  {
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (std::int64_t e = 0; e < n; ++e) order[static_cast<std::size_t>(next[static_cast<std::size_t>(r[e])]++)] = e;
  }
  for (std::size_t i = 0; i < nrows; ++i)
    std::stable_sort(order.begin() + start[i], order.begin() + start[i + 1],
                     [c](std::int64_t a, std::int64_t b) { return c[a] < c[b]; });
  // Merge duplicates: dest[e] = the CSR entry that input entry e adds into.
  col.reserve(col.size() + static_cast<std::size_t>(n));
  bool identity = true;
  crow[0] = 0;
  for (std::size_t i = 0; i < nrows; ++i) {
    for (std::int64_t k = start[i]; k < start[i + 1]; ++k) {
      const std::int64_t e = order[static_cast<std::size_t>(k)];
      if (k == start[i] || c[order[static_cast<std::size_t>(k - 1)]] != c[e]) col.push_back(c[e]);
      dest[e] = static_cast<std::int64_t>(col.size()) - 1;
      identity = identity && dest[e] == e;
    }
    crow[i + 1] = static_cast<std::int64_t>(col.size());
  }
  return identity;
}

void csr_row_indices(std::int64_t rows, const std::int64_t* crow, std::int64_t* row_of) {
  for_row_chunks(rows, crow, 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) std::fill(row_of + crow[i], row_of + crow[i + 1], i);
  });
}

// The transpose is the inverse of the column indices (Note [Cached transpose] in ops/sparse.hpp):
// invert_rows' stable counting sort by column, the one the row scatter of index_add uses, gives Aᵀ's
// row offsets and perm; each column's entries come out in increasing entry order, so in increasing row
// order, and Aᵀ's rows are sorted like any CSR's. A stable sort has one result, so it is the same at
// any thread count.
void csr_transpose(std::int64_t rows, std::int64_t cols, const std::int64_t* crow, const std::int64_t* col,
                   const std::int64_t* row_of, std::int64_t* t_crow, std::int64_t* t_col, std::int64_t* perm) {
  const std::int64_t nnz = crow[rows];
  invert_rows(col, nnz, cols, t_crow, perm);
  parallel_for(0, nnz, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t k = lo; k < hi; ++k) t_col[k] = row_of[perm[k]];
  });
}

template <class T>
void permute_values(std::int64_t n, const std::int64_t* perm, const T* src, T* out) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t k = lo; k < hi; ++k) out[k] = src[perm[k]];
  });
}

template <class T>
void csr_sddmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* x, const T* y,
               std::int64_t f, T* out) {
  for_row_chunks(rows, crow, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i)
      for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k) out[k] = dot(x + i * f, y + col[k] * f, f);
  });
}

template <class T>
void segment_sum(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool mean, T empty,
                 T* out) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      T* o = out + i * f;
      if (mean && off[i] == off[i + 1]) {
        std::fill(o, o + f, empty);
        continue;
      }
      std::fill(o, o + f, T(0));
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) o[j] += data[e * f + j];
      if (mean) {
        const T s = T(1) / static_cast<T>(off[i + 1] - off[i]);
        for (std::int64_t j = 0; j < f; ++j) o[j] *= s;
      }
    }
  });
}

template <class T>
void segment_gather_sum(std::int64_t segments, const std::int64_t* off, const std::int64_t* src, const T* data,
                        std::int64_t f, T* out) {
  if (f == 0) return;
  constexpr std::int64_t kAhead = 8;  // source rows prefetched ahead: random rows, which no prefetcher guesses
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t kend = off[r1];
    for (std::int64_t i = r0; i < r1; ++i) {
      T* __restrict o = out + i * f;
      std::fill(o, o + f, T(0));
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e) {
        if (src != nullptr && e + kAhead < kend) __builtin_prefetch(data + src[e + kAhead] * f);
        const T* __restrict d = data + (src != nullptr ? src[e] : e) * f;
        for (std::int64_t j = 0; j < f; ++j) o[j] += d[j];
      }
    }
  });
}

template <class T>
void scatter_sum_rows(std::int64_t n, const std::int64_t* idx, const T* data, std::int64_t f, std::int64_t rows,
                      T* out) {
  std::fill(out, out + rows * f, T(0));
  for (std::int64_t k = 0; k < n; ++k) {
    T* __restrict o = out + idx[k] * f;
    const T* __restrict d = data + k * f;
    for (std::int64_t j = 0; j < f; ++j) o[j] += d[j];
  }
}

template <class T>
void segment_expand(std::int64_t segments, const std::int64_t* off, const T* g, std::int64_t f, bool mean, T* out) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      const T s = mean ? T(1) / static_cast<T>(off[i + 1] - off[i]) : T(1);
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) out[e * f + j] = mean ? g[i * f + j] * s : g[i * f + j];
    }
  });
}

template <class T>
void segment_softmax(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool log, T* out) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<T> m(static_cast<std::size_t>(f)), s(static_cast<std::size_t>(f));
    for (std::int64_t i = r0; i < r1; ++i) {
      if (off[i] == off[i + 1]) continue;
      std::copy(data + off[i] * f, data + off[i] * f + f, m.begin());
      for (std::int64_t e = off[i] + 1; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j)
          m[static_cast<std::size_t>(j)] = std::max(m[static_cast<std::size_t>(j)], data[e * f + j]);
      std::fill(s.begin(), s.end(), T(0));
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) {
          const T v = std::exp(data[e * f + j] - m[static_cast<std::size_t>(j)]);
          if (!log) out[e * f + j] = v;
          s[static_cast<std::size_t>(j)] += v;
        }
      if (log) {
        // x − (m + log s): the shift by the max keeps exp from overflowing, as torch's log_softmax
        for (std::int64_t j = 0; j < f; ++j) m[static_cast<std::size_t>(j)] += std::log(s[static_cast<std::size_t>(j)]);
        for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
          for (std::int64_t j = 0; j < f; ++j) out[e * f + j] = data[e * f + j] - m[static_cast<std::size_t>(j)];
      } else {
        for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
          for (std::int64_t j = 0; j < f; ++j) out[e * f + j] /= s[static_cast<std::size_t>(j)];
      }
    }
  });
}

template <class T>
void segment_softmax_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* y, std::int64_t f,
                              bool log, T* dx) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<T> d(static_cast<std::size_t>(f));
    for (std::int64_t i = r0; i < r1; ++i) {
      std::fill(d.begin(), d.end(), T(0));
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j)
          d[static_cast<std::size_t>(j)] += log ? g[e * f + j] : g[e * f + j] * y[e * f + j];
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) {
          const T dj = d[static_cast<std::size_t>(j)];
          dx[e * f + j] = log ? g[e * f + j] - std::exp(y[e * f + j]) * dj : y[e * f + j] * (g[e * f + j] - dj);
        }
    }
  });
}

namespace {
// o[j] = the maximum (is_max) or minimum of data[e, j] over e in [e0, e1), NaN when one is NaN;
// `empty` when e0 == e1. The one update rule of segment_max and segment_logsumexp's shift.
template <class T>
void segment_extreme(const T* data, std::int64_t e0, std::int64_t e1, std::int64_t f, bool is_max, T empty, T* o) {
  if (e0 == e1) {
    std::fill(o, o + f, empty);
    return;
  }
  std::copy(data + e0 * f, data + e0 * f + f, o);
  // torch's update: a NaN replaces the running value and stays (std::max(NaN, x) is NaN)
  for (std::int64_t e = e0 + 1; e < e1; ++e)
    for (std::int64_t j = 0; j < f; ++j) {
      const T v = data[e * f + j];
      o[j] = std::isnan(v) ? v : (is_max ? std::max(o[j], v) : std::min(o[j], v));
    }
}

}  // namespace

template <class T>
void segment_max(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool is_max, T empty,
                 T* out) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) segment_extreme(data, off[i], off[i + 1], f, is_max, empty, out + i * f);
  });
}

template <class T>
void segment_logsumexp(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, T* out) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<T> shift(static_cast<std::size_t>(f)), sum(static_cast<std::size_t>(f));
    for (std::int64_t i = r0; i < r1; ++i) {
      T* o = out + i * f;
      segment_extreme(data, off[i], off[i + 1], f, true, -std::numeric_limits<T>::infinity(), shift.data());
      for (T& m : shift)
        if (std::isinf(m)) m = T(0);
      std::fill(sum.begin(), sum.end(), T(0));
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j)
          sum[static_cast<std::size_t>(j)] += std::exp(data[e * f + j] - shift[static_cast<std::size_t>(j)]);
      for (std::int64_t j = 0; j < f; ++j)
        o[j] = std::log(sum[static_cast<std::size_t>(j)]) + shift[static_cast<std::size_t>(j)];
    }
  });
}

template <class T>
void segment_logsumexp_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* data, const T* out,
                                std::int64_t f, T* dx) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i)
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) dx[e * f + j] = g[i * f + j] * std::exp(data[e * f + j] - out[i * f + j]);
  });
}

template <class T>
void segment_max_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* data, const T* out,
                          std::int64_t f, T* dx, T* divisor) {
  if (f == 0) return;
  for_row_chunks(segments, off, f, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<std::int64_t> count(static_cast<std::size_t>(f));
    for (std::int64_t i = r0; i < r1; ++i) {
      std::fill(count.begin(), count.end(), 0);
      for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
        for (std::int64_t j = 0; j < f; ++j) {
          const T v = data[e * f + j];
          const bool tie = std::isnan(v) || v == out[i * f + j];
          count[static_cast<std::size_t>(j)] += tie ? 1 : 0;
          dx[e * f + j] = tie ? T(1) : T(0);
        }
      // the c ties of a column share g evenly (a non-empty segment has at least one)
      for (std::int64_t j = 0; j < f; ++j) {
        const T d = static_cast<T>(std::max<std::int64_t>(count[static_cast<std::size_t>(j)], 1));
        if (divisor != nullptr) {
          divisor[i * f + j] = d;
        } else {
          const T share = g[i * f + j] / d;
          for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
            if (dx[e * f + j] != T(0)) dx[e * f + j] = share;
        }
      }
    }
  });
}

template <class T>
void csr_linear(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* vals, const T* w,
                std::int64_t in, std::int64_t out, const T* b, T* y) {
  if (out == 0) return;
  for_row_chunks(rows, crow, out, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i)
      for (std::int64_t o = 0; o < out; ++o) {
        const T* wr = w + o * in;
        T acc = 0;
        for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k) acc = std::fma(vals[k], wr[col[k]], acc);
        y[i * out + o] = b != nullptr ? acc + b[o] : acc;
      }
  });
}

template <class T>
void csr_linear_backward_values(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* g,
                                const T* w, std::int64_t in, std::int64_t out, T* dv) {
  for_row_chunks(rows, crow, out, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i)
      for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k) {
        T acc = 0;
        for (std::int64_t o = 0; o < out; ++o) acc = std::fma(g[i * out + o], w[o * in + col[k]], acc);
        dv[k] = acc;
      }
  });
}

template <class T>
void csr_linear_backward_weight(std::int64_t in, const std::int64_t* tcrow, const std::int64_t* trow, const T* tvals,
                                const T* g, std::int64_t out, T* dw) {
  const std::int64_t work = tcrow[in] + in;  // per output row of dw
  parallel_for(0, out, std::max<std::int64_t>(1, kChunkWork / std::max<std::int64_t>(work, 1)),
               [&](std::int64_t o0, std::int64_t o1) {
                 for (std::int64_t o = o0; o < o1; ++o)
                   for (std::int64_t c = 0; c < in; ++c) {
                     T acc = 0;
                     for (std::int64_t k = tcrow[c]; k < tcrow[c + 1]; ++k)
                       acc = std::fma(tvals[k], g[trow[k] * out + o], acc);
                     dw[o * in + c] = acc;
                   }
               });
}

XGRAD_INSTANTIATE_FLOATING(csr_linear);
XGRAD_INSTANTIATE_FLOATING(csr_linear_backward_values);
XGRAD_INSTANTIATE_FLOATING(csr_linear_backward_weight);
XGRAD_INSTANTIATE_FLOATING(segment_max);
XGRAD_INSTANTIATE_FLOATING(segment_max_backward);
XGRAD_INSTANTIATE_FLOATING(segment_logsumexp);
XGRAD_INSTANTIATE_FLOATING(segment_logsumexp_backward);
XGRAD_INSTANTIATE_FLOATING(segment_softmax);
XGRAD_INSTANTIATE_FLOATING(segment_softmax_backward);
XGRAD_INSTANTIATE_FLOATING(segment_sum);
XGRAD_INSTANTIATE_FLOATING(segment_expand);
XGRAD_INSTANTIATE_FLOATING(segment_gather_sum);
XGRAD_INSTANTIATE_FLOATING(scatter_sum_rows);
XGRAD_INSTANTIATE_FLOATING(csr_spmm);
XGRAD_INSTANTIATE_FLOATING(permute_values);
XGRAD_INSTANTIATE_FLOATING(csr_sddmm);

}  // namespace xgrad::detail
