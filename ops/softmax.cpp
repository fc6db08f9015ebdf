#include "xgrad/ops/softmax.hpp"

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/softmax_kernels.hpp"
#include "xgrad/ops/reduction.hpp"

namespace xgrad {

namespace {

// The loops are ops/kernels/softmax_kernels.cpp's (Note [Softmax kernels]): one fused pass per row
// forward, and only the output y is saved for backward.
using Geometry = detail::SoftmaxGeometry;

Geometry geometry(const char* op, const Tensor& x, std::int64_t axis) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", op);
  Geometry g;
  if (x.dim() == 0) {
    // Like PyTorch, a 0-d tensor is a single row of length 1 (axis 0 or -1).
    XGRAD_CHECK(axis == 0 || axis == -1, "{}: axis {} is out of range for a tensor of shape {} (0 dimensions)", op,
                axis, shape_str(x.shape()));
    return g;
  }
  const std::int64_t a = normalize_axis(axis, x.dim(), op, x.shape());
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const auto s = x.shape()[static_cast<std::size_t>(d)];
    if (d < a)
      g.outer *= s;
    else if (d == a)
      g.n = s;
    else
      g.inner *= s;
  }
  return g;
}

template <bool kLog>
struct Softmax : Function<Softmax<kLog>> {
  static constexpr const char* kName = kLog ? "log_softmax" : "softmax";
  static constexpr bool kDifferentiableBackward = true;
  Geometry geo;
  std::int64_t dim = 0;
  Tensor forward(const Tensor& x, std::int64_t axis) {
    geo = geometry(kName, x, axis);
    dim = axis;
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::softmax_forward<T>(x.data<T>(), y.data<T>(), geo, kLog);
    });
    if (this->needs_input_grad(0)) this->save_for_backward({y});  // both gradients need only y
    return y;
  }
  // softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), sums over `dim`.
  Tensors backward(const Tensors& grads) { return {apply_fused<BackwardOf<Softmax>>(*this, grads[0], this->saved(0))}; }
  Tensor backward_formula(const Tensor& g, const Tensor& y) {
    if (y.numel() == 0 || y.dim() == 0) return mul(g, 0.0);
    if constexpr (kLog) return sub(g, mul(exp(y), sum(g, {dim}, /*keepdim=*/true)));
    return mul(y, sub(g, sum(mul(g, y), {dim}, /*keepdim=*/true)));
  }
  Tensor backward_kernel(const Tensor& g, const Tensor& y) {
    Tensor gx = Tensor::empty(y.shape(), y.dtype());
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::softmax_backward<T>(y.data<T>(), g.data<T>(), gx.data<T>(), geo, kLog);
    });
    return gx;
  }
};

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) { return apply<Softmax<false>>(x, axis); }
Tensor log_softmax(const Tensor& x, std::int64_t axis) { return apply<Softmax<true>>(x, axis); }

}  // namespace xgrad
