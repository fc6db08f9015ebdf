#include "xgrad/ops/attention.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/attention_kernels.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"

namespace xgrad {

namespace {

// Note [Attention kernel]: scaled_dot_product_attention is one op with a hand-written backward
// instead of a composite of matmul, add, softmax, dropout and matmul: the composite records five
// nodes and keeps the scores, the softmax and the dropped weights alive. The batch dims are
// flattened to B independent problems. The op runs one of two sets of loops
// (ops/kernels/attention_kernels.cpp), both with their products through detail::blas::gemm
// (single-threaded BLAS inside a task, so a task's bits do not depend on which thread runs it):
// - fused (the default), FlashAttention-2's scheme: no (L x S) buffer exists. The forward runs one
//   task per (problem, query tile of kAttentionTile rows); it walks the key tiles in order, masks
//   each tile's scores scale q k^T, and keeps per row the running max m and sum l of exp(a - m) and
//   the output accumulator, both rescaled by exp(m_old - m_new) when m grows; at the end the
//   output is divided by l and lse = m + log(l) is saved with the output (O(B L) besides them).
//   The backward recomputes each tile's P = exp(a - lse) from q, k and the mask; with
//   D = rowsum(dO * O) (which equals rowsum(dP * P), with or without dropout), dS = P * (dP - D).
//   dV = sum of Pᵀ dO and dK = scale sum of dSᵀ Q run one task per (problem, key tile), over the
//   query tiles in order; dQ = scale sum of dS K runs one task per (problem, query tile), over the
//   key tiles in order, recomputing P and dP a second time rather than sharing dQ between tasks
//   (no atomics: every task owns the rows it writes, so results are the same bits at any thread
//   count). Causal masking skips the tiles that lie wholly above the diagonal. A float mask that
//   requires grad gets dM = dS summed over its broadcast dims: the dQ tasks, which compute each dS
//   tile once, write it into a (B, L, S) buffer that exists during the backward only (the size of
//   an unbroadcast mask's gradient), reduced afterwards by xgrad::sum (itself deterministic).
// - materialising: the (L x S) scores and P per problem (one task per problem), P saved for the
//   backward, the float mask's gradient reduced as above. It runs when the weights are an output
//   (scaled_dot_product_attention_with_weights: the modules' need_weights).
// Both give the same values up to rounding (the fused sums run in another order).
//
// Note [Attention dropout]: the dropout mask is never stored. A call reserves one Philox block per
// four entries of the (B, L, S) weights from the generator, once, before the parallel part (Note
// [Counter-based random numbers]); entry i = (b L + l) S + s is kept when word i % 4 of block
// first + i / 4 is >= ceil(p 2^32), i.e. with probability 1 - p up to 2^-32. Any kernel redraws an
// entry's decision from (key, first, i) alone: the forward's tiles, the backward's tiles, the
// materialising loops and the create_graph formula all agree, at any thread count.
constexpr const char* kOp = "scaled_dot_product_attention";

struct Geometry {
  std::int64_t b = 1, l = 0, s = 0, e = 0, ev = 0;
  Shape batch;
};

Geometry check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                      bool is_causal, std::optional<double> scale, const char* op = kOp) {
  const std::pair<const Tensor*, const char*> named[] = {{&q, "query"}, {&k, "key"}, {&v, "value"}};
  for (const auto& [t, name] : named) {
    XGRAD_CHECK(t->defined(), "{}: argument '{}' is an undefined tensor", op, name);
    XGRAD_CHECK(t->dim() >= 2, "{}: argument '{}' must have at least 2 dims (..., length, features), got shape {}", op,
                name, shape_str(t->shape()));
    XGRAD_CHECK(is_floating_point(t->dtype()), "{}: argument '{}' must be float32 or float64, got {} {}", op, name,
                t->dtype(), shape_str(t->shape()));
  }
  XGRAD_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
              "{}: arguments 'query', 'key' and 'value' must have one dtype, got {} {}, {} {} and {} {}", op, q.dtype(),
              shape_str(q.shape()), k.dtype(), shape_str(k.shape()), v.dtype(), shape_str(v.shape()));
  Geometry g;
  const std::int64_t nb = q.dim() - 2;
  g.batch.assign(q.shape().begin(), q.shape().begin() + nb);
  for (std::int64_t d : g.batch) g.b *= d;
  g.l = q.size(-2);
  g.e = q.size(-1);
  const auto batch_of = [nb](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  XGRAD_CHECK(k.dim() == q.dim() && batch_of(k) == g.batch && k.size(-1) == g.e,
              "{}: argument 'key' has shape {} but must be (..., S, E) with the batch dims and E of 'query' {}", op,
              shape_str(k.shape()), shape_str(q.shape()));
  g.s = k.size(-2);
  XGRAD_CHECK(v.dim() == q.dim() && batch_of(v) == g.batch && v.size(-2) == g.s,
              "{}: argument 'value' has shape {} but must be (..., S, Ev) with the batch dims of 'query' {} and the S "
              "of 'key' {}",
              op, shape_str(v.shape()), shape_str(q.shape()), shape_str(k.shape()));
  g.ev = v.size(-1);
  if (mask.defined()) {
    XGRAD_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(),
                "{}: argument 'attn_mask' must be bool or of the dtype of 'query' ({}), got {} {}", op, q.dtype(),
                mask.dtype(), shape_str(mask.shape()));
    Shape full = g.batch;
    full.push_back(g.l);
    full.push_back(g.s);
    bool ok = mask.dim() <= static_cast<std::int64_t>(full.size());
    for (std::int64_t i = 1; ok && i <= mask.dim(); ++i) {
      const std::int64_t m = mask.shape()[mask.shape().size() - i], f = full[full.size() - i];
      ok = m == f || m == 1;
    }
    XGRAD_CHECK(
        ok, "{}: argument 'attn_mask' of shape {} is not broadcastable to the attention shape {} (query {}, key {})",
        op, shape_str(mask.shape()), shape_str(full), shape_str(q.shape()), shape_str(k.shape()));
    XGRAD_CHECK(!is_causal, "{}: argument 'attn_mask' (shape {}) must be undefined when 'is_causal' is true (as torch)",
                op, shape_str(mask.shape()));
  }
  XGRAD_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "{}: argument 'dropout_p' must be in [0, 1], got {}", op,
              dropout_p);
  XGRAD_CHECK(!scale || std::isfinite(*scale), "{}: argument 'scale' must be finite, got {}", op, scale ? *scale : 0.0);
  return g;
}

struct AttentionOp : Function<AttentionOp> {
  static constexpr const char* kName = kOp;
  static constexpr bool kDifferentiableBackward = true;  // backward_formula (Note [Fused ops])
  Geometry geo;
  double scale = 1, dropout_p = 0;
  bool causal = false, with_weights = false;
  Shape mask_shape;
  // The fused (tiled) kernels ran: saved are the output and lse, the row logsumexp (B, L), not P.
  bool fused = false;
  Tensor lse;
  // The dropout's draw (Note [Attention dropout]): the stream and first block reserved by this call.
  bool dropout = false;
  std::uint64_t drop_key = 0, drop_first = 0, drop_threshold = 0;

  // Block-sparse attention: the layout over the (L / block) x (S / block) grid, or none.
  std::optional<CsrPattern> layout;
  std::int64_t block = 0;

  // Offsets of the mask entry (b, 0, 0) per problem b, and its strides along L and S (0 = broadcast).
  std::vector<std::int64_t> mask_base;
  std::int64_t mask_sl = 0, mask_ss = 0;

  void plan_mask(const Tensor& mask) {
    mask_base.assign(static_cast<std::size_t>(geo.b), 0);
    if (!mask.defined()) return;
    mask_shape = mask.shape();
    const auto nb = static_cast<std::int64_t>(geo.batch.size());
    const std::int64_t rank = nb + 2, off = rank - mask.dim();
    std::vector<std::int64_t> stride(static_cast<std::size_t>(rank), 0);
    std::int64_t st = 1;
    for (std::int64_t d = rank - 1; d >= off; --d) {
      const std::int64_t size = mask.shape()[static_cast<std::size_t>(d - off)];
      stride[static_cast<std::size_t>(d)] = size == 1 ? 0 : st;
      st *= size;
    }
    mask_sl = stride[static_cast<std::size_t>(nb)];
    mask_ss = stride[static_cast<std::size_t>(nb + 1)];
    for (std::int64_t b = 0; b < geo.b; ++b) {
      std::int64_t rest = b, base = 0;
      for (std::int64_t d = nb - 1; d >= 0; --d) {
        const std::int64_t size = geo.batch[static_cast<std::size_t>(d)];
        base += (rest % size) * stride[static_cast<std::size_t>(d)];
        rest /= size;
      }
      mask_base[static_cast<std::size_t>(b)] = base;
    }
  }

  detail::AttentionSizes sizes() const { return {geo.b, geo.l, geo.s, geo.e, geo.ev}; }

  // The factor of a kept weight, 1 / (1 - p) (0 when p = 1: nothing is kept).
  template <class T>
  T keep_scale() const {
    return dropout_p < 1.0 ? static_cast<T>(1.0 / (1.0 - dropout_p)) : T(0);
  }

  template <class T>
  detail::AttentionDropout<T> drop() const {
    return {dropout, drop_key, drop_first, drop_threshold, keep_scale<T>()};
  }

  template <class T>
  detail::AttentionMask<T> kernel_mask(const Tensor& mask) const {
    const bool bool_mask = mask.defined() && mask.dtype() == kBool;
    detail::AttentionMask<T> m;
    m.bool_mask = bool_mask ? mask.data<bool>() : nullptr;
    m.float_mask = mask.defined() && !bool_mask ? mask.data<T>() : nullptr;
    m.base = mask_base.data();
    m.row_stride = mask_sl;
    m.col_stride = mask_ss;
    m.causal = causal;
    if (layout) {
      const auto& t = layout->transposed();
      m.layout_crow = layout->crow().data();
      m.layout_col = layout->col().data();
      m.layout_tcrow = t.crow().data();
      m.layout_tcol = t.col().data();
      m.tile = block;
    }
    return m;
  }

  Tensors forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p_,
                  bool is_causal, std::optional<double> scale_, Generator* gen, bool with_weights_,
                  const CsrPattern* layout_ = nullptr, std::int64_t block_ = 0) {
    geo = check_inputs(q, k, v, mask, dropout_p_, is_causal, scale_);
    if (layout_ != nullptr) {
      layout = *layout_;
      block = block_;
    }
    dropout_p = dropout_p_;
    causal = is_causal;
    with_weights = with_weights_;
    scale = scale_ ? *scale_ : 1.0 / std::sqrt(static_cast<double>(geo.e));
    if (geo.e == 0 && !scale_) scale = 1.0;  // the scores are empty sums (0) whatever the scale
    plan_mask(mask);
    const std::int64_t B = geo.b, L = geo.l, S = geo.s, Ev = geo.ev;
    Shape out_shape = geo.batch, p_shape = geo.batch;
    out_shape.insert(out_shape.end(), {L, Ev});
    p_shape.insert(p_shape.end(), {L, S});
    Tensor out = Tensor::empty(out_shape, q.dtype());
    dropout = dropout_p > 0.0;
    if (dropout) {
      // One reservation of a block per 4 entries of (B, L, S), in whole groups as a bulk draw
      // (Note [Counter-based random numbers]); the kernels compute each entry's word from its index.
      const std::uint64_t entries = static_cast<std::uint64_t>(B * L * S), lanes = detail::kPhiloxLanes;
      const std::uint64_t blocks = ((entries + 3) / 4 + lanes - 1) / lanes * lanes;
      const Generator::Blocks r = (gen != nullptr ? *gen : default_generator()).reserve(blocks);
      drop_key = r.key;
      drop_first = r.first;
      drop_threshold =
          dropout_p >= 1.0 ? std::uint64_t{1} << 32 : static_cast<std::uint64_t>(std::ceil(std::ldexp(dropout_p, 32)));
    }
    const bool need_grad = needs_input_grad(0) || needs_input_grad(1) || needs_input_grad(2) || needs_input_grad(3);
    // The fused kernels unless the weights are an output.
    fused = !with_weights;
    if (fused) {
      lse = Tensor::empty({B * L}, q.dtype());
      dispatch(q.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        detail::attention_fused_forward<T>(sizes(), q.data<T>(), k.data<T>(), v.data<T>(), static_cast<T>(scale),
                                           kernel_mask<T>(mask), drop<T>(), out.data<T>(), lse.data<T>());
      });
      if (need_grad) save_for_backward({q, k, v, out, mask});
      return {out};
    }
    Tensor p = Tensor::empty(p_shape, q.dtype());
    Tensor pd = dropout ? Tensor::empty(p_shape, q.dtype()) : p;  // P' = P * D / (1 - p)
    dispatch(q.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::attention_forward<T>(sizes(), q.data<T>(), k.data<T>(), v.data<T>(), static_cast<T>(scale),
                                   kernel_mask<T>(mask), drop<T>(), p.data<T>(), pd.data<T>(), out.data<T>());
    });
    if (need_grad) save_for_backward({q, k, v, p, mask});
    if (with_weights) return {out, pd};
    return {out};
  }

  // The float mask's gradient: dA summed over the dims the mask was broadcast along (in
  // xgrad::sum's fixed order), in the mask's shape.
  Tensor mask_grad(const Tensor& da_full) const {
    Shape p_shape = geo.batch;
    p_shape.insert(p_shape.end(), {geo.l, geo.s});
    const auto rank = static_cast<std::int64_t>(p_shape.size()),
               off = rank - static_cast<std::int64_t>(mask_shape.size());
    std::vector<std::int64_t> axes;
    for (std::int64_t d = 0; d < rank; ++d)
      if (d < off || (mask_shape[static_cast<std::size_t>(d - off)] == 1 && p_shape[static_cast<std::size_t>(d)] != 1))
        axes.push_back(d);
    return reshape(axes.empty() ? da_full : sum(da_full, axes, true), mask_shape);
  }

  // Note [Create graph]: the backward of a create_graph run, written with public differentiable
  // ops. P is recomputed from the saved q, k and mask (the saved P has no history, and P depends
  // on q, k and the float mask; the fused path saves no P), and the dropout keep mask is redrawn
  // from the call's reservation as a constant:
  //   P = softmax(scale q k^T + M), P' = P * D / (1 - p), dV = P'^T dO, dP' = dO V^T (+ dW),
  //   dP = dP' * D / (1 - p), dA = P * (dP - sum(dP * P, -1)), dQ = scale dA K, dK = scale dA^T Q,
  //   dM = dA summed over the mask's broadcast dims.
  Tensors backward_formula(const Tensors& grads, const Tensors& sv) const {
    const Tensor &q = sv[0], &k = sv[1], &v = sv[2], &mask = sv[4];
    const Tensor& g = grads[0];
    const Tensor gw = with_weights && grads.size() > 1 ? grads[1] : Tensor();
    const std::int64_t L = geo.l, S = geo.s;
    const double ninf = -std::numeric_limits<double>::infinity();
    Tensor a = mul(matmul(q, transpose(k, -2, -1)), scale);
    if (mask.defined() && mask.dtype() == kBool) a = masked_fill(a, logical_not(mask), ninf);
    if (mask.defined() && mask.dtype() != kBool) a = add(a, mask);
    if (causal) {
      Tensor upper = Tensor::empty({L, S}, kBool);
      detail::attention_causal_mask(L, S, upper.data<bool>());
      a = masked_fill(a, upper, ninf);
    }
    if (layout) {
      Tensor kept = Tensor::empty({L, S}, kBool);
      detail::attention_layout_mask(L, S, block, layout->crow().data(), layout->col().data(), kept.data<bool>());
      a = masked_fill(a, logical_not(kept), ninf);
    }
    const Tensor p = softmax(a, -1);
    Tensor drop;  // D / (1 - p), a constant
    if (dropout) {
      drop = Tensor::empty(p.shape(), p.dtype());
      dispatch(p.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        detail::attention_dropout_factor<T>(sizes(), this->drop<T>(), drop.data<T>());
      });
    }
    Tensor dq, dk, dv, dm;
    if (needs_input_grad(2)) dv = matmul(transpose(drop.defined() ? mul(p, drop) : p, -2, -1), g);
    if (needs_input_grad(0) || needs_input_grad(1) || needs_input_grad(3)) {
      Tensor dp = matmul(g, transpose(v, -2, -1));
      if (gw.defined()) dp = add(dp, gw);
      if (drop.defined()) dp = mul(dp, drop);
      const Tensor da = mul(p, sub(dp, sum(mul(dp, p), {p.dim() - 1}, /*keepdim=*/true)));
      if (needs_input_grad(0)) dq = mul(matmul(da, k), scale);
      if (needs_input_grad(1)) dk = mul(matmul(transpose(da, -2, -1), q), scale);
      if (needs_input_grad(3)) dm = mask_grad(da);
    }
    return {dq, dk, dv, dm};
  }

  Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<AttentionOp>>(*this, grads, saved()); }
  Tensors backward_kernel(const Tensors& grads, const Tensors& sv) {
    const Tensor &q = sv[0], &k = sv[1], &v = sv[2], &p = sv[3];
    const Tensor& g = grads[0];
    if (fused) return fused_backward(g, sv);
    const Tensor gw = with_weights && grads.size() > 1 ? grads[1] : Tensor();
    const bool need_q = needs_input_grad(0), need_k = needs_input_grad(1), need_v = needs_input_grad(2),
               need_m = needs_input_grad(3);
    const std::int64_t L = geo.l, S = geo.s;
    Tensor dq = need_q ? Tensor::empty(q.shape(), q.dtype()) : Tensor();
    Tensor dk = need_k ? Tensor::empty(k.shape(), k.dtype()) : Tensor();
    Tensor dv = need_v ? Tensor::empty(v.shape(), v.dtype()) : Tensor();
    Shape p_shape = geo.batch;
    p_shape.insert(p_shape.end(), {L, S});
    Tensor da_full = need_m ? Tensor::empty(p_shape, q.dtype()) : Tensor();
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::attention_backward<T>(sizes(), q.data<T>(), k.data<T>(), v.data<T>(), p.data<T>(), static_cast<T>(scale),
                                    drop<T>(), g.data<T>(), gw.defined() ? gw.data<T>() : nullptr,
                                    need_q ? dq.data<T>() : nullptr, need_k ? dk.data<T>() : nullptr,
                                    need_v ? dv.data<T>() : nullptr, need_m ? da_full.data<T>() : nullptr);
    });
    return {dq, dk, dv, need_m ? mask_grad(da_full) : Tensor()};
  }

  // The fused backward: the tiles recomputed from the saved output (sv[3]) and lse. A float mask's
  // gradient is dS (B, L, S), written tile by tile, summed over the mask's broadcast dims.
  Tensors fused_backward(const Tensor& g, const Tensors& sv) {
    const Tensor &q = sv[0], &k = sv[1], &v = sv[2], &out = sv[3], &mask = sv[4];
    const bool need_q = needs_input_grad(0), need_k = needs_input_grad(1), need_v = needs_input_grad(2),
               need_m = needs_input_grad(3);
    Tensor dq = need_q ? Tensor::empty(q.shape(), q.dtype()) : Tensor();
    Tensor dk = need_k ? Tensor::empty(k.shape(), k.dtype()) : Tensor();
    Tensor dv = need_v ? Tensor::empty(v.shape(), v.dtype()) : Tensor();
    Shape p_shape = geo.batch;
    p_shape.insert(p_shape.end(), {geo.l, geo.s});
    Tensor ds_full = need_m ? Tensor::empty(p_shape, q.dtype()) : Tensor();
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::attention_fused_backward<T>(sizes(), q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), lse.data<T>(),
                                          static_cast<T>(scale), kernel_mask<T>(mask), drop<T>(), g.data<T>(),
                                          need_q ? dq.data<T>() : nullptr, need_k ? dk.data<T>() : nullptr,
                                          need_v ? dv.data<T>() : nullptr, need_m ? ds_full.data<T>() : nullptr);
    });
    return {dq, dk, dv, need_m ? mask_grad(ds_full) : Tensor()};
  }
};

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* generator) {
  check_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale);
  return apply<AttentionOp>(query, key, value, attn_mask, dropout_p, is_causal, scale, generator, false)[0];
}

Tensor block_sparse_attention(const Tensor& query, const Tensor& key, const Tensor& value, const CsrPattern& layout,
                              std::int64_t block, double dropout_p, bool is_causal, std::optional<double> scale,
                              Generator* generator) {
  constexpr const char* op = "block_sparse_attention";
  const Geometry g = check_inputs(query, key, value, Tensor(), dropout_p, is_causal, scale, op);
  XGRAD_CHECK(block >= 1, "{}: argument 'block' is {} but must be >= 1", op, block);
  const std::int64_t rows = g.l / block + (g.l % block != 0 ? 1 : 0), cols = g.s / block + (g.s % block != 0 ? 1 : 0);
  XGRAD_CHECK(layout.rows() == rows && layout.cols() == cols,
              "{}: argument 'layout' is a ({}, {}) grid but query {} and key {} in blocks of {} make ({}, {})", op,
              layout.rows(), layout.cols(), shape_str(query.shape()), shape_str(key.shape()), block, rows, cols);
  return apply<AttentionOp>(query, key, value, Tensor(), dropout_p, is_causal, scale, generator, false, &layout,
                            block)[0];
}

namespace detail {
Tensors scaled_dot_product_attention_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                                  const Tensor& attn_mask, double dropout_p, bool is_causal,
                                                  std::optional<double> scale, Generator* generator) {
  check_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale);
  return apply<AttentionOp>(query, key, value, attn_mask, dropout_p, is_causal, scale, generator, true);
}
}  // namespace detail

}  // namespace xgrad
