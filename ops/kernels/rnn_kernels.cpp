// The gate passes of the fused recurrent layers (ops/rnn.cpp, Note [Fused recurrence]).
//
// Note [Gate passes]: the gate math runs on xsimd batches: row_pass runs body(k, V{}) for k = 0, W,
// 2W, ... with V the xsimd batch of W lanes while a whole batch fits in the row of n values, then
// body(k, T{}) on the scalar tail (xsimd's scalar overloads of exp and tanh). Where the vector part
// ends depends on n (= H) only, never on the thread count; every gate pass is one fused pass per row
// (loads, the activations, every output stored once), each batch row one task's.
#include "xgrad/ops/kernels/rnn_kernels.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail {

namespace {

template <class T, class Body>
inline void row_pass(std::int64_t n, Body&& body) {
  using V = simd::default_batch<T>;
  constexpr std::int64_t W = V::size;
  std::int64_t k = 0;
  for (; k + W <= n; k += W) body(k, V());
  for (; k < n; ++k) body(k, T());
}
template <class V, class T>
inline V ld(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else
    return V::load_unaligned(p);
}
template <class T, class V>
inline void st(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else
    v.store_unaligned(p);
}
template <class V>
inline V vsigmoid(const V& v) {
  return V(1) / (V(1) + xsimd::exp(-v));
}
template <class V>
inline V vtanh(const V& v) {
  return xsimd::tanh(v);
}

// Rows of a pointwise pass per task: enough elements that a task pays for itself.
std::int64_t row_grain(std::int64_t cols) { return grain_for(8 * cols); }

}  // namespace

template <class T>
void rnn_fill_bias_rows(T* a, std::int64_t rows, std::int64_t cols, const T* b1, const T* b2) {
  std::vector<T> row(static_cast<std::size_t>(cols), T(0));
  if (b1)
    for (std::int64_t j = 0; j < cols; ++j) row[j] += b1[j];
  if (b2)
    for (std::int64_t j = 0; j < cols; ++j) row[j] += b2[j];
  parallel_for(0, rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) std::copy(row.begin(), row.end(), a + r * cols);
  });
}

template <class T>
void rnn_add_rows(const T* g, std::int64_t rows, std::int64_t cols, double* acc) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = g + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) acc[j] += static_cast<double>(row[j]);
  }
}

template <class T>
void rnn_narrow(const double* acc, std::int64_t n, T* out) {
  std::transform(acc, acc + n, out, [](double v) { return static_cast<T>(v); });
}

template <class T>
void lstm_step_forward(std::int64_t batch, std::int64_t hidden, T* gates, const T* c_prev, T* c_next, T* tanh_c, T* h) {
  const std::int64_t B = batch, H = hidden, G = 4 * H;
  parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      T* a = gates + b * G;
      const T* cpb = c_prev + b * H;
      T* cb = c_next + b * H;
      T* tcb = tanh_c + b * H;
      T* hb = h + b * H;
      row_pass<T>(H, [&](std::int64_t k, auto vtag) {
        using V = decltype(vtag);
        const V i = vsigmoid(ld<V>(a + k)), f = vsigmoid(ld<V>(a + H + k));
        const V g = vtanh(ld<V>(a + 2 * H + k)), o = vsigmoid(ld<V>(a + 3 * H + k));
        const V c = f * ld<V>(cpb + k) + i * g;
        const V th = vtanh(c);
        st(a + k, i);
        st(a + H + k, f);
        st(a + 2 * H + k, g);
        st(a + 3 * H + k, o);
        st(cb + k, c);
        st(tcb + k, th);
        st(hb + k, o * th);
      });
    }
  });
}

template <class T>
void lstm_step_backward(std::int64_t batch, std::int64_t hidden, const T* a, const T* tanh_c, const T* c_prev,
                        const T* g_out, const T* dh, T* dc, T* da) {
  const std::int64_t B = batch, H = hidden, G = 4 * H;
  parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* ar = a + b * G;
      T* dar = da + b * G;
      const std::int64_t e = b * H;
      row_pass<T>(H, [&](std::int64_t k, auto vtag) {
        using V = decltype(vtag);
        const V i = ld<V>(ar + k), f = ld<V>(ar + H + k), g = ld<V>(ar + 2 * H + k), o = ld<V>(ar + 3 * H + k);
        const V dht = ld<V>(dh + e + k) + ld<V>(g_out + e + k);
        const V th = ld<V>(tanh_c + e + k);
        const V dct = ld<V>(dc + e + k) + dht * o * (V(1) - th * th);
        st(dar + k, dct * g * i * (V(1) - i));
        st(dar + H + k, dct * ld<V>(c_prev + e + k) * f * (V(1) - f));
        st(dar + 2 * H + k, dct * i * (V(1) - g * g));
        st(dar + 3 * H + k, dht * th * o * (V(1) - o));
        st(dc + e + k, dct * f);
      });
    }
  });
}

template <class T>
void gru_step_forward(std::int64_t batch, std::int64_t hidden, const T* x_part, const T* h_part, const T* h_prev,
                      T* saved, T* h) {
  const std::int64_t B = batch, H = hidden, G = 3 * H;
  parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* xa = x_part + b * G;
      const T* ha = h_part + b * G;
      const T* hpb = h_prev + b * H;
      T* sv = saved + b * 4 * H;
      T* hb = h + b * H;
      row_pass<T>(H, [&](std::int64_t k, auto vtag) {
        using V = decltype(vtag);
        const V r = vsigmoid(ld<V>(ha + k) + ld<V>(xa + k));
        const V z = vsigmoid(ld<V>(ha + H + k) + ld<V>(xa + H + k));
        const V hn_ = ld<V>(ha + 2 * H + k);
        const V n = vtanh(ld<V>(xa + 2 * H + k) + hn_ * r);
        st(sv + k, r);
        st(sv + H + k, z);
        st(sv + 2 * H + k, n);
        st(sv + 3 * H + k, hn_);
        st(hb + k, (ld<V>(hpb + k) - n) * z + n);
      });
    }
  });
}

template <class T>
void gru_step_backward(std::int64_t batch, std::int64_t hidden, const T* saved, const T* h_prev, const T* g_out, T* dh,
                       T* dgi, T* dgh) {
  const std::int64_t B = batch, H = hidden, G = 3 * H;
  parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* sv = saved + b * 4 * H;
      T* dib = dgi + b * G;
      T* dhb = dgh + b * G;
      const std::int64_t e = b * H;
      row_pass<T>(H, [&](std::int64_t k, auto vtag) {
        using V = decltype(vtag);
        const V r = ld<V>(sv + k), z = ld<V>(sv + H + k), n = ld<V>(sv + 2 * H + k);
        const V hn_ = ld<V>(sv + 3 * H + k);
        const V dht = ld<V>(dh + e + k) + ld<V>(g_out + e + k);
        const V dan = dht * (V(1) - z) * (V(1) - n * n);
        const V daz = dht * (ld<V>(h_prev + e + k) - n) * z * (V(1) - z);
        const V dar = dan * hn_ * r * (V(1) - r);
        st(dib + k, dar);
        st(dib + H + k, daz);
        st(dib + 2 * H + k, dan);
        st(dhb + k, dar);
        st(dhb + H + k, daz);
        st(dhb + 2 * H + k, dan * r);
        st(dh + e + k, dht * z);
      });
    }
  });
}

XGRAD_INSTANTIATE_FLOATING(rnn_fill_bias_rows);
XGRAD_INSTANTIATE_FLOATING(rnn_add_rows);
XGRAD_INSTANTIATE_FLOATING(rnn_narrow);
XGRAD_INSTANTIATE_FLOATING(lstm_step_forward);
XGRAD_INSTANTIATE_FLOATING(lstm_step_backward);
XGRAD_INSTANTIATE_FLOATING(gru_step_forward);
XGRAD_INSTANTIATE_FLOATING(gru_step_backward);

}  // namespace xgrad::detail
