#pragma once
// Adam and AdamW (torch::optim::Adam, torch::optim::AdamW); see Note [Optimizer parity] in
// optimizer.hpp.
#include <utility>
#include <vector>

#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// Options of Adam (torch::optim::AdamOptions): lr 1e-3, betas (0.9, 0.999), eps 1e-8,
/// weight_decay 0, amsgrad false. lr, eps, weight_decay >= 0; betas in [0, 1).
class AdamOptions {
 public:
  AdamOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor)
  AdamOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdamOptions& betas(std::pair<double, double> v) {
    betas_ = v;
    return *this;
  }
  AdamOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdamOptions& amsgrad(bool v) {
    amsgrad_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  std::pair<double, double> betas() const { return betas_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  bool amsgrad() const { return amsgrad_; }

 protected:
  double lr_;
  std::pair<double, double> betas_{0.9, 0.999};
  double eps_ = 1e-8, weight_decay_ = 0;
  bool amsgrad_ = false;
};

/// Options of AdamW: as Adam's, but weight_decay defaults to 1e-2.
class AdamWOptions : public AdamOptions {
 public:
  AdamWOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor)
  AdamWOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdamWOptions& betas(std::pair<double, double> v) {
    betas_ = v;
    return *this;
  }
  AdamWOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamWOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdamWOptions& amsgrad(bool v) {
    amsgrad_ = v;
    return *this;
  }
  using AdamOptions::amsgrad;
  using AdamOptions::betas;
  using AdamOptions::eps;
  using AdamOptions::lr;
  using AdamOptions::weight_decay;
};

/// Adam (torch.optim.Adam, _single_tensor_adam), per parameter with its own step count t:
///   g = g + weight_decay * p
///   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
///   vmax = max(vmax, v)                                                     [amsgrad; v := vmax]
///   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  void step() override;
  const AdamOptions& defaults() const { return defaults_; }

 protected:
  Adam(std::string name, AdamOptions options);
  void fill_defaults(ParamGroup& g) const override;
  void validate(const ParamGroup& g, std::size_t index) const override;
  std::vector<std::string> option_names() const override;
  std::array<const char*, 3> buffer_names() const override;
  bool buffer_used(const ParamGroup& g, int slot) const override;
  /// Adam (decoupled = false) or AdamW (decoupled = true).
  void adam_step(bool decoupled);

 private:
  AdamOptions defaults_;
};

/// AdamW (torch.optim.AdamW, _single_tensor_adamw): decoupled weight decay,
///   p = p * (1 - lr * weight_decay), then Adam's update without weight decay in the gradient.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  void step() override;
};

}  // namespace xgrad::nn
