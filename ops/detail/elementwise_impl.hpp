#pragma once
// Internal: the kernels and autograd Functions of the elementwise ops (ops/elementwise.hpp), shared by
// the files that define the ops: ops/elementwise.cpp (add, sub, mul, div, pow), and in ops/detail/
// elementwise_compare.cpp (maximum, minimum, where, masked_select, comparisons),
// elementwise_dtype.cpp (the integer and bool kernels, comparisons, logical ops),
// elementwise_unary.cpp (neg, exp, log, sqrt, scalar forms) and elementwise_unary2.cpp (abs, tanh,
// sigmoid, relu, pow by a number, clamp; the unary ones as Pointwise<Op>, ops/detail/pointwise.hpp). Note [Elementwise
// build time]: one file instantiated every op for both dtypes and both broadcast paths (40 s to compile); four files
// build in parallel and each stays well under 15 s. The arithmetic is the same code in every file.
#include <cmath>
#include <limits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/ops/detail/broadcast_kernel.hpp"
#include "xgrad/ops/detail/gather_map.hpp"
#include "xgrad/ops/detail/reduce_kernel.hpp"
#include "xgrad/ops/detail/vec_kernel.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad::detail::ew {

// The float kernels' entry checks: defined, floating point (check_floating names the op and the
// argument), and one dtype for both operands.
inline void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  XGRAD_CHECK(a.defined() && b.defined(), "{}: argument '{}' is an undefined tensor", op, a.defined() ? "b" : "a");
  check_floating(op, "a", a);
  check_floating(op, "b", b);
  XGRAD_CHECK(a.dtype() == b.dtype(), "{}: dtype mismatch: a is {} {}, b is {} {} (convert one with .to())", op,
              a.dtype(), shape_str(a.shape()), b.dtype(), shape_str(b.shape()));
}

inline void check_unary(const char* op, const Tensor& x) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", op);
  check_floating(op, "x", x);
}

// ---- integer and bool dtypes (ops/detail/elementwise_dtype.cpp) ---------------------------------
// Note [Integer promotion]: a binary op with an integer or bool operand computes in
// promote_types(a, b) (core/dtype.hpp). When that is a float dtype, the integer operand is converted
// and the float kernel runs (differentiable in the float operand); otherwise the integer kernels
// below run, without autograd (integer tensors have no gradient). Two float operands of different
// dtypes stay an error, as before. Integer arithmetic wraps around like PyTorch's (two's complement).
inline bool involves_integer(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && (!is_floating_point(a.dtype()) || !is_floating_point(b.dtype()));
}
// float32 with float64 (add, sub, mul, div, pow, maximum, minimum): both computed in float64, as
// torch promotes (the float32 operand is converted with the differentiable .to(), so its gradient
// comes back in float32).
inline bool mixed_float(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() != b.dtype() && is_floating_point(a.dtype()) &&
         is_floating_point(b.dtype());
}
enum class IntKind { add, sub, mul, maximum, minimum };
/// a (op) b, a and b of the same integer or bool dtype, broadcast. bool: add = or, mul = and.
Tensor int_binary(IntKind k, const char* op, const Tensor& a, const Tensor& b);
/// The public binary arithmetic op on an integer operand: promotes (Note [Integer promotion]);
/// `floating` runs the float op on the promoted operands.
Tensor int_promoted_binary(IntKind k, const char* op, const Tensor& a, const Tensor& b,
                           Tensor (*floating)(const Tensor&, const Tensor&));
/// a (op) s for an integer or bool tensor and a number (the scalar forms; the rule is in
/// ops/elementwise.hpp): integer arithmetic when s is a whole number, else float32.
Tensor int_scalar(IntKind k, const char* op, const Tensor& a, double s, Tensor (*floating)(const Tensor&, double));
/// -x and |x| of an integer tensor (bool is refused, as in PyTorch).
Tensor int_neg(const Tensor& x);
Tensor int_abs(const Tensor& x);
/// where(cond, a, b) for a and b of one integer or bool dtype (no gradient).
Tensor where_integer(const Tensor& cond, const Tensor& a, const Tensor& b);
enum class CmpKind { gt, lt, ge, le, eq, ne };
/// a (cmp) b as bool, any dtypes (compared in promote_types(a, b)), broadcast.
Tensor compare_any(CmpKind k, const char* op, const Tensor& a, const Tensor& b);

// out = f(a, b) over the broadcast shape.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, const Shape& out_shape, F f) {
  Tensor out = Tensor::empty(out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::broadcast_map<T, 2>(out.data<T>(), out_shape, {a.data<T>(), b.data<T>()}, {&a.shape(), &b.shape()},
                                [&](T x, T y) { return f(x, y); });
  });
  return out;
}

template <class F>
Tensor map3(const Tensor& a, const Tensor& b, const Tensor& c, const Shape& out_shape, F f) {
  Tensor out = Tensor::empty(out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::broadcast_map<T, 3>(out.data<T>(), out_shape, {a.data<T>(), b.data<T>(), c.data<T>()},
                                {&a.shape(), &b.shape(), &c.shape()}, [&](T x, T y, T z) { return f(x, y, z); });
  });
  return out;
}

template <class F>
Tensor map1(const Tensor& x, F f) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    T* o = out.data<T>();
    parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) o[i] = f(p[i]);
    });
  });
  return out;
}

// ---- binary ops -------------------------------------------------------------------------------
// Each Op supplies f(a, b), and the partial derivatives da(g, a, b, y) and db(g, a, b, y).
// kSaves says whether backward needs a and b (and the output y).
struct AddOp {
  static constexpr const char* kName = "add";
  static constexpr bool kSavesInputs = false, kSavesOutput = false;
  template <class T>
  static T f(T a, T b) {
    return a + b;
  }
};
struct SubOp {
  static constexpr const char* kName = "sub";
  static constexpr bool kSavesInputs = false, kSavesOutput = false;
  template <class T>
  static T f(T a, T b) {
    return a - b;
  }
};
struct MulOp {
  static constexpr const char* kName = "mul";
  static constexpr bool kSavesInputs = true, kSavesOutput = false;
  template <class T>
  static T f(T a, T b) {
    return a * b;
  }
  template <class T>
  static T da(T g, T, T b, T) {
    return g * b;
  }
  template <class T>
  static T db(T g, T a, T, T) {
    return g * a;
  }
};
struct DivOp {
  static constexpr const char* kName = "div";
  static constexpr bool kSavesInputs = true, kSavesOutput = false;
  template <class T>
  static T f(T a, T b) {
    return a / b;
  }
  template <class T>
  static T da(T g, T, T b, T) {
    return g / b;
  }
  template <class T>
  static T db(T g, T a, T b, T) {
    return -g * a / (b * b);
  }
};
struct PowOp {
  static constexpr const char* kName = "pow";
  static constexpr bool kSavesInputs = true, kSavesOutput = true;
  template <class T>
  static T f(T a, T b) {
    return std::pow(a, b);
  }
  template <class T>
  static T da(T g, T a, T b, T) {
    return b == T(0) ? T(0) : g * b * std::pow(a, b - T(1));
  }
  template <class T>
  static T db(T g, T a, T, T y) {
    return a == T(0) ? T(0) : g * y * std::log(a);
  }
};
// maximum/minimum propagate NaN from either side, as torch does: `a` is chosen when it wins, ties,
// or is NaN (a != a); otherwise `b` (which may be NaN) is chosen.
// Note [Tie rules]: the gradient follows torch's derivatives.yaml, not the choice of the value: at a
// tie (a == b) each side gets half of g; otherwise the side that lost gets 0 and the other g; when
// either is NaN, no comparison holds and both get g. share_a is a's weight (1, 1/2 or 0), b's is
// share_a(b, a) for maximum (and the same with the roles of < and > swapped for minimum). A weight of 0
// gives 0 even where g is infinite or NaN (torch's masked_fill_).
template <class T>
inline T weigh(T g, T share) {
  return share == T(0) ? T(0) : g * share;
}
struct MaxOp {
  static constexpr const char* kName = "maximum";
  static constexpr bool kSavesInputs = true, kSavesOutput = false;
  template <class T>
  static bool pick_a(T a, T b) {
    return a >= b || a != a;  // NOLINT(misc-redundant-expression): a != a is the NaN test
  }
  template <class T>
  static T share_a(T a, T b) {
    return a == b ? T(0.5) : a < b ? T(0) : T(1);
  }
  template <class T>
  static T f(T a, T b) {
    return pick_a(a, b) ? a : b;
  }
  template <class T>
  static T da(T g, T a, T b, T) {
    return weigh(g, share_a(a, b));
  }
  template <class T>
  static T db(T g, T a, T b, T) {
    return weigh(g, share_a(b, a));
  }
};
struct MinOp {
  static constexpr const char* kName = "minimum";
  static constexpr bool kSavesInputs = true, kSavesOutput = false;
  template <class T>
  static bool pick_a(T a, T b) {
    return a <= b || a != a;  // NOLINT(misc-redundant-expression): a != a is the NaN test
  }
  template <class T>
  static T share_a(T a, T b) {
    return a == b ? T(0.5) : a > b ? T(0) : T(1);
  }
  template <class T>
  static T f(T a, T b) {
    return pick_a(a, b) ? a : b;
  }
  template <class T>
  static T da(T g, T a, T b, T) {
    return weigh(g, share_a(a, b));
  }
  template <class T>
  static T db(T g, T a, T b, T) {
    return weigh(g, share_a(b, a));
  }
};

// Note [Small-op overhead]: the input shapes needed by backward come from the node's input_meta()
// (recorded by the engine anyway), the output shape is only computed when the inputs differ, and
// inputs are saved only when a node is recorded: each avoids heap allocations that dominate ops on
// tiny tensors.
// The weights of g for maximum/minimum's a (wrt_a) or b, of g's shape: 1, 1/2 or 0 (Note [Tie rules]),
// a constant of the gradient.
template <class Op>
Tensor share_mask(const Tensor& g, const Tensor& a, const Tensor& b, bool wrt_a) {
  return map3(g, a, b, g.shape(),
              [wrt_a](auto, auto av, auto bv) { return wrt_a ? Op::share_a(av, bv) : Op::share_a(bv, av); });
}

// An Op defined elsewhere (atan2, fmod, remainder in ops/unary_math.cpp) may give its partial
// derivatives with public ops itself, as
//   static Tensor recorded_partial(const Tensor& g, const Tensor& a, const Tensor& b, bool wrt_a);
template <class Op>
concept HasRecordedPartial = requires(const Tensor& t) {
  Op::recorded_partial(t, t, t, true);
};

// Note [Create graph]: in grad mode (a create_graph backward) the partial derivatives are recorded
// with the public ops: the same formulas as da/db.
template <class Op>
Tensor recorded_partial(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y, bool wrt_a) {
  if constexpr (HasRecordedPartial<Op>) {
    (void)y;
    return Op::recorded_partial(g, a, b, wrt_a);
  } else if constexpr (std::is_same_v<Op, MulOp>) {
    return xgrad::mul(g, wrt_a ? b : a);
  } else if constexpr (std::is_same_v<Op, DivOp>) {
    return wrt_a ? xgrad::div(g, b) : xgrad::div(xgrad::neg(xgrad::mul(g, a)), xgrad::mul(b, b));
  } else if constexpr (std::is_same_v<Op, PowOp>) {
    // torch's pow_backward: 0 where the exponent is 0 (da) or the base is 0 (db)
    if (wrt_a)
      return xgrad::mul(g, xgrad::masked_fill(xgrad::mul(b, xgrad::pow(a, xgrad::sub(b, 1.0))),
                                              xgrad::eq(b, Tensor::zeros({}, b.dtype())), 0.0));
    return xgrad::mul(
        g, xgrad::masked_fill(xgrad::mul(y, xgrad::log(a)), xgrad::eq(a, Tensor::zeros({}, a.dtype())), 0.0));
  } else {  // maximum, minimum
    const Tensor share = share_mask<Op>(g, a.detach(), b.detach(), wrt_a);
    return xgrad::masked_fill(xgrad::mul(g, share), xgrad::eq(share, Tensor::zeros({}, share.dtype())), 0.0);
  }
}

template <class Op>
struct Binary : Function<Binary<Op>> {
  static constexpr const char* kName = Op::kName;
  // Note [Create graph]: the ops of this file, and an Op built on Binary elsewhere when it gives
  // its recorded partials (HasRecordedPartial).
  static constexpr bool kDifferentiableBackward = std::is_same_v<Op, AddOp> || std::is_same_v<Op, SubOp> ||
                                                  std::is_same_v<Op, MulOp> || std::is_same_v<Op, DivOp> ||
                                                  std::is_same_v<Op, PowOp> || std::is_same_v<Op, MaxOp> ||
                                                  std::is_same_v<Op, MinOp> || HasRecordedPartial<Op>;
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_binary(Op::kName, a, b);
    const auto op = [](auto x, auto z) { return Op::f(x, z); };
    Tensor y = a.shape() == b.shape() ? map2(a, b, a.shape(), op)
                                      : map2(a, b, broadcast_shapes(a.shape(), b.shape(), Op::kName), op);
    if (this->needs_input_grad(0) || this->needs_input_grad(1)) {
      if constexpr (Op::kSavesInputs) this->save_for_backward({a, b});
      if constexpr (Op::kSavesOutput) this->save_for_backward({y});
    }
    return y;
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Shape& a_shape = this->input_meta()[0].shape;
    const Shape& b_shape = this->input_meta()[1].shape;
    Tensor ga, gb;
    if constexpr (kDifferentiableBackward && !std::is_same_v<Op, AddOp> && !std::is_same_v<Op, SubOp>) {
      if (GradMode::is_enabled()) {
        const Tensor a = this->saved(0);
        const Tensor b = this->saved(1);
        const Tensor y = Op::kSavesOutput ? this->saved(2) : Tensor();
        if (this->needs_input_grad(0)) ga = detail::sum_to(recorded_partial<Op>(g, a, b, y, true), a_shape);
        if (this->needs_input_grad(1)) gb = detail::sum_to(recorded_partial<Op>(g, a, b, y, false), b_shape);
        return {ga, gb};
      }
    }
    if constexpr (std::is_same_v<Op, AddOp>) {
      if (this->needs_input_grad(0)) ga = detail::sum_to(g, a_shape);
      if (this->needs_input_grad(1)) gb = detail::sum_to(g, b_shape);
    } else if constexpr (std::is_same_v<Op, SubOp>) {
      if (this->needs_input_grad(0)) ga = detail::sum_to(g, a_shape);
      if (this->needs_input_grad(1))
        gb = detail::sum_to(GradMode::is_enabled() ? xgrad::neg(g) : map1(g, [](auto v) { return -v; }), b_shape);
    } else {
      const Tensor a = this->saved(0);
      const Tensor b = this->saved(1);
      if (this->needs_input_grad(0))
        ga = detail::sum_to(
            map3(g, a, b, g.shape(), [&](auto gv, auto av, auto bv) { return Op::da(gv, av, bv, decltype(gv)(0)); }),
            a_shape);
      if (this->needs_input_grad(1)) {
        if constexpr (Op::kSavesOutput) {
          // db needs y: map over (g, a, y) with b read through a second pass.
          const Tensor y = this->saved(2);
          Tensor t =
              map3(g, a, y, g.shape(), [](auto gv, auto av, auto yv) { return Op::db(gv, av, decltype(gv)(0), yv); });
          gb = detail::sum_to(t, b_shape);
        } else {
          gb = detail::sum_to(
              map3(g, a, b, g.shape(), [&](auto gv, auto av, auto bv) { return Op::db(gv, av, bv, decltype(gv)(0)); }),
              b_shape);
        }
      }
    }
    return {ga, gb};
  }
};

// y = a (op) s for a number s (taken in a's dtype), with no 0-d tensor for s: the scalar forms
// add/sub/mul/div(a, double) and s / b. Values and gradients are bit-identical to the broadcast
// tensor form (same float operations in the same order).
enum class ScalarKind { add, sub, mul, div, rdiv };
template <ScalarKind K>
struct ScalarOp : Function<ScalarOp<K>> {
  static constexpr const char* kName = K == ScalarKind::add   ? "add"
                                       : K == ScalarKind::sub ? "sub"
                                       : K == ScalarKind::mul ? "mul"
                                                              : "div";
  static constexpr bool kDifferentiableBackward = true;
  double s = 0;
  template <class T>
  static T f(T a, T sv) {
    if constexpr (K == ScalarKind::add) return a + sv;
    if constexpr (K == ScalarKind::sub) return a - sv;
    if constexpr (K == ScalarKind::mul) return a * sv;
    if constexpr (K == ScalarKind::div) return a / sv;
    if constexpr (K == ScalarKind::rdiv) return sv / a;
  }
  Tensor forward(const Tensor& a, double scalar) {
    XGRAD_CHECK(a.defined(), "{}: tensor argument is undefined", kName);
    s = scalar;
    if constexpr (K == ScalarKind::rdiv)
      if (this->needs_input_grad(0)) this->save_for_backward({a});
    return map1(a, [&](auto v) { return f(v, static_cast<decltype(v)>(s)); });
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    if constexpr (K != ScalarKind::add && K != ScalarKind::sub) {
      if (GradMode::is_enabled()) {  // Note [Create graph]: recorded
        if constexpr (K == ScalarKind::mul) return {xgrad::mul(g, s)};
        if constexpr (K == ScalarKind::div) return {xgrad::div(g, s)};
        if constexpr (K == ScalarKind::rdiv) {
          const Tensor b = this->saved(0);
          return {xgrad::mul(xgrad::div(g, xgrad::mul(b, b)), -s)};
        }
      }
    }
    if constexpr (K == ScalarKind::add || K == ScalarKind::sub) {
      return {g};
    } else if constexpr (K == ScalarKind::mul) {
      return {map1(g, [&](auto gv) { return gv * static_cast<decltype(gv)>(s); })};
    } else if constexpr (K == ScalarKind::div) {
      return {map1(g, [&](auto gv) { return gv / static_cast<decltype(gv)>(s); })};
    } else {
      // d(s/b)/db = -g * s / (b * b), as DivOp::db with a = s.
      const Tensor b = this->saved(0);
      return {map2(g, b, g.shape(), [&](auto gv, auto bv) {
        using T = decltype(gv);
        return DivOp::db(gv, static_cast<T>(s), bv, T(0));
      })};
    }
  }
};

// The unary ops (neg, exp, log, sqrt, abs, tanh, sigmoid, relu, clamp, pow by a number) are
// Pointwise<Op> (ops/detail/pointwise.hpp), in elementwise_unary.cpp and elementwise_unary2.cpp.

// y = cond ? a : b; da = sum_to(g where cond), db = sum_to(g where !cond)
struct Where : Function<Where> {
  static constexpr const char* kName = "where";
  static constexpr bool kDifferentiableBackward = true;
  Shape a_shape, b_shape;
  Tensor forward(const Tensor& cond, const Tensor& a, const Tensor& b) {
    check_binary(kName, a, b);
    XGRAD_CHECK(cond.defined(), "where: argument 'cond' is an undefined tensor");
    const Shape out_shape = detail::broadcast_all<3>({&cond.shape(), &a.shape(), &b.shape()}, kName);
    a_shape = a.shape();
    b_shape = b.shape();
    const Tensor c = cond.dtype() == a.dtype() ? cond : cond.to(a.dtype());
    if (needs_input_grad(1) || needs_input_grad(2)) save_for_backward({c});
    return map3(c, a, b, out_shape, [](auto cv, auto av, auto bv) { return cv != decltype(cv)(0) ? av : bv; });
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Tensor c = saved(0);
    Tensor ga, gb;
    if (GradMode::is_enabled()) {  // Note [Create graph]: g times constant 0/1 masks, recorded
      const Tensor m =
          map1(c.detach(), [](auto cv) { return cv != decltype(cv)(0) ? decltype(cv)(1) : decltype(cv)(0); });
      if (needs_input_grad(1)) ga = detail::sum_to(xgrad::mul(g, m), a_shape);
      if (needs_input_grad(2)) gb = detail::sum_to(xgrad::mul(g, xgrad::add(xgrad::neg(m), 1.0)), b_shape);
      return {Tensor(), ga, gb};
    }
    if (needs_input_grad(1))
      ga = detail::sum_to(
          map2(g, c, g.shape(), [](auto gv, auto cv) { return cv != decltype(cv)(0) ? gv : decltype(gv)(0); }),
          a_shape);
    if (needs_input_grad(2))
      gb = detail::sum_to(
          map2(g, c, g.shape(), [](auto gv, auto cv) { return cv != decltype(cv)(0) ? decltype(gv)(0) : gv; }),
          b_shape);
    return {Tensor(), ga, gb};
  }
};

// y = x[mask != 0] (row-major); dx = zeros with g scattered to the selected positions
struct MaskedSelect : Function<MaskedSelect> {
  static constexpr const char* kName = "masked_select";
  Shape x_shape;
  std::vector<std::int64_t> positions;
  Tensor forward(const Tensor& x, const Tensor& mask) {
    XGRAD_CHECK(x.defined(), "masked_select: argument 'x' is an undefined tensor");  // any dtype
    XGRAD_CHECK(mask.defined(), "masked_select: argument 'mask' is an undefined tensor");
    const Shape b = broadcast_shapes(x.shape(), mask.shape(), kName);
    XGRAD_CHECK(b == x.shape(), "masked_select: mask of shape {} must broadcast to x's shape {}",
                shape_str(mask.shape()), shape_str(x.shape()));
    x_shape = x.shape();
    const Tensor m = mask.to(kFloat64).detach();
    Tensor mb = Tensor::empty(x.shape(), kFloat64);
    detail::broadcast_map<double, 1>(mb.data<double>(), x.shape(), {m.data<double>()}, {&m.shape()},
                                     [](double v) { return v; });
    const double* mp = mb.data<double>();
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (mp[i] != 0.0) positions.push_back(i);
    Tensor out = Tensor::empty({static_cast<std::int64_t>(positions.size())}, x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {  // any dtype: a copy
      using T = typename decltype(tag)::type;
      const T* xp = x.data<T>();
      T* o = out.data<T>();
      for (std::size_t k = 0; k < positions.size(); ++k) o[k] = xp[positions[k]];
    });
    return out;
  }
  // Note [Create graph]: the scatter recorded in grad mode (its backward is the gather again).
  static constexpr bool kDifferentiableBackward = true;
  Tensors backward(const Tensors& grads) {
    if (GradMode::is_enabled()) return {detail::scatter_map(kName, grads[0], x_shape, positions, true), Tensor()};
    Tensor gx = Tensor::zeros(x_shape, grads[0].dtype());
    dispatch(gx.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = grads[0].data<T>();
      T* o = gx.data<T>();
      for (std::size_t k = 0; k < positions.size(); ++k) o[positions[k]] = g[k];
    });
    return {gx, Tensor()};
  }
};

}  // namespace xgrad::detail::ew
