#pragma once
// Gradient clipping (torch.nn.utils.clip_grad_norm_ and clip_grad_value_).
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn {

/// Scales the gradients of `params` in place so that their joint norm (all gradients viewed as one
/// vector) is at most max_norm, like torch.nn.utils.clip_grad_norm_ (error_if_nonfinite=false):
///   total = (sum_p ||g_p||_q^q)^(1/q)   (q = norm_type; q = inf: max |g|)
///   g *= min(1, max_norm / (total + 1e-6))
/// Parameters without a gradient are ignored; with none at all the result is 0 and nothing changes.
/// Returns the total norm before clipping. The per-tensor sums are deterministic (fixed chunks) and
/// accumulated in double, also for float32 gradients (torch accumulates those in float32, so the
/// float32 result can differ from torch's in the last bits).
/// Errors: max_norm < 0 or NaN, norm_type <= 0 or NaN (use INFINITY for the max norm).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

/// Clamps every gradient element into [-clip_value, clip_value] (torch.nn.utils.clip_grad_value_).
/// Error: clip_value < 0 or NaN.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace xgrad::nn
