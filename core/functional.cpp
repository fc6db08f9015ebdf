#include "xgrad/core/functional.hpp"

#include <string>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {

namespace {
Tensors leaf_copies(const Tensors& inputs, const char* op) {
  Tensors out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "{}: input {} is an undefined tensor", op, i);
    XGRAD_CHECK(is_floating_point(inputs[i].dtype()),
                "{}: argument 'inputs': input {} is {} of shape {}; only float32 and float64 tensors have "
                "gradients (convert it with .to(kFloat64))",
                op, i, dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
    out.push_back(inputs[i].clone_data().set_requires_grad());
  }
  return out;
}
}  // namespace

std::pair<Tensor, Tensors> vjp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                               const Tensor& v) {
  const Tensors xs = leaf_copies(inputs, "vjp");
  Tensor out = fn(xs);
  XGRAD_CHECK(out.defined(), "vjp: the function returned an undefined tensor");
  XGRAD_CHECK(v.defined() && v.shape() == out.shape() && v.dtype() == out.dtype(),
              "vjp: argument 'v' must have the output's shape {} and dtype {}, got {}", shape_str(out.shape()),
              out.dtype(), v.defined() ? shape_str(v.shape()) : std::string("undefined"));
  Tensors g(xs.size());
  if (out.requires_grad()) g = grad({out}, xs, {v}, false, /*create_graph=*/false, /*allow_unused=*/true);
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (!g[i].defined()) g[i] = Tensor::zeros(xs[i].shape(), xs[i].dtype());
  return {out.detach(), g};
}

std::vector<double> jacobian_matrix(const Tensor& output, const Tensors& inputs) {
  XGRAD_CHECK(output.defined(), "jacobian: the output is an undefined tensor");
  const std::int64_t m = output.numel();
  std::int64_t n = 0, mn = 0;
  for (const auto& x : inputs)
    XGRAD_CHECK(!__builtin_add_overflow(n, x.numel(), &n), "jacobian: the inputs' sizes overflow");
  XGRAD_CHECK(!__builtin_mul_overflow(m, n, &mn), "jacobian: a Jacobian of {} x {} entries overflows int64", m, n);
  std::vector<double> J(static_cast<std::size_t>(mn), 0.0);
  if (!output.requires_grad() || m == 0) return J;
  Tensor seed = Tensor::zeros(output.shape(), output.dtype());
  for (std::int64_t i = 0; i < m; ++i) {
    seed.fill_(0.0);
    dispatch(seed.dtype(), [&](auto tag) { seed.data<typename decltype(tag)::type>()[i] = 1; });
    const Tensors g = grad({output}, inputs, {seed.clone_data()}, /*retain_graph=*/true, /*create_graph=*/false,
                           /*allow_unused=*/true);
    std::int64_t col = 0;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (g[k].defined()) {
        const std::vector<double> row = g[k].to_vector();
        std::copy(row.begin(), row.end(), J.begin() + i * n + col);
      }
      col += inputs[k].numel();
    }
  }
  return J;
}

Tensors jacobian(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs) {
  const Tensors xs = leaf_copies(inputs, "jacobian");
  const Tensor out = fn(xs);
  XGRAD_CHECK(out.defined(), "jacobian: the function returned an undefined tensor");
  const std::vector<double> J = jacobian_matrix(out, xs);
  const std::int64_t m = out.numel();
  std::int64_t n = 0;
  for (const auto& x : xs) n += x.numel();
  Tensors result;
  std::int64_t col = 0;
  for (const auto& x : xs) {
    Shape shape = out.shape();
    shape.insert(shape.end(), x.shape().begin(), x.shape().end());
    std::vector<double> block(static_cast<std::size_t>(m * x.numel()));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < x.numel(); ++j)
        block[static_cast<std::size_t>(i * x.numel() + j)] = J[static_cast<std::size_t>(i * n + col + j)];
    result.push_back(Tensor::from_vector(block, shape, x.dtype()));
    col += x.numel();
  }
  return result;
}

namespace {
void check_like(const Tensors& v, const Tensors& inputs, const char* op) {
  XGRAD_CHECK(v.size() == inputs.size(), "{}: argument 'v' has {} tensors for {} inputs", op, v.size(), inputs.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    XGRAD_CHECK(v[i].defined() && v[i].shape() == inputs[i].shape() && v[i].dtype() == inputs[i].dtype(),
                "{}: argument 'v' tensor {} must have input {}'s shape {} and dtype {}, got {}", op, i, i,
                shape_str(inputs[i].shape()), inputs[i].dtype(),
                v[i].defined() ? shape_str(v[i].shape()) + " " + std::string(dtype_name(v[i].dtype()))
                               : std::string("undefined"));
}

Tensor scalar_output(const std::function<Tensor(const Tensors&)>& fn, const Tensors& xs, const char* op) {
  Tensor out = fn(xs);
  XGRAD_CHECK(out.defined(), "{}: the function returned an undefined tensor", op);
  XGRAD_CHECK(out.numel() == 1, "{}: the function must return a one-element tensor, got shape {}", op,
              shape_str(out.shape()));
  return out;
}

// grad(outputs, wrt, seeds) over the pairs whose output carries history (the others contribute 0),
// zeros where nothing flows.
Tensors grad_or_zeros(const Tensors& outputs, const Tensors& wrt, const Tensors& seeds, bool create_graph) {
  Tensors outs, sds;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].defined() && outputs[i].requires_grad()) {
      outs.push_back(outputs[i]);
      sds.push_back(seeds[i]);
    }
  Tensors g(wrt.size());
  if (!outs.empty()) g = grad(outs, wrt, sds, /*retain_graph=*/true, create_graph, /*allow_unused=*/true);
  for (std::size_t k = 0; k < wrt.size(); ++k)
    if (!g[k].defined()) g[k] = Tensor::zeros(wrt[k].shape(), wrt[k].dtype());
  return g;
}
}  // namespace

std::pair<Tensor, Tensor> jvp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                              const Tensors& v) {
  AutoGradMode grad_mode(true);
  const Tensors xs = leaf_copies(inputs, "jvp");
  check_like(v, xs, "jvp");
  const Tensor out = fn(xs);
  XGRAD_CHECK(out.defined(), "jvp: the function returned an undefined tensor");
  if (!out.requires_grad()) return {out.detach(), Tensor::zeros(out.shape(), out.dtype())};
  Tensor u = Tensor::zeros(out.shape(), out.dtype()).set_requires_grad();  // the dummy seed
  const Tensors g = grad_or_zeros({out}, xs, {u}, /*create_graph=*/true);  // J^T u, linear in u
  const Tensors jv = grad_or_zeros(g, {u}, v, /*create_graph=*/false);     // d(v . J^T u)/du = J v
  return {out.detach(), jv[0]};
}

std::pair<Tensor, Tensors> vhp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                               const Tensors& v) {
  AutoGradMode grad_mode(true);
  const Tensors xs = leaf_copies(inputs, "vhp");
  check_like(v, xs, "vhp");
  const Tensor out = scalar_output(fn, xs, "vhp");
  Tensors r(xs.size());
  if (out.requires_grad()) {
    const Tensors g = grad_or_zeros({out}, xs, {Tensor()}, /*create_graph=*/true);
    r = grad_or_zeros(g, xs, v, /*create_graph=*/false);
  } else {
    for (std::size_t i = 0; i < xs.size(); ++i) r[i] = Tensor::zeros(xs[i].shape(), xs[i].dtype());
  }
  return {out.detach(), r};
}

std::pair<Tensor, Tensors> hvp(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                               const Tensors& v) {
  AutoGradMode grad_mode(true);
  const Tensors xs = leaf_copies(inputs, "hvp");
  check_like(v, xs, "hvp");
  const Tensor out = scalar_output(fn, xs, "hvp");
  Tensors r(xs.size());
  if (out.requires_grad()) {
    const Tensors g = grad_or_zeros({out}, xs, {Tensor()}, /*create_graph=*/true);  // the gradient
    Tensors u;                                                                      // dummy seeds for g
    for (const auto& x : xs) u.push_back(Tensor::zeros(x.shape(), x.dtype()).set_requires_grad());
    const Tensors uh = grad_or_zeros(g, xs, u, /*create_graph=*/true);  // u^T H, linear in u
    r = grad_or_zeros(uh, u, v, /*create_graph=*/false);                // d(u^T H v)/du = H v
  } else {
    for (std::size_t i = 0; i < xs.size(); ++i) r[i] = Tensor::zeros(xs[i].shape(), xs[i].dtype());
  }
  return {out.detach(), r};
}

std::vector<Tensors> hessian(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs) {
  AutoGradMode grad_mode(true);
  const Tensors xs = leaf_copies(inputs, "hessian");
  const Tensor out = scalar_output(fn, xs, "hessian");
  Tensors g(xs.size());
  if (out.requires_grad()) g = grad({out}, xs, {}, /*retain_graph=*/true, /*create_graph=*/true, /*allow_unused=*/true);
  std::int64_t n = 0;
  for (const auto& x : xs) n += x.numel();
  std::vector<Tensors> result(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::int64_t ni = xs[i].numel();
    std::vector<double> rows(static_cast<std::size_t>(ni * n), 0.0);
    if (g[i].defined() && g[i].requires_grad()) rows = jacobian_matrix(g[i], xs);  // (ni, n)
    std::int64_t col = 0;
    for (std::size_t j = 0; j < xs.size(); ++j) {
      const std::int64_t nj = xs[j].numel();
      std::vector<double> block(static_cast<std::size_t>(ni * nj));
      for (std::int64_t a = 0; a < ni; ++a)
        for (std::int64_t b = 0; b < nj; ++b)
          block[static_cast<std::size_t>(a * nj + b)] = rows[static_cast<std::size_t>(a * n + col + b)];
      Shape shape = xs[i].shape();
      shape.insert(shape.end(), xs[j].shape().begin(), xs[j].shape().end());
      result[i].push_back(Tensor::from_vector(block, shape, xs[i].dtype()));
      col += nj;
    }
  }
  return result;
}

}  // namespace xgrad
