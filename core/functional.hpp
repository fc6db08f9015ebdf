#pragma once
// Functional derivatives built on the engine, like torch.autograd.functional: vector-Jacobian and
// Jacobian-vector products, whole Jacobians, Hessian-vector products and Hessians.
//
// Cost notes (F = one forward pass, B = one backward pass, a small multiple of F):
// - vjp: F + B.
// - jacobian: F + m B, m = the number of output elements (the graph is kept between them), so it
//   suits few outputs and many inputs, or small problems.
// - vhp, hvp: F + a create_graph backward (B, plus recording its graph) + a backward through that
//   recorded backward (about 2B): a few times the cost of one gradient, never the Hessian. hvp uses
//   the double-vjp construction below (one more backward than vhp, ~2B); for a twice continuously
//   differentiable function the Hessian is symmetric and vhp gives the same numbers cheaper.
// - hessian: F + a create_graph backward + n backwards through it, n = the inputs' total numel.
// - jvp: forward-mode product J v through the double-vjp construction: with u a dummy seed of the
//   output's shape, g(u) = J^T u is computed by a create_graph backward; g is linear in u and its
//   vjp with v is (J^T)^T v = J v. Cost F + about 3B, with no forward-mode machinery in the ops.
//   Why not a true forward mode: every op would need a second (tangent) rule, and the ops'
//   differentiable backwards (Note [Create graph] in core/autograd.hpp) already give J v; a
//   tangent-mode pass would cost about one forward less and is left for when a measurement shows
//   jvp on a hot path.
// All second-order functions need every op on the way to support create_graph; an op that does not
// raises an xgrad::Error naming it (docs/concepts.md lists them).
#include "xgrad/core/std_function.hpp"
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

/// fn(inputs) and sum_i J_i v_i, the
/// Jacobian-vector product (forward-mode derivative along v), of the output's shape. v has one
/// tensor per input, of its shape (torch.autograd.functional.jvp). Double-vjp construction (cost
/// notes above). Errors: v's count, shapes or dtypes differ from the inputs'.
std::pair<Tensor, Tensor> jvp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs, const Tensors& v);

/// For a scalar (one-element) fn: its value and v^T H, one tensor per input, H the Hessian with
/// respect to all inputs together (torch.autograd.functional.vhp). v: one tensor per input.
std::pair<Tensor, Tensors> vhp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                               const Tensors& v);

/// For a scalar fn: its value and H v (torch.autograd.functional.hvp), by the double-vjp
/// construction, so it is H v even where H is not symmetric. Same arguments as vhp.
std::pair<Tensor, Tensors> hvp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                               const Tensors& v);

/// The Hessian of a scalar fn: result[i][j] has shape inputs[i].shape + inputs[j].shape, entry
/// [a..., b...] = d^2 fn / d in_i[a...] d in_j[b...] (torch.autograd.functional.hessian, tuple of
/// tuples), in the inputs' dtype.
std::vector<Tensors> hessian(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs);

}  // namespace xgrad
