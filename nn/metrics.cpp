#include "xgrad/nn/metrics.hpp"

#include <cmath>

#include "xgrad/core/error.hpp"

namespace xgrad::nn::metrics {

namespace {
std::vector<std::int64_t> targets_of(const Tensor& t, const char* op) {
  XGRAD_CHECK(t.defined() && t.dim() == 1, "{}: argument 'targets' must be a 1-d tensor of class indices, got {}", op,
              t.defined() ? shape_str(t.shape()) : std::string("undefined"));
  std::vector<std::int64_t> out;
  for (double v : t.to_vector()) {
    XGRAD_CHECK(v == std::floor(v) && std::abs(v) < 9.0e15, "{}: argument 'targets' holds {}, not a class index", op,
                v);
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

std::vector<std::int64_t> checked_predictions(const Tensor& scores, const std::vector<std::int64_t>& targets,
                                              const char* op) {
  std::vector<std::int64_t> pred = predict(scores);
  XGRAD_CHECK(pred.size() == targets.size(), "{}: {} rows of scores {} but {} targets", op, pred.size(),
              shape_str(scores.shape()), targets.size());
  const std::int64_t C = scores.size(1);
  for (std::size_t i = 0; i < targets.size(); ++i)
    XGRAD_CHECK(targets[i] >= 0 && targets[i] < C, "{}: target {} at row {} is not a class in [0, {})", op, targets[i],
                i, C);
  return pred;
}
}  // namespace

std::vector<std::int64_t> predict(const Tensor& scores) {
  XGRAD_CHECK(scores.defined() && scores.dim() == 2, "predict: argument 'scores' must be (n, C), got {}",
              scores.defined() ? shape_str(scores.shape()) : std::string("undefined"));
  const std::int64_t n = scores.size(0), C = scores.size(1);
  XGRAD_CHECK(C > 0 || n == 0, "predict: argument 'scores' has no classes (shape {})", shape_str(scores.shape()));
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  const std::vector<double> s = scores.to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const double* row = s.data() + i * C;
    std::int64_t best = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      XGRAD_CHECK(!std::isnan(row[c]), "predict: argument 'scores' is NaN at [{}, {}]", i, c);
      if (row[c] > row[best]) best = c;
    }
    out[static_cast<std::size_t>(i)] = best;
  }
  return out;
}

double accuracy(const Tensor& scores, const std::vector<std::int64_t>& targets) {
  const auto pred = checked_predictions(scores, targets, "accuracy");
  if (pred.empty()) return 0;
  std::int64_t right = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) right += pred[i] == targets[i];
  return static_cast<double>(right) / static_cast<double>(pred.size());
}

double accuracy(const Tensor& scores, const Tensor& targets) {
  return accuracy(scores, targets_of(targets, "accuracy"));
}

Tensor confusion_matrix(const Tensor& scores, const std::vector<std::int64_t>& targets) {
  const auto pred = checked_predictions(scores, targets, "confusion_matrix");
  const std::int64_t C = scores.size(1);
  Tensor m = Tensor::zeros({C, C}, kFloat64);
  double* p = m.data<double>();
  for (std::size_t i = 0; i < pred.size(); ++i) p[targets[i] * C + pred[i]] += 1;
  return m;
}

Tensor confusion_matrix(const Tensor& scores, const Tensor& targets) {
  return confusion_matrix(scores, targets_of(targets, "confusion_matrix"));
}

}  // namespace xgrad::nn::metrics
