// The arithmetic binary ops; the others of ops/elementwise.hpp are in ops/elementwise_*.cpp (Note
// [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/elementwise.hpp"

#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor add(const Tensor& a, const Tensor& b) { return promoted_binary<AddOp>(IntKind::add, a, b, &add); }
Tensor sub(const Tensor& a, const Tensor& b) { return promoted_binary<SubOp>(IntKind::sub, a, b, &sub); }
Tensor mul(const Tensor& a, const Tensor& b) { return promoted_binary<MulOp>(IntKind::mul, a, b, &mul); }
Tensor div(const Tensor& a, const Tensor& b) {
  // True division: integer operands are divided in float32 (torch: int / int is float32).
  if (involves_integer(a, b)) [[unlikely]] {
    Dtype c = promote_types(a.dtype(), b.dtype());
    if (!is_floating_point(c)) c = kFloat32;
    return apply<Binary<DivOp>>(a.to(c), b.to(c));
  }
  if (mixed_float(a, b)) [[unlikely]]
    return div(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<DivOp>>(a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  if (mixed_float(a, b)) [[unlikely]]
    return pow(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<PowOp>>(a, b);
}

}  // namespace xgrad
