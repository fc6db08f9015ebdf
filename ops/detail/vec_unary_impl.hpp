#pragma once
// Internal: the autograd Function behind the vectorised unary ops of ops/unary_math.hpp and
// ops/activation.hpp (sin, erf, gelu, softplus, ...), used by ops/unary_math.cpp, ops/activation.cpp
// and ops/detail/unary_math_*.cpp. Forward and backward both run xsimd batches over fixed
// kParallelGrain chunks, the tail of each chunk through the same vector code (Note [Vector tails] in
// vec_kernel.hpp), so every element's value is the same whatever the thread count. The binary ops
// (atan2, fmod, remainder) reuse Binary<Op> of elementwise_impl.hpp.
//
// An Op supplies:
//   kName                       the op's name (errors, node name)
//   kSaves                      what backward reads: Saves::input (x), Saves::output (y) or
//                               Saves::nothing (the gradient is 0, or g itself with kPassGrad)
//   Params                      the op's numbers (NoParams when none), taken in the tensor's dtype
//   vf(x, p)                    y on an xsimd batch,   or   f(x, p) on one element (scalar loop)
//   vdf(g, s, p)                dx on batches, s the saved x or y (absent when kSaves is nothing)
//   kPassGrad (optional)        dx = g (fmod and remainder by a number)
// Note [Elementwise build time] (elementwise_impl.hpp) applies: every op instantiates xsimd's math
// for two dtypes, so the ops are spread over a few files.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/detail/vec_kernel.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad::detail::vu {

struct NoParams {};
enum class Saves { nothing, input, output };

/// Runs fn(type_tag<T>) for a floating dtype; any other dtype is an error naming the op.
template <class Fn>
void dispatch_floating(const char* op, const Tensor& x, Fn&& fn) {
  if (x.dtype() == kFloat32) {
    fn(type_tag<float>{});
  } else {
    XGRAD_CHECK(x.dtype() == kFloat64, "{}: x has dtype {} {}; only float32 and float64 are supported", op, x.dtype(),
                shape_str(x.shape()));
    fn(type_tag<double>{});
  }
}

template <class Op>
concept HasVf = requires(xsimd::batch<float> v, typename Op::Params p) {
  Op::vf(v, p);
};

template <class Op>
constexpr bool pass_grad() {
  if constexpr (requires { Op::kPassGrad; })
    return Op::kPassGrad;
  else
    return false;
}

template <class Op>
Tensor forward_map(const Tensor& x, const typename Op::Params& p) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(Op::kName, x, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      if constexpr (HasVf<Op>) {
        detail::vec_map<T>(
            e - b, o + b, [&](const auto& v) { return Op::vf(v, p); }, xp + b);
      } else {
        for (std::int64_t i = b; i < e; ++i) o[i] = Op::f(xp[i], p);
      }
    });
  });
  return out;
}

template <class Op>
Tensor backward_map(const Tensor& g, const Tensor& s, const typename Op::Params& p) {
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  dispatch_floating(Op::kName, g, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gp = g.data<T>();
    const T* sp = s.data<T>();
    T* o = out.data<T>();
    parallel_for(0, g.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      detail::vec_map<T>(
          e - b, o + b, [&](const auto& gv, const auto& sv) { return Op::vdf(gv, sv, p); }, gp + b, sp + b);
    });
  });
  return out;
}

/// y = Op(x; params); dx from Op::vdf (or 0, or g).
template <class Op>
struct VecUnary : Function<VecUnary<Op>> {
  static constexpr const char* kName = Op::kName;
  // Note [Create graph]: a constant (zero) or pass-through gradient is differentiable as it is; an
  // op with a saved tensor is when it gives its derivative with public ops, as
  //   static Tensor recorded_df(const Tensor& g, const Tensor& saved, const Params& p);
  static constexpr bool kDifferentiableBackward =
      Op::kSaves == Saves::nothing || requires(const Tensor& t, const typename Op::Params& q) {
    Op::recorded_df(t, t, q);
  };
  typename Op::Params p{};
  Tensor forward(const Tensor& x, const typename Op::Params& params) {
    XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", Op::kName);
    check_floating(Op::kName, "x", x);
    p = params;
    Tensor y = forward_map<Op>(x, p);
    if (this->needs_input_grad(0)) {
      if constexpr (Op::kSaves == Saves::input) this->save_for_backward({x});
      if constexpr (Op::kSaves == Saves::output) this->save_for_backward({y});
    }
    return y;
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    if constexpr (Op::kSaves == Saves::nothing) {
      if constexpr (pass_grad<Op>()) return {g};
      return {Tensor::zeros(g.shape(), g.dtype())};
    } else {
      if constexpr (kDifferentiableBackward)
        if (GradMode::is_enabled()) return {Op::recorded_df(g, this->saved(0), p)};
      return {backward_map<Op>(g, this->saved(0), p)};
    }
  }
};

template <class Op>
Tensor run(const Tensor& x, const typename Op::Params& p = {}) {
  return apply<VecUnary<Op>>(x, p);
}

// Batch helpers: B is an xsimd batch, T its element type.
template <class B>
using elem_t = typename B::value_type;

/// f applied to each lane with the C library's scalar function, for the functions whose xsimd
/// version is not accurate enough (measured in tests/ops/test_unary_math.cpp: xsimd 8's erf is off by
/// up to 67 ulp in float64, its erfc by up to 71 ulp in float32 and 1e5 ulp in float64).
template <class B, class F>
inline B lanewise(const B& x, F f) {
  alignas(64) elem_t<B> buf[B::size];
  x.store_aligned(buf);
  for (auto& v : buf) v = f(v);
  return B::load_aligned(buf);
}

/// erf within a few ulp: xsimd's in float32 (2 ulp), the C library's in float64.
template <class B>
inline B verf(const B& x) {
  if constexpr (std::is_same_v<elem_t<B>, float>) {
    return xsimd::erf(x);
  } else {
    return lanewise(x, [](elem_t<B> v) { return std::erf(v); });
  }
}

/// sigmoid(z) = 1/(1 + e^-z): no overflow (e^-z = inf gives 0).
template <class B>
inline B vsigmoid(const B& z) {
  return B(elem_t<B>(1)) / (B(elem_t<B>(1)) + xsimd::exp(-z));
}

/// ln(1 + e^z) = max(z, 0) + ln(1 + e^-|z|): no overflow.
template <class B>
inline B vsoftplus(const B& z) {
  return xsimd::max(z, B(elem_t<B>(0))) + xsimd::log1p(xsimd::exp(-xsimd::abs(z)));
}

}  // namespace xgrad::detail::vu
