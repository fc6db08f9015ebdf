#pragma once
// Recurrent layers, like torch::nn::LSTMCell, GRUCell, LSTM and GRU (same gate order, formulas,
// parameter names and defaults, so state dicts and checkpoints carry over):
//
//   nn::LSTM lstm(/*input_size=*/8, /*hidden_size=*/32, /*num_layers=*/2);
//   auto [output, h_n, c_n] = lstm.forward(x);    // x (seq, batch, 8) -> output (seq, batch, 32),
//                                                 // h_n and c_n (num_layers, batch, 32)
//   nn::GRU gru(8, 32, 1, true, /*batch_first=*/true);
//   auto [out, h] = gru.forward(x_bf, h0);        // x_bf (batch, seq, 8), h0 (1, batch, 32)
//
// Parameters, per layer l and direction (suffix "_reverse" for the backward direction of a
// bidirectional layer): weight_ih_l{l} (G H, in), weight_hh_l{l} (G H, H), bias_ih_l{l} and
// bias_hh_l{l} (G H) unless bias = false, with G = 4 (LSTM: gates i, f, g, o) or 3 (GRU: r, z, n)
// and in = input_size for layer 0, D H above it (D = 2 when bidirectional). Init as torch: every
// parameter U(-1/sqrt(H), 1/sqrt(H)). Each layer and direction runs as one fused op over the whole
// sequence (lstm_layer, gru_layer in ops/rnn.hpp): the input projection of all time steps is one
// GEMM. Dropout (probability `dropout`) is applied to the outputs of every layer but the last, in
// training mode only (train()/eval()), from the module's own generator.
//
// Shapes: input (T, B, in), or (B, T, in) with batch_first, or unbatched (T, in); initial states
// (L D, B, H) ((L D, H) unbatched), zeros when undefined; output (T, B, D H) (batch_first:
// (B, T, D H)), h_n and c_n (L D, B, H). The states are never batch-first, as in torch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

/// One LSTM step (ops/rnn.hpp lstm_cell) with its parameters weight_ih (4H, in), weight_hh (4H, H),
/// bias_ih and bias_hh (4H).
class LSTMCell : public Module {
 public:
  /// Errors: negative sizes.
  LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true, Dtype dtype = kFloat32,
           std::optional<std::uint64_t> seed = std::nullopt);
  /// input (B, in) or (in); h, c (B, H) or (H), zeros when undefined. Returns {h', c'}.
  /// Errors (naming LSTMCell and the shapes): input not 1-d or 2-d, its last dim != input_size, a state
  /// of the wrong shape, one state given without the other.
  Tensors forward(const Tensor& input, const Tensor& h = Tensor(), const Tensor& c = Tensor());
  std::string extra_repr() const override;

  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }

 private:
  std::int64_t input_size_, hidden_size_;
  Tensor w_ih_, w_hh_, b_ih_, b_hh_;
};

/// One GRU step (ops/rnn.hpp gru_cell) with weight_ih (3H, in), weight_hh (3H, H), bias_ih, bias_hh (3H).
class GRUCell : public Module {
 public:
  GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true, Dtype dtype = kFloat32,
          std::optional<std::uint64_t> seed = std::nullopt);
  /// input (B, in) or (in); h (B, H) or (H), zeros when undefined. Returns h'.
  Tensor forward(const Tensor& input, const Tensor& h = Tensor());
  std::string extra_repr() const override;

  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }

 private:
  std::int64_t input_size_, hidden_size_;
  Tensor w_ih_, w_hh_, b_ih_, b_hh_;
};

/// What LSTM::forward returns (torch: output, (h_n, c_n)).
struct LSTMOutput {
  Tensor output, h_n, c_n;
};
/// What GRU::forward returns (torch: output, h_n).
struct GRUOutput {
  Tensor output, h_n;
};

/// The layers shared by LSTM and GRU (torch's RNNBase).
class RNNBase : public Module {
 public:
  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }
  std::int64_t num_layers() const { return num_layers_; }
  bool bias() const { return bias_; }
  bool batch_first() const { return batch_first_; }
  double dropout() const { return dropout_; }
  bool bidirectional() const { return bidirectional_; }
  std::string extra_repr() const override;

 protected:
  /// Errors: negative sizes, num_layers < 1, dropout outside [0, 1].
  RNNBase(const char* type, std::int64_t gates, std::int64_t input_size, std::int64_t hidden_size,
          std::int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional, Dtype dtype,
          std::optional<std::uint64_t> seed);
  /// Runs the stack; `lstm` selects the cell. Returns {output, h_n, c_n (LSTM only)}.
  Tensors run(const Tensor& input, const Tensor& h0, const Tensor& c0, bool lstm);

  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;
  };
  const char* type_;
  std::int64_t input_size_, hidden_size_, num_layers_;
  bool bias_, batch_first_;
  double dropout_;
  bool bidirectional_;
  std::vector<Weights> weights_;  // layer-major: index l * D + direction
  std::optional<Generator> gen_;  // the dropout masks: seeded from the init's generator, or none (default)
};

class LSTM : public RNNBase {
 public:
  explicit LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
                bool batch_first = false, double dropout = 0.0, bool bidirectional = false, Dtype dtype = kFloat32,
                std::optional<std::uint64_t> seed = std::nullopt);
  /// See the shapes above. Errors (naming LSTM, the argument and the shapes): input not 2-d or 3-d,
  /// its last dim != input_size, h0 or c0 of the wrong shape, one of them given without the other.
  LSTMOutput forward(const Tensor& input, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor());
};

class GRU : public RNNBase {
 public:
  explicit GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
               bool batch_first = false, double dropout = 0.0, bool bidirectional = false, Dtype dtype = kFloat32,
               std::optional<std::uint64_t> seed = std::nullopt);
  /// See the shapes above. Errors as LSTM::forward.
  GRUOutput forward(const Tensor& input, const Tensor& h0 = Tensor());
};

}  // namespace xgrad::nn
