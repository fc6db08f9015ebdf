#include "xgrad/ops/softmax.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"
#include "xgrad/ops/reduction.hpp"

namespace xgrad {

namespace {

// Note [Softmax kernels]: a hand-written forward and backward instead of the composite
// exp/sum/div: one fused pass per row (vectorised exp, see ops/kernels/vec_kernel.hpp) instead of five,
// and only the output y is saved for backward instead of three full-size temporaries. x is seen as (outer, n, inner)
// with n the softmax axis. For inner == 1 every row is contiguous; otherwise a task takes one outer index and a block
// of up to kColBlock columns, so the innermost loop stays contiguous. Each row is computed by one task in a fixed order
// (max, then the sum in increasing index order), so the result does not depend on how the rows are split among threads.
struct Geometry {
  std::int64_t outer = 1, n = 1, inner = 1;
};

Geometry geometry(const char* op, const Tensor& x, std::int64_t axis) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", op);
  Geometry g;
  if (x.dim() == 0) {
    // Like PyTorch, a 0-d tensor is a single row of length 1 (axis 0 or -1).
    XGRAD_CHECK(axis == 0 || axis == -1, "{}: axis {} is out of range for a tensor of shape {} (0 dimensions)", op,
                axis, shape_str(x.shape()));
    return g;
  }
  const std::int64_t a = normalize_axis(axis, x.dim(), op, x.shape());
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const auto s = x.shape()[static_cast<std::size_t>(d)];
    if (d < a)
      g.outer *= s;
    else if (d == a)
      g.n = s;
    else
      g.inner *= s;
  }
  return g;
}

constexpr std::int64_t kColBlock = 64;

// Runs row_fn(offset, stride, count) for contiguous rows, or col_fn(offset, width) for blocks of
// columns (elements offset + k*inner + i, k < n, i < width), in parallel with a grain of roughly
// kParallelGrain elements per task; serial for small tensors.
template <class RowFn, class ColFn>
void for_each_row(const Geometry& g, RowFn&& row_fn, ColFn&& col_fn) {
  if (g.n == 0 || g.outer * g.inner == 0) return;
  if (g.inner == 1) {
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / g.n);
    parallel_for(0, g.outer, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) row_fn(r * g.n);
    });
    return;
  }
  const std::int64_t nblk = (g.inner + kColBlock - 1) / kColBlock;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / (g.n * std::min(g.inner, kColBlock)));
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
void softmax_forward(const T* x, T* y, const Geometry& g) {
  using B = detail::simd::default_batch<T>;
  const std::int64_t n = g.n, inner = g.inner;
  auto row = [&](std::int64_t off) {
    const T* xr = x + off;
    T* yr = y + off;
    const B m(detail::vec_max(xr, n));
    if constexpr (kLog) {
      const T s = detail::vec_sum(
          n, static_cast<T*>(nullptr), [&](B v) { return xsimd::exp(v - m); }, xr);
      const B c = m + B(std::log(s));
      detail::vec_map(
          n, yr, [&](B v) { return v - c; }, xr);
    } else {
      const B s(detail::vec_sum(
          n, yr, [&](B v) { return xsimd::exp(v - m); }, xr));
      detail::vec_map(
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
      detail::vec_map(
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
void softmax_backward(const T* y, const T* gy, T* gx, const Geometry& g) {
  using B = detail::simd::default_batch<T>;
  const std::int64_t n = g.n, inner = g.inner;
  auto row = [&](std::int64_t off) {
    const T* yr = y + off;
    const T* gr = gy + off;
    T* dr = gx + off;
    if constexpr (kLog) {
      const B s(detail::vec_sum(
          n, static_cast<T*>(nullptr), [](B gv) { return gv; }, gr));
      detail::vec_map(
          n, dr, [&](B gv, B yv) { return gv - xsimd::exp(yv) * s; }, gr, yr);
    } else {
      const B s(detail::vec_sum(
          n, static_cast<T*>(nullptr), [](B gv, B yv) { return gv * yv; }, gr, yr));
      detail::vec_map(
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
        detail::vec_map(
            w, db + j, [](B gv, B yv, B sv) { return gv - xsimd::exp(yv) * sv; }, gb + j, yb + j, +s);
      else
        for (std::int64_t i = 0; i < w; ++i) db[j + i] = yb[j + i] * (gb[j + i] - s[i]);
    }
  };
  for_each_row(g, row, cols);
}

template <bool kLog>
struct Softmax : Function<Softmax<kLog>> {
  static constexpr const char* kName = kLog ? "log_softmax" : "softmax";
  static constexpr bool kDifferentiableBackward = true;
  Geometry geo;
  std::int64_t dim = 0;
  Tensor forward(const Tensor& x, std::int64_t axis) {
    geo = geometry(kName, x, axis);
    dim = axis;
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_forward<kLog, T>(x.data<T>(), y.data<T>(), geo);
    });
    if (this->needs_input_grad(0)) this->save_for_backward({y});  // both gradients need only y
    return y;
  }
  // softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), sums over `dim`.
  Tensors backward(const Tensors& grads) { return {apply_fused<BackwardOf<Softmax>>(*this, grads[0], this->saved(0))}; }
  Tensor backward_formula(const Tensor& g, const Tensor& y) {
    if (y.numel() == 0 || y.dim() == 0) return mul(g, 0.0);
    if constexpr (kLog) return sub(g, mul(exp(y), sum(g, {dim}, /*keepdim=*/true)));
    return mul(y, sub(g, sum(mul(g, y), {dim}, /*keepdim=*/true)));
  }
  Tensor backward_kernel(const Tensor& g, const Tensor& y) {
    Tensor gx = Tensor::empty(y.shape(), y.dtype());
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_backward<kLog, T>(y.data<T>(), g.data<T>(), gx.data<T>(), geo);
    });
    return gx;
  }
};

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) { return apply<Softmax<false>>(x, axis); }
Tensor log_softmax(const Tensor& x, std::int64_t axis) { return apply<Softmax<true>>(x, axis); }

}  // namespace xgrad
