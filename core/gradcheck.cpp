#include "xgrad/core/gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "xgrad/core/autograd.hpp"

namespace xgrad {

GradcheckReport gradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                          const GradcheckOptions& opt) {
  std::vector<std::size_t> diff;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "gradcheck: input {} is undefined", i);
    XGRAD_CHECK(inputs[i].dtype() == kFloat64, "gradcheck: input {} has dtype {}; gradcheck needs float64 inputs", i,
                inputs[i].dtype());
    if (inputs[i].requires_grad()) diff.push_back(i);
  }
  XGRAD_CHECK(!diff.empty(), "gradcheck: no input requires grad");

  const Tensor y0 = fn(inputs);
  XGRAD_CHECK(y0.defined() && y0.dtype() == kFloat64, "gradcheck: fn must return a float64 tensor");
  const std::int64_t m = y0.numel();

  // Analytic Jacobian, one vector-Jacobian product per output element.
  std::vector<std::vector<double>> analytic(diff.size());  // [input][out * n_in + elem]
  for (std::size_t k = 0; k < diff.size(); ++k)
    analytic[k].assign(static_cast<std::size_t>(m * inputs[diff[k]].numel()), 0.0);
  Tensors diff_inputs;
  for (auto i : diff) diff_inputs.push_back(inputs[i]);
  for (std::int64_t j = 0; j < m; ++j) {
    Tensor seed = Tensor::zeros(y0.shape(), kFloat64);
    seed.data<double>()[j] = 1.0;
    Tensor y = fn(inputs);
    XGRAD_CHECK(y.requires_grad(), "gradcheck: the output does not depend on any input that requires grad");
    Tensors g = grad({y}, diff_inputs, {seed}, false, /*create_graph=*/false, /*allow_unused=*/true);
    for (std::size_t k = 0; k < diff.size(); ++k) {
      if (!g[k].defined()) continue;
      const double* gp = g[k].data<double>();
      const std::int64_t n = inputs[diff[k]].numel();
      for (std::int64_t e = 0; e < n; ++e) analytic[k][static_cast<std::size_t>(j * n + e)] = gp[e];
    }
  }

  GradcheckReport rep;
  double worst_excess = -1.0;
  for (std::size_t k = 0; k < diff.size(); ++k) {
    Tensor x = inputs[diff[k]];
    double* xp = static_cast<double*>(x.raw_data());  // raw writes: no version bump, no graph
    const std::int64_t n = x.numel();
    for (std::int64_t e = 0; e < n; ++e) {
      const double orig = xp[e];
      Tensor yp, ym;
      {
        NoGradGuard ng;
        // clone_data: fn may return a view of an input (reshape), which the next write would change.
        xp[e] = orig + opt.eps;
        yp = fn(inputs).clone_data();
        xp[e] = orig - opt.eps;
        ym = fn(inputs).clone_data();
        xp[e] = orig;
      }
      const double* pp = yp.data<double>();
      const double* mp = ym.data<double>();
      for (std::int64_t j = 0; j < m; ++j) {
        const double num = (pp[j] - mp[j]) / (2 * opt.eps);
        const double ana = analytic[k][static_cast<std::size_t>(j * n + e)];
        const double err = std::abs(num - ana);
        const double excess = err - (opt.atol + opt.rtol * std::abs(num));
        if (!std::isfinite(ana) || !std::isfinite(num) || excess > worst_excess) {
          worst_excess = std::isfinite(excess) ? excess : INFINITY;
          rep.worst_input = diff[k];
          rep.worst_element = e;
          rep.worst_output = j;
          rep.analytic = ana;
          rep.numeric = num;
        }
        if (std::isfinite(err))
          rep.max_abs_error = std::max(rep.max_abs_error, err);
        else
          rep.max_abs_error = INFINITY;
      }
    }
  }
  rep.ok = worst_excess <= 0.0;
  rep.message = fmt::format(
      "gradcheck {}: max |analytic - numeric| = {:.3e}; worst at input {} element {} output {}: analytic {:.10g}, "
      "numeric {:.10g} (atol {}, rtol {})",
      rep.ok ? "passed" : "FAILED", rep.max_abs_error, rep.worst_input, rep.worst_element, rep.worst_output,
      rep.analytic, rep.numeric, opt.atol, opt.rtol);
  return rep;
}

namespace {
// The tensors flattened and concatenated into one vector (first-order backward only: gradgradcheck
// differentiates it once, never with create_graph). `anchor` (the seed v) is not in the output; it
// makes the output require grad when no gradient carries history (an op whose gradient is a
// constant, e.g. floor's zero), so that the check runs and finds the zero second derivative.
struct ConcatFlat : Function<ConcatFlat> {
  static constexpr const char* kName = "gradgradcheck_concat";
  std::vector<Shape> shapes;
  Shape anchor_shape;
  Tensor forward(const Tensors& xs, const Tensor& anchor) {
    anchor_shape = anchor.shape();
    std::int64_t n = 0;
    for (const auto& x : xs) {
      shapes.push_back(x.shape());
      n += x.numel();
    }
    Tensor out = Tensor::empty({n}, kFloat64);
    double* o = out.data<double>();
    for (const auto& x : xs) {
      const double* p = x.data<double>();
      o = std::copy(p, p + x.numel(), o);
    }
    return out;
  }
  Tensors backward(const Tensors& grads) {
    const double* g = grads[0].data<double>();
    Tensors out;
    for (const auto& s : shapes) {
      Tensor t = Tensor::empty(s, kFloat64);
      std::copy(g, g + t.numel(), t.data<double>());
      g += t.numel();
      out.push_back(t);
    }
    out.push_back(Tensor::zeros(anchor_shape, kFloat64));
    return out;
  }
};
}  // namespace

GradcheckReport gradgradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                              const GradcheckOptions& options, std::uint64_t seed) {
  std::vector<std::size_t> diff;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "gradgradcheck: input {} is undefined", i);
    XGRAD_CHECK(inputs[i].dtype() == kFloat64,
                "gradgradcheck: input {} has dtype {}; gradgradcheck needs float64 inputs", i, inputs[i].dtype());
    if (inputs[i].requires_grad()) diff.push_back(i);
  }
  XGRAD_CHECK(!diff.empty(), "gradgradcheck: no input requires grad");
  Tensor y0;
  {
    NoGradGuard ng;
    y0 = fn(inputs);
  }
  XGRAD_CHECK(y0.defined() && y0.dtype() == kFloat64, "gradgradcheck: fn must return a float64 tensor");
  // v: a fixed pseudo-random seed in [-1, 1] (a 64-bit LCG, so the check is reproducible).
  Tensor v = Tensor::empty(y0.shape(), kFloat64);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (std::int64_t j = 0; j < v.numel(); ++j) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v.data<double>()[j] = static_cast<double>(state >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  }
  v.set_requires_grad();
  Tensors all = inputs;
  all.push_back(v);
  const auto second = [&](const Tensors& in) {
    AutoGradMode grad_mode(true);  // gradcheck evaluates the numeric side under NoGradGuard
    const Tensors xs(in.begin(), in.end() - 1);
    const Tensor y = fn(xs);
    XGRAD_CHECK(y.defined() && y.shape() == in.back().shape(),
                "gradgradcheck: fn returned a tensor of shape {} at one evaluation and {} at another",
                y.defined() ? shape_str(y.shape()) : "undefined", shape_str(in.back().shape()));
    Tensors wrt;
    for (auto i : diff) wrt.push_back(xs[i]);
    Tensors g(wrt.size());
    if (y.requires_grad())
      g = grad({y}, wrt, {in.back()}, /*retain_graph=*/std::nullopt, /*create_graph=*/true, /*allow_unused=*/true);
    for (std::size_t k = 0; k < g.size(); ++k)
      if (!g[k].defined()) g[k] = Tensor::zeros(wrt[k].shape(), kFloat64);
    return apply<ConcatFlat>(g, in.back());
  };
  GradcheckReport rep = gradcheck(second, all, options);
  rep.message = "gradgradcheck (the gradient of the gradient; input " + std::to_string(inputs.size()) +
                " is the output seed v): " + rep.message;
  return rep;
}

}  // namespace xgrad
