#pragma once
// The optimizer base class and parameter groups, mirroring torch::optim::Optimizer of PyTorch 1.13.
// Each optimizer has its own file next to this one (sgd, adam, rmsprop; clip_grad for gradient
// clipping), as in libtorch's torch/optim/; <xgrad/nn/optim.hpp> includes them all.
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
  std::optional<double> momentum = std::nullopt;                   // SGD, RMSprop
  std::optional<double> dampening = std::nullopt;                  // SGD
  std::optional<bool> nesterov = std::nullopt;                     // SGD
  std::optional<std::pair<double, double>> betas = std::nullopt;   // Adam, AdamW
  std::optional<double> eps = std::nullopt;                        // Adam, AdamW, RMSprop, Adagrad
  std::optional<bool> amsgrad = std::nullopt;                      // Adam, AdamW
  std::optional<double> alpha = std::nullopt;                      // RMSprop
  std::optional<bool> centered = std::nullopt;                     // RMSprop
  std::optional<double> lr_decay = std::nullopt;                   // Adagrad
  std::optional<double> initial_accumulator_value = std::nullopt;  // Adagrad
  std::optional<double> initial_lr = std::nullopt;                 // set by the first LR scheduler (base_lrs)
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

  /// Adds a group; its unset options take the defaults. Errors (naming the optimizer): an undefined,
  /// non-leaf or not floating point tensor, a tensor already in this or another group, an option
  /// the optimizer does not have, an invalid option value.
  void add_param_group(ParamGroup group);

  /// The learning rate of group `group`.
  double lr(std::size_t group = 0) const;
  /// Sets the learning rate of every group.
  void set_lr(double lr);
  /// Sets the learning rate of one group.
  void set_lr(std::size_t group, double lr);

  /// "SGD", "Adam", "AdamW", "RMSprop" or "Adagrad".
  const std::string& name() const { return name_; }

  /// The state tensors of parameter p shaped like p (momentum, Adam's moments, ...): handles that share
  /// the state's storage, so writing them writes the state. Empty when p has no state yet. For code that
  /// moves a parameter's entries in place: nn::Sparsifier remaps them with the blocks of a weight whose
  /// structure changed.
  std::vector<Tensor> state_buffers(const Tensor& p) const;

  /// The optimizer's state as named tensors (copies), for checkpoints:
  ///   "param_groups.<g>.num_params"            0-d float64, the group's parameter count
  ///   "param_groups.<g>.<option>"              0-d float64 per option (bools as 0/1; betas as
  ///                                            beta1, beta2; initial_lr when a scheduler set it)
  ///   "state.<g>.<i>.step"                     0-d float64 (Adam, AdamW, RMSprop), for each
  ///                                            parameter i of group g that has state
  ///   "state.<g>.<i>.<buffer>"                 the parameter's shape and dtype: momentum_buffer
  ///                                            (SGD, RMSprop), exp_avg, exp_avg_sq, max_exp_avg_sq
  ///                                            (Adam, AdamW), square_avg, grad_avg (RMSprop),
  ///                                            sum (Adagrad)
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
  ParamState& state_of(const Tensor& p);
  /// Throws unless p's gradient has p's shape and dtype; returns it.
  Tensor checked_grad(const Tensor& p) const;
  /// A zero buffer shaped like p, or the existing one.
  static Tensor& ensure_buffer(Tensor& slot, const Tensor& p);

  std::string name_;
  std::vector<ParamGroup> groups_;
  struct States;  // the map from parameter to ParamState (out of the header: docs/design.md, "Compile time")
  std::unique_ptr<States> state_;
};

}  // namespace xgrad::nn
