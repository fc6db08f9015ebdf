// The arithmetic binary ops; the others are in ops/detail/elementwise_*.cpp (Note [Elementwise build
// time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/elementwise.hpp"

#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor add(const Tensor& a, const Tensor& b) { return apply<Binary<AddOp>>(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return apply<Binary<SubOp>>(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return apply<Binary<MulOp>>(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return apply<Binary<DivOp>>(a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return apply<Binary<PowOp>>(a, b); }

}  // namespace xgrad
