#include "xgrad/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace functional {
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return xgrad::linear(x, weight, bias); }
Tensor linear(const SparseCsr& x, const Tensor& weight, const Tensor& bias) { return xgrad::linear(x, weight, bias); }
}  // namespace functional

namespace {
void check_sizes(std::int64_t in, std::int64_t out, Dtype dtype) {
  XGRAD_CHECK(in >= 0 && out >= 0, "Linear: in_features and out_features must be >= 0, got in = {}, out = {}", in, out);
  // Named size checks (Note [Checked sizes]): the weight's element and byte counts must exist.
  checked_nbytes(checked_numel({out, in}, "Linear", "in_features * out_features"), dtype_size(dtype), "Linear",
                 "in_features * out_features");
}
}  // namespace

void Linear::init_parameters(Generator& gen, bool bias, Dtype dtype) {
  Tensor w = Tensor::empty({out_features_, in_features_}, dtype);
  init::kaiming_uniform_(w, gen, std::sqrt(5.0));
  weight_ = register_parameter("weight", w);
  if (bias) {
    const double bound = in_features_ > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features_)) : 0.0;
    Tensor b = Tensor::empty({out_features_}, dtype);
    init::uniform_(b, gen, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias, Dtype dtype)
    : UnaryModule("Linear"), in_features_(in_features), out_features_(out_features) {
  check_sizes(in_features, out_features, dtype);
  init_parameters(gen, bias, dtype);
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool bias, Dtype dtype,
               std::optional<std::uint64_t> seed)
    : UnaryModule("Linear"), in_features_(in_features), out_features_(out_features) {
  check_sizes(in_features, out_features, dtype);
  init_parameters(SeedOrDefault(seed), bias, dtype);
}

Linear::Linear(Tensor weight, Tensor bias) : UnaryModule("Linear"), in_features_(0), out_features_(0) {
  XGRAD_CHECK(weight.defined() && weight.dim() == 2, "Linear: argument 'weight' must be a 2-d (out, in) tensor, got {}",
              weight.defined() ? shape_str(weight.shape()) : std::string("an undefined tensor"));
  out_features_ = weight.size(0);
  in_features_ = weight.size(1);
  if (bias.defined())
    XGRAD_CHECK(bias.shape() == Shape{out_features_} && bias.dtype() == weight.dtype(),
                "Linear: argument 'bias' is {} {} but must be ({},) {}", bias.dtype(), shape_str(bias.shape()),
                out_features_, weight.dtype());
  weight_ = register_parameter("weight", std::move(weight));
  if (bias.defined()) bias_ = register_parameter("bias", std::move(bias));
}

Tensor Linear::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "Linear: argument 'x' is undefined");
  XGRAD_CHECK(x.dim() >= 1 && x.size(-1) == in_features_,
              "Linear: argument 'x' has shape {} but its last dimension must be in_features = {}", shape_str(x.shape()),
              in_features_);
  return functional::linear(x, weight_, bias_);
}

Tensor Linear::forward(const SparseCsr& x) {
  XGRAD_CHECK(x.defined(), "Linear: argument 'x' (sparse) is undefined");
  XGRAD_CHECK(x.cols() == in_features_, "Linear: argument 'x' is sparse {} but its columns must be in_features = {}",
              shape_str(x.shape()), in_features_);
  return functional::linear(x, weight_, bias_);
}

}  // namespace xgrad::nn
