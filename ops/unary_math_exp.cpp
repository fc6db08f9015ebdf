// The exponential, logarithmic and error-function ops of ops/unary_math.hpp: log1p, expm1, log2,
// log10, erf, erfc (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include <numbers>

#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct Log1pOp : pw::Def<"log1p", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log1p(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / (x + lit(x, 1)); };
};
struct Expm1Op : pw::Def<"expm1", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::expm1(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (y + lit(y, 1)); };
};
struct Log2Op : pw::Def<"log2", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log2(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln2));
  };
};
struct Log10Op : pw::Def<"log10", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log10(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return g / (x * lit(x, std::numbers::ln10));
  };
};
// d erf = 2/sqrt(pi) * e^(-x^2)
struct ErfOp : pw::Def<"erf", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::erf(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return lit(x, std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  };
};
// d erfc = -2/sqrt(pi) * e^(-x^2); the C library's erfc (Note in pointwise.hpp, lanewise)
struct ErfcOp : pw::Def<"erfc", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) {
    using V = std::remove_cvref_t<decltype(x)>;
    return pw::lanewise(x, [](pw::elem_t<V> v) { return std::erfc(v); });
  };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) {
    return lit(x, -std::numbers::inv_sqrtpi * 2) * pw::exp(-(x * x)) * g;
  };
};

}  // namespace

Tensor log1p(const Tensor& x) { return detail::pw::run<Log1pOp>(x); }
Tensor expm1(const Tensor& x) { return detail::pw::run<Expm1Op>(x); }
Tensor log2(const Tensor& x) { return detail::pw::run<Log2Op>(x); }
Tensor log10(const Tensor& x) { return detail::pw::run<Log10Op>(x); }
Tensor erf(const Tensor& x) { return detail::pw::run<ErfOp>(x); }
Tensor erfc(const Tensor& x) { return detail::pw::run<ErfcOp>(x); }

}  // namespace xgrad
