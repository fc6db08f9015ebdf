#pragma once
// Internal: the loss kernels behind ops/loss.cpp (Note [Loss kernels] there): the pointwise
// regression losses, cross_entropy and nll_loss over class scores, binary_cross_entropy_with_logits.
// Instantiated for float and double. A forward kernel writes each item's loss to its output y when
// y is not null (Reduction::None); when y is null, what it returns is the sum of the losses, in
// double, the same whatever the thread count.
#include <cstdint>

namespace xgrad::detail {

/// The gradient scale of one item: g[i] (Reduction::None, g the per-item seed), else the common
/// factor s (the 0-d seed, divided by the count for Mean).
template <class T>
struct GradScale {
  const T* g = nullptr;  // per-item seed (None), else null
  T s = 0;               // the common factor (Mean/Sum)
  T operator()(std::int64_t i) const { return g ? g[i] : s; }
};

// ---- pointwise regression losses ---------------------------------------------------------------

/// l(d) for d = input - target: mse d^2, l1 |d|, huber (delta p) and smooth_l1 (beta p > 0), with
/// torch's branches.
enum class PointwiseLossKind { mse, l1, huber, smooth_l1 };

/// l(x[i] - t[i], p) for i < n: into y[i], or (y null) summed.
template <class T>
double pointwise_loss_forward(PointwiseLossKind kind, std::int64_t n, const T* x, const T* t, T p, T* y);

/// d = x - t: dx[i] = sc(i) l'(d[i]) and dt[i] = -dx[i] for i < n; either output may be null.
template <class T>
void pointwise_loss_backward(PointwiseLossKind kind, std::int64_t n, const T* x, const T* t, T p,
                             const GradScale<T>& sc, T* dx, T* dt);

// ---- class-index losses: cross_entropy, nll_loss -------------------------------------------------

/// Scores seen as (outer, C, inner): (C) is (1, C, 1), (N, C) is (N, C, 1), (N, C, d...) is
/// (N, C, prod d). Sample s = o * inner + i has its C scores at o*C*inner + i + c*inner.
struct ClassGeometry {
  std::int64_t outer = 1, classes = 1, inner = 1;
  std::int64_t samples() const { return outer * inner; }
  std::int64_t offset(std::int64_t s) const { return (s / inner) * classes * inner + s % inner; }
};

/// cross_entropy of the logits z (layout of g) against the class indices target[s], one per sample,
/// with label smoothing eps: l_s = lse - z_y (lse = m + log_se, m the max of the sample's scores, se
/// = sum_c exp(z_c - m)); with eps, (1 - eps)(lse - z_y) + eps (lse - mean_c z_c). A sample whose
/// target is `ignore` has loss 0. When stats is not null, stats[2s], stats[2s + 1] = (m, log se)
/// (0, 0 for an ignored sample).
template <class T>
double cross_entropy_forward(const ClassGeometry& g, const std::int64_t* target, std::int64_t ignore, double eps,
                             const T* z, T* stats, T* y);

/// Its backward from the saved stats: dz_c = w_s (softmax(z)_c - eps / C) - (1 - eps) w_s [c = y_s],
/// w_s = sc(s); 0 for ignored samples. dz has the layout of g.
template <class T>
void cross_entropy_backward(const ClassGeometry& g, const std::int64_t* target, std::int64_t ignore, double eps,
                            const T* z, const T* stats, const GradScale<T>& sc, T* dz);

/// nll_loss: l_s = -p[s, target[s]] (0 where target[s] is `ignore`), serially in sample order.
template <class T>
double nll_forward(const ClassGeometry& g, const std::int64_t* target, std::int64_t ignore, const T* p, T* y);

/// nll_loss's backward, a scatter into dp (layout of g, zeroed by the caller): dp[s, target[s]] =
/// -w[s] (-w[0] for every sample unless per_sample); ignored samples are skipped.
template <class T>
void nll_scatter(const ClassGeometry& g, const std::int64_t* target, std::int64_t ignore, const T* w, bool per_sample,
                 T* dp);

/// mask[s] = 0 where target[s] is `ignore`, else 1, for s < samples.
template <class T>
void class_mask(std::int64_t samples, const std::int64_t* target, std::int64_t ignore, T* mask);

// ---- binary cross-entropy with logits ------------------------------------------------------------

/// l_i = (1 - t_i) x_i + (1 + (w_i - 1) t_i) softplus(-x_i) for i < n, with w_i = w[i % P] (pos_weight),
/// or 1 when w is null: into y[i], or (y null) summed.
template <class T>
double bce_with_logits_forward(std::int64_t n, const T* x, const T* t, const T* w, std::int64_t P, T* y);

/// Its backward, s_i = sc(i), lw = 1 + (w - 1) t: dx = s (lw sigmoid(x) - w t), dt = s (-x + (w - 1)
/// softplus(-x)), dw[j] += sum_{i % P = j} s t softplus(-x) (dw zeroed by the caller); any output may be
/// null. sigmoid(x) = 1 / (1 + exp(-x)) is 0, not NaN, when exp(-x) overflows.
template <class T>
void bce_with_logits_backward(std::int64_t n, const T* x, const T* t, const T* w, std::int64_t P,
                              const GradScale<T>& sc, T* dx, T* dt, T* dw);

}  // namespace xgrad::detail
