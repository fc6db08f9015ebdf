#include "xgrad/ops/linear.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/kernels/reduce_kernels.hpp"
#include "xgrad/ops/kernels/tiled_gemm.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

namespace {

// Note [Fused linear]: y = x W^T + b is one op instead of transpose + matmul + add. Every xgrad
// tensor is contiguous, so transpose(W) copied the whole weight in forward and the gradient of the
// transpose copied dW^T back in backward (a quarter of the time of an MLP training step went into
// those strided copies), and the separate add made one more (rows, out) tensor and its own node. Here
// forward and backward are three GEMMs that read W and x in place through the BLAS transpose flags:
//   forward  Y = b (each row) + X W^T      gemm(no, trans, beta = 1 over the broadcast bias)
//   backward dX = G W                      gemm(no, no)
//            dW = G^T X                    gemm(trans, no), written straight in W's (out, in) layout
//            db = column sums of G         in increasing row order, accumulated in double
// detail::gemm cuts large products by shape only (Note [Deterministic GEMM], ops/matmul.cpp) and
// every bias column is summed by one task in a fixed order, so the results are bit-identical
// whatever the thread count. x arrives here as (rows, in).

// The weight and bias gradients as ops (Note [Fused ops]): the GEMM and the column sums of Note
// [Fused linear], or (when the result will be differentiated) recorded ops. The input gradient
// dX = G W is matmul(g, W) itself, the same GEMM call.
struct LinearBackwardWeight {
  static constexpr const char* kName = "linear_backward_weight";
  static Tensor kernel(const Tensor& g, const Tensor& x) {
    const std::int64_t rows = g.size(0), out = g.size(1), in = x.size(1);
    Tensor dw = Tensor::empty({out, in}, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::gemm<T>(true, false, out, in, rows, g.data<T>(), out, x.data<T>(), in, T(0), dw.data<T>(), in);
    });
    return dw;
  }
  static Tensor formula(const Tensor& g, const Tensor& x) { return matmul(transpose(g, 0, 1), x); }
};

struct LinearBackwardBias {
  static constexpr const char* kName = "linear_backward_bias";
  static Tensor kernel(const Tensor& g) {
    const std::int64_t rows = g.size(0), out = g.size(1);
    Tensor db = Tensor::empty({out}, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::reduce::column_sums<T>(g.data<T>(), rows, out, db.data<T>());
    });
    return db;
  }
  static Tensor formula(const Tensor& g) { return sum(g, {0}); }
};

struct LinearOp : Function<LinearOp> {
  static constexpr const char* kName = "linear";

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const std::int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
    Tensor y = Tensor::empty({rows, out}, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* yp = y.data<T>();
      if (bias.defined()) {
        const T* bp = bias.data<T>();
        for (std::int64_t r = 0; r < rows; ++r) std::copy(bp, bp + out, yp + r * out);
      }
      detail::gemm<T>(false, true, rows, out, in, x.data<T>(), in, weight.data<T>(), in, bias.defined() ? T(1) : T(0),
                      yp, out);
    });
    // dX needs W, dW needs x, db needs neither.
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? x : Tensor(), needs_input_grad(0) ? weight : Tensor()});
    return y;
  }

  static constexpr bool kDifferentiableBackward = true;  // through matmul and the ops above

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensor dx, dw, db;
    const Tensors s = (needs_input_grad(0) || needs_input_grad(1)) ? saved() : Tensors();
    if (needs_input_grad(0)) dx = matmul(g, s[1]);
    if (needs_input_grad(1)) dw = apply_fused<LinearBackwardWeight>(g, s[0]);
    if (needs_input_grad(2)) db = apply_fused<LinearBackwardBias>(g);
    return {dx, dw, db};
  }
};

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  XGRAD_CHECK(x.defined() && weight.defined(), "linear: argument '{}' is undefined", x.defined() ? "weight" : "x");
  XGRAD_CHECK(weight.dim() == 2, "linear: argument 'weight' must be 2-d (out, in), got shape {}",
              shape_str(weight.shape()));
  const std::int64_t out = weight.size(0), in = weight.size(1);
  XGRAD_CHECK(x.dim() >= 1 && x.size(-1) == in,
              "linear: argument 'x' has shape {} but its last dimension must be in_features = {} (weight {})",
              shape_str(x.shape()), in, shape_str(weight.shape()));
  XGRAD_CHECK(x.dtype() == weight.dtype(), "linear: argument 'x' is {} but 'weight' is {}", x.dtype(), weight.dtype());
  if (bias.defined())
    XGRAD_CHECK(bias.shape() == Shape{out} && bias.dtype() == weight.dtype(),
                "linear: argument 'bias' is {} {} but must be ({},) {}", bias.dtype(), shape_str(bias.shape()), out,
                weight.dtype());
  if (x.dim() == 2) return apply<LinearOp>(x, weight, bias);
  // (in) and (batch..., in): one GEMM over all rows (Note [Fused linear]), reshaped back.
  Shape batch(x.shape().begin(), x.shape().end() - 1);
  const std::int64_t rows = shape_numel(batch);
  const Tensor y = apply<LinearOp>(reshape(x, {rows, in}), weight, bias);
  batch.push_back(out);
  return reshape(y, batch);
}

}  // namespace xgrad
