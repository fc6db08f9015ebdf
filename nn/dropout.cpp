#include "xgrad/nn/dropout.hpp"

#include <cmath>
#include <vector>

#include "xgrad/ops/elementwise.hpp"

namespace xgrad::nn {

namespace {
void check_p(double p, const char* op) {
  XGRAD_CHECK(p >= 0.0 && p <= 1.0, "{}: dropout probability p must be in [0, 1], got {}", op, p);
}
}  // namespace

namespace functional {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_p(p, "dropout");
  XGRAD_CHECK(x.defined(), "dropout: argument 'x' is undefined");
  if (!training || p == 0.0) return x;
  // p = 1 drops everything (as torch does): zeros, with a zero gradient, instead of scale 1/0.
  if (p == 1.0) return mul(x, Tensor::zeros(x.shape(), x.dtype()));
  const double scale = 1.0 / (1.0 - p);
  std::vector<double> mask(static_cast<std::size_t>(x.numel()));
  for (auto& m : mask) m = gen.uniform() >= p ? scale : 0.0;  // kept with probability 1 - p
  return mul(x, Tensor::from_vector(mask, x.shape(), x.dtype()));
}

}  // namespace functional

Dropout::Dropout(double p, std::uint64_t seed) : UnaryModule("Dropout"), p_(p), gen_(seed) { check_p(p, "Dropout"); }

Dropout::Dropout(double p, Generator& gen) : UnaryModule("Dropout"), p_(p) {
  check_p(p, "Dropout");
  gen_.manual_seed(gen.next_u64());
}

Tensor Dropout::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "Dropout: argument 'x' is undefined");
  return functional::dropout(x, p_, is_training(), gen_);
}

}  // namespace xgrad::nn
