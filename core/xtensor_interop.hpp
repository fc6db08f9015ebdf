#pragma once
// Exchange with xtensor: copy an xt::xarray / xt::xtensor / any expression into a Tensor, and view
// or copy a Tensor as an xtensor container. Header-only templates.
//
// An opt-in header: neither xgrad/xgrad.hpp nor xgrad/core/core.hpp includes it, and no other xgrad
// header includes xtensor, xtl or xsimd. A file that exchanges data with xtensor includes it itself.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// Copies an xtensor expression (evaluated row-major) into a new tensor of dtype_of<value_type>: float,
/// double, std::int64_t, std::int32_t, std::uint8_t or bool.
template <class E>
Tensor from_xtensor(const xt::xexpression<E>& expr) {
  using T = typename E::value_type;
  const xt::xarray<T, xt::layout_type::row_major> a = expr.derived_cast();
  Shape shape;
  for (const auto d : a.shape()) shape.push_back(checked_size(d, "from_xtensor", "expr"));
  return Tensor::from_data<T>(std::span<const T>(a.data(), a.size()), shape);
}

/// A non-owning xtensor view of t's data (valid while t's storage lives). T must match t.dtype().
template <class T>
auto as_xtensor(Tensor& t) {
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(), shape);
}

/// An owning copy as xt::xarray<T> (converting dtype when needed).
template <class T>
xt::xarray<T> to_xarray(const Tensor& t) {
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  xt::xarray<T> out(shape);
  const Tensor c = t.dtype() == dtype_of<T>() ? t : t.detach().to(dtype_of<T>());
  std::copy(c.data<T>(), c.data<T>() + c.numel(), out.data());
  return out;
}

}  // namespace xgrad
