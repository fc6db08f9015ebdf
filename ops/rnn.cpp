#include "xgrad/ops/rnn.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/detail/vec_kernel.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

namespace {

// Note [Fused recurrence]: one op per layer and direction over the whole sequence, instead of a
// graph of linear, chunk, sigmoid, tanh, mul and add nodes per time step (what libtorch records on
// the CPU). With T steps, batch B, G gates of H columns:
//   forward   A = X W_ih^T (+ biases)           ONE GEMM, (T B) x (G H), for every step at once
//             per step: A_t += h_{t-1} W_hh^T    one GEMM, B x (G H)
//                       gate math                one pass over (B, H), activated gates saved
//   backward  per step, last to first: the gate gradients dA_t (one pass), then
//             dh_{t-1} = dA_t W_hh               one GEMM
//             dX = dA W_ih, dW_ih = dA^T X, dW_hh = dA^T H_prev   ONE GEMM each, over all steps
//             db = column sums of dA             fixed row order, accumulated in double
// (for the GRU the hidden part dA^h differs from the input part dA^x in the n gate: dA^h_n = r dA_n).
// The cells are the same ops with T = 1. The GEMMs go through detail::gemm (Note [Deterministic
// GEMM], ops/matmul.cpp); the gate passes give each batch row to one task and do the same arithmetic
// per element whatever the chunking (the activations on xsimd batches along each row); so results
// are bit-identical whatever the thread count.
// Memory: the op keeps the activated gates, the h (and for the LSTM c and tanh c) before every step:
// (G + 3) T B H values, as cuDNN's reserve space.

// The gate activations on xsimd batches (detail::vec_map runs them over a row of H values, its tail
// through the same vector code: an element's value depends on H only, never on the thread count).
struct VSigmoid {
  template <class B>
  B operator()(const B& v) const {
    return B(1) / (B(1) + xsimd::exp(-v));
  }
};
struct VTanh {
  template <class B>
  B operator()(const B& v) const {
    return xsimd::tanh(v);
  }
};

// Rows of a pointwise pass per task: enough elements that a task pays for itself.
std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, 8 * cols));
}

// out[j] = sum over rows of g[r, j], r in increasing order, accumulated in double.
template <class T>
void column_sums(const T* g, std::int64_t rows, std::int64_t cols, T* out) {
  constexpr std::int64_t kCols = 256;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, rows * kCols));
  parallel_for(0, (cols + kCols - 1) / kCols, grain, [&](std::int64_t c0, std::int64_t c1) {
    double acc[kCols];
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t j0 = c * kCols, width = std::min(kCols, cols - j0);
      std::fill(acc, acc + width, 0.0);
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = g + r * cols + j0;
        for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
      }
      for (std::int64_t j = 0; j < width; ++j) out[j0 + j] = static_cast<T>(acc[j]);
    }
  });
}

// Each of `rows` rows of `a` (width cols) = bias (or the sum of two biases), before a GEMM with beta 1.
template <class T>
void fill_rows(T* a, std::int64_t rows, std::int64_t cols, const Tensor& b1, const Tensor& b2) {
  std::vector<T> row(static_cast<std::size_t>(cols), T(0));
  if (b1.defined())
    for (std::int64_t j = 0; j < cols; ++j) row[j] += b1.data<T>()[j];
  if (b2.defined())
    for (std::int64_t j = 0; j < cols; ++j) row[j] += b2.data<T>()[j];
  parallel_for(0, rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) std::copy(row.begin(), row.end(), a + r * cols);
  });
}

struct Dims {
  std::int64_t steps = 0, batch = 0, in = 0, hidden = 0;
  bool reverse = false;
  std::int64_t time(std::int64_t s) const { return reverse ? steps - 1 - s : s; }
};

// The backwards of a create_graph run (Note [Recorded recurrence], at the end of this file). `s`
// holds the saved tensors in save order: x, w_ih, w_hh, h0, (c0,) b_ih, b_hh.
Tensors lstm_recorded_backward(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op);
Tensors gru_recorded_backward(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op);

struct LstmLayerOp : Function<LstmLayerOp> {
  static constexpr const char* kName = "lstm";
  static constexpr bool kDifferentiableBackward = true;  // lstm_recorded_backward
  Dims d;
  Tensor gates, h_prev, c_prev, tanh_c;  // (T, B, 4H) activated i f g o; (T, B, H) each, by time index

  Tensors forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih, const Tensor& b_hh, const Dims& dims) {
    d = dims;
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 4 * H;
    const Dtype dt = x.dtype();
    Tensor out = Tensor::empty({T_, B, H}, dt), hn = Tensor::empty({B, H}, dt), cn = Tensor::empty({B, H}, dt);
    gates = Tensor::empty({T_, B, G}, dt);
    h_prev = Tensor::empty({T_, B, H}, dt);
    c_prev = Tensor::empty({T_, B, H}, dt);
    tanh_c = Tensor::empty({T_, B, H}, dt);
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* A = gates.data<T>();
      const bool bias = b_ih.defined() || b_hh.defined();
      if (bias) fill_rows<T>(A, T_ * B, G, b_ih, b_hh);
      detail::gemm<T>(false, true, T_ * B, G, I, x.data<T>(), I, w_ih.data<T>(), I, bias ? T(1) : T(0), A, G);
      std::vector<T> c_buf(static_cast<std::size_t>(BH));
      const T* h_cur = h0.data<T>();
      const T* c_cur = c0.data<T>();
      for (std::int64_t s = 0; s < T_; ++s) {
        const std::int64_t t = d.time(s);
        T* hp = h_prev.data<T>() + t * BH;
        T* cp = c_prev.data<T>() + t * BH;
        std::copy(h_cur, h_cur + BH, hp);
        std::copy(c_cur, c_cur + BH, cp);
        T* At = A + t * B * G;
        detail::gemm<T>(false, true, B, G, H, hp, H, w_hh.data<T>(), H, T(1), At, G);
        T* ht = out.data<T>() + t * BH;
        T* tc = tanh_c.data<T>() + t * BH;
        parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
          for (std::int64_t b = b0; b < b1; ++b) {
            T* a = At + b * G;
            T* i = a;
            T* f = a + H;
            T* g = a + 2 * H;
            T* o = a + 3 * H;
            T* c = c_buf.data() + b * H;
            detail::vec_map(H, i, VSigmoid{}, static_cast<const T*>(i));
            detail::vec_map(H, f, VSigmoid{}, static_cast<const T*>(f));
            detail::vec_map(H, g, VTanh{}, static_cast<const T*>(g));
            detail::vec_map(H, o, VSigmoid{}, static_cast<const T*>(o));
            detail::vec_map(
                H, c, [](const auto& vi, const auto& vf, const auto& vg, const auto& vc) { return vf * vc + vi * vg; },
                static_cast<const T*>(i), static_cast<const T*>(f), static_cast<const T*>(g),
                static_cast<const T*>(cp + b * H));
            detail::vec_map(H, tc + b * H, VTanh{}, static_cast<const T*>(c));
            detail::vec_map(
                H, ht + b * H, [](const auto& vo, const auto& vt) { return vo * vt; }, static_cast<const T*>(o),
                static_cast<const T*>(tc + b * H));
          }
        });
        h_cur = ht;
        c_cur = c_buf.data();
      }
      std::copy(h_cur, h_cur + BH, hn.data<T>());
      std::copy(c_cur, c_cur + BH, cn.data<T>());
    });
    save_for_backward({x, w_ih, w_hh, h0, c0, b_ih, b_hh});
    return {out, hn, cn};
  }

  Tensors backward(const Tensors& grads) {
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 4 * H;
    const Tensors s = saved();
    if (GradMode::is_enabled()) return lstm_recorded_backward(d, s, grads, *this);
    const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2];
    const Dtype dt = x.dtype();
    Tensor dA = Tensor::empty({T_, B, G}, dt);
    Tensor dh = grads[1].clone_data(), dc = grads[2].clone_data();
    Tensor dx, dw_ih, dw_hh, db_ih, db_hh;
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dAp = dA.data<T>();
      T* dhp = dh.data<T>();
      T* dcp = dc.data<T>();
      const T* gout = grads[0].data<T>();
      for (std::int64_t st = T_ - 1; st >= 0; --st) {
        const std::int64_t t = d.time(st);
        const T* a = gates.data<T>() + t * B * G;
        const T* tc = tanh_c.data<T>() + t * BH;
        const T* cp = c_prev.data<T>() + t * BH;
        const T* go = gout + t * BH;
        T* da = dAp + t * B * G;
        parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
          for (std::int64_t b = b0; b < b1; ++b)
            for (std::int64_t j = 0; j < H; ++j) {
              const std::int64_t e = b * H + j, r = b * G;
              const T i = a[r + j], f = a[r + H + j], g = a[r + 2 * H + j], o = a[r + 3 * H + j];
              const T dht = dhp[e] + go[e];
              const T th = tc[e];
              const T dct = dcp[e] + dht * o * (T(1) - th * th);
              da[r + j] = dct * g * i * (T(1) - i);
              da[r + H + j] = dct * cp[e] * f * (T(1) - f);
              da[r + 2 * H + j] = dct * i * (T(1) - g * g);
              da[r + 3 * H + j] = dht * th * o * (T(1) - o);
              dcp[e] = dct * f;
            }
        });
        detail::gemm<T>(false, false, B, H, G, da, G, w_hh.data<T>(), H, T(0), dhp, H);
      }
      if (needs_input_grad(0)) {
        dx = Tensor::empty({T_, B, I}, dt);
        detail::gemm<T>(false, false, T_ * B, I, G, dAp, G, w_ih.data<T>(), I, T(0), dx.data<T>(), I);
      }
      if (needs_input_grad(3)) {
        dw_ih = Tensor::empty({G, I}, dt);
        detail::gemm<T>(true, false, G, I, T_ * B, dAp, G, x.data<T>(), I, T(0), dw_ih.data<T>(), I);
      }
      if (needs_input_grad(4)) {
        dw_hh = Tensor::empty({G, H}, dt);
        detail::gemm<T>(true, false, G, H, T_ * B, dAp, G, h_prev.data<T>(), H, T(0), dw_hh.data<T>(), H);
      }
      if (needs_input_grad(5) || needs_input_grad(6)) {
        Tensor db = Tensor::empty({G}, dt);
        column_sums<T>(dAp, T_ * B, G, db.data<T>());
        if (needs_input_grad(5)) db_ih = db;
        if (needs_input_grad(6)) db_hh = needs_input_grad(5) ? db.clone_data() : db;
      }
    });
    return {dx, needs_input_grad(1) ? dh : Tensor(), needs_input_grad(2) ? dc : Tensor(), dw_ih, dw_hh, db_ih, db_hh};
  }
};

struct GruLayerOp : Function<GruLayerOp> {
  static constexpr const char* kName = "gru";
  static constexpr bool kDifferentiableBackward = true;  // gru_recorded_backward
  Dims d;
  Tensor saved_gates, h_prev;  // (T, B, 4H): r, z, n and gh_n (hidden part of n with b_hh); (T, B, H)

  Tensors forward(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                  const Tensor& b_hh, const Dims& dims) {
    d = dims;
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 3 * H;
    const Dtype dt = x.dtype();
    Tensor out = Tensor::empty({T_, B, H}, dt), hn = Tensor::empty({B, H}, dt);
    saved_gates = Tensor::empty({T_, B, 4 * H}, dt);
    h_prev = Tensor::empty({T_, B, H}, dt);
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<T> xi(static_cast<std::size_t>(T_ * B * G)), gh(static_cast<std::size_t>(B * G));
      if (b_ih.defined()) fill_rows<T>(xi.data(), T_ * B, G, b_ih, Tensor());
      detail::gemm<T>(false, true, T_ * B, G, I, x.data<T>(), I, w_ih.data<T>(), I, b_ih.defined() ? T(1) : T(0),
                      xi.data(), G);
      const T* h_cur = h0.data<T>();
      for (std::int64_t s = 0; s < T_; ++s) {
        const std::int64_t t = d.time(s);
        T* hp = h_prev.data<T>() + t * BH;
        std::copy(h_cur, h_cur + BH, hp);
        if (b_hh.defined()) fill_rows<T>(gh.data(), B, G, b_hh, Tensor());
        detail::gemm<T>(false, true, B, G, H, hp, H, w_hh.data<T>(), H, b_hh.defined() ? T(1) : T(0), gh.data(), G);
        const T* xt = xi.data() + t * B * G;
        T* sg = saved_gates.data<T>() + t * B * 4 * H;
        T* ht = out.data<T>() + t * BH;
        parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
          for (std::int64_t b = b0; b < b1; ++b) {
            const T* xa = xt + b * G;
            const T* ha = gh.data() + b * G;
            T* sv = sg + b * 4 * H;
            const auto sig_sum = [](const auto& u, const auto& v) { return VSigmoid{}(u + v); };
            detail::vec_map(H, sv, sig_sum, ha, xa);              // r
            detail::vec_map(H, sv + H, sig_sum, ha + H, xa + H);  // z
            std::copy(ha + 2 * H, ha + 3 * H, sv + 3 * H);        // gh_n
            detail::vec_map(                                      // n
                H, sv + 2 * H, [](const auto& vx, const auto& vh, const auto& vr) { return xsimd::tanh(vx + vh * vr); },
                xa + 2 * H, ha + 2 * H, static_cast<const T*>(sv));
            detail::vec_map(  // h'
                H, ht + b * H, [](const auto& vh, const auto& vn, const auto& vz) { return (vh - vn) * vz + vn; },
                static_cast<const T*>(hp + b * H), static_cast<const T*>(sv + 2 * H), static_cast<const T*>(sv + H));
          }
        });
        h_cur = ht;
      }
      std::copy(h_cur, h_cur + BH, hn.data<T>());
    });
    save_for_backward({x, w_ih, w_hh, h0, b_ih, b_hh});
    return {out, hn};
  }

  Tensors backward(const Tensors& grads) {
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 3 * H;
    const Tensors s = saved();
    if (GradMode::is_enabled()) return gru_recorded_backward(d, s, grads, *this);
    const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2];
    const Dtype dt = x.dtype();
    Tensor dgi = Tensor::empty({T_, B, G}, dt), dgh = Tensor::empty({T_, B, G}, dt);
    Tensor dh = grads[1].clone_data();
    Tensor dx, dw_ih, dw_hh, db_ih, db_hh;
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dhp = dh.data<T>();
      const T* gout = grads[0].data<T>();
      for (std::int64_t st = T_ - 1; st >= 0; --st) {
        const std::int64_t t = d.time(st);
        const T* sg = saved_gates.data<T>() + t * B * 4 * H;
        const T* hp = h_prev.data<T>() + t * BH;
        const T* go = gout + t * BH;
        T* di = dgi.data<T>() + t * B * G;
        T* dhh = dgh.data<T>() + t * B * G;
        parallel_for(0, B, row_grain(G), [&](std::int64_t b0, std::int64_t b1) {
          for (std::int64_t b = b0; b < b1; ++b)
            for (std::int64_t j = 0; j < H; ++j) {
              const std::int64_t e = b * H + j, r4 = b * 4 * H, r3 = b * G;
              const T r = sg[r4 + j], z = sg[r4 + H + j], n = sg[r4 + 2 * H + j], hn_ = sg[r4 + 3 * H + j];
              const T dht = dhp[e] + go[e];
              const T dan = dht * (T(1) - z) * (T(1) - n * n);
              const T daz = dht * (hp[e] - n) * z * (T(1) - z);
              const T dar = dan * hn_ * r * (T(1) - r);
              di[r3 + j] = dar;
              di[r3 + H + j] = daz;
              di[r3 + 2 * H + j] = dan;
              dhh[r3 + j] = dar;
              dhh[r3 + H + j] = daz;
              dhh[r3 + 2 * H + j] = dan * r;
              dhp[e] = dht * z;
            }
        });
        detail::gemm<T>(false, false, B, H, G, dhh, G, w_hh.data<T>(), H, T(1), dhp, H);
      }
      if (needs_input_grad(0)) {
        dx = Tensor::empty({T_, B, I}, dt);
        detail::gemm<T>(false, false, T_ * B, I, G, dgi.data<T>(), G, w_ih.data<T>(), I, T(0), dx.data<T>(), I);
      }
      if (needs_input_grad(2)) {
        dw_ih = Tensor::empty({G, I}, dt);
        detail::gemm<T>(true, false, G, I, T_ * B, dgi.data<T>(), G, x.data<T>(), I, T(0), dw_ih.data<T>(), I);
      }
      if (needs_input_grad(3)) {
        dw_hh = Tensor::empty({G, H}, dt);
        detail::gemm<T>(true, false, G, H, T_ * B, dgh.data<T>(), G, h_prev.data<T>(), H, T(0), dw_hh.data<T>(), H);
      }
      if (needs_input_grad(4)) {
        db_ih = Tensor::empty({G}, dt);
        column_sums<T>(dgi.data<T>(), T_ * B, G, db_ih.data<T>());
      }
      if (needs_input_grad(5)) {
        db_hh = Tensor::empty({G}, dt);
        column_sums<T>(dgh.data<T>(), T_ * B, G, db_hh.data<T>());
      }
    });
    return {dx, needs_input_grad(1) ? dh : Tensor(), dw_ih, dw_hh, db_ih, db_hh};
  }
};

// ---- argument checks --------------------------------------------------------------------------

void check_tensor(const char* op, const char* arg, const Tensor& t, const Tensor& like) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is undefined", op, arg);
  check_floating(op, arg, t);
  XGRAD_CHECK(t.dtype() == like.dtype(), "{}: argument '{}' is {} but 'input' is {}", op, arg, t.dtype(), like.dtype());
}

// Checks the weights and biases; returns the hidden size H. `gates` is 4 (LSTM) or 3 (GRU).
std::int64_t check_weights(const char* op, std::int64_t gates, std::int64_t in, const Tensor& input, const Tensor& w_ih,
                           const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  check_tensor(op, "w_ih", w_ih, input);
  check_tensor(op, "w_hh", w_hh, input);
  XGRAD_CHECK(w_hh.dim() == 2 && w_hh.size(0) == gates * w_hh.size(1),
              "{}: argument 'w_hh' has shape {} but must be ({} * hidden_size, hidden_size)", op,
              shape_str(w_hh.shape()), gates);
  const std::int64_t H = w_hh.size(1);
  XGRAD_CHECK(w_ih.dim() == 2 && w_ih.size(0) == gates * H,
              "{}: argument 'w_ih' has shape {} but must be ({}, input_size) = ({} * hidden_size, input_size) for "
              "w_hh {}",
              op, shape_str(w_ih.shape()), gates * H, gates, shape_str(w_hh.shape()));
  XGRAD_CHECK(w_ih.size(1) == in,
              "{}: argument 'input' has shape {} but its last dimension must be input_size = {} (w_ih {})", op,
              shape_str(input.shape()), w_ih.size(1), shape_str(w_ih.shape()));
  for (const auto& [name, b] : {std::pair<const char*, const Tensor&>{"b_ih", b_ih}, {"b_hh", b_hh}}) {
    if (!b.defined()) continue;
    check_tensor(op, name, b, input);
    XGRAD_CHECK(b.shape() == Shape{gates * H}, "{}: argument '{}' has shape {} but must be ({},)", op, name,
                shape_str(b.shape()), gates * H);
  }
  return H;
}

void check_state(const char* op, const char* arg, const Tensor& h, const Tensor& input, const Shape& want) {
  check_tensor(op, arg, h, input);
  XGRAD_CHECK(h.shape() == want, "{}: argument '{}' has shape {} but must be {} for input {}", op, arg,
              shape_str(h.shape()), shape_str(want), shape_str(input.shape()));
}

void check_input(const char* op, const Tensor& input, std::int64_t rank_lo, std::int64_t rank_hi) {
  XGRAD_CHECK(input.defined(), "{}: argument 'input' is undefined", op);
  check_floating(op, "input", input);
  XGRAD_CHECK(input.dim() >= rank_lo && input.dim() <= rank_hi, "{}: argument 'input' has shape {} but must be {}", op,
              shape_str(input.shape()),
              rank_hi == 3 ? "(seq_len, batch, input_size)" : "(batch, input_size) or (input_size)");
}

}  // namespace

Tensors lstm_cell(const Tensor& input, const Tensors& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                  const Tensor& b_hh) {
  const char* op = "lstm_cell";
  check_input(op, input, 1, 2);
  const std::int64_t H = check_weights(op, 4, input.size(-1), input, w_ih, w_hh, b_ih, b_hh);
  XGRAD_CHECK(hx.size() == 2, "lstm_cell: argument 'hx' must hold 2 tensors (h, c), got {}", hx.size());
  const bool batched = input.dim() == 2;
  const std::int64_t B = batched ? input.size(0) : 1;
  const Shape want = batched ? Shape{B, H} : Shape{H};
  check_state(op, "hx[0]", hx[0], input, want);
  check_state(op, "hx[1]", hx[1], input, want);
  const Dims d{1, B, input.size(-1), H, false};
  Tensors r = apply<LstmLayerOp>(reshape(input, {1, B, d.in}), reshape(hx[0], {B, H}), reshape(hx[1], {B, H}), w_ih,
                                 w_hh, b_ih, b_hh, d);
  return {reshape(r[1], want), reshape(r[2], want)};
}

Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
  const char* op = "gru_cell";
  check_input(op, input, 1, 2);
  const std::int64_t H = check_weights(op, 3, input.size(-1), input, w_ih, w_hh, b_ih, b_hh);
  const bool batched = input.dim() == 2;
  const std::int64_t B = batched ? input.size(0) : 1;
  const Shape want = batched ? Shape{B, H} : Shape{H};
  check_state(op, "hx", hx, input, want);
  const Dims d{1, B, input.size(-1), H, false};
  Tensors r = apply<GruLayerOp>(reshape(input, {1, B, d.in}), reshape(hx, {B, H}), w_ih, w_hh, b_ih, b_hh, d);
  return reshape(r[1], want);
}

Tensors lstm_layer(const Tensor& input, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                   const Tensor& b_ih, const Tensor& b_hh, bool reverse) {
  const char* op = "lstm_layer";
  check_input(op, input, 3, 3);
  const std::int64_t H = check_weights(op, 4, input.size(2), input, w_ih, w_hh, b_ih, b_hh);
  check_state(op, "h0", h0, input, {input.size(1), H});
  check_state(op, "c0", c0, input, {input.size(1), H});
  const Dims d{input.size(0), input.size(1), input.size(2), H, reverse};
  return apply<LstmLayerOp>(input, h0, c0, w_ih, w_hh, b_ih, b_hh, d);
}

Tensors gru_layer(const Tensor& input, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                  const Tensor& b_hh, bool reverse) {
  const char* op = "gru_layer";
  check_input(op, input, 3, 3);
  const std::int64_t H = check_weights(op, 3, input.size(2), input, w_ih, w_hh, b_ih, b_hh);
  check_state(op, "h0", h0, input, {input.size(1), H});
  const Dims d{input.size(0), input.size(1), input.size(2), H, reverse};
  return apply<GruLayerOp>(input, h0, w_ih, w_hh, b_ih, b_hh, d);
}

// ---- create_graph: the backward with public ops ------------------------------------------------

namespace {

// Note [Recorded recurrence]: under create_graph (Note [Create graph] in core/autograd.hpp) the
// layers' backward is written with public differentiable ops, so that it records its own graph. The
// gates saved by the forward have no history, so the forward is first run again with public ops
// from the saved x, h0, c0, weights and biases (the gates then carry their dependence on every
// input), and back-propagation through time follows with the formulas of ops/rnn.hpp, the steps
// from last to first; the weight gradients are one product over all the steps, as in the fused
// kernel. This path records some 30 nodes per step: it is for higher-order derivatives (gradient
// penalties, Hessian-vector products), not for training speed. The first-order kernel above is
// untouched.
struct NeedGrad {
  const Node& op;
  bool operator[](std::size_t i) const { return op.needs_input_grad(i); }
};

// Columns [k H, (k + 1) H) of a (B, G H) tensor: gate k.
Tensor gate(const Tensor& a, std::int64_t k, std::int64_t h) { return slice(a, 1, k * h, (k + 1) * h); }
// Rows [t B, (t + 1) B) of a (T B, N) tensor: step t.
Tensor rows(const Tensor& a, std::int64_t t, std::int64_t b) { return slice(a, 0, t * b, (t + 1) * b); }
// s * (1 - s), the derivative of a sigmoid from its value; 1 - y^2 that of a tanh.
Tensor dsigmoid(const Tensor& s) { return s * (1.0 - s); }
Tensor dtanh(const Tensor& y) { return 1.0 - y * y; }

// x (T, B, I) as (T B, I) times w^T (G, I) -> (T B, G), plus the biases.
Tensor input_part(const Tensor& x, const Tensor& w, const Tensor& b1, const Tensor& b2) {
  Tensor a = matmul(reshape(x, {x.size(0) * x.size(1), x.size(2)}), transpose(w, 0, 1));
  if (b1.defined()) a = a + b1;
  if (b2.defined()) a = a + b2;
  return a;
}

// The gradients shared by both cells once the per-step gate gradients are known: dX = dA W_ih,
// dW = dA^T X (over all steps), db = column sums. `dgi` and `dgh` are (T B, G) in time order.
void weight_grads(const Tensor& x, const Tensor& w_ih, const Tensor& dgi, const Tensor& dgh, const Tensor& h_prev,
                  const NeedGrad& need, std::size_t ix, std::size_t iw_ih, Tensors& out) {
  const std::int64_t TB = x.size(0) * x.size(1);
  if (need[ix]) out[ix] = reshape(matmul(dgi, w_ih), x.shape());
  if (need[iw_ih]) out[iw_ih] = matmul(transpose(dgi, 0, 1), reshape(x, {TB, x.size(2)}));
  if (need[iw_ih + 1]) out[iw_ih + 1] = matmul(transpose(dgh, 0, 1), h_prev);
  if (need[iw_ih + 2]) out[iw_ih + 2] = sum(dgi, {0});
  if (need[iw_ih + 3]) out[iw_ih + 3] = sum(dgh, {0});
}

Tensors lstm_recorded_backward(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op) {
  const NeedGrad need{op};
  const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2], &h0 = s[3], &c0 = s[4], &b_ih = s[5], &b_hh = s[6];
  const std::int64_t T_ = d.steps, B = d.batch, H = d.hidden;
  Tensors out(7);
  if (T_ == 0) {  // no step: the states pass through; the rest get zeros (with history, for shape)
    out = {mul(x, 0.0), grads[1], grads[2], mul(w_ih, 0.0), mul(w_hh, 0.0), Tensor(), Tensor()};
    if (need[5]) out[5] = mul(b_ih, 0.0);
    if (need[6]) out[6] = mul(b_hh, 0.0);
    for (std::size_t i = 0; i < 5; ++i)
      if (!need[i]) out[i] = Tensor();
    return out;
  }
  // The forward again, recorded: per time index, the activated gates, tanh(c) and the states before.
  const Tensor ax = input_part(x, w_ih, b_ih, b_hh), w_hh_t = transpose(w_hh, 0, 1);
  const auto n = static_cast<std::size_t>(T_);
  Tensors gi(n), gf(n), gg(n), go(n), tc(n), hp(n), cp(n);
  Tensor h = h0, c = c0;
  for (std::int64_t st = 0; st < T_; ++st) {
    const auto t = static_cast<std::size_t>(d.time(st));
    hp[t] = h;
    cp[t] = c;
    const Tensor a = rows(ax, d.time(st), B) + matmul(h, w_hh_t);
    gi[t] = sigmoid(gate(a, 0, H));
    gf[t] = sigmoid(gate(a, 1, H));
    gg[t] = tanh(gate(a, 2, H));
    go[t] = sigmoid(gate(a, 3, H));
    c = gf[t] * c + gi[t] * gg[t];
    tc[t] = tanh(c);
    h = go[t] * tc[t];
  }
  // Back-propagation through time, last step first.
  Tensor dh = grads[1], dc = grads[2];
  Tensors da(n);
  for (std::int64_t st = T_ - 1; st >= 0; --st) {
    const auto t = static_cast<std::size_t>(d.time(st));
    const Tensor dht = dh + squeeze(slice(grads[0], 0, d.time(st), d.time(st) + 1), 0);
    const Tensor dct = dc + dht * go[t] * dtanh(tc[t]);
    da[t] = concat({dct * gg[t] * dsigmoid(gi[t]), dct * cp[t] * dsigmoid(gf[t]), dct * gi[t] * dtanh(gg[t]),
                    dht * tc[t] * dsigmoid(go[t])},
                   1);
    dc = dct * gf[t];
    dh = matmul(da[t], w_hh);
  }
  const Tensor dA = concat(da, 0);
  out[1] = need[1] ? dh : Tensor();
  out[2] = need[2] ? dc : Tensor();
  weight_grads(x, w_ih, dA, dA, concat(hp, 0), need, 0, 3, out);
  return out;
}

Tensors gru_recorded_backward(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op) {
  const NeedGrad need{op};
  const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2], &h0 = s[3], &b_ih = s[4], &b_hh = s[5];
  const std::int64_t T_ = d.steps, B = d.batch, H = d.hidden;
  Tensors out(6);
  if (T_ == 0) {
    out = {mul(x, 0.0), grads[1], mul(w_ih, 0.0), mul(w_hh, 0.0), Tensor(), Tensor()};
    if (need[4]) out[4] = mul(b_ih, 0.0);
    if (need[5]) out[5] = mul(b_hh, 0.0);
    for (std::size_t i = 0; i < 4; ++i)
      if (!need[i]) out[i] = Tensor();
    return out;
  }
  const Tensor xi = input_part(x, w_ih, b_ih, Tensor()), w_hh_t = transpose(w_hh, 0, 1);
  const auto n = static_cast<std::size_t>(T_);
  Tensors gr(n), gz(n), gn(n), ghn(n), hp(n);
  Tensor h = h0;
  for (std::int64_t st = 0; st < T_; ++st) {
    const auto t = static_cast<std::size_t>(d.time(st));
    hp[t] = h;
    Tensor gh = matmul(h, w_hh_t);
    if (b_hh.defined()) gh = gh + b_hh;
    const Tensor a = rows(xi, d.time(st), B);
    gr[t] = sigmoid(gate(a, 0, H) + gate(gh, 0, H));
    gz[t] = sigmoid(gate(a, 1, H) + gate(gh, 1, H));
    ghn[t] = gate(gh, 2, H);
    gn[t] = tanh(gate(a, 2, H) + gr[t] * ghn[t]);
    h = (1.0 - gz[t]) * gn[t] + gz[t] * h;
  }
  Tensor dh = grads[1];
  Tensors dgi(n), dgh(n);
  for (std::int64_t st = T_ - 1; st >= 0; --st) {
    const auto t = static_cast<std::size_t>(d.time(st));
    const Tensor dht = dh + squeeze(slice(grads[0], 0, d.time(st), d.time(st) + 1), 0);
    const Tensor dan = dht * (1.0 - gz[t]) * dtanh(gn[t]);
    const Tensor daz = dht * (hp[t] - gn[t]) * dsigmoid(gz[t]);
    const Tensor dar = dan * ghn[t] * dsigmoid(gr[t]);
    dgi[t] = concat({dar, daz, dan}, 1);
    dgh[t] = concat({dar, daz, dan * gr[t]}, 1);
    dh = dht * gz[t] + matmul(dgh[t], w_hh);
  }
  out[1] = need[1] ? dh : Tensor();
  weight_grads(x, w_ih, concat(dgi, 0), concat(dgh, 0), concat(hp, 0), need, 0, 2, out);
  return out;
}

}  // namespace

}  // namespace xgrad
