// The update loops call sqrt; with errno semantics GCC keeps a scalar library call for negative
// inputs and cannot vectorise them. sqrt's values are the same either way, only errno is left alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno")
#endif

#include "xgrad/nn/optim.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/parallel.hpp"

namespace xgrad::nn {

namespace {

// Bumps the version counter of an in-place written tensor (Note [Storage] in tensor.hpp).
void bump_version(const Tensor& t) { ++t.impl()->storage->version; }

// Options as doubles, by the names used in state_dict (bools as 0/1, betas split in two).
std::optional<double> get_option(const ParamGroup& g, const std::string& name) {
  auto b = [](const std::optional<bool>& v) -> std::optional<double> {
    if (!v) return std::nullopt;
    return *v ? 1.0 : 0.0;
  };
  if (name == "lr") return g.lr;
  if (name == "weight_decay") return g.weight_decay;
  if (name == "momentum") return g.momentum;
  if (name == "dampening") return g.dampening;
  if (name == "nesterov") return b(g.nesterov);
  if (name == "beta1") return g.betas ? std::optional<double>(g.betas->first) : std::nullopt;
  if (name == "beta2") return g.betas ? std::optional<double>(g.betas->second) : std::nullopt;
  if (name == "eps") return g.eps;
  if (name == "amsgrad") return b(g.amsgrad);
  if (name == "alpha") return g.alpha;
  if (name == "centered") return b(g.centered);
  if (name == "initial_lr") return g.initial_lr;
  XGRAD_ASSERT(false);
  return std::nullopt;
}

void set_option(ParamGroup& g, const std::string& name, double v) {
  if (name == "lr")
    g.lr = v;
  else if (name == "weight_decay")
    g.weight_decay = v;
  else if (name == "momentum")
    g.momentum = v;
  else if (name == "dampening")
    g.dampening = v;
  else if (name == "nesterov")
    g.nesterov = v != 0;
  else if (name == "beta1")
    g.betas = std::pair<double, double>{v, g.betas ? g.betas->second : 0.0};
  else if (name == "beta2")
    g.betas = std::pair<double, double>{g.betas ? g.betas->first : 0.0, v};
  else if (name == "eps")
    g.eps = v;
  else if (name == "amsgrad")
    g.amsgrad = v != 0;
  else if (name == "alpha")
    g.alpha = v;
  else if (name == "centered")
    g.centered = v != 0;
  else if (name == "initial_lr")
    g.initial_lr = v;
  else
    XGRAD_ASSERT(false);
}

bool is_bool_option(const std::string& name) { return name == "nesterov" || name == "amsgrad" || name == "centered"; }

// Rejects options set on a group that the optimizer does not have.
void reject_foreign(const ParamGroup& g, const std::string& opt, const std::vector<std::string>& allowed) {
  static const char* all[] = {"lr",    "weight_decay", "momentum", "dampening", "nesterov",
                              "beta1", "eps",          "amsgrad",  "alpha",     "centered"};
  for (const char* n : all) {
    if (std::find(allowed.begin(), allowed.end(), n) != allowed.end()) continue;
    if (std::string(n) == "beta1" && std::find(allowed.begin(), allowed.end(), "beta2") != allowed.end()) continue;
    XGRAD_CHECK(!get_option(g, n).has_value(), "{}: parameter group sets option '{}', which {} does not have", opt,
                std::string(n) == "beta1" ? "betas" : n, opt);
  }
}

void check_nonneg(const std::string& opt, std::size_t index, const char* what, double v) {
  XGRAD_CHECK(v >= 0.0, "{}: invalid {} {} in parameter group {} (must be >= 0)", opt, what, v, index);
}

// Elementwise loop over [0, n), serial below kParallelGrain (Note [Determinism]).
template <class Fn>
void for_each_element(std::int64_t n, Fn&& fn) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) fn(i);
  });
}

// Calls fn(std::true_type{}) or fn(std::false_type{}): the update loops take their options as
// compile-time flags so that each variant is a branch-free, vectorisable loop.
template <class Fn>
void with_flag(bool flag, Fn&& fn) {
  if (flag)
    fn(std::true_type{});
  else
    fn(std::false_type{});
}

// NaN-propagating maximum, like torch.maximum.
template <class T>
T nan_max(T a, T b) {
  return (a != a || a > b) ? a : b;  // NOLINT(misc-redundant-expression): a != a tests NaN
}

}  // namespace

// ---- Optimizer ----------------------------------------------------------------------------------

Optimizer::Optimizer(std::string name) : name_(std::move(name)) {}
Optimizer::~Optimizer() = default;

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  std::size_t total = 0;
  for (const auto& g : groups) total += g.params.size();
  XGRAD_CHECK(total > 0, "{}: optimizer got an empty parameter list", name_);
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  const std::size_t index = groups_.size();
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    XGRAD_CHECK(p.defined(), "{}: parameter {} of group {} is an undefined tensor", name_, i, index);
    XGRAD_CHECK(p.is_leaf(), "{}: parameter {} of group {} (shape {}) is not a leaf tensor; can't optimize a non-leaf",
                name_, i, index, shape_str(p.shape()));
    for (std::size_t j = 0; j < i; ++j)
      XGRAD_CHECK(!group.params[j].is_same(p), "{}: parameter {} of group {} (shape {}) appears twice in the group",
                  name_, i, index, shape_str(p.shape()));
    for (std::size_t g = 0; g < groups_.size(); ++g)
      for (const auto& q : groups_[g].params)
        XGRAD_CHECK(!q.is_same(p), "{}: parameter {} of group {} (shape {}) is already in parameter group {}", name_, i,
                    index, shape_str(p.shape()), g);
  }
  fill_defaults(group);
  validate(group, index);
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.zero_grad();
      } else if (grad.requires_grad()) {
        p.set_grad(Tensor::zeros(grad.shape(), grad.dtype()));
      } else {
        grad.zero_();
      }
    }
}

double Optimizer::lr(std::size_t group) const {
  XGRAD_CHECK(group < groups_.size(), "{}: lr: group index {} out of range ({} groups)", name_, group, groups_.size());
  return *groups_[group].lr;
}

void Optimizer::set_lr(double lr) {
  XGRAD_CHECK(lr >= 0.0, "{}: set_lr: invalid learning rate {} (must be >= 0)", name_, lr);
  for (auto& g : groups_) g.lr = lr;
}

void Optimizer::set_lr(std::size_t group, double lr) {
  XGRAD_CHECK(group < groups_.size(), "{}: set_lr: group index {} out of range ({} groups)", name_, group,
              groups_.size());
  XGRAD_CHECK(lr >= 0.0, "{}: set_lr: invalid learning rate {} for group {} (must be >= 0)", name_, lr, group);
  groups_[group].lr = lr;
}

Tensor Optimizer::checked_grad(const Tensor& p) const {
  Tensor g = p.grad();
  if (g.defined())
    XGRAD_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype(),
                "{}: gradient of shape {} {} does not match its parameter of shape {} {}", name_, shape_str(g.shape()),
                g.dtype(), shape_str(p.shape()), p.dtype());
  return g;
}

Tensor& Optimizer::ensure_buffer(Tensor& slot, const Tensor& p) {
  if (!slot.defined()) slot = Tensor::zeros(p.shape(), p.dtype());
  return slot;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  const auto names = option_names();
  const auto bufs = buffer_names();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = fmt::format("param_groups.{}.", g);
    out.emplace_back(prefix + "num_params", Tensor::scalar(static_cast<double>(groups_[g].params.size()), kFloat64));
    for (const auto& n : names) out.emplace_back(prefix + n, Tensor::scalar(*get_option(groups_[g], n), kFloat64));
    if (groups_[g].initial_lr)
      out.emplace_back(prefix + "initial_lr", Tensor::scalar(*groups_[g].initial_lr, kFloat64));
  }
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      auto it = state_.find(groups_[g].params[i].impl());
      if (it == state_.end()) continue;
      const std::string prefix = fmt::format("state.{}.{}.", g, i);
      if (has_step()) out.emplace_back(prefix + "step", Tensor::scalar(static_cast<double>(it->second.step), kFloat64));
      for (int s = 0; s < 3; ++s)
        if (bufs[s] != nullptr && it->second.buffers[s].defined())
          out.emplace_back(prefix + bufs[s], it->second.buffers[s].clone_data());
    }
  return out;
}

namespace {
// Parses "<a>.<b>.<rest>" or "<a>.<rest>" prefixes: reads an unsigned index up to the next '.'.
bool parse_index(const std::string& s, std::size_t& pos, std::size_t& value) {
  const std::size_t dot = s.find('.', pos);
  if (dot == std::string::npos || dot == pos) return false;
  const char* b = s.data() + pos;
  const char* e = s.data() + dot;
  auto [ptr, ec] = std::from_chars(b, e, value);
  if (ec != std::errc() || ptr != e) return false;
  pos = dot + 1;
  return true;
}
}  // namespace

void Optimizer::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const auto names = option_names();
  const auto bufs = buffer_names();
  const std::string who = name_ + ": load_state_dict";
  std::vector<ParamGroup> new_groups = groups_;
  for (auto& g : new_groups) g.initial_lr.reset();
  std::vector<std::set<std::string>> seen_opts(groups_.size());
  struct Entry {
    bool has_step = false;
    std::int64_t step = 0;
    std::array<Tensor, 3> buffers;
  };
  std::map<std::pair<std::size_t, std::size_t>, Entry> entries;
  std::set<std::string> seen;

  for (const auto& [key, value] : state) {
    XGRAD_CHECK(seen.insert(key).second, "{}: entry '{}' appears twice", who, key);
    XGRAD_CHECK(value.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    std::size_t pos = 0, g = 0, i = 0;
    if (key.rfind("param_groups.", 0) == 0) {
      pos = 13;
      XGRAD_CHECK(parse_index(key, pos, g), "{}: malformed entry name '{}'", who, key);
      XGRAD_CHECK(g < groups_.size(), "{}: entry '{}' names parameter group {}, but the optimizer has {} groups", who,
                  key, g, groups_.size());
      const std::string opt = key.substr(pos);
      XGRAD_CHECK(value.numel() == 1, "{}: entry '{}' must have one element, got shape {}", who, key,
                  shape_str(value.shape()));
      const double v = value.item();
      if (opt == "num_params") {
        XGRAD_CHECK(v == static_cast<double>(groups_[g].params.size()),
                    "{}: parameter group {} was saved with {} parameters, but has {} here", who, g, v,
                    groups_[g].params.size());
      } else if (opt == "initial_lr") {
        new_groups[g].initial_lr = v;
      } else {
        XGRAD_CHECK(std::find(names.begin(), names.end(), opt) != names.end(), "{}: unknown entry '{}' for {}", who,
                    key, name_);
        XGRAD_CHECK(!is_bool_option(opt) || v == 0.0 || v == 1.0, "{}: entry '{}' must be 0 or 1, got {}", who, key, v);
        set_option(new_groups[g], opt, v);
      }
      seen_opts[g].insert(opt);
    } else if (key.rfind("state.", 0) == 0) {
      pos = 6;
      XGRAD_CHECK(parse_index(key, pos, g) && parse_index(key, pos, i), "{}: malformed entry name '{}'", who, key);
      XGRAD_CHECK(g < groups_.size(), "{}: entry '{}' names parameter group {}, but the optimizer has {} groups", who,
                  key, g, groups_.size());
      XGRAD_CHECK(i < groups_[g].params.size(),
                  "{}: entry '{}' names parameter {} of group {}, but the group has {} parameters", who, key, i, g,
                  groups_[g].params.size());
      const std::string buf = key.substr(pos);
      const Tensor& p = groups_[g].params[i];
      Entry& e = entries[{g, i}];
      if (buf == "step" && has_step()) {
        XGRAD_CHECK(value.numel() == 1, "{}: entry '{}' must have one element, got shape {}", who, key,
                    shape_str(value.shape()));
        const double v = value.item();
        XGRAD_CHECK(v >= 0 && v == std::floor(v) && v < 9.0e15, "{}: entry '{}' must be a non-negative integer, got {}",
                    who, key, v);
        e.has_step = true;
        e.step = static_cast<std::int64_t>(v);
        continue;
      }
      int slot = -1;
      for (int s = 0; s < 3; ++s)
        if (bufs[s] != nullptr && buf == bufs[s]) slot = s;
      XGRAD_CHECK(slot >= 0, "{}: unknown entry '{}' for {}", who, key, name_);
      XGRAD_CHECK(value.shape() == p.shape() && value.dtype() == p.dtype(),
                  "{}: entry '{}' has shape {} {}, but its parameter has shape {} {}", who, key,
                  shape_str(value.shape()), value.dtype(), shape_str(p.shape()), p.dtype());
      e.buffers[static_cast<std::size_t>(slot)] = value.detach().clone_data();
    } else {
      XGRAD_CHECK(false, "{}: unknown entry '{}' (names start with 'param_groups.' or 'state.')", who, key);
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    XGRAD_CHECK(seen_opts[g].count("num_params") == 1, "{}: missing entry 'param_groups.{}.num_params'", who, g);
    for (const auto& n : names)
      XGRAD_CHECK(seen_opts[g].count(n) == 1, "{}: missing entry 'param_groups.{}.{}'", who, g, n);
    validate(new_groups[g], g);
  }
  for (const auto& [gi, e] : entries) {
    const ParamGroup& grp = new_groups[gi.first];
    XGRAD_CHECK(e.has_step || !has_step(), "{}: missing entry 'state.{}.{}.step'", who, gi.first, gi.second);
    for (int s = 0; s < 3; ++s)
      if (bufs[s] != nullptr && buffer_used(grp, s))
        XGRAD_CHECK(e.buffers[static_cast<std::size_t>(s)].defined(), "{}: missing entry 'state.{}.{}.{}'", who,
                    gi.first, gi.second, bufs[s]);
  }
  // Everything is valid: commit.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    new_groups[g].params = groups_[g].params;
  }
  groups_ = std::move(new_groups);
  state_.clear();
  for (auto& [gi, e] : entries) {
    ParamState& st = state_[groups_[gi.first].params[gi.second].impl()];
    st.step = e.step;
    st.buffers = std::move(e.buffers);
  }
}

// ---- SGD ----------------------------------------------------------------------------------------

SGDOptions::SGDOptions(double lr) : lr_(lr) {}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : Optimizer("SGD"), defaults_(options) {
  ParamGroup probe;
  fill_defaults(probe);
  validate(probe, 0);  // bad defaults are reported even when every group overrides them
  init_groups(std::move(groups));
}

void SGD::fill_defaults(ParamGroup& g) const {
  reject_foreign(g, name_, option_names());
  if (!g.lr) g.lr = defaults_.lr();
  if (!g.momentum) g.momentum = defaults_.momentum();
  if (!g.dampening) g.dampening = defaults_.dampening();
  if (!g.weight_decay) g.weight_decay = defaults_.weight_decay();
  if (!g.nesterov) g.nesterov = defaults_.nesterov();
}

void SGD::validate(const ParamGroup& g, std::size_t index) const {
  check_nonneg(name_, index, "learning rate", *g.lr);
  check_nonneg(name_, index, "momentum", *g.momentum);
  check_nonneg(name_, index, "weight_decay", *g.weight_decay);
  XGRAD_CHECK(std::isfinite(*g.dampening), "{}: invalid dampening {} in parameter group {}", name_, *g.dampening,
              index);
  XGRAD_CHECK(!*g.nesterov || (*g.momentum > 0 && *g.dampening == 0),
              "{}: nesterov momentum requires a momentum > 0 and zero dampening (parameter group {}: momentum {}, "
              "dampening {})",
              name_, index, *g.momentum, *g.dampening);
}

std::vector<std::string> SGD::option_names() const {
  return {"lr", "momentum", "dampening", "weight_decay", "nesterov"};
}
std::array<const char*, 3> SGD::buffer_names() const { return {"momentum_buffer", nullptr, nullptr}; }
bool SGD::buffer_used(const ParamGroup& g, int slot) const { return slot == 0 && *g.momentum != 0; }

void SGD::step() {
  NoGradGuard no_grad;
  for (auto& grp : groups_) {
    validate(grp, static_cast<std::size_t>(&grp - groups_.data()));
    const double lr = *grp.lr, wd = *grp.weight_decay, momentum = *grp.momentum, dampening = *grp.dampening;
    const bool nesterov = *grp.nesterov;
    for (auto& p : grp.params) {
      const Tensor grad = checked_grad(p);
      if (!grad.defined()) continue;
      ParamState* st = nullptr;
      bool first = false;
      if (momentum != 0) {
        st = &state_of(p);
        first = !st->buffers[0].defined();
        if (first) st->buffers[0] = Tensor::empty(p.shape(), p.dtype());
        bump_version(st->buffers[0]);
      }
      bump_version(p);
      dispatch(p.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* w = p.data<T>();
        const T* gr = grad.data<T>();
        T* buf = st != nullptr ? st->buffers[0].data<T>() : nullptr;
        const T t_wd = static_cast<T>(wd), t_mom = static_cast<T>(momentum), t_damp = static_cast<T>(1 - dampening),
                t_neg_lr = static_cast<T>(-lr);
        with_flag(wd != 0, [&](auto has_wd) {
          with_flag(momentum != 0, [&](auto has_mom) {
            with_flag(first, [&](auto is_first) {
              with_flag(nesterov, [&](auto is_nesterov) {
                for_each_element(p.numel(), [&](std::int64_t i) {
                  T d = gr[i];
                  if constexpr (has_wd) d = d + t_wd * w[i];  // d_p.add(param, alpha=weight_decay)
                  if constexpr (has_mom) {
                    T b;
                    if constexpr (is_first) {
                      b = d;  // torch.clone(d_p)
                    } else {
                      b = buf[i] * t_mom;  // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                      b = b + t_damp * d;
                    }
                    buf[i] = b;
                    if constexpr (is_nesterov)
                      d = d + t_mom * b;  // d_p.add(buf, alpha=momentum)
                    else
                      d = b;
                  }
                  w[i] = w[i] + t_neg_lr * d;  // param.add_(d_p, alpha=-lr)
                });
              });
            });
          });
        });
      });
    }
  }
}

// ---- Adam / AdamW -------------------------------------------------------------------------------

AdamOptions::AdamOptions(double lr) : lr_(lr) {}
AdamWOptions::AdamWOptions(double lr) : AdamOptions(lr) { weight_decay_ = 1e-2; }

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", options) {
  init_groups(std::move(groups));
}

Adam::Adam(std::string name, AdamOptions options) : Optimizer(std::move(name)), defaults_(options) {
  ParamGroup probe;
  fill_defaults(probe);
  validate(probe, 0);
}

void Adam::fill_defaults(ParamGroup& g) const {
  reject_foreign(g, name_, option_names());
  if (!g.lr) g.lr = defaults_.lr();
  if (!g.betas) g.betas = defaults_.betas();
  if (!g.eps) g.eps = defaults_.eps();
  if (!g.weight_decay) g.weight_decay = defaults_.weight_decay();
  if (!g.amsgrad) g.amsgrad = defaults_.amsgrad();
}

void Adam::validate(const ParamGroup& g, std::size_t index) const {
  check_nonneg(name_, index, "learning rate", *g.lr);
  check_nonneg(name_, index, "epsilon", *g.eps);
  check_nonneg(name_, index, "weight_decay", *g.weight_decay);
  XGRAD_CHECK(g.betas->first >= 0 && g.betas->first < 1,
              "{}: invalid beta parameter at index 0: {} in parameter group {} (must be in [0, 1))", name_,
              g.betas->first, index);
  XGRAD_CHECK(g.betas->second >= 0 && g.betas->second < 1,
              "{}: invalid beta parameter at index 1: {} in parameter group {} (must be in [0, 1))", name_,
              g.betas->second, index);
}

std::vector<std::string> Adam::option_names() const {
  return {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"};
}
std::array<const char*, 3> Adam::buffer_names() const { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
bool Adam::buffer_used(const ParamGroup& g, int slot) const { return slot < 2 || *g.amsgrad; }

void Adam::step() { adam_step(false); }

void Adam::adam_step(bool decoupled) {
  NoGradGuard no_grad;
  for (auto& grp : groups_) {
    validate(grp, static_cast<std::size_t>(&grp - groups_.data()));
    const double lr = *grp.lr, wd = *grp.weight_decay, eps = *grp.eps;
    const double beta1 = grp.betas->first, beta2 = grp.betas->second;
    const bool amsgrad = *grp.amsgrad;
    for (auto& p : grp.params) {
      const Tensor grad = checked_grad(p);
      if (!grad.defined()) continue;
      ParamState& st = state_of(p);
      Tensor& m_t = ensure_buffer(st.buffers[0], p);
      Tensor& v_t = ensure_buffer(st.buffers[1], p);
      Tensor* vmax_t = amsgrad ? &ensure_buffer(st.buffers[2], p) : nullptr;
      st.step += 1;
      // The scalars exactly as torch computes them in Python (float64).
      const double step = static_cast<double>(st.step);
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      bump_version(p);
      bump_version(m_t);
      bump_version(v_t);
      if (vmax_t != nullptr) bump_version(*vmax_t);
      dispatch(p.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* w = p.data<T>();
        const T* gr = grad.data<T>();
        T* m = m_t.data<T>();
        T* v = v_t.data<T>();
        T* vmax = vmax_t != nullptr ? vmax_t->data<T>() : nullptr;
        const T t_wd = static_cast<T>(wd), t_decay = static_cast<T>(1 - lr * wd);
        const T t_b1 = static_cast<T>(beta1), t_1mb1 = static_cast<T>(1 - beta1);
        const T t_b2 = static_cast<T>(beta2), t_1mb2 = static_cast<T>(1 - beta2);
        const T t_bc2s = static_cast<T>(bias_correction2_sqrt), t_eps = static_cast<T>(eps);
        const T t_neg_step = static_cast<T>(-step_size);
        with_flag(decoupled, [&](auto is_decoupled) {
          with_flag(wd != 0, [&](auto has_wd) {
            with_flag(amsgrad, [&](auto is_amsgrad) {
              for_each_element(p.numel(), [&](std::int64_t i) {
                T g = gr[i];
                if constexpr (is_decoupled) {
                  w[i] = w[i] * t_decay;  // param.mul_(1 - lr * weight_decay)
                } else if constexpr (has_wd) {
                  g = g + t_wd * w[i];  // grad.add(param, alpha=weight_decay)
                }
                const T mi = m[i] * t_b1 + t_1mb1 * g;      // exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
                const T vi = v[i] * t_b2 + t_1mb2 * g * g;  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1-beta2)
                m[i] = mi;
                v[i] = vi;
                T s = vi;
                if constexpr (is_amsgrad) {
                  s = nan_max(vmax[i], vi);  // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                  vmax[i] = s;
                }
                const T denom = std::sqrt(s) / t_bc2s + t_eps;  // (sqrt(v) / bias_correction2_sqrt).add_(eps)
                w[i] = w[i] + t_neg_step * mi / denom;          // param.addcdiv_(exp_avg, denom, value=-step_size)
              });
            });
          });
        });
      });
    }
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Adam("AdamW", options) {
  init_groups(std::move(groups));
}

void AdamW::step() { adam_step(true); }

// ---- RMSprop ------------------------------------------------------------------------------------

RMSpropOptions::RMSpropOptions(double lr) : lr_(lr) {}

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options) : Optimizer("RMSprop"), defaults_(options) {
  ParamGroup probe;
  fill_defaults(probe);
  validate(probe, 0);
  init_groups(std::move(groups));
}

void RMSprop::fill_defaults(ParamGroup& g) const {
  reject_foreign(g, name_, option_names());
  if (!g.lr) g.lr = defaults_.lr();
  if (!g.alpha) g.alpha = defaults_.alpha();
  if (!g.eps) g.eps = defaults_.eps();
  if (!g.weight_decay) g.weight_decay = defaults_.weight_decay();
  if (!g.momentum) g.momentum = defaults_.momentum();
  if (!g.centered) g.centered = defaults_.centered();
}

void RMSprop::validate(const ParamGroup& g, std::size_t index) const {
  check_nonneg(name_, index, "learning rate", *g.lr);
  check_nonneg(name_, index, "epsilon", *g.eps);
  check_nonneg(name_, index, "momentum", *g.momentum);
  check_nonneg(name_, index, "weight_decay", *g.weight_decay);
  check_nonneg(name_, index, "alpha", *g.alpha);
}

std::vector<std::string> RMSprop::option_names() const {
  return {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"};
}
std::array<const char*, 3> RMSprop::buffer_names() const { return {"square_avg", "momentum_buffer", "grad_avg"}; }
bool RMSprop::buffer_used(const ParamGroup& g, int slot) const {
  return slot == 0 || (slot == 1 && *g.momentum > 0) || (slot == 2 && *g.centered);
}

void RMSprop::step() {
  NoGradGuard no_grad;
  for (auto& grp : groups_) {
    validate(grp, static_cast<std::size_t>(&grp - groups_.data()));
    const double lr = *grp.lr, wd = *grp.weight_decay, eps = *grp.eps, alpha = *grp.alpha, momentum = *grp.momentum;
    const bool centered = *grp.centered;
    for (auto& p : grp.params) {
      const Tensor grad = checked_grad(p);
      if (!grad.defined()) continue;
      ParamState& st = state_of(p);
      Tensor& sq_t = ensure_buffer(st.buffers[0], p);
      Tensor* buf_t = momentum > 0 ? &ensure_buffer(st.buffers[1], p) : nullptr;
      Tensor* ga_t = centered ? &ensure_buffer(st.buffers[2], p) : nullptr;
      st.step += 1;
      bump_version(p);
      bump_version(sq_t);
      if (buf_t != nullptr) bump_version(*buf_t);
      if (ga_t != nullptr) bump_version(*ga_t);
      dispatch(p.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* w = p.data<T>();
        const T* gr = grad.data<T>();
        T* sq = sq_t.data<T>();
        T* buf = buf_t != nullptr ? buf_t->data<T>() : nullptr;
        T* ga = ga_t != nullptr ? ga_t->data<T>() : nullptr;
        const T t_wd = static_cast<T>(wd), t_alpha = static_cast<T>(alpha), t_1ma = static_cast<T>(1 - alpha);
        const T t_eps = static_cast<T>(eps), t_mom = static_cast<T>(momentum), t_neg_lr = static_cast<T>(-lr);
        with_flag(wd != 0, [&](auto has_wd) {
          with_flag(centered, [&](auto is_centered) {
            with_flag(momentum > 0, [&](auto has_mom) {
              for_each_element(p.numel(), [&](std::int64_t i) {
                T g = gr[i];
                if constexpr (has_wd) g = g + t_wd * w[i];
                const T s = sq[i] * t_alpha + t_1ma * g * g;  // square_avg.mul_(alpha).addcmul_(grad, grad, 1-alpha)
                sq[i] = s;
                T avg;
                if constexpr (is_centered) {
                  const T a = ga[i] * t_alpha + t_1ma * g;  // grad_avg.mul_(alpha).add_(grad, alpha=1-alpha)
                  ga[i] = a;
                  avg = std::sqrt(s + -a * a);  // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                } else {
                  avg = std::sqrt(s);
                }
                avg = avg + t_eps;
                if constexpr (has_mom) {
                  const T b = buf[i] * t_mom + g / avg;  // buf.mul_(momentum).addcdiv_(grad, avg)
                  buf[i] = b;
                  w[i] = w[i] + t_neg_lr * b;  // param.add_(buf, alpha=-lr)
                } else {
                  w[i] = w[i] + t_neg_lr * g / avg;  // param.addcdiv_(grad, avg, value=-lr)
                }
              });
            });
          });
        });
      });
    }
  }
}

// ---- gradient clipping --------------------------------------------------------------------------

namespace {
// Per-tensor norm term: sum |g|^q (q finite) or max |g| (q infinite), accumulated in double over
// fixed chunks so that the result does not depend on the thread count.
double norm_term(const Tensor& g, double q) {
  return dispatch(g.dtype(), [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    const T* x = g.data<T>();
    const std::int64_t n = g.numel();
    if (std::isinf(q)) {
      double m = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(x[i]));
        if (a != a) return a;  // NOLINT(misc-redundant-expression): NaN propagates like torch's max
        m = std::max(m, a);
      }
      return m;
    }
    return deterministic_sum<double>(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      double acc = 0;
      if (q == 2.0) {
        for (std::int64_t i = b; i < e; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      } else if (q == 1.0) {
        for (std::int64_t i = b; i < e; ++i) acc += std::abs(static_cast<double>(x[i]));
      } else {
        for (std::int64_t i = b; i < e; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), q);
      }
      return acc;
    });
  });
}
}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  XGRAD_CHECK(max_norm >= 0, "clip_grad_norm_: argument 'max_norm' must be >= 0, got {}", max_norm);
  XGRAD_CHECK(norm_type > 0, "clip_grad_norm_: argument 'norm_type' must be > 0 (or INFINITY), got {}", norm_type);
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    XGRAD_CHECK(params[i].defined(), "clip_grad_norm_: parameter {} is an undefined tensor", i);
    Tensor g = params[i].grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const auto& g : grads) {
    const double t = norm_term(g, norm_type);
    if (inf) {
      total = (total != total || t != t) ? std::numeric_limits<double>::quiet_NaN()  // NOLINT
                                         : std::max(total, t);
    } else {
      total += t;
    }
  }
  if (!inf) total = norm_type == 2.0 ? std::sqrt(total) : norm_type == 1.0 ? total : std::pow(total, 1.0 / norm_type);
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  // torch multiplies even when the coefficient is clamped to 1 (a no-op); skip that work. NaN
  // coefficients (a non-finite norm) propagate into the gradients like torch.
  if (coef == 1.0) return total;
  NoGradGuard no_grad;
  for (auto& g : grads) {
    Tensor gd = g.detach();
    dispatch(gd.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* x = gd.data<T>();
      const T c = static_cast<T>(coef);
      for_each_element(gd.numel(), [&](std::int64_t i) { x[i] = x[i] * c; });
    });
    bump_version(gd);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  XGRAD_CHECK(clip_value >= 0, "clip_grad_value_: argument 'clip_value' must be >= 0, got {}", clip_value);
  for (std::size_t i = 0; i < params.size(); ++i) {
    XGRAD_CHECK(params[i].defined(), "clip_grad_value_: parameter {} is an undefined tensor", i);
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* x = g.data<T>();
      const T c = static_cast<T>(clip_value);
      for_each_element(g.numel(), [&](std::int64_t k) { x[k] = std::clamp(x[k], -c, c); });
    });
    bump_version(g);
  }
}

}  // namespace xgrad::nn
