#include "xgrad/ops/pool.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/ops/kernels/ceil_div.hpp"
#include "xgrad/ops/kernels/pool_kernels.hpp"

namespace xgrad {

namespace {

using detail::ceil_div;  // ops/kernels/ceil_div.hpp
// The windows and their loops: ops/kernels/pool_kernels.hpp.
using detail::pool::AvgSpec;
using detail::pool::Axis;
using detail::pool::Geometry;

// torch's div_rtn: division rounding towards negative infinity.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

// The windows of one axis (detail::pool::Axis), per kind of pool. A 1-d pool's h axis is trivial: one
// window of one position.
Axis trivial_axis() {
  Axis a;
  a.first = {0};
  a.count = {1};
  a.padded = {1};
  return a;
}
// Max pooling: positions o s - p + i d, i < k.
Axis dilated_axis(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
  Axis a;
  a.in = in, a.out = out, a.step = d;
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t start = o * s - p;
    const std::int64_t i0 = start < 0 ? ceil_div(-start, d) : 0;
    const std::int64_t i1 = std::min(k, in - start <= 0 ? 0 : ceil_div(in - start, d));
    a.first.push_back(start + i0 * d);
    a.count.push_back(std::max<std::int64_t>(0, i1 - i0));
    a.padded.push_back(k);
  }
  return a;
}
// Average pooling (torch's cpu_avg_pool): [o s - p, min(o s - p + k, L + p)) clipped to [0, L).
Axis average_axis(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p) {
  Axis a;
  a.in = in, a.out = out;
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t start = o * s - p, end = std::min(start + k, in + p);
    a.padded.push_back(end - start);
    start = std::max<std::int64_t>(start, 0);
    end = std::min(end, in);
    a.first.push_back(start);
    a.count.push_back(std::max<std::int64_t>(0, end - start));
  }
  return a;
}
Axis adaptive_axis(std::int64_t in, std::int64_t out) {
  Axis a;
  a.in = in, a.out = out;
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t start = (o * in) / out, end = ceil_div((o + 1) * in, out);
    a.first.push_back(start);
    a.count.push_back(end - start);
    a.padded.push_back(end - start);
  }
  return a;
}

// Max pooling; the arg-max of every output (flat index in its plane, -1 for an empty window) is kept for
// backward. dx = scatter-add of g at the saved arg-maxes (an empty window, -1, gets nothing).
Tensor max_pool_scatter(const Tensor& g, const Geometry& geo, const std::int64_t* argmax, const Shape& in_shape) {
  Tensor dx = Tensor::zeros(in_shape, g.dtype());
  dispatch(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::pool::max_pool_scatter(geo, argmax, g.data<T>(), dx.data<T>());
  });
  return dx;
}

// Note [Create graph] for max pooling: its backward is a scatter by the saved arg-maxes, the op
// MaxPoolBackward, whose gradient is the gather MaxPoolDoubleBackward (g at the arg-maxes), whose
// gradient is the scatter again: both linear in their input, with the arg-maxes (shared, read-only)
// fixed. max_pool's backward always runs MaxPoolBackward (with grad mode off it records nothing).
using ArgMax = std::shared_ptr<const std::int64_t[]>;
struct MaxPoolBackward;

struct MaxPoolDoubleBackward : Function<MaxPoolDoubleBackward> {
  static constexpr const char* kName = "max_pool_double_backward";
  static constexpr bool kDifferentiableBackward = true;
  Geometry geo;
  ArgMax argmax;
  Shape in_shape;

  Tensor forward(const Tensor& x, const Geometry& gm, const ArgMax& am, const Shape& out_shape) {
    if (needs_input_grad(0)) {  // only this op's own backward reads them
      geo = gm;
      argmax = am;
      in_shape = x.shape();
    }
    Tensor y = Tensor::empty(out_shape, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::pool::max_pool_gather(gm, am.get(), x.data<T>(), y.data<T>());
    });
    return y;
  }
  Tensors backward(const Tensors& grads);
};

struct MaxPoolBackward : Function<MaxPoolBackward> {
  static constexpr const char* kName = "max_pool_backward";
  static constexpr bool kDifferentiableBackward = true;
  Geometry geo;
  ArgMax argmax;
  Shape out_shape;

  Tensor forward(const Tensor& g, const Geometry& gm, const ArgMax& am, const Shape& in_shape) {
    if (needs_input_grad(0)) {  // only this op's own backward reads them
      geo = gm;
      argmax = am;
      out_shape = g.shape();
    }
    return max_pool_scatter(g, gm, am.get(), in_shape);
  }
  Tensors backward(const Tensors& grads) {
    return {xgrad::apply<MaxPoolDoubleBackward>(grads[0], geo, argmax, out_shape)};
  }
};

Tensors MaxPoolDoubleBackward::backward(const Tensors& grads) {
  return {xgrad::apply<MaxPoolBackward>(grads[0], geo, argmax, in_shape)};
}

struct MaxPoolOp : Function<MaxPoolOp> {
  static constexpr const char* kName = "max_pool";
  static constexpr bool kDifferentiableBackward = true;  // through MaxPoolBackward
  Geometry geo;
  Shape in_shape;
  std::shared_ptr<std::int64_t[]> argmax;
  std::size_t argmax_size = 0;

  Tensor forward(const Tensor& x, const Geometry& g, const Shape& out_shape, Tensor* indices) {
    geo = g;
    in_shape = x.shape();
    Tensor y = Tensor::empty(out_shape, x.dtype());
    // Every output writes its arg-max below, so the buffer is not initialised first.
    argmax_size = static_cast<std::size_t>(geo.planes * geo.out_len());
    argmax.reset(new std::int64_t[argmax_size]);
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::pool::max_pool_forward(geo, x.data<T>(), y.data<T>(), argmax.get());
    });
    if (indices != nullptr) {  // a copy: the caller may write into it, backward reads argmax
      *indices = Tensor::empty(out_shape, kInt64);
      std::copy(argmax.get(), argmax.get() + argmax_size, indices->data<std::int64_t>());
    }
    return y;
  }

  Tensors backward(const Tensors& grads) {
    return {xgrad::apply<MaxPoolBackward>(grads[0], geo, ArgMax(argmax), in_shape)};
  }
};

Tensor avg_pool_kernel(const Tensor& x, const AvgSpec& a, const Shape& out_shape) {
  Tensor y = Tensor::empty(out_shape, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::pool::avg_pool_forward(a, x.data<T>(), y.data<T>());
  });
  return y;
}

// The adjoint of avg_pool_kernel: every window gets its output's gradient over its divisor.
Tensor avg_pool_adjoint(const Tensor& g, const AvgSpec& a, const Shape& in_shape) {
  Tensor dx = Tensor::zeros(in_shape, g.dtype());
  dispatch(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::pool::avg_pool_adjoint(a, g.data<T>(), dx.data<T>());
  });
  return dx;
}

// Note [Create graph] for average pooling: it is linear; its backward is the adjoint, the op
// AvgPoolBackward, whose gradient is the pooling again.
struct AvgPoolBackward;

struct AvgPoolOp : Function<AvgPoolOp> {
  static constexpr const char* kName = "avg_pool";
  static constexpr bool kDifferentiableBackward = true;  // through AvgPoolBackward
  AvgSpec spec;
  Shape in_shape;

  Tensor forward(const Tensor& x, const Geometry& g, const Shape& out_shape, bool count_include_pad,
                 std::int64_t divisor_override) {
    spec.geo = g;
    spec.include_pad = count_include_pad;
    spec.override_div = divisor_override;
    in_shape = x.shape();
    return avg_pool_kernel(x, spec, out_shape);
  }
  Tensors backward(const Tensors& grads);
};

struct AvgPoolBackward : Function<AvgPoolBackward> {
  static constexpr const char* kName = "avg_pool_backward";
  static constexpr bool kDifferentiableBackward = true;
  AvgSpec spec;
  Shape out_shape;

  Tensor forward(const Tensor& g, const AvgSpec& a, const Shape& in_shape) {
    if (needs_input_grad(0)) {  // only this op's own backward reads them
      spec = a;
      out_shape = g.shape();
    }
    return avg_pool_adjoint(g, a, in_shape);
  }
  Tensors backward(const Tensors& grads) {
    return {xgrad::apply<AvgPoolOp>(grads[0], spec.geo, out_shape, spec.include_pad, spec.override_div)};
  }
};

Tensors AvgPoolOp::backward(const Tensors& grads) { return {xgrad::apply<AvgPoolBackward>(grads[0], spec, in_shape)}; }

std::string vec_str(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::vector<std::int64_t> expand_arg(const char* op, const char* arg, const std::vector<std::int64_t>& v,
                                     std::size_t dims) {
  XGRAD_CHECK(v.size() == 1 || v.size() == dims, "{}: argument '{}' must have 1 or {} values, got {}", op, arg, dims,
              vec_str(v));
  return v.size() == 1 ? std::vector<std::int64_t>(dims, v[0]) : v;
}

// x must be (N, C, spatial...) or (C, spatial...) with non-empty non-batch dimensions. Returns the
// number of planes; `spatial` gets the spatial sizes.
std::int64_t check_input(const char* op, std::size_t dims, const Tensor& x, std::vector<std::int64_t>& spatial) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is undefined", op);
  check_floating(op, "x", x);
  const auto rank = static_cast<std::int64_t>(dims);
  XGRAD_CHECK(x.dim() == rank + 1 || x.dim() == rank + 2,
              "{}: argument 'x' must be {}-d or {}-d (batch mode), got shape {}", op, rank + 1, rank + 2,
              shape_str(x.shape()));
  for (std::int64_t d = x.dim() - rank - 1; d < x.dim(); ++d)
    XGRAD_CHECK(x.size(d) > 0,
                "{}: argument 'x' of shape {} has an empty non-batch dimension {} (only the batch may be empty)", op,
                shape_str(x.shape()), d);
  spatial.assign(x.shape().end() - rank, x.shape().end());
  std::int64_t planes = 1;
  for (std::int64_t d = 0; d < x.dim() - rank; ++d) planes *= x.size(d);
  return planes;
}

Shape out_shape(const Tensor& x, std::size_t dims, const std::vector<std::int64_t>& out) {
  Shape s(x.shape().begin(), x.shape().end() - static_cast<std::int64_t>(dims));
  s.insert(s.end(), out.begin(), out.end());
  return s;
}

// torch's pooling_output_shape plus its pool2d_shape_check, for one op.
struct Windows {
  std::vector<std::int64_t> k, s, p, d, out;
};

Windows check_windows(const char* op, std::size_t dims, const Tensor& x, const std::vector<std::int64_t>& spatial,
                      const std::vector<std::int64_t>& kernel_size, const std::vector<std::int64_t>& stride,
                      const std::vector<std::int64_t>& padding, const std::vector<std::int64_t>& dilation,
                      bool ceil_mode) {
  Windows w;
  w.k = expand_arg(op, "kernel_size", kernel_size, dims);
  w.s = stride.empty() ? w.k : expand_arg(op, "stride", stride, dims);
  w.p = expand_arg(op, "padding", padding, dims);
  w.d = expand_arg(op, "dilation", dilation, dims);
  for (auto v : w.k)
    XGRAD_CHECK(v >= 1, "{}: argument 'kernel_size' must be positive, got {}", op, vec_str(kernel_size));
  for (auto v : w.s) XGRAD_CHECK(v >= 1, "{}: argument 'stride' must be positive, got {}", op, vec_str(stride));
  for (auto v : w.d) XGRAD_CHECK(v >= 1, "{}: argument 'dilation' must be positive, got {}", op, vec_str(dilation));
  for (std::size_t i = 0; i < dims; ++i)
    XGRAD_CHECK(w.p[i] >= 0 && w.p[i] <= w.k[i] / 2,
                "{}: argument 'padding' {} must be non-negative and at most half of kernel_size {}", op,
                vec_str(padding), vec_str(kernel_size));
  for (std::size_t i = 0; i < dims; ++i) {
    // Checked (Note [Checked sizes]): a kernel, padding or dilation near 2^63 must not wrap into a
    // plausible output size.
    const std::int64_t padded = checked_add(spatial[i], checked_mul(2, w.p[i], op, "padding"), op, "padding");
    const std::int64_t span = checked_mul(w.d[i], w.k[i] - 1, op, "dilation");
    std::int64_t num = padded - span - 1;  // both terms >= 0: no overflow
    if (ceil_mode) num = checked_add(num, w.s[i] - 1, op, "stride");
    std::int64_t o = floor_div(num, w.s[i]) + 1;
    if (ceil_mode && (o - 1) * w.s[i] >= spatial[i] + w.p[i]) --o;
    w.out.push_back(o);
  }
  for (std::size_t i = 0; i < dims; ++i)
    XGRAD_CHECK(
        w.out[i] >= 1,
        "{}: given input of shape {}, kernel_size {}, stride {}, padding {}, dilation {}: the calculated output "
        "size {} is too small",
        op, shape_str(x.shape()), vec_str(w.k), vec_str(w.s), vec_str(w.p), vec_str(w.d), vec_str(w.out));
  return w;
}

Tensor max_pool_nd(const char* op, std::size_t dims, const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                   const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                   const std::vector<std::int64_t>& dilation, bool ceil_mode, Tensor* indices) {
  std::vector<std::int64_t> sp;
  Geometry g;
  g.planes = check_input(op, dims, x, sp);
  const Windows w = check_windows(op, dims, x, sp, kernel_size, stride, padding, dilation, ceil_mode);
  const std::size_t last = dims - 1;
  g.h = dims == 2 ? dilated_axis(sp[0], w.out[0], w.k[0], w.s[0], w.p[0], w.d[0]) : trivial_axis();
  g.w = dilated_axis(sp[last], w.out[last], w.k[last], w.s[last], w.p[last], w.d[last]);
  return apply<MaxPoolOp>(x, g, out_shape(x, dims, w.out), indices);
}

Tensor avg_pool_nd(const char* op, std::size_t dims, const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                   const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding, bool ceil_mode,
                   bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  std::vector<std::int64_t> sp;
  Geometry g;
  g.planes = check_input(op, dims, x, sp);
  const Windows w = check_windows(op, dims, x, sp, kernel_size, stride, padding, {1}, ceil_mode);
  if (divisor_override) XGRAD_CHECK(*divisor_override != 0, "{}: argument 'divisor_override' must not be zero", op);
  const std::size_t last = dims - 1;
  g.h = dims == 2 ? average_axis(sp[0], w.out[0], w.k[0], w.s[0], w.p[0]) : trivial_axis();
  g.w = average_axis(sp[last], w.out[last], w.k[last], w.s[last], w.p[last]);
  return apply<AvgPoolOp>(x, g, out_shape(x, dims, w.out), count_include_pad, divisor_override.value_or(0));
}

Geometry adaptive_geometry(const char* op, std::size_t dims, const Tensor& x,
                           const std::vector<std::int64_t>& output_size, std::vector<std::int64_t>& out) {
  std::vector<std::int64_t> sp;
  Geometry g;
  g.planes = check_input(op, dims, x, sp);
  out = expand_arg(op, "output_size", output_size, dims);
  for (auto v : out)
    XGRAD_CHECK(v >= 0, "{}: argument 'output_size' must be non-negative, got {} (x {})", op, vec_str(output_size),
                shape_str(x.shape()));
  // The output (even an empty one: a batch of 0) has a window per output position, three int64 each,
  // and a window's bounds are computed as (o + 1) * in: all checked before anything is built.
  checked_numel(out_shape(x, dims, out), op, "output_size");
  std::int64_t positions = 0;
  for (std::size_t i = 0; i < dims; ++i) {
    (void)checked_mul(out[i], sp[i], op, "output_size");
    positions = checked_add(positions, out[i], op, "output_size");
  }
  check_host_memory(checked_nbytes(positions, 3 * sizeof(std::int64_t), op, "output_size"), op, "output_size");
  const std::size_t last = dims - 1;
  g.h = dims == 2 ? adaptive_axis(sp[0], out[0]) : trivial_axis();
  g.w = adaptive_axis(sp[last], out[last]);
  return g;
}

}  // namespace

Tensor max_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                  const std::vector<std::int64_t>& dilation, bool ceil_mode) {
  return max_pool_nd("max_pool1d", 1, x, kernel_size, stride, padding, dilation, ceil_mode, nullptr);
}

Tensors max_pool1d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                                const std::vector<std::int64_t>& dilation, bool ceil_mode) {
  Tensor indices;
  Tensor y = max_pool_nd("max_pool1d_with_indices", 1, x, kernel_size, stride, padding, dilation, ceil_mode, &indices);
  return {y, indices};
}

Tensor max_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                  const std::vector<std::int64_t>& dilation, bool ceil_mode) {
  return max_pool_nd("max_pool2d", 2, x, kernel_size, stride, padding, dilation, ceil_mode, nullptr);
}

Tensors max_pool2d_with_indices(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                                const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                                const std::vector<std::int64_t>& dilation, bool ceil_mode) {
  Tensor indices;
  Tensor y = max_pool_nd("max_pool2d_with_indices", 2, x, kernel_size, stride, padding, dilation, ceil_mode, &indices);
  return {y, indices};
}

Tensor avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding, bool ceil_mode,
                  bool count_include_pad) {
  return avg_pool_nd("avg_pool1d", 1, x, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt);
}

Tensor avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& kernel_size,
                  const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  return avg_pool_nd("avg_pool2d", 2, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool1d(const Tensor& x, const std::vector<std::int64_t>& output_size) {
  std::vector<std::int64_t> out;
  const Geometry g = adaptive_geometry("adaptive_avg_pool1d", 1, x, output_size, out);
  return apply<AvgPoolOp>(x, g, out_shape(x, 1, out), false, std::int64_t{0});
}

Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size) {
  std::vector<std::int64_t> out;
  const Geometry g = adaptive_geometry("adaptive_avg_pool2d", 2, x, output_size, out);
  return apply<AvgPoolOp>(x, g, out_shape(x, 2, out), false, std::int64_t{0});
}

Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::int64_t>& output_size) {
  std::vector<std::int64_t> out;
  const Geometry g = adaptive_geometry("adaptive_max_pool2d", 2, x, output_size, out);
  return apply<MaxPoolOp>(x, g, out_shape(x, 2, out), static_cast<Tensor*>(nullptr));
}

}  // namespace xgrad
