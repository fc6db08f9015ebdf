// neg, exp, log, sqrt and the forms with a number (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

Tensor add(const Tensor& a, double b) { return apply<ScalarOp<ScalarKind::add>>(a, b); }
Tensor sub(const Tensor& a, double b) { return apply<ScalarOp<ScalarKind::sub>>(a, b); }
Tensor mul(const Tensor& a, double b) { return apply<ScalarOp<ScalarKind::mul>>(a, b); }
Tensor div(const Tensor& a, double b) { return apply<ScalarOp<ScalarKind::div>>(a, b); }
Tensor operator/(double a, const Tensor& b) { return apply<ScalarOp<ScalarKind::rdiv>>(b, a); }
Tensor neg(const Tensor& x) { return apply<Unary<NegOp>>(x); }
Tensor exp(const Tensor& x) { return apply<Unary<ExpOp>>(x); }
Tensor log(const Tensor& x) { return apply<Unary<LogOp>>(x); }
Tensor sqrt(const Tensor& x) { return apply<Unary<SqrtOp>>(x); }

}  // namespace xgrad
