#include "xgrad/nn/optim/sgd.hpp"

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

}  // namespace xgrad::nn
