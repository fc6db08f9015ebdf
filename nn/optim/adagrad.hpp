#pragma once
// Adagrad (torch::optim::Adagrad); see Note [Optimizer parity] in optimizer.hpp.
#include <utility>
#include <vector>

#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// Options of Adagrad (torch::optim::AdagradOptions): lr 1e-2, lr_decay 0, weight_decay 0,
/// initial_accumulator_value 0, eps 1e-10. All >= 0.
class AdagradOptions {
 public:
  AdagradOptions(double lr = 1e-2);  // NOLINT(google-explicit-constructor)
  AdagradOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdagradOptions& lr_decay(double v) {
    lr_decay_ = v;
    return *this;
  }
  AdagradOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdagradOptions& initial_accumulator_value(double v) {
    initial_accumulator_value_ = v;
    return *this;
  }
  AdagradOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  double lr_decay() const { return lr_decay_; }
  double weight_decay() const { return weight_decay_; }
  double initial_accumulator_value() const { return initial_accumulator_value_; }
  double eps() const { return eps_; }

 private:
  double lr_;
  double lr_decay_ = 0, weight_decay_ = 0, initial_accumulator_value_ = 0, eps_ = 1e-10;
};

/// Adagrad (torch.optim.Adagrad, _single_tensor_adagrad), per parameter with its own step count t:
///   g = g + weight_decay * p
///   clr = lr / (1 + (t - 1) * lr_decay)
///   sum = sum + g * g                      (sum starts at initial_accumulator_value)
///   p = p - clr * g / (sqrt(sum) + eps)
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions options = {});
  void step() override;
  const AdagradOptions& defaults() const { return defaults_; }

 protected:
  void fill_defaults(ParamGroup& g) const override;
  void validate(const ParamGroup& g, std::size_t index) const override;
  std::vector<std::string> option_names() const override;
  std::array<const char*, 3> buffer_names() const override;
  bool buffer_used(const ParamGroup& g, int slot) const override;

 private:
  AdagradOptions defaults_;
};

}  // namespace xgrad::nn
