// The loops of scaled_dot_product_attention (ops/attention.cpp, Note [Attention kernel]): per
// problem, the scores and their masked softmax rows, the dropout, and the products; the backward
// per problem likewise. Nothing is shared between problems, so results do not depend on the thread
// count.
#include "xgrad/ops/kernels/attention_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail {

namespace {

// Problems per task: enough work (L S (E + Ev + 4) per problem) that a task pays for itself.
std::int64_t grain(const AttentionSizes& geo) {
  const std::int64_t work = geo.l * geo.s * (geo.e + geo.ev + 4) + 1;
  return grain_for(work);
}

}  // namespace

template <class T>
void attention_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                       const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* p, T* pd, T* out) {
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev;
  const bool* mb = mask.bool_mask;
  const T* mf = mask.float_mask;
  const std::int64_t mask_sl = mask.row_stride, mask_ss = mask.col_stride;
  const bool causal = mask.causal, dropout = drop.on;
  const T keep_scale = drop.keep_scale;
  const T ninf = -std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  parallel_for(0, B, grain(n), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      T* pb = p + b * L * S;
      if (L > 0 && S > 0)
        detail::blas::gemm<T>(false, true, L, S, E, scale, q + b * L * E, E, k + b * S * E, E, T(0), pb, S);
      const std::int64_t base = mask.base[b];
      for (std::int64_t l = 0; l < L; ++l) {
        T* row = pb + l * S;
        const std::int64_t mrow = base + l * mask_sl;
        if (mb) {
          for (std::int64_t s = 0; s < S; ++s)
            if (!mb[mrow + s * mask_ss]) row[s] = ninf;
        } else if (mf) {
          for (std::int64_t s = 0; s < S; ++s) row[s] += mf[mrow + s * mask_ss];
        }
        if (causal)
          for (std::int64_t s = l + 1; s < S; ++s) row[s] = ninf;
        T mx = ninf;
        bool has_nan = false;
        for (std::int64_t s = 0; s < S; ++s) {
          has_nan |= std::isnan(row[s]);
          mx = std::max(mx, row[s]);
        }
        if (S > 0 && (mx == ninf || has_nan)) {  // every key masked, or a NaN: torch's softmax gives NaN
          std::fill(row, row + S, nan);
          continue;
        }
        T sum = 0;
        for (std::int64_t s = 0; s < S; ++s) {
          row[s] = std::exp(row[s] - mx);
          sum += row[s];
        }
        for (std::int64_t s = 0; s < S; ++s) row[s] /= sum;
      }
      if (dropout) {
        const std::uint8_t* kb = drop.keep + b * L * S;
        T* pdb = pd + b * L * S;
        for (std::int64_t i = 0; i < L * S; ++i) pdb[i] = kb[i] ? pb[i] * keep_scale : T(0);
      }
      if (L > 0 && Ev > 0)
        detail::blas::gemm<T>(false, false, L, Ev, S, T(1), pd + b * L * S, S, v + b * S * Ev, Ev, T(0),
                              out + b * L * Ev, Ev);
    }
  });
}

template <class T>
void attention_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* p, T scale,
                        const AttentionDropout<T>& drop, const T* g, const T* gw, T* dq, T* dk, T* dv, T* da_full) {
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev;
  const bool need_q = dq != nullptr, need_k = dk != nullptr, need_v = dv != nullptr, need_m = da_full != nullptr;
  const bool need_a = need_q || need_k || need_m;
  const bool dropout = drop.on;
  const T keep_scale = drop.keep_scale;
  parallel_for(0, B, grain(n), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<T> pd_buf(dropout && need_v ? static_cast<std::size_t>(L * S) : 0);
    std::vector<T> da_buf(need_a && !need_m ? static_cast<std::size_t>(L * S) : 0);
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* pb = p + b * L * S;
      const T* gb = g + b * L * Ev;
      const std::uint8_t* kb = dropout ? drop.keep + b * L * S : nullptr;
      if (need_v && S > 0 && Ev > 0) {
        const T* pdb = pb;
        if (dropout) {
          for (std::int64_t i = 0; i < L * S; ++i)
            pd_buf[static_cast<std::size_t>(i)] = kb[i] ? pb[i] * keep_scale : T(0);
          pdb = pd_buf.data();
        }
        detail::blas::gemm<T>(true, false, S, Ev, L, T(1), pdb, S, gb, Ev, T(0), dv + b * S * Ev, Ev);
      }
      if (!need_a) continue;
      T* da = need_m ? da_full + b * L * S : da_buf.data();
      if (L > 0 && S > 0) {
        // dP' = G V^T (+ GW)
        if (gw) std::copy(gw + b * L * S, gw + (b + 1) * L * S, da);
        detail::blas::gemm<T>(false, true, L, S, Ev, T(1), gb, Ev, v + b * S * Ev, Ev, gw ? T(1) : T(0), da, S);
      }
      for (std::int64_t l = 0; l < L; ++l) {
        T* row = da + l * S;
        const T* prow = pb + l * S;
        if (dropout) {
          const std::uint8_t* krow = kb + l * S;
          for (std::int64_t s = 0; s < S; ++s) row[s] = krow[s] ? row[s] * keep_scale : T(0);
        }
        T dot = 0;
        for (std::int64_t s = 0; s < S; ++s) dot += row[s] * prow[s];
        for (std::int64_t s = 0; s < S; ++s) row[s] = prow[s] * (row[s] - dot);
      }
      if (need_q && L > 0 && E > 0)
        detail::blas::gemm<T>(false, false, L, E, S, scale, da, S, k + b * S * E, E, T(0), dq + b * L * E, E);
      if (need_k && S > 0 && E > 0)
        detail::blas::gemm<T>(true, false, S, E, L, scale, da, S, q + b * L * E, E, T(0), dk + b * S * E, E);
    }
  });
}

void attention_keep_mask(std::int64_t count, const double* u, double p, std::uint8_t* keep) {
  for (std::int64_t i = 0; i < count; ++i) keep[i] = u[i] >= p ? 1 : 0;
}

template <class T>
void attention_dropout_factor(std::int64_t count, const std::uint8_t* keep, T keep_scale, T* out) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = keep[i] ? keep_scale : T(0);
}

void attention_causal_mask(std::int64_t l_len, std::int64_t s_len, bool* out) {
  for (std::int64_t l = 0; l < l_len; ++l)
    for (std::int64_t s = 0; s < s_len; ++s) out[l * s_len + s] = s > l;
}

XGRAD_INSTANTIATE_FLOATING(attention_forward);
XGRAD_INSTANTIATE_FLOATING(attention_backward);
XGRAD_INSTANTIATE_FLOATING(attention_dropout_factor);

}  // namespace xgrad::detail
