#pragma once
// RMSprop (torch::optim::RMSprop); see Note [Optimizer parity] in optimizer.hpp.
#include <utility>
#include <vector>

#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// Options of RMSprop (torch::optim::RMSpropOptions): lr 1e-2, alpha 0.99, eps 1e-8,
/// weight_decay 0, momentum 0, centered false. All >= 0.
class RMSpropOptions {
 public:
  RMSpropOptions(double lr = 1e-2);  // NOLINT(google-explicit-constructor)
  RMSpropOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  RMSpropOptions& alpha(double v) {
    alpha_ = v;
    return *this;
  }
  RMSpropOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  RMSpropOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  RMSpropOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  RMSpropOptions& centered(bool v) {
    centered_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  double alpha() const { return alpha_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  double momentum() const { return momentum_; }
  bool centered() const { return centered_; }

 private:
  double lr_;
  double alpha_ = 0.99, eps_ = 1e-8, weight_decay_ = 0, momentum_ = 0;
  bool centered_ = false;
};

/// RMSprop (torch.optim.RMSprop, _single_tensor_rmsprop):
///   g = g + weight_decay * p
///   s = alpha * s + (1 - alpha) * g * g
///   avg = sqrt(s - a * a) + eps with a = alpha * a + (1 - alpha) * g   [centered]
///   avg = sqrt(s) + eps                                                [otherwise]
///   buf = momentum * buf + g / avg; p = p - lr * buf                   [momentum > 0]
///   p = p - lr * g / avg                                               [otherwise]
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options = {});
  void step() override;
  const RMSpropOptions& defaults() const { return defaults_; }

 protected:
  void fill_defaults(ParamGroup& g) const override;
  void validate(const ParamGroup& g, std::size_t index) const override;
  std::vector<std::string> option_names() const override;
  std::array<const char*, 3> buffer_names() const override;
  bool buffer_used(const ParamGroup& g, int slot) const override;

 private:
  RMSpropOptions defaults_;
};

}  // namespace xgrad::nn
