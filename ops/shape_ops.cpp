#include "xgrad/ops/shape_ops.hpp"

#include <fmt/format.h>  // fmt::join

#include <algorithm>
#include <cassert>
#include <numeric>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/define/gather_map.hpp"
#include "xgrad/ops/define/sum_to.hpp"
#include "xgrad/ops/kernels/broadcast_kernel.hpp"
#include "xgrad/ops/kernels/copy_rows.hpp"
#include "xgrad/ops/kernels/scatter_rows.hpp"
#include "xgrad/ops/kernels/shape_kernels.hpp"

namespace xgrad {

namespace {

void check_defined(const char* op, const Tensor& x, const char* arg = "x") {
  XGRAD_CHECK(x.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

// Calls fn(type_tag<U>{}) with U the unsigned integer type of d's element size. The kernels that only
// move elements (permute, transpose, expand) copy bytes, so one instantiation per size serves every
// dtype, integer and bool included, as torch's do.
template <class Fn>
void dispatch_bytes(Dtype d, Fn&& fn) {
  switch (dtype_size(d)) {
    case 1:
      fn(type_tag<std::uint8_t>{});
      return;
    case 4:
      fn(type_tag<std::uint32_t>{});
      return;
    default:
      fn(type_tag<std::uint64_t>{});
      return;
  }
}

// Partial products of a tensor's shape: its strides fit (Note [Checked sizes]), but a leading
// product of an empty shape such as (2^62, 2^62, 0) does not, hence the check.
std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end, const char* op = "shape op") {
  return checked_prod(s, begin, end, op, "x");
}

// ---- views: reshape, flatten, squeeze, unsqueeze ---------------------------------------------------
// y shares x's storage with another shape; dx = g viewed with x's shape.
struct ReshapeName {
  static constexpr const char* kName = "reshape";
};
struct FlattenName {
  static constexpr const char* kName = "flatten";
};
struct SqueezeName {
  static constexpr const char* kName = "squeeze";
};
struct UnsqueezeName {
  static constexpr const char* kName = "unsqueeze";
};

template <class Name>
struct View : Function<View<Name>> {
  static constexpr const char* kName = Name::kName;
  static constexpr bool kDifferentiableBackward = true;  // the view back: a reshape
  Shape in_shape;
  Tensor forward(const Tensor& x, const Shape& shape) {
    if (this->needs_input_grad(0)) in_shape = x.shape();
    return alias_with_shape(x, shape);
  }
  Tensors backward(const Tensors& grads);
};

template <class Name>
Tensors View<Name>::backward(const Tensors& grads) {
  return {xgrad::apply<View<ReshapeName>>(grads[0], in_shape)};
}

Shape resolve_reshape(const Tensor& x, const Shape& shape) {
  Shape out = shape;
  std::int64_t infer = -1;
  Shape known_dims;  // every size but the -1, checked for overflow together
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      XGRAD_CHECK(infer < 0, "reshape: shape {} has more than one -1 (x has shape {})", shape_str(shape),
                  shape_str(x.shape()));
      infer = static_cast<std::int64_t>(d);
    } else {
      XGRAD_CHECK(shape[d] >= 0, "reshape: shape {} has a negative size {} (x has shape {})", shape_str(shape),
                  shape[d], shape_str(x.shape()));
      known_dims.push_back(shape[d]);
    }
  }
  // Note [Checked sizes]: a shape whose element count overflows is refused here, whatever x holds.
  const std::int64_t known = checked_numel(known_dims, "reshape", "shape");
  if (infer >= 0) {
    XGRAD_CHECK(known != 0 && x.numel() % known == 0,
                "reshape: cannot reshape a tensor of shape {} ({} elements) into {}: the -1 cannot be inferred",
                shape_str(x.shape()), x.numel(), shape_str(shape));
    out[static_cast<std::size_t>(infer)] = x.numel() / known;
  } else {
    XGRAD_CHECK(known == x.numel(), "reshape: cannot reshape a tensor of shape {} ({} elements) into {} ({} elements)",
                shape_str(x.shape()), x.numel(), shape_str(shape), known);
  }
  return out;
}

// ---- permute and transpose ----------------------------------------------------------------------
// The copy is detail::permute_kernel (ops/kernels/shape_kernels.cpp), one instantiation per element size.
Tensor permute_copy(const Tensor& x, const std::vector<std::int64_t>& dims) {
  Shape out_shape(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) out_shape[d] = x.shape()[static_cast<std::size_t>(dims[d])];
  Tensor y = Tensor::empty(out_shape, x.dtype());
  dispatch_bytes(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::permute_kernel<T>(static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), x.shape(), dims);
  });
  return y;
}

struct PermuteName {
  static constexpr const char* kName = "permute";
};
struct TransposeName {
  static constexpr const char* kName = "transpose";
};

// y = x with dims reordered; dx = g permuted by the inverse permutation.
template <class Name>
struct Permute : Function<Permute<Name>> {
  static constexpr const char* kName = Name::kName;
  static constexpr bool kDifferentiableBackward = true;  // the inverse permutation, this op again
  std::vector<std::int64_t> dims;
  Tensor forward(const Tensor& x, const std::vector<std::int64_t>& dims_) {
    dims = dims_;
    return permute_copy(x, dims);
  }
  Tensors backward(const Tensors& grads) {
    std::vector<std::int64_t> inv(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) inv[static_cast<std::size_t>(dims[d])] = static_cast<std::int64_t>(d);
    return {xgrad::apply<Permute<Name>>(grads[0], inv)};
  }
};

// ---- slice and index_select ---------------------------------------------------------------------
// Both gather rows along an axis: x viewed as (outer, n, inner), y as (outer, len, inner) with
// y[o, j] = x[o, pos(j)]. Slice positions are distinct; index_select's may repeat.
struct AxisGeometry {
  std::int64_t outer = 1, n = 1, inner = 1;
};
AxisGeometry geometry(const Shape& s, std::int64_t axis) {
  const auto a = static_cast<std::size_t>(axis);
  if (shape_numel(s) == 0) return {0, s[a], 0};  // nothing to move (and no product to overflow)
  return {prod(s, 0, a), s[a], prod(s, a + 1, s.size())};
}

// `len` positions along the axis; `pos` holds them unless x is empty (then none is read: a slice of
// an empty tensor with a huge axis keeps its count without materialising its positions).
Tensor gather_rows(const Tensor& x, std::int64_t axis, std::span<const std::int64_t> pos, std::int64_t len) {
  const AxisGeometry g = geometry(x.shape(), axis);
  Shape out_shape = x.shape();
  out_shape[static_cast<std::size_t>(axis)] = len;
  Tensor y = Tensor::empty(out_shape, x.dtype());
  if (y.numel() == 0) return y;
  detail::copy_rows(x.raw_data(), y.raw_data(), g.inner, dtype_size(x.dtype()), g.outer, len, g.n, pos.data(), false);
  return y;
}

// dx = zeros(x_shape) with dx[o, pos(j)] += g[o, j]: a copy for distinct positions (slice), else
// the row scatter of Note [Row scatter] (ops/kernels/scatter_rows.cpp): repeated positions sum in
// increasing j for any thread count, with one index per row and the inverse built in parallel.
Tensor scatter_add_rows(const Tensor& g, const Shape& x_shape, std::int64_t axis, const std::vector<std::int64_t>& pos,
                        bool distinct) {
  const AxisGeometry geo = geometry(x_shape, axis);
  const auto len = static_cast<std::int64_t>(pos.size());
  Tensor dx = Tensor::zeros(x_shape, g.dtype());
  if (dx.numel() == 0 || g.numel() == 0) return dx;
  if (distinct) {
    detail::copy_rows(g.raw_data(), dx.raw_data(), geo.inner, dtype_size(g.dtype()), geo.outer, len, geo.n, pos.data(),
                      true);
    return dx;
  }
  dispatch(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::add_rows_at<T>(g.data<T>(), dx.data<T>(), geo.outer, geo.n, geo.inner, pos);
  });
  return dx;
}

struct IndexSelect;
struct SliceName {
  static constexpr const char* kName = "slice_backward";
  static constexpr bool kDistinct = true;
};
struct IndexSelectName {
  static constexpr const char* kName = "index_select_backward";
  static constexpr bool kDistinct = false;
};
// The backward of slice and index_select as an op of its own (Note [Create graph]): y =
// zeros(x_shape) with g added at the positions along axis (distinct for slice); its own backward is
// the gather (index_select) at the same positions.
template <class Name>
struct RowsBackward : Function<RowsBackward<Name>> {
  static constexpr const char* kName = Name::kName;
  static constexpr bool kDifferentiableBackward = true;
  std::int64_t axis = 0;
  std::vector<std::int64_t> pos;
  Tensor forward(const Tensor& g, const Shape& x_shape, std::int64_t axis_, const std::vector<std::int64_t>& pos_) {
    axis = axis_;
    if (this->needs_input_grad(0)) pos = pos_;  // only this op's own backward reads them
    return scatter_add_rows(g, x_shape, axis, pos_, Name::kDistinct);
  }
  Tensors backward(const Tensors& grads);
};
using SliceBackward = RowsBackward<SliceName>;
using IndexSelectBackward = RowsBackward<IndexSelectName>;

// y = x[..., start:end:step, ...]; dx = zeros with g written at the sliced positions.
struct Slice : Function<Slice> {
  static constexpr const char* kName = "slice";
  Shape x_shape;
  std::int64_t axis = 0;
  std::vector<std::int64_t> pos;  // empty when x is
  Tensor forward(const Tensor& x, std::int64_t axis_, std::vector<std::int64_t> pos_, std::int64_t count) {
    x_shape = x.shape();
    axis = axis_;
    pos = std::move(pos_);
    return gather_rows(x, axis, pos, count);
  }
  static constexpr bool kDifferentiableBackward = true;  // through SliceBackward
  Tensors backward(const Tensors& grads) { return {xgrad::apply<SliceBackward>(grads[0], x_shape, axis, pos)}; }
};

// y = x taken at index along axis; dx = zeros with g added at the indices (repeats sum).
struct IndexSelect : Function<IndexSelect> {
  static constexpr const char* kName = "index_select";
  Shape x_shape;
  std::int64_t axis = 0;
  std::vector<std::int64_t> pos;
  // The positions are kept only for the backward: a lookup without gradient copies none of them.
  Tensor forward(const Tensor& x, std::int64_t axis_, std::span<const std::int64_t> pos_) {
    x_shape = x.shape();
    axis = axis_;
    if (this->needs_input_grad(0)) pos.assign(pos_.begin(), pos_.end());
    return gather_rows(x, axis, pos_, static_cast<std::int64_t>(pos_.size()));
  }
  static constexpr bool kDifferentiableBackward = true;  // through IndexSelectBackward
  // Positions may repeat: the row scatter (no sort to find out whether they do; distinct positions
  // cost the same there, one row added into zeros each).
  Tensors backward(const Tensors& grads) { return {xgrad::apply<IndexSelectBackward>(grads[0], x_shape, axis, pos)}; }
};

// (IndexSelect copies the positions only when g takes a gradient in turn.)
template <class Name>
Tensors RowsBackward<Name>::backward(const Tensors& grads) {
  return {xgrad::apply<IndexSelect>(grads[0], axis, pos)};
}

// ---- concat and stack ---------------------------------------------------------------------------
// The output viewed as (outer, sum_i len_i) rows, input i contributing (outer, len_i): concat has
// len_i = n_i * inner, stack has len_i = inner (each input adds one slot of the new axis).
void join_rows(const Tensors& xs, Tensor& y, std::int64_t outer, const std::vector<std::int64_t>& lens) {
  std::vector<const void*> srcs(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) srcs[i] = xs[i].raw_data();
  detail::join_rows(srcs.data(), srcs.size(), y.raw_data(), dtype_size(y.dtype()), outer, lens.data());
}

// y = concat(xs, axis); dx_i = the i-th block of g along axis.
struct Concat : Function<Concat> {
  static constexpr const char* kName = "concat";
  static constexpr bool kDifferentiableBackward = true;  // through ConcatBackward
  std::vector<Shape> shapes;
  std::int64_t outer = 1;
  std::vector<std::int64_t> lens;
  Tensor forward(const Tensors& xs, std::int64_t axis) {
    Shape out_shape = xs[0].shape();
    std::int64_t total = 0;  // checked by concat() before
    for (const auto& x : xs) total += x.shape()[static_cast<std::size_t>(axis)];
    out_shape[static_cast<std::size_t>(axis)] = total;
    // The geometry of the output (an input may be empty along the axis while the output is not).
    const AxisGeometry g0 = geometry(out_shape, axis);
    outer = g0.outer;
    for (const auto& x : xs) {
      shapes.push_back(x.shape());
      lens.push_back(x.shape()[static_cast<std::size_t>(axis)] * g0.inner);
    }
    Tensor y = Tensor::empty(out_shape, xs[0].dtype());
    join_rows(xs, y, outer, lens);
    return y;
  }
  Tensors backward(const Tensors& grads);
};

// y = stack(xs, axis); dx_i = g at position i of the new axis.
struct Stack : Function<Stack> {
  static constexpr const char* kName = "stack";
  static constexpr bool kDifferentiableBackward = true;  // through StackBackward
  Shape shape;
  std::int64_t outer = 1;
  std::vector<std::int64_t> lens;
  Tensor forward(const Tensors& xs, std::int64_t axis) {
    shape = xs[0].shape();
    const auto a = static_cast<std::size_t>(axis);
    const bool empty = shape_numel(shape) == 0;
    outer = empty ? 0 : prod(shape, 0, a);
    lens.assign(xs.size(), empty ? 0 : prod(shape, a, shape.size()));
    Shape out_shape = shape;
    out_shape.insert(out_shape.begin() + axis, static_cast<std::int64_t>(xs.size()));
    Tensor y = Tensor::empty(out_shape, xs[0].dtype());
    join_rows(xs, y, outer, lens);
    return y;
  }
  Tensors backward(const Tensors& grads);
};

// Gradient blocks of a joined output: block i of row o sits at o * row + offs[i].
Tensors split_joined(const Tensor& g, const std::vector<Shape>& shapes, std::int64_t outer,
                     const std::vector<std::int64_t>& lens, const Node& node) {
  const std::size_t k = shapes.size();
  std::vector<std::int64_t> offs(k + 1, 0);
  for (std::size_t i = 0; i < k; ++i) offs[i + 1] = offs[i] + lens[i];
  const std::int64_t row = offs[k];
  Tensors out(k);
  for (std::size_t i = 0; i < k; ++i) {
    if (!node.needs_input_grad(i)) continue;
    out[i] = Tensor::empty(shapes[i], g.dtype());
    detail::copy_column_block(g.raw_data(), out[i].raw_data(), dtype_size(g.dtype()), outer, row, offs[i], lens[i]);
  }
  return out;
}

// The same blocks, recorded (a create_graph backward, Note [Create graph]): g viewed as (outer, row)
// and sliced column blocks, each reshaped to its input's shape.
Tensors split_joined_recorded(const Tensor& g, const std::vector<Shape>& shapes, std::int64_t outer,
                              const std::vector<std::int64_t>& lens, const Node& node) {
  std::int64_t row = 0;
  for (auto l : lens) row += l;
  const Tensor g2 = reshape(g, {outer, row});
  Tensors out(shapes.size());
  std::int64_t off = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (node.needs_input_grad(i)) out[i] = reshape(slice(g2, 1, off, off + lens[i]), shapes[i]);
    off += lens[i];
  }
  return out;
}

// The backward of concat and stack (Note [Fused ops]): the row copies, or the recorded slices.
struct ConcatBackward {
  static constexpr const char* kName = "concat_backward";
  static constexpr auto kernel = split_joined;
  static constexpr auto formula = split_joined_recorded;
};
struct StackBackward {
  static constexpr const char* kName = "stack_backward";
  static constexpr auto kernel = split_joined;
  static constexpr auto formula = split_joined_recorded;
};

Tensors Concat::backward(const Tensors& grads) {
  return apply_fused<ConcatBackward>(grads[0], shapes, outer, lens, *this);
}
Tensors Stack::backward(const Tensors& grads) {
  return apply_fused<StackBackward>(grads[0], std::vector<Shape>(lens.size(), shape), outer, lens, *this);
}

void check_list(const char* op, const Tensors& xs) {
  XGRAD_CHECK(!xs.empty(), "{}: argument 'xs' is an empty list (need at least one tensor)", op);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    XGRAD_CHECK(xs[i].defined(), "{}: tensor {} of 'xs' is undefined", op, i);
    XGRAD_CHECK(xs[i].dtype() == xs[0].dtype(), "{}: dtype mismatch: tensor {} is {} {} but tensor 0 is {} {}", op, i,
                xs[i].dtype(), shape_str(xs[i].shape()), xs[0].dtype(), shape_str(xs[0].shape()));
  }
}

// ---- expand -------------------------------------------------------------------------------------
// y = x broadcast to shape; dx = g summed over the broadcast axes.
struct Expand : Function<Expand> {
  static constexpr const char* kName = "expand";
  Shape x_shape;
  Tensor forward(const Tensor& x, const Shape& shape) {
    x_shape = x.shape();
    Tensor y = Tensor::empty(shape, x.dtype());
    dispatch_bytes(x.dtype(), [&](auto tag) {  // any dtype: a copy
      using T = typename decltype(tag)::type;
      detail::broadcast_map<T, 1>(static_cast<T*>(y.raw_data()), shape, {static_cast<const T*>(x.raw_data())},
                                  {&x.shape()}, [](T v) { return v; });
    });
    return y;
  }
  static constexpr bool kDifferentiableBackward = true;  // detail::sum_to records itself in grad mode
  Tensors backward(const Tensors& grads) { return {detail::sum_to(grads[0], x_shape)}; }
};

}  // namespace

// ---- public API: validate, then apply -------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", x);
  return apply<View<ReshapeName>>(x, resolve_reshape(x, shape));
}

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  check_defined("flatten", x);
  const Shape& s = x.shape();
  if (s.empty()) {
    // Like torch: a 0-d tensor flattens to one element (only dims 0 and -1 are valid).
    normalize_axis(start_dim, 1, "flatten", s);
    normalize_axis(end_dim, 1, "flatten", s);
    return apply<View<FlattenName>>(x, Shape{1});
  }
  const auto nd = static_cast<std::int64_t>(s.size());
  const std::int64_t a = normalize_axis(start_dim, nd, "flatten", s);
  const std::int64_t b = normalize_axis(end_dim, nd, "flatten", s);
  XGRAD_CHECK(a <= b, "flatten: start_dim {} comes after end_dim {} for a tensor of shape {}", start_dim, end_dim,
              shape_str(s));
  Shape out(s.begin(), s.begin() + a);
  out.push_back(prod(s, static_cast<std::size_t>(a), static_cast<std::size_t>(b) + 1, "flatten"));
  out.insert(out.end(), s.begin() + b + 1, s.end());
  return apply<View<FlattenName>>(x, out);
}

Tensor squeeze(const Tensor& x, std::int64_t axis) {
  check_defined("squeeze", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s.size()), "squeeze", s);
  // As in torch, squeezing an axis whose size is not 1 leaves the shape unchanged (still a view).
  Shape out = s;
  if (s[static_cast<std::size_t>(a)] == 1) out.erase(out.begin() + a);
  return apply<View<SqueezeName>>(x, out);
}

Tensor squeeze(const Tensor& x) {
  check_defined("squeeze", x);
  Shape out;
  for (auto n : x.shape())
    if (n != 1) out.push_back(n);
  return apply<View<SqueezeName>>(x, out);
}

Tensor unsqueeze(const Tensor& x, std::int64_t axis) {
  check_defined("unsqueeze", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s.size()) + 1, "unsqueeze", s);
  Shape out = s;
  out.insert(out.begin() + a, 1);
  return apply<View<UnsqueezeName>>(x, out);
}

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims) {
  check_defined("permute", x);
  const Shape& s = x.shape();
  const auto nd = static_cast<std::int64_t>(s.size());
  XGRAD_CHECK(static_cast<std::int64_t>(dims.size()) == nd,
              "permute: dims [{}] has {} entries but x of shape {} has {} dimensions", fmt::join(dims, ", "),
              dims.size(), shape_str(s), nd);
  std::vector<std::int64_t> norm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t d = 0; d < dims.size(); ++d) {
    XGRAD_CHECK(dims[d] >= -nd && dims[d] < nd, "permute: dims [{}] is not a permutation of 0..{} (x has shape {})",
                fmt::join(dims, ", "), nd - 1, shape_str(s));
    norm[d] = dims[d] < 0 ? dims[d] + nd : dims[d];
    XGRAD_CHECK(!seen[static_cast<std::size_t>(norm[d])],
                "permute: dims [{}] is not a permutation of 0..{}: dimension {} repeats (x has shape {})",
                fmt::join(dims, ", "), nd - 1, norm[d], shape_str(s));
    seen[static_cast<std::size_t>(norm[d])] = true;
  }
  // Permuting an empty shape can move its zero inward: (2^62, 2^62, 0) -> (0, 2^62, 2^62) has strides
  // that overflow (Note [Checked sizes]).
  Shape out(norm.size());
  for (std::size_t d = 0; d < norm.size(); ++d) out[d] = s[static_cast<std::size_t>(norm[d])];
  checked_numel(out, "permute", "dims");
  return apply<Permute<PermuteName>>(x, norm);
}

Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  check_defined("transpose", x);
  const Shape& s = x.shape();
  const auto nd = static_cast<std::int64_t>(s.size());
  const std::int64_t a = normalize_axis(dim0, nd, "transpose", s);
  const std::int64_t b = normalize_axis(dim1, nd, "transpose", s);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(nd));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(a)], dims[static_cast<std::size_t>(b)]);
  Shape out = s;
  std::swap(out[static_cast<std::size_t>(a)], out[static_cast<std::size_t>(b)]);
  checked_numel(out, "transpose", "dims");
  return apply<Permute<TransposeName>>(x, dims);
}

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
  check_defined("slice", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s.size()), "slice", s);
  XGRAD_CHECK(step >= 1, "slice: step must be >= 1, got {} (x has shape {})", step, shape_str(s));
  const std::int64_t n = s[static_cast<std::size_t>(a)];
  auto clip = [n](std::int64_t v) { return std::clamp(v < 0 ? v + n : v, std::int64_t{0}, n); };
  const std::int64_t lo = clip(start), hi = clip(end);
  // Counted, not stepped: lo + k*step for a huge step would overflow past hi into negative offsets.
  const std::int64_t count = hi > lo ? 1 + (hi - lo - 1) / step : 0;
  std::vector<std::int64_t> pos;  // lo + k*step < hi <= n: no overflow
  if (x.numel() > 0) {
    pos.resize(static_cast<std::size_t>(count));
    for (std::int64_t k = 0; k < count; ++k) pos[static_cast<std::size_t>(k)] = lo + k * step;
  }
  return apply<Slice>(x, a, std::move(pos), count);
}

Tensor index_select(const Tensor& x, std::int64_t axis, const std::vector<std::int64_t>& index) {
  check_defined("index_select", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s.size()), "index_select", s);
  const std::int64_t n = s[static_cast<std::size_t>(a)];
  // Every index in [0, n): no negative indices, as torch.index_select and the tensor overload (the
  // same message). The loop runs only when all_in_range's vectorised pass fails.
  if (!all_in_range(index, n))
    for (std::size_t j = 0; j < index.size(); ++j)
      XGRAD_CHECK(index[j] >= 0 && index[j] < n,
                  "index_select: index {} (element {} of 'index') is out of range for dim {} of size {} (x has shape "
                  "{})",
                  index[j], j, a, n, shape_str(s));
  return detail::index_select_checked(x, a, index);
}

Tensor detail::index_select_checked(const Tensor& x, std::int64_t axis, std::span<const std::int64_t> index) {
  const auto a = static_cast<std::size_t>(axis);
  assert(axis >= 0 && a < x.shape().size() && all_in_range(index, x.shape()[a]));
  Shape out = x.shape();
  out[a] = checked_size(index.size(), "index_select", "index");
  checked_numel(out, "index_select", "index");
  return apply<IndexSelect>(x, axis, index);
}

Tensor concat(const Tensors& xs, std::int64_t axis) {
  check_list("concat", xs);
  const Shape& s0 = xs[0].shape();
  XGRAD_CHECK(!s0.empty(), "concat: tensor 0 of 'xs' is 0-d (shape ()); use stack to join scalars");
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s0.size()), "concat", s0);
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const Shape& si = xs[i].shape();
    bool ok = si.size() == s0.size();
    for (std::size_t d = 0; ok && d < s0.size(); ++d) ok = static_cast<std::int64_t>(d) == a || si[d] == s0[d];
    XGRAD_CHECK(ok, "concat: tensor {} has shape {} but tensor 0 has shape {}: sizes must match except along axis {}",
                i, shape_str(si), shape_str(s0), axis);
  }
  Shape out = s0;
  for (std::size_t i = 1; i < xs.size(); ++i)
    out[static_cast<std::size_t>(a)] =
        checked_add(out[static_cast<std::size_t>(a)], xs[i].shape()[static_cast<std::size_t>(a)], "concat", "xs");
  checked_numel(out, "concat", "xs");
  return apply<Concat>(xs, a);
}

Tensor stack(const Tensors& xs, std::int64_t axis) {
  check_list("stack", xs);
  const Shape& s0 = xs[0].shape();
  for (std::size_t i = 1; i < xs.size(); ++i)
    XGRAD_CHECK(xs[i].shape() == s0, "stack: tensor {} has shape {} but tensor 0 has shape {}: all must be equal", i,
                shape_str(xs[i].shape()), shape_str(s0));
  const std::int64_t a = normalize_axis(axis, static_cast<std::int64_t>(s0.size()) + 1, "stack", s0);
  Shape out = s0;
  out.insert(out.begin() + a, checked_size(xs.size(), "stack", "xs"));
  checked_numel(out, "stack", "xs");
  return apply<Stack>(xs, a);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined("expand", x);
  const Shape& s = x.shape();
  XGRAD_CHECK(shape.size() >= s.size(), "expand: target shape {} has fewer dimensions than x's shape {}",
              shape_str(shape), shape_str(s));
  const std::size_t lead = shape.size() - s.size();
  Shape target = shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < lead) {
      XGRAD_CHECK(shape[d] >= 0, "expand: target shape {} has size {} at new leading dimension {} (x has shape {})",
                  shape_str(shape), shape[d], d, shape_str(s));
      continue;
    }
    const std::int64_t have = s[d - lead];
    if (shape[d] == -1) target[d] = have;
    XGRAD_CHECK(target[d] == have || (have == 1 && target[d] >= 0),
                "expand: cannot broadcast x of shape {} to {}: dimension {} has size {} (only size-1 dims expand)",
                shape_str(s), shape_str(shape), d, have);
  }
  checked_numel(target, "expand", "shape");
  return apply<Expand>(x, target);
}

// ---- split, chunk, flip, roll, repeat, pad -------------------------------------------------------

namespace {

// ys = the pieces of x along axis (piece i has sizes[i] positions); dx = the pieces' gradients
// joined back (the engine gives zeros for the pieces that were not used).
struct Split : Function<Split> {
  static constexpr const char* kName = "split";
  static constexpr bool kDifferentiableBackward = true;  // through concat
  std::int64_t axis = 0;
  Tensors forward(const Tensor& x, std::int64_t axis_, const std::vector<std::int64_t>& sizes) {
    axis = axis_;
    const Shape& x_shape = x.shape();
    const AxisGeometry g = geometry(x_shape, axis);
    const std::int64_t outer = g.outer;
    std::vector<std::int64_t> lens;
    Tensors ys;
    ys.reserve(sizes.size());
    std::vector<Shape> shapes;
    for (auto n : sizes) {
      Shape s = x_shape;
      s[static_cast<std::size_t>(axis)] = n;
      shapes.push_back(s);
      lens.push_back(n * g.inner);
    }
    // The forward of split is the backward of concat: copy each piece's rows out of x.
    std::vector<std::int64_t> offs(sizes.size() + 1, 0);
    for (std::size_t i = 0; i < sizes.size(); ++i) offs[i + 1] = offs[i] + lens[i];
    const std::int64_t row = offs.back();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      Tensor y = Tensor::empty(shapes[i], x.dtype());
      detail::copy_column_block(x.raw_data(), y.raw_data(), dtype_size(x.dtype()), outer, row, offs[i], lens[i]);
      ys.push_back(std::move(y));
    }
    return ys;
  }
  Tensors backward(const Tensors& grads) { return {xgrad::apply<Concat>(grads, axis)}; }
};

Tensors split_sizes_checked(const Tensor& x, std::int64_t a, const std::vector<std::int64_t>& sizes) {
  return apply<Split>(x, a, sizes);
}

}  // namespace

Tensors split(const Tensor& x, std::int64_t split_size, std::int64_t dim) {
  check_defined("split", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(dim, static_cast<std::int64_t>(s.size()), "split", s);
  const std::int64_t n = s[static_cast<std::size_t>(a)];
  XGRAD_CHECK(split_size >= 0, "split: split_size must be >= 0, got {} (x has shape {})", split_size, shape_str(s));
  XGRAD_CHECK(split_size > 0 || n == 0,
              "split: split_size 0 is only allowed for an empty dim, but dim {} has size {} (x has shape {})", dim, n,
              shape_str(s));
  std::vector<std::int64_t> sizes;
  if (n == 0) {
    sizes = {0};
  } else {
    for (std::int64_t k = 0; k < n; k += split_size) sizes.push_back(std::min(split_size, n - k));
  }
  return split_sizes_checked(x, a, sizes);
}

Tensors split(const Tensor& x, const std::vector<std::int64_t>& split_sizes, std::int64_t dim) {
  check_defined("split", x);
  const Shape& s = x.shape();
  const std::int64_t a = normalize_axis(dim, static_cast<std::int64_t>(s.size()), "split", s);
  const std::int64_t n = s[static_cast<std::size_t>(a)];
  std::int64_t total = 0;
  for (auto k : split_sizes) {
    XGRAD_CHECK(k >= 0, "split: split_sizes [{}] has a negative size {} (x has shape {})", fmt::join(split_sizes, ", "),
                k, shape_str(s));
    total = checked_add(total, k, "split", "split_sizes");
  }
  XGRAD_CHECK(total == n, "split: split_sizes [{}] sum to {} but dim {} has size {} (x has shape {})",
              fmt::join(split_sizes, ", "), total, dim, n, shape_str(s));
  return split_sizes_checked(x, a, split_sizes);
}

Tensors chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim) {
  check_defined("chunk", x);
  const Shape& s = x.shape();
  XGRAD_CHECK(chunks >= 1, "chunk: chunks must be >= 1, got {} (x has shape {})", chunks, shape_str(s));
  const std::int64_t a = normalize_axis(dim, static_cast<std::int64_t>(s.size()), "chunk", s);
  const std::int64_t n = s[static_cast<std::size_t>(a)];
  if (n == 0) return split_sizes_checked(x, a, std::vector<std::int64_t>(static_cast<std::size_t>(chunks), 0));
  const std::int64_t size = n / chunks + (n % chunks != 0);
  std::vector<std::int64_t> sizes;
  for (std::int64_t k = 0; k < n; k += size) sizes.push_back(std::min(size, n - k));
  return split_sizes_checked(x, a, sizes);
}

namespace {

// Identity source indices for every dim of `s`.
std::vector<std::vector<std::int64_t>> identity_src(const Shape& s) {
  std::vector<std::vector<std::int64_t>> src(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) {
    src[d].resize(static_cast<std::size_t>(s[d]));
    std::iota(src[d].begin(), src[d].end(), std::int64_t{0});
  }
  return src;
}

}  // namespace

Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims) {
  check_defined("flip", x);
  const Shape& s = x.shape();
  const auto nd = static_cast<std::int64_t>(s.size());
  std::vector<bool> seen(s.size(), false);
  for (auto d : dims) {
    if (nd == 0) {  // like torch: a 0-d tensor accepts dim 0 / -1
      normalize_axis(d, 1, "flip", s);
      continue;
    }
    const auto a = static_cast<std::size_t>(normalize_axis(d, nd, "flip", s));
    XGRAD_CHECK(!seen[a], "flip: dims [{}] names dim {} twice (x has shape {})", fmt::join(dims, ", "), a,
                shape_str(s));
    seen[a] = true;
  }
  if (x.numel() == 0) return detail::gather_map("flip", x, s, {}, true);
  auto src = identity_src(s);
  for (std::size_t d = 0; d < s.size(); ++d)
    if (seen[d]) std::reverse(src[d].begin(), src[d].end());
  return detail::gather_map("flip", x, s, detail::separable_map(s, s, src), true);
}

Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) {
  check_defined("roll", x);
  const Shape& s = x.shape();
  if (dims.empty()) {
    XGRAD_CHECK(shifts.size() == 1, "roll: with no dims, shifts must have one entry, got [{}] (x has shape {})",
                fmt::join(shifts, ", "), shape_str(s));
    const std::int64_t n = x.numel();
    if (n == 0) return detail::gather_map("roll", x, s, {}, true);
    const std::int64_t k = ((shifts[0] % n) + n) % n;
    std::vector<std::int64_t> map(static_cast<std::size_t>(n));
    detail::roll_map(n, k, map.data());
    return detail::gather_map("roll", x, s, std::move(map), true);
  }
  XGRAD_CHECK(shifts.size() == dims.size(),
              "roll: shifts [{}] and dims [{}] must have the same length (x has shape {})", fmt::join(shifts, ", "),
              fmt::join(dims, ", "), shape_str(s));
  const auto nd = static_cast<std::int64_t>(s.size());
  XGRAD_CHECK(nd > 0, "roll: dims [{}] given for a 0-d tensor (shape ())", fmt::join(dims, ", "));
  std::vector<std::int64_t> total(s.size(), 0);  // net shift per dim, reduced mod n (a dim may repeat, as torch)
  for (std::size_t k = 0; k < dims.size(); ++k) {
    const auto a = static_cast<std::size_t>(normalize_axis(dims[k], nd, "roll", s));
    if (s[a] > 0) total[a] = (total[a] + shifts[k] % s[a] + s[a]) % s[a];
  }
  if (x.numel() == 0) return detail::gather_map("roll", x, s, {}, true);
  auto src = identity_src(s);
  for (std::size_t d = 0; d < s.size(); ++d)
    if (total[d] != 0) std::rotate(src[d].begin(), src[d].end() - total[d], src[d].end());
  return detail::gather_map("roll", x, s, detail::separable_map(s, s, src), true);
}

Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats) {
  check_defined("repeat", x);
  const Shape& s = x.shape();
  XGRAD_CHECK(repeats.size() >= s.size(), "repeat: repeats [{}] has {} entries, fewer than the {} dims of x (shape {})",
              fmt::join(repeats, ", "), repeats.size(), s.size(), shape_str(s));
  const std::size_t lead = repeats.size() - s.size();
  Shape in(lead, 1);
  in.insert(in.end(), s.begin(), s.end());
  Shape out(repeats.size());
  for (std::size_t d = 0; d < repeats.size(); ++d) {
    XGRAD_CHECK(repeats[d] >= 0, "repeat: repeats [{}] has a negative entry {} (x has shape {})",
                fmt::join(repeats, ", "), repeats[d], shape_str(s));
    out[d] = checked_mul(in[d], repeats[d], "repeat", "repeats");
  }
  checked_numel(out, "repeat", "repeats");
  if (shape_numel(out) == 0) return detail::gather_map("repeat", x, out, {}, true);
  std::vector<std::vector<std::int64_t>> src(out.size());
  for (std::size_t d = 0; d < out.size(); ++d) {
    src[d].resize(static_cast<std::size_t>(out[d]));
    for (std::int64_t o = 0; o < out[d]; ++o) src[d][static_cast<std::size_t>(o)] = o % in[d];
  }
  bool injective = true;
  for (auto r : repeats) injective = injective && r <= 1;
  return detail::gather_map("repeat", x, out, detail::separable_map(in, out, src), injective);
}

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, const std::string& mode, double value) {
  check_defined("pad", x);
  const Shape& s = x.shape();
  const bool constant = mode == "constant", reflect = mode == "reflect", replicate = mode == "replicate";
  XGRAD_CHECK(constant || reflect || replicate,
              "pad: mode '{}' is not supported (use \"constant\", \"reflect\" or \"replicate\"; x has shape {})", mode,
              shape_str(s));
  XGRAD_CHECK(pads.size() % 2 == 0 && pads.size() / 2 <= s.size(),
              "pad: pads [{}] must have an even number of entries, at most 2 per dim of x (shape {})",
              fmt::join(pads, ", "), shape_str(s));
  XGRAD_CHECK(constant || value == 0.0, "pad: a fill value {} is only used in mode \"constant\", not '{}'", value,
              mode);
  Shape out = s;
  std::vector<std::int64_t> before(s.size(), 0);
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const std::size_t d = s.size() - 1 - k;
    const std::int64_t l = pads[2 * k], r = pads[2 * k + 1], n = s[d];
    before[d] = l;
    if (reflect)
      XGRAD_CHECK(l < n && r < n,
                  "pad: reflect padding ({}, {}) of dim {} must be less than its size {} (x has shape {})", l, r, d, n,
                  shape_str(s));
    if (replicate && (l != 0 || r != 0))
      XGRAD_CHECK(n > 0, "pad: replicate padding of dim {} needs a non-empty dim (x has shape {})", d, shape_str(s));
    out[d] = checked_add(checked_add(n, l, "pad", "pads"), r, "pad", "pads");
    XGRAD_CHECK(out[d] >= 0, "pad: pads [{}] give dim {} (size {}) the negative size {} (x has shape {})",
                fmt::join(pads, ", "), d, n, out[d], shape_str(s));
  }
  const std::int64_t out_numel = checked_numel(out, "pad", "pads");
  // The index map (an int64 per output element) and the output are sized by the pads: a request
  // beyond this machine's memory is an error stating the bytes, not std::bad_alloc.
  check_host_memory(checked_nbytes(out_numel, sizeof(std::int64_t) + dtype_size(x.dtype()), "pad", "pads"), "pad",
                    "pads");
  if (out_numel == 0 || x.numel() == 0) {
    // Nothing to read: an empty result, or all fill (constant mode, an empty dim padded).
    std::vector<std::int64_t> map(static_cast<std::size_t>(shape_numel(out)), -1);
    return detail::gather_map("pad", x, out, std::move(map), true, value);
  }
  std::vector<std::vector<std::int64_t>> src(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) {
    const std::int64_t n = s[d];
    src[d].resize(static_cast<std::size_t>(out[d]));
    for (std::int64_t o = 0; o < out[d]; ++o) {
      std::int64_t i = o - before[d];
      if (i < 0 || i >= n) {
        if (constant)
          i = -1;
        else if (replicate)
          i = std::clamp<std::int64_t>(i, 0, n - 1);
        else
          i = i < 0 ? -i : 2 * (n - 1) - i;
      }
      src[d][static_cast<std::size_t>(o)] = i;
    }
  }
  return detail::gather_map("pad", x, out, detail::separable_map(s, out, src), constant, value);
}

}  // namespace xgrad
