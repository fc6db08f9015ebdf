// maximum, minimum, where, masked_select, the comparisons, the logical ops and masked_fill
// (ops/elementwise.hpp); the integer and bool kernels are in ops/detail/elementwise_dtype.cpp.
#include <cmath>

#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor maximum(const Tensor& a, const Tensor& b) { return promoted_binary<MaxOp>(IntKind::maximum, a, b, &maximum); }
Tensor minimum(const Tensor& a, const Tensor& b) { return promoted_binary<MinOp>(IntKind::minimum, a, b, &minimum); }
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

Tensor gt(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::gt, "gt", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::lt, "lt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::ge, "ge", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::le, "le", a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_any(CmpKind::ne, "ne", a, b); }

Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(LogicalKind::and_, "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(LogicalKind::or_, "logical_or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(LogicalKind::xor_, "logical_xor", a, b); }
Tensor logical_not(const Tensor& x) {
  XGRAD_CHECK(x.defined(), "logical_not: argument 'x' is an undefined tensor");
  const Tensor b = x.detach().to(kBool);
  Tensor out = Tensor::empty(b.shape(), kBool);
  const bool* p = b.data<bool>();
  bool* o = out.data<bool>();
  parallel_for(0, b.numel(), kParallelGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) o[i] = !p[i];
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  XGRAD_CHECK(x.defined() && mask.defined(), "masked_fill: argument '{}' is an undefined tensor",
              x.defined() ? "mask" : "x");
  // torch takes a bool mask; torch 1.13 ignores a float one silently, later versions refuse it.
  XGRAD_CHECK(!is_floating_point(mask.dtype()),
              "masked_fill: argument 'mask' has dtype {} (shape {}): a mask must be bool (or an integer dtype, "
              "nonzero = fill); compare first, e.g. masked_fill(x, mask != 0, value)",
              mask.dtype(), shape_str(mask.shape()));
  XGRAD_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(),
              "masked_fill: mask of shape {} must broadcast to x's shape {}", shape_str(mask.shape()),
              shape_str(x.shape()));
  return where(mask, Tensor::scalar(value, x.dtype()), x);
}

namespace detail {

Tensor comparison_operand(const Tensor& x, double value) {
  if (x.defined() && is_floating_point(x.dtype())) return Tensor::scalar(value, x.dtype());
  if (!x.defined()) return Tensor::scalar(value);  // the op then names the undefined argument
  const bool whole = std::isfinite(value) && std::trunc(value) == value && std::abs(value) < 0x1p63;
  return Tensor::scalar(value, whole ? kInt64 : kFloat32);
}

Tensor comparison_operand(const Tensor& x, std::int64_t value) {
  if (x.defined() && is_floating_point(x.dtype())) return Tensor::scalar(static_cast<double>(value), x.dtype());
  return Tensor::from_vector(std::vector<std::int64_t>{value}, {});
}

void check_bool_operands(const char* op, const Tensor& a, const Tensor& b) {
  const bool unary = &a == &b;
  const char* what = unary ? "its operand" : "both operands";
  XGRAD_CHECK(a.defined() && b.defined(), "{}: {} must be defined bool tensors; got an undefined tensor", op, what);
  if (unary) {
    XGRAD_CHECK(a.dtype() == kBool,
                "{}: its operand must be a bool tensor (bitwise not of {} is not implemented); got {} {}; use "
                "logical_not for truth values",
                op, a.dtype(), a.dtype(), shape_str(a.shape()));
    return;
  }
  XGRAD_CHECK(a.dtype() == kBool && b.dtype() == kBool,
              "{}: both operands must be bool tensors (bitwise ops on integers are not implemented); got a: {} {} and "
              "b: {} {}; use logical_and/logical_or/logical_xor for truth values of any dtype",
              op, a.dtype(), shape_str(a.shape()), b.dtype(), shape_str(b.shape()));
}

}  // namespace detail
}  // namespace xgrad
