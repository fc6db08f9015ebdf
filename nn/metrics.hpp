#pragma once
// Classification metrics: accuracy and the confusion matrix, from logits (or scores) and class
// indices, computed without recording a graph.
#include <cstdint>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn::metrics {

/// Predicted classes: the index of the largest score in each row of (n, C) scores (the first one
/// on ties, as torch.argmax). Errors: scores not 2-d, C = 0, a NaN score.
std::vector<std::int64_t> predict(const Tensor& scores);

/// The fraction of rows whose predicted class (predict(scores)) equals the target: (n, C) scores
/// and n class indices in [0, C). 0 rows give 0. Errors: n differs, a target out of range (or, for
/// a tensor of targets, not a whole number).
double accuracy(const Tensor& scores, const std::vector<std::int64_t>& targets);
double accuracy(const Tensor& scores, const Tensor& targets);

/// (C, C) counts, float64: entry [t, p] = rows with target t predicted as p (rows: truth, columns:
/// prediction, as sklearn's confusion_matrix). Errors as accuracy.
Tensor confusion_matrix(const Tensor& scores, const std::vector<std::int64_t>& targets);
Tensor confusion_matrix(const Tensor& scores, const Tensor& targets);

}  // namespace xgrad::nn::metrics
