#pragma once
// apply_fused: one op given as a fast kernel and as a formula of differentiable ops, run as the
// kernel unless its result will be differentiated (Note [Fused ops]).
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "xgrad/core/autograd.hpp"

namespace xgrad {

// Note [Fused ops]: a backward is written once, as a call of a backward op (named
// `<op>_backward` or `<op>_backward_<input>`), and the backward op decides how it runs. Either it
// is a Function called through apply (conv's input gradient is a transposed convolution whose own
// backward is conv again), or, where the next derivative has no such closed form (losses,
// normalisation, softmax, recurrent cells, pointwise derivatives), it is a struct with two static
// members of the same signature:
//
//   struct MseLossBackward {
//     static constexpr const char* kName = "mse_loss_backward";
//     static Tensor kernel(const Tensor& g, const Tensor& x, const Tensor& t);   // fused loops
//     static Tensor formula(const Tensor& g, const Tensor& x, const Tensor& t);  // public ops
//   };
//   ... Tensors backward(const Tensors& grads) { return {apply_fused<MseLossBackward>(grads[0], x, t)}; }
//
// apply_fused runs `kernel` (in no-grad mode, under the op's name for error messages) when no node
// would be recorded: grad mode is off, as in every first-order backward, or no tensor argument
// requires grad. Otherwise it runs `formula`, whose ops record themselves, so the result can be
// differentiated to any order. The kernel is the formula computed faster; the op table checks that
// they agree (first-order gradients from the kernel against create_graph gradients from the
// formula) and gradgradcheck differentiates the formula against differences of the kernel.
// torch's `CompositeImplicitAutograd` decompositions with fused fast paths are the same idea.

namespace detail {
/// "<F::kName>_backward" as a constant: the name of a backward op named after its op.
template <class F>
struct BackwardName {
  static constexpr std::size_t kLen = std::char_traits<char>::length(F::kName);
  static constexpr std::array<char, kLen + sizeof("_backward")> kValue = [] {
    std::array<char, kLen + sizeof("_backward")> out{};
    const char* suffix = "_backward";
    for (std::size_t i = 0; i < kLen; ++i) out[i] = F::kName[i];
    for (std::size_t i = 0; suffix[i] != 0; ++i) out[kLen + i] = suffix[i];
    return out;
  }();
};
}  // namespace detail

/// The requirements of apply_fused<F>(args...): a name, and a kernel and a formula that take the
/// same arguments and return the same type (Tensor or Tensors).
template <class F, class... Args>
concept FusedOpType = HasOpName<F> && requires(Args&&... args) {
  { F::kernel(std::forward<Args>(args)...) } -> TensorOrTensors;
  { F::formula(std::forward<Args>(args)...) } -> TensorOrTensors;
} && std::same_as<decltype(F::kernel(std::declval<Args>()...)), decltype(F::formula(std::declval<Args>()...))>;

/// Runs F::kernel(args...) when nothing would be recorded (grad mode off, or no tensor argument
/// requires grad), else F::formula(args...), which records its ops (Note [Fused ops]).
template <class F, class... Args>
requires FusedOpType<F, Args...>
auto apply_fused(Args&&... args) {
  detail::InputList inputs;
  (detail::collect_input(inputs, args), ...);
  if (GraphBuilder::should_record(inputs.span())) return F::formula(std::forward<Args>(args)...);
  NoGradGuard guard;
  detail::CurrentOpGuard op_name(F::kName);
  return F::kernel(std::forward<Args>(args)...);
}

/// The backward op of a Function whose kernel and formula are its own members, so that they can
/// read its state (geometry, statistics, which inputs need gradients):
///
///   Tensors backward_kernel(const Tensor& g, const Tensors& s);   // fused loops
///   Tensors backward_formula(const Tensor& g, const Tensors& s);  // public ops
///   Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<Self>>(*this, grads[0], saved()); }
///
/// Pass every tensor the formula reads (saved tensors too) as an argument: apply_fused looks at
/// them to decide whether the result will be differentiated. Named `<op>_backward`.
template <class Op>
struct BackwardOf {
  static constexpr const char* kName = detail::BackwardName<Op>::kValue.data();
  template <class... A>
  static auto kernel(Op& op, A&&... a) {
    return op.backward_kernel(std::forward<A>(a)...);
  }
  template <class... A>
  static auto formula(Op& op, A&&... a) {
    return op.backward_formula(std::forward<A>(a)...);
  }
};

}  // namespace xgrad
