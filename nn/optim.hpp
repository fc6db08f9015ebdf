#pragma once
// Optimizers (SGD, Adam, AdamW, RMSprop) and gradient clipping, mirroring torch::optim and
// torch.nn.utils.clip_grad_norm_ of PyTorch 1.13.
//
// Note [Optimizer parity]: each step() replays the order of operations of PyTorch 1.13's
// single-tensor (foreach=False) update, element by element in one fused loop per parameter, in the
// parameter's own dtype with the per-step scalars (bias corrections, step sizes) computed in double
// exactly as torch computes them in Python. In float64 the results agree with torch to rounding
// (tests/nn/test_optim.cpp checks rtol 1e-12 over 20 steps). The loops are elementwise, split with
// parallel_for above kParallelGrain elements, so the result does not depend on the thread count.
//
// Updates run under NoGradGuard, write the parameter's storage in place and bump its version
// counter (a graph that saved the parameter before the step refuses to run backward after it, as in
// PyTorch). Parameters whose .grad is undefined are skipped: no update, no state, no step count.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn {

/// A list of parameters with optional per-group option overrides (like a torch param-group dict).
/// Unset options take the optimizer's defaults when the group is added; after that every option the
/// optimizer uses is set, so `opt.param_groups()[g].lr` can be read and changed between steps.
/// Setting an option the optimizer does not have (e.g. `betas` for SGD) is an error.
///
///   nn::SGD opt({nn::ParamGroup{{w1, b1}}, nn::ParamGroup{.params = {w2}, .lr = 0.01}},
///               nn::SGDOptions(0.1).momentum(0.9));
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> momentum = std::nullopt;                  // SGD, RMSprop
  std::optional<double> dampening = std::nullopt;                 // SGD
  std::optional<bool> nesterov = std::nullopt;                    // SGD
  std::optional<std::pair<double, double>> betas = std::nullopt;  // Adam, AdamW
  std::optional<double> eps = std::nullopt;                       // Adam, AdamW, RMSprop
  std::optional<bool> amsgrad = std::nullopt;                     // Adam, AdamW
  std::optional<double> alpha = std::nullopt;                     // RMSprop
  std::optional<bool> centered = std::nullopt;                    // RMSprop
  std::optional<double> initial_lr = std::nullopt;                // set by the first LR scheduler (base_lrs)
};

/// Base class of the optimizers. Not copyable; parameters are held by handle (shared storage).
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (torch's step() without closure).
  virtual void step() = 0;

  /// Clears the gradients of every parameter. With set_to_none=false (PyTorch 1.13's default) a
  /// defined gradient is filled with zeros in place (a gradient that itself requires grad is replaced
  /// by a fresh zero tensor, torch detaches it); with set_to_none=true gradients become undefined,
  /// so the next step() skips parameters that receive no gradient.
  void zero_grad(bool set_to_none = false);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  /// Adds a group; its unset options take the defaults. Errors (naming the optimizer): an undefined
  /// or non-leaf tensor, a tensor already in this or another group, an option the optimizer does
  /// not have, an invalid option value.
  void add_param_group(ParamGroup group);

  /// The learning rate of group `group`.
  double lr(std::size_t group = 0) const;
  /// Sets the learning rate of every group.
  void set_lr(double lr);
  /// Sets the learning rate of one group.
  void set_lr(std::size_t group, double lr);

  /// "SGD", "Adam", "AdamW" or "RMSprop".
  const std::string& name() const { return name_; }

  /// The optimizer's state as named tensors (copies), for checkpoints:
  ///   "param_groups.<g>.num_params"            0-d float64, the group's parameter count
  ///   "param_groups.<g>.<option>"              0-d float64 per option (bools as 0/1; betas as
  ///                                            beta1, beta2; initial_lr when a scheduler set it)
  ///   "state.<g>.<i>.step"                     0-d float64 (Adam, AdamW, RMSprop), for each
  ///                                            parameter i of group g that has state
  ///   "state.<g>.<i>.<buffer>"                 the parameter's shape and dtype: momentum_buffer
  ///                                            (SGD, RMSprop), exp_avg, exp_avg_sq, max_exp_avg_sq
  ///                                            (Adam, AdamW), square_avg, grad_avg (RMSprop)
  /// Parameters are identified by position, like torch's state_dict.
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const;

  /// Restores options and state saved by state_dict() of an optimizer of the same kind over
  /// parameters of the same groups, shapes and dtypes. Everything is validated before anything
  /// changes: an unknown, missing or duplicate name, a group or parameter count that differs, a
  /// tensor whose shape or dtype differs from its parameter, a non-integer step, a parameter with
  /// partial state, or an invalid option value throws xgrad::Error naming the optimizer and entry.
  virtual void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 protected:
  explicit Optimizer(std::string name);

  /// Per-parameter state: the step count and up to three buffers whose names buffer_names() gives.
  struct ParamState {
    std::int64_t step = 0;
    std::array<Tensor, 3> buffers;
  };

  /// Adds the constructor's groups (errors when there are no parameters at all).
  void init_groups(std::vector<ParamGroup> groups);
  /// Fills unset options of `g` from the defaults, rejects options this optimizer does not have.
  virtual void fill_defaults(ParamGroup& g) const = 0;
  /// Throws when an option of a filled group is invalid (lr < 0, ...).
  virtual void validate(const ParamGroup& g, std::size_t index) const = 0;
  /// Names of the options saved in state_dict, in order.
  virtual std::vector<std::string> option_names() const = 0;
  /// Names of the three buffer slots (nullptr: unused slot).
  virtual std::array<const char*, 3> buffer_names() const = 0;
  /// Whether buffer slot `slot` is part of a parameter's state under group options `g`.
  virtual bool buffer_used(const ParamGroup& g, int slot) const = 0;
  /// Whether the state has a step count.
  virtual bool has_step() const { return true; }

  /// The state of parameter p (created empty on first use).
  ParamState& state_of(const Tensor& p) { return state_[p.impl()]; }
  /// Throws unless p's gradient has p's shape and dtype; returns it.
  Tensor checked_grad(const Tensor& p) const;
  /// A zero buffer shaped like p, or the existing one.
  static Tensor& ensure_buffer(Tensor& slot, const Tensor& p);

  std::string name_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<std::shared_ptr<TensorImpl>, ParamState> state_;
};

// ---- SGD ----------------------------------------------------------------------------------------

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

// ---- Adam / AdamW -------------------------------------------------------------------------------

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

// ---- RMSprop ------------------------------------------------------------------------------------

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

// ---- gradient clipping --------------------------------------------------------------------------

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
