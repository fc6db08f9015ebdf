#pragma once
// Internal: the broadcasting binary ops' kernels and autograd Functions (Binary<Op>), and the integer
// promotion rules, shared by the op files that define elementwise ops: ops/elementwise.cpp and
// ops/unary_math.cpp (atan2, fmod, remainder). Unary ops are Pointwise<Op> (ops/define/pointwise.hpp).
#include <cmath>
#include <limits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/define/gather_map.hpp"
#include "xgrad/ops/define/pointwise.hpp"
#include "xgrad/ops/define/sum_to.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/broadcast_kernel.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"

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

// ---- integer and bool dtypes (their kernels are in ops/elementwise.cpp) --------------------------
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
enum class LogicalKind { and_, or_, xor_ };
/// a (and, or, xor) b as bool, any dtypes (nonzero is true), broadcast.
Tensor logical(LogicalKind k, const char* op, const Tensor& a, const Tensor& b);

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
// Note [One formula] (ops/define/pointwise.hpp), for the broadcasting binary ops: an Op states f(a, b)
// and the partial derivatives da(g, a, b, y), db(g, a, b, y) once, as templates over a value type:
// the element type in the broadcasting kernels of a first-order backward, Tensor under create_graph
// (recorded, so differentiable again). kSaves says what the partials read: Saves::nothing (g alone:
// they always run on tensors), Saves::input (a and b) or Saves::output (a, b and y). The ops defined
// elsewhere (atan2, fmod, remainder in ops/unary_math.cpp) follow the same contract.
//
// Note [Saved operands]: an op with Saves::input may say which operands each partial reads
// (kDaReads, kDbReads: kReadsA | kReadsB; both when it does not say), as torch's derivatives.yaml
// does. An operand no needed partial reads is not kept alive by the node: its slot holds the other
// operand, which broadcasts to g's shape as well and is never read there. For mul of a gathered
// (E, F) message by a constant edge weight, that frees the message at once instead of at backward.
inline constexpr int kReadsA = 1, kReadsB = 2;
// What the partial of a (kWrtA) or of b reads.
template <class Op, bool kWrtA>
constexpr int partial_reads() {
  if constexpr (kWrtA && requires { Op::kDaReads; })
    return Op::kDaReads;
  else if constexpr (!kWrtA && requires { Op::kDbReads; })
    return Op::kDbReads;
  else
    return kReadsA | kReadsB;
}
using pw::lit;
using pw::Saves;
using pw::select;

struct AddOp : pw::Def<"add"> {
  static constexpr auto f = [](const auto& a, const auto& b) { return a + b; };
  static constexpr auto da = [](const auto& g, const auto&, const auto&, const auto&) { return g; };
  static constexpr auto db = [](const auto& g, const auto&, const auto&, const auto&) { return g; };
};
struct SubOp : pw::Def<"sub"> {
  static constexpr auto f = [](const auto& a, const auto& b) { return a - b; };
  static constexpr auto da = [](const auto& g, const auto&, const auto&, const auto&) { return g; };
  static constexpr auto db = [](const auto& g, const auto&, const auto&, const auto&) { return -g; };
};
struct MulOp : pw::Def<"mul", Saves::input> {
  static constexpr int kDaReads = kReadsB, kDbReads = kReadsA;  // Note [Saved operands]
  static constexpr auto f = [](const auto& a, const auto& b) { return a * b; };
  static constexpr auto da = [](const auto& g, const auto&, const auto& b, const auto&) { return g * b; };
  static constexpr auto db = [](const auto& g, const auto& a, const auto&, const auto&) { return g * a; };
};
struct DivOp : pw::Def<"div", Saves::input> {
  static constexpr int kDaReads = kReadsB, kDbReads = kReadsA | kReadsB;  // Note [Saved operands]
  static constexpr auto f = [](const auto& a, const auto& b) { return a / b; };
  static constexpr auto da = [](const auto& g, const auto&, const auto& b, const auto&) { return g / b; };
  static constexpr auto db = [](const auto& g, const auto& a, const auto& b, const auto&) { return -g * a / (b * b); };
};
// torch's pow_backward: 0 where the exponent is 0 (da) or the base is 0 (db)
struct PowOp : pw::Def<"pow", Saves::output> {
  static constexpr auto f = [](const auto& a, const auto& b) { return pw::pow(a, b); };
  static constexpr auto da = [](const auto& g, const auto& a, const auto& b, const auto&) {
    return select(b == lit(b, 0), pw::zeros_like(g), g * b * pw::pow(a, b - lit(b, 1)));
  };
  static constexpr auto db = [](const auto& g, const auto& a, const auto&, const auto& y) {
    return select(a == lit(a, 0), pw::zeros_like(g), g * y * pw::log(a));
  };
};
// maximum/minimum propagate NaN from either side, as torch does: `a` is chosen when it wins, ties,
// or is NaN (a != a); otherwise `b` (which may be NaN) is chosen.
// Note [Tie rules]: the gradient follows torch's derivatives.yaml, not the choice of the value: at a
// tie (a == b) each side gets half of g; otherwise the side that lost gets 0 and the other g; when
// either is NaN, no comparison holds and both get g. share(a, b) is a's weight (1, 1/2 or 0), b's is
// share(b, a) for maximum (and the same with the roles of < and > swapped for minimum). A weight of 0
// gives 0 even where g is infinite or NaN (torch's masked_fill_).
template <class V>
[[gnu::always_inline]] inline V weigh(const V& g, const V& share) {
  return select(share == lit(share, 0), pw::zeros_like(g), g * share);
}
template <bool kMax>
struct ExtremumOp {
  static constexpr const char* kName = kMax ? "maximum" : "minimum";
  static constexpr Saves kSaves = Saves::input;
  template <class T>
  static T f(T a, T b) {
    return (kMax ? a >= b : a <= b) || a != a ? a : b;  // NOLINT(misc-redundant-expression): the NaN test
  }
  template <class V>
  [[gnu::always_inline]] static V share(const V& a, const V& b) {
    return select(a == b, lit(a, 0.5), select(kMax ? a < b : a > b, lit(a, 0), lit(a, 1)));
  }
  template <class V>
  static V da(const V& g, const V& a, const V& b, const V&) {
    return weigh(g, share(a, b));
  }
  template <class V>
  static V db(const V& g, const V& a, const V& b, const V&) {
    return weigh(g, share(b, a));
  }
};
using MaxOp = ExtremumOp<true>;
using MinOp = ExtremumOp<false>;

// Note [Small-op overhead]: the input shapes needed by backward come from the node's input_meta()
// (recorded by the engine anyway), the output shape is only computed when the inputs differ, and
// inputs are saved only when a node is recorded: each avoids heap allocations that dominate ops on
// tiny tensors.
template <class Op>
struct Binary : Function<Binary<Op>> {
  static constexpr const char* kName = Op::kName;
  static constexpr bool kDifferentiableBackward = true;  // Note [One formula]: the partials on tensors
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_binary(Op::kName, a, b);
    const auto op = [](auto x, auto z) { return Op::f(x, z); };
    Tensor y = a.shape() == b.shape() ? map2(a, b, a.shape(), op)
                                      : map2(a, b, broadcast_shapes(a.shape(), b.shape(), Op::kName), op);
    const bool ga = this->needs_input_grad(0), gb = this->needs_input_grad(1);
    if (ga || gb) {
      if constexpr (Op::kSaves == Saves::input) {  // Note [Saved operands]
        const int reads = (ga ? partial_reads<Op, true>() : 0) | (gb ? partial_reads<Op, false>() : 0);
        this->save_for_backward({(reads & kReadsA) != 0 ? a : b, (reads & kReadsB) != 0 ? b : a});
      }
      if constexpr (Op::kSaves == Saves::output) this->save_for_backward({a, b, y});
    }
    return y;
  }
  // The partial of a (wrt_a) or b over g's shape, in the broadcasting kernel (first order).
  template <bool kWrtA>
  static Tensor partial(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y) {
    const auto fn = [](auto gv, auto av, auto bv, auto yv) {
      if constexpr (kWrtA)
        return Op::da(gv, av, bv, yv);
      else
        return Op::db(gv, av, bv, yv);
    };
    if constexpr (Op::kSaves == Saves::output) {
      Tensor out = Tensor::empty(g.shape(), g.dtype());
      dispatch(g.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        detail::broadcast_map<T, 4>(out.data<T>(), g.shape(), {g.data<T>(), a.data<T>(), b.data<T>(), y.data<T>()},
                                    {&g.shape(), &a.shape(), &b.shape(), &y.shape()},
                                    [&](T gv, T av, T bv, T yv) { return fn(gv, av, bv, yv); });
      });
      return out;
    } else {
      return map3(g, a, b, g.shape(), [fn](auto gv, auto av, auto bv) { return fn(gv, av, bv, decltype(gv)(0)); });
    }
  }
  // `<op>_backward`: one partial over g's shape, in the broadcasting kernel or, when it will be
  // differentiated, on tensors (Note [Fused ops], Note [One formula]).
  template <bool kWrtA>
  struct Partial {
    static constexpr const char* kName = BackwardName<Op>::kValue.data();
    static Tensor kernel(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y) {
      return partial<kWrtA>(g, a, b, y);
    }
    static Tensor formula(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y) {
      if constexpr (kWrtA)
        return Op::da(g, a, b, y);
      else
        return Op::db(g, a, b, y);
    }
  };
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Shape& a_shape = this->input_meta()[0].shape;
    const Shape& b_shape = this->input_meta()[1].shape;
    Tensor ga, gb;
    if constexpr (Op::kSaves == Saves::nothing) {  // g alone: on tensors (recorded under create_graph)
      if (this->needs_input_grad(0)) ga = detail::sum_to(Op::da(g, g, g, g), a_shape);
      if (this->needs_input_grad(1)) gb = detail::sum_to(Op::db(g, g, g, g), b_shape);
      return {ga, gb};
    } else {
      const Tensor a = this->saved(0), b = this->saved(1);
      const Tensor y = Op::kSaves == Saves::output ? this->saved(2) : Tensor();
      if (this->needs_input_grad(0)) ga = detail::sum_to(apply_fused<Partial<true>>(g, a, b, y), a_shape);
      if (this->needs_input_grad(1)) gb = detail::sum_to(apply_fused<Partial<false>>(g, a, b, y), b_shape);
      return {ga, gb};
    }
  }
};

// The unary ops (neg, exp, log, sqrt, abs, tanh, sigmoid, relu, clamp, pow by a number) are
// Pointwise<Op> (ops/define/pointwise.hpp), in ops/elementwise.cpp.

/// The public binary op a (op) b under torch's type promotion: an integer or bool operand takes the
/// integer kernel k or the float op `self` on promoted operands (Note [Integer promotion]), float32
/// with float64 runs `self` in float64 (mixed_float), two operands of one float dtype run Binary<Op>.
template <class Op>
Tensor promoted_binary(IntKind k, const Tensor& a, const Tensor& b, Tensor (*self)(const Tensor&, const Tensor&)) {
  if (involves_integer(a, b)) [[unlikely]]
    return int_promoted_binary(k, Op::kName, a, b, self);
  if (mixed_float(a, b)) [[unlikely]]
    return self(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<Op>>(a, b);
}

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
  Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<Where>>(*this, grads[0], saved(0)); }
  // g times constant 0/1 masks of the (detached) condition.
  Tensors backward_formula(const Tensor& g, const Tensor& c) {
    Tensor ga, gb;
    const Tensor m =
        map1(c.detach(), [](auto cv) { return cv != decltype(cv)(0) ? decltype(cv)(1) : decltype(cv)(0); });
    if (needs_input_grad(1)) ga = detail::sum_to(xgrad::mul(g, m), a_shape);
    if (needs_input_grad(2)) gb = detail::sum_to(xgrad::mul(g, xgrad::add(xgrad::neg(m), 1.0)), b_shape);
    return {Tensor(), ga, gb};
  }
  Tensors backward_kernel(const Tensor& g, const Tensor& c) {
    Tensor ga, gb;
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
  std::shared_ptr<const std::vector<std::int64_t>> positions;  // shared with the backward's scatter
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
    std::vector<std::int64_t> pos;
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (mp[i] != 0.0) pos.push_back(i);
    Tensor out = Tensor::empty({static_cast<std::int64_t>(pos.size())}, x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {  // any dtype: a copy
      using T = typename decltype(tag)::type;
      const T* xp = x.data<T>();
      T* o = out.data<T>();
      for (std::size_t k = 0; k < pos.size(); ++k) o[k] = xp[pos[k]];
    });
    if (needs_input_grad(0)) positions = std::make_shared<const std::vector<std::int64_t>>(std::move(pos));
    return out;
  }
  // Note [Create graph]: through the scatter op "masked_select_backward", whose backward is the
  // gather again.
  static constexpr bool kDifferentiableBackward = true;
  Tensors backward(const Tensors& grads) {
    return {detail::scatter_map(kName, grads[0], x_shape, positions, true), Tensor()};
  }
};

}  // namespace xgrad::detail::ew
