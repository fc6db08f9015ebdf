#include "xgrad/ops/dropout.hpp"

#include "xgrad/core/autograd.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/dropout_kernels.hpp"

namespace xgrad {
namespace {

struct Dropout : Function<Dropout> {
  static constexpr const char* kName = "dropout";
  static constexpr bool kDifferentiableBackward = true;  // g·m with a recorded mul
  Tensor forward(const Tensor& x, double p, Generator* gen) {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    Tensor m = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::dropout_kernel<T>(x.data<T>(), y.data<T>(), m.data<T>(), x.numel(), p, *gen);
    });
    if (needs_input_grad(0)) save_for_backward({m});
    return y;
  }
  Tensors backward(const Tensors& grads) { return {mul(grads[0], saved(0))}; }
};

}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator& gen) {
  XGRAD_CHECK(p >= 0.0 && p <= 1.0, "dropout: argument 'p' (the drop probability) must be in [0, 1], got {}", p);
  XGRAD_CHECK(x.defined(), "dropout: argument 'x' is undefined");
  check_floating("dropout", "x", x);
  if (!train || p == 0.0) return x;
  // p = 1 drops everything (as torch): zeros with a zero gradient, not the scale 1/0.
  if (p == 1.0) return mul(x, 0.0);
  return apply<Dropout>(x, p, &gen);
}

}  // namespace xgrad
