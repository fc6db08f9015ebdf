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
// undefined input, state or weight, a wrong rank or size, mixed dtypes, integer tensors.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// One LSTM step, hx = {h, c}; returns {h', c'}. With a = x W_ih^T + b_ih + h W_hh^T + b_hh split
/// in four (H columns each):
///   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
///   c' = f * c + i * g,  h' = o * tanh(c')
/// Gradients (gh = dL/dh', gc = dL/dc'; s' = s(1 - s) for the sigmoids, 1 - g^2 for tanh):
///   dc~ = gc + gh * o * (1 - tanh(c')^2)
///   da_i = dc~ * g * i', da_f = dc~ * c * f', da_g = dc~ * i * (1 - g^2), da_o = gh * tanh(c') * o'
///   dc = dc~ * f,  dh = da W_hh,  dx = da W_ih,  dW_hh = da^T h,  dW_ih = da^T x,
///   db_ih = db_hh = sum of da over the batch.
Tensors lstm_cell(const Tensor& input, const Tensors& hx, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// One GRU step; returns h'. With gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh split in three:
///   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n)
///   h' = (1 - z) * n + z * h
/// Gradients (g = dL/dh'):
///   da_n = g (1 - z)(1 - n^2),  da_z = g (h - n) z (1 - z),  da_r = da_n gh_n r (1 - r)
///   dgi = (da_r, da_z, da_n),  dgh = (da_r, da_z, da_n * r)
///   dh = g z + dgh W_hh,  dx = dgi W_ih,  dW_hh = dgh^T h,  dW_ih = dgi^T x,
///   db_ih = sum of dgi, db_hh = sum of dgh over the batch.
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// lstm_cell over a sequence: input (T, B, I), h0 and c0 (B, H); returns {output (T, B, H), h_n,
/// c_n (B, H)}, output[t] the h after step t. With reverse, the steps run from t = T - 1 down to 0
/// (the backward direction of a bidirectional layer; output[t] still belongs to position t).
/// Gradients: those of lstm_cell, summed over the steps (back-propagation through time).
Tensors lstm_layer(const Tensor& input, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                   const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor(), bool reverse = false);

/// gru_cell over a sequence: input (T, B, I), h0 (B, H); returns {output (T, B, H), h_n (B, H)}.
/// reverse and gradients as lstm_layer.
Tensors gru_layer(const Tensor& input, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor(), bool reverse = false);

}  // namespace xgrad
