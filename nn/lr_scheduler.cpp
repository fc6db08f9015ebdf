// Note [Scheduler parity]: the formulas below are torch 1.13's Python expressions with the same
// evaluation order. Python never fuses a*b+c into one rounding, so floating-point contraction is
// turned off for this file (the project builds with -march=x86-64-v3, which has FMA).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "xgrad/nn/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <string>

#include "xgrad/core/error.hpp"

namespace xgrad::nn {

// ---- LRScheduler --------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name) : opt_(optimizer), name_(std::move(name)) {
  for (auto& g : opt_.param_groups()) {
    if (!g.initial_lr) g.initial_lr = *g.lr;  // group.setdefault('initial_lr', group['lr'])
    base_lrs_.push_back(*g.initial_lr);
  }
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

std::vector<double> LRScheduler::group_lrs() const {
  const auto& groups = opt_.param_groups();
  XGRAD_CHECK(groups.size() == base_lrs_.size(),
              "{}: the optimizer has {} parameter groups, but had {} when the scheduler was made", name_, groups.size(),
              base_lrs_.size());
  std::vector<double> lrs;
  lrs.reserve(groups.size());
  for (const auto& g : groups) lrs.push_back(*g.lr);
  return lrs;
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  for (std::size_t g = 0; g < lrs.size(); ++g) opt_.set_lr(g, lrs[g]);
  last_lr_ = group_lrs();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(std::int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  apply(closed_form_lr());
}

double LRScheduler::get_last_lr(std::size_t group) const {
  XGRAD_CHECK(group < last_lr_.size(), "{}: get_last_lr: group index {} out of range ({} groups)", name_, group,
              last_lr_.size());
  return last_lr_[group];
}

std::vector<std::pair<std::string, Tensor>> LRScheduler::state_dict() const {
  const auto n = static_cast<std::int64_t>(base_lrs_.size());
  return {{"last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), kFloat64)},
          {"step_count", Tensor::scalar(static_cast<double>(step_count_), kFloat64)},
          {"base_lrs", Tensor::from_vector(base_lrs_, {n}, kFloat64)},
          {"last_lr", Tensor::from_vector(last_lr_, {static_cast<std::int64_t>(last_lr_.size())}, kFloat64)}};
}

void LRScheduler::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const std::string who = name_ + ": load_state_dict";
  std::optional<double> last_epoch, step_count;
  std::optional<std::vector<double>> base_lrs, last_lr;
  auto integer = [&](const std::string& key, const Tensor& t) {
    XGRAD_CHECK(t.numel() == 1, "{}: entry '{}' must have one element, got shape {}", who, key, shape_str(t.shape()));
    const double v = t.item();
    XGRAD_CHECK(v >= -1 && v == std::floor(v) && v < 9.0e15, "{}: entry '{}' must be an integer >= -1, got {}", who,
                key, v);
    return v;
  };
  auto per_group = [&](const std::string& key, const Tensor& t) {
    XGRAD_CHECK(t.shape() == Shape{static_cast<std::int64_t>(base_lrs_.size())},
                "{}: entry '{}' must have shape ({}), one value per parameter group, got {}", who, key,
                base_lrs_.size(), shape_str(t.shape()));
    return t.to_vector();
  };
  for (const auto& [key, t] : state) {
    XGRAD_CHECK(t.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    if (key == "last_epoch" && !last_epoch)
      last_epoch = integer(key, t);
    else if (key == "step_count" && !step_count)
      step_count = integer(key, t);
    else if (key == "base_lrs" && !base_lrs)
      base_lrs = per_group(key, t);
    else if (key == "last_lr" && !last_lr)
      last_lr = per_group(key, t);
    else
      XGRAD_CHECK(false, "{}: unknown or repeated entry '{}'", who, key);
  }
  XGRAD_CHECK(last_epoch && step_count && base_lrs && last_lr,
              "{}: missing entry (needs last_epoch, step_count, base_lrs and last_lr)", who);
  last_epoch_ = static_cast<std::int64_t>(*last_epoch);
  step_count_ = static_cast<std::int64_t>(*step_count);
  base_lrs_ = *base_lrs;
  last_lr_ = *last_lr;
}

// ---- StepLR -------------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  XGRAD_CHECK(step_size >= 1, "StepLR: argument 'step_size' must be >= 1, got {}", step_size);
  XGRAD_CHECK(gamma >= 0 && std::isfinite(gamma), "StepLR: argument 'gamma' must be finite and >= 0, got {}", gamma);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

// ---- CosineAnnealingLR --------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)  // NOLINT
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  XGRAD_CHECK(T_max >= 1, "CosineAnnealingLR: argument 'T_max' must be >= 1, got {}", T_max);
  XGRAD_CHECK(eta_min >= 0 && std::isfinite(eta_min),
              "CosineAnnealingLR: argument 'eta_min' must be finite and >= 0, got {}", eta_min);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  constexpr double pi = std::numbers::pi;
  std::vector<double> lrs = group_lrs();
  const auto e = static_cast<double>(last_epoch_);
  const auto t = static_cast<double>(t_max_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (std::size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = eta_min_ + (base_lrs_[g] - eta_min_) * (1 + std::cos(e * pi / t)) / 2;
    return lrs;
  }
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
    for (std::size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / t)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() {
  constexpr double pi = std::numbers::pi;
  const auto e = static_cast<double>(last_epoch_);
  const auto t = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(pi * e / t)) / 2);
  return lrs;
}

// ---- LinearLR -----------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  XGRAD_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: argument 'start_factor' must be in (0, 1], got {}",
              start_factor);
  XGRAD_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: argument 'end_factor' must be in [0, 1], got {}",
              end_factor);
  XGRAD_CHECK(total_iters >= 1, "LinearLR: argument 'total_iters' must be >= 1, got {}", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double diff = end_factor_ - start_factor_;
  const double denom = static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(last_epoch_ - 1) * diff;
  for (double& lr : lrs) lr = lr * (1. + diff / denom);
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() {
  const double diff = end_factor_ - start_factor_;
  const auto m = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * (start_factor_ + diff * m / static_cast<double>(total_iters_)));
  return lrs;
}

// ---- SequentialLR -------------------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  XGRAD_CHECK(!schedulers_.empty(), "SequentialLR: argument 'schedulers' is empty");
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    XGRAD_CHECK(schedulers_[i] != nullptr, "SequentialLR: scheduler {} is null", i);
    XGRAD_CHECK(&schedulers_[i]->opt_ == &opt_,
                "SequentialLR: scheduler {} ({}) belongs to a different optimizer than the one passed in", i,
                schedulers_[i]->name_);
    XGRAD_CHECK(dynamic_cast<SequentialLR*>(schedulers_[i].get()) == nullptr,
                "SequentialLR: scheduler {} is itself a SequentialLR, which cannot be nested", i);
  }
  XGRAD_CHECK(milestones_.size() + 1 == schedulers_.size(),
              "SequentialLR: expects one milestone fewer than schedulers, got {} schedulers and {} milestones",
              schedulers_.size(), milestones_.size());
  for (std::size_t i = 0; i < milestones_.size(); ++i)
    XGRAD_CHECK(milestones_[i] >= 1 && (i == 0 || milestones_[i] > milestones_[i - 1]),
                "SequentialLR: milestones must be increasing and >= 1, got {}", milestones_);
  last_epoch_ = 0;
  // Reset the lrs the children's initial steps changed, undo those steps, and redo the first one.
  for (auto& g : opt_.param_groups()) g.lr = *g.initial_lr;
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->last_lr_;
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto idx = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                            milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    s.step_to(0);
  else
    s.step();
  last_lr_ = s.last_lr_;
}

std::vector<std::pair<std::string, Tensor>> SequentialLR::state_dict() const {
  auto out = LRScheduler::state_dict();
  for (std::size_t k = 0; k < schedulers_.size(); ++k)
    for (auto& [key, t] : schedulers_[k]->state_dict()) out.emplace_back(fmt::format("schedulers.{}.{}", k, key), t);
  return out;
}

void SequentialLR::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> own;
  std::vector<std::vector<std::pair<std::string, Tensor>>> children(schedulers_.size());
  for (const auto& [key, t] : state) {
    if (key.rfind("schedulers.", 0) == 0) {
      const std::size_t dot = key.find('.', 11);
      std::size_t k = schedulers_.size();
      const std::string idx = key.substr(11, dot == std::string::npos ? std::string::npos : dot - 11);
      if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos && idx.size() < 9)
        k = static_cast<std::size_t>(std::stoul(idx));
      XGRAD_CHECK(dot != std::string::npos && k < schedulers_.size(),
                  "SequentialLR: load_state_dict: entry '{}' does not name one of the {} schedulers", key,
                  schedulers_.size());
      children[k].emplace_back(key.substr(dot + 1), t);
    } else {
      own.emplace_back(key, t);
    }
  }
  // Validate every part on copies of the current states first, so that a bad entry changes nothing.
  const auto saved_own = LRScheduler::state_dict();
  std::vector<std::vector<std::pair<std::string, Tensor>>> saved_children;
  for (const auto& s : schedulers_) saved_children.push_back(s->state_dict());
  try {
    LRScheduler::load_state_dict(own);
    for (std::size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->load_state_dict(children[k]);
  } catch (...) {
    LRScheduler::load_state_dict(saved_own);
    for (std::size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->load_state_dict(saved_children[k]);
    throw;
  }
}

// SequentialLR delegates every step to its children.
std::vector<double> SequentialLR::get_lr() { return group_lrs(); }
std::vector<double> SequentialLR::closed_form_lr() { return group_lrs(); }

std::shared_ptr<SequentialLR> make_warmup_cosine(Optimizer& optimizer, std::int64_t warmup_iters,
                                                 std::int64_t total_iters, double start_factor, double eta_min) {
  XGRAD_CHECK(warmup_iters >= 1 && total_iters > warmup_iters,
              "make_warmup_cosine: needs 1 <= warmup_iters < total_iters, got warmup_iters {} and total_iters {}",
              warmup_iters, total_iters);
  auto warmup = std::make_shared<LinearLR>(optimizer, start_factor, 1.0, warmup_iters);
  auto cosine = std::make_shared<CosineAnnealingLR>(optimizer, total_iters - warmup_iters, eta_min);
  return std::make_shared<SequentialLR>(optimizer, std::vector<std::shared_ptr<LRScheduler>>{warmup, cosine},
                                        std::vector<std::int64_t>{warmup_iters});
}

// ---- ReduceLROnPlateau --------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, Options options)
    : opt_(optimizer), options_(std::move(options)) {
  const Options& o = options_;
  XGRAD_CHECK(o.factor >= 0 && o.factor < 1, "ReduceLROnPlateau: argument 'factor' must be in [0, 1), got {}",
              o.factor);
  XGRAD_CHECK(o.patience >= 0, "ReduceLROnPlateau: argument 'patience' must be >= 0, got {}", o.patience);
  XGRAD_CHECK(o.threshold >= 0 && std::isfinite(o.threshold),
              "ReduceLROnPlateau: argument 'threshold' must be finite and >= 0, got {}", o.threshold);
  XGRAD_CHECK(o.cooldown >= 0, "ReduceLROnPlateau: argument 'cooldown' must be >= 0, got {}", o.cooldown);
  XGRAD_CHECK(o.eps >= 0, "ReduceLROnPlateau: argument 'eps' must be >= 0, got {}", o.eps);
  const std::size_t groups = opt_.param_groups().size();
  XGRAD_CHECK(o.min_lr.size() == 1 || o.min_lr.size() == groups,
              "ReduceLROnPlateau: argument 'min_lr' has {} values; give one, or one per parameter group ({})",
              o.min_lr.size(), groups);
  for (double m : o.min_lr) XGRAD_CHECK(m >= 0, "ReduceLROnPlateau: argument 'min_lr' must be >= 0, got {}", m);
  min_lrs_ = o.min_lr.size() == 1 ? std::vector<double>(groups, o.min_lr[0]) : o.min_lr;
  best_ =
      o.mode == Options::Mode::min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  for (const auto& g : opt_.param_groups()) last_lr_.push_back(*g.lr);
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = options_.threshold_mode == Options::ThresholdMode::rel;
  if (options_.mode == Options::Mode::min)
    return rel ? a < best_ * (1. - options_.threshold) : a < best_ - options_.threshold;
  return rel ? a > best_ * (options_.threshold + 1.) : a > best_ + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  XGRAD_CHECK(!std::isnan(metric), "ReduceLROnPlateau: step: the metric is NaN");
  auto& groups = opt_.param_groups();
  XGRAD_CHECK(groups.size() == min_lrs_.size(),
              "ReduceLROnPlateau: the optimizer has {} parameter groups, but had {} when the scheduler was built",
              groups.size(), min_lrs_.size());
  last_epoch_ += 1;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > options_.patience) {
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const double old_lr = *groups[i].lr;
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[i]);
      if (old_lr - new_lr > options_.eps) groups[i].lr = new_lr;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const auto& g : groups) last_lr_.push_back(*g.lr);
}

double ReduceLROnPlateau::get_last_lr(std::size_t group) const {
  XGRAD_CHECK(group < last_lr_.size(), "ReduceLROnPlateau: get_last_lr: group index {} out of range ({} groups)", group,
              last_lr_.size());
  return last_lr_[group];
}

std::vector<std::pair<std::string, Tensor>> ReduceLROnPlateau::state_dict() const {
  return {{"best", Tensor::scalar(best_, kFloat64)},
          {"num_bad_epochs", Tensor::scalar(static_cast<double>(num_bad_epochs_), kFloat64)},
          {"cooldown_counter", Tensor::scalar(static_cast<double>(cooldown_counter_), kFloat64)},
          {"last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), kFloat64)},
          {"last_lr", Tensor::from_vector(last_lr_, {static_cast<std::int64_t>(last_lr_.size())}, kFloat64)}};
}

void ReduceLROnPlateau::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const char* who = "ReduceLROnPlateau: load_state_dict";
  std::optional<double> best, bad, cooldown, epoch;
  std::optional<std::vector<double>> last_lr;
  auto count = [&](const std::string& key, const Tensor& t) {
    XGRAD_CHECK(t.numel() == 1, "{}: entry '{}' must have one element, got shape {}", who, key, shape_str(t.shape()));
    const double v = t.item();
    XGRAD_CHECK(v >= 0 && v == std::floor(v) && v < 9.0e15, "{}: entry '{}' must be an integer >= 0, got {}", who, key,
                v);
    return v;
  };
  for (const auto& [key, t] : state) {
    XGRAD_CHECK(t.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    if (key == "best" && !best) {
      XGRAD_CHECK(t.numel() == 1 && !std::isnan(t.item()), "{}: entry 'best' must be one number, not NaN", who);
      best = t.item();
    } else if (key == "num_bad_epochs" && !bad) {
      bad = count(key, t);
    } else if (key == "cooldown_counter" && !cooldown) {
      cooldown = count(key, t);
    } else if (key == "last_epoch" && !epoch) {
      epoch = count(key, t);
    } else if (key == "last_lr" && !last_lr) {
      XGRAD_CHECK(t.shape() == Shape{static_cast<std::int64_t>(min_lrs_.size())},
                  "{}: entry 'last_lr' must have shape ({}), one value per parameter group, got {}", who,
                  min_lrs_.size(), shape_str(t.shape()));
      last_lr = t.to_vector();
    } else {
      XGRAD_CHECK(false, "{}: unknown or repeated entry '{}'", who, key);
    }
  }
  XGRAD_CHECK(best && bad && cooldown && epoch && last_lr,
              "{}: missing entry (needs best, num_bad_epochs, cooldown_counter, last_epoch and last_lr)", who);
  best_ = *best;
  num_bad_epochs_ = static_cast<std::int64_t>(*bad);
  cooldown_counter_ = static_cast<std::int64_t>(*cooldown);
  last_epoch_ = static_cast<std::int64_t>(*epoch);
  last_lr_ = *last_lr;
}

}  // namespace xgrad::nn
