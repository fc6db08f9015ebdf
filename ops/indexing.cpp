#include "xgrad/ops/indexing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/ops/define/gather_map.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/index_kernels.hpp"
#include "xgrad/ops/kernels/scatter_rows.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

namespace {

void check_defined(const char* op, const Tensor& t, const char* arg) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

void check_index_dtype(const char* op, const char* arg, const Tensor& t, bool int32_ok) {
  check_defined(op, t, arg);
  const bool ok = t.dtype() == kInt64 || (int32_ok && t.dtype() == kInt32);
  XGRAD_CHECK(ok, "{}: argument '{}' must be an int64{} tensor, got {} of shape {} (convert with .to(kInt64))", op, arg,
              int32_ok ? " or int32" : "", t.dtype(), shape_str(t.shape()));
}

// The values of an index tensor (int64, or int32 when `int32_ok`), as int64.
std::vector<std::int64_t> index_values(const char* op, const char* arg, const Tensor& t, bool int32_ok) {
  check_index_dtype(op, arg, t, int32_ok);
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == kInt64) {
    if (!v.empty()) std::memcpy(v.data(), t.data<std::int64_t>(), v.size() * sizeof(std::int64_t));
  } else {
    detail::widen_indices(t.data<std::int32_t>(), t.numel(), v.data());
  }
  return v;
}

// Checks every index against [0, n) (or [-n, n) when `negative_ok`, then wraps them); the first bad
// one is reported with its position in the index tensor.
void check_range(const char* op, const char* arg, std::vector<std::int64_t>& v, std::int64_t n, std::int64_t dim,
                 const Shape& x_shape, bool negative_ok) {
  if (all_in_range(v, n)) return;  // nothing to report or wrap
  for (std::size_t e = 0; e < v.size(); ++e) {
    const std::int64_t i = v[e];
    const bool ok = negative_ok ? (i >= -n && i < n) : (i >= 0 && i < n);
    XGRAD_CHECK(ok, "{}: index {} (element {} of '{}') is out of range for dim {} of size {} (x has shape {})", op, i,
                e, arg, dim, n, shape_str(x_shape));
    if (i < 0) v[e] = i + n;
  }
}

// Checks every element of an int64 index tensor against [0, n): one vectorised min/max pass
// (all_in_range, across threads for long tensors), then, only if it fails, a search in parallel
// chunks; the first bad one in position order (whatever the split) is reported as check_range does.
void check_range_tensor(const char* op, const char* arg, const Tensor& t, std::int64_t n, std::int64_t dim,
                        const Shape& x_shape) {
  const std::int64_t* p = t.data<std::int64_t>();
  const std::int64_t count = t.numel();
  if (all_in_range({p, static_cast<std::size_t>(count)}, n)) return;
  const std::int64_t k = detail::first_out_of_range(p, count, n);
  XGRAD_CHECK(k < 0, "{}: index {} (element {} of '{}') is out of range for dim {} of size {} (x has shape {})", op,
              p[k], k, arg, dim, n, shape_str(x_shape));
}

std::int64_t norm_dim(const char* op, std::int64_t dim, const Shape& s) {
  // a 0-d tensor takes dim 0 / -1, as torch
  const std::int64_t a = normalize_axis(dim, std::max<std::int64_t>(1, static_cast<std::int64_t>(s.size())), op, s);
  return s.empty() ? 0 : a;
}

// ---- gather / scatter along a dim with a full index tensor --------------------------------------
// Note [Index along a dim]: gather, scatter_add (and their backward, each other) take an index with
// one entry per element, as torch's. The index is read in place (saved, not copied or expanded into
// a map): position p = (o, m, i) of the index (o: the dims before `dim`, m: dim, i: the dims after)
// reads or writes element (o, index[p], i) of x. Offsets of o and i in each tensor come from two
// small tables (one entry per leading position, one per trailing position). The kernels check the
// indices as they go (one out of range is skipped, then the first in position order is reported):
// no pass of its own over an index as large as the output. A gather is parallel over (o, m) rows.
// A scatter is parallel over (o, range of at least 2048 columns) pieces, each task walking m in
// increasing order: two positions that differ in o or i never reach the same element, so every
// element is summed by one task in increasing m (Note [Determinism]), the serial loop's order,
// with no inverse at all. A scatter along dim 0 of rows narrower than that (the row-broadcast
// scatter of bench/index_ops.cpp) runs serially at any thread count: splitting its columns among
// threads made it slower (see scatter_along_kernel). A 1-d scatter (one o, one i) is a row scatter
// instead (Note [Row scatter], ops/kernels/scatter_rows.cpp). The offset tables, gather_along_kernel
// and scatter_along_kernel are in ops/kernels/index_kernels.cpp.

using detail::DimOffsets;
using detail::ScatterCombine;

// The index viewed as (lead, m, trail) around dim a.
struct IndexLines {
  std::int64_t lead = 1, m = 1, trail = 1;
};
IndexLines index_lines(const Shape& is, std::size_t a) {
  IndexLines l;
  for (std::size_t d = 0; d < is.size(); ++d) (d < a ? l.lead : d == a ? l.m : l.trail) *= is[d];
  return l;
}

// y of shape y_shape (>= the index's at every dim, x's dtype) = x gathered at `index` along a, 0
// where the index does not reach.
// `op` names the public op in the error for an index out of range (which it reports like
// check_range_tensor: the first one, with x's shape).
Tensor gather_along(const char* op, const Tensor& x, std::int64_t a, const Tensor& index, const Shape& y_shape) {
  const Shape& is = index.shape();
  Tensor y = y_shape == is ? Tensor::empty(y_shape, x.dtype()) : Tensor::zeros(y_shape, x.dtype());
  if (index.numel() == 0) return y;
  const auto ad = static_cast<std::size_t>(a);
  const IndexLines l = index_lines(is, ad);
  const DimOffsets xo = detail::dim_offsets(x.shape(), is, ad), yo = detail::dim_offsets(y_shape, is, ad);
  const std::int64_t n = x.shape()[ad];
  bool ok = true;
  dispatch_all(x.dtype(), [&](auto tag) {  // any dtype: a copy (only float inputs get gradients)
    using T = typename decltype(tag)::type;
    ok = detail::gather_along_kernel<T>(x.data<T>(), y.data<T>(), index.data<std::int64_t>(), l.lead, l.m, l.trail, n,
                                        xo, yo);
  });
  if (!ok) check_range_tensor(op, "index", index, n, a, x.shape());
  return y;
}

// dst[(o, index[p], i)] = combine(dst[...], src[p]) for every position p of the index (dst and src of
// one floating dtype, src's shape >= the index's; `fill` the constant of ScatterCombine::Fill), then
// the first index out of range is reported. `op` names the public op in that error.
void scatter_combine(const char* op, const Tensor& src, Tensor& dst, std::int64_t a, const Tensor& index,
                     ScatterCombine combine, double fill = 0.0) {
  const Shape& is = index.shape();
  if (index.numel() == 0) return;
  const auto ad = static_cast<std::size_t>(a);
  const std::int64_t n = dst.shape()[ad];
  const IndexLines l = index_lines(is, ad);
  const DimOffsets xo = detail::dim_offsets(dst.shape(), is, ad), so = detail::dim_offsets(src.shape(), is, ad);
  bool ok = true;
  dispatch(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ok = detail::scatter_along_kernel<T>(src.data<T>(), dst.data<T>(), index.data<std::int64_t>(), l.lead, l.m, l.trail,
                                         n, xo, so, combine, fill);
  });
  if (!ok) check_range_tensor(op, "index", index, n, a, dst.shape());
}

// dst += src scattered at `index` along a (src's shape >= the index's at every dim).
void scatter_along(const char* op, const Tensor& src, Tensor& dst, std::int64_t a, const Tensor& index) {
  const Shape& is = index.shape();
  if (index.numel() == 0) return;
  const auto ad = static_cast<std::size_t>(a);
  const std::int64_t n = dst.shape()[ad];
  if (is.size() == 1) {
    check_range_tensor(op, "index", index, n, a,
                       dst.shape());  // one line: a row scatter of single elements, parallel over destinations
    std::vector<std::int64_t> idx(static_cast<std::size_t>(index.numel()));
    std::memcpy(idx.data(), index.data<std::int64_t>(), idx.size() * sizeof(std::int64_t));
    dispatch(dst.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::add_rows_at<T>(src.data<T>(), dst.data<T>(), 1, dst.numel(), 1, idx);
    });
    return;
  }
  scatter_combine(op, src, dst, a, index, ScatterCombine::Sum);
}

// An index passed to the ops below: not a Tensor argument, so `apply` does not count it as an input.
struct IndexArg {
  Tensor t;
};

struct IndexScatter;

// y (of shape y_shape) = x gathered at the int64 `index` along a, 0 where the index does not reach
// (Note [Index along a dim]); dx = the scatter of g (IndexScatter). Named after the public op.
struct IndexGather : Function<IndexGather> {
  static constexpr const char* kName = "gather";
  static constexpr bool kDifferentiableBackward = true;  // Note [Create graph]: through IndexScatter
  const char* op = kName;
  std::int64_t a = 0;
  Shape x_shape;
  const char* name() const override { return op; }
  Tensor forward(const Tensor& x, const char* op_, std::int64_t a_, const IndexArg& index, const Shape& y_shape) {
    op = op_;
    a = a_;
    x_shape = x.shape();
    if (needs_input_grad(0)) save_for_backward({index.t});
    return gather_along(op, x, a, index.t, y_shape);
  }
  Tensors backward(const Tensors& grads);
};

// The backward of IndexGather as an op of its own, "<op>_backward": zeros(x_shape) with g added at
// the index along a; its backward is the gather again.
struct IndexScatter : Function<IndexScatter> {
  static constexpr const char* kName = "gather_backward";
  static constexpr bool kDifferentiableBackward = true;
  std::string op_name;
  const char* op = "gather";
  std::int64_t a = 0;
  Shape g_shape;
  const char* name() const override { return op_name.c_str(); }
  Tensor forward(const Tensor& g, const char* op_, std::int64_t a_, const IndexArg& index, const Shape& x_shape) {
    op = op_;
    op_name = std::string(op_) + "_backward";
    a = a_;
    g_shape = g.shape();
    if (needs_input_grad(0)) save_for_backward({index.t});
    Tensor dx = Tensor::zeros(x_shape, g.dtype());
    scatter_along(op, g, dx, a, index.t);
    return dx;
  }
  Tensors backward(const Tensors& grads) {
    return {xgrad::apply<IndexGather>(grads[0], op, a, IndexArg{saved(0)}, g_shape)};
  }
};

Tensors IndexGather::backward(const Tensors& grads) {
  return {xgrad::apply<IndexScatter>(grads[0], op, a, IndexArg{saved(0)}, x_shape)};
}

// y = x with src scattered at index along a; dx = g, dsrc = g gathered at the index (0 where the
// index does not reach src). dx is g itself, not a copy (as add's is): the engine adds into a
// gradient buffer only when nothing else holds it, and gives .grad its own copy (accumulate and
// accumulate_into_grad in core/autograd.cpp).
struct ScatterAdd : Function<ScatterAdd> {
  static constexpr const char* kName = "scatter_add";
  static constexpr bool kDifferentiableBackward = true;  // Note [Create graph]: through IndexGather
  std::int64_t a = 0;
  Shape src_shape;
  Tensor forward(const Tensor& x, const Tensor& src, std::int64_t a_, const IndexArg& index) {
    a = a_;
    src_shape = src.shape();
    if (needs_input_grad(1)) save_for_backward({index.t});
    Tensor y = x.clone_data();
    scatter_along("scatter_add", src, y, a, index.t);
    return y;
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensors out(2);
    if (needs_input_grad(0)) out[0] = g;
    if (needs_input_grad(1)) out[1] = xgrad::apply<IndexGather>(g, "scatter_add", a, IndexArg{saved(0)}, src_shape);
    return out;
  }
};

// ---- scatter_reduce ------------------------------------------------------------------------------
// Note [Scatter reduce]: torch 1.13's Tensor.scatter_reduce. The forward is scatter_along_kernel with
// the reduction as its combine (each element reduced by one task, in increasing position order: the
// same bits at any thread count). include_self = false first sets the elements the index reaches to
// the reduction's identity (0, 1, −inf, +inf), with the same kernel. The backward is torch's
// scatter_reduce_backward (FunctionsManual.cpp) written with differentiable ops (gather, scatter_add,
// eq, where, masked_fill, and scatter_reduce itself for prod), so it serves first order and
// create_graph alike: sum and mean are linear; amax/amin divide g evenly among the elements equal
// to the result (self counted whenever it equals the result, even with include_self = false, as
// torch); prod divides the result by each factor, with torch's handling of zeros. The one case
// torch does not differentiate twice (prod with 2 or more zeros of src reaching one element) is
// an xgrad::Error when that second derivative is asked for (ScatterReduceNoDoubleBackward).

enum class ScatterReduce { Sum, Prod, Mean, Amax, Amin };

ScatterReduce parse_scatter_reduce(const std::string& reduce) {
  if (reduce == "sum") return ScatterReduce::Sum;
  if (reduce == "prod") return ScatterReduce::Prod;
  if (reduce == "mean") return ScatterReduce::Mean;
  if (reduce == "amax") return ScatterReduce::Amax;
  if (reduce == "amin") return ScatterReduce::Amin;
  throw Error(fmt::format(
      "scatter_reduce: argument 'reduce' must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got '{}'", reduce));
}

// x with src reduced into it at index along a (Note [Scatter reduce]); count (when not null) gets
// the number of values reduced into each element (self included when include_self), at least 1.
Tensor scatter_reduce_forward(const Tensor& x, const Tensor& src, std::int64_t a, const Tensor& index, ScatterReduce r,
                              bool include_self, Tensor* count) {
  Tensor y = x.clone_data();
  if (!include_self) {
    const double identity = r == ScatterReduce::Prod   ? 1.0
                            : r == ScatterReduce::Amax ? -std::numeric_limits<double>::infinity()
                            : r == ScatterReduce::Amin ? std::numeric_limits<double>::infinity()
                                                       : 0.0;
    scatter_combine("scatter_reduce", src, y, a, index, ScatterCombine::Fill, identity);
  }
  switch (r) {
    case ScatterReduce::Sum:
    case ScatterReduce::Mean:
      scatter_along("scatter_reduce", src, y, a, index);
      break;
    case ScatterReduce::Prod:
      scatter_combine("scatter_reduce", src, y, a, index, ScatterCombine::Prod);
      break;
    case ScatterReduce::Amax:
      scatter_combine("scatter_reduce", src, y, a, index, ScatterCombine::Max);
      break;
    case ScatterReduce::Amin:
      scatter_combine("scatter_reduce", src, y, a, index, ScatterCombine::Min);
      break;
  }
  if (r == ScatterReduce::Mean) {
    Tensor n = include_self ? Tensor::ones(x.shape(), x.dtype()) : Tensor::zeros(x.shape(), x.dtype());
    scatter_combine("scatter_reduce", src, n, a, index, ScatterCombine::Count);
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::divide_by_count<T>(y.data<T>(), n.data<T>(), y.numel());
    });
    if (count != nullptr) *count = n;
  }
  return y;
}

// Passes g through, and refuses to be differentiated: torch's DelayedError for the gradient of src
// of a prod that has 2 or more zeros of src reaching one element.
struct ScatterReduceNoDoubleBackward : Function<ScatterReduceNoDoubleBackward> {
  static constexpr const char* kName = "scatter_reduce_backward";
  static constexpr bool kDifferentiableBackward = true;  // its backward is the error below
  Tensor forward(const Tensor& g) { return g.clone_data(); }
  Tensors backward(const Tensors&) {
    throw Error(
        "scatter_reduce: the second derivative of reduce='prod' with respect to src is not supported when 2 or more "
        "zeros of src are reduced into one element (as torch 1.13)");
  }
};

Tensor scatter_reduce_impl(const Tensor& x, const Tensor& src, std::int64_t a, const Tensor& index, ScatterReduce r,
                           bool include_self);

struct ScatterReduceFn : Function<ScatterReduceFn> {
  static constexpr const char* kName = "scatter_reduce";
  static constexpr bool kDifferentiableBackward = true;  // differentiable ops (Note [Scatter reduce])
  std::int64_t a = 0;
  ScatterReduce reduce = ScatterReduce::Sum;
  bool include_self = true;
  Shape src_shape;
  Tensor count;    // mean: the number of values reduced into each element (>= 1)
  Tensor reached;  // include_self = false: true where the index reaches

  Tensor forward(const Tensor& x, const Tensor& src, std::int64_t a_, const IndexArg& index, ScatterReduce r,
                 bool include_self_) {
    a = a_;
    reduce = r;
    include_self = include_self_;
    src_shape = src.shape();
    Tensor y = scatter_reduce_forward(x, src, a, index.t, r, include_self, &count);
    if (!include_self && needs_input_grad(0)) {
      Tensor hits = Tensor::zeros(x.shape(), x.dtype());
      scatter_combine("scatter_reduce", src, hits, a, index.t, ScatterCombine::Fill, 1.0);
      reached = ne(hits, Tensor::scalar(0.0, x.dtype()));
    }
    if (r == ScatterReduce::Sum || r == ScatterReduce::Mean)
      save_for_backward({index.t});
    else
      save_for_backward({index.t, x, src, y});
    return y;
  }

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Tensors s = saved();
    const Tensor& index = s[0];
    // g's values at the index, in src's shape (0 where the index does not reach src)
    const auto at_index = [&](const Tensor& t) {
      return xgrad::apply<IndexGather>(t, "scatter_reduce", a, IndexArg{index}, src_shape);
    };
    const Dtype dt = g.dtype();
    Tensor dx, dsrc;
    switch (reduce) {
      case ScatterReduce::Sum:
        dx = g;
        if (needs_input_grad(1)) dsrc = at_index(g);
        break;
      case ScatterReduce::Mean: {
        const Tensor gn = div(g, count);
        dx = gn;
        if (needs_input_grad(1)) dsrc = at_index(gn);
        break;
      }
      case ScatterReduce::Amax:
      case ScatterReduce::Amin: {
        const Tensor &x = s[1], &src = s[2], &y = s[3];
        const Tensor self_is = eq(x, y).to(dt);
        const Tensor src_is = eq(src, at_index(y.detach())).to(dt);
        const Tensor gd = div(g, scatter_add(self_is, a, index, src_is));
        if (needs_input_grad(0)) dx = mul(self_is, gd);
        if (needs_input_grad(1)) dsrc = mul(src_is, at_index(gd));
        break;
      }
      case ScatterReduce::Prod: {
        const Tensor &x = s[1], &src = s[2], &y = s[3];
        const Tensor zero = Tensor::scalar(0.0, dt), one = Tensor::scalar(1.0, dt);
        if (needs_input_grad(0)) {
          const Tensor masked_x = masked_fill(x, eq(x, zero), 1.0);
          dx = div(mul(g, scatter_reduce_impl(masked_x, src, a, index, reduce, include_self)), masked_x);
        }
        if (needs_input_grad(1)) {
          const Tensor src_zero = eq(src, zero);
          const Tensor zeros_at = at_index(scatter_add(Tensor::zeros(g.shape(), dt), a, index, src_zero.to(dt)));
          const Tensor single_zero = logical_and(src_zero, eq(zeros_at, one));
          const Tensor without_zero =
              scatter_reduce_impl(x, masked_fill(src, single_zero, 1.0), a, index, reduce, include_self);
          dsrc = where(single_zero, at_index(mul(g, without_zero)),
                       div(at_index(mul(g, y)), masked_fill(src, src_zero, 1.0)));
          if (GradMode::is_enabled() && any_above_one(zeros_at))
            dsrc = xgrad::apply<ScatterReduceNoDoubleBackward>(dsrc);
        }
        break;
      }
    }
    Tensors out(2);
    if (needs_input_grad(0)) out[0] = include_self ? dx : masked_fill(dx, reached, 0.0);
    if (needs_input_grad(1)) out[1] = dsrc;
    return out;
  }

  static bool any_above_one(const Tensor& t) {
    const std::vector<double> v = t.to_vector();
    return std::any_of(v.begin(), v.end(), [](double z) { return z > 1; });
  }
};

Tensor scatter_reduce_impl(const Tensor& x, const Tensor& src, std::int64_t a, const Tensor& index, ScatterReduce r,
                           bool include_self) {
  return xgrad::apply<ScatterReduceFn>(x, src, a, IndexArg{index}, r, include_self);
}

// y = x with src's slice j along a added at index[j] (Note [Row scatter]); dx = g,
// dsrc = index_select(g, a, index).
struct IndexAdd : Function<IndexAdd> {
  static constexpr const char* kName = "index_add";
  static constexpr bool kDifferentiableBackward = true;  // Note [Create graph]: through index_select
  std::int64_t a = 0;
  std::vector<std::int64_t> idx;
  Tensor forward(const Tensor& x, const Tensor& src, std::int64_t a_, std::vector<std::int64_t> idx_,
                 std::int64_t outer, std::int64_t n, std::int64_t inner) {
    a = a_;
    Tensor y = x.clone_data();
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::add_rows_at<T>(src.data<T>(), y.data<T>(), outer, n, inner, idx_);
    });
    if (needs_input_grad(1)) idx = std::move(idx_);
    return y;
  }
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensors out(2);
    if (needs_input_grad(0)) out[0] = g;
    if (needs_input_grad(1)) out[1] = xgrad::index_select(g, a, idx);
    return out;
  }
};

// x gathered along a at the (checked) indices `idx` of shape `ishape`: take_along_dim's path.
Tensor gather_checked(const char* op, const Tensor& x, std::int64_t a, const Shape& ishape,
                      std::vector<std::int64_t> idx) {
  const Shape& s = x.shape();
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  check_range(op, "index", idx, n, a, s, false);
  Tensor index = Tensor::empty(s.empty() ? Shape{static_cast<std::int64_t>(idx.size())} : ishape, kInt64);
  if (!idx.empty()) std::memcpy(index.data<std::int64_t>(), idx.data(), idx.size() * sizeof(std::int64_t));
  if (s.empty()) return reshape(apply<IndexGather>(reshape(x, {1}), op, 0, IndexArg{index}, index.shape()), ishape);
  return apply<IndexGather>(x, op, a, IndexArg{index}, ishape);
}

void check_float_pair(const char* op, const Tensor& x, const Tensor& src) {
  check_defined(op, x, "x");
  check_defined(op, src, "src");
  check_floating(op, "x", x);
  check_floating(op, "src", src);
  XGRAD_CHECK(x.dtype() == src.dtype(), "{}: dtype mismatch: x is {} {} but src is {} {}", op, x.dtype(),
              shape_str(x.shape()), src.dtype(), shape_str(src.shape()));
}

}  // namespace

// ---- gather family ------------------------------------------------------------------------------

Tensor detail::index_select_tensor(const Tensor& x, std::int64_t dim, const Tensor& index) {
  check_defined("index_select", x, "x");
  check_index_dtype("index_select", "index", index, true);
  XGRAD_CHECK(index.dim() <= 1, "index_select: argument 'index' must be 0-d or 1-d, got shape {}",
              shape_str(index.shape()));
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("index_select", dim, s);
  if (!s.empty() && index.dtype() == kInt64) {  // the tensor's own indices: checked, never copied
    const std::span<const std::int64_t> idx(index.data<std::int64_t>(), static_cast<std::size_t>(index.numel()));
    const std::int64_t n = s[static_cast<std::size_t>(a)];
    check_range_tensor("index_select", "index", index, n, a, s);
    return detail::index_select_checked(x, a, idx);
  }
  std::vector<std::int64_t> idx = index_values("index_select", "index", index, true);
  if (s.empty()) {
    check_range("index_select", "index", idx, 1, a, s, false);
    return detail::gather_map("index_select", x, Shape(index.dim() == 1 ? 1 : 0, idx.size() == 1 ? 1 : 0),
                              std::vector<std::int64_t>(idx.size(), 0), false);
  }
  check_range("index_select", "index", idx, s[static_cast<std::size_t>(a)], a, s, false);
  return detail::index_select_checked(x, a, idx);
}

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  check_defined("gather", x, "x");
  check_index_dtype("gather", "index", index, false);
  const Shape& s = x.shape();
  const Shape& is = index.shape();
  const std::int64_t a = norm_dim("gather", dim, s);
  XGRAD_CHECK(is.size() == s.size() || (s.empty() && is.size() <= 1) || (is.empty() && s.size() <= 1),
              "gather: index of shape {} must have as many dims as x of shape {}", shape_str(is), shape_str(s));
  for (std::size_t d = 0; d < is.size() && is.size() == s.size(); ++d)
    XGRAD_CHECK(static_cast<std::int64_t>(d) == a || is[d] <= s[d],
                "gather: index of shape {} is larger than x of shape {} at dim {} (only dim {} may be larger)",
                shape_str(is), shape_str(s), d, a);
  if (is.size() != s.size() || s.empty()) {  // a 0-d / 1-element pairing: one position along the only dim
    check_range_tensor("gather", "index", index, s.empty() ? 1 : s[0], a, s);
    const Tensor flat_index = reshape(index, {index.numel()});
    return reshape(apply<IndexGather>(reshape(x, {x.numel()}), "gather", 0, IndexArg{flat_index}, flat_index.shape()),
                   is);
  }
  return apply<IndexGather>(x, "gather", a, IndexArg{index}, is);
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<std::int64_t> dim) {
  check_defined("take_along_dim", x, "x");
  std::vector<std::int64_t> idx = index_values("take_along_dim", "indices", indices, false);
  if (!dim) {
    const Tensor flat = reshape(x, {x.numel()});
    check_range("take_along_dim", "indices", idx, x.numel(), 0, x.shape(), false);
    return detail::gather_map("take_along_dim", flat, {indices.numel()}, idx, false);
  }
  const Shape& s = x.shape();
  const Shape& is = indices.shape();
  XGRAD_CHECK(is.size() == s.size(), "take_along_dim: indices of shape {} must have as many dims as x of shape {}",
              shape_str(is), shape_str(s));
  const std::int64_t a = norm_dim("take_along_dim", *dim, s);
  if (s.empty()) return gather_checked("take_along_dim", x, 0, is, std::move(idx));
  // Broadcast x and indices against each other except along dim (torch's rule).
  Shape xs = s, ib = is;
  xs[static_cast<std::size_t>(a)] = is[static_cast<std::size_t>(a)];
  const Shape bshape = broadcast_shapes(xs, is, "take_along_dim");
  Shape xtarget = bshape;
  xtarget[static_cast<std::size_t>(a)] = s[static_cast<std::size_t>(a)];
  const Tensor xb = xtarget == s ? x : expand(x, xtarget);
  // the indices broadcast to bshape
  std::vector<std::int64_t> ibv(static_cast<std::size_t>(shape_numel(bshape)));
  detail::broadcast_indices(idx.data(), is, bshape, ibv.data());
  return gather_checked("take_along_dim", xb, a, bshape, std::move(ibv));
}

Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_float_pair("scatter_add", x, src);
  check_index_dtype("scatter_add", "index", index, false);
  const Shape &s = x.shape(), &is = index.shape(), &ss = src.shape();
  XGRAD_CHECK(is.size() == s.size() && ss.size() == s.size(),
              "scatter_add: x {}, index {} and src {} must have the same number of dims", shape_str(s), shape_str(is),
              shape_str(ss));
  const std::int64_t a = norm_dim("scatter_add", dim, s);
  for (std::size_t d = 0; d < is.size(); ++d)
    XGRAD_CHECK(
        is[d] <= ss[d] && (static_cast<std::int64_t>(d) == a || is[d] <= s[d]),
        "scatter_add: index of shape {} must be no larger than src {} at every dim and than x {} except at dim {}",
        shape_str(is), shape_str(ss), shape_str(s), a);
  // the indices are checked in the kernel (scatter_along), before y is returned
  if (s.empty()) {  // all three 0-d: one element
    check_range_tensor("scatter_add", "index", index, 1, a, s);
    return reshape(
        apply<ScatterAdd>(reshape(x, {1}), reshape(src, {1}), std::int64_t{0}, IndexArg{reshape(index, {1})}), s);
  }
  return apply<ScatterAdd>(x, src, a, IndexArg{index});
}

Tensor scatter_reduce(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  constexpr const char* op = "scatter_reduce";
  const ScatterReduce r = parse_scatter_reduce(reduce);
  check_float_pair(op, x, src);
  check_index_dtype(op, "index", index, false);
  const Shape &s = x.shape(), &is = index.shape(), &ss = src.shape();
  XGRAD_CHECK(is.size() == s.size() && ss.size() == s.size(),
              "{}: x {}, index {} and src {} must have the same number of dims", op, shape_str(s), shape_str(is),
              shape_str(ss));
  const std::int64_t a = norm_dim(op, dim, s);
  for (std::size_t d = 0; d < is.size(); ++d)
    XGRAD_CHECK(is[d] <= ss[d] && (static_cast<std::int64_t>(d) == a || is[d] <= s[d]),
                "{}: index of shape {} must be no larger than src {} at every dim and than x {} except at dim {}", op,
                shape_str(is), shape_str(ss), shape_str(s), a);
  if (s.empty()) {  // all three 0-d: one element
    check_range_tensor(op, "index", index, 1, a, s);
    return reshape(
        scatter_reduce_impl(reshape(x, {1}), reshape(src, {1}), std::int64_t{0}, reshape(index, {1}), r, include_self),
        s);
  }
  return scatter_reduce_impl(x, src, a, index, r, include_self);
}

Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_float_pair("index_add", x, src);
  std::vector<std::int64_t> idx = index_values("index_add", "index", index, true);
  XGRAD_CHECK(index.dim() <= 1, "index_add: argument 'index' must be 0-d or 1-d, got shape {}",
              shape_str(index.shape()));
  const Shape &s = x.shape(), &ss = src.shape();
  const std::int64_t a = norm_dim("index_add", dim, s);
  Shape want = s;
  if (!want.empty()) want[static_cast<std::size_t>(a)] = static_cast<std::int64_t>(idx.size());
  XGRAD_CHECK(ss == want || (s.empty() && src.numel() == static_cast<std::int64_t>(idx.size())),
              "index_add: src of shape {} must be x's shape {} with dim {} of size {} (the index's length)",
              shape_str(ss), shape_str(s), a, idx.size());
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  check_range("index_add", "index", idx, n, a, s, false);
  if (s.empty()) {  // x 0-d: every src element adds into it
    const auto len = static_cast<std::int64_t>(idx.size());
    return reshape(apply<IndexAdd>(reshape(x, {1}), reshape(src, {len}), std::int64_t{0}, std::move(idx),
                                   std::int64_t{1}, std::int64_t{1}, std::int64_t{1}),
                   s);
  }
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (static_cast<std::int64_t>(d) < a) outer *= s[d];
    if (static_cast<std::int64_t>(d) > a) inner *= s[d];
  }
  if (src.numel() == 0) outer = inner = 0;
  return apply<IndexAdd>(x, src, a, std::move(idx), outer, n, inner);
}

Tensor index(const Tensor& x, const Tensor& idx) {
  check_defined("index", x, "x");
  check_defined("index", idx, "idx");
  const Shape& s = x.shape();
  if (idx.dtype() == kBool) {
    const Shape& ms = idx.shape();
    bool ok = ms.size() <= s.size();
    for (std::size_t d = 0; ok && d < ms.size(); ++d) ok = ms[d] == s[d];
    XGRAD_CHECK(ok, "index: the bool mask of shape {} must match the leading dims of x of shape {}", shape_str(ms),
                shape_str(s));
    const Shape rest(s.begin() + static_cast<std::ptrdiff_t>(ms.size()), s.end());
    const std::int64_t inner = shape_numel(rest);
    const std::vector<std::int64_t> rows = detail::true_positions(idx.data<bool>(), idx.numel());
    Shape out{static_cast<std::int64_t>(rows.size())};
    out.insert(out.end(), rest.begin(), rest.end());
    std::vector<std::int64_t> map(static_cast<std::size_t>(shape_numel(out)));
    detail::fill_row_map(map.data(), rows.data(), static_cast<std::int64_t>(rows.size()), inner);
    return detail::gather_map("index", x, out, std::move(map), true);
  }
  std::vector<std::int64_t> v = index_values("index", "idx", idx, true);
  XGRAD_CHECK(!s.empty(), "index: x is 0-d (shape ()): an integer index needs a dim to index");
  check_range("index", "idx", v, s[0], 0, s, true);
  Shape out = idx.shape();
  out.insert(out.end(), s.begin() + 1, s.end());
  checked_numel(out, "index", "idx");
  const std::int64_t inner = shape_numel(Shape(s.begin() + 1, s.end()));
  std::vector<std::int64_t> map(static_cast<std::size_t>(shape_numel(out)));
  detail::fill_row_map(map.data(), v.data(), static_cast<std::int64_t>(v.size()), inner);
  std::vector<std::int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  return detail::gather_map("index", x, out, std::move(map), distinct);
}

// ---- arg-reductions, topk, sort -----------------------------------------------------------------
namespace {

// x seen as (outer, n, inner) along dim a (a 0-d tensor: 1, 1, 1).
struct Lines {
  std::int64_t outer = 1, n = 1, inner = 1;
};
Lines lines_of(const Shape& s, std::int64_t a) {
  Lines l;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (static_cast<std::int64_t>(d) < a)
      l.outer *= s[d];
    else if (static_cast<std::int64_t>(d) == a)
      l.n = s[d];
    else
      l.inner *= s[d];
  }
  return l;
}

// The line loops (arg_extreme, sort_lines, sorted_map) are in ops/kernels/index_kernels.cpp: NaN
// sorts above every number and counts as both the maximum and the minimum, as torch.

template <bool kMax>
Tensor arg_reduce(const char* op, const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  check_defined(op, x, "x");
  const Shape& s = x.shape();
  Shape out_shape;
  Lines l;
  if (dim) {
    const std::int64_t a = norm_dim(op, *dim, s);
    l = lines_of(s, a);
    XGRAD_CHECK(l.n > 0 || s.empty(), "{}: cannot reduce over dim {} of size 0 (x has shape {}): no position to return",
                op, a, shape_str(s));
    out_shape = s;
    if (!s.empty()) {
      if (keepdim)
        out_shape[static_cast<std::size_t>(a)] = 1;
      else
        out_shape.erase(out_shape.begin() + a);
    }
  } else {
    XGRAD_CHECK(x.numel() > 0, "{}: x of shape {} is empty: no position to return", op, shape_str(s));
    l.n = x.numel();
    if (keepdim) out_shape.assign(s.size(), 1);
  }
  Tensor y = Tensor::empty(out_shape, kInt64);
  std::int64_t* yp = y.data<std::int64_t>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::arg_extreme<T>(x.data<T>(), l.outer, l.n, l.inner, kMax, yp);
  });
  return y;
}

// Stable order of every line along dim a: positions (int64, x's shape with dim a of size k).
Tensor sorted_positions(const char* op, const Tensor& x, std::int64_t a, std::int64_t k, bool descending) {
  const Shape& s = x.shape();
  const Lines l = lines_of(s, a);
  Shape out_shape = s;
  if (!s.empty()) out_shape[static_cast<std::size_t>(a)] = k;
  Tensor pos = Tensor::empty(out_shape, kInt64);
  std::int64_t* pp = pos.data<std::int64_t>();
  if (pos.numel() == 0) return pos;
  dispatch(
      x.dtype(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        detail::sort_lines<T>(x.data<T>(), l.outer, l.n, l.inner, k, descending, pp);
      },
      op);
  return pos;
}

// (x taken at the positions along dim a, the positions): values differentiable through gather_map.
std::tuple<Tensor, Tensor> take_sorted(const char* op, const Tensor& x, std::int64_t a, const Tensor& pos) {
  const Shape& s = x.shape();
  const Lines l = lines_of(s, a);
  const std::int64_t k = s.empty() ? 1 : pos.shape()[static_cast<std::size_t>(a)];
  std::vector<std::int64_t> map(static_cast<std::size_t>(pos.numel()));
  detail::sorted_map(pos.data<std::int64_t>(), pos.numel(), l.n, l.inner, k, map.data());
  return {detail::gather_map(op, x, pos.shape(), std::move(map), true), pos};
}

// torch.max(x, dim) / torch.min(x, dim): the values are x taken at the indices (the first arg-max /
// arg-min along dim), so the gradient goes to that one element, as torch's (Note [Tie rules] in
// ops/reduction.cpp: max(x, axes), torch.amax, shares it among ties instead). Any dtype: integer
// values are taken exactly (no gradient).
template <bool kMax>
std::tuple<Tensor, Tensor> extremum_with_indices(const char* op, const Tensor& x, std::int64_t dim, bool keepdim) {
  check_defined(op, x, "x");
  const Tensor pos = arg_reduce<kMax>(op, x, dim, true);
  const std::int64_t a = norm_dim(op, dim, x.shape());
  auto [v, i] = take_sorted(op, x, a, pos);
  if (keepdim || x.dim() == 0) return {v, i};
  Shape out = x.shape();
  out.erase(out.begin() + a);
  return {reshape(v, out), reshape(i, out)};
}

}  // namespace

Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_reduce<true>("argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_reduce<false>("argmin", x, dim, keepdim);
}

std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_with_indices<true>("max", x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_with_indices<false>("min", x, dim, keepdim);
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted (a valid order for sorted = false too)
  check_defined("topk", x, "x");
  check_floating("topk", "x", x);
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("topk", dim, s);
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  XGRAD_CHECK(k >= 0 && k <= n, "topk: k = {} is out of range for dim {} of size {} (x has shape {})", k, a, n,
              shape_str(s));
  const Tensor pos = sorted_positions("topk", x, a, k, largest);
  return take_sorted("topk", x, a, pos);
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim, bool descending, bool stable) {
  (void)stable;  // always stable
  check_defined("sort", x, "x");
  check_floating("sort", "x", x);
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("sort", dim, s);
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  const Tensor pos = sorted_positions("sort", x, a, n, descending);
  return take_sorted("sort", x, a, pos);
}

Tensor nonzero(const Tensor& x) {
  check_defined("nonzero", x, "x");
  const Shape& s = x.shape();
  const std::int64_t total = x.numel();
  detail::NonzeroFlags flags;
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    flags = detail::nonzero_flags<T>(x.data<T>(), total);
  });
  const auto nd = static_cast<std::int64_t>(s.size());
  Tensor y = Tensor::empty({flags.start.back(), nd}, kInt64);
  detail::nonzero_coords(flags, s, total, y.data<std::int64_t>());
  return y;
}

Tensor one_hot(const Tensor& labels, std::int64_t num_classes) {
  const std::vector<std::int64_t> v = index_values("one_hot", "labels", labels, false);
  XGRAD_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or >= 0, got {}", num_classes);
  std::int64_t c = num_classes;
  if (c == -1) {
    XGRAD_CHECK(!v.empty(), "one_hot: cannot infer num_classes from empty labels of shape {}; pass num_classes",
                shape_str(labels.shape()));
    c = checked_add(*std::max_element(v.begin(), v.end()), 1, "one_hot", "labels");
  }
  for (std::size_t e = 0; e < v.size(); ++e)
    XGRAD_CHECK(v[e] >= 0 && v[e] < c, "one_hot: label {} (element {} of 'labels') is out of range for {} classes",
                v[e], e, c);
  Shape out = labels.shape();
  out.push_back(c);
  // a num_classes too large for this machine is refused naming it, not by the anonymous allocation
  check_host_memory(
      checked_nbytes(checked_numel(out, "one_hot", "num_classes"), sizeof(std::int64_t), "one_hot", "num_classes"),
      "one_hot", "num_classes");
  Tensor y = Tensor::zeros(out, kInt64);
  detail::one_hot_fill(v.data(), static_cast<std::int64_t>(v.size()), c, y.data<std::int64_t>());
  return y;
}

}  // namespace xgrad
