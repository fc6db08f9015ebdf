// maximum, minimum, where, masked_select and the comparisons (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor maximum(const Tensor& a, const Tensor& b) {
  if (involves_integer(a, b)) [[unlikely]]
    return int_promoted_binary(IntKind::maximum, "maximum", a, b, &maximum);
  if (mixed_float(a, b)) [[unlikely]]
    return maximum(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<MaxOp>>(a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  if (involves_integer(a, b)) [[unlikely]]
    return int_promoted_binary(IntKind::minimum, "minimum", a, b, &minimum);
  if (mixed_float(a, b)) [[unlikely]]
    return minimum(a.to(kFloat64), b.to(kFloat64));
  return apply<Binary<MinOp>>(a, b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (involves_integer(a, b)) [[unlikely]] {
    XGRAD_CHECK(cond.defined(), "where: argument 'cond' is an undefined tensor");
    const Dtype c = promote_types(a.dtype(), b.dtype());
    if (is_floating_point(c)) return apply<Where>(cond, a.to(c), b.to(c));
    return where_integer(cond, a.to(c), b.to(c));
  }
  return apply<Where>(cond, a, b);
}
Tensor masked_select(const Tensor& x, const Tensor& mask) { return apply<MaskedSelect>(x, mask); }
// The comparisons, logical ops and masked_fill are in elementwise_dtype.cpp.

}  // namespace xgrad
