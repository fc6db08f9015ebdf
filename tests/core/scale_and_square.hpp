#pragma once
// A two-output Function for the autograd tests (test_autograd.cpp, test_hooks.cpp): y = 3x and x²
// as two outputs of one node, to exercise multi-output nodes (their gradients, and hooks per output).
#include "xgrad/core/autograd.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad::test {

struct ScaleAndSquare : Function<ScaleAndSquare> {
  static constexpr const char* kName = "scale_and_square";
  Tensors forward(const Tensor& x) {
    save_for_backward({x});
    return {mul(x, 3.0), mul(x, x)};
  }
  Tensors backward(const Tensors& grads) {
    const Tensor x = saved(0);
    return {add(mul(grads[0], 3.0), mul(mul(grads[1], x), 2.0))};
  }
};

}  // namespace xgrad::test
