#pragma once
// Internal: the loops of scaled_dot_product_attention (ops/attention.cpp, Note [Attention kernel]
// there). The batch dims are flattened to B independent problems, row-major: q (B, L, E), k (B, S,
// E), v (B, S, Ev), the weights P (B, L, S), the output (B, L, Ev). The materialising kernels give
// each problem to one task; the fused ones give each (problem, query tile) or (problem, key tile) to
// one task, which owns the rows it writes. Products go through detail::blas::gemm (single-threaded
// BLAS), so the bits do not depend on which thread runs a task. Instantiated for float and double.
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
  /// Block-sparse attention (ops/attention_layout.hpp): with layout_crow set, the fused kernels' tiles
  /// are `tile` x `tile` blocks and only the blocks of the layout are computed, every other score being
  /// masked. The layout is a CSR over the (query tile x key tile) grid: query tile i's key tiles are
  /// layout_col[layout_crow[i] .. layout_crow[i + 1]) in increasing order; its transpose lists key tile
  /// j's query tiles as layout_tcol[layout_tcrow[j] .. layout_tcrow[j + 1]).
  const std::int64_t* layout_crow = nullptr;
  const std::int64_t* layout_col = nullptr;
  const std::int64_t* layout_tcrow = nullptr;
  const std::int64_t* layout_tcol = nullptr;
  std::int64_t tile = 0;
};

/// Query rows and key columns of one tile of the fused kernels: a task holds a (kAttentionTile x
/// kAttentionTile) block of scores at a time, never a whole (L x S) problem.
inline constexpr std::int64_t kAttentionTile = 64;

/// The dropout of the weights, drawn by entry (Note [Attention dropout] in ops/attention.cpp): entry
/// i = (b L + l) S + s of the (B, L, S) weights is kept when word i % 4 of the Philox block first + i / 4
/// of the stream `key` is >= threshold (threshold = ceil(p 2^32), so kept with probability 1 - p up to
/// 2^-32); a kept weight is multiplied by keep_scale (1 / (1 - p)), a dropped one is 0. Any kernel, in
/// any tile order, redraws the same decisions from (key, first) alone.
template <class T>
struct AttentionDropout {
  bool on = false;
  std::uint64_t key = 0, first = 0, threshold = 0;
  T keep_scale = 0;
};

/// keep[j] = the dropout's decision (1 kept, 0 dropped) for the entries index0 + j, j < count.
template <class T>
void attention_keep(const AttentionDropout<T>& drop, std::uint64_t index0, std::int64_t count, std::uint8_t* keep);

/// The materialising forward of every problem (the weights output's path): p = softmax over each row
/// of scale q k^T, masked (a row whose every score is -inf, or that holds a NaN, is NaN throughout, as
/// torch); pd = p with the dropout applied (pd may be p when the dropout is off); out = pd v.
template <class T>
void attention_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                       const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* p, T* pd, T* out);

/// The materialising backward of every problem from the saved weights p and the gradient g of the
/// output (B, L, Ev), plus gw (B, L, S) that of the returned weights, or null: dv = pd^T g; dP = (g v^T +
/// gw) with the dropout applied; dA = p * (dP - rowsum(dP * p)); dq = scale dA k, dk = scale dA^T q. Each
/// of dq, dk, dv may be null (not wanted); da_full, when not null, receives dA (B, L, S) (for the float
/// mask's gradient).
template <class T>
void attention_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* p, T scale,
                        const AttentionDropout<T>& drop, const T* g, const T* gw, T* dq, T* dk, T* dv, T* da_full);

/// The fused (tiled) forward: the output of attention_forward, computed per (problem, query tile)
/// over key tiles with an online softmax (running row max m and sum l, the output rescaled by
/// exp(m_old - m_new) when m grows), and lse (B, L) = m + log(l), the row's logsumexp (NaN for a row
/// that is NaN: every key masked, or a NaN score). With S = 0 the output is 0 and lse is -inf.
template <class T>
void attention_fused_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                             const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* out, T* lse);

/// The fused backward from the saved output and lse and the gradient g of the output: each tile's
/// P = exp(scale q k^T + mask - lse) is recomputed, D = rowsum(g * out), dP = (g v^T) with the dropout
/// applied, dS = P * (dP - D); dv = sum over query tiles of pd^T g and dk = scale sum of dS^T q, per
/// (problem, key tile); dq = scale sum over key tiles of dS k, per (problem, query tile). Each of dq,
/// dk, dv may be null (not wanted); ds_full, when not null, receives dS (B, L, S) (the float mask's
/// gradient before the broadcast sum), written by the dq tasks.
template <class T>
void attention_fused_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* out, const T* lse,
                              T scale, const AttentionMask<T>& mask, const AttentionDropout<T>& drop, const T* g, T* dq,
                              T* dk, T* dv, T* ds_full);

/// out (B, L, S) = the dropout as a constant factor: keep_scale where the entry is kept, else 0.
template <class T>
void attention_dropout_factor(const AttentionSizes& n, const AttentionDropout<T>& drop, T* out);

/// out (L x S) = s > l: the entries a causal mask removes.
void attention_causal_mask(std::int64_t l_len, std::int64_t s_len, bool* out);
/// out (L x S) = (l / tile, s / tile) is a block of the layout (crow, col over the tile grid): the
/// entries block-sparse attention keeps.
void attention_layout_mask(std::int64_t l_len, std::int64_t s_len, std::int64_t tile, const std::int64_t* crow,
                           const std::int64_t* col, bool* out);

}  // namespace xgrad::detail
