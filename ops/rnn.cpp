#include "xgrad/ops/rnn.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/rnn_kernels.hpp"
#include "xgrad/ops/kernels/tiled_gemm.hpp"
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
//             db = column sums of dA             added up step by step in the loop above (rows of
//                                                each step in order), accumulated in double
// (for the GRU the hidden part dA^h differs from the input part dA^x in the n gate: dA^h_n = r dA_n).
// The cells are the same ops with T = 1. The GEMMs go through detail::gemm (Note [Deterministic
// GEMM], ops/matmul.cpp); the gate passes (ops/kernels/rnn_kernels.cpp, Note [Gate passes]) give
// each batch row to one task and do the same arithmetic per element whatever the chunking (the
// activations on xsimd batches along each row); so results are bit-identical whatever the thread
// count.
// Memory: the op keeps the activated gates, the h (and for the LSTM c and tanh c) before every step:
// (G + 3) T B H values, as cuDNN's reserve space. Without a graph (no grad mode, or no input
// requires grad) it keeps nothing: the states are read where they lie and the per-step values go
// to one-step workspaces. Every buffer is a tensor, so the caching allocator (core/allocator.hpp)
// serves it again in the next training step without fresh pages.

// The data of an optional tensor (a bias), or null when it is undefined.
template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// A (cols) tensor of dtype T from double accumulators.
template <class T>
Tensor to_tensor(const std::vector<double>& acc, Dtype dt) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(acc.size())}, dt);
  detail::rnn_narrow<T>(acc.data(), t.numel(), t.data<T>());
  return t;
}

struct Dims {
  std::int64_t steps = 0, batch = 0, in = 0, hidden = 0;
  bool reverse = false;
  std::int64_t time(std::int64_t s) const { return reverse ? steps - 1 - s : s; }
};

// The backwards of a create_graph run (Note [Recorded recurrence], at the end of this file). `s`
// holds the saved tensors in save order: x, w_ih, w_hh, h0, (c0,) b_ih, b_hh.
Tensors lstm_backward_formula(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op);
Tensors gru_backward_formula(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op);

struct LstmLayerOp : Function<LstmLayerOp> {
  static constexpr const char* kName = "lstm";
  static constexpr bool kDifferentiableBackward = true;  // lstm_backward_formula
  Dims d;
  Tensor gates, h_prev, c_prev, tanh_c;  // (T, B, 4H) activated i f g o; (T, B, H) each, by time index

  Tensors forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                  const Tensor& b_ih, const Tensor& b_hh, const Dims& dims) {
    d = dims;
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 4 * H;
    const Dtype dt = x.dtype();
    // Without a graph (no grad mode, or no input requires grad) nothing is kept for a backward:
    // the states are read where they lie and tanh(c) goes to a one-step workspace.
    bool record = false;
    for (std::size_t i = 0; i < 7; ++i) record = record || needs_input_grad(i);
    Tensor out = Tensor::empty({T_, B, H}, dt), hn = Tensor::empty({B, H}, dt), cn = Tensor::empty({B, H}, dt);
    Tensor A_t = Tensor::empty({T_, B, G}, dt);
    Tensor tc_t = Tensor::empty({record ? T_ : 1, B, H}, dt);
    Tensor c_ws = record ? Tensor() : Tensor::empty({B, H}, dt);
    if (record) {
      h_prev = Tensor::empty({T_, B, H}, dt);
      c_prev = Tensor::empty({T_, B, H}, dt);
    }
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* A = A_t.data<T>();
      const bool bias = b_ih.defined() || b_hh.defined();
      if (bias) detail::rnn_fill_bias_rows<T>(A, T_ * B, G, data_or_null<T>(b_ih), data_or_null<T>(b_hh));
      detail::gemm<T>(false, true, T_ * B, G, I, x.data<T>(), I, w_ih.data<T>(), I, bias ? T(1) : T(0), A, G);
      const T* h_cur = h0.data<T>();
      const T* c_cur = c0.data<T>();
      if (record && T_ > 0) std::copy(c_cur, c_cur + BH, c_prev.data<T>() + d.time(0) * BH);
      for (std::int64_t s = 0; s < T_; ++s) {
        const std::int64_t t = d.time(s);
        const T* hp = h_cur;
        const T* cp = c_cur;
        T* c_next = cn.data<T>();  // c after this step: the next step's c_prev, or c_n
        if (record) {
          T* hs = h_prev.data<T>() + t * BH;
          std::copy(h_cur, h_cur + BH, hs);
          hp = hs;
          cp = c_prev.data<T>() + t * BH;
          if (s + 1 < T_) c_next = c_prev.data<T>() + d.time(s + 1) * BH;
        } else if (s + 1 < T_) {
          c_next = c_ws.data<T>();  // in place from the second step on (each element read, then written)
        }
        T* At = A + t * B * G;
        detail::gemm<T>(false, true, B, G, H, hp, H, w_hh.data<T>(), H, T(1), At, G);
        T* ht = out.data<T>() + t * BH;
        T* tc = tc_t.data<T>() + (record ? t * BH : 0);
        detail::lstm_step_forward<T>(B, H, At, cp, c_next, tc, ht);
        h_cur = ht;
        c_cur = c_next;
      }
      std::copy(h_cur, h_cur + BH, hn.data<T>());
      if (c_cur != cn.data<T>()) std::copy(c_cur, c_cur + BH, cn.data<T>());
    });
    if (record) {
      gates = A_t;
      tanh_c = tc_t;
      save_for_backward({x, w_ih, w_hh, h0, c0, b_ih, b_hh});
    }
    return {out, hn, cn};
  }

  Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<LstmLayerOp>>(*this, grads, saved()); }
  Tensors backward_formula(const Tensors& grads, const Tensors& s) { return lstm_backward_formula(d, s, grads, *this); }
  Tensors backward_kernel(const Tensors& grads, const Tensors& s) {
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 4 * H;
    const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2];
    const Dtype dt = x.dtype();
    Tensor dA = Tensor::empty({T_, B, G}, dt);
    Tensor dh = grads[1].clone_data(), dc = grads[2].clone_data();
    Tensor dx, dw_ih, dw_hh, db_ih, db_hh;
    const bool want_db = needs_input_grad(5) || needs_input_grad(6);
    std::vector<double> db_acc(want_db ? static_cast<std::size_t>(G) : 0, 0.0);
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dAp = dA.data<T>();
      T* dhp = dh.data<T>();
      T* dcp = dc.data<T>();
      const T* gout = grads[0].data<T>();
      for (std::int64_t st_ = T_ - 1; st_ >= 0; --st_) {
        const std::int64_t t = d.time(st_);
        const T* a = gates.data<T>() + t * B * G;
        const T* tc = tanh_c.data<T>() + t * BH;
        const T* cp = c_prev.data<T>() + t * BH;
        const T* go = gout + t * BH;
        T* da = dAp + t * B * G;
        detail::lstm_step_backward<T>(B, H, a, tc, cp, go, dhp, dcp, da);
        if (want_db) detail::rnn_add_rows<T>(da, B, G, db_acc.data());
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
      if (want_db) {
        if (needs_input_grad(5)) db_ih = to_tensor<T>(db_acc, dt);
        if (needs_input_grad(6)) db_hh = to_tensor<T>(db_acc, dt);
      }
    });
    return {dx, needs_input_grad(1) ? dh : Tensor(), needs_input_grad(2) ? dc : Tensor(), dw_ih, dw_hh, db_ih, db_hh};
  }
};

struct GruLayerOp : Function<GruLayerOp> {
  static constexpr const char* kName = "gru";
  static constexpr bool kDifferentiableBackward = true;  // gru_backward_formula
  Dims d;
  Tensor saved_gates, h_prev;  // (T, B, 4H): r, z, n and gh_n (hidden part of n with b_hh); (T, B, H)

  Tensors forward(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                  const Tensor& b_hh, const Dims& dims) {
    d = dims;
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 3 * H;
    const Dtype dt = x.dtype();
    // Without a graph nothing is kept for a backward (the gates of one step go to a workspace).
    bool record = false;
    for (std::size_t i = 0; i < 6; ++i) record = record || needs_input_grad(i);
    Tensor out = Tensor::empty({T_, B, H}, dt), hn = Tensor::empty({B, H}, dt);
    // Workspaces from the caching allocator (core/allocator.hpp): no fresh pages every step.
    Tensor xi_t = Tensor::empty({T_, B, G}, dt), gh_t = Tensor::empty({B, G}, dt);
    Tensor sg_t = Tensor::empty({record ? T_ : 1, B, 4 * H}, dt);
    if (record) h_prev = Tensor::empty({T_, B, H}, dt);
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* xi = xi_t.data<T>();
      T* gh = gh_t.data<T>();
      if (b_ih.defined()) detail::rnn_fill_bias_rows<T>(xi, T_ * B, G, b_ih.data<T>(), nullptr);
      detail::gemm<T>(false, true, T_ * B, G, I, x.data<T>(), I, w_ih.data<T>(), I, b_ih.defined() ? T(1) : T(0), xi,
                      G);
      const T* h_cur = h0.data<T>();
      for (std::int64_t s = 0; s < T_; ++s) {
        const std::int64_t t = d.time(s);
        const T* hp = h_cur;
        if (record) {
          T* hs = h_prev.data<T>() + t * BH;
          std::copy(h_cur, h_cur + BH, hs);
          hp = hs;
        }
        if (b_hh.defined()) detail::rnn_fill_bias_rows<T>(gh, B, G, b_hh.data<T>(), nullptr);
        detail::gemm<T>(false, true, B, G, H, hp, H, w_hh.data<T>(), H, b_hh.defined() ? T(1) : T(0), gh, G);
        const T* xt = xi + t * B * G;
        T* sg = sg_t.data<T>() + (record ? t * B * 4 * H : 0);
        T* ht = out.data<T>() + t * BH;
        detail::gru_step_forward<T>(B, H, xt, gh, hp, sg, ht);
        h_cur = ht;
      }
      std::copy(h_cur, h_cur + BH, hn.data<T>());
    });
    if (record) {
      saved_gates = sg_t;
      save_for_backward({x, w_ih, w_hh, h0, b_ih, b_hh});
    }
    return {out, hn};
  }

  Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<GruLayerOp>>(*this, grads, saved()); }
  Tensors backward_formula(const Tensors& grads, const Tensors& s) { return gru_backward_formula(d, s, grads, *this); }
  Tensors backward_kernel(const Tensors& grads, const Tensors& s) {
    const std::int64_t T_ = d.steps, B = d.batch, I = d.in, H = d.hidden, BH = B * H, G = 3 * H;
    const Tensor &x = s[0], &w_ih = s[1], &w_hh = s[2];
    const Dtype dt = x.dtype();
    Tensor dgi = Tensor::empty({T_, B, G}, dt), dgh = Tensor::empty({T_, B, G}, dt);
    Tensor dh = grads[1].clone_data();
    Tensor dx, dw_ih, dw_hh, db_ih, db_hh;
    std::vector<double> dbi_acc(needs_input_grad(4) ? static_cast<std::size_t>(G) : 0, 0.0);
    std::vector<double> dbh_acc(needs_input_grad(5) ? static_cast<std::size_t>(G) : 0, 0.0);
    dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dhp = dh.data<T>();
      const T* gout = grads[0].data<T>();
      for (std::int64_t st_ = T_ - 1; st_ >= 0; --st_) {
        const std::int64_t t = d.time(st_);
        const T* sg = saved_gates.data<T>() + t * B * 4 * H;
        const T* hp = h_prev.data<T>() + t * BH;
        const T* go = gout + t * BH;
        T* di = dgi.data<T>() + t * B * G;
        T* dhh = dgh.data<T>() + t * B * G;
        detail::gru_step_backward<T>(B, H, sg, hp, go, dhp, di, dhh);
        if (!dbi_acc.empty()) detail::rnn_add_rows<T>(di, B, G, dbi_acc.data());
        if (!dbh_acc.empty()) detail::rnn_add_rows<T>(dhh, B, G, dbh_acc.data());
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
      if (needs_input_grad(4)) db_ih = to_tensor<T>(dbi_acc, dt);
      if (needs_input_grad(5)) db_hh = to_tensor<T>(dbh_acc, dt);
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

Tensors lstm_backward_formula(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op) {
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

Tensors gru_backward_formula(const Dims& d, const Tensors& s, const Tensors& grads, const Node& op) {
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
