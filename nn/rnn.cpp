#include "xgrad/nn/rnn.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "xgrad/core/checked.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/ops/rnn.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace {

void check_sizes(const char* type, std::int64_t in, std::int64_t hidden, std::int64_t gates, Dtype dtype) {
  XGRAD_CHECK(in >= 0 && hidden >= 0,
              "{}: input_size and hidden_size must be >= 0, got input_size = {}, hidden_size = {}", type, in, hidden);
  checked_nbytes(checked_numel({gates * hidden, in + hidden}, type, "hidden_size * input_size"), dtype_size(dtype),
                 type, "hidden_size * input_size");
}

// torch's reset_parameters: every parameter U(-1/sqrt(H), 1/sqrt(H)) (0 when H = 0), in registration order.
Tensor uniform_param(const Shape& shape, std::int64_t hidden, Generator& gen, Dtype dtype) {
  const double bound = hidden > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden)) : 0.0;
  Tensor t = Tensor::empty(shape, dtype);
  init::uniform_(t, gen, -bound, bound);
  return t;
}

// Registers weight_ih{suffix}, weight_hh{suffix} and the biases, in torch's order.
template <class W>
void make_weights(Module& m, W& w, std::int64_t gates, std::int64_t in, std::int64_t hidden, bool bias,
                  const std::string& suffix, Generator& gen, Dtype dtype) {
  w.w_ih = m.register_parameter("weight_ih" + suffix, uniform_param({gates * hidden, in}, hidden, gen, dtype));
  w.w_hh = m.register_parameter("weight_hh" + suffix, uniform_param({gates * hidden, hidden}, hidden, gen, dtype));
  if (bias) {
    w.b_ih = m.register_parameter("bias_ih" + suffix, uniform_param({gates * hidden}, hidden, gen, dtype));
    w.b_hh = m.register_parameter("bias_hh" + suffix, uniform_param({gates * hidden}, hidden, gen, dtype));
  }
}

void check_cell_input(const char* type, const Tensor& input, std::int64_t in) {
  XGRAD_CHECK(input.defined(), "{}: argument 'input' is undefined", type);
  XGRAD_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) == in,
              "{}: argument 'input' has shape {} but must be (batch, {}) or ({},) (input_size = {})", type,
              shape_str(input.shape()), in, in, in);
}

// The state a cell starts from: `h` itself, or zeros of the input's batch shape.
Tensor cell_state(const char* type, const char* arg, const Tensor& h, const Tensor& input, std::int64_t hidden) {
  const Shape want = input.dim() == 2 ? Shape{input.size(0), hidden} : Shape{hidden};
  if (!h.defined()) return Tensor::zeros(want, input.dtype());
  XGRAD_CHECK(h.shape() == want, "{}: argument '{}' has shape {} but must be {} for input {}", type, arg,
              shape_str(h.shape()), shape_str(want), shape_str(input.shape()));
  return h;
}

}  // namespace

// ---- cells ------------------------------------------------------------------------------------

LSTMCell::LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias, Dtype dtype,
                   std::optional<std::uint64_t> seed)
    : Module("LSTMCell"), input_size_(input_size), hidden_size_(hidden_size) {
  check_sizes("LSTMCell", input_size, hidden_size, 4, dtype);
  SeedOrDefault gen(seed);
  struct {
    Tensor w_ih, w_hh, b_ih, b_hh;
  } w;
  make_weights(*this, w, 4, input_size, hidden_size, bias, "", gen, dtype);
  w_ih_ = w.w_ih, w_hh_ = w.w_hh, b_ih_ = w.b_ih, b_hh_ = w.b_hh;
}

Tensors LSTMCell::forward(const Tensor& input, const Tensor& h, const Tensor& c) {
  check_cell_input("LSTMCell", input, input_size_);
  XGRAD_CHECK(h.defined() == c.defined(), "LSTMCell: give both states h and c or neither (got only '{}')",
              h.defined() ? "h" : "c");
  const Tensor h0 = cell_state("LSTMCell", "h", h, input, hidden_size_);
  const Tensor c0 = cell_state("LSTMCell", "c", c, input, hidden_size_);
  return lstm_cell(input, {h0, c0}, w_ih_, w_hh_, b_ih_, b_hh_);
}

GRUCell::GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias, Dtype dtype,
                 std::optional<std::uint64_t> seed)
    : Module("GRUCell"), input_size_(input_size), hidden_size_(hidden_size) {
  check_sizes("GRUCell", input_size, hidden_size, 3, dtype);
  SeedOrDefault gen(seed);
  struct {
    Tensor w_ih, w_hh, b_ih, b_hh;
  } w;
  make_weights(*this, w, 3, input_size, hidden_size, bias, "", gen, dtype);
  w_ih_ = w.w_ih, w_hh_ = w.w_hh, b_ih_ = w.b_ih, b_hh_ = w.b_hh;
}

Tensor GRUCell::forward(const Tensor& input, const Tensor& h) {
  check_cell_input("GRUCell", input, input_size_);
  return gru_cell(input, cell_state("GRUCell", "h", h, input, hidden_size_), w_ih_, w_hh_, b_ih_, b_hh_);
}

// ---- stacked layers ----------------------------------------------------------------------------

RNNBase::RNNBase(const char* type, std::int64_t gates, std::int64_t input_size, std::int64_t hidden_size,
                 std::int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional, Dtype dtype,
                 std::optional<std::uint64_t> seed)
    : Module(type),
      type_(type),
      input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      bias_(bias),
      batch_first_(batch_first),
      dropout_(dropout),
      bidirectional_(bidirectional) {
  check_sizes(type, input_size, hidden_size, gates, dtype);
  XGRAD_CHECK(num_layers >= 1, "{}: num_layers must be >= 1, got {}", type, num_layers);
  XGRAD_CHECK(dropout >= 0.0 && dropout <= 1.0, "{}: dropout must be in [0, 1], got {}", type, dropout);
  const std::int64_t dirs = bidirectional ? 2 : 1;
  SeedOrDefault init_gen(seed);
  for (std::int64_t l = 0; l < num_layers; ++l)
    for (std::int64_t dir = 0; dir < dirs; ++dir) {
      Weights w;
      const std::int64_t in = l == 0 ? input_size : dirs * hidden_size;
      make_weights(*this, w, gates, in, hidden_size, bias, "_l" + std::to_string(l) + (dir ? "_reverse" : ""), init_gen,
                   dtype);
      weights_.push_back(w);
    }
  if (seed) gen_.emplace(static_cast<Generator&>(init_gen).next_u64());
}

Tensors RNNBase::run(const Tensor& input, const Tensor& h0, const Tensor& c0, bool lstm) {
  XGRAD_CHECK(input.defined(), "{}: argument 'input' is undefined", type_);
  XGRAD_CHECK((input.dim() == 2 || input.dim() == 3) && input.size(-1) == input_size_,
              "{}: argument 'input' has shape {} but must be {} or (seq_len, {}) (input_size = {})", type_,
              shape_str(input.shape()),
              batch_first_ ? fmt::format("(batch, seq_len, {})", input_size_)
                           : fmt::format("(seq_len, batch, {})", input_size_),
              input_size_, input_size_);
  const bool batched = input.dim() == 3;
  const std::int64_t dirs = bidirectional_ ? 2 : 1, H = hidden_size_, LD = num_layers_ * dirs;
  // (T, B, in) with B = 1 for an unbatched input.
  Tensor x = !batched ? unsqueeze(input, 1) : batch_first_ ? transpose(input, 0, 1) : input;
  const std::int64_t B = x.size(1);
  const Shape state_shape = batched ? Shape{LD, B, H} : Shape{LD, H};
  auto states = [&](const Tensor& s, const char* arg) {
    Tensors out;
    if (!s.defined()) {
      for (std::int64_t i = 0; i < LD; ++i) out.push_back(Tensor::zeros({B, H}, x.dtype()));
      return out;
    }
    XGRAD_CHECK(s.shape() == state_shape, "{}: argument '{}' has shape {} but must be {} for input {}", type_, arg,
                shape_str(s.shape()), shape_str(state_shape), shape_str(input.shape()));
    for (const Tensor& p : split(s, 1, 0)) out.push_back(reshape(p, {B, H}));
    return out;
  };
  if (lstm)
    XGRAD_CHECK(h0.defined() == c0.defined(), "{}: give both initial states h0 and c0 or neither (got only '{}')",
                type_, h0.defined() ? "h0" : "c0");
  const Tensors hs = states(h0, "h0");
  const Tensors cs = lstm ? states(c0, "c0") : Tensors();
  Tensors h_n, c_n;
  for (std::int64_t l = 0; l < num_layers_; ++l) {
    Tensors outs;
    for (std::int64_t dir = 0; dir < dirs; ++dir) {
      const std::int64_t k = l * dirs + dir;
      const Weights& w = weights_[static_cast<std::size_t>(k)];
      const Tensors r = lstm ? lstm_layer(x, hs[k], cs[k], w.w_ih, w.w_hh, w.b_ih, w.b_hh, dir == 1)
                             : gru_layer(x, hs[k], w.w_ih, w.w_hh, w.b_ih, w.b_hh, dir == 1);
      outs.push_back(r[0]);
      h_n.push_back(r[1]);
      if (lstm) c_n.push_back(r[2]);
    }
    x = dirs == 2 ? cat(outs, 2) : outs[0];
    if (l + 1 < num_layers_ && dropout_ > 0 && is_training())
      x = functional::dropout(x, dropout_, true, gen_ ? *gen_ : default_generator());
  }
  Tensor output = !batched ? squeeze(x, 1) : batch_first_ ? transpose(x, 0, 1) : x;
  Tensor hn = stack(h_n, 0);
  Tensor cn = lstm ? stack(c_n, 0) : Tensor();
  if (!batched) {
    hn = reshape(hn, {LD, H});
    if (lstm) cn = reshape(cn, {LD, H});
  }
  return {output, hn, cn};
}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool bias, bool batch_first,
           double dropout, bool bidirectional, Dtype dtype, std::optional<std::uint64_t> seed)
    : RNNBase("LSTM", 4, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype, seed) {}

LSTMOutput LSTM::forward(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  const Tensors r = run(input, h0, c0, true);
  return {r[0], r[1], r[2]};
}

GRU::GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool bias, bool batch_first,
         double dropout, bool bidirectional, Dtype dtype, std::optional<std::uint64_t> seed)
    : RNNBase("GRU", 3, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype, seed) {}

GRUOutput GRU::forward(const Tensor& input, const Tensor& h0) {
  const Tensors r = run(input, h0, Tensor(), false);
  return {r[0], r[1]};
}

}  // namespace xgrad::nn
