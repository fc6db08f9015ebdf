// abs, tanh, sigmoid, relu, pow by a number and clamp (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor pow(const Tensor& a, double exponent) { return apply<PowScalar>(a, exponent); }
Tensor abs(const Tensor& x) {
  if (x.defined() && !is_floating_point(x.dtype())) [[unlikely]]
    return int_abs(x);
  return apply<Unary<AbsOp>>(x);
}
Tensor tanh(const Tensor& x) { return apply<Unary<TanhOp>>(x); }
Tensor sigmoid(const Tensor& x) { return apply<Unary<SigmoidOp>>(x); }
Tensor relu(const Tensor& x) { return apply<Unary<ReluOp>>(x); }
Tensor clamp(const Tensor& x, double lo, double hi) { return apply<Clamp>(x, lo, hi); }

}  // namespace xgrad
