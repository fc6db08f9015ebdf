#pragma once
// Internal: the gate passes of the fused recurrent layers of ops/rnn.cpp (Note [Fused recurrence]
// there; Note [Gate passes] in rnn_kernels.cpp). One call is one time step's pass over the batch
// rows; the GEMMs between the passes stay in the op. Every pass gives each batch row to one task and
// does the same arithmetic per element whatever the chunking, so results do not depend on the thread
// count. Layouts are row-major: B batch rows, H hidden columns, G gates of H columns each (an LSTM's
// gates i, f, g, o; a GRU's r, z, n). Instantiated for float and double.
#include <cstdint>

namespace xgrad::detail {

/// Every one of `rows` rows of a (rows x cols) = b1 + b2 (each a vector of cols values, or null for
/// none): the biases written before a GEMM that adds to them (beta 1).
template <class T>
void rnn_fill_bias_rows(T* a, std::int64_t rows, std::int64_t cols, const T* b1, const T* b2);

/// acc[j] += g[r, j] for r = 0 .. rows - 1 in increasing order, in double, on the calling thread: a
/// step's share of the bias gradients, added while the step's gate gradients are in cache.
template <class T>
void rnn_add_rows(const T* g, std::int64_t rows, std::int64_t cols, double* acc);

/// out[j] = acc[j] converted to T, for j < n.
template <class T>
void rnn_narrow(const double* acc, std::int64_t n, T* out);

/// One LSTM step forward. gates (B x 4H): the pre-activations of i, f, g, o, replaced by their
/// activations (i, f, o = sigmoid, g = tanh). With c_prev, c_next, tanh_c, h (B x H) each:
/// c_next = f c_prev + i g, tanh_c = tanh(c_next), h = o tanh_c. c_next may be c_prev (each element is
/// read, then written).
template <class T>
void lstm_step_forward(std::int64_t batch, std::int64_t hidden, T* gates, const T* c_prev, T* c_next, T* tanh_c, T* h);

/// One LSTM step backward, from what lstm_step_forward kept: a (B x 4H) the activated gates, tanh_c
/// and c_prev (B x H). With dh~ = dh + g_out: dc~ = dc + dh~ o (1 - tanh_c^2); da (B x 4H) =
/// (dc~ g i(1-i), dc~ c_prev f(1-f), dc~ i (1-g^2), dh~ tanh_c o(1-o)); dc is replaced by dc~ f.
/// dh is read only (the op then overwrites it with da W_hh).
template <class T>
void lstm_step_backward(std::int64_t batch, std::int64_t hidden, const T* a, const T* tanh_c, const T* c_prev,
                        const T* g_out, const T* dh, T* dc, T* da);

/// One GRU step forward. x_part, h_part (B x 3H): the input and hidden parts xa, ha of gates r, z, n
/// (biases included); h_prev, h (B x H). r = sigmoid(xa_r + ha_r), z = sigmoid(xa_z + ha_z),
/// n = tanh(xa_n + r ha_n), h = (h_prev - n) z + n; saved (B x 4H) = (r, z, n, ha_n).
template <class T>
void gru_step_forward(std::int64_t batch, std::int64_t hidden, const T* x_part, const T* h_part, const T* h_prev,
                      T* saved, T* h);

/// One GRU step backward, from saved (B x 4H: r, z, n, ha_n) and h_prev (B x H). With dh~ = dh + g_out:
/// da_n = dh~ (1-z)(1-n^2), da_z = dh~ (h_prev - n) z(1-z), da_r = da_n ha_n r(1-r);
/// dgi (B x 3H) = (da_r, da_z, da_n), dgh (B x 3H) = (da_r, da_z, r da_n); dh is replaced by dh~ z (the
/// op then adds dgh W_hh).
template <class T>
void gru_step_backward(std::int64_t batch, std::int64_t hidden, const T* saved, const T* h_prev, const T* g_out, T* dh,
                       T* dgi, T* dgh);

}  // namespace xgrad::detail
