// The trigonometric and hyperbolic ops of ops/unary_math.hpp: sin, cos, tan, asin, acos, atan, sinh,
// cosh (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp: xsimd's math for two dtypes per op).
#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct SinOp : pw::Def<"sin", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sin(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::cos(x); };
};
struct CosOp : pw::Def<"cos", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::cos(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * -pw::sin(x); };
};
struct TanOp : pw::Def<"tan", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::tan(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (lit(y, 1) + y * y); };
};
// d asin = 1/sqrt(1 - x^2), d acos = -1/sqrt(1 - x^2): inf at +-1, NaN outside (as torch)
struct AsinOp : pw::Def<"asin", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::asin(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g * (lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  };
};
struct AcosOp : pw::Def<"acos", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::acos(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g * -(lit(x, 1) / pw::sqrt(lit(x, 1) - x * x));
  };
};
struct AtanOp : pw::Def<"atan", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::atan(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / (x * x + lit(x, 1)); };
};
struct SinhOp : pw::Def<"sinh", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sinh(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::cosh(x); };
};
struct CoshOp : pw::Def<"cosh", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::cosh(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g * pw::sinh(x); };
};

}  // namespace

Tensor sin(const Tensor& x) { return detail::pw::run<SinOp>(x); }
Tensor cos(const Tensor& x) { return detail::pw::run<CosOp>(x); }
Tensor tan(const Tensor& x) { return detail::pw::run<TanOp>(x); }
Tensor asin(const Tensor& x) { return detail::pw::run<AsinOp>(x); }
Tensor acos(const Tensor& x) { return detail::pw::run<AcosOp>(x); }
Tensor atan(const Tensor& x) { return detail::pw::run<AtanOp>(x); }
Tensor sinh(const Tensor& x) { return detail::pw::run<SinhOp>(x); }
Tensor cosh(const Tensor& x) { return detail::pw::run<CoshOp>(x); }

}  // namespace xgrad
