#include "xgrad/ops/kernels/reduce_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/simd.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"

namespace xgrad::detail::reduce {

namespace {

constexpr std::int64_t kColBlock = 256;  // columns per task in the kCols kernels

template <class T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

// "v beats best" for max (kMax) or min: larger (smaller), or the first NaN (NaN propagates, like
// torch.amax and torch.amin).
template <bool kMax = true, class T>
inline bool beats(T v, T best) {
  if (is_nan(v) && !is_nan(best)) return true;
  return kMax ? v > best : v < best;
}

// The maximum (kMax) or minimum of p[0..n), n >= 1: vectorised for the floating point maximum,
// a plain loop otherwise (integers: exact, in their own type).
template <bool kMax, class T>
T row_extremum(const T* p, std::int64_t n) {
  if constexpr (kMax && std::is_floating_point_v<T>) {
    return detail::vec_max(p, n);
  } else {
    T best = p[0];
    for (std::int64_t k = 1; k < n; ++k)
      if (beats<kMax>(p[k], best)) best = p[k];
    return best;
  }
}

// Note [Stable logsumexp] (ops/reduction.cpp): an infinite maximum shifts by 0.
template <class T>
inline T finite_or_zero(T m) {
  return std::isinf(m) ? T(0) : m;
}

// out = f(x, a, b) for x seen as (outer, mid, inner) and a, b of shape (outer, inner) broadcast
// along mid (rows or columns layout only); f takes xsimd batches. Vectorised along the contiguous
// direction; each element is written by one task.
template <class T, class F>
void map_with_kept(const Layout& l, T* out, const T* x, const T* a, const T* b, F f) {
  using B = detail::simd::default_batch<T>;
  if (l.kind == Layout::kRows) {
    parallel_for(0, l.outer, grain_for(l.mid), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const B ab(a[r]), bb(b[r]);
        detail::vec_map(
            l.mid, out + r * l.mid, [&](B v) { return f(v, ab, bb); }, x + r * l.mid);
      }
    });
    return;
  }
  parallel_for(0, l.outer * l.mid, grain_for(l.inner), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t o = (r / l.mid) * l.inner;
      detail::vec_map(l.inner, out + r * l.inner, f, x + r * l.inner, a + o, b + o);
    }
  });
}

template <class T>
inline bool beats_min(T v, T best) {
  return v < best || (v != v && best == best);
}

template <class T>
T row_mean(const T* x, std::int64_t k) {
  T s = 0;
  for (std::int64_t j = 0; j < k; ++j) s += x[j];
  return s / static_cast<T>(k);
}

// y of one row of K elements.
template <class T>
T row_forward(const RowReduce& r, const T* x, std::int64_t k) {
  switch (r.op) {
    case RowOp::kMin: {
      T best = x[0];
      for (std::int64_t j = 1; j < k; ++j)
        if (beats_min(x[j], best)) best = x[j];
      return best;
    }
    case RowOp::kProd: {
      T s = 1;
      for (std::int64_t j = 0; j < k; ++j) s *= x[j];
      return s;
    }
    case RowOp::kVar:
    case RowOp::kStd: {
      const T m = row_mean(x, k);
      T s = 0;
      for (std::int64_t j = 0; j < k; ++j) s += (x[j] - m) * (x[j] - m);
      const T v = s / static_cast<T>(std::max<std::int64_t>(0, k - r.correction));
      return r.op == RowOp::kVar ? v : std::sqrt(v);
    }
    case RowOp::kNorm: {
      if (std::isinf(r.p)) {
        T best = 0;
        for (std::int64_t j = 0; j < k; ++j) {
          const T a = std::abs(x[j]);
          if (a > best || a != a) best = a;
          if (a != a) break;
        }
        return best;
      }
      T s = 0;
      if (r.p == 1) {
        for (std::int64_t j = 0; j < k; ++j) s += std::abs(x[j]);
        return s;
      }
      if (r.p == 2) {
        for (std::int64_t j = 0; j < k; ++j) s += x[j] * x[j];
        return std::sqrt(s);
      }
      const T p = static_cast<T>(r.p);
      for (std::int64_t j = 0; j < k; ++j) s += std::pow(std::abs(x[j]), p);
      return std::pow(s, 1 / p);
    }
  }
  return 0;
}

template <class T>
inline T sign_of(T v) {
  return static_cast<T>((v > 0) - (v < 0));
}

// dx of one row: g the output's gradient, y its value; `tmp` has room for K elements.
template <class T>
void row_backward(const RowReduce& r, const T* x, std::int64_t k, T g, T y, T* dx, T* tmp) {
  switch (r.op) {
    case RowOp::kMin:  // tie_share_backward, not per row
      return;
    case RowOp::kProd: {
      // Note [Product gradient]: prod of the others = (prefix before j) * (suffix after j): exact
      // with zeros (one zero: only its own gradient is nonzero; two: all are 0), no division.
      T s = 1;
      for (std::int64_t j = k; j-- > 0;) {
        tmp[j] = s;
        s *= x[j];
      }
      T pre = 1;
      for (std::int64_t j = 0; j < k; ++j) {
        dx[j] = g * (pre * tmp[j]);
        pre *= x[j];
      }
      return;
    }
    case RowOp::kVar:
    case RowOp::kStd: {
      const T m = row_mean(x, k);
      const T d = static_cast<T>(std::max<std::int64_t>(0, k - r.correction));
      if (r.op == RowOp::kStd) {
        const T c = y == 0 ? T(0) : g / (d * y);
        for (std::int64_t j = 0; j < k; ++j) dx[j] = c * (x[j] - m);
      } else {
        const T c = 2 * g / d;
        for (std::int64_t j = 0; j < k; ++j) dx[j] = c * (x[j] - m);
      }
      return;
    }
    case RowOp::kNorm: {
      if (std::isinf(r.p)) {
        std::int64_t count = 0;
        for (std::int64_t j = 0; j < k; ++j) {
          const T a = std::abs(x[j]);
          count += (a == y || a != a);
        }
        const T share = g / static_cast<T>(count);
        for (std::int64_t j = 0; j < k; ++j) {
          const T a = std::abs(x[j]);
          dx[j] = (a == y || a != a) ? sign_of(x[j]) * share : T(0);
        }
        return;
      }
      if (r.p == 1) {
        for (std::int64_t j = 0; j < k; ++j) dx[j] = g * sign_of(x[j]);
        return;
      }
      if (y == 0) {  // the subgradient 0 at x = 0, as torch
        std::fill(dx, dx + k, T(0));
        return;
      }
      if (r.p == 2) {
        const T c = g / y;
        for (std::int64_t j = 0; j < k; ++j) dx[j] = c * x[j];
        return;
      }
      const T p = static_cast<T>(r.p);
      const T c = g / std::pow(y, p - 1);
      for (std::int64_t j = 0; j < k; ++j) dx[j] = c * sign_of(x[j]) * std::pow(std::abs(x[j]), p - 1);
      return;
    }
  }
}

}  // namespace

template <class T>
void fill(T* out, std::int64_t n, T v) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { std::fill(out + b, out + e, v); });
}

template <class T>
void divide(T* v, std::int64_t n, T c) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) v[i] /= c;
  });
}

template <class T, bool kMax>
void max_kernel(const T* in, T* out, std::int64_t* idx, const Layout& l) {
  switch (l.kind) {
    case Layout::kRows:
      parallel_for(0, l.outer, grain_for(l.mid), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) {
          const T* row = in + o * l.mid;
          const T best = row_extremum<kMax>(row, l.mid);  // then find its first position
          out[o] = best;
          if (idx) {
            std::int64_t k = 0;
            if (is_nan(best))
              while (!is_nan(row[k])) ++k;
            else
              while (row[k] != best) ++k;
            idx[o] = o * l.mid + k;
          }
        }
      });
      return;
    case Layout::kCols: {
      const std::int64_t nblk = (l.inner + kColBlock - 1) / kColBlock;
      parallel_for(0, l.outer * nblk, grain_for(l.mid * kColBlock), [&](std::int64_t b, std::int64_t e) {
        std::int64_t bi[kColBlock];
        for (std::int64_t t = b; t < e; ++t) {
          const std::int64_t o = t / nblk, i0 = (t % nblk) * kColBlock, i1 = std::min(l.inner, i0 + kColBlock);
          const std::int64_t w = i1 - i0;
          const T* src = in + o * l.mid * l.inner + i0;
          T* best = out + o * l.inner + i0;
          for (std::int64_t i = 0; i < w; ++i) {
            best[i] = src[i];
            bi[i] = 0;
          }
          for (std::int64_t m = 1; m < l.mid; ++m) {
            const T* row = src + m * l.inner;
            for (std::int64_t i = 0; i < w; ++i) {
              const bool take = beats<kMax>(row[i], best[i]);
              best[i] = take ? row[i] : best[i];
              bi[i] = take ? m : bi[i];
            }
          }
          if (idx)
            for (std::int64_t i = 0; i < w; ++i)
              idx[o * l.inner + i0 + i] = o * l.mid * l.inner + bi[i] * l.inner + i0 + i;
        }
      });
      return;
    }
    case Layout::kGather:
      parallel_for(0, l.outer, grain_for(l.mid), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) {
          const std::int64_t base = l.base(o);
          std::int64_t bo = base + l.roffs[0];
          T best = in[bo];
          for (std::size_t k = 1; k < l.roffs.size(); ++k) {
            const std::int64_t off = base + l.roffs[k];
            if (beats<kMax>(in[off], best)) {
              best = in[off];
              bo = off;
            }
          }
          out[o] = best;
          if (idx) idx[o] = bo;
        }
      });
      return;
  }
}

template <class T>
void logsumexp_rows(const T* in, T* out, std::int64_t rows, std::int64_t n) {
  parallel_for(0, rows, grain_for(n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* row = in + r * n;
      const T m = finite_or_zero(detail::vec_max(row, n));
      const detail::simd::default_batch<T> mb(m);
      const T s = detail::vec_sum(
          n, static_cast<T*>(nullptr), [&](auto v) { return xsimd::exp(v - mb); }, row);
      out[r] = m + std::log(s);
    }
  });
}

template <class T>
void logsumexp_shift(T* m, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = finite_or_zero(m[i]);
}

template <class T>
void logsumexp_exp_cols(const Layout& l, T* out, const T* x, const T* m) {
  map_with_kept<T>(l, out, x, m, m, [](auto v, auto mv, auto) { return xsimd::exp(v - mv); });
}

template <class T>
void logsumexp_add_log(T* y, const T* s, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += std::log(s[i]);
}

template <class T>
void logsumexp_backward(const Layout& l, T* gx, const T* x, const T* g, const T* y) {
  map_with_kept<T>(l, gx, x, g, y, [](auto v, auto gv, auto yv) { return gv * xsimd::exp(v - yv); });
}

void sum_int64(const std::int64_t* in, std::int64_t* out, const std::int64_t* shape, const std::int64_t* keep_shape,
               std::size_t nd, std::int64_t n) {
  std::vector<std::int64_t> ostride(nd, 0);  // the output stride of each input axis (0 for the reduced ones)
  std::int64_t st = 1;
  for (std::size_t d = nd; d-- > 0;) {
    ostride[d] = keep_shape[d] == 1 ? 0 : st;
    st *= keep_shape[d];
  }
  auto* o = reinterpret_cast<std::uint64_t*>(out);  // two's complement wrap
  std::vector<std::int64_t> idx(nd, 0);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    o[off] += static_cast<std::uint64_t>(in[i]);
    for (std::size_t d = nd; d-- > 0;) {  // next multi-index, row-major
      off += ostride[d];
      if (++idx[d] < shape[d]) break;
      off -= ostride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

template <class T>
void rows_gather(const Rows& v, const T* x, T* rows) {
  parallel_for(0, v.rows, grain_for(v.k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      const std::int64_t base = v.base(o);
      for (std::int64_t j = 0; j < v.k; ++j) rows[o * v.k + j] = x[v.off(base, j)];
    }
  });
}

template <class T>
void rows_scatter(const Rows& v, const T* rows, T* dx) {
  parallel_for(0, v.rows, grain_for(v.k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      const std::int64_t base = v.base(o);
      for (std::int64_t j = 0; j < v.k; ++j) dx[v.off(base, j)] = rows[o * v.k + j];
    }
  });
}

template <class T>
void row_reduce_forward(const RowReduce& r, const T* x, T* y, std::int64_t rows, std::int64_t k) {
  parallel_for(0, rows, grain_for(k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) y[o] = row_forward<T>(r, x + o * k, k);
  });
}

template <class T>
void row_reduce_backward(const RowReduce& r, const T* x, const T* g, const T* y, T* dx, std::int64_t rows,
                         std::int64_t k) {
  parallel_for(0, rows, grain_for(k), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> tmp(r.op == RowOp::kProd ? static_cast<std::size_t>(k) : 0);
    for (std::int64_t o = b; o < e; ++o) row_backward<T>(r, x + o * k, k, g[o], y[o], dx + o * k, tmp.data());
  });
}

template <class T>
void cumsum_kernel(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool reverse) {
  const std::int64_t nblk = (inner + kColBlock - 1) / kColBlock;
  parallel_for(0, outer * nblk, grain_for(n * std::min(inner, kColBlock)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t o = t / nblk, i0 = (t % nblk) * kColBlock, i1 = std::min(inner, i0 + kColBlock);
      const std::int64_t base = o * n * inner;
      for (std::int64_t jj = 0; jj < n; ++jj) {
        const std::int64_t j = reverse ? n - 1 - jj : jj;
        const T* xr = x + base + j * inner;
        T* yr = y + base + j * inner;
        if (jj == 0) {
          for (std::int64_t i = i0; i < i1; ++i) yr[i] = xr[i];
        } else {
          const T* prev = y + base + (reverse ? j + 1 : j - 1) * inner;
          for (std::int64_t i = i0; i < i1; ++i) yr[i] = prev[i] + xr[i];
        }
      }
    }
  });
}

void set_diagonals(bool* p, std::int64_t rows, std::int64_t k) {
  for (std::int64_t r0 = 0; r0 < rows; ++r0)
    for (std::int64_t j = 0; j < k; ++j) p[(r0 * k + j) * k + j] = true;
}

// Columns in blocks; each block's rows are added in increasing order (thread-count independent).
template <class T>
void column_sums(const T* g, std::int64_t rows, std::int64_t cols, T* out) {
  constexpr std::int64_t kCols = 256;
  parallel_for(0, (cols + kCols - 1) / kCols, grain_for(rows * kCols), [&](std::int64_t c0, std::int64_t c1) {
    double acc[kCols];
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t j0 = c * kCols, width = std::min(kCols, cols - j0);
      std::fill(acc, acc + width, 0.0);
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = g + r * cols + j0;
        for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
      }
      for (std::int64_t j = 0; j < width; ++j) out[j0 + j] = static_cast<T>(acc[j]);
    }
  });
}

XGRAD_INSTANTIATE_FLOATING(fill);
XGRAD_INSTANTIATE_FLOATING(column_sums);
XGRAD_INSTANTIATE_FLOATING(divide);
XGRAD_INSTANTIATE_FLOATING(max_kernel);
XGRAD_INSTANTIATE_FLOATING(logsumexp_rows);
XGRAD_INSTANTIATE_FLOATING(logsumexp_shift);
XGRAD_INSTANTIATE_FLOATING(logsumexp_exp_cols);
XGRAD_INSTANTIATE_FLOATING(logsumexp_add_log);
XGRAD_INSTANTIATE_FLOATING(logsumexp_backward);
XGRAD_INSTANTIATE_FLOATING(rows_gather);
XGRAD_INSTANTIATE_FLOATING(rows_scatter);
XGRAD_INSTANTIATE_FLOATING(row_reduce_forward);
XGRAD_INSTANTIATE_FLOATING(row_reduce_backward);
XGRAD_INSTANTIATE_FLOATING(cumsum_kernel);

// The max and min of the integer and bool element types (exact, no gradient: ops/reduction.cpp's
// extremum_integer); the signature again only in the header.
#define XGRAD_INSTANTIATE_EXTREMUM(T)                         \
  template decltype(max_kernel<T, true>) max_kernel<T, true>; \
  template decltype(max_kernel<T, false>) max_kernel<T, false>
XGRAD_INSTANTIATE_EXTREMUM(std::int64_t);
XGRAD_INSTANTIATE_EXTREMUM(std::int32_t);
XGRAD_INSTANTIATE_EXTREMUM(std::uint8_t);
XGRAD_INSTANTIATE_EXTREMUM(bool);
#undef XGRAD_INSTANTIATE_EXTREMUM

}  // namespace xgrad::detail::reduce
