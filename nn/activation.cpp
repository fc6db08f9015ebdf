#include "xgrad/nn/activation.hpp"

#include <utility>

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

}  // namespace xgrad::nn
