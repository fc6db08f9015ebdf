#pragma once
// Recurrent cells and layers: lstm_cell and gru_cell (torch::lstm_cell, torch::gru_cell), and
// lstm_layer / gru_layer, one layer of one direction over a whole sequence, which nn::LSTM and
// nn::GRU (nn/rnn.hpp) stack. Gate order and formulas are torch's. One fused op per call
// (Note [Fused recurrence] in ops/rnn.cpp): the input part of every time step is ONE GEMM
// (T*B rows), the hidden part one GEMM per step, the gate math one pass per step, and the backward
// is hand-written (back-propagation through time in one loop); bit-identical whatever the thread count.
// Under create_graph (higher-order gradients) the backward is instead written with public ops (the
// gates recomputed from the saved inputs, then the same formulas, last step first), so the
// gradients can be differentiated again; the first-order backward keeps the fused kernel.
//
// Shapes: input (B, I) or unbatched (I) for the cells, (T, B, I) for the layers; states (B, H) (or
// (H) with an unbatched input); w_ih (G H, I), w_hh (G H, H), b_ih and b_hh (G H) or undefined (no
// bias), with G = 4 for the LSTM (gates i, f, g, o) and 3 for the GRU (gates r, z, n). Float32 or
// float64, all the same dtype. Errors (xgrad::Error naming the op, the argument and the shapes): an
// undefined input, state or weight, a wrong rank or size, mixed dtypes, integer tensors. Each op's
// formulas are its `/// @op` row (op | forward | gradient | torch), from which docs/ops.md's table is
// generated.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// One LSTM step, hx = {h, c}; returns {h′, c′}.
/// @op `lstm_cell(x, {h, c}, W_ih, W_hh, b_ih, b_hh)`
///   | a = x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh in gates (i, f, g, o) of H columns each; i, f, o = σ, g = tanh; c′ = f·c +
///     i·g, h′ = o·tanh(c′); returns {h′, c′}; x (B, I) or (I)
///   | with g_h, g_c the gradients of h′, c′: dc̃ = g_c + g_h·o·(1 − tanh²c′); da = (dc̃·g·i(1−i), dc̃·c·f(1−f),
///     dc̃·i·(1 − g²), g_h·tanh c′·o(1−o)); dc = dc̃·f, dh = da·W_hh, dx = da·W_ih, dW_hh = daᵀ·h, dW_ih = daᵀ·x,
///     db_ih = db_hh = Σ_batch da
///   | torch.lstm_cell
Tensors lstm_cell(const Tensor& input, const Tensors& hx, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// One GRU step; returns h′.
/// @op `gru_cell(x, h, W_ih, W_hh, b_ih, b_hh)`
///   | gi = x·W_ihᵀ + b_ih, gh = h·W_hhᵀ + b_hh in gates (r, z, n); r = σ(gi_r + gh_r), z = σ(gi_z + gh_z),
///     n = tanh(gi_n + r·gh_n); h′ = (1 − z)·n + z·h
///   | da_n = g(1−z)(1−n²), da_z = g(h − n)z(1−z), da_r = da_n·gh_n·r(1−r); dgi = (da_r, da_z, da_n),
///     dgh = (da_r, da_z, r·da_n); dh = g·z + dgh·W_hh, dx = dgi·W_ih, dW_ih = dgiᵀ·x, dW_hh = dghᵀ·h,
///     db_ih = Σ dgi, db_hh = Σ dgh
///   | torch.gru_cell
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// h0 and c0 (B, H); output[t] is the h after step t. With reverse (the backward direction of a
/// bidirectional layer) output[t] still belongs to position t.
/// @op `lstm_layer(x, h0, c0, W_ih, W_hh, b_ih, b_hh, reverse)`, `gru_layer(x, h0, W_ih, W_hh, b_ih, b_hh, reverse)`
///   | the cell over x (T, B, I), t = 0..T−1 (or T−1..0 with reverse); returns {output (T, B, H), h_n (, c_n)};
///     the input part of all steps is one GEMM (what `nn::LSTM` / `nn::GRU` run)
///   | the cell's, summed over the steps (back-propagation through time); dX, dW_ih, dW_hh one GEMM each over all
///     steps
///   | torch.nn.LSTM, torch.nn.GRU (one layer and direction; compared through torch.lstm_cell, torch.gru_cell)
Tensors lstm_layer(const Tensor& input, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                   const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor(), bool reverse = false);

/// h0 (B, H); as lstm_layer.
Tensors gru_layer(const Tensor& input, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor(), bool reverse = false);

}  // namespace xgrad
