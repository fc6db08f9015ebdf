#pragma once
// Learning-rate schedulers, mirroring torch.optim.lr_scheduler of PyTorch 1.13.
//
// Note [Scheduler parity]: like torch, a scheduler is constructed after its optimizer, performs an
// initial step at construction (last_epoch becomes 0) and is stepped once per epoch/iteration after
// optimizer.step(). Each step uses torch's recursive ("chainable") form, which updates the lr the
// optimizer holds, so the learning rates are the same doubles torch computes (not merely close):
// torch's closed forms round differently and are used only where torch uses them (SequentialLR
// switching to the next scheduler). The first scheduler on an optimizer records each group's lr as
// its initial_lr; every scheduler's base lrs are these initial lrs.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/nn/optim.hpp"

namespace xgrad::nn {

/// Base class. The optimizer must outlive the scheduler and keep its number of parameter groups.
class LRScheduler {
 public:
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and writes the new lr into every parameter group.
  virtual void step();
  /// The lr of group `group` set by the last step (or by construction).
  double get_last_lr(std::size_t group = 0) const;
  /// The lrs of all groups set by the last step.
  const std::vector<double>& get_last_lrs() const { return last_lr_; }
  /// Epochs stepped since construction (0 right after construction).
  std::int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() { return opt_; }

  /// The scheduler's state for checkpoints (torch's state_dict without the optimizer):
  /// "last_epoch", "step_count" (0-d float64), "base_lrs", "last_lr" (1-d float64, one per group);
  /// SequentialLR adds "schedulers.<k>.<name>" for each child. Save the optimizer's state too: the
  /// current lrs live there.
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Restores a state_dict() of the same kind of scheduler over the same number of groups. A
  /// missing, unknown or malformed entry throws xgrad::Error (nothing changes then).
  virtual void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 protected:
  LRScheduler(Optimizer& optimizer, std::string name);
  /// Performs torch's _initial_step (derived constructors call it last).
  void initial_step();
  /// The chainable form: new lrs from the current ones (torch's get_lr()).
  virtual std::vector<double> get_lr() = 0;
  /// The closed form at last_epoch (torch's _get_closed_form_lr()).
  virtual std::vector<double> closed_form_lr() = 0;
  /// torch's step(epoch): sets last_epoch and applies the closed form (used by SequentialLR).
  void step_to(std::int64_t epoch);
  /// The optimizer's current lrs, checking that its group count is unchanged.
  std::vector<double> group_lrs() const;
  void apply(const std::vector<double>& lrs);

  Optimizer& opt_;
  std::string name_;
  std::vector<double> base_lrs_;
  std::int64_t last_epoch_ = -1;
  std::int64_t step_count_ = 0;
  std::vector<double> last_lr_;
  friend class SequentialLR;
};

/// Multiplies the lr by gamma every step_size epochs: lr_e = base_lr * gamma^(e / step_size).
/// Errors: step_size < 1, gamma < 0 or not finite.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// Cosine annealing from base_lr to eta_min over T_max epochs (then back up, periodically, as torch):
///   lr_e = eta_min + (base_lr - eta_min) * (1 + cos(pi * e / T_max)) / 2
/// computed recursively from the previous lr like torch. Errors: T_max < 1, eta_min < 0 or not finite.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max,
                    double eta_min = 0.0);  // NOLINT(readability-identifier-naming)

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// Linear warmup: the lr factor goes linearly from start_factor to end_factor over total_iters
/// epochs, then stays at end_factor:
///   lr_e = base_lr * (start_factor + (end_factor - start_factor) * min(e, total_iters) / total_iters)
/// Errors: start_factor not in (0, 1] (torch allows 0 but then divides by zero), end_factor not in
/// [0, 1], total_iters < 1.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, std::int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

/// Runs schedulers one after another: schedulers[k] drives epochs [milestones[k-1], milestones[k]);
/// at a milestone the next scheduler restarts from its epoch 0 (closed form), like torch's
/// SequentialLR. Construct the children first (on the same optimizer), then this. Errors: no
/// schedulers, a child on another optimizer or itself a SequentialLR, milestones.size() !=
/// schedulers.size() - 1, milestones not increasing or < 1.
///
///   auto warmup = std::make_shared<nn::LinearLR>(opt, 0.1, 1.0, 5);
///   auto cosine = std::make_shared<nn::CosineAnnealingLR>(opt, 95);
///   nn::SequentialLR sched(opt, {warmup, cosine}, {5});
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) override;

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

/// Options of ReduceLROnPlateau (torch's keyword arguments and defaults).
struct ReduceLROnPlateauOptions {
  enum class Mode { min, max };           ///< whether the metric should fall (loss) or rise (accuracy)
  enum class ThresholdMode { rel, abs };  ///< what counts as an improvement (see ReduceLROnPlateau)
  Mode mode = Mode::min;
  double factor = 0.1;         ///< new lr = lr * factor; in [0, 1)
  std::int64_t patience = 10;  ///< epochs without improvement before a reduction; >= 0
  double threshold = 1e-4;     ///< >= 0
  ThresholdMode threshold_mode = ThresholdMode::rel;
  std::int64_t cooldown = 0;           ///< epochs to wait after a reduction; >= 0
  std::vector<double> min_lr = {0.0};  ///< one value for every group, or one per group; >= 0
  double eps = 1e-8;                   ///< a reduction smaller than eps is skipped; >= 0
};

/// Reduces the lr of every group by `factor` when a metric has stopped improving for more than
/// `patience` epochs, like torch.optim.lr_scheduler.ReduceLROnPlateau (1.13). step(metric) once per
/// epoch, after optimizer.step(), with the validation loss (mode min) or accuracy (mode max).
/// An improvement is metric < best * (1 - threshold) (min, rel), metric < best - threshold (min,
/// abs), metric > best * (1 + threshold) (max, rel) or metric > best + threshold (max, abs). After
/// patience + 1 epochs without one, lr = max(lr * factor, min_lr) in each group (unless that
/// changes it by less than eps), then `cooldown` epochs pass with bad epochs not counted. Not an
/// LRScheduler (it needs the metric), as in torch. Errors: an option out of range, min_lr of the
/// wrong length, a NaN metric.
class ReduceLROnPlateau {
 public:
  using Options = ReduceLROnPlateauOptions;
  explicit ReduceLROnPlateau(Optimizer& optimizer, Options options = {});
  /// One epoch with its metric; may lower the optimizer's learning rates.
  void step(double metric);
  /// The lr of group `group` after the last step (or the optimizer's lr before any step).
  double get_last_lr(std::size_t group = 0) const;
  const std::vector<double>& get_last_lrs() const { return last_lr_; }
  /// The best metric so far (+inf for min, -inf for max before any step).
  double best() const { return best_; }
  /// Epochs since the last improvement (reset to 0 by a reduction and during cooldown).
  std::int64_t num_bad_epochs() const { return num_bad_epochs_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  const Options& options() const { return options_; }

  /// "best", "num_bad_epochs", "cooldown_counter", "last_epoch" (0-d float64) and "last_lr".
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Restores a state_dict(); a missing, unknown or malformed entry throws (nothing changes then).
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  bool is_better(double a) const;
  Optimizer& opt_;
  Options options_;
  std::vector<double> min_lrs_;
  double best_;
  std::int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
  std::vector<double> last_lr_;
};

/// Linear warmup for warmup_iters epochs (from start_factor * lr) followed by cosine annealing to
/// eta_min over the remaining total_iters - warmup_iters epochs: SequentialLR(LinearLR, Cosine).
std::shared_ptr<SequentialLR> make_warmup_cosine(Optimizer& optimizer, std::int64_t warmup_iters,
                                                 std::int64_t total_iters, double start_factor = 0.1,
                                                 double eta_min = 0.0);

}  // namespace xgrad::nn
