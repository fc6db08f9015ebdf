#include "xgrad/nn/optim/adagrad.hpp"

#include <cmath>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/nn/detail/optim_helpers.hpp"

namespace xgrad::nn {

using namespace detail;  // NOLINT(google-build-using-namespace): the optimizers' shared helpers

AdagradOptions::AdagradOptions(double lr) : lr_(lr) {}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : Adagrad(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions options) : Optimizer("Adagrad"), defaults_(options) {
  ParamGroup probe;
  fill_defaults(probe);
  validate(probe, 0);
  init_groups(std::move(groups));
}

void Adagrad::fill_defaults(ParamGroup& g) const {
  reject_foreign(g, name_, option_names());
  if (!g.lr) g.lr = defaults_.lr();
  if (!g.lr_decay) g.lr_decay = defaults_.lr_decay();
  if (!g.weight_decay) g.weight_decay = defaults_.weight_decay();
  if (!g.initial_accumulator_value) g.initial_accumulator_value = defaults_.initial_accumulator_value();
  if (!g.eps) g.eps = defaults_.eps();
}

void Adagrad::validate(const ParamGroup& g, std::size_t index) const {
  check_nonneg(name_, index, "learning rate", *g.lr);
  check_nonneg(name_, index, "lr_decay", *g.lr_decay);
  check_nonneg(name_, index, "weight_decay", *g.weight_decay);
  check_nonneg(name_, index, "initial_accumulator_value", *g.initial_accumulator_value);
  check_nonneg(name_, index, "epsilon", *g.eps);
}

std::vector<std::string> Adagrad::option_names() const {
  return {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"};
}
std::array<const char*, 3> Adagrad::buffer_names() const { return {"sum", nullptr, nullptr}; }
bool Adagrad::buffer_used(const ParamGroup& /*g*/, int slot) const { return slot == 0; }

void Adagrad::step() {
  NoGradGuard no_grad;
  for (auto& grp : groups_) {
    validate(grp, static_cast<std::size_t>(&grp - groups_.data()));
    const double lr = *grp.lr, lr_decay = *grp.lr_decay, wd = *grp.weight_decay, eps = *grp.eps;
    for (auto& p : grp.params) {
      const Tensor grad = checked_grad(p);
      if (!grad.defined()) continue;
      ParamState& st = state_of(p);
      const bool fresh = !st.buffers[0].defined();
      Tensor& sum_t = ensure_buffer(st.buffers[0], p);
      if (fresh && *grp.initial_accumulator_value != 0) sum_t.fill_(*grp.initial_accumulator_value);
      st.step += 1;
      // clr as torch computes it in Python (double), then rounded to the parameter's type.
      const double clr = lr / (1 + static_cast<double>(st.step - 1) * lr_decay);
      bump_version(p);
      bump_version(sum_t);
      dispatch(p.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* w = p.data<T>();
        const T* gr = grad.data<T>();
        T* s = sum_t.data<T>();
        const T t_wd = static_cast<T>(wd), t_eps = static_cast<T>(eps), t_neg_clr = static_cast<T>(-clr);
        with_flag(wd != 0, [&](auto has_wd) {
          for_each_element(p.numel(), [&](std::int64_t i) {
            T g = gr[i];
            if constexpr (has_wd) g = g + t_wd * w[i];  // grad.add(param, alpha=weight_decay)
            const T acc = s[i] + g * g;                 // state_sum.addcmul_(grad, grad, value=1)
            s[i] = acc;
            const T std_ = std::sqrt(acc) + t_eps;  // state_sum.sqrt().add_(eps)
            w[i] = w[i] + t_neg_clr * g / std_;     // param.addcdiv_(grad, std, value=-clr)
          });
        });
      });
    }
  }
}

}  // namespace xgrad::nn
