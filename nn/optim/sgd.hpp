#pragma once
// SGD with momentum, weight decay and Nesterov (torch::optim::SGD); see Note [Optimizer parity]
// in optimizer.hpp.
#include <utility>
#include <vector>

#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// Options of SGD (torch::optim::SGDOptions). lr >= 0, momentum >= 0, weight_decay >= 0; nesterov
/// needs momentum > 0 and dampening == 0.
class SGDOptions {
 public:
  SGDOptions(double lr);  // NOLINT(google-explicit-constructor): SGD(params, 0.1) like torch
  SGDOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  SGDOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  SGDOptions& dampening(double v) {
    dampening_ = v;
    return *this;
  }
  SGDOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  SGDOptions& nesterov(bool v) {
    nesterov_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }

 private:
  double lr_;
  double momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
};

/// Stochastic gradient descent with momentum (torch.optim.SGD, _single_tensor_sgd):
///   d = g + weight_decay * p
///   buf = d (first step), buf = momentum * buf + (1 - dampening) * d (later steps)   [momentum != 0]
///   d = nesterov ? d + momentum * buf : buf                                          [momentum != 0]
///   p = p - lr * d
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  void step() override;
  const SGDOptions& defaults() const { return defaults_; }

 protected:
  void fill_defaults(ParamGroup& g) const override;
  void validate(const ParamGroup& g, std::size_t index) const override;
  std::vector<std::string> option_names() const override;
  std::array<const char*, 3> buffer_names() const override;
  bool buffer_used(const ParamGroup& g, int slot) const override;
  bool has_step() const override { return false; }

 private:
  SGDOptions defaults_;
};

}  // namespace xgrad::nn
