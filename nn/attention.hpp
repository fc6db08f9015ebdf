#pragma once
// nn::MultiheadAttention, nn::TransformerEncoderLayer and nn::TransformerEncoder, like torch's
// (PyTorch 1.13 semantics, parameter names and defaults, so that state_dicts carry over).
//
//   nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(64, 8).batch_first(true));
//   auto [y, w] = mha.forward(x, x, x);                      // (N, L, 64) -> (N, L, 64), w (N, L, L)
//   nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(64, 8).dim_feedforward(256));
//   Tensor z = layer(x);                                     // (L, N, 64) unless batch_first
//
// MultiheadAttention: q = query Wq^T + bq, k = key Wk^T + bk, v = value Wv^T + bv, split into
// num_heads heads of embed_dim / num_heads features; each head is scaled_dot_product_attention
// (ops/attention.hpp) with scale 1 / sqrt(head_dim); the heads are concatenated and projected by
// out_proj. Parameters as torch: `in_proj_weight` (3E, E) when kdim = vdim = E, else
// `q_proj_weight` (E, E), `k_proj_weight` (E, kdim), `v_proj_weight` (E, vdim); `in_proj_bias` (3E)
// and `out_proj.weight` (E, E), `out_proj.bias` (E) when bias. Init as torch's _reset_parameters:
// xavier_uniform_ for the in-projection weights, out_proj.weight Linear's kaiming_uniform, both
// biases 0. Masks follow torch.nn.MultiheadAttention (1.13), NOT scaled_dot_product_attention: a
// bool attn_mask or key_padding_mask is true where attention is NOT allowed; a float mask is added
// to the scores. Dropout (on the attention weights) applies in training mode only.
// Gradients are those of the ops it is made of (linear, reshape, permute, the attention op).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/layer_norm.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::nn {

#define XGRAD_OPTION(Options, type, name, init) \
 public:                                        \
  Options& name(type value) {                   \
    name##_ = std::move(value);                 \
    return *this;                               \
  }                                             \
  const type& name() const { return name##_; }  \
                                                \
 private:                                       \
  type name##_ = init;

/// The layout of block-sparse attention for a sequence of query_blocks x key_blocks blocks (a
/// CsrPattern over that grid, ops/attention_layout.hpp): the modules build it for each input length,
/// e.g. [](std::int64_t nq, std::int64_t nk) { return sliding_window_layout(nq, nk, 3); }.
using AttentionLayoutFn = std::function<CsrPattern(std::int64_t query_blocks, std::int64_t key_blocks)>;

/// Block-sparse self-attention of the modules (ops/attention.hpp's block_sparse_attention): blocks of
/// `block` queries by `block` keys, the layout from `layout` for each length, and `causal` hiding
/// the keys after each query inside the stored blocks. block 0 (the default): dense attention.
struct AttentionBlockSparse {
  std::int64_t block = 0;
  AttentionLayoutFn layout;
  bool causal = false;
};

/// torch::nn::MultiheadAttentionOptions: MultiheadAttentionOptions(E, H).dropout(0.1).batch_first(true).
/// kdim / vdim 0 mean embed_dim (torch's None). add_bias_kv and add_zero_attn must stay false (not
/// implemented; refused).
class MultiheadAttentionOptions {
 public:
  MultiheadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  XGRAD_OPTION(MultiheadAttentionOptions, std::int64_t, embed_dim, 0)
  XGRAD_OPTION(MultiheadAttentionOptions, std::int64_t, num_heads, 1)
  XGRAD_OPTION(MultiheadAttentionOptions, double, dropout, 0.0)
  XGRAD_OPTION(MultiheadAttentionOptions, bool, bias, true)
  XGRAD_OPTION(MultiheadAttentionOptions, bool, add_bias_kv, false)
  XGRAD_OPTION(MultiheadAttentionOptions, bool, add_zero_attn, false)
  XGRAD_OPTION(MultiheadAttentionOptions, std::int64_t, kdim, 0)
  XGRAD_OPTION(MultiheadAttentionOptions, std::int64_t, vdim, 0)
  XGRAD_OPTION(MultiheadAttentionOptions, bool, batch_first, false)
  XGRAD_OPTION(MultiheadAttentionOptions, Dtype, dtype, kFloat32)
  /// Block-sparse attention over a layout (not in torch): forward then requires need_weights = false
  /// and no masks.
  XGRAD_OPTION(MultiheadAttentionOptions, AttentionBlockSparse, block_sparse, {})
};

class MultiheadAttention : public Module {
 public:
  /// Errors: embed_dim <= 0, num_heads <= 0 or not dividing embed_dim, kdim or vdim < 0, dropout
  /// outside [0, 1], add_bias_kv or add_zero_attn.
  MultiheadAttention(const MultiheadAttentionOptions& options, Generator& gen);
  explicit MultiheadAttention(const MultiheadAttentionOptions& options,
                              std::optional<std::uint64_t> seed = std::nullopt);
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads)
      : MultiheadAttention(MultiheadAttentionOptions(embed_dim, num_heads)) {}

  /// query (L, N, E), key (S, N, kdim), value (S, N, vdim) ((N, L, E) ... when batch_first), or
  /// unbatched (L, E), (S, kdim), (S, vdim). key_padding_mask (N, S) (or (S) unbatched), bool (true
  /// = ignore that key) or float (added); attn_mask (L, S) or (N * num_heads, L, S), bool (true = not
  /// allowed) or float (added). Returns {output like query, weights}: weights (N, L, S) averaged over
  /// the heads (average_attn_weights) or (N, num_heads, L, S), after dropout, as torch; undefined
  /// when !need_weights. With options().block_sparse() set, the heads attend through
  /// block_sparse_attention over its layout for ceil(L / block) x ceil(S / block) blocks, which
  /// returns no weights and takes no masks. Errors (naming MultiheadAttention, the argument and the
  /// shapes): ranks or sizes that do not fit, mask shapes, masks neither bool nor of the query's
  /// dtype, dtype mixes; with a block-sparse layout, need_weights or a mask.
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                    const Tensor& attn_mask = Tensor(), bool average_attn_weights = true);

  const MultiheadAttentionOptions& options() const { return options_; }
  std::int64_t head_dim() const { return options_.embed_dim() / options_.num_heads(); }
  /// (3E, E), undefined when kdim or vdim differ from embed_dim.
  const Tensor& in_proj_weight() const { return in_proj_weight_; }
  /// (E, E), (E, kdim), (E, vdim), undefined when kdim = vdim = embed_dim.
  const Tensor& q_proj_weight() const { return q_proj_weight_; }
  const Tensor& k_proj_weight() const { return k_proj_weight_; }
  const Tensor& v_proj_weight() const { return v_proj_weight_; }
  /// (3E), undefined without bias.
  const Tensor& in_proj_bias() const { return in_proj_bias_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }
  /// The generator of the attention-weight dropout: the default generator, or the module's own when
  /// it was built with a seed or a generator other than the default (mask_generator).
  Generator& generator() { return gen_ ? *gen_ : default_generator(); }

 private:
  MultiheadAttentionOptions options_;
  Tensor in_proj_weight_, q_proj_weight_, k_proj_weight_, v_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
  std::optional<Generator> gen_;
};

/// torch.nn.Transformer.generate_square_subsequent_mask(sz): the (sz, sz) additive causal mask, 0 on and
/// below the diagonal and -inf above it (query l may attend to keys s <= l), for the attn_mask /
/// src_mask of the modules here. Errors: sz < 0, dtype not floating.
Tensor generate_square_subsequent_mask(std::int64_t sz, Dtype dtype = kFloat32);

/// torch::nn::TransformerEncoderLayerOptions: TransformerEncoderLayerOptions(d_model, nhead)
/// .dim_feedforward(2048).dropout(0.1).activation("relu" | "gelu").layer_norm_eps(1e-5)
/// .batch_first(false).norm_first(false).
class TransformerEncoderLayerOptions {
 public:
  TransformerEncoderLayerOptions(std::int64_t d_model, std::int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  XGRAD_OPTION(TransformerEncoderLayerOptions, std::int64_t, d_model, 0)
  XGRAD_OPTION(TransformerEncoderLayerOptions, std::int64_t, nhead, 1)
  XGRAD_OPTION(TransformerEncoderLayerOptions, std::int64_t, dim_feedforward, 2048)
  XGRAD_OPTION(TransformerEncoderLayerOptions, double, dropout, 0.1)
  XGRAD_OPTION(TransformerEncoderLayerOptions, std::string, activation, "relu")
  XGRAD_OPTION(TransformerEncoderLayerOptions, double, layer_norm_eps, 1e-5)
  XGRAD_OPTION(TransformerEncoderLayerOptions, bool, batch_first, false)
  XGRAD_OPTION(TransformerEncoderLayerOptions, bool, norm_first, false)
  XGRAD_OPTION(TransformerEncoderLayerOptions, Dtype, dtype, kFloat32)
  /// Block-sparse self-attention (MultiheadAttentionOptions::block_sparse): no src_mask or
  /// src_key_padding_mask then; a causal model sets its `causal`.
  XGRAD_OPTION(TransformerEncoderLayerOptions, AttentionBlockSparse, block_sparse, {})
};
#undef XGRAD_OPTION

/// torch.nn.TransformerEncoderLayer (1.13): with sa(x) = dropout1(self_attn(x, x, x, masks)) and
/// ff(x) = dropout2(linear2(dropout(activation(linear1(x))))),
///   norm_first:  x = x + sa(norm1(x));  x = x + ff(norm2(x))
///   otherwise:   x = norm1(x + sa(x));  x = norm2(x + ff(x))
/// Children as torch's, in its order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
/// dropout2 (so state_dict names match). Errors: the options' (d_model not divisible by nhead, an
/// activation other than "relu" or "gelu", dim_feedforward < 1, dropout outside [0, 1]).
class TransformerEncoderLayer : public UnaryModule {
 public:
  TransformerEncoderLayer(const TransformerEncoderLayerOptions& options, Generator& gen);
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options,
                                   std::optional<std::uint64_t> seed = std::nullopt);
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead)
      : TransformerEncoderLayer(TransformerEncoderLayerOptions(d_model, nhead)) {}

  /// src (S, N, E) ((N, S, E) when batch_first, or unbatched (S, E)) -> same shape. src_mask and
  /// src_key_padding_mask as MultiheadAttention's attn_mask and key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = Tensor());
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor()); }

  const TransformerEncoderLayerOptions& options() const { return options_; }
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  TransformerEncoderLayerOptions options_;
};

/// torch.nn.TransformerEncoder(encoder_layer, num_layers, norm): num_layers copies of `layer`
/// (same options and same initial parameter values, as torch's deepcopy; each copy's dropout
/// drawing from the default generator when the layer's does, else reseeded per copy), children `layers.0`, `layers.1`,
/// ... and `norm` (when given) applied at the end.
class TransformerEncoder : public UnaryModule {
 public:
  /// Errors: undefined layer, num_layers < 1.
  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = Tensor());
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor()); }

  const std::vector<std::shared_ptr<TransformerEncoderLayer>>& layers() const { return layers_; }
  const std::shared_ptr<LayerNorm>& norm() const { return norm_; }

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

}  // namespace xgrad::nn
