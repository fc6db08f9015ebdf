// maximum, minimum, where, masked_select and the comparisons (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor maximum(const Tensor& a, const Tensor& b) { return apply<Binary<MaxOp>>(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return apply<Binary<MinOp>>(a, b); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return apply<Where>(cond, a, b); }
Tensor masked_select(const Tensor& x, const Tensor& mask) { return apply<MaskedSelect>(x, mask); }
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor eq(const Tensor& a, const Tensor& b) {
  return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}

}  // namespace xgrad
