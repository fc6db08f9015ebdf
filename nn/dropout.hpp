#pragma once
// nn::Dropout: inverted dropout, like torch::nn::Dropout. In training mode each element is zeroed
// with probability p and the others are scaled by 1/(1-p), so the expected output equals the input;
// in eval mode (module.eval()) it returns the input unchanged.
//   y = x * m,  m_i = 1/(1-p) with probability 1-p, else 0;   dx = g * m (the same mask).
// The op is xgrad::dropout (ops/dropout.hpp). The masks come from the default generator (reseeded by
// xgrad::manual_seed, as torch's), or from the module's own generator when it is built with a seed or
// a generator other than the default; either way the same seed gives the same sequence of masks on
// every machine and with any thread count. p = 1 zeroes every element (and its gradient), as in torch.
#include <cstdint>
#include <optional>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

namespace functional {
/// xgrad::dropout (ops/dropout.hpp) under torch::nn::functional's name: inverted dropout of x with
/// drop probability p when `training`, the mask drawn from `gen`; x itself when not training or p = 0.
/// Errors: undefined x, p outside [0, 1].
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());
}  // namespace functional

class Dropout : public UnaryModule {
 public:
  /// Masks from a generator of its own seeded with `seed`, or from the default generator without one.
  /// Errors: p outside [0, 1].
  explicit Dropout(double p = 0.5, std::optional<std::uint64_t> seed = std::nullopt);
  /// Masks from the default generator when `gen` is the default generator, else from a generator of
  /// its own seeded with one draw of `gen` (mask_generator: `gen` may die first). Errors: p outside [0, 1].
  Dropout(double p, Generator& gen);

  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p() const { return p_; }
  /// The generator the masks are drawn from (reseed it with manual_seed to repeat a mask).
  Generator& generator() { return gen_ ? *gen_ : default_generator(); }

 private:
  double p_;
  std::optional<Generator> gen_;
};

}  // namespace xgrad::nn
