#pragma once
// L-BFGS (torch::optim::LBFGS), with PyTorch 1.13's strong-Wolfe line search.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/std_function.hpp"
#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn {

/// Options of LBFGS (torch::optim::LBFGSOptions): lr 1, max_iter 20, max_eval max_iter * 5 / 4,
/// tolerance_grad 1e-7, tolerance_change 1e-9, history_size 100, no line search.
class LBFGSOptions {
 public:
  LBFGSOptions(double lr = 1);  // NOLINT(google-explicit-constructor)
  LBFGSOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  LBFGSOptions& max_iter(std::int64_t v) {
    max_iter_ = v;
    return *this;
  }
  LBFGSOptions& max_eval(std::optional<std::int64_t> v) {
    max_eval_ = v;
    return *this;
  }
  LBFGSOptions& tolerance_grad(double v) {
    tolerance_grad_ = v;
    return *this;
  }
  LBFGSOptions& tolerance_change(double v) {
    tolerance_change_ = v;
    return *this;
  }
  LBFGSOptions& history_size(std::int64_t v) {
    history_size_ = v;
    return *this;
  }
  /// "strong_wolfe" or std::nullopt (a fixed step of lr along the L-BFGS direction).
  LBFGSOptions& line_search_fn(std::optional<std::string> v) {
    line_search_fn_ = std::move(v);
    return *this;
  }
  double lr() const { return lr_; }
  std::int64_t max_iter() const { return max_iter_; }
  /// max_eval, or max_iter * 5 / 4 when unset (as torch; computed without overflow, and the int64
  /// maximum when the product does not fit).
  std::int64_t max_eval() const {
    if (max_eval_) return *max_eval_;
    const std::int64_t q = max_iter_ / 4, r = max_iter_ % 4;  // max_iter * 5 / 4 = 5q + 5r / 4
    if (q > (std::numeric_limits<std::int64_t>::max() - 4) / 5) return std::numeric_limits<std::int64_t>::max();
    return q * 5 + r * 5 / 4;
  }
  double tolerance_grad() const { return tolerance_grad_; }
  double tolerance_change() const { return tolerance_change_; }
  std::int64_t history_size() const { return history_size_; }
  const std::optional<std::string>& line_search_fn() const { return line_search_fn_; }

 private:
  double lr_;
  std::int64_t max_iter_ = 20;
  std::optional<std::int64_t> max_eval_;
  double tolerance_grad_ = 1e-7, tolerance_change_ = 1e-9;
  std::int64_t history_size_ = 100;
  std::optional<std::string> line_search_fn_;
};

/// L-BFGS (torch.optim.LBFGS of PyTorch 1.13, heavily inspired by minFunc). step(closure) runs up to
/// max_iter iterations: each builds the two-loop L-BFGS direction from the last history_size
/// (s, y) pairs (pairs with y.s <= 1e-10 are skipped), scales the initial inverse Hessian by
/// y.s / y.y, and moves along it by lr (the first iteration by min(1, 1/|g|_1) * lr), or by the
/// step a strong-Wolfe line search (c1 1e-4, c2 0.9, at most 25 evaluations, cubic interpolation)
/// finds. It stops early when max |g| <= tolerance_grad, the directional derivative is above
/// -tolerance_change, the step or the loss change is below tolerance_change, or max_eval
/// evaluations were made. The closure re-evaluates the model: it clears the gradients, computes
/// the loss, calls backward and returns the loss; it runs in grad mode and may be called several
/// times per step.
///
///   nn::LBFGS opt(model.parameters(), nn::LBFGSOptions(1).line_search_fn("strong_wolfe"));
///   auto closure = [&] { opt.zero_grad(); Tensor l = loss(model); l.backward(); return l; };
///   for (int i = 0; i < 10; ++i) opt.step(closure);
///
/// All parameters form one group (no per-group options, as in torch). The flat gradient and the
/// history are kept in float64 whatever the parameters' dtype (torch keeps the parameters' dtype):
/// float64 models follow torch's iterates to rounding; float32 ones may differ in the last bits.
/// State (func_evals, n_iter, the history) persists across step() calls and is in state_dict().
/// Errors: lr <= 0 or a tolerance < 0, max_iter < 1, max_eval < 1, history_size < 1, an unknown
/// line_search_fn, a closure that returns no one-element tensor, step() without a closure.
class LBFGS : public Optimizer {
 public:
  LBFGS(std::vector<Tensor> params, LBFGSOptions options = {});
  /// Not available: L-BFGS re-evaluates the model. Throws; use step(closure).
  void step() override;
  /// Up to max_iter L-BFGS iterations; returns the loss the first closure call computed.
  Tensor step(const std::function<Tensor()>& closure);
  const LBFGSOptions& options() const { return options_; }
  /// Closure calls over all step() calls, and iterations (torch's state['func_evals'], ['n_iter']).
  std::int64_t func_evals() const { return func_evals_; }
  std::int64_t n_iter() const { return n_iter_; }

  /// The group's lr and the L-BFGS state: "state.func_evals", "state.n_iter", "state.t",
  /// "state.H_diag", "state.prev_loss" (0-d float64), "state.d", "state.prev_flat_grad" (1-d),
  /// "state.old_dirs" / "state.old_stps" ((history, numel) float64) and "state.ro" ((history)).
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) override;

 protected:
  void fill_defaults(ParamGroup& g) const override;
  void validate(const ParamGroup& g, std::size_t index) const override;
  std::vector<std::string> option_names() const override { return {"lr"}; }
  std::array<const char*, 3> buffer_names() const override { return {nullptr, nullptr, nullptr}; }
  bool buffer_used(const ParamGroup&, int) const override { return false; }
  bool has_step() const override { return false; }

 private:
  using Vec = std::vector<double>;
  Vec gather_flat_grad() const;
  void add_grad(double step_size, const Vec& update);
  std::vector<Tensor> clone_params() const;
  void set_params(const std::vector<Tensor>& values);
  double evaluate(const std::function<Tensor()>& closure) const;
  std::int64_t numel() const;

  LBFGSOptions options_;
  // State across step() calls (torch's state of the first parameter).
  std::int64_t func_evals_ = 0, n_iter_ = 0;
  Vec d_, prev_flat_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  std::vector<Vec> old_dirs_, old_stps_;
  Vec ro_;
};

}  // namespace xgrad::nn
