#pragma once
// Scaled dot-product attention, as torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x).
//
// The op's formulas are its `/// @op` row (op | forward | gradient, g = dL/dout | torch), from which
// docs/ops.md's table is generated; the batch dims are any leading dims, shared by query, key and value.
// Fused in tiles (Note [Attention kernel] in attention.cpp): an online softmax over key tiles, no
// L x S buffer; the output and each row's logsumexp are saved and the backward recomputes P tile by
// tile. Results are bit-identical whatever the thread count (no atomics; fixed tile orders).
// Under create_graph (higher-order gradients) the backward is the same formulas written with public
// ops, P recomputed from the saved query, key and mask (the dropout keep decisions redrawn), so the
// gradients can be differentiated again; the first-order backward is unchanged.
//
// A row whose every key is masked (all -inf) gives NaN in that row of the output and of its
// gradients, what torch 2.x's reference (math) implementation and softmax give; we keep it rather
// than invent zeros, so a bad mask shows.
#include <cstdint>
#include <optional>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad {

/// torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
/// is_causal, scale) of PyTorch 2.x. query (..., L, E), key (..., S, E), value (..., S, Ev), with
/// the same leading (batch) dims, all of one floating dtype -> (..., L, Ev).
/// attn_mask: undefined, a bool tensor (true = the key takes part, as torch) or an additive tensor of
/// query's dtype, broadcastable to (..., L, S) (it may have fewer dims, e.g. (L, S)); a float mask
/// that requires grad gets its gradient. is_causal: query l sees keys s <= l (torch's top-left
/// aligned tril(ones(L, S))); not together with attn_mask (as torch). scale: default 1 / sqrt(E)
/// (with E = 0 the empty dot products are 0 and attention is uniform). dropout_p > 0 drops entries
/// of P with that probability (one Philox reservation per call from `generator`, or from the default
/// generator when it is null; entry (b, l, s) decided by a word picked by its index, Note [Attention
/// dropout]) and scales the rest by 1 / (1 - dropout_p); backward redraws the same decisions. It applies
/// whenever dropout_p > 0 (torch's functional has no training flag).
/// Errors (xgrad::Error naming the op, the argument and the shapes): undefined or non-floating
/// inputs, fewer than 2 dims, batch dims or E of key / value differing from query's, key and value
/// with different S, a mask of another dtype or not broadcastable to (..., L, S), attn_mask with
/// is_causal, dropout_p outside [0, 1], a scale not finite.
/// @op `scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, generator)`
///   | per batch index: A = scale·q·kᵀ + M (M additive, −∞ where a bool mask is false or is_causal hides s > l;
///     scale = 1/√E by default), P = softmax(A) row-wise, P′ = P·D/(1 − p) (dropout keep mask D drawn from
///     `generator`), y = P′·v; a fully masked row is NaN (as torch 2.x)
///   | dv = P′ᵀ·g, dP′ = g·vᵀ (+ the weights' gradient when they are an output), dP = dP′·D/(1 − p),
///     dA = P·(dP − Σ_s dP·P), dq = scale·dA·k, dk = scale·dAᵀ·q, dM = dA summed over M's broadcast dims; none
///     for a bool mask
///   | torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x; compared through torch.softmax)
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, Generator* generator = nullptr);

/// Block-sparse attention: scaled_dot_product_attention in which query l attends to key s only when
/// the block (l / block, s / block) is stored in `layout`, a CsrPattern over the grid of ceil(L /
/// block) x ceil(S / block) blocks (ops/attention_layout.hpp builds the sliding window, global, random
/// and strided layouts and combines them): the same values as scaled_dot_product_attention with the
/// bool mask that is true exactly on the layout's blocks. The fused kernels visit the stored blocks
/// only, in block x block tiles, so time and memory follow the stored blocks instead of L x S.
/// is_causal also hides s > l inside the stored blocks; dropout_p, scale and generator as
/// scaled_dot_product_attention (the same dropout draws, by entry). A query whose every key is
/// hidden gives a NaN row (a fully masked row). One layout for every problem of the batch dims.
/// Differentiable with respect to query, key and value, to any order (under create_graph the backward
/// is the dense formula with the layout's (L, S) mask). Errors (xgrad::Error naming the op, the
/// argument and the shapes): those of scaled_dot_product_attention, block < 1, a layout whose grid is
/// not (ceil(L / block), ceil(S / block)).
/// @op `block_sparse_attention(q, k, v, layout, block, dropout_p, is_causal, scale, generator)`
///   | scaled_dot_product_attention(q, k, v, M) with M[l, s] = (l / block, s / block) stored in the layout
///   | as scaled_dot_product_attention; the blocks outside the layout contribute nothing
///   | — (compared through softmax(q·kᵀ·scale, masked to the layout's blocks)·v)
Tensor block_sparse_attention(const Tensor& query, const Tensor& key, const Tensor& value, const CsrPattern& layout,
                              std::int64_t block, double dropout_p = 0.0, bool is_causal = false,
                              std::optional<double> scale = std::nullopt, Generator* generator = nullptr);

namespace detail {
/// scaled_dot_product_attention and its attention weights P' (..., L, S) (after dropout), as
/// nn::MultiheadAttention returns them: {out, weights}. Both are differentiable (the weights' gradient
/// enters dP′ in the op's row).
Tensors scaled_dot_product_attention_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                                  const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                                  bool is_causal = false, std::optional<double> scale = std::nullopt,
                                                  Generator* generator = nullptr);
}  // namespace detail

}  // namespace xgrad
