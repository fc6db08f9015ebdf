#pragma once
// Functional derivatives built on the engine, like torch.autograd.functional: vector-Jacobian
// products and whole Jacobians of a function of tensors.
//
// Cost notes: vjp is one forward and one backward pass. jacobian is one forward and m backward
// passes, m = the number of output elements (the graph is kept between them), so it suits few
// outputs and many inputs, or small problems; each backward costs a small multiple of the forward.
// Forward-mode products (jvp) and second derivatives (hessian, hvp) need gradients that are
// themselves differentiable (create_graph), which xgrad does not have yet.
#include <functional>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// The function's output and v^T J for each input: fn(inputs) has v's shape; the result's second
/// member has one tensor per input, of that input's shape (zeros where the output does not depend
/// on it). fn runs on detached copies of the inputs that require grad, so the inputs themselves are
/// not touched. Errors: v's shape or dtype differs from the output's, an input is undefined.
std::pair<Tensor, Tensors> vjp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs, const Tensor& v);

/// d fn(inputs) / d inputs: one tensor per input, of shape output.shape + input.shape (row-major:
/// entry [i..., j...] = d out[i...] / d in[j...]), in the inputs' dtype; zeros where the output does
/// not depend on an input. One backward pass per output element (see the cost notes above).
Tensors jacobian(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs);

/// The rows of the Jacobian of `output` (already computed, with its graph) with respect to
/// `inputs` (tensors that require grad and that output depends on): an (m, n) float64 row-major
/// matrix, m = output.numel(), n = the inputs' total numel, columns in input order. The graph is
/// kept. What jacobian() and nn::least_squares use.
std::vector<double> jacobian_matrix(const Tensor& output, const Tensors& inputs);

}  // namespace xgrad
