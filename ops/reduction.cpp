#include "xgrad/ops/reduction.hpp"

#include <fmt/ranges.h>  // shapes (std::vector) in error messages

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/define/gather_map.hpp"
#include "xgrad/ops/define/sum_to.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/broadcast_kernel.hpp"
#include "xgrad/ops/kernels/reduce_kernels.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

// ---- planning -----------------------------------------------------------------------------------
// What a reduction of x over `axes` produces: the sorted unique axes, x's shape with those axes set
// to 1 (keep_shape), the shape returned to the user (out_shape) and the number of reduced elements
// per output (count).
struct Plan {
  std::vector<std::int64_t> axes;
  Shape keep_shape;
  Shape out_shape;
  std::int64_t count = 1;
};

Plan make_plan(const char* op, const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", op);
  const Shape& shape = x.shape();
  Plan p;
  if (shape.empty()) {
    // A 0-d tensor has one element and no axes; like PyTorch, accept axis 0 / -1 (a no-op).
    for (auto a : axes)
      XGRAD_CHECK(a == 0 || a == -1, "{}: axis {} is out of range for a tensor of shape {} (0 dimensions)", op, a,
                  shape_str(shape));
    XGRAD_CHECK(axes.size() <= 1, "{}: axis list [{}] names an axis twice (shape {})", op, fmt::join(axes, ", "),
                shape_str(shape));
    return p;  // axes empty, shapes (), count 1
  }
  if (axes.empty()) {  // all axes; the common full reduction, built with a single allocation
    p.axes.reserve(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) p.axes.push_back(static_cast<std::int64_t>(d));
  } else {
    p.axes = normalize_axes(axes, shape, op);  // checks range and duplicates, names op/axis/shape
  }
  p.keep_shape = shape;
  for (auto a : p.axes) {
    auto& d = p.keep_shape[static_cast<std::size_t>(a)];
    p.count *= d;
    d = 1;
  }
  if (keepdim) {
    p.out_shape = p.keep_shape;
  } else {
    p.out_shape.reserve(shape.size() - p.axes.size());
    std::size_t k = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (k < p.axes.size() && p.axes[k] == static_cast<std::int64_t>(d)) {
        ++k;
        continue;
      }
      p.out_shape.push_back(shape[d]);
    }
  }
  return p;
}

// Error for max over an axis of size 0 (there is no maximum of nothing).
void check_nonempty_axes(const char* op, const Tensor& x, const Plan& p) {
  for (auto a : p.axes)
    XGRAD_CHECK(x.shape()[static_cast<std::size_t>(a)] != 0,
                "{}: cannot reduce over axis {} of size 0 (shape {}): the reduction has no identity", op, a,
                shape_str(x.shape()));
}

// A fresh tensor with x's values and shape `shape` (same numel). Used when nothing is actually
// summed (count == 1), e.g. the 1x1 sum in the autograd-overhead benchmark: one allocation.
Tensor copy_as(const Tensor& x, const Shape& shape) {
  Tensor out = Tensor::empty(shape, x.dtype());
  if (x.nbytes() > 0) std::memcpy(out.raw_data(), x.raw_data(), x.nbytes());
  return out;
}

// g (of keep_shape's numel) broadcast back to `shape`, divided by `divisor`.
Tensor expand_grad(const Tensor& g, const Shape& keep_shape, const Shape& shape, std::int64_t divisor) {
  Tensor out = Tensor::empty(shape, g.dtype());
  if (out.numel() == 0) return out;
  dispatch(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T c = static_cast<T>(divisor);
    T* o = out.data<T>();
    const T* gp = g.data<T>();
    if (g.numel() == 1) {  // full reduction: a fill
      const T v = gp[0] / c;
      detail::reduce::fill(o, out.numel(), v);
      return;
    }
    if (divisor == 1)
      detail::broadcast_map<T, 1>(o, shape, {gp}, {&keep_shape}, [](T v) { return v; });
    else
      detail::broadcast_map<T, 1>(o, shape, {gp}, {&keep_shape}, [c](T v) { return v / c; });
  });
  return out;
}

// ---- layout of a reduction ------------------------------------------------------------------------
// Note [Reduction layout]: after dropping size-1 axes, a reduction whose reduced axes are adjacent
// is (outer kept) x (mid reduced) x (inner kept). inner == 1 gives contiguous rows (the common
// case: reducing trailing axes); inner > 1 gives columns, processed a block of columns at a time
// so the inner loop is contiguous. Anything else (e.g. axes {0, 2} of a 3-d tensor) gathers each
// output's elements through precomputed offsets, in row-major order of the reduced elements.
using Layout = detail::reduce::Layout;  // its kernels: ops/kernels/reduce_kernels.hpp

Layout make_layout(const Shape& shape, const std::vector<std::int64_t>& axes) {
  const auto nd = static_cast<std::int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (auto a : axes) reduced[static_cast<std::size_t>(a)] = true;
  std::int64_t first = -1, last = -1;
  for (std::int64_t d = 0; d < nd; ++d)
    if (reduced[static_cast<std::size_t>(d)] && shape[static_cast<std::size_t>(d)] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  Layout l;
  bool block = true;
  for (std::int64_t d = first; d >= 0 && d <= last; ++d)
    if (!reduced[static_cast<std::size_t>(d)] && shape[static_cast<std::size_t>(d)] != 1) block = false;
  if (block) {
    for (std::int64_t d = 0; d < nd; ++d) {
      const auto s = shape[static_cast<std::size_t>(d)];
      if (first < 0 || d < first)
        l.outer *= s;
      else if (d <= last)
        l.mid *= s;
      else
        l.inner *= s;
    }
    l.kind = l.inner == 1 ? Layout::kRows : Layout::kCols;
    return l;
  }
  l.kind = Layout::kGather;
  const Shape strides = contiguous_strides(shape);
  l.roffs = {0};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      l.kept_shape.push_back(shape[d]);
      l.kept_strides.push_back(strides[d]);
      continue;
    }
    std::vector<std::int64_t> next;
    next.reserve(l.roffs.size() * static_cast<std::size_t>(shape[d]));
    for (auto b : l.roffs)
      for (std::int64_t k = 0; k < shape[d]; ++k) next.push_back(b + k * strides[d]);
    l.roffs.swap(next);
  }
  l.mid = static_cast<std::int64_t>(l.roffs.size());
  l.outer = shape_numel(l.kept_shape);
  return l;
}

// Sums over sorted unique `axes` (keepdim shape). Note [Sum in passes]: the shared kernel is
// vectorised when the reduced axes form one adjacent block (rows or columns) but gathers element
// by element otherwise; so a reduction over non-adjacent axes (say axes 0 and 2 of a 3-d tensor)
// runs as one pass per adjacent block, innermost first. The order stays fixed: deterministic.
Tensor sum_axes(const Tensor& x, const std::vector<std::int64_t>& axes) {
  const Shape& shape = x.shape();
  std::vector<std::vector<std::int64_t>> blocks(1);
  std::size_t k = 0;
  for (std::size_t d = 0; d < shape.size() && k < axes.size(); ++d) {
    if (axes[k] == static_cast<std::int64_t>(d)) {
      blocks.back().push_back(axes[k++]);
    } else if (shape[d] != 1 && !blocks.back().empty()) {
      blocks.emplace_back();  // a kept axis of size > 1 ends the block
    }
  }
  if (blocks.size() == 1) return detail::sum_keepdim(x, axes);
  Tensor t = x;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (!it->empty()) t = detail::sum_keepdim(t, *it);
  return t;
}

// ---- sum / mean ---------------------------------------------------------------------------------
// y = sum over the plan's axes, divided by `divisor` (mean: the count; sum: 1).
Tensor sum_forward(const Tensor& x, const Plan& p, std::int64_t divisor) {
  Tensor y;
  if (p.count == 1) {
    y = copy_as(x, p.out_shape);  // nothing to add up (e.g. 1x1 tensors, 0-d, size-1 axes)
  } else {
    y = sum_axes(x, p.axes);
    if (y.shape() != p.out_shape) y = alias_with_shape(y, p.out_shape);
  }
  if (divisor != 1) {
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      // Divide (not multiply by 1/count): exact for a sum of equal values. A count of 0 gives
      // 0/0 = NaN, like torch.mean over an empty axis.
      const T c = static_cast<T>(divisor);
      detail::reduce::divide(y.data<T>(), y.numel(), c);
    });
  }
  return y;
}

// sum and mean differ only in the divisor: dx = g / divisor broadcast back to x's shape.
template <bool kMean>
struct SumOrMean : Function<SumOrMean<kMean>> {
  static constexpr const char* kName = kMean ? "mean" : "sum";
  static constexpr bool kDifferentiableBackward = true;  // backward_formula: expand (and div)
  Shape in_shape, keep_shape;
  std::int64_t count = 1;
  Tensor forward(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
    Plan p = make_plan(kName, x, axes, keepdim);
    count = p.count;
    if (this->needs_input_grad(0)) {
      in_shape = x.shape();
      keep_shape = std::move(p.keep_shape);
    }
    return sum_forward(x, p, kMean ? count : 1);
  }
  Tensors backward(const Tensors& grads) { return {apply_fused<BackwardOf<SumOrMean>>(*this, grads[0])}; }
  Tensor backward_formula(const Tensor& g) {
    if (count == 1) return reshape(g, in_shape);
    Tensor e = expand(reshape(g, keep_shape), in_shape);
    return kMean && count > 0 ? div(e, static_cast<double>(count)) : e;
  }
  Tensor backward_kernel(const Tensor& g) {
    // Nothing was summed: the gradient is g itself, reshaped (the engine copies before any
    // in-place accumulation into a shared buffer).
    if (count == 1) return alias_with_shape(g, in_shape);
    // count == 0 means x is empty: the gradient has no elements to write.
    return expand_grad(g, keep_shape, in_shape, kMean && count > 0 ? count : 1);
  }
};
using Sum = SumOrMean<false>;
using Mean = SumOrMean<true>;

// ---- max ----------------------------------------------------------------------------------------
// Note [Tie rules] (max and min over axes, as torch.amax/amin): dx = g / K at each of the K elements
// of a reduced row equal to its result, 0 elsewhere; when the result is NaN, the NaNs share it (as
// torch.max() over everything; torch.amax over some axes gives NaN gradients there). The shares
// are a constant of x, so the same public ops serve the first-order backward and create_graph.
Tensor tie_share_backward(const Tensor& g, const Tensor& x, const Tensor& y_keep, const std::vector<std::int64_t>& axes,
                          const Shape& keep_shape) {
  const Tensor xd = x.detach(), yd = y_keep.detach();  // constants: no history
  const Tensor ties = logical_or(eq(xd, yd), logical_and(ne(xd, xd), ne(yd, yd))).to(x.dtype());
  const Tensor counts = sum(ties, axes, true);
  return div(mul(reshape(g, keep_shape), ties), counts);
}

struct Max : Function<Max> {
  static constexpr const char* kName = "max";
  Shape in_shape, keep_shape;
  std::vector<std::int64_t> axes;
  bool identity = false;  // every reduced row has one element: y is x
  Tensor forward(const Tensor& x, const std::vector<std::int64_t>& axes_, bool keepdim) {
    const Plan p = make_plan(kName, x, axes_, keepdim);
    check_nonempty_axes(kName, x, p);
    in_shape = x.shape();
    keep_shape = p.keep_shape;
    axes = p.axes;
    if (p.count == 1) {  // every output is its own max
      identity = true;
      return copy_as(x, p.out_shape);
    }
    Tensor y = Tensor::empty(p.out_shape, x.dtype());
    if (y.numel() == 0) return y;
    const Layout l = make_layout(x.shape(), p.axes);
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::reduce::max_kernel<T>(x.data<T>(), y.data<T>(), nullptr, l);
    });
    if (needs_input_grad(0)) save_for_backward({x, y});
    return y;
  }
  // Note [Create graph]: tie_share_backward's ops are recorded in grad mode (the shares constant).
  static constexpr bool kDifferentiableBackward = true;
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    if (identity || g.numel() == 0) return {identity ? reshape(g, in_shape) : Tensor::zeros(in_shape, g.dtype())};
    return {tie_share_backward(g, saved(0), reshape(saved(1), keep_shape), axes, keep_shape)};
  }
};

// ---- logsumexp ----------------------------------------------------------------------------------
// Note [Stable logsumexp]: y = m + log(sum exp(x - m)) with m the maximum, replaced by 0 when it is
// infinite (as torch does): a row of -inf gives log(0) = -inf, a row holding +inf gives +inf, and
// NaN propagates. The gradient g * exp(x - y) is then NaN on a row of -inf, as in torch.
struct LogSumExp : Function<LogSumExp> {
  static constexpr const char* kName = "logsumexp";
  Shape keep_shape;
  Layout layout;              // when vec_backward: a rows or columns layout of x
  bool vec_backward = false;  // rows and columns get a vectorised backward kernel
  Tensor forward(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
    Plan p = make_plan(kName, x, axes, keepdim);
    Tensor y = Tensor::empty(p.keep_shape, x.dtype());
    if (y.numel() > 0) {
      if (p.count == 0) {
        y.fill_(-std::numeric_limits<double>::infinity());  // log of an empty sum
      } else {
        const Layout l = make_layout(x.shape(), p.axes);
        dispatch(x.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (needs_input_grad(0) && l.kind != Layout::kGather) {
            layout = l;
            vec_backward = true;
          }
          if (l.kind == Layout::kRows) {
            detail::reduce::logsumexp_rows<T>(x.data<T>(), y.data<T>(), l.outer, l.mid);
            return;
          }
          // Columns or gathered elements: m by the max kernel, then the deterministic sum kernel on
          // exp(x - m), then y = m + log(s). One temporary of x's size.
          T* mp = y.data<T>();
          detail::reduce::max_kernel<T>(x.data<T>(), mp, nullptr, l);
          detail::reduce::logsumexp_shift(mp, y.numel());
          Tensor t = Tensor::empty(x.shape(), x.dtype());
          if (l.kind == Layout::kCols)
            detail::reduce::logsumexp_exp_cols<T>(l, t.data<T>(), x.data<T>(), mp);
          else
            detail::broadcast_map<T, 2>(t.data<T>(), x.shape(), {x.data<T>(), mp}, {&x.shape(), &p.keep_shape},
                                        [](T v, T m) { return std::exp(v - m); });
          const Tensor s = sum_axes(t, p.axes);
          detail::reduce::logsumexp_add_log(mp, s.data<T>(), y.numel());
        });
      }
    }
    if (needs_input_grad(0)) {
      save_for_backward({x, y});
      keep_shape = p.keep_shape;
    }
    return y.shape() == p.out_shape ? y : alias_with_shape(y, p.out_shape);
  }
  static constexpr bool kDifferentiableBackward = true;
  // dx = g exp(x - y). The formula recomputes y by a recorded logsumexp over the reduced axes (the
  // saved y has the keepdim shape, not the output's, so it cannot carry the output's history).
  Tensors backward(const Tensors& grads) {
    return {apply_fused<BackwardOf<LogSumExp>>(*this, grads[0], saved(0), saved(1))};
  }
  Tensor backward_formula(const Tensor& g, const Tensor& x, const Tensor& /*y*/) {
    std::vector<std::int64_t> axes;
    for (std::size_t d = 0; d < keep_shape.size(); ++d)
      if (keep_shape[d] != x.shape()[d]) axes.push_back(static_cast<std::int64_t>(d));
    if (x.numel() == 0) return Tensor::zeros(x.shape(), x.dtype());
    if (axes.empty()) return mul(reshape(g, x.shape()), exp(sub(x, x)));
    return mul(reshape(g, keep_shape), exp(sub(x, logsumexp(x, axes, /*keepdim=*/true))));
  }
  Tensor backward_kernel(const Tensor& g, const Tensor& x, const Tensor& y) {
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (vec_backward) {
        detail::reduce::logsumexp_backward<T>(layout, gx.data<T>(), x.data<T>(), g.data<T>(), y.data<T>());
        return;
      }
      detail::broadcast_map<T, 3>(gx.data<T>(), x.shape(), {g.data<T>(), x.data<T>(), y.data<T>()},
                                  {&keep_shape, &x.shape(), &keep_shape},
                                  [](T gv, T xv, T yv) { return gv * std::exp(xv - yv); });
    });
    return gx;
  }
};

}  // namespace

namespace {
// The sum of an integer or bool tensor is int64, as in torch (exact, wrapping on overflow; no
// gradient). A serial row-major walk: each element adds into its output in a fixed order.
Tensor sum_integer(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  const Plan p = make_plan("sum", x, axes, keepdim);
  const Tensor v = x.to(kInt64);
  Tensor out = Tensor::zeros(p.keep_shape, kInt64);
  detail::reduce::sum_int64(v.data<std::int64_t>(), out.data<std::int64_t>(), x.shape().data(), p.keep_shape.data(),
                            x.shape().size(), x.numel());
  return alias_with_shape(out, p.out_shape);
}

// max (kMax) or min of an integer or bool tensor: exact, in x's dtype (as torch.amax / amin), with
// no gradient. The kernel and tie rule are max's; an empty reduced axis is refused as for floats.
template <bool kMax>
Tensor extremum_integer(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  const char* op = kMax ? "max" : "min";
  const Plan p = make_plan(op, x, axes, keepdim);
  check_nonempty_axes(op, x, p);
  if (p.count == 1) return copy_as(x, p.out_shape);
  Tensor y = Tensor::empty(p.out_shape, x.dtype());
  if (y.numel() == 0) return y;
  const Layout l = make_layout(x.shape(), p.axes);
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_floating_point_v<T>)
      detail::reduce::max_kernel<T, kMax>(x.data<T>(), y.data<T>(), nullptr, l);
  });
  return y;
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  if (x.defined() && !is_floating_point(x.dtype())) [[unlikely]]
    return sum_integer(x, axes, keepdim);
  return apply<Sum>(x, axes, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  return apply<Mean>(x, axes, keepdim);
}
Tensor max(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  if (x.defined() && !is_floating_point(x.dtype())) [[unlikely]]
    return extremum_integer<true>(x, axes, keepdim);
  return apply<Max>(x, axes, keepdim);
}
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  return apply<LogSumExp>(x, axes, keepdim);
}

}  // namespace xgrad

// ---- min, prod, var, std, norm, cumsum -----------------------------------------------------------
namespace xgrad {

namespace {

// Note [Reductions by rows]: these reductions need each output's K elements together (prefix and
// suffix products, a mean then squared deviations, an arg-min). Rows layouts are used in place;
// other layouts first copy every output's elements into a contiguous (outputs, K) buffer, in
// row-major order of the reduced elements, and the gradient is computed there and written back
// (each element of x belongs to one row: a permutation, so no two tasks write one place).
using RowView = detail::reduce::Rows;  // its kernels: ops/kernels/reduce_kernels.hpp

RowView row_view(const Tensor& x, const Plan& p) {
  RowView v;
  v.l = make_layout(x.shape(), p.axes);
  v.k = p.count;
  v.rows = shape_numel(p.keep_shape);
  return v;
}

// x's elements as contiguous (rows, K): x itself for a rows layout, else a gathered copy.
Tensor to_rows(const Tensor& x, const RowView& v) {
  if (v.l.kind == Layout::kRows) return x;
  Tensor r = Tensor::empty({v.rows, v.k}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::reduce::rows_gather(v, x.data<T>(), r.data<T>());
  });
  return r;
}

// The inverse of to_rows for a gradient: dx of x's shape from the (rows, K) buffer.
Tensor from_rows(const Tensor& r, const RowView& v, const Shape& x_shape) {
  if (v.l.kind == Layout::kRows) return r.shape() == x_shape ? r : alias_with_shape(r, x_shape);
  Tensor dx = Tensor::empty(x_shape, r.dtype());
  dispatch(r.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::reduce::rows_scatter(v, r.data<T>(), dx.data<T>());
  });
  return dx;
}

using detail::reduce::RowOp;
using detail::reduce::RowReduce;

constexpr const char* row_op_name(RowOp op) {
  switch (op) {
    case RowOp::kMin:
      return "min";
    case RowOp::kProd:
      return "prod";
    case RowOp::kVar:
      return "var";
    case RowOp::kStd:
      return "std";
    case RowOp::kNorm:
      return "norm";
  }
  return "";
}

// y = a row reduction of x over the plan's axes (see the header's table). min: NaN propagates; dx
// shared among the ties (Note [Tie rules], tie_share_backward).
template <RowOp kOp>
struct RowReduction : Function<RowReduction<kOp>> {
  static constexpr const char* kName = row_op_name(kOp);
  // prod, var, std, norm: backward_kernel, or backward_formula when differentiated (Note [Fused
  // ops]); min: tie_share_backward's public ops, as max's.
  static constexpr bool kDifferentiableBackward = true;
  RowReduce r;
  Shape x_shape, keep_shape;
  std::vector<std::int64_t> axes;
  std::int64_t count = 0;

  // row_backward's formulas with public ops, the reduction recomputed (kept
  // dims) so that it carries x's history; zero denominators give 0 as in row_backward. prod uses
  // y / x where x != 0; at a zero, the product of the row's other elements when it is the row's
  // only zero, else 0 (exact to any order with at most one zero per row, or three or more, where
  // every derivative of the others' product is 0); when some row has exactly two zeros,
  // prod_of_others.
  Tensor backward_formula(const Tensor& g, const Tensor& x, const Tensor& /*y*/) {
    const Tensor gk = reshape(g, keep_shape);
    const Tensor zero = Tensor::scalar(0, x.dtype());
    const double d = static_cast<double>(std::max<std::int64_t>(0, count - r.correction));
    if constexpr (kOp == RowOp::kVar) {
      return mul(gk, mul(sub(x, mean(x, axes, true)), 2.0 / d));
    } else if constexpr (kOp == RowOp::kStd) {
      const Tensor yk = xgrad::std(x, axes, r.correction, true);
      const Tensor y0 = eq(yk, zero);
      const Tensor c = div(masked_fill(gk, y0, 0.0), mul(masked_fill(yk, y0, 1.0), d));
      return mul(c, sub(x, mean(x, axes, true)));
    } else if constexpr (kOp == RowOp::kNorm) {
      if (r.p == 1) return mul(gk, sign(x));
      const Tensor yk = norm(x, r.p, axes, true);
      if (std::isinf(r.p)) {  // shared among the ties, with their signs
        const Tensor ties = eq(abs(x), yk).to(x.dtype());
        return mul(mul(sign(x), div(ties, sum(ties, axes, true))), gk);
      }
      const Tensor y0 = eq(yk, zero);
      const Tensor gz = masked_fill(gk, y0, 0.0), ys = masked_fill(yk, y0, 1.0);
      if (r.p == 2) return mul(x, div(gz, ys));
      return mul(mul(sign(x), pow(abs(x), r.p - 1)), div(gz, pow(ys, r.p - 1)));
    } else {
      static_assert(kOp == RowOp::kProd);
      const Tensor x0 = eq(x, zero);
      const Tensor zeros_per_row = sum(x0.to(x.dtype()), axes, true);
      if (any_equal(zeros_per_row, 2.0)) return mul(gk, prod_of_others(x));
      const Tensor xs = masked_fill(x, x0, 1.0);
      // at a zero: the product of the nonzero others when it is the row's only zero, else 0
      const Tensor at_zero = masked_fill(prod(xs, axes, true), ne(zeros_per_row, Tensor::scalar(1, x.dtype())), 0.0);
      const Tensor others = where(x0, at_zero, div(prod(x, axes, true), xs));
      return mul(gk, others);
    }
  }

  // prod: each element's product of the row's other elements, as (rows, K, K) copies of the rows
  // with the diagonal set to 1, multiplied along the last axis. Exact with any zeros (its own
  // derivatives again), but K times the memory: used only for rows with exactly two zeros.
  Tensor prod_of_others(const Tensor& x) const {
    std::vector<std::int64_t> perm;  // the kept axes, then the reduced ones
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) perm.push_back(d);
    perm.insert(perm.end(), axes.begin(), axes.end());
    const Tensor xp = permute(x, perm);
    const std::int64_t K = count, R = x.numel() / count;
    checked_numel({R, K, K}, "prod", "x (create_graph: the rows' copies for rows with two zeros)");
    Tensor eye = Tensor::zeros({R, K, K}, kBool);
    detail::reduce::set_diagonals(eye.data<bool>(), R, K);
    const Tensor rows = expand(reshape(xp, {R, 1, K}), {R, K, K});
    const Tensor others = reshape(prod(masked_fill(rows, eye, 1.0), {2}), xp.shape());
    std::vector<std::int64_t> inv(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) inv[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
    return permute(others, inv);
  }

  static bool any_equal(const Tensor& t, double v) {
    for (double e : t.to_vector())
      if (e == v) return true;
    return false;
  }
  Tensor forward(const Tensor& x, const std::vector<std::int64_t>& axes_, bool keepdim, RowReduce r_) {
    r = r_;
    const Plan p = make_plan(kName, x, axes_, keepdim);
    axes = p.axes;
    if (kOp == RowOp::kMin || (kOp == RowOp::kNorm && std::isinf(r.p))) check_nonempty_axes(kName, x, p);
    x_shape = x.shape();
    keep_shape = p.keep_shape;
    count = p.count;
    Tensor y = Tensor::empty(p.keep_shape, x.dtype());
    if (y.numel() > 0) {
      if (count == 0) {  // an empty reduction: prod 1, var/std NaN (0/0), norm 0
        y.fill_(kOp == RowOp::kProd ? 1.0 : kOp == RowOp::kNorm ? 0.0 : std::numeric_limits<double>::quiet_NaN());
      } else {
        const RowView v = row_view(x, p);
        const Tensor rows = to_rows(x, v);
        dispatch(x.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          detail::reduce::row_reduce_forward(r, rows.data<T>(), y.data<T>(), v.rows, v.k);
        });
      }
    }
    if (this->needs_input_grad(0)) this->save_for_backward({x, y});
    return y.shape() == p.out_shape ? y : alias_with_shape(y, p.out_shape);
  }
  Tensors backward(const Tensors& grads) {
    const Tensor x = this->saved(0), y = this->saved(1);
    if (x.numel() == 0 || count == 0) return {Tensor::zeros(x_shape, x.dtype())};
    if constexpr (kOp == RowOp::kMin)
      return {tie_share_backward(grads[0], x, y, axes, keep_shape)};
    else
      return {apply_fused<BackwardOf<RowReduction>>(*this, grads[0], x, y)};
  }
  Tensor backward_kernel(const Tensor& g, const Tensor& x, const Tensor& y) {
    Plan p;  // the forward's plan (its axes, normalised)
    p.axes = axes;
    p.keep_shape = keep_shape;
    p.count = count;
    const RowView v = row_view(x, p);
    const Tensor rows = to_rows(x, v);
    Tensor drows = Tensor::empty({v.rows, v.k}, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::reduce::row_reduce_backward(r, rows.data<T>(), g.data<T>(), y.data<T>(), drows.data<T>(), v.rows, v.k);
    });
    return from_rows(drows, v, x_shape);
  }
};

// y_j = sum_{i <= j} x_i along the axis (reverse = true: sum_{i >= j}, the gradient).
Tensor cumsum_along(const Tensor& x, std::int64_t axis, bool reverse) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return y;
  const Shape& s = x.shape();
  std::int64_t outer = 1, n = 1, inner = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (static_cast<std::int64_t>(d) < axis)
      outer *= s[d];
    else if (static_cast<std::int64_t>(d) == axis)
      n = s[d];
    else
      inner *= s[d];
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::reduce::cumsum_kernel(x.data<T>(), y.data<T>(), outer, n, inner, reverse);
  });
  return y;
}

// y = cumsum along the axis (reverse: from the end, the gradient's direction); dx = the cumsum of
// g in the other direction: this op again.
struct Cumsum : Function<Cumsum> {
  static constexpr const char* kName = "cumsum";
  static constexpr bool kDifferentiableBackward = true;
  std::int64_t axis = 0;
  bool reverse = false;
  Tensor forward(const Tensor& x, std::int64_t axis_, bool reverse_) {
    axis = axis_;
    reverse = reverse_;
    return cumsum_along(x, axis, reverse);
  }
  Tensors backward(const Tensors& grads) { return {xgrad::apply<Cumsum>(grads[0], axis, !reverse)}; }
};

}  // namespace

Tensor min(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  if (x.defined() && !is_floating_point(x.dtype())) [[unlikely]]
    return extremum_integer<false>(x, axes, keepdim);
  return apply<RowReduction<RowOp::kMin>>(x, axes, keepdim, RowReduce{RowOp::kMin});
}
Tensor prod(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim) {
  check_floating("prod", "x", x);
  return apply<RowReduction<RowOp::kProd>>(x, axes, keepdim, RowReduce{RowOp::kProd});
}
Tensor var(const Tensor& x, const std::vector<std::int64_t>& axes, std::int64_t correction, bool keepdim) {
  XGRAD_CHECK(correction >= 0, "var: correction must be >= 0, got {}", correction);
  check_floating("var", "x", x);
  return apply<RowReduction<RowOp::kVar>>(x, axes, keepdim, RowReduce{RowOp::kVar, correction});
}
Tensor std(const Tensor& x, const std::vector<std::int64_t>& axes, std::int64_t correction, bool keepdim) {
  XGRAD_CHECK(correction >= 0, "std: correction must be >= 0, got {}", correction);
  check_floating("std", "x", x);
  return apply<RowReduction<RowOp::kStd>>(x, axes, keepdim, RowReduce{RowOp::kStd, correction});
}
Tensor norm(const Tensor& x, double p, const std::vector<std::int64_t>& axes, bool keepdim) {
  XGRAD_CHECK(p >= 1, "norm: p must be >= 1 or inf, got {}", p);
  check_floating("norm", "x", x);
  return apply<RowReduction<RowOp::kNorm>>(x, axes, keepdim, RowReduce{RowOp::kNorm, 0, p});
}
Tensor norm(const Tensor& x, const std::string& p, const std::vector<std::int64_t>& axes, bool keepdim) {
  XGRAD_CHECK(p == "fro", "norm: p '{}' is not supported (use \"fro\" or a number)", p);
  return norm(x, 2.0, axes, keepdim);
}
Tensor cumsum(const Tensor& x, std::int64_t dim) {
  XGRAD_CHECK(x.defined(), "cumsum: argument 'x' is an undefined tensor");
  check_floating("cumsum", "x", x);
  const Shape& s = x.shape();
  const std::int64_t a =
      normalize_axis(dim, std::max<std::int64_t>(1, static_cast<std::int64_t>(s.size())), "cumsum", s);
  return apply<Cumsum>(x, s.empty() ? std::int64_t{0} : a, false);
}

}  // namespace xgrad
