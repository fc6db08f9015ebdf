#pragma once
// Internal: small xsimd loops shared by the softmax and reduction kernels (vectorised exp, sums,
// maxima over contiguous runs). Note [Vector tails]: the last partial batch goes through the same
// vector code on a zero-padded copy, so an element's value never depends on where a run was split;
// sums add the vector lanes in a fixed order and then the tail left to right. A run's result thus
// depends only on its length, never on the thread count.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail {

// res = f on elements [k, n) of each input, zero-padded to one batch.
template <class T, std::int64_t W, class F, std::size_t... I, class... In>
inline void padded_tail(std::int64_t k, std::int64_t n, T* res, F& f, std::index_sequence<I...>, const In*... in) {
  alignas(64) T pad[sizeof...(In)][W] = {};
  (std::copy(in + k, in + n, pad[I]), ...);
  f(simd::default_batch<T>::load_aligned(pad[I])...).store_aligned(res);
}

/// out[k] = f(in_0[k], ..., in_{K-1}[k]) for k < n; f takes and returns xsimd batches.
template <class T, class F, class... In>
inline void vec_map(std::int64_t n, T* out, F&& f, const In*... in) {
  constexpr std::int64_t W = simd::default_batch<T>::size;
  std::int64_t k = 0;
  for (; k + W <= n; k += W) f(simd::default_batch<T>::load_unaligned(in + k)...).store_unaligned(out + k);
  if (k < n) {
    alignas(64) T res[W];
    padded_tail<T, W>(k, n, res, f, std::index_sequence_for<In...>{}, in...);
    std::copy(res, res + (n - k), out + k);
  }
}

/// sum over k < n of f(in_0[k], ...) (f on batches), optionally storing each term in out[k].
template <class T, class F, class... In>
inline T vec_sum(std::int64_t n, T* out, F&& f, const In*... in) {
  constexpr std::int64_t W = simd::default_batch<T>::size;
  simd::default_batch<T> acc(T(0));
  std::int64_t k = 0;
  for (; k + W <= n; k += W) {
    const auto v = f(simd::default_batch<T>::load_unaligned(in + k)...);
    if (out) v.store_unaligned(out + k);
    acc += v;
  }
  T s = xsimd::hadd(acc);
  if (k < n) {
    alignas(64) T res[W];
    padded_tail<T, W>(k, n, res, f, std::index_sequence_for<In...>{}, in...);
    for (std::int64_t i = 0; i < n - k; ++i) s += res[i];
    if (out) std::copy(res, res + (n - k), out + k);
  }
  return s;
}

/// Maximum of p[0..n) (n >= 1); NaN when any element is NaN (NaN propagates, like torch.amax).
template <class T>
inline T vec_max(const T* p, std::int64_t n) {
  constexpr std::int64_t W = simd::default_batch<T>::size;
  std::int64_t k = 0;
  T m = p[0];
  bool nan = m != m;
  if (n >= W) {
    simd::default_batch<T> acc = simd::default_batch<T>::load_unaligned(p);
    auto bad = xsimd::isnan(acc);
    for (k = W; k + W <= n; k += W) {
      const auto v = simd::default_batch<T>::load_unaligned(p + k);
      bad = bad | xsimd::isnan(v);
      acc = xsimd::max(acc, v);
    }
    nan = xsimd::any(bad);
    alignas(64) T lanes[W];
    acc.store_aligned(lanes);
    m = lanes[0];
    for (std::int64_t i = 1; i < W; ++i) m = lanes[i] > m ? lanes[i] : m;
  }
  for (; k < n; ++k) {
    nan = nan || p[k] != p[k];
    m = p[k] > m ? p[k] : m;
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

}  // namespace xgrad::detail
