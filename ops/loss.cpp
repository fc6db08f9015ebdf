#include "xgrad/ops/loss.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/define/sum_to.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/loss_kernels.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

// Note [Loss kernels]: each loss is one hand-written Function instead of a composite of
// sub/pow/mean (or log_softmax/index/mean): one pass over the data forward and one backward, no
// full-size temporaries (the composite would make three or four), and the stable formulas are
// written once. The loops are in ops/kernels/loss_kernels.cpp: reductions cut the elements (or
// samples) into fixed chunks whose partial sums, in double, are added left to right
// (deterministic_sum), so the result does not depend on the number of threads; backward kernels
// write each gradient element from one task.

void check_reduction(const char* op, Reduction r) {
  XGRAD_CHECK(r == Reduction::None || r == Reduction::Mean || r == Reduction::Sum,
              "{}: argument 'reduction' has invalid value {}", op, static_cast<int>(r));
}

void check_defined(const char* op, const char* arg, const Tensor& t) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

// Input and target of a pointwise loss: same shape and dtype, no broadcasting (see loss.hpp).
void check_pair(const char* op, const Tensor& input, const Tensor& target, Reduction r, const char* in = "input") {
  check_defined(op, in, input);
  check_defined(op, "target", target);
  check_floating(op, in, input);
  check_floating(op, "target", target);
  check_reduction(op, r);
  XGRAD_CHECK(input.shape() == target.shape(),
              "{}: argument 'target' has shape {} but '{}' has shape {}; the shapes must be equal (no "
              "broadcasting: reshape one of them if that is what you meant)",
              op, shape_str(target.shape()), in, shape_str(input.shape()));
  XGRAD_CHECK(input.dtype() == target.dtype(), "{}: argument 'target' has dtype {} but '{}' has dtype {}", op,
              target.dtype(), in, input.dtype());
  XGRAD_CHECK(r != Reduction::Mean || input.numel() > 0,
              "{}: mean reduction of an empty input (shape {}) is undefined (torch returns nan); use "
              "Reduction::Sum or Reduction::None",
              op, shape_str(input.shape()));
}

// The 0-d result of a Mean/Sum reduction of `total` over `count` items.
Tensor reduced_scalar(double total, std::int64_t count, Reduction r, Dtype dtype) {
  return Tensor::scalar(r == Reduction::Mean ? total / static_cast<double>(count) : total, dtype);
}

// The gradient scale of one item (detail::GradScale): g_i (None), g / count (Mean) or g (Sum). For
// Mean/Sum the seed gradient is 0-d.
using detail::GradScale;

template <class T>
GradScale<T> grad_scale(const Tensor& grad, Reduction r, std::int64_t count) {
  GradScale<T> sc;
  if (r == Reduction::None) {
    sc.g = grad.data<T>();
  } else {
    const double g = static_cast<double>(grad.data<T>()[0]);
    sc.s = static_cast<T>(r == Reduction::Mean ? g / static_cast<double>(count) : g);
  }
  return sc;
}

// ---- pointwise regression losses ---------------------------------------------------------------
using Pointwise = detail::PointwiseLossKind;

template <Pointwise K>
constexpr const char* pointwise_name() {
  if constexpr (K == Pointwise::mse) return "mse_loss";
  if constexpr (K == Pointwise::l1) return "l1_loss";
  if constexpr (K == Pointwise::huber) return "huber_loss";
  return "smooth_l1_loss";
}

// `<loss>_backward`: d = input − target; dinput = g·l'(d) (g/n for Mean), dtarget = −dinput; the
// kernel's loops and the formula's ops (Note [Fused ops]). need = which of the two are wanted.
template <Pointwise K>
struct PointwiseLossBackward {
  struct Loss {
    static constexpr const char* kName = pointwise_name<K>();
  };
  static constexpr const char* kName = detail::BackwardName<Loss>::kValue.data();

  static Tensors kernel(const Tensor& g, const Tensor& input, const Tensor& target, Reduction red, double param,
                        std::array<bool, 2> need) {
    const bool need_x = need[0], need_t = need[1];
    const std::int64_t n = input.numel();
    Tensor gx = need_x ? Tensor::empty(input.shape(), input.dtype()) : Tensor();
    Tensor gt = need_t ? Tensor::empty(input.shape(), input.dtype()) : Tensor();
    dispatch(input.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = input.data<T>();
      const T* t = target.data<T>();
      const T pt = static_cast<T>(param);
      const GradScale<T> sc = grad_scale<T>(g, red, n);
      T* dx = need_x ? gx.data<T>() : nullptr;
      T* dt = need_t ? gt.data<T>() : nullptr;
      detail::pointwise_loss_backward<T>(K, n, x, t, pt, sc, dx, dt);
    });
    return {gx, gt};
  }

  // The kinks' one-sided choices are clamp's and sign's; the second derivative there is 0 or undefined.
  static Tensors formula(const Tensor& g, const Tensor& input, const Tensor& target, Reduction red, double param,
                         std::array<bool, 2> need) {
    const Tensor d = sub(input, target);
    Tensor der;
    if constexpr (K == Pointwise::mse) der = mul(d, 2.0);
    if constexpr (K == Pointwise::l1) der = sign(d);
    if constexpr (K == Pointwise::huber) der = clamp(d, -param, param);
    if constexpr (K == Pointwise::smooth_l1) der = param == 0 ? sign(d) : div(clamp(d, -param, param), param);
    const Tensor scale = red == Reduction::Mean ? div(g, static_cast<double>(input.numel())) : g;
    const Tensor gx = mul(der, scale);
    return {need[0] ? gx : Tensor(), need[1] ? neg(gx) : Tensor()};
  }
};

template <Pointwise K>
struct PointwiseLoss : Function<PointwiseLoss<K>> {
  static constexpr const char* kName = pointwise_name<K>();
  static constexpr bool kDifferentiableBackward = true;
  Reduction red = Reduction::Mean;
  double param = 0;

  Tensor forward(const Tensor& input, const Tensor& target, Reduction r, double p) {
    red = r;
    param = p;
    const std::int64_t n = input.numel();
    Tensor out;
    dispatch(input.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = input.data<T>();
      const T* t = target.data<T>();
      const T pt = static_cast<T>(p);
      out = r == Reduction::None ? Tensor::empty(input.shape(), input.dtype()) : Tensor();
      T* y = out.defined() ? out.data<T>() : nullptr;
      const double total = detail::pointwise_loss_forward<T>(K, n, x, t, pt, y);
      if (!y) out = reduced_scalar(total, n, r, input.dtype());
    });
    if (this->needs_input_grad(0) || this->needs_input_grad(1)) this->save_for_backward({input, target});
    return out;
  }

  Tensors backward(const Tensors& grads) {
    return apply_fused<PointwiseLossBackward<K>>(grads[0], this->saved(0), this->saved(1), red, param,
                                                 std::array{this->needs_input_grad(0), this->needs_input_grad(1)});
  }
};

// ---- class-index losses: cross_entropy, nll_loss -------------------------------------------------
// Scores seen as (outer, C, inner) (detail::ClassGeometry).
using detail::ClassGeometry;

// Validates the scores and returns their geometry plus the shape the target must have.
ClassGeometry class_geometry(const char* op, const char* arg, const Tensor& scores, Shape& target_shape) {
  check_defined(op, arg, scores);
  check_floating(op, arg, scores);
  XGRAD_CHECK(scores.dim() >= 1,
              "{}: argument '{}' must have shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor (shape {})", op, arg,
              shape_str(scores.shape()));
  const Shape& s = scores.shape();
  ClassGeometry g;
  if (s.size() == 1) {
    g.classes = s[0];
    target_shape = {};
    return g;
  }
  g.outer = s[0];
  g.classes = s[1];
  target_shape = {s[0]};
  for (std::size_t d = 2; d < s.size(); ++d) {
    g.inner *= s[d];
    target_shape.push_back(s[d]);
  }
  return g;
}

// Checks every class index (in [0, C) or ignore_index); returns the number of non-ignored samples.
std::int64_t check_classes(const char* op, std::span<const std::int64_t> y, std::int64_t classes,
                           std::int64_t ignore_index, const Shape& scores_shape) {
  std::int64_t count = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == ignore_index) continue;
    XGRAD_CHECK(y[i] >= 0 && y[i] < classes,
                "{}: argument 'target' holds class index {} at position {}, outside [0, {}) for scores of shape {} "
                "(ignore_index is {})",
                op, y[i], i, classes, shape_str(scores_shape), ignore_index);
    ++count;
  }
  return count;
}

void check_target_count(const char* op, std::size_t n, const ClassGeometry& g, const Shape& scores_shape,
                        const Shape& target_shape) {
  XGRAD_CHECK(static_cast<std::int64_t>(n) == g.samples(),
              "{}: argument 'target' has {} class indices but scores of shape {} have {} samples (target shape {})", op,
              n, shape_str(scores_shape), g.samples(), shape_str(target_shape));
}

void check_mean_count(const char* op, Reduction r, std::int64_t count, std::int64_t samples,
                      const Shape& scores_shape) {
  XGRAD_CHECK(r != Reduction::Mean || count > 0,
              "{}: mean reduction over no samples ({} samples in scores of shape {}, all ignored or none) is "
              "undefined (torch returns nan); use Reduction::Sum or Reduction::None",
              op, samples, shape_str(scores_shape));
}

// Converts a target tensor of class indices (int64 or int32, as torch takes them) to indices,
// checking dtype and shape. A float target is refused with the conversion to use.
std::vector<std::int64_t> target_indices(const char* op, const Tensor& target, const Shape& target_shape,
                                         const Shape& scores_shape) {
  check_defined(op, "target", target);
  XGRAD_CHECK(target.shape() == target_shape,
              "{}: argument 'target' has shape {} but scores of shape {} need a target of shape {}", op,
              shape_str(target.shape()), shape_str(scores_shape), shape_str(target_shape));
  XGRAD_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32,
              "{}: argument 'target' holds class indices and must be an int64 (or int32) tensor, got {} of shape "
              "{} (convert with target.to(xgrad::kInt64))",
              op, target.dtype(), shape_str(target.shape()));
  std::vector<std::int64_t> y(static_cast<std::size_t>(target.numel()));
  if (target.dtype() == kInt64) {
    if (!y.empty()) std::memcpy(y.data(), target.data<std::int64_t>(), y.size() * sizeof(std::int64_t));
  } else {
    const std::int32_t* p = target.data<std::int32_t>();
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = p[i];
  }
  return y;
}

struct ClassArgs {
  std::span<const std::int64_t> target;
  ClassGeometry geo;
  Shape out_shape;  // per-sample shape (Reduction::None)
  std::int64_t count = 0;
  Reduction red = Reduction::Mean;
};

// Note [Create graph]: nll_loss's backward puts -w_s at (s, y_s) (a scatter). In a create_graph
// backward it runs as NllScatter, whose gradient is the gather -G[s, y_s] (nll_loss's own forward
// with Reduction::None), whose gradient is the scatter again. cross_entropy's recorded backward
// uses the same scatter for its one-hot term.
struct NllScatter : Function<NllScatter> {
  static constexpr const char* kName = "nll_loss_backward";
  static constexpr bool kDifferentiableBackward = true;
  std::vector<std::int64_t> target;
  ClassGeometry geo;
  Shape w_shape, sample_shape;
  std::int64_t ignore = -100;

  // w: one weight per sample (shape sample_shape) or one for all (a single element).
  Tensor forward(const Tensor& w, const std::vector<std::int64_t>& t, const ClassGeometry& g, std::int64_t ignore_index,
                 const Shape& shape, const Shape& samples) {
    target = t;
    geo = g;
    ignore = ignore_index;
    w_shape = w.shape();
    sample_shape = samples;
    Tensor gp = Tensor::zeros(shape, w.dtype());
    const bool per_sample = w.numel() == geo.samples() && w.shape() == samples;
    dispatch(gp.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dp = gp.data<T>();
      const T* wp = w.data<T>();
      detail::nll_scatter<T>(geo, target.data(), ignore, wp, per_sample, dp);
    });
    return gp;
  }
  Tensors backward(const Tensors& grads);
};

struct CrossEntropy : Function<CrossEntropy> {
  static constexpr const char* kName = "cross_entropy";
  static constexpr bool kDifferentiableBackward = true;
  std::vector<std::int64_t> target;
  ClassGeometry geo;
  Shape sample_shape;

  Reduction red = Reduction::Mean;
  std::int64_t count = 0, ignore = -100;
  double smoothing = 0;

  // stats[s] = (m, log sum_c exp(z_c - m)) is saved for backward: softmax is exp((z - m) - log_se).
  // Keeping m and log_se apart (not lse = m + log_se) keeps float32 exact for logits of 1e3, as
  // torch's log_softmax is: (z - m) is exact there, m + log_se would round to 6e-5.
  Tensor forward(const Tensor& logits, const ClassArgs& a, double eps, std::int64_t ignore_index) {
    geo = a.geo;
    sample_shape = a.out_shape;
    red = a.red;
    count = a.count;
    ignore = ignore_index;
    smoothing = eps;
    const std::int64_t ns = geo.samples();
    const bool save = this->needs_input_grad(0);
    Tensor stats_t = save ? Tensor::empty({ns, 2}, logits.dtype()) : Tensor();
    Tensor out = a.red == Reduction::None ? Tensor::empty(a.out_shape, logits.dtype()) : Tensor();
    dispatch(logits.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* z = logits.data<T>();
      T* stats = save ? stats_t.data<T>() : nullptr;
      T* y = out.defined() ? out.data<T>() : nullptr;
      const double total = detail::cross_entropy_forward<T>(geo, a.target.data(), ignore_index, eps, z, stats, y);
      if (!y) out = reduced_scalar(total, count, a.red, logits.dtype());
    });
    if (save) {
      target.assign(a.target.begin(), a.target.end());
      this->save_for_backward({logits, stats_t});
    }
    return out;
  }

  Tensors backward(const Tensors& grads);
};

// `cross_entropy_backward` (Note [Fused ops]):
//   dz_c = w_s (softmax(z)_c - eps / C) - (1 - eps) w_s [c = y_s],  w_s = g_s (g / count for Mean),
// 0 for ignored samples; the kernel computes softmax from the saved (m, log_se) of each sample, the
// formula with softmax and NllScatter, with the class axis 0 for (C) scores and 1 otherwise.
struct CrossEntropyBackward {
  static constexpr const char* kName = "cross_entropy_backward";
  static Tensor kernel(const Tensor& g, const Tensor& logits, const Tensor& stats_t, const CrossEntropy& op) {
    const auto& geo = op.geo;
    const auto& target = op.target;
    const Reduction red = op.red;
    const std::int64_t count = op.count, ignore = op.ignore;
    const double smoothing = op.smoothing;
    Tensor gz = Tensor::empty(logits.shape(), logits.dtype());
    dispatch(logits.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* z = logits.data<T>();
      const T* stats = stats_t.data<T>();
      T* dz = gz.data<T>();
      const GradScale<T> sc = grad_scale<T>(g, red, count);
      detail::cross_entropy_backward<T>(geo, target.data(), ignore, smoothing, z, stats, sc, dz);
    });
    return gz;
  }
  static Tensor formula(const Tensor& g, const Tensor& logits, const Tensor& /*stats*/, const CrossEntropy& op) {
    const auto& geo = op.geo;
    const auto& target = op.target;
    const Reduction red = op.red;
    const std::int64_t count = op.count, ignore = op.ignore;
    const double smoothing = op.smoothing;
    const Shape& sample_shape = op.sample_shape;
    const std::int64_t axis = logits.dim() == 1 ? 0 : 1;
    const Tensor w = red == Reduction::Mean ? div(g, static_cast<double>(count)) : g;
    Shape bshape = sample_shape;  // the samples' shape with the class axis as 1, for broadcasting
    bshape.insert(bshape.begin() + axis, 1);
    Tensor wb = w.dim() == 0 ? w : reshape(w, bshape);
    if (count != geo.samples()) {  // ignored samples: a constant 0/1 mask
      Tensor mask = Tensor::empty(bshape, logits.dtype());
      dispatch(mask.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* mp = mask.data<T>();
        detail::class_mask<T>(geo.samples(), target.data(), ignore, mp);
      });
      wb = mul(wb, mask);
    }
    Tensor p = softmax(logits, axis);
    if (smoothing != 0) p = sub(p, smoothing / static_cast<double>(geo.classes));
    Tensor dz = mul(p, wb);
    if (smoothing != 1) {
      Tensor hot = xgrad::apply<NllScatter>(w, target, geo, ignore, logits.shape(), sample_shape);
      dz = add(dz, smoothing == 0 ? hot : mul(hot, 1 - smoothing));
    }
    return dz;
  }
};

Tensors CrossEntropy::backward(const Tensors& grads) {
  return {apply_fused<CrossEntropyBackward>(grads[0], saved(0), saved(1), *this)};
}

struct NllLoss : Function<NllLoss> {
  static constexpr const char* kName = "nll_loss";
  static constexpr bool kDifferentiableBackward = true;  // NllScatter, whose backward is the gather
  std::vector<std::int64_t> target;
  ClassGeometry geo;
  Shape shape, sample_shape;
  Reduction red = Reduction::Mean;
  std::int64_t count = 0, ignore = -100;

  // l_s = -p[s, y_s]: one read per sample, so this runs serially (in sample order: deterministic).
  Tensor forward(const Tensor& log_probs, const ClassArgs& a, std::int64_t ignore_index) {
    geo = a.geo;
    red = a.red;
    count = a.count;
    ignore = ignore_index;
    shape = log_probs.shape();
    sample_shape = a.out_shape;
    Tensor out = a.red == Reduction::None ? Tensor::empty(a.out_shape, log_probs.dtype()) : Tensor();
    dispatch(log_probs.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = log_probs.data<T>();
      T* y = out.defined() ? out.data<T>() : nullptr;
      const double total = detail::nll_forward<T>(geo, a.target.data(), ignore_index, p, y);
      if (!y) out = reduced_scalar(total, count, a.red, log_probs.dtype());
    });
    if (this->needs_input_grad(0)) target.assign(a.target.begin(), a.target.end());
    return out;
  }

  // dp = -w_s at (s, y_s), 0 elsewhere (NllScatter), w_s = g_s (g / count for Mean).
  Tensors backward(const Tensors& grads) {
    const Tensor w = red == Reduction::Mean ? div(grads[0], static_cast<double>(count)) : grads[0];
    return {xgrad::apply<NllScatter>(w, target, geo, ignore, shape, sample_shape)};
  }
};

Tensors NllScatter::backward(const Tensors& grads) {
  ClassArgs a;
  a.target = target;
  a.geo = geo;
  a.out_shape = sample_shape;
  a.red = Reduction::None;
  // -G[s, y_s] per sample (0 where ignored): the gather, recorded as an nll_loss.
  Tensor gw = xgrad::apply<NllLoss>(grads[0], a, ignore);
  if (gw.shape() != w_shape) gw = reshape(sum(gw), w_shape);  // one weight for every sample
  return {gw};
}

// Shared argument handling of the two class-index losses.
template <class Target>
Tensor class_loss(const char* op, const char* arg, const Tensor& scores, const Target& target, Reduction r,
                  std::int64_t ignore_index, double eps) {
  check_reduction(op, r);
  Shape target_shape;
  ClassArgs a;
  a.geo = class_geometry(op, arg, scores, target_shape);
  a.red = r;
  a.out_shape = target_shape;
  std::vector<std::int64_t> converted;
  if constexpr (std::is_same_v<Target, Tensor>) {
    converted = target_indices(op, target, target_shape, scores.shape());
    a.target = converted;
  } else {
    check_target_count(op, target.size(), a.geo, scores.shape(), target_shape);
    a.target = target;
  }
  a.count = check_classes(op, a.target, a.geo.classes, ignore_index, scores.shape());
  check_mean_count(op, r, a.count, a.geo.samples(), scores.shape());
  if (eps < 0) return apply<NllLoss>(scores, a, ignore_index);  // nll_loss passes eps = -1
  return apply<CrossEntropy>(scores, a, eps, ignore_index);
}

void check_smoothing(double eps) {
  XGRAD_CHECK(eps >= 0 && eps <= 1, "cross_entropy: argument 'label_smoothing' must be in [0, 1], got {}", eps);
}

// ---- binary cross-entropy with logits ------------------------------------------------------------
// pos_weight's elements (null when undefined) and its period P: element i takes pos_weight[i % P].
template <class T>
const T* pos_weight_data(const Tensor& w) {
  return w.defined() ? w.data<T>() : nullptr;
}
std::int64_t pos_weight_period(const Tensor& w) { return w.defined() ? w.numel() : 1; }

struct BceWithLogits : Function<BceWithLogits> {
  static constexpr const char* kName = "binary_cross_entropy_with_logits";
  static constexpr bool kDifferentiableBackward = true;
  Reduction red = Reduction::Mean;

  // pos_weight (may be undefined) is indexed i % P: its shape is a suffix of the input's (checked).
  Tensor forward(const Tensor& x_t, const Tensor& t_t, const Tensor& w_t, Reduction r) {
    red = r;
    const std::int64_t n = x_t.numel();
    Tensor out;
    dispatch(x_t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = x_t.data<T>(), *t = t_t.data<T>(), *w = pos_weight_data<T>(w_t);
      const std::int64_t P = pos_weight_period(w_t);
      out = r == Reduction::None ? Tensor::empty(x_t.shape(), x_t.dtype()) : Tensor();
      T* y = out.defined() ? out.data<T>() : nullptr;
      const double total = detail::bce_with_logits_forward<T>(n, x, t, w, P, y);
      if (!y) out = reduced_scalar(total, n, r, x_t.dtype());
    });
    if (this->needs_input_grad(0) || this->needs_input_grad(1) || this->needs_input_grad(2))
      this->save_for_backward({x_t, t_t, w_t});
    return out;
  }

  Tensors backward(const Tensors& grads);
};

// `binary_cross_entropy_with_logits_backward` (Note [Fused ops]), with s = g (g / n for Mean):
//   dx = s (lw sigmoid(x) - w t), dt = s (-x + (w - 1) softplus(-x)), dw[j] = sum_{i % P = j} s t softplus(-x),
// lw = 1 + (w - 1) t; w (pos_weight) may be undefined (ones). The kernel's sigmoid(x) =
// 1 / (1 + exp(-x)) is 0, not NaN, when exp(-x) overflows; the formula's softplus(-x) = -logsigmoid(x).
struct BceWithLogitsBackward {
  static constexpr const char* kName = "binary_cross_entropy_with_logits_backward";
  static Tensors kernel(const Tensor& g, const Tensor& x_t, const Tensor& t_t, const Tensor& w_t, Reduction red,
                        std::array<bool, 3> need) {
    const bool need_x = need[0], need_t = need[1], need_w = need[2];
    const std::int64_t n = x_t.numel();
    Tensor gx = need_x ? Tensor::empty(x_t.shape(), x_t.dtype()) : Tensor();
    Tensor gt = need_t ? Tensor::empty(x_t.shape(), x_t.dtype()) : Tensor();
    Tensor gw = need_w ? Tensor::zeros(w_t.shape(), w_t.dtype()) : Tensor();
    dispatch(x_t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = x_t.data<T>(), *t = t_t.data<T>(), *w = pos_weight_data<T>(w_t);
      const std::int64_t P = pos_weight_period(w_t);
      const GradScale<T> sc = grad_scale<T>(g, red, n);
      T* dx = need_x ? gx.data<T>() : nullptr;
      T* dt = need_t ? gt.data<T>() : nullptr;
      T* dw = need_w ? gw.data<T>() : nullptr;
      detail::bce_with_logits_backward<T>(n, x, t, w, P, sc, dx, dt, dw);
    });
    return {gx, gt, gw};
  }
  static Tensors formula(const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& w, Reduction red,
                         std::array<bool, 3> need) {
    const Tensor s = red == Reduction::Mean ? div(g, static_cast<double>(x.numel())) : g;
    const Tensor sp = neg(logsigmoid(x));  // softplus(-x)
    Tensor gx, gt, gw;
    if (need[0]) {
      const Tensor lw = w.defined() ? add(mul(sub(w, 1.0), t), 1.0) : Tensor();
      const Tensor wt = w.defined() ? mul(w, t) : t;
      gx = mul(s, sub(lw.defined() ? mul(lw, sigmoid(x)) : sigmoid(x), wt));
    }
    if (need[1]) gt = mul(s, w.defined() ? sub(mul(sub(w, 1.0), sp), x) : neg(x));
    if (need[2]) gw = detail::sum_to(mul(mul(s, t), sp), w.shape());
    return {gx, gt, gw};
  }
};

Tensors BceWithLogits::backward(const Tensors& grads) {
  return apply_fused<BceWithLogitsBackward>(grads[0], saved(0), saved(1), saved(2), red,
                                            std::array{needs_input_grad(0), needs_input_grad(1), needs_input_grad(2)});
}

// pos_weight must broadcast to `input` from the trailing dimensions: leading 1s dropped, the rest
// equal to input's last dimensions (so element i of input uses pos_weight[i % numel]).
void check_pos_weight(const Tensor& input, const Tensor& pw) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  check_floating(op, "pos_weight", pw);
  XGRAD_CHECK(pw.dtype() == input.dtype(), "{}: argument 'pos_weight' has dtype {} but 'logits' has dtype {}", op,
              pw.dtype(), input.dtype());
  const Shape& ps = pw.shape();
  const Shape& is = input.shape();
  std::size_t lead = 0;
  while (lead < ps.size() && ps[lead] == 1) ++lead;
  const std::size_t k = ps.size() - lead;  // the dimensions that must equal input's last k
  const bool ok = ps.size() <= is.size() && std::equal(ps.begin() + static_cast<std::ptrdiff_t>(lead), ps.end(),
                                                       is.end() - static_cast<std::ptrdiff_t>(k));
  XGRAD_CHECK(ok,
              "{}: argument 'pos_weight' of shape {} must match the trailing dimensions of 'logits' of shape {} (e.g. "
              "(C) for (N, C))",
              op, shape_str(ps), shape_str(is));
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("mse_loss", input, target, reduction);
  return apply<PointwiseLoss<Pointwise::mse>>(input, target, reduction, 0.0);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("l1_loss", input, target, reduction);
  return apply<PointwiseLoss<Pointwise::l1>>(input, target, reduction, 0.0);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  check_pair("huber_loss", input, target, reduction);
  XGRAD_CHECK(delta > 0, "huber_loss: argument 'delta' must be positive, got {}", delta);
  return apply<PointwiseLoss<Pointwise::huber>>(input, target, reduction, delta);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  check_pair("smooth_l1_loss", input, target, reduction);
  XGRAD_CHECK(beta >= 0, "smooth_l1_loss: argument 'beta' must be non-negative, got {}", beta);
  if (beta == 0) return apply<PointwiseLoss<Pointwise::l1>>(input, target, reduction, 0.0);  // like torch
  return apply<PointwiseLoss<Pointwise::smooth_l1>>(input, target, reduction, beta);
}

Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& target, Reduction reduction,
                     double label_smoothing, std::int64_t ignore_index) {
  check_smoothing(label_smoothing);
  return class_loss("cross_entropy", "logits", logits, target, reduction, ignore_index, label_smoothing);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, double label_smoothing,
                     std::int64_t ignore_index) {
  check_smoothing(label_smoothing);
  return class_loss("cross_entropy", "logits", logits, target, reduction, ignore_index, label_smoothing);
}

Tensor nll_loss(const Tensor& log_probs, const std::vector<std::int64_t>& target, Reduction reduction,
                std::int64_t ignore_index) {
  return class_loss("nll_loss", "log_probs", log_probs, target, reduction, ignore_index, -1.0);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, std::int64_t ignore_index) {
  return class_loss("nll_loss", "log_probs", log_probs, target, reduction, ignore_index, -1.0);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction,
                                        const Tensor& pos_weight) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  check_pair(op, logits, target, reduction, "logits");
  if (pos_weight.defined()) check_pos_weight(logits, pos_weight);
  return apply<BceWithLogits>(logits, target, pos_weight, reduction);
}

}  // namespace xgrad
