#include "xgrad/nn/optim/adam.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/detail/optim_helpers.hpp"

namespace xgrad::nn {

using namespace detail;  // NOLINT(google-build-using-namespace): the optimizers' shared helpers

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

}  // namespace xgrad::nn
