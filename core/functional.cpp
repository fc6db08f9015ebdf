#include "xgrad/core/functional.hpp"

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {

namespace {
Tensors leaf_copies(const Tensors& inputs, const char* op) {
  Tensors out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "{}: input {} is an undefined tensor", op, i);
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
  if (out.requires_grad()) g = grad({out}, xs, {v}, false, true);
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
    const Tensors g = grad({output}, inputs, {seed.clone_data()}, /*retain_graph=*/true, /*allow_unused=*/true);
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

}  // namespace xgrad
