#include "xgrad/nn/optim/lbfgs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/nn/detail/optim_helpers.hpp"

namespace xgrad::nn {

using namespace detail;  // NOLINT(google-build-using-namespace): the optimizers' shared helpers

namespace {
using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
double abs_max(const Vec& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}
double abs_sum(const Vec& a) {
  double s = 0;
  for (double v : a) s += std::abs(v);
  return s;
}
// x += alpha * y
void axpy(Vec& x, double alpha, const Vec& y) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] + alpha * y[i];
}
// Python's max and min (the first argument wins ties and NaN comparisons), as torch's code uses them.
double py_max(double a, double b) { return b > a ? b : a; }
double py_min(double a, double b) { return b < a ? b : a; }

// Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to the bounds (torch's
// _cubic_interpolate, from torch/optim's polyinterp.lua).
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, const double* bounds) {
  const double xmin_bound = bounds != nullptr ? bounds[0] : (x1 <= x2 ? x1 : x2);
  const double xmax_bound = bounds != nullptr ? bounds[1] : (x1 <= x2 ? x2 : x1);
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    const double d2 = std::sqrt(d2_square);
    const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                    : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return py_min(py_max(min_pos, xmin_bound), xmax_bound);
  }
  return (xmin_bound + xmax_bound) / 2.;
}

struct LineSearchResult {
  double f;
  Vec g;
  double t;
  std::int64_t evals;
};

// torch's _strong_wolfe (from torch/optim's lswolfe.lua): a step t along d satisfying the strong
// Wolfe conditions, by bracketing and then zooming with cubic interpolation.
template <class ObjFunc>
LineSearchResult strong_wolfe(ObjFunc&& obj_func, double t, const Vec& d, double f, const Vec& g, double gtd,
                              double tolerance_change, double c1 = 1e-4, double c2 = 0.9, int max_ls = 25) {
  const double d_norm = abs_max(d);
  auto [f_new, g_new] = obj_func(t);
  std::int64_t evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Vec g_prev = g;
  bool done = false;
  int ls_iter = 0;
  std::vector<double> bracket, bracket_f, bracket_gtd;
  std::vector<Vec> bracket_g;
  while (ls_iter < max_ls) {
    if (f_new > (f + c1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, f_new};
      bracket_g = {g_prev, g_new};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      bracket = {t};
      bracket_f = {f_new};
      bracket_g = {g_new};
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, f_new};
      bracket_g = {g_prev, g_new};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    // interpolate
    const double bounds[2] = {t + 0.01 * (t - t_prev), t * 10};
    const double tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
    t_prev = tmp;
    f_prev = f_new;
    g_prev = g_new;
    gtd_prev = gtd_new;
    std::tie(f_new, g_new) = obj_func(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) {  // reached the maximum number of iterations
    bracket = {0, t};
    bracket_f = {f, f_new};
    bracket_g = {g, g_new};
  }
  // Zoom: refine the bracket until a point satisfies the conditions.
  bool insuf_progress = false;
  std::size_t low_pos = bracket_f[0] <= bracket_f.back() ? 0 : 1, high_pos = 1 - low_pos;
  while (!done && ls_iter < max_ls) {
    if (std::abs(bracket[1] - bracket[0]) * d_norm < tolerance_change) break;  // the bracket is too small
    t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1], nullptr);
    // Too close to a boundary: move 0.1 of the bracket's length away from it when the last step made
    // insufficient progress too, or t is at a boundary.
    const double bmax = py_max(bracket[0], bracket[1]), bmin = py_min(bracket[0], bracket[1]);
    const double eps = 0.1 * (bmax - bmin);
    if (py_min(bmax - t, t - bmin) < eps) {
      if (insuf_progress || t >= bmax || t <= bmin) {
        t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
        insuf_progress = false;
      } else {
        insuf_progress = true;
      }
    } else {
      insuf_progress = false;
    }
    std::tie(f_new, g_new) = obj_func(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
    if (f_new > (f + c1 * t * gtd) || f_new >= bracket_f[low_pos]) {
      // Armijo condition not satisfied or not lower than the lowest point
      bracket[high_pos] = t;
      bracket_f[high_pos] = f_new;
      bracket_g[high_pos] = g_new;
      bracket_gtd[high_pos] = gtd_new;
      low_pos = bracket_f[0] <= bracket_f[1] ? 0 : 1;
      high_pos = 1 - low_pos;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;  // Wolfe conditions satisfied
      } else if (gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0) {
        // the old high becomes the new low
        bracket[high_pos] = bracket[low_pos];
        bracket_f[high_pos] = bracket_f[low_pos];
        bracket_g[high_pos] = bracket_g[low_pos];
        bracket_gtd[high_pos] = bracket_gtd[low_pos];
      }
      // the new point becomes the new low
      bracket[low_pos] = t;
      bracket_f[low_pos] = f_new;
      bracket_g[low_pos] = g_new;
      bracket_gtd[low_pos] = gtd_new;
    }
  }
  return {bracket_f[low_pos], std::move(bracket_g[low_pos]), bracket[low_pos], evals};
}
}  // namespace

LBFGSOptions::LBFGSOptions(double lr) : lr_(lr) {}

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions options) : Optimizer("LBFGS"), options_(std::move(options)) {
  const LBFGSOptions& o = options_;
  XGRAD_CHECK(o.lr() > 0 && std::isfinite(o.lr()), "LBFGS: invalid learning rate {} (must be finite and > 0)", o.lr());
  XGRAD_CHECK(o.max_iter() >= 1, "LBFGS: argument 'max_iter' must be >= 1, got {}", o.max_iter());
  XGRAD_CHECK(o.max_eval() >= 1, "LBFGS: argument 'max_eval' must be >= 1, got {}", o.max_eval());
  XGRAD_CHECK(o.tolerance_grad() >= 0, "LBFGS: argument 'tolerance_grad' must be >= 0, got {}", o.tolerance_grad());
  XGRAD_CHECK(o.tolerance_change() >= 0, "LBFGS: argument 'tolerance_change' must be >= 0, got {}",
              o.tolerance_change());
  XGRAD_CHECK(o.history_size() >= 1, "LBFGS: argument 'history_size' must be >= 1, got {}", o.history_size());
  XGRAD_CHECK(!o.line_search_fn() || *o.line_search_fn() == "strong_wolfe",
              "LBFGS: argument 'line_search_fn' must be \"strong_wolfe\" or none, got \"{}\"",
              o.line_search_fn().value_or(""));
  init_groups({ParamGroup{std::move(params)}});
}

void LBFGS::fill_defaults(ParamGroup& g) const {
  reject_foreign(g, name_, option_names());
  if (!g.lr) g.lr = options_.lr();
}

void LBFGS::validate(const ParamGroup& g, std::size_t index) const {
  XGRAD_CHECK(groups_.empty() || index == 0, "LBFGS: parameter groups are not supported (there can be only one)");
  XGRAD_CHECK(*g.lr > 0 && std::isfinite(*g.lr), "LBFGS: invalid learning rate {} (must be finite and > 0)", *g.lr);
}

void LBFGS::step() {
  XGRAD_CHECK(false, "LBFGS: step() needs a closure that re-evaluates the model: call step(closure)");
}

std::int64_t LBFGS::numel() const {
  std::int64_t n = 0;
  for (const auto& p : groups_[0].params) n += p.numel();
  return n;
}

LBFGS::Vec LBFGS::gather_flat_grad() const {
  Vec out;
  out.reserve(static_cast<std::size_t>(numel()));
  for (const auto& p : groups_[0].params) {
    const Tensor g = checked_grad(p);
    if (!g.defined()) {
      out.insert(out.end(), static_cast<std::size_t>(p.numel()), 0.0);
      continue;
    }
    const std::vector<double> v = g.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void LBFGS::add_grad(double step_size, const Vec& update) {
  NoGradGuard no_grad;
  std::size_t offset = 0;
  for (auto& p : groups_[0].params) {
    dispatch(p.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = p.data<T>();
      for (std::int64_t i = 0; i < p.numel(); ++i)
        w[i] = static_cast<T>(static_cast<double>(w[i]) + step_size * update[offset + static_cast<std::size_t>(i)]);
    });
    offset += static_cast<std::size_t>(p.numel());
    bump_version(p);
  }
}

std::vector<Tensor> LBFGS::clone_params() const {
  std::vector<Tensor> out;
  for (const auto& p : groups_[0].params) out.push_back(p.clone_data());
  return out;
}

void LBFGS::set_params(const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Tensor& p = groups_[0].params[i];
    std::memcpy(p.raw_data(), values[i].raw_data(), p.nbytes());
    bump_version(p);
  }
}

double LBFGS::evaluate(const std::function<Tensor()>& closure) const {
  const Tensor loss = closure();
  XGRAD_CHECK(loss.defined() && loss.numel() == 1, "LBFGS: the closure must return the loss as a one-element tensor{}",
              loss.defined() ? fmt::format(", got shape {}", shape_str(loss.shape())) : std::string(", got undefined"));
  return loss.item();
}

Tensor LBFGS::step(const std::function<Tensor()>& closure) {
  XGRAD_CHECK(static_cast<bool>(closure), "LBFGS: step: the closure is empty");
  validate(groups_[0], 0);
  const double lr = *groups_[0].lr;
  const std::int64_t max_iter = options_.max_iter(), max_eval = options_.max_eval(),
                     history_size = options_.history_size();
  const double tolerance_grad = options_.tolerance_grad(), tolerance_change = options_.tolerance_change();

  // The first evaluation; the closure runs in grad mode whatever the caller's mode (as torch).
  Tensor orig_loss;
  {
    AutoGradMode grad_mode(true);
    orig_loss = closure();
  }
  XGRAD_CHECK(orig_loss.defined() && orig_loss.numel() == 1,
              "LBFGS: the closure must return the loss as a one-element tensor");
  double loss = orig_loss.item();
  std::int64_t current_evals = 1;
  func_evals_ += 1;
  Vec flat_grad = gather_flat_grad();
  bool opt_cond = abs_max(flat_grad) <= tolerance_grad;
  if (opt_cond) return orig_loss;

  auto grad_mode_closure = [&]() {
    AutoGradMode grad_mode(true);
    return evaluate(closure);
  };

  std::vector<double> al(static_cast<std::size_t>(history_size), 0.0);
  std::int64_t n_iter = 0;
  while (n_iter < max_iter) {
    ++n_iter;
    ++n_iter_;
    // ---- the descent direction ----
    if (n_iter_ == 1) {
      d_ = flat_grad;
      for (double& v : d_) v = -v;
      old_dirs_.clear();
      old_stps_.clear();
      ro_.clear();
      h_diag_ = 1;
    } else {
      Vec y = flat_grad, s = d_;
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = y[i] - prev_flat_grad_[i];
      for (double& v : s) v = v * t_;
      const double ys = dot(y, s);
      if (ys > 1e-10) {  // update the memory
        if (static_cast<std::int64_t>(old_dirs_.size()) == history_size) {
          old_dirs_.erase(old_dirs_.begin());
          old_stps_.erase(old_stps_.begin());
          ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y);
        old_stps_.push_back(s);
        ro_.push_back(1. / ys);
        h_diag_ = ys / dot(y, y);  // scale of the initial inverse Hessian
      }
      // Two-loop recursion: d = -H g.
      const std::size_t num_old = old_dirs_.size();
      Vec q = flat_grad;
      for (double& v : q) v = -v;
      for (std::size_t i = num_old; i-- > 0;) {
        al[i] = dot(old_stps_[i], q) * ro_[i];
        axpy(q, -al[i], old_dirs_[i]);
      }
      for (double& v : q) v = v * h_diag_;
      for (std::size_t i = 0; i < num_old; ++i) {
        const double be_i = dot(old_dirs_[i], q) * ro_[i];
        axpy(q, al[i] - be_i, old_stps_[i]);
      }
      d_ = std::move(q);
    }
    prev_flat_grad_ = flat_grad;
    prev_loss_ = loss;
    // ---- the step length ----
    t_ = n_iter_ == 1 ? py_min(1., 1. / abs_sum(flat_grad)) * lr : lr;
    const double gtd = dot(flat_grad, d_);  // directional derivative
    if (gtd > -tolerance_change) break;
    std::int64_t ls_func_evals = 0;
    if (options_.line_search_fn()) {
      const std::vector<Tensor> x_init = clone_params();
      auto obj_func = [&](double t) {
        add_grad(t, d_);
        const double f = grad_mode_closure();
        Vec g = gather_flat_grad();
        set_params(x_init);
        return std::pair<double, Vec>(f, std::move(g));
      };
      LineSearchResult r = strong_wolfe(obj_func, t_, d_, loss, flat_grad, gtd, tolerance_change);
      loss = r.f;
      flat_grad = std::move(r.g);
      t_ = r.t;
      ls_func_evals = r.evals;
      add_grad(t_, d_);
      opt_cond = abs_max(flat_grad) <= tolerance_grad;
    } else {
      add_grad(t_, d_);  // a fixed step
      if (n_iter != max_iter) {
        // Re-evaluated except in the last iteration (in a stochastic setting it would be wasted).
        loss = grad_mode_closure();
        flat_grad = gather_flat_grad();
        opt_cond = abs_max(flat_grad) <= tolerance_grad;
        ls_func_evals = 1;
      }
    }
    current_evals += ls_func_evals;
    func_evals_ += ls_func_evals;
    // ---- stopping conditions ----
    if (n_iter == max_iter) break;
    if (current_evals >= max_eval) break;
    if (opt_cond) break;
    double step_max = 0;  // lack of progress
    for (double v : d_) step_max = std::max(step_max, std::abs(v * t_));
    if (step_max <= tolerance_change) break;
    if (std::abs(loss - prev_loss_) < tolerance_change) break;
  }
  return orig_loss;
}

std::vector<std::pair<std::string, Tensor>> LBFGS::state_dict() const {
  auto out = Optimizer::state_dict();
  const auto n = static_cast<std::int64_t>(numel());
  const auto h = static_cast<std::int64_t>(old_dirs_.size());
  auto matrix = [&](const std::vector<Vec>& rows) {
    Vec flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    return Tensor::from_vector(flat, {h, n}, kFloat64);
  };
  auto scalar = [](double v) { return Tensor::scalar(v, kFloat64); };
  out.emplace_back("state.func_evals", scalar(static_cast<double>(func_evals_)));
  out.emplace_back("state.n_iter", scalar(static_cast<double>(n_iter_)));
  if (n_iter_ == 0) return out;
  out.emplace_back("state.t", scalar(t_));
  out.emplace_back("state.H_diag", scalar(h_diag_));
  out.emplace_back("state.prev_loss", scalar(prev_loss_));
  out.emplace_back("state.d", Tensor::from_vector(d_, {n}, kFloat64));
  out.emplace_back("state.prev_flat_grad", Tensor::from_vector(prev_flat_grad_, {n}, kFloat64));
  out.emplace_back("state.old_dirs", matrix(old_dirs_));
  out.emplace_back("state.old_stps", matrix(old_stps_));
  out.emplace_back("state.ro", Tensor::from_vector(ro_, {h}, kFloat64));
  return out;
}

void LBFGS::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const char* who = "LBFGS: load_state_dict";
  std::vector<std::pair<std::string, Tensor>> base;
  std::unordered_map<std::string, Tensor> own;
  for (const auto& [key, t] : state) {
    if (key.rfind("state.", 0) != 0) {
      base.emplace_back(key, t);
      continue;
    }
    XGRAD_CHECK(t.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    XGRAD_CHECK(own.emplace(key, t).second, "{}: entry '{}' appears twice", who, key);
  }
  const std::int64_t n = numel();
  auto get = [&](const char* key) -> const Tensor& {
    auto it = own.find(key);
    XGRAD_CHECK(it != own.end(), "{}: missing entry '{}'", who, key);
    return it->second;
  };
  auto count = [&](const char* key) {
    const Tensor& t = get(key);
    XGRAD_CHECK(t.numel() == 1 && t.item() >= 0 && t.item() == std::floor(t.item()),
                "{}: entry '{}' must be a count >= 0", who, key);
    return static_cast<std::int64_t>(t.item());
  };
  const std::int64_t func_evals = count("state.func_evals"), n_iter = count("state.n_iter");
  const std::size_t expected = n_iter == 0 ? 2 : 10;
  for (const auto& [key, t] : own) {
    static const char* known[] = {
        "state.func_evals", "state.n_iter",         "state.t",        "state.H_diag",   "state.prev_loss",
        "state.d",          "state.prev_flat_grad", "state.old_dirs", "state.old_stps", "state.ro"};
    XGRAD_CHECK(std::find_if(std::begin(known), std::end(known), [&key = key](const char* k) { return key == k; }) !=
                    std::end(known),
                "{}: unknown entry '{}'", who, key);
  }
  XGRAD_CHECK(own.size() == expected, "{}: {} state entries, expected {} for n_iter {}", who, own.size(), expected,
              n_iter);
  Vec d, prev, ro;
  std::vector<Vec> dirs, stps;
  double t = 0, h_diag = 1, prev_loss = 0;
  if (n_iter > 0) {
    auto vec = [&](const char* key, std::int64_t len) {
      const Tensor& v = get(key);
      XGRAD_CHECK(v.shape() == Shape{len}, "{}: entry '{}' must have shape ({}), got {}", who, key, len,
                  shape_str(v.shape()));
      return v.to_vector();
    };
    auto one = [&](const char* key) {
      const Tensor& v = get(key);
      XGRAD_CHECK(v.numel() == 1, "{}: entry '{}' must have one element", who, key);
      return v.item();
    };
    t = one("state.t");
    h_diag = one("state.H_diag");
    prev_loss = one("state.prev_loss");
    d = vec("state.d", n);
    prev = vec("state.prev_flat_grad", n);
    const Tensor& r = get("state.ro");
    XGRAD_CHECK(r.dim() == 1 && r.size(0) <= options_.history_size(),
                "{}: entry 'state.ro' must be 1-d with at most history_size ({}) values, got {}", who,
                options_.history_size(), shape_str(r.shape()));
    const std::int64_t h = r.size(0);
    ro = r.to_vector();
    auto rows = [&](const char* key) {
      const Tensor& m = get(key);
      XGRAD_CHECK(m.shape() == (Shape{h, n}), "{}: entry '{}' must have shape ({}, {}), got {}", who, key, h, n,
                  shape_str(m.shape()));
      const Vec flat = m.to_vector();
      std::vector<Vec> out;
      for (std::int64_t i = 0; i < h; ++i) out.emplace_back(flat.begin() + i * n, flat.begin() + (i + 1) * n);
      return out;
    };
    dirs = rows("state.old_dirs");
    stps = rows("state.old_stps");
  }
  Optimizer::load_state_dict(base);  // validates and sets the group options; throws before any change here
  func_evals_ = func_evals;
  n_iter_ = n_iter;
  t_ = t;
  h_diag_ = h_diag;
  prev_loss_ = prev_loss;
  d_ = std::move(d);
  prev_flat_grad_ = std::move(prev);
  ro_ = std::move(ro);
  old_dirs_ = std::move(dirs);
  old_stps_ = std::move(stps);
}

}  // namespace xgrad::nn
