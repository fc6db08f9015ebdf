#pragma once
// Loss functions as ops (like torch::nn::functional): each one fused forward and backward kernel.
//
// Every loss takes a `Reduction` (torch's `reduction=`): None returns the per-element (or
// per-sample) losses l, Mean returns mean(l) as a 0-d tensor, Sum returns sum(l). Each loss's
// formulas are its `/// @op` row (op | l per element or sample | gradient | torch), from which
// docs/ops.md's table is generated (g′, the gradient of l, is defined in mse_loss's row).
//
// The log-sum-exp subtracts the maximum first, and softplus(-x) is computed as max(-x, 0) +
// log1p(exp(-|x|)), so logits of +-1e3 neither overflow nor lose the loss (torch computes the same
// expressions). pos_weight gets a gradient too, summed over the elements it was broadcast to (torch
// 1.13 refuses to differentiate pos_weight; ours is gradchecked).
//
// Differentiable arguments: input and target of mse/l1/huber/smooth_l1 and of BCE (as in torch),
// BCE's pos_weight, the logits of cross_entropy and the log-probabilities of nll_loss. Class-index
// targets are not differentiable (an integer tensor cannot require grad).
//
// Shapes. mse/l1/huber/smooth_l1/BCE require input and target of the same shape and dtype: unlike
// torch (which warns and broadcasts, usually a bug such as (N, 1) against (N)), a mismatch is an
// xgrad::Error naming both shapes. pos_weight broadcasts like torch but only from the trailing
// dimensions of the input: its shape must be a suffix of input's shape (e.g. (C) for (N, C)), or a
// single element. cross_entropy and nll_loss take the class scores as (C), (N, C) or
// (N, C, d1, ..., dk) with the class axis 1 (0 for 1-d), and targets holding one class index per
// sample, shaped (), (N) or (N, d1, ..., dk). Targets are given as a std::vector<std::int64_t>
// (row-major, one index per sample: length 1 for (C) scores) or as an int64 (or int32) Tensor in the
// shape above, as torch takes them; a float target tensor is an error that says how to convert
// (target.to(xgrad::kInt64)). Scores, inputs and float targets must be float32 or float64. Samples whose target equals
// ignore_index (default -100, like torch) add 0 to the loss and to the gradient, and are not counted by Mean.
// Reduction::None returns the per-sample losses in the target's shape.
//
// Errors (xgrad::Error naming the loss, the argument and the shapes or values): undefined tensors,
// shape or dtype mismatches, wrong number of dimensions, target length != number of samples, a
// class index that is not an integer or lies outside [0, C) (and is not ignore_index), a target
// tensor that requires grad, label_smoothing outside [0, 1], negative huber delta / smooth_l1 beta
// (delta must be > 0), and Mean over nothing: an empty input or batch, or a batch whose targets
// are all ignore_index. torch returns NaN there; we refuse, since a NaN loss silently poisons every
// parameter it reaches (use Reduction::Sum, which gives 0, if empty batches are expected).
//
// Performance: one pass forward and one backward, no temporaries besides the output and the
// gradient(s); cross_entropy saves two values per sample (row max and log-sum-exp) for backward,
// and the Tensor-target overloads convert the targets to one index vector. Rows (or elements) are
// processed in parallel with core/parallel.hpp only above kParallelGrain elements (nll_loss, one
// read per sample, stays serial); reductions add fixed chunks in double in a fixed order, so
// results are bit-identical whatever the thread count. Exp/log run vectorised (xsimd).
#include <cstdint>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// How a loss reduces its per-element losses (torch's reduction='none' | 'mean' | 'sum').
enum class Reduction { None, Mean, Sum };

/// Mean squared error.
/// @op `mse_loss(x, t, reduction)` | l = (x − t)², then none / mean / sum | dx = 2(x − t)·g′, dt = −dx; in every
///   loss's row g′ = g (none, sum) or g/n (mean over n) | torch.nn.functional.mse_loss
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Mean absolute error.
/// @op `l1_loss(x, t, reduction)` | |x − t| | dx = sign(x − t)·g′ (0 where equal), dt = −dx
///   | torch.nn.functional.l1_loss
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Huber loss; delta > 0.
/// @op `huber_loss(x, t, reduction, δ)` | d = x − t: ½d² if |d| < δ, else δ(|d| − ½δ)
///   | dx = clamp(d, −δ, δ)·g′, dt = −dx | torch.nn.functional.huber_loss
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean, double delta = 1.0);

/// Smooth L1 loss, huber_loss(delta = beta) / beta; beta >= 0.
/// @op `smooth_l1_loss(x, t, reduction, β)` | ½d²/β if |d| < β, else |d| − ½β (β = 0: l1)
///   | dx = clamp(d/β, −1, 1)·g′, dt = −dx | torch.nn.functional.smooth_l1_loss
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);

/// Cross-entropy from unnormalised logits and class indices, with optional label smoothing
/// (0 <= label_smoothing <= 1) and ignore_index.
/// @op `cross_entropy(z, y, reduction, ε, ignore_index)` | per sample m + ln Σ eᶻ⁻ᵐ − (1 − ε)·z_y − (ε/C)·Σ z (0 if
///   ignored), m = max z; mean over the non-ignored | dz = (softmax(z) − (1 − ε)·onehot(y) − ε/C)·g′; none for y
///   | torch.nn.functional.cross_entropy
Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& target,
                     Reduction reduction = Reduction::Mean, double label_smoothing = 0.0,
                     std::int64_t ignore_index = -100);
/// Same, with the class indices in an int64 (or int32) tensor.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0, std::int64_t ignore_index = -100);

/// Negative log-likelihood of class indices given log-probabilities (e.g. from log_softmax).
/// @op `nll_loss(p, y, reduction, ignore_index)` | −p_y per sample; mean over the non-ignored
///   | dp = −g′ at (s, y_s), 0 elsewhere; none for y | torch.nn.functional.nll_loss
Tensor nll_loss(const Tensor& log_probs, const std::vector<std::int64_t>& target, Reduction reduction = Reduction::Mean,
                std::int64_t ignore_index = -100);
/// Same, with the class indices in an int64 (or int32) tensor.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                std::int64_t ignore_index = -100);

/// Binary cross-entropy on logits, stable for any |logits|: targets are probabilities in [0, 1]
/// (not checked, like torch). pos_weight (optional) weighs the positive term.
/// @op `binary_cross_entropy_with_logits(x, t, reduction, w)` | (1 − t)·x + (1 + (w − 1)t)·softplus(−x), stable; w
///   the pos_weight (1 without) | dx = ((1 + (w − 1)t)·σ(x) − w·t)·g′, dt = (−x + (w − 1)·softplus(−x))·g′,
///   dw = Σ t·softplus(−x)·g′ | torch.nn.functional.binary_cross_entropy_with_logits
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor());

}  // namespace xgrad
