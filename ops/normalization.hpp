#pragma once
// Batch and group normalisation, as torch.nn.functional.batch_norm and group_norm (PyTorch 1.13).
// x is (N, C, *): N samples, C channels, any number of trailing (spatial) dims, seen as (N, C, S).
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// The backward is hand-written (Note [Normalization kernels] in normalization.cpp): one pass per
// channel or group instead of the composite's graph of ten ops and its full-size temporaries.
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps).
/// x (N, C, *); running_mean, running_var, weight, bias (C) of x's dtype or undefined.
/// training: normalises with the batch statistics (biased variance) and, when the running stats are
/// given, updates them in place (no autograd history) with the unbiased variance:
///   running_mean = (1 - momentum) * running_mean + momentum * mean
///   running_var  = (1 - momentum) * running_var  + momentum * var * M / (M - 1)
/// An empty batch (M = 0) gives an empty output and leaves the running stats alone, as torch.
/// Not training: normalises with running_mean and running_var (both required); they get no
/// gradient. Statistics are computed in double (two passes); each channel is one task, so the
/// results are bit-identical whatever the thread count.
/// Errors: undefined x, x not floating point, x with fewer than 2 dims or 0 channels, a per-channel tensor not (C) or
/// of another dtype, only one of the running stats given, a running stat that requires grad, running stats missing in
/// eval mode, one value per channel in training (N * S == 1), eps < 0 or not finite, momentum not finite.
/// @op `batch_norm(x, running_mean, running_var, w, b, training, momentum, eps)`
///   | x (N, C, *); per channel c over its M = N·S values: y = (x − μ_c)·r_c·w_c + b_c, r = 1/√(var + ε), var
///     biased; training: batch μ, var, running stats updated in place (momentum, unbiased var); eval: running μ, var
///   | training: dx = r·w·(g − Σg/M − x̂·Σ(g·x̂)/M), x̂ = (x − μ)·r; eval: dx = g·w·r; dw = Σ g·x̂, db = Σ g; none
///     for the running stats
///   | torch.nn.functional.batch_norm
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

/// torch.nn.functional.group_norm(x, num_groups, weight, bias, eps): x (N, C, *) with C divisible
/// by num_groups; the statistics of each sample's group of C / num_groups consecutive channels;
/// weight and bias (C) or undefined. Parallel over (sample, group); weight and bias gradients are
/// summed over the samples in a fixed order (bit-identical whatever the thread count).
/// Errors: undefined x, x not floating point, x with fewer than 2 dims, num_groups <= 0 or not dividing C, weight or
/// bias not (C) or of another dtype, N * C * S == 1 (torch: "more than 1 value per channel"), eps < 0 or not finite.
/// @op `group_norm(x, G, w, b, eps)`
///   | per (sample, group of C/G channels) over its M = (C/G)·S values: y = (x − μ)·r·w_c + b_c (μ, r as batch_norm's)
///   | dx = r·(g·w − Σ(g·w)/M − x̂·Σ(g·w·x̂)/M); dw_c = Σ_{n,s} g·x̂, db_c = Σ_{n,s} g
///   | torch.nn.functional.group_norm
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace xgrad
