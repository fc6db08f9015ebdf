#include "xgrad/nn/dropout.hpp"

#include "xgrad/ops/dropout.hpp"

namespace xgrad::nn {

namespace {
void check_p(double p, const char* op) {
  XGRAD_CHECK(p >= 0.0 && p <= 1.0, "{}: dropout probability p must be in [0, 1], got {}", op, p);
}
}  // namespace

namespace functional {
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) { return xgrad::dropout(x, p, training, gen); }
}  // namespace functional

Dropout::Dropout(double p, std::optional<std::uint64_t> seed) : UnaryModule("Dropout"), p_(p) {
  check_p(p, "Dropout");
  if (seed) gen_.emplace(*seed);
}

Dropout::Dropout(double p, Generator& gen) : UnaryModule("Dropout"), p_(p), gen_(mask_generator(gen)) {
  check_p(p, "Dropout");
}

Tensor Dropout::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "Dropout: argument 'x' is undefined");
  return xgrad::dropout(x, p_, is_training(), generator());
}

}  // namespace xgrad::nn
