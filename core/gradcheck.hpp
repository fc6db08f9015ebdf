#pragma once
// Finite-difference gradient checks (central differences), like torch.autograd.gradcheck and
// gradgradcheck.
#include <cstdint>
#include <string>

#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

struct GradcheckOptions {
  double eps = 1e-6;   // perturbation
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
};

struct GradcheckReport {
  bool ok = true;
  double max_abs_error = 0.0;  // over all checked entries
  // The worst entry: input index, flat element index of that input, flat output index.
  std::size_t worst_input = 0;
  std::int64_t worst_element = 0;
  std::int64_t worst_output = 0;
  double analytic = 0.0;
  double numeric = 0.0;
  std::string message;  // human-readable summary naming the worst element
};

/// Compares the Jacobian from backward() with central differences, entry by entry, for every input
/// that requires grad. Inputs must be float64 (an Error otherwise: float32 differences are too
/// coarse to check anything). `fn` may return a tensor of any shape. The inputs' values are
/// restored afterwards.
GradcheckReport gradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                          const GradcheckOptions& options = {});

/// Second-order check, like torch.autograd.gradgradcheck: gradcheck of the function
///   G(inputs, v) = grad(fn(inputs), inputs that require grad, v, create_graph=true)
/// (all those gradients flattened into one vector, zeros for an input fn does not use), with
/// respect to the inputs that require grad and to v, the seed of fn's output. v is a fixed
/// pseudo-random tensor of the output's shape (values in [-1, 1], from `seed`); it is checked as an
/// input too, as torch does. Float64 only. Every op on the way must support create_graph (Note
/// [Create graph] in core/autograd.hpp); one that does not makes this throw its xgrad::Error.
GradcheckReport gradgradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                              const GradcheckOptions& options = {}, std::uint64_t seed = 0);

}  // namespace xgrad
