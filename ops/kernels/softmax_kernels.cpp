#include "xgrad/ops/kernels/softmax_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"

namespace xgrad::detail {

namespace {

// Note [Softmax kernels]: a hand-written forward and backward instead of the composite
// exp/sum/div: one fused pass per row (vectorised exp, see ops/kernels/vec_kernel.hpp) instead of five,
// and only the output y is saved for backward instead of three full-size temporaries. x is seen as (outer, n, inner)
// with n the softmax axis. For inner == 1 every row is contiguous; otherwise a task takes one outer index and a block
// of up to kColBlock columns, so the innermost loop stays contiguous. Each row is computed by one task in a fixed order
// (max, then the sum in increasing index order), so the result does not depend on how the rows are split among threads.
using Geometry = SoftmaxGeometry;

constexpr std::int64_t kColBlock = 64;

// Runs row_fn(offset) for contiguous rows, or col_fn(offset, width) for blocks of
// columns (elements offset + k*inner + i, k < n, i < width), in parallel with a grain of roughly
// kParallelGrain elements per task; serial for small tensors.
template <class RowFn, class ColFn>
void for_each_row(const Geometry& g, RowFn&& row_fn, ColFn&& col_fn) {
  if (g.n == 0 || g.outer * g.inner == 0) return;
  if (g.inner == 1) {
    const std::int64_t grain = grain_for(g.n);
    parallel_for(0, g.outer, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) row_fn(r * g.n);
    });
    return;
  }
  const std::int64_t nblk = (g.inner + kColBlock - 1) / kColBlock;
  const std::int64_t grain = grain_for(g.n * std::min(g.inner, kColBlock));
  parallel_for(0, g.outer * nblk, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t o = t / nblk, i0 = (t % nblk) * kColBlock;
      col_fn(o * g.n * g.inner + i0, std::min(kColBlock, g.inner - i0));
    }
  });
}

// Forward. kLog: y = x - m - log(s); else y = exp(x - m) / s, with m the row max and s = sum exp(x - m).
// A row of -inf gives NaN (m = -inf), as in PyTorch.
template <bool kLog, class T>
void forward_pass(const T* x, T* y, const Geometry& g) {
  using B = simd::default_batch<T>;
  const std::int64_t n = g.n, inner = g.inner;
  auto row = [&](std::int64_t off) {
    const T* xr = x + off;
    T* yr = y + off;
    const B m(vec_max(xr, n));
    if constexpr (kLog) {
      const T s = vec_sum(
          n, static_cast<T*>(nullptr), [&](B v) { return xsimd::exp(v - m); }, xr);
      const B c = m + B(std::log(s));
      vec_map(
          n, yr, [&](B v) { return v - c; }, xr);
    } else {
      const B s(vec_sum(
          n, yr, [&](B v) { return xsimd::exp(v - m); }, xr));
      vec_map(
          n, yr, [&](B v) { return v / s; }, yr);
    }
  };
  auto cols = [&](std::int64_t off, std::int64_t w) {
    alignas(64) T m[kColBlock], s[kColBlock], e[kColBlock];
    const T* xb = x + off;
    T* yb = y + off;
    for (std::int64_t i = 0; i < w; ++i) {
      m[i] = xb[i];
      s[i] = 0;
    }
    for (std::int64_t k = 1; k < n; ++k)
      for (std::int64_t i = 0; i < w; ++i) m[i] = std::max(m[i], xb[k * inner + i]);
    for (std::int64_t k = 0; k < n; ++k) {
      T* dst = kLog ? e : yb + k * inner;
      vec_map(
          w, dst, [](B v, B mv) { return xsimd::exp(v - mv); }, xb + k * inner, +m);
      for (std::int64_t i = 0; i < w; ++i) s[i] += dst[i];
    }
    if constexpr (kLog) {
      for (std::int64_t i = 0; i < w; ++i) m[i] += std::log(s[i]);
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < w; ++i) yb[k * inner + i] = xb[k * inner + i] - m[i];
    } else {
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < w; ++i) yb[k * inner + i] /= s[i];
    }
  };
  for_each_row(g, row, cols);
}

// Backward from the saved output y.
//   softmax:     dx = y * (gy - sum(gy * y))
//   log_softmax: dx = gy - exp(y) * sum(gy)
template <bool kLog, class T>
void backward_pass(const T* y, const T* gy, T* gx, const Geometry& g) {
  using B = simd::default_batch<T>;
  const std::int64_t n = g.n, inner = g.inner;
  auto row = [&](std::int64_t off) {
    const T* yr = y + off;
    const T* gr = gy + off;
    T* dr = gx + off;
    if constexpr (kLog) {
      const B s(vec_sum(
          n, static_cast<T*>(nullptr), [](B gv) { return gv; }, gr));
      vec_map(
          n, dr, [&](B gv, B yv) { return gv - xsimd::exp(yv) * s; }, gr, yr);
    } else {
      const B s(vec_sum(
          n, static_cast<T*>(nullptr), [](B gv, B yv) { return gv * yv; }, gr, yr));
      vec_map(
          n, dr, [&](B gv, B yv) { return yv * (gv - s); }, gr, yr);
    }
  };
  auto cols = [&](std::int64_t off, std::int64_t w) {
    alignas(64) T s[kColBlock] = {};
    const T* yb = y + off;
    const T* gb = gy + off;
    T* db = gx + off;
    for (std::int64_t k = 0; k < n; ++k)
      for (std::int64_t i = 0; i < w; ++i) {
        const std::int64_t j = k * inner + i;
        if constexpr (kLog)
          s[i] += gb[j];
        else
          s[i] += gb[j] * yb[j];
      }
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t j = k * inner;
      if constexpr (kLog)
        vec_map(
            w, db + j, [](B gv, B yv, B sv) { return gv - xsimd::exp(yv) * sv; }, gb + j, yb + j, +s);
      else
        for (std::int64_t i = 0; i < w; ++i) db[j + i] = yb[j + i] * (gb[j + i] - s[i]);
    }
  };
  for_each_row(g, row, cols);
}

}  // namespace

template <class T>
void softmax_forward(const T* x, T* y, const SoftmaxGeometry& g, bool log) {
  if (log)
    forward_pass<true, T>(x, y, g);
  else
    forward_pass<false, T>(x, y, g);
}

template <class T>
void softmax_backward(const T* y, const T* gy, T* gx, const SoftmaxGeometry& g, bool log) {
  if (log)
    backward_pass<true, T>(y, gy, gx, g);
  else
    backward_pass<false, T>(y, gy, gx, g);
}

XGRAD_INSTANTIATE_FLOATING(softmax_forward);
XGRAD_INSTANTIATE_FLOATING(softmax_backward);

}  // namespace xgrad::detail
