#include "xgrad/nn/optim/optimizer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/nn/detail/optim_helpers.hpp"

namespace xgrad::nn {

namespace detail {

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
  if (name == "lr_decay") return g.lr_decay;
  if (name == "initial_accumulator_value") return g.initial_accumulator_value;
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
  else if (name == "lr_decay")
    g.lr_decay = v;
  else if (name == "initial_accumulator_value")
    g.initial_accumulator_value = v;
  else if (name == "initial_lr")
    g.initial_lr = v;
  else
    XGRAD_ASSERT(false);
}

bool is_bool_option(const std::string& name) { return name == "nesterov" || name == "amsgrad" || name == "centered"; }

// Rejects options set on a group that the optimizer does not have.
void reject_foreign(const ParamGroup& g, const std::string& opt, const std::vector<std::string>& allowed) {
  static const char* all[] = {"lr",  "weight_decay", "momentum", "dampening", "nesterov", "beta1",
                              "eps", "amsgrad",      "alpha",    "centered",  "lr_decay", "initial_accumulator_value"};
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

}  // namespace detail

using namespace detail;  // NOLINT(google-build-using-namespace)

// ---- Optimizer ----------------------------------------------------------------------------------

struct Optimizer::States : std::unordered_map<std::shared_ptr<TensorImpl>, ParamState> {};

Optimizer::Optimizer(std::string name) : name_(std::move(name)), state_(std::make_unique<States>()) {}
Optimizer::~Optimizer() = default;

Optimizer::ParamState& Optimizer::state_of(const Tensor& p) { return (*state_)[p.impl()]; }

std::vector<Tensor> Optimizer::state_buffers(const Tensor& p) const {
  std::vector<Tensor> out;
  const auto it = state_->find(p.impl());
  if (it == state_->end()) return out;
  for (const Tensor& b : it->second.buffers)
    if (b.defined() && b.shape() == p.shape()) out.push_back(b);
  return out;
}

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
    // Only floating point tensors have gradients (Note [Dtypes]): an integer one would never move.
    XGRAD_CHECK(is_floating_point(p.dtype()),
                "{}: parameter {} of group {} has dtype {} (shape {}); only float32 and float64 tensors can be "
                "optimized",
                name_, i, index, p.dtype(), shape_str(p.shape()));
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
      auto it = state_->find(groups_[g].params[i].impl());
      if (it == state_->end()) continue;
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
  state_->clear();
  for (auto& [gi, e] : entries) {
    ParamState& st = (*state_)[groups_[gi.first].params[gi.second].impl()];
    st.step = e.step;
    st.buffers = std::move(e.buffers);
  }
}

}  // namespace xgrad::nn
