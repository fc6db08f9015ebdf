#pragma once
// Internal: the loops of scaled_dot_product_attention (ops/attention.cpp, Note [Attention kernel]
// there). The batch dims are flattened to B independent problems, row-major: q (B, L, E), k (B, S,
// E), v (B, S, Ev), the weights P (B, L, S), the output (B, L, Ev). Each problem is one task's, start
// to end, and its products go through detail::blas::gemm (single-threaded BLAS), so a problem's bits
// do not depend on which thread runs it. Instantiated for float and double.
#include <cstdint>

namespace xgrad::detail {

/// The sizes of the B problems: L queries, S keys, E features of q and k, Ev of v.
struct AttentionSizes {
  std::int64_t b = 1, l = 0, s = 0, e = 0, ev = 0;
};

/// The mask of the scores of problem b: its entry (l, s) at base[b] + l * row_stride + s * col_stride
/// (stride 0 along a broadcast dim; base holds B offsets). With bool_mask a false entry masks the score
/// (-inf); float_mask is added to it; at most one of the two is set. causal masks s > l.
template <class T>
struct AttentionMask {
  const bool* bool_mask = nullptr;
  const T* float_mask = nullptr;
  const std::int64_t* base = nullptr;
  std::int64_t row_stride = 0, col_stride = 0;
  bool causal = false;
};

/// The dropout of the weights: when `on`, keep (B L S bytes) says which are kept (1), and a kept
/// weight is multiplied by keep_scale (1 / (1 - p)), a dropped one is 0.
template <class T>
struct AttentionDropout {
  bool on = false;
  const std::uint8_t* keep = nullptr;
  T keep_scale = 0;
};

/// The forward of every problem: p = softmax over each row of scale q k^T, masked (a row whose every
/// score is -inf, or that holds a NaN, is NaN throughout, as torch); pd = p with the dropout applied
/// (pd may be p when the dropout is off); out = pd v.
template <class T>
void attention_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                       const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* p, T* pd, T* out);

/// The backward of every problem from the saved weights p and the gradient g of the output (B, L,
/// Ev), plus gw (B, L, S) that of the returned weights, or null: dv = pd^T g; dP = (g v^T + gw) with
/// the dropout applied; dA = p * (dP - rowsum(dP * p)); dq = scale dA k, dk = scale dA^T q. Each of
/// dq, dk, dv may be null (not wanted); da_full, when not null, receives dA (B, L, S) (for the float
/// mask's gradient).
template <class T>
void attention_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* p, T scale,
                        const AttentionDropout<T>& drop, const T* g, const T* gw, T* dq, T* dk, T* dv, T* da_full);

/// keep[i] = 1 when u[i] >= p (kept with probability 1 - p for uniforms u in [0, 1)), else 0.
void attention_keep_mask(std::int64_t count, const double* u, double p, std::uint8_t* keep);

/// out[i] = keep_scale where keep[i] is 1, else 0: the dropout as a constant factor.
template <class T>
void attention_dropout_factor(std::int64_t count, const std::uint8_t* keep, T keep_scale, T* out);

/// out (L x S) = s > l: the entries a causal mask removes.
void attention_causal_mask(std::int64_t l_len, std::int64_t s_len, bool* out);

}  // namespace xgrad::detail
