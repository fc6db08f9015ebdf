#pragma once
// Internal: the loops behind ops/normalization.cpp, batch_norm's and group_norm's statistics, their
// normalising pass and their backward (Note [Normalization kernels] in ops/normalization.cpp: two
// passes in double, whole channels or whole (sample, group) blocks per task, so the results do not
// depend on the thread count). Instantiated for float and double.
#include <cstdint>

namespace xgrad::detail::norm {

/// x seen as (n, c, s): n samples of c channels of s contiguous values each.
struct Geometry {
  std::int64_t n = 0, c = 0, s = 1;
};

/// batch_norm's forward, per channel c: in training the batch's mean and biased variance over its
/// n x s values (in double: the mean, then the mean of squared deviations), else running_mean[c] and
/// running_var[c]; mean[c] and invstd[c] = 1 / sqrt(var + eps) written, and y = (x - mean) invstd
/// weight[c] + bias[c] (weight, bias null: 1, 0). batch_var (null when not wanted) gets the batch
/// variance. In training with no values (n s == 0) nothing is written. y has x's layout.
template <class T>
void batch_norm_forward(const Geometry& geo, const T* x, const T* weight, const T* bias, const T* running_mean,
                        const T* running_var, bool training, double eps, T* y, double* mean, double* invstd,
                        double* batch_var);

/// batch_norm's backward from the statistics the forward used (mean, invstd per channel), with
/// xh = (x - mean) invstd over each channel's M = n s values: db = sum g, dw = sum g xh, and
/// dx = weight invstd (g - mean(g) - xh mean(g xh)) in training, weight invstd g in evaluation
/// (weight null: 1). A null dx, dw or db is not computed; x may be null when dx and dw are.
template <class T>
void batch_norm_backward(const Geometry& geo, const T* g, const T* x, const T* weight, const double* mean,
                         const double* invstd, bool training, T* dx, T* dw, T* db);

/// group_norm's forward: x's channels in `groups` groups of c / groups; per (sample, group) block b
/// (contiguous, b = sample groups + group) its mean and biased variance in double (two passes),
/// mean[b] and rstd[b] = 1 / sqrt(var + eps) written, and y = (x - mean) rstd weight[c] + bias[c]
/// (weight, bias null: 1, 0).
template <class T>
void group_norm_forward(const Geometry& geo, std::int64_t groups, const T* x, const T* weight, const T* bias,
                        double eps, T* y, double* mean, double* rstd);

/// group_norm's backward from the forward's mean and rstd per block, with xh = (x - mean) rstd and
/// gw = g weight[c] over each block's M values: dx = rstd (gw - mean(gw) - xh mean(gw xh)),
/// dw[c] = sum g xh and db[c] = sum g over the samples (each first summed per (sample, channel), then
/// over the samples in increasing order). A null dx, dw or db is not computed; x may be null when dx
/// and dw are.
template <class T>
void group_norm_backward(const Geometry& geo, std::int64_t groups, const T* g, const T* x, const T* weight,
                         const double* mean, const double* rstd, T* dx, T* dw, T* db);

}  // namespace xgrad::detail::norm
