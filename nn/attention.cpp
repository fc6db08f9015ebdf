#include "xgrad/nn/attention.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/attention.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace {
constexpr const char* kMha = "MultiheadAttention";

// torch's out_proj is a NonDynamicallyQuantizableLinear (a Linear under another name, for quantization).
class NonDynamicallyQuantizableLinear : public Linear {
 public:
  NonDynamicallyQuantizableLinear(std::int64_t in, std::int64_t out, Generator& gen, bool bias, Dtype dtype)
      : Linear(in, out, gen, bias, dtype) {
    set_type_name("NonDynamicallyQuantizableLinear");
  }
};

// torch.nn.ModuleList: children "0", "1", ... (only for TransformerEncoder's `layers`).
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  using Module::add_child;
};

void check_options(const MultiheadAttentionOptions& o) {
  XGRAD_CHECK(o.embed_dim() > 0, "{}: option 'embed_dim' must be positive, got {}", kMha, o.embed_dim());
  XGRAD_CHECK(o.block_sparse().block >= 0 && (o.block_sparse().block == 0 || o.block_sparse().layout),
              "{}: option 'block_sparse' needs a block >= 1 and a layout function (block {}, layout {})", kMha,
              o.block_sparse().block, o.block_sparse().layout ? "set" : "unset");
  XGRAD_CHECK(o.num_heads() > 0, "{}: option 'num_heads' must be positive, got {}", kMha, o.num_heads());
  XGRAD_CHECK(o.embed_dim() % o.num_heads() == 0, "{}: option 'embed_dim' = {} must be divisible by 'num_heads' = {}",
              kMha, o.embed_dim(), o.num_heads());
  XGRAD_CHECK(o.kdim() >= 0 && o.vdim() >= 0, "{}: options 'kdim' = {} and 'vdim' = {} must be >= 0 (0 = embed_dim)",
              kMha, o.kdim(), o.vdim());
  // the parameters' sizes, before any allocation: in_proj (3E, E) or q/k/v (E, E), (E, kdim), (E, vdim),
  // out_proj (E, E): a size this machine cannot hold is refused naming the option
  const std::int64_t E = o.embed_dim(), kd = o.kdim() > 0 ? o.kdim() : E, vd = o.vdim() > 0 ? o.vdim() : E;
  const Shape shapes[] = {{checked_mul(3, E, kMha, "embed_dim"), E}, {E, kd}, {E, vd}};
  for (const Shape& s : shapes)
    check_host_memory(checked_nbytes(checked_numel(s, kMha, "embed_dim"), dtype_size(o.dtype()), kMha, "embed_dim"),
                      kMha, "embed_dim");
  XGRAD_CHECK(o.dropout() >= 0 && o.dropout() <= 1, "{}: dropout must be in [0, 1], got {}", kMha, o.dropout());
  XGRAD_CHECK(!o.add_bias_kv() && !o.add_zero_attn(), "{}: add_bias_kv and add_zero_attn are not implemented", kMha);
  XGRAD_CHECK(is_floating_point(o.dtype()), "{}: dtype must be float32 or float64, got {}", kMha, o.dtype());
}

// A mask of MultiheadAttention (bool: true = not allowed) as an additive mask of `dtype`.
Tensor additive(const Tensor& mask, const char* name, Dtype dtype) {
  if (mask.dtype() == kBool)
    return masked_fill(Tensor::zeros(mask.shape(), dtype), mask, -std::numeric_limits<double>::infinity());
  XGRAD_CHECK(mask.dtype() == dtype, "{}: argument '{}' must be bool or of the query's dtype ({}), got {} {}", kMha,
              name, dtype, mask.dtype(), shape_str(mask.shape()));
  return mask;
}
}  // namespace

// ---- MultiheadAttention --------------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& options, Generator& gen)
    : Module(kMha), options_(options) {
  check_options(options_);
  const std::int64_t E = options_.embed_dim();
  if (options_.kdim() == 0) options_.kdim(E);
  if (options_.vdim() == 0) options_.vdim(E);
  const Dtype dt = options_.dtype();
  const bool same = options_.kdim() == E && options_.vdim() == E;
  // torch's registration order: the in-projection weight(s), in_proj_bias, out_proj.
  if (same) {
    Tensor w = Tensor::empty({3 * E, E}, dt);
    init::xavier_uniform_(w, gen);
    in_proj_weight_ = register_parameter("in_proj_weight", w);
  } else {
    Tensor wq = Tensor::empty({E, E}, dt), wk = Tensor::empty({E, options_.kdim()}, dt),
           wv = Tensor::empty({E, options_.vdim()}, dt);
    init::xavier_uniform_(wq, gen);
    init::xavier_uniform_(wk, gen);
    init::xavier_uniform_(wv, gen);
    q_proj_weight_ = register_parameter("q_proj_weight", wq);
    k_proj_weight_ = register_parameter("k_proj_weight", wk);
    v_proj_weight_ = register_parameter("v_proj_weight", wv);
  }
  if (options_.bias()) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * E}, dt));
  out_proj_ =
      register_module("out_proj", std::static_pointer_cast<Linear>(std::make_shared<NonDynamicallyQuantizableLinear>(
                                      E, E, gen, options_.bias(), dt)));
  if (options_.bias()) {
    NoGradGuard guard;
    Tensor b = out_proj_->bias();
    b.zero_();
  }
  gen_ = mask_generator(gen);
}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& options, std::optional<std::uint64_t> seed)
    : MultiheadAttention(options, SeedOrDefault(seed)) {}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const Tensor& key_padding_mask, bool need_weights,
                                                      const Tensor& attn_mask, bool average_attn_weights) {
  const std::int64_t E = options_.embed_dim(), H = options_.num_heads(), hd = E / H;
  const std::pair<const Tensor*, const char*> named[] = {{&query, "query"}, {&key, "key"}, {&value, "value"}};
  for (const auto& [t, name] : named) {
    XGRAD_CHECK(t->defined(), "{}: argument '{}' is an undefined tensor", kMha, name);
    XGRAD_CHECK(t->dim() == 2 || t->dim() == 3,
                "{}: argument '{}' must be 3-d (batched) or 2-d (unbatched), got shape {}", kMha, name,
                shape_str(t->shape()));
    XGRAD_CHECK(t->dtype() == query.dtype() && is_floating_point(t->dtype()),
                "{}: arguments 'query', 'key' and 'value' must have one floating dtype, got {} {} for '{}' and {} {} "
                "for 'query'",
                kMha, t->dtype(), shape_str(t->shape()), name, query.dtype(), shape_str(query.shape()));
  }
  const bool batched = query.dim() == 3;
  XGRAD_CHECK(key.dim() == query.dim() && value.dim() == query.dim(),
              "{}: 'query' {}, 'key' {} and 'value' {} must all be batched (3-d) or all unbatched (2-d)", kMha,
              shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape()));
  // (N, L, E) layout inside.
  const auto to_nle = [&](const Tensor& t) {
    if (!batched) return unsqueeze(t, 0);
    return options_.batch_first() ? t : transpose(t, 0, 1);
  };
  const Tensor q3 = to_nle(query), k3 = to_nle(key), v3 = to_nle(value);
  const std::int64_t N = q3.size(0), L = q3.size(1), S = k3.size(1);
  XGRAD_CHECK(q3.size(2) == E, "{}: argument 'query' of shape {} must have embed_dim = {} features", kMha,
              shape_str(query.shape()), E);
  XGRAD_CHECK(k3.size(0) == N && k3.size(2) == options_.kdim(),
              "{}: argument 'key' of shape {} must have the batch size of 'query' {} and kdim = {} features", kMha,
              shape_str(key.shape()), shape_str(query.shape()), options_.kdim());
  XGRAD_CHECK(v3.size(0) == N && v3.size(1) == S && v3.size(2) == options_.vdim(),
              "{}: argument 'value' of shape {} must have the batch size of 'query' {}, the length of 'key' {} and "
              "vdim = {} features",
              kMha, shape_str(value.shape()), shape_str(query.shape()), shape_str(key.shape()), options_.vdim());

  // Masks as one additive mask broadcastable to (N, H, L, S).
  Tensor mask;
  if (attn_mask.defined()) {
    const Shape want2{L, S}, want3{batched ? N * H : H, L, S};
    XGRAD_CHECK(attn_mask.shape() == want2 || attn_mask.shape() == want3,
                "{}: argument 'attn_mask' of shape {} must be {} or {} (query {}, key {}, {} heads)", kMha,
                shape_str(attn_mask.shape()), shape_str(want2), shape_str(want3), shape_str(query.shape()),
                shape_str(key.shape()), H);
    mask = additive(attn_mask, "attn_mask", query.dtype());
    if (mask.dim() == 3) mask = reshape(mask, {N, H, L, S});
  }
  if (key_padding_mask.defined()) {
    const Shape want = batched ? Shape{N, S} : Shape{S};
    XGRAD_CHECK(key_padding_mask.shape() == want,
                "{}: argument 'key_padding_mask' of shape {} must be {} (query {}, key {})", kMha,
                shape_str(key_padding_mask.shape()), shape_str(want), shape_str(query.shape()), shape_str(key.shape()));
    Tensor kpm = reshape(additive(key_padding_mask, "key_padding_mask", query.dtype()), {N, 1, 1, S});
    mask = mask.defined() ? add(mask, kpm) : kpm;
  }

  const bool same = in_proj_weight_.defined();
  const auto w_of = [&](int i) {
    if (!same) return i == 0 ? q_proj_weight_ : i == 1 ? k_proj_weight_ : v_proj_weight_;
    return slice(in_proj_weight_, 0, i * E, (i + 1) * E);
  };
  const auto b_of = [&](int i) {
    return in_proj_bias_.defined() ? slice(in_proj_bias_, 0, i * E, (i + 1) * E) : Tensor();
  };
  // (N, T, E) -> (N, H, T, hd)
  const auto heads = [&](const Tensor& x, int i) {
    const Tensor y = xgrad::linear(x, w_of(i), b_of(i));
    return permute(reshape(y, {N, y.size(1), H, hd}), {0, 2, 1, 3});
  };
  const Tensor q = heads(q3, 0), k = heads(k3, 1), v = heads(v3, 2);
  const double p = is_training() ? options_.dropout() : 0.0;
  Tensor out, weights;
  const AttentionBlockSparse& bs = options_.block_sparse();
  if (bs.block > 0) {
    XGRAD_CHECK(!need_weights && !attn_mask.defined() && !key_padding_mask.defined(),
                "{}: a block-sparse layout (block {}) returns no weights and takes no masks: call with "
                "need_weights = false and without attn_mask and key_padding_mask (need_weights {}, attn_mask {}, "
                "key_padding_mask {})",
                kMha, bs.block, need_weights, attn_mask.defined() ? shape_str(attn_mask.shape()) : "none",
                key_padding_mask.defined() ? shape_str(key_padding_mask.shape()) : "none");
    const std::int64_t nq = (L + bs.block - 1) / bs.block, nk = (S + bs.block - 1) / bs.block;
    out = block_sparse_attention(q, k, v, bs.layout(nq, nk), bs.block, p, bs.causal, std::nullopt, &generator());
  } else if (need_weights) {
    const Tensors r =
        xgrad::detail::scaled_dot_product_attention_with_weights(q, k, v, mask, p, false, std::nullopt, &generator());
    out = r[0];
    weights = r[1];
    if (average_attn_weights) weights = mean(weights, {1});
    if (!batched) weights = squeeze(weights, 0);
  } else {
    out = scaled_dot_product_attention(q, k, v, mask, p, false, std::nullopt, &generator());
  }
  out = (*out_proj_)(reshape(permute(out, {0, 2, 1, 3}), {N, L, E}));
  if (!batched)
    out = squeeze(out, 0);
  else if (!options_.batch_first())
    out = transpose(out, 0, 1);
  return {out, weights};
}

Tensor generate_square_subsequent_mask(std::int64_t sz, Dtype dtype) {
  XGRAD_CHECK(sz >= 0, "generate_square_subsequent_mask: argument 'sz' must be >= 0, got {}", sz);
  XGRAD_CHECK(is_floating_point(dtype),
              "generate_square_subsequent_mask: argument 'dtype' must be float32 or float64, got {}", dtype);
  std::vector<double> m(static_cast<std::size_t>(sz * sz), 0.0);
  for (std::int64_t l = 0; l < sz; ++l)
    for (std::int64_t s = l + 1; s < sz; ++s)
      m[static_cast<std::size_t>(l * sz + s)] = -std::numeric_limits<double>::infinity();
  return Tensor::from_vector(m, {sz, sz}, dtype);
}

// ---- TransformerEncoderLayer ---------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& options, Generator& gen)
    : UnaryModule("TransformerEncoderLayer"), options_(options) {
  const auto& o = options_;
  constexpr const char* op = "TransformerEncoderLayer";
  XGRAD_CHECK(o.d_model() > 0 && o.nhead() > 0 && o.d_model() % o.nhead() == 0,
              "{}: d_model = {} must be positive and divisible by nhead = {}", op, o.d_model(), o.nhead());
  XGRAD_CHECK(o.dim_feedforward() > 0, "{}: dim_feedforward must be positive, got {}", op, o.dim_feedforward());
  XGRAD_CHECK(o.activation() == "relu" || o.activation() == "gelu",
              "{}: activation must be \"relu\" or \"gelu\", got \"{}\"", op, o.activation());
  XGRAD_CHECK(o.dropout() >= 0 && o.dropout() <= 1, "{}: dropout must be in [0, 1], got {}", op, o.dropout());
  XGRAD_CHECK(std::isfinite(o.layer_norm_eps()) && o.layer_norm_eps() >= 0,
              "{}: layer_norm_eps must be finite and >= 0, got {}", op, o.layer_norm_eps());
  const Dtype dt = o.dtype();
  self_attn = register_module("self_attn",
                              std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(o.d_model(), o.nhead())
                                                                       .dropout(o.dropout())
                                                                       .batch_first(o.batch_first())
                                                                       .dtype(dt)
                                                                       .block_sparse(o.block_sparse()),
                                                                   gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model(), o.dim_feedforward(), gen, true, dt));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout(), gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward(), o.d_model(), gen, true, dt));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model()}, o.layer_norm_eps(), true, dt));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model()}, o.layer_norm_eps(), true, dt));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout(), gen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout(), gen));
}

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& options,
                                                 std::optional<std::uint64_t> seed)
    : TransformerEncoderLayer(options, SeedOrDefault(seed)) {}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  const auto sa = [&](const Tensor& x) {
    return (*dropout1)(self_attn->forward(x, x, x, src_key_padding_mask, false, src_mask).first);
  };
  const auto ff = [&](const Tensor& x) {
    const Tensor h = (*linear1)(x);
    return (*dropout2)((*linear2)((*dropout)(options_.activation() == "gelu" ? gelu(h) : relu(h))));
  };
  Tensor x = src;
  if (options_.norm_first()) {
    x = add(x, sa((*norm1)(x)));
    x = add(x, ff((*norm2)(x)));
  } else {
    x = (*norm1)(add(x, sa(x)));
    x = (*norm2)(add(x, ff(x)));
  }
  return x;
}

// ---- TransformerEncoder --------------------------------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : UnaryModule("TransformerEncoder"), norm_(std::move(norm)) {
  XGRAD_CHECK(num_layers >= 1, "TransformerEncoder: num_layers must be >= 1, got {}", num_layers);
  auto list = register_module("layers", std::make_shared<ModuleList>());
  const auto source = layer.named_parameters();
  for (std::int64_t i = 0; i < num_layers; ++i) {
    // A copy of `layer` (torch deep-copies it): the same options and parameter values; its dropouts
    // draw from the default generator as the layer's do, or from generators seeded per copy.
    Generator own(static_cast<std::uint64_t>(i + 1));
    const bool shared = &layer.dropout->generator() == &default_generator();
    auto copy = std::make_shared<TransformerEncoderLayer>(layer.options(), shared ? default_generator() : own);
    const auto params = copy->named_parameters();
    {
      NoGradGuard guard;
      for (std::size_t j = 0; j < params.size(); ++j) {
        Tensor p = params[j].second;
        p.copy_(source[j].second);
      }
    }
    copy->train(layer.is_training());
    list->add_child(std::to_string(i), copy);
    layers_.push_back(copy);
  }
  if (norm_) register_module("norm", norm_);
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  for (auto& layer : layers_) x = layer->forward(x, mask, src_key_padding_mask);
  if (norm_) x = (*norm_)(x);
  return x;
}

}  // namespace xgrad::nn
