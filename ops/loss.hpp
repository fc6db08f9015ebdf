#pragma once
// Loss functions as ops (like torch::nn::functional): each one fused forward and backward kernel.
//
// Every loss takes a `Reduction` (torch's `reduction=`): None returns the per-element (or
// per-sample) losses l, Mean returns mean(l) as a 0-d tensor, Sum returns sum(l). For a per-element
// loss with n elements the gradient of Mean is (g/n) * dl, of Sum g * dl, of None g_i * dl_i.
//
// loss (arguments)                      l per element / sample, with d = x - t
//   dl/dinput; dl/dtarget
// mse_loss(x, t)                        d^2
//   2 d; -2 d
// l1_loss(x, t)                         |d|
//   sign(d) (0 at d = 0); -sign(d)
// huber_loss(x, t, delta)               0.5 d^2 if |d| < delta, else delta (|d| - 0.5 delta)
//   d clamped to [-delta, delta]; minus that
// smooth_l1_loss(x, t, beta)            0.5 d^2 / beta if |d| < beta, else |d| - 0.5 beta (beta = 0: l1)
//   d / beta clamped to [-1, 1]; minus that
// cross_entropy(z, y, eps)              lse(z) - (1 - eps) z_y - (eps / C) sum_c z_c
//   softmax(z) - (1 - eps) onehot(y) - eps / C; none (class indices)
// nll_loss(p, y)                        -p_y
//   -onehot(y); none (class indices)
// binary_cross_entropy_with_logits(x, t, pos_weight w)
//                                       (1 - t) x + (1 + (w - 1) t) softplus(-x)
//   (1 + (w - 1) t) sigmoid(x) - w t; -x + (w - 1) softplus(-x); dl/dw = t softplus(-x)
//
// lse(z) = m + log sum exp(z - m) with m = max z, and softplus(-x) = max(-x, 0) + log1p(exp(-|x|)),
// so logits of +-1e3 neither overflow nor lose the loss (torch computes the same expressions).
// Without pos_weight (w = 1) the BCE loss is max(x, 0) - x t + log1p(exp(-|x|)) and its input
// gradient sigmoid(x) - t. pos_weight gets a gradient too: dl/dw = t softplus(-x), summed over the
// elements it was broadcast to (torch 1.13 refuses to differentiate pos_weight; ours is gradchecked).
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

/// Mean squared error: l = (input - target)^2.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Mean absolute error: l = |input - target|; gradient sign(input - target), 0 where equal.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Huber loss (torch.nn.functional.huber_loss): quadratic for |d| < delta, linear beyond. delta > 0.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean, double delta = 1.0);

/// Smooth L1 loss (torch.nn.functional.smooth_l1_loss) = huber_loss(delta = beta) / beta; beta >= 0,
/// beta = 0 is l1_loss.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);

/// Cross-entropy from unnormalised logits and class indices, with optional label smoothing
/// (0 <= label_smoothing <= 1) and ignore_index. Mean divides by the number of non-ignored samples.
Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& target,
                     Reduction reduction = Reduction::Mean, double label_smoothing = 0.0,
                     std::int64_t ignore_index = -100);
/// Same, with the class indices in an int64 (or int32) tensor.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0, std::int64_t ignore_index = -100);

/// Negative log-likelihood of class indices given log-probabilities (e.g. from log_softmax).
Tensor nll_loss(const Tensor& log_probs, const std::vector<std::int64_t>& target, Reduction reduction = Reduction::Mean,
                std::int64_t ignore_index = -100);
/// Same, with the class indices in an int64 (or int32) tensor.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                std::int64_t ignore_index = -100);

/// Binary cross-entropy on logits, stable for any |logits|: targets are probabilities in [0, 1]
/// (not checked, like torch). pos_weight (optional) weighs the positive term.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor());

}  // namespace xgrad
