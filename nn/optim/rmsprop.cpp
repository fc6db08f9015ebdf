#include "xgrad/nn/optim/rmsprop.hpp"

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

}  // namespace xgrad::nn
