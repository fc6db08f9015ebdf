#include "xgrad/ops/normalization.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/norm_kernels.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

// Note [Normalization kernels]: batch_norm and group_norm are single ops with a hand-written
// backward rather than composites of sub/mean/mul/sqrt/div: the composite records about ten nodes
// and keeps several full-size temporaries alive for backward, where the closed form needs only x and
// two numbers per channel (or group). x is seen as (N, C, S). Statistics are computed in double in two
// passes (mean, then the mean of squared deviations), so a channel with a large mean and a small
// spread keeps its variance. Work is cut into whole channels (batch_norm) or whole (sample, group)
// blocks (group_norm): each is summed by one task in increasing index order, so the results do not
// depend on the thread count. group_norm's weight and bias gradients are first summed per (sample,
// channel) inside those blocks, then over the samples in increasing order, one task per channel.
// The loops: ops/kernels/norm_kernels.hpp.
using detail::norm::Geometry;

Geometry geometry(const char* op, const Tensor& x) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", op);
  XGRAD_CHECK(x.dim() >= 2, "{}: argument 'x' must have at least 2 dims (N, C, *), got shape {}", op,
              shape_str(x.shape()));
  XGRAD_CHECK(is_floating_point(x.dtype()), "{}: argument 'x' must be float32 or float64, got {} {}", op, x.dtype(),
              shape_str(x.shape()));
  Geometry g;
  g.n = x.size(0);
  g.c = x.size(1);
  for (std::int64_t d = 2; d < x.dim(); ++d) g.s *= x.size(d);
  return g;
}

void check_per_channel(const char* op, const Tensor& t, const char* name, const Tensor& x, std::int64_t c) {
  if (!t.defined()) return;
  XGRAD_CHECK(t.shape() == Shape{c} && t.dtype() == x.dtype(),
              "{}: argument '{}' is {} {} but must be ({},) {} (x's channels and dtype; x is {})", op, name, t.dtype(),
              shape_str(t.shape()), c, x.dtype(), shape_str(x.shape()));
}

void check_eps(const char* op, double eps) {
  XGRAD_CHECK(std::isfinite(eps) && eps >= 0, "{}: argument 'eps' must be finite and >= 0, got {}", op, eps);
}

// ---- batch_norm ----------------------------------------------------------------------------------

/// The running statistics, updated in place; passed by value so that apply() does not take them for
/// differentiable inputs.
struct RunningStats {
  Tensor mean, var;
};

// Note [Create graph]: in a create_graph backward both ops run the closed forms of their backward
// below with public ops (recomputing the statistics from x, so that they carry x's history):
// with xh = (x - mu) r over each normalized block of M elements and gh = g w,
//   dx = r (gh - mean(gh) - xh mean(gh xh)),   dw = sum(g xh),   db = sum(g)
// (batch_norm in evaluation: dx = gh r with the running statistics, constants).
Tensors norm_backward_formula(const Tensor& g, const Tensor& x, const Tensor& w, const Shape& blocks,
                              const std::vector<std::int64_t>& axes, const Tensor& fixed_mean, const Tensor& fixed_r,
                              double eps, bool need_x, bool need_w, bool need_b) {
  const std::int64_t N = x.size(0), C = x.size(1);
  const Shape ncs{N, C, C == 0 || N == 0 ? 0 : x.numel() / (N * C)};
  const Tensor gy = reshape(g, ncs);
  Tensor xh, r;
  if (need_x || need_w) {
    const Tensor xb = reshape(x, blocks);
    if (fixed_r.defined()) {
      r = fixed_r;
      xh = mul(sub(xb, fixed_mean), r);
    } else {
      const Tensor d = sub(xb, mean(xb, axes, true));
      r = rsqrt(add(mean(mul(d, d), axes, true), eps));
      xh = mul(d, r);
    }
  }
  Tensor dx, dw, db;
  if (need_w) dw = sum(mul(gy, reshape(xh, ncs)), {0, 2});
  if (need_b) db = sum(gy, {0, 2});
  if (need_x) {
    const Tensor gh = reshape(w.defined() ? mul(gy, reshape(w, {1, C, 1})) : gy, blocks);
    if (fixed_r.defined())
      dx = mul(gh, r);
    else
      dx = mul(r, sub(sub(gh, mean(gh, axes, true)), mul(xh, mean(mul(gh, xh), axes, true))));
    dx = reshape(dx, x.shape());
  }
  return {dx, dw, db};
}

// batch_norm and group_norm: the saved inputs (x when the input or weight gradient is needed, the
// weight for the input's) and one backward, their backward_kernel or backward_formula through
// apply_fused (Note [Fused ops]).
template <class Derived>
struct NormFunction : Function<Derived> {
  static constexpr bool kDifferentiableBackward = true;
  void save_inputs(const Tensor& x, const Tensor& weight) {
    if (this->needs_input_grad(0) || this->needs_input_grad(1))
      this->save_for_backward({x, this->needs_input_grad(0) ? weight : Tensor()});
  }
  Tensors backward(const Tensors& grads) {
    const bool need_saved = this->needs_input_grad(0) || this->needs_input_grad(1);
    return apply_fused<BackwardOf<Derived>>(static_cast<Derived&>(*this), grads[0],
                                            need_saved ? this->saved() : Tensors());
  }
};

struct BatchNormOp : NormFunction<BatchNormOp> {
  static constexpr const char* kName = "batch_norm";
  Geometry geo;
  bool training = false;
  double eps_ = 0;
  std::vector<double> mean, invstd;  // per channel: the statistics used (batch or running)

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, RunningStats running, bool training_,
                 double momentum, double eps) {
    geo = geometry(kName, x);
    training = training_;
    eps_ = eps;
    const std::int64_t C = geo.c, M = geo.n * geo.s;
    mean.assign(static_cast<std::size_t>(C), 0.0);
    invstd.assign(static_cast<std::size_t>(C), 0.0);
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    const bool update = training && running.mean.defined() && M > 0;
    std::vector<double> batch_var(update ? static_cast<std::size_t>(C) : 0);
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::norm::batch_norm_forward(geo, x.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                                       bias.defined() ? bias.data<T>() : nullptr,
                                       running.mean.defined() ? running.mean.data<T>() : nullptr,
                                       running.var.defined() ? running.var.data<T>() : nullptr, training, eps,
                                       y.data<T>(), mean.data(), invstd.data(), update ? batch_var.data() : nullptr);
    });
    if (update) {
      // In place, without history (the forward runs in no-grad mode); copy_ bumps the versions.
      Tensor new_mean = Tensor::empty({C}, kFloat64), new_var = Tensor::empty({C}, kFloat64);
      const std::vector<double> old_mean = running.mean.to_vector(), old_var = running.var.to_vector();
      const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
      for (std::int64_t c = 0; c < C; ++c) {
        const auto k = static_cast<std::size_t>(c);
        new_mean.data<double>()[c] = (1 - momentum) * old_mean[k] + momentum * mean[k];
        new_var.data<double>()[c] = (1 - momentum) * old_var[k] + momentum * batch_var[k] * unbias;
      }
      running.mean.copy_(new_mean);
      running.var.copy_(new_var);
    }
    save_inputs(x, weight);
    return y;
  }

  // The formula (Note [Create graph] above): the closed forms with public ops.
  Tensors backward_formula(const Tensor& g, const Tensors& s) {
    const bool need_x = needs_input_grad(0), need_w = needs_input_grad(1), need_b = needs_input_grad(2);
    const std::int64_t C = geo.c, S = geo.s;
    Tensor fm, fr;  // evaluation: the running statistics, as constants
    if (!training) {
      fm = Tensor::from_vector(mean, {1, C, 1}, g.dtype());
      fr = Tensor::from_vector(invstd, {1, C, 1}, g.dtype());
    }
    return norm_backward_formula(g, s.empty() ? g : s[0], need_x ? s[1] : Tensor(), {geo.n, C, S}, {0, 2}, fm, fr, eps_,
                                 need_x, need_w, need_b);
  }
  // The kernel: the same closed forms in one pass over each channel's lanes.
  Tensors backward_kernel(const Tensor& g, const Tensors& s) {
    const bool need_x = needs_input_grad(0), need_w = needs_input_grad(1), need_b = needs_input_grad(2);
    const std::int64_t C = geo.c;
    Tensor dx = need_x ? Tensor::empty(g.shape(), g.dtype()) : Tensor();
    Tensor dw = need_w ? Tensor::empty({C}, g.dtype()) : Tensor();
    Tensor db = need_b ? Tensor::empty({C}, g.dtype()) : Tensor();
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::norm::batch_norm_backward(geo, g.data<T>(), s.empty() ? nullptr : s[0].data<T>(),
                                        (need_x && s[1].defined()) ? s[1].data<T>() : nullptr, mean.data(),
                                        invstd.data(), training, need_x ? dx.data<T>() : nullptr,
                                        need_w ? dw.data<T>() : nullptr, need_b ? db.data<T>() : nullptr);
    });
    return {dx, dw, db};
  }
};

// ---- group_norm ----------------------------------------------------------------------------------

struct GroupNormOp : NormFunction<GroupNormOp> {
  static constexpr const char* kName = "group_norm";
  Geometry geo;
  std::int64_t groups = 1;
  double eps_ = 0;
  std::vector<double> mean, rstd;  // per (sample, group)

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t num_groups, double eps) {
    geo = geometry(kName, x);
    groups = num_groups;
    eps_ = eps;
    const std::int64_t blocks = geo.n * groups;
    mean.assign(static_cast<std::size_t>(blocks), 0.0);
    rstd.assign(static_cast<std::size_t>(blocks), 0.0);
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::norm::group_norm_forward(geo, groups, x.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                                       bias.defined() ? bias.data<T>() : nullptr, eps, y.data<T>(), mean.data(),
                                       rstd.data());
    });
    save_inputs(x, weight);
    return y;
  }

  // The formula (Note [Create graph] above): the closed forms with public ops.
  Tensors backward_formula(const Tensor& g, const Tensors& s) {
    const bool need_x = needs_input_grad(0), need_w = needs_input_grad(1), need_b = needs_input_grad(2);
    const std::int64_t N = geo.n, M = geo.c / groups * geo.s;
    return norm_backward_formula(g, s.empty() ? g : s[0], need_x ? s[1] : Tensor(), {N, groups, M}, {2}, Tensor(),
                                 Tensor(), eps_, need_x, need_w, need_b);
  }
  // The kernel: the same closed forms in one pass over each group's block.
  Tensors backward_kernel(const Tensor& g, const Tensors& s) {
    const bool need_x = needs_input_grad(0), need_w = needs_input_grad(1), need_b = needs_input_grad(2);
    const std::int64_t C = geo.c;
    Tensor dx = need_x ? Tensor::empty(g.shape(), g.dtype()) : Tensor();
    Tensor dw = need_w ? Tensor::empty({C}, g.dtype()) : Tensor();
    Tensor db = need_b ? Tensor::empty({C}, g.dtype()) : Tensor();
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::norm::group_norm_backward(geo, groups, g.data<T>(), s.empty() ? nullptr : s[0].data<T>(),
                                        (need_x && s[1].defined()) ? s[1].data<T>() : nullptr, mean.data(), rstd.data(),
                                        need_x ? dx.data<T>() : nullptr, need_w ? dw.data<T>() : nullptr,
                                        need_b ? db.data<T>() : nullptr);
    });
    return {dx, dw, db};
  }
};

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = "batch_norm";
  const Geometry g = geometry(op, x);
  XGRAD_CHECK(g.c > 0, "batch_norm: argument 'x' has shape {} with 0 channels (dim 1)", shape_str(x.shape()));
  check_per_channel(op, running_mean, "running_mean", x, g.c);
  check_per_channel(op, running_var, "running_var", x, g.c);
  check_per_channel(op, weight, "weight", x, g.c);
  check_per_channel(op, bias, "bias", x, g.c);
  XGRAD_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: arguments 'running_mean' and 'running_var' must both be defined or both undefined");
  XGRAD_CHECK(!(running_mean.defined() && (running_mean.requires_grad() || running_var.requires_grad())),
              "batch_norm: arguments 'running_mean' and 'running_var' must not require grad (running "
              "statistics are buffers and get no gradient)");
  XGRAD_CHECK(training || running_mean.defined(),
              "batch_norm: arguments 'running_mean' and 'running_var' must be defined in evaluation mode "
              "(training=false)");
  XGRAD_CHECK(!training || g.n * g.s != 1,
              "batch_norm: expected more than 1 value per channel when training, got x of shape {}",
              shape_str(x.shape()));
  check_eps(op, eps);
  XGRAD_CHECK(std::isfinite(momentum), "batch_norm: argument 'momentum' must be finite, got {}", momentum);
  return apply<BatchNormOp>(x, weight, bias, RunningStats{running_mean, running_var}, training, momentum, eps);
}

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = "group_norm";
  const Geometry g = geometry(op, x);
  XGRAD_CHECK(num_groups > 0 && g.c % num_groups == 0,
              "group_norm: argument 'num_groups' = {} must be positive and divide the {} channels of x {}", num_groups,
              g.c, shape_str(x.shape()));
  check_per_channel(op, weight, "weight", x, g.c);
  check_per_channel(op, bias, "bias", x, g.c);
  XGRAD_CHECK(g.n * g.c * g.s != 1, "group_norm: expected more than 1 value per channel, got x of shape {}",
              shape_str(x.shape()));
  check_eps(op, eps);
  return apply<GroupNormOp>(x, weight, bias, num_groups, eps);
}

}  // namespace xgrad
