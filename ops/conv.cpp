#include "xgrad/ops/conv.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/conv_kernels.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

// The kernels (K1, K2, K3 of Note [im2col convolution]) are in ops/kernels/conv_kernels.cpp.
using Plan = detail::ConvPlan;
using detail::add_bias;
using detail::bias_grad;
using detail::k1_forward;
using detail::k2_adjoint;
using detail::k3_weight;

namespace {

// Note [Create graph] for convolutions: the three kernels are closed under differentiation with one
// Plan, so each is an op whose backward is made of the three (as torch's convolution_backward is
// written with convolutions), and every backward, first-order or recorded, is these ops through
// apply (with grad mode off they record nothing and run their kernel):
//   ConvOp<N>             K1(image, weight)  Z  d image = K2(dZ, weight), d weight = K3(image, dZ)
//   ConvTransposeOp<N>    K2(grid, weight)   I  d grid = K1(dI, weight),  d weight = K3(dI, grid)
//   ConvBackwardWeight<N> K3(image, grid)    dW d image = K2(grid, dW'),  d grid = K1(image, dW')
// A family N names the three for one public op: for conv2d K1 is "conv2d", K2 its input gradient
// "conv2d_backward_input", K3 "conv2d_backward_weight"; for conv_transpose2d K2 is the op and K1 its
// input gradient "conv_transpose2d_backward_input". A bias's gradient is ConvBackwardBias<N>.
struct Conv1dNames {
  static constexpr const char* k1 = "conv1d";
  static constexpr const char* k2 = "conv1d_backward_input";
  static constexpr const char* k3 = "conv1d_backward_weight";
  static constexpr const char* bias = "conv1d_backward_bias";
};
struct Conv2dNames {
  static constexpr const char* k1 = "conv2d";
  static constexpr const char* k2 = "conv2d_backward_input";
  static constexpr const char* k3 = "conv2d_backward_weight";
  static constexpr const char* bias = "conv2d_backward_bias";
};
struct ConvTranspose1dNames {
  static constexpr const char* k1 = "conv_transpose1d_backward_input";
  static constexpr const char* k2 = "conv_transpose1d";
  static constexpr const char* k3 = "conv_transpose1d_backward_weight";
  static constexpr const char* bias = "conv_transpose1d_backward_bias";
};
struct ConvTranspose2dNames {
  static constexpr const char* k1 = "conv_transpose2d_backward_input";
  static constexpr const char* k2 = "conv_transpose2d";
  static constexpr const char* k3 = "conv_transpose2d_backward_weight";
  static constexpr const char* bias = "conv_transpose2d_backward_bias";
};

// The bias gradient of conv (over the grid's channels) and conv_transpose (over the image's): the
// sums of g (N, C, H, W) over N, H and W, in double (bias_grad), or the recorded sum.
template <class N>
struct ConvBackwardBias {
  static constexpr const char* kName = N::bias;
  static Tensor kernel(const Tensor& g) {
    Tensor db = Tensor::empty({g.size(1)}, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      bias_grad<T>(g.data<T>(), g.size(0), g.size(1), g.size(2) * g.size(3), db.data<T>());
    });
    return db;
  }
  static Tensor formula(const Tensor& g) { return sum(g, {0, 2, 3}); }
};

template <class N>
struct ConvOp;
template <class N>
struct ConvTransposeOp;

// dW = K3(image, grid): the weight gradient of conv (image x, grid g) and conv_transpose (image g,
// grid x).
template <class N>
struct ConvBackwardWeight : Function<ConvBackwardWeight<N>> {
  static constexpr const char* kName = N::k3;
  static constexpr bool kDifferentiableBackward = true;  // through ConvOp and ConvTransposeOp
  using Function<ConvBackwardWeight<N>>::needs_input_grad;
  using Function<ConvBackwardWeight<N>>::save_for_backward;
  using Function<ConvBackwardWeight<N>>::saved;
  Plan p;

  Tensor forward(const Tensor& image, const Tensor& grid, const Plan& plan) {
    p = plan;
    Tensor dw = Tensor::empty({p.groups * p.co, p.ci, p.kh, p.kw}, image.dtype());
    dispatch(image.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      k3_weight<T>(p, image.data<T>(), grid.data<T>(), dw.data<T>());
    });
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? image : Tensor(), needs_input_grad(0) ? grid : Tensor()});
    return dw;
  }

  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    Tensor di, dg;
    if (needs_input_grad(0)) di = xgrad::apply<ConvTransposeOp<N>>(s[1], grads[0], Tensor(), p);
    if (needs_input_grad(1)) dg = xgrad::apply<ConvOp<N>>(s[0], grads[0], Tensor(), p);
    return {di, dg};
  }
};

// K1 (conv1d/conv2d on (N, C, H, W), a height of 1 for conv1d): image = x, grid = y.
template <class N>
struct ConvOp : Function<ConvOp<N>> {
  static constexpr const char* kName = N::k1;
  static constexpr bool kDifferentiableBackward = true;  // through the family's ops
  using Function<ConvOp<N>>::needs_input_grad;
  using Function<ConvOp<N>>::save_for_backward;
  using Function<ConvOp<N>>::saved;
  Plan p;

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Plan& plan) {
    p = plan;
    Tensor y = Tensor::empty({p.n, p.groups * p.co, p.gh, p.gw}, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      k1_forward<T>(p, x.data<T>(), weight.data<T>(), bias.defined() ? bias.data<T>() : nullptr, y.data<T>());
    });
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? x : Tensor(), needs_input_grad(0) ? weight : Tensor()});
    return y;
  }

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensor dx, dw, db;
    const Tensors s = (needs_input_grad(0) || needs_input_grad(1)) ? saved() : Tensors();
    if (needs_input_grad(0)) dx = xgrad::apply<ConvTransposeOp<N>>(g, s[1], Tensor(), p);
    if (needs_input_grad(1)) dw = xgrad::apply<ConvBackwardWeight<N>>(s[0], g, p);
    if (needs_input_grad(2)) db = apply_fused<ConvBackwardBias<N>>(g);
    return {dx, dw, db};
  }
};

// K2 (conv_transpose1d/2d on (N, Cin, H, W)): grid = x, image = y.
template <class N>
struct ConvTransposeOp : Function<ConvTransposeOp<N>> {
  static constexpr const char* kName = N::k2;
  static constexpr bool kDifferentiableBackward = true;  // through the family's ops
  using Function<ConvTransposeOp<N>>::needs_input_grad;
  using Function<ConvTransposeOp<N>>::save_for_backward;
  using Function<ConvTransposeOp<N>>::saved;
  Plan p;

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Plan& plan) {
    p = plan;
    Tensor y = Tensor::empty({p.n, p.groups * p.ci, p.ih, p.iw}, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      k2_adjoint<T>(p, x.data<T>(), weight.data<T>(), y.data<T>());
      if (bias.defined()) add_bias<T>(y.data<T>(), bias.data<T>(), p.n, p.groups * p.ci, p.ilen());
    });
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? x : Tensor(), needs_input_grad(0) ? weight : Tensor()});
    return y;
  }

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensor dx, dw, db;
    const Tensors s = (needs_input_grad(0) || needs_input_grad(1)) ? saved() : Tensors();
    if (needs_input_grad(0)) dx = xgrad::apply<ConvOp<N>>(g, s[1], Tensor(), p);
    if (needs_input_grad(1)) dw = xgrad::apply<ConvBackwardWeight<N>>(g, s[0], p);
    if (needs_input_grad(2)) db = apply_fused<ConvBackwardBias<N>>(g);
    return {dx, dw, db};
  }
};

// One value for every spatial dimension, or one per dimension.
std::vector<std::int64_t> expand_arg(const char* op, const char* arg, const std::vector<std::int64_t>& v,
                                     std::size_t dims) {
  XGRAD_CHECK(v.size() == 1 || v.size() == dims, "{}: argument '{}' must have 1 or {} values, got {}", op, arg, dims,
              v.size());
  return v.size() == 1 ? std::vector<std::int64_t>(dims, v[0]) : v;
}

std::string vec_str(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

struct Common {
  Tensor x;  // batched, 2-d spatial
  bool unbatched = false;
  std::vector<std::int64_t> stride, dilation;
};

// Checks shared by every convolution; x and weight brought to 2-d spatial form (a height of 1 for
// the 1-d ops). `dims` is the op's number of spatial dimensions.
Common check_common(const char* op, std::size_t dims, const Tensor& x, const Tensor& weight, const Tensor& bias,
                    const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& dilation,
                    std::int64_t groups) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is undefined", op);
  XGRAD_CHECK(weight.defined(), "{}: argument 'weight' is undefined", op);
  const auto rank = static_cast<std::int64_t>(dims);
  XGRAD_CHECK(weight.dim() == rank + 2, "{}: argument 'weight' must be {}-d, got shape {}", op, rank + 2,
              shape_str(weight.shape()));
  XGRAD_CHECK(x.dim() == rank + 1 || x.dim() == rank + 2,
              "{}: argument 'x' must be {}-d (unbatched) or {}-d (batched), got shape {} (weight {})", op, rank + 1,
              rank + 2, shape_str(x.shape()), shape_str(weight.shape()));
  check_floating(op, "x", x);
  check_floating(op, "weight", weight);
  XGRAD_CHECK(x.dtype() == weight.dtype(), "{}: argument 'x' is {} but 'weight' is {}", op, x.dtype(), weight.dtype());
  XGRAD_CHECK(groups >= 1, "{}: argument 'groups' must be positive, got {}", op, groups);
  Common c;
  c.stride = expand_arg(op, "stride", stride, dims);
  c.dilation = expand_arg(op, "dilation", dilation, dims);
  for (auto s : c.stride) XGRAD_CHECK(s >= 1, "{}: argument 'stride' must be positive, got {}", op, vec_str(stride));
  for (auto d : c.dilation)
    XGRAD_CHECK(d >= 1, "{}: argument 'dilation' must be positive, got {}", op, vec_str(dilation));
  if (bias.defined())
    XGRAD_CHECK(bias.dtype() == weight.dtype(), "{}: argument 'bias' is {} but 'weight' is {}", op, bias.dtype(),
                weight.dtype());
  for (std::int64_t d = x.dim() - rank; d < x.dim(); ++d)
    XGRAD_CHECK(x.size(d) > 0,
                "{}: argument 'x' has shape {}: only the batch and channel dimensions may be empty (weight {})", op,
                shape_str(x.shape()), shape_str(weight.shape()));
  c.unbatched = x.dim() == rank + 1;
  Shape s = x.shape();
  if (c.unbatched) s.insert(s.begin(), 1);
  if (dims == 1) {
    s.insert(s.begin() + 2, 1);
    c.stride.insert(c.stride.begin(), 1);
    c.dilation.insert(c.dilation.begin(), 1);
  }
  c.x = reshape(x, s);
  return c;
}

Tensor finish(const Tensor& y, bool unbatched, std::size_t dims) {
  Shape s = y.shape();
  if (dims == 1) s.erase(s.begin() + 2);
  if (unbatched) s.erase(s.begin());
  return s == y.shape() ? y : reshape(y, s);
}

Tensor conv_nd(const char* op, std::size_t dims, const Tensor& x, const Tensor& weight, const Tensor& bias,
               const std::vector<std::int64_t>& stride, const ConvPadding& padding,
               const std::vector<std::int64_t>& dilation, std::int64_t groups) {
  Common c = check_common(op, dims, x, weight, bias, stride, dilation, groups);
  Shape ws = weight.shape();
  if (dims == 1) ws.insert(ws.begin() + 2, 1);
  const Tensor w = reshape(weight, ws);
  const Shape& xs = c.x.shape();
  const std::int64_t out_channels = ws[0];
  XGRAD_CHECK(out_channels > 0,
              "{}: given groups={}, expected weight to be at least 1 at dimension 0, but got weight of "
              "size {}",
              op, groups, shape_str(weight.shape()));
  XGRAD_CHECK(out_channels % groups == 0,
              "{}: given groups={}, expected weight to be divisible by {} at dimension 0, but got weight of size {}",
              op, groups, groups, shape_str(weight.shape()));
  XGRAD_CHECK(xs[1] == ws[1] * groups,
              "{}: given groups={}, weight of size {}, expected input {} to have {} channels, but got {} channels "
              "instead",
              op, groups, shape_str(weight.shape()), shape_str(x.shape()), ws[1] * groups, xs[1]);
  if (bias.defined())
    XGRAD_CHECK(bias.shape() == Shape{out_channels}, "{}: argument 'bias' has shape {} but must be ({},) (weight {})",
                op, shape_str(bias.shape()), out_channels, shape_str(weight.shape()));
  // Padding at the start and in total, per spatial dimension (h, w).
  std::vector<std::int64_t> begin(2, 0), total(2, 0);
  if (padding.mode.empty()) {
    std::vector<std::int64_t> pv = expand_arg(op, "padding", padding.values, dims);
    for (auto v : pv)
      XGRAD_CHECK(v >= 0, "{}: argument 'padding' must be non-negative, got {}", op, vec_str(padding.values));
    if (dims == 1) pv.insert(pv.begin(), 0);
    for (int d = 0; d < 2; ++d) begin[d] = pv[d], total[d] = checked_mul(2, pv[d], op, "padding");
  } else {
    XGRAD_CHECK(padding.mode == "same" || padding.mode == "valid",
                "{}: argument 'padding' must be \"same\", \"valid\" or numbers, got \"{}\"", op, padding.mode);
    if (padding.mode == "same") {
      for (int d = 0; d < 2; ++d)
        XGRAD_CHECK(c.stride[d] == 1,
                    "{}: argument 'padding' \"same\" is not supported for strided convolutions "
                    "(stride {})",
                    op, vec_str(stride));
      for (int d = 0; d < 2; ++d) {
        total[d] = checked_mul(c.dilation[d], ws[2 + d] - 1, op, "dilation");
        begin[d] = total[d] / 2;  // torch puts the odd element at the end
      }
    }
  }
  Plan p;
  p.n = xs[0];
  p.groups = groups;
  p.ci = ws[1];
  p.co = out_channels / groups;
  p.ih = xs[2], p.iw = xs[3], p.kh = ws[2], p.kw = ws[3];
  p.sh = c.stride[0], p.sw = c.stride[1], p.dh = c.dilation[0], p.dw = c.dilation[1];
  p.ph = begin[0], p.pw = begin[1];
  std::int64_t out[2];
  for (int d = 0; d < 2; ++d) {
    // Note [Checked sizes]: a padding or dilation near 2^63 must not wrap into a plausible size (the
    // kernels index the padded input with o * stride + k * dilation - padding).
    const std::int64_t padded = checked_add(xs[2 + d], total[d], op, "padding"),
                       span = checked_add(checked_mul(c.dilation[d], ws[2 + d] - 1, op, "dilation"), 1, op, "dilation");
    XGRAD_CHECK(padded >= span,
                "{}: input {} with padding {} is smaller than the (dilated) kernel: weight {}, dilation {}; the "
                "kernel size can't be greater than the padded input size",
                op, shape_str(x.shape()), padding.mode.empty() ? vec_str(padding.values) : padding.mode,
                shape_str(weight.shape()), vec_str(dilation));
    out[d] = (padded - span) / c.stride[d] + 1;
  }
  p.gh = out[0], p.gw = out[1];
  checked_numel({p.n, out_channels, p.gh, p.gw}, op, "output");
  p.choose_chunk();
  const Tensor y =
      dims == 1 ? apply<ConvOp<Conv1dNames>>(c.x, w, bias, p) : apply<ConvOp<Conv2dNames>>(c.x, w, bias, p);
  return finish(y, c.unbatched, dims);
}

Tensor conv_transpose_nd(const char* op, std::size_t dims, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                         const std::vector<std::int64_t>& output_padding, std::int64_t groups,
                         const std::vector<std::int64_t>& dilation) {
  Common c = check_common(op, dims, x, weight, bias, stride, dilation, groups);
  Shape ws = weight.shape();
  if (dims == 1) ws.insert(ws.begin() + 2, 1);
  const Tensor w = reshape(weight, ws);
  const Shape& xs = c.x.shape();
  XGRAD_CHECK(weight.numel() > 0, "{}: argument 'weight' must be non-empty, got weight of size {}", op,
              shape_str(weight.shape()));
  XGRAD_CHECK(ws[0] == xs[1],
              "{}: given transposed=1, weight of size {}, expected input {} to have {} channels, but got {} channels "
              "instead",
              op, shape_str(weight.shape()), shape_str(x.shape()), ws[0], xs[1]);
  XGRAD_CHECK(xs[1] % groups == 0, "{}: given groups={}, the input channels {} (input {}) must be divisible by groups",
              op, groups, xs[1], shape_str(x.shape()));
  const std::int64_t out_channels = ws[1] * groups;
  if (bias.defined())
    XGRAD_CHECK(bias.shape() == Shape{out_channels}, "{}: argument 'bias' has shape {} but must be ({},) (weight {})",
                op, shape_str(bias.shape()), out_channels, shape_str(weight.shape()));
  std::vector<std::int64_t> pv = expand_arg(op, "padding", padding, dims);
  std::vector<std::int64_t> opv = expand_arg(op, "output_padding", output_padding, dims);
  for (auto v : pv) XGRAD_CHECK(v >= 0, "{}: argument 'padding' must be non-negative, got {}", op, vec_str(padding));
  for (auto v : opv)
    XGRAD_CHECK(v >= 0, "{}: argument 'output_padding' must be non-negative, got {}", op, vec_str(output_padding));
  if (dims == 1) {
    pv.insert(pv.begin(), 0);
    opv.insert(opv.begin(), 0);
  }
  for (int d = 0; d < 2; ++d)
    XGRAD_CHECK(opv[d] < c.stride[d] || opv[d] < c.dilation[d],
                "{}: argument 'output_padding' {} must be smaller than either stride {} or dilation {}", op,
                vec_str(output_padding), vec_str(stride), vec_str(dilation));
  Plan p;
  p.n = xs[0];
  p.groups = groups;
  p.co = xs[1] / groups;  // grid = x
  p.ci = ws[1];           // image = y
  p.gh = xs[2], p.gw = xs[3], p.kh = ws[2], p.kw = ws[3];
  p.sh = c.stride[0], p.sw = c.stride[1], p.dh = c.dilation[0], p.dw = c.dilation[1];
  p.ph = pv[0], p.pw = pv[1];
  std::int64_t out[2];
  for (int d = 0; d < 2; ++d) {
    // Checked (Note [Checked sizes]): the kernels index the output with i * stride + k * dilation, so the
    // unpadded extent must fit in int64 before the padding is taken off.
    const std::int64_t extent =
        checked_add(checked_add(checked_mul(xs[2 + d] - 1, c.stride[d], op, "stride"),
                                checked_mul(c.dilation[d], ws[2 + d] - 1, op, "dilation"), op, "dilation"),
                    checked_add(opv[d], 1, op, "output_padding"), op, "output_padding");
    out[d] = extent - checked_mul(2, pv[d], op, "padding");
    XGRAD_CHECK(out[d] >= 1,
                "{}: input {} with weight {}, stride {}, padding {}, dilation {}, output_padding {} gives an output "
                "size {} < 1 (output size is too small)",
                op, shape_str(x.shape()), shape_str(weight.shape()), vec_str(stride), vec_str(padding),
                vec_str(dilation), vec_str(output_padding), out[d]);
  }
  p.ih = out[0], p.iw = out[1];
  checked_numel({p.n, out_channels, p.ih, p.iw}, op, "output");
  p.choose_chunk();
  const Tensor y = dims == 1 ? apply<ConvTransposeOp<ConvTranspose1dNames>>(c.x, w, bias, p)
                             : apply<ConvTransposeOp<ConvTranspose2dNames>>(c.x, w, bias, p);
  return finish(y, c.unbatched, dims);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::vector<std::int64_t>& stride,
              const ConvPadding& padding, const std::vector<std::int64_t>& dilation, std::int64_t groups) {
  return conv_nd("conv1d", 1, x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::vector<std::int64_t>& stride,
              const ConvPadding& padding, const std::vector<std::int64_t>& dilation, std::int64_t groups) {
  return conv_nd("conv2d", 2, x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                        const std::vector<std::int64_t>& output_padding, std::int64_t groups,
                        const std::vector<std::int64_t>& dilation) {
  return conv_transpose_nd("conv_transpose1d", 1, x, weight, bias, stride, padding, output_padding, groups, dilation);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
                        const std::vector<std::int64_t>& output_padding, std::int64_t groups,
                        const std::vector<std::int64_t>& dilation) {
  return conv_transpose_nd("conv_transpose2d", 2, x, weight, bias, stride, padding, output_padding, groups, dilation);
}

}  // namespace xgrad
