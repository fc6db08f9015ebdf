#pragma once
// nn::Dropout: inverted dropout, like torch::nn::Dropout. In training mode each element is zeroed
// with probability p and the others are scaled by 1/(1-p), so the expected output equals the input;
// in eval mode (module.eval()) it returns the input unchanged.
//   y = x * m,  m_i = 1/(1-p) with probability 1-p, else 0;   dx = g * m (the same mask).
// The mask comes from the module's own Generator (seeded at construction), so the same seed gives
// the same sequence of masks on every machine and with any thread count.
// p = 1 zeroes every element (and its gradient), as in torch.
#include <cstdint>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

namespace functional {
/// Inverted dropout of x with drop probability p when `training`, drawing the mask from `gen` (one
/// uniform per element, in row-major order); x itself when not training or p = 0.
/// Errors: undefined x, p outside [0, 1].
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
}  // namespace functional

class Dropout : public UnaryModule {
 public:
  /// Errors: p outside [0, 1].
  explicit Dropout(double p = 0.5, std::uint64_t seed = 0);
  /// Seeds the module's own generator with one draw from `gen` (the module does not keep a reference
  /// to `gen`, so `gen` may die first). Errors: p outside [0, 1].
  Dropout(double p, Generator& gen);

  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p() const { return p_; }
  /// The generator the masks are drawn from (reseed it with manual_seed to repeat a mask).
  Generator& generator() { return gen_; }

 private:
  double p_;
  Generator gen_;
};

}  // namespace xgrad::nn
