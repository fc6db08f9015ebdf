#include "xgrad/nn/activation.hpp"

#include <cmath>
#include <utility>

#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"

namespace xgrad::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim_); }
Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim_); }

Tensor Identity::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "Identity: argument 'x' is undefined");
  return x;
}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim_, end_dim_); }

Functional::Functional(std::function<Tensor(const Tensor&)> fn, std::string name)
    : UnaryModule(std::move(name)), fn_(std::move(fn)) {
  XGRAD_CHECK(fn_ != nullptr, "{}: the function is empty", type_name());
}

Tensor Functional::forward(const Tensor& x) { return fn_(x); }

GELU::GELU(std::string approximate) : UnaryModule("GELU"), approximate_(std::move(approximate)) {
  XGRAD_CHECK(approximate_ == "none" || approximate_ == "tanh",
              "GELU: argument 'approximate' must be \"none\" or \"tanh\", got \"{}\"", approximate_);
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Softplus::Softplus(double beta, double threshold) : UnaryModule("Softplus"), beta_(beta), threshold_(threshold) {
  XGRAD_CHECK(beta != 0 && !std::isnan(beta) && !std::isnan(threshold),
              "Softplus: argument 'beta' ({}) must be non-zero and 'threshold' ({}) not NaN", beta, threshold);
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta_, threshold_); }

Tensor Mish::forward(const Tensor& x) { return mish(x); }

LeakyReLU::LeakyReLU(double negative_slope) : UnaryModule("LeakyReLU"), negative_slope_(negative_slope) {
  XGRAD_CHECK(!std::isnan(negative_slope), "LeakyReLU: argument 'negative_slope' is NaN");
}
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope_); }

ELU::ELU(double alpha) : UnaryModule("ELU"), alpha_(alpha) {
  XGRAD_CHECK(!std::isnan(alpha), "ELU: argument 'alpha' is NaN");
}
Tensor ELU::forward(const Tensor& x) { return elu(x, alpha_); }

Tensor SELU::forward(const Tensor& x) { return selu(x); }

Hardtanh::Hardtanh(double min_val, double max_val) : UnaryModule("Hardtanh"), min_val_(min_val), max_val_(max_val) {
  XGRAD_CHECK(min_val <= max_val, "Hardtanh: argument 'min_val' ({}) must be <= 'max_val' ({}), and neither NaN",
              min_val, max_val);
}
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, min_val_, max_val_); }

Tensor LogSigmoid::forward(const Tensor& x) { return logsigmoid(x); }
Tensor Hardswish::forward(const Tensor& x) { return hardswish(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return hardsigmoid(x); }

}  // namespace xgrad::nn
