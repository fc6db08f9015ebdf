#pragma once
// Internal: Pointwise<Op>, the autograd Function of the unary pointwise ops of ops/unary_math.hpp and
// ops/activation.hpp and ops/elementwise.hpp (sin, erf, gelu, softplus, exp, relu, ...), used by
// ops/unary_math.cpp, ops/activation.cpp and ops/elementwise.cpp.
//
// Note [One formula]: an op states its forward f and its derivative df once, as templates over a
// value type V. The same df is instantiated with xsimd batches (the fused backward kernel of a
// first-order backward) and with Tensor (a create_graph backward: the formula recorded with the
// public ops, so the op is differentiable to any order by construction; Note [Create graph] in
// core/autograd.hpp). The formulas are written in the vocabulary of namespace pw below (pw::exp,
// pw::select, lit, ...), which has one overload per kind of V, and with + - * / and comparisons,
// which both kinds have. f runs on batches only: a forward is never recorded (Pointwise records one
// node for it).
//
// Forward and backward kernels run xsimd batches over fixed kParallelGrain chunks, the tail of each
// chunk through the same vector code (Note [Vector tails] in vec_kernel.hpp), so every element's
// value is the same whatever the thread count. The binary ops (atan2, fmod, remainder) reuse
// Binary<Op> of elementwise_impl.hpp.
//
// An Op derives from Def<"name", saves, Params> (below), which gives
//   kName                       the op's name (errors, node name)
//   kSaves                      what backward reads: Saves::input (x), Saves::output (y) or
//                               Saves::nothing (the gradient is 0, g itself with kPassGrad, or df
//                               of g alone)
//   Params                      the op's numbers (NoParams when none), taken in the tensor's dtype
// and states its formulas as generic lambdas:
//   f(x, p)                     y, x a batch (kScalarLoop: an element, scalar loops forward and
//                               backward, for fmod and remainder by a number)
//   df(g, s, p)                 dx, g and s batches, elements or Tensors; s the saved x or y
//   kPassGrad (optional)        dx = g (fmod and remainder by a number)
// Every op instantiates xsimd's math for two dtypes: an op file of many ops is among the library's
// slowest to compile (docs/design.md, Compile time).
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad::detail::pw {

struct NoParams {};
enum class Saves { nothing, input, output };

/// A string literal as a template argument: Def<"sin"> (C++20 class-type template parameter).
template <std::size_t N>
struct OpName {
  char text[N];
  constexpr OpName(const char (&s)[N]) {  // NOLINT(google-explicit-constructor): Def<"sin">
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};

/// What every pointwise op states besides its formulas, in one line:
///   struct SinOp : pw::Def<"sin", Saves::input> {
///     static constexpr auto f = [](const auto& x, const Params&) { return pw::sin(x); };
///     static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::cos(x); };
///   };
/// f and df are generic lambdas: one definition, instantiated with batches, elements and tensors
/// (Note [One formula]).
template <OpName Name, Saves S = Saves::nothing, class P = NoParams>
struct Def {
  static constexpr const char* kName = Name.text;
  static constexpr Saves kSaves = S;
  using Params = P;
};

// ---- the vocabulary: one overload for batches, one for tensors ----------------------------------
template <class V>
concept Batch = requires {
  typename V::batch_bool_type;
};

template <Batch B>
using elem_t = typename B::value_type;

/// The number c as x's kind: a batch of c in x's element type, or a 0-d tensor of x's dtype.
template <Batch B>
inline B lit(const B&, double c) {
  return B(static_cast<elem_t<B>>(c));
}
inline Tensor lit(const Tensor& like, double c) { return Tensor::full({}, c, like.dtype()); }
template <std::floating_point T>
[[gnu::always_inline]] inline T lit(T, double c) {
  return static_cast<T>(c);
}

/// Zeros of g's kind and shape (a constant: no history).
template <Batch B>
inline B zeros_like(const B&) {
  return B(elem_t<B>(0));
}
inline Tensor zeros_like(const Tensor& g) { return Tensor::zeros(g.shape(), g.dtype()); }
template <std::floating_point T>
[[gnu::always_inline]] inline T zeros_like(T) {
  return T(0);
}

/// m ? a : b, elementwise (m from a comparison: a batch mask, or a bool tensor without history).
template <class M, Batch B>
inline B select(const M& m, const B& a, const B& b) {
  return xsimd::select(m, a, b);
}
inline Tensor select(const Tensor& m, const Tensor& a, const Tensor& b) { return where(m, a, b); }
/// On one element, as bit masks rather than `m ? a : b`: GCC compiles the ternary of floats to a branch,
/// which random data mispredicts (maximum's backward measured several times slower;
/// bench/results/tuning_notes.md, "Branch-free select") and which stops the loop
/// from being vectorised; the masks vectorise.
template <std::floating_point T>
[[gnu::always_inline]] inline T select(bool m, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const U mask = U(0) - static_cast<U>(m);
  return std::bit_cast<T>((std::bit_cast<U>(a) & mask) | (std::bit_cast<U>(b) & ~mask));
}

/// f applied to each lane with the C library's scalar function, for the functions whose xsimd
/// version is not accurate enough (measured in tests/ops/test_unary_math.cpp: xsimd 8's erf is off by
/// up to 67 ulp in float64, its erfc by up to 71 ulp in float32 and 1e5 ulp in float64).
template <Batch B, class F>
inline B lanewise(const B& x, F f) {
  alignas(64) elem_t<B> buf[B::size];
  x.store_aligned(buf);
  for (auto& v : buf) v = f(v);
  return B::load_aligned(buf);
}

#define XGRAD_PW_FUNCTION(name, batch_expr) \
  template <Batch B>                        \
  inline B name(const B& x) {               \
    return batch_expr;                      \
  }                                         \
  inline Tensor name(const Tensor& x) { return xgrad::name(x); }
XGRAD_PW_FUNCTION(exp, xsimd::exp(x))
XGRAD_PW_FUNCTION(log, xsimd::log(x))
XGRAD_PW_FUNCTION(log1p, xsimd::log1p(x))
XGRAD_PW_FUNCTION(expm1, xsimd::expm1(x))
XGRAD_PW_FUNCTION(log2, xsimd::log2(x))
XGRAD_PW_FUNCTION(log10, xsimd::log10(x))
XGRAD_PW_FUNCTION(sqrt, xsimd::sqrt(x))
XGRAD_PW_FUNCTION(tanh, xsimd::tanh(x))
XGRAD_PW_FUNCTION(sin, xsimd::sin(x))
XGRAD_PW_FUNCTION(cos, xsimd::cos(x))
XGRAD_PW_FUNCTION(tan, xsimd::tan(x))
XGRAD_PW_FUNCTION(asin, xsimd::asin(x))
XGRAD_PW_FUNCTION(acos, xsimd::acos(x))
XGRAD_PW_FUNCTION(atan, xsimd::atan(x))
XGRAD_PW_FUNCTION(sinh, xsimd::sinh(x))
XGRAD_PW_FUNCTION(cosh, xsimd::cosh(x))
XGRAD_PW_FUNCTION(abs, xsimd::abs(x))
XGRAD_PW_FUNCTION(sigmoid, B(elem_t<B>(1)) / (B(elem_t<B>(1)) + xsimd::exp(-x)))  // e^-z = inf gives 0
#undef XGRAD_PW_FUNCTION

/// ln(1 + e^z) = max(z, 0) + ln(1 + e^-|z|): no overflow (no threshold: the tensor form passes an
/// infinite one to softplus).
template <Batch B>
inline B softplus(const B& x) {
  return xsimd::max(x, B(elem_t<B>(0))) + xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
}
inline Tensor softplus(const Tensor& x) { return xgrad::softplus(x, 1.0, INFINITY); }

/// erf within a few ulp: xsimd's in float32 (2 ulp), the C library's in float64.
template <Batch B>
inline B erf(const B& x) {
  if constexpr (std::is_same_v<elem_t<B>, float>) {
    return xsimd::erf(x);
  } else {
    return lanewise(x, [](elem_t<B> v) { return std::erf(v); });
  }
}
inline Tensor erf(const Tensor& x) { return xgrad::erf(x); }

/// x^k for a number k: the C library's pow, lane by lane (what pow by a number always computed).
template <Batch B>
inline B pow(const B& x, double k) {
  return lanewise(x, [k](elem_t<B> v) { return std::pow(v, static_cast<elem_t<B>>(k)); });
}
inline Tensor pow(const Tensor& x, double k) { return xgrad::pow(x, k); }

// One element (the broadcasting kernels of the binary ops) and tensors.
template <std::floating_point T, std::floating_point K>
inline T pow(T a, K b) {  // b: the other element, or the number of pow by a number
  return std::pow(a, static_cast<T>(b));
}
inline Tensor pow(const Tensor& a, const Tensor& b) { return xgrad::pow(a, b); }
template <std::floating_point T>
inline T log(T x) {
  return std::log(x);
}
template <std::floating_point T>
inline T trunc(T x) {
  return std::trunc(x);
}
inline Tensor trunc(const Tensor& x) { return xgrad::trunc(x); }
template <std::floating_point T>
inline T floor(T x) {
  return std::floor(x);
}
inline Tensor floor(const Tensor& x) { return xgrad::floor(x); }

/// min(x, c) and max(x, c) for a number c (NaN propagates from x, as xsimd's and torch's).
template <Batch B>
inline B min(const B& x, double c) {
  return xsimd::min(x, lit(x, c));
}
inline Tensor min(const Tensor& x, double c) { return minimum(x, lit(x, c)); }

// ---- the Function -------------------------------------------------------------------------------

/// Refuses number arguments of a pointwise op that are NaN and, for a pair of bounds, lo > hi
/// (clamp, hardtanh): the message names the op, the arguments, their values and x's shape.
inline void check_number(const char* op, const char* arg, const Tensor& x, double v) {
  XGRAD_CHECK(!std::isnan(v), "{}: argument '{}' is NaN (x has shape {})", op, arg,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}
inline void check_bounds(const char* op, const char* lo_arg, double lo, const char* hi_arg, double hi,
                         const Tensor& x) {
  check_number(op, lo_arg, x, lo);
  check_number(op, hi_arg, x, hi);
  XGRAD_CHECK(lo <= hi, "{}: argument '{}' ({}) must be <= '{}' ({}) (x has shape {})", op, lo_arg, lo, hi_arg, hi,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

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
constexpr bool pass_grad() {
  if constexpr (requires { Op::kPassGrad; })
    return Op::kPassGrad;
  else
    return false;
}
template <class Op>
constexpr bool has_df() {
  return requires(const Tensor& t, const typename Op::Params& q) { Op::df(t, t, q); };
}
template <class Op>
constexpr bool scalar_loop() {
  if constexpr (requires { Op::kScalarLoop; })
    return Op::kScalarLoop;
  else
    return false;
}
// An op whose scalar loop is faster for some parameters (pow: the C library's pow one element at a
// time beats it lane by lane) says so with `static bool scalar_loop(const Params&)`.
template <class Op>
constexpr bool may_scalar_loop() {
  return requires(const typename Op::Params& q) { Op::scalar_loop(q); };
}

// Runs scalar(b, e) or vector(b, e) (generic lambdas: only the one called is instantiated, so their
// bodies must depend on b or e: an op's f, a lambda with a deduced return type, does not compile on
// one element unless the op runs a scalar loop) over
// [0, n) in parallel: the scalar loop for kScalarLoop ops and where Op::scalar_loop(p) asks for it.
template <class Op, class Scalar, class Vector>
void run_loops(std::int64_t n, const typename Op::Params& p, const Scalar& scalar, const Vector& vector) {
  if constexpr (scalar_loop<Op>()) {
    parallel_for(0, n, kParallelGrain, scalar);
  } else if constexpr (may_scalar_loop<Op>()) {
    if (Op::scalar_loop(p))
      parallel_for(0, n, kParallelGrain, scalar);
    else
      parallel_for(0, n, kParallelGrain, vector);
  } else {
    parallel_for(0, n, kParallelGrain, vector);
  }
}

template <class Op>
Tensor forward_map(const Tensor& x, const typename Op::Params& p) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(Op::kName, x, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    run_loops<Op>(
        x.numel(), p,
        [&](auto b, auto e) {
          for (auto i = b; i < e; ++i) o[i] = Op::f(xp[i], p);
        },
        [&](auto b, auto e) {
          detail::vec_map<T>(
              e - b, o + b, [&](const auto& v) { return Op::f(v, p); }, xp + b);
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
    run_loops<Op>(
        g.numel(), p,
        [&](auto b, auto e) {
          for (auto i = b; i < e; ++i) o[i] = Op::df(gp[i], sp[i], p);
        },
        [&](auto b, auto e) {
          detail::vec_map<T>(
              e - b, o + b, [&](const auto& gv, const auto& sv) { return Op::df(gv, sv, p); }, gp + b, sp + b);
        });
  });
  return out;
}

/// `<op>_backward`: Op::df(g, s; params) as the SIMD kernel, or on tensors when it will be
/// differentiated again (Note [Fused ops] in core/fused.hpp, Note [One formula]).
template <class Op>
struct PointwiseBackward {
  static constexpr const char* kName = BackwardName<Op>::kValue.data();
  static Tensor kernel(const Tensor& g, const Tensor& s, const typename Op::Params& p) {
    return backward_map<Op>(g, s, p);
  }
  static Tensor formula(const Tensor& g, const Tensor& s, const typename Op::Params& p) { return Op::df(g, s, p); }
};

/// y = Op::f(x; params); dx = Op::df(g, x or y; params) (or 0, or g). Note [One formula].
template <class Op>
struct Pointwise : Function<Pointwise<Op>> {
  static constexpr const char* kName = Op::kName;
  static constexpr bool kDifferentiableBackward = true;  // Note [One formula]: df with tensors
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
    if constexpr (Op::kSaves == Saves::nothing && pass_grad<Op>()) {
      return {g};
    } else if constexpr (Op::kSaves == Saves::nothing && !has_df<Op>()) {
      return {Tensor::zeros(g.shape(), g.dtype())};
    } else if constexpr (Op::kSaves == Saves::nothing) {  // df of g alone (neg): g stands in for s
      return {apply_fused<PointwiseBackward<Op>>(g, g, p)};
    } else {
      return {apply_fused<PointwiseBackward<Op>>(g, this->saved(0), p)};
    }
  }
};

template <class Op>
Tensor run(const Tensor& x, const typename Op::Params& p = {}) {
  return apply<Pointwise<Op>>(x, p);
}

/// What a file that defines Pointwise ops writes them in: `using namespace detail::pw::words;` in its
/// anonymous namespace brings lit, select, Saves, NoParams and the namespace name pw (pw::exp, ...).
namespace words {
namespace pw = ::xgrad::detail::pw;
using pw::check_bounds;
using pw::check_number;
using pw::Def;
using pw::lit;
using pw::NoParams;
using pw::Saves;
using pw::select;
}  // namespace words

}  // namespace xgrad::detail::pw
