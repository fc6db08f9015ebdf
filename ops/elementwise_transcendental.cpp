// The transcendental pointwise ops of ops/elementwise.hpp: exp, log, sqrt, tanh and sigmoid, as
// Pointwise ops (Note [One formula] in ops/detail/pointwise.hpp) on xsimd's math; the others are in
// elementwise_arithmetic.cpp (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct ExpOp : pw::Def<"exp", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::exp(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * y; };
};
struct LogOp : pw::Def<"log", Saves::input> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::log(x); };
  static constexpr auto df = [](const auto& g, const auto& x, const Params&) { return g / x; };
};
struct SqrtOp : pw::Def<"sqrt", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sqrt(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g / (lit(y, 2) * y); };
};
struct TanhOp : pw::Def<"tanh", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::tanh(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * (lit(y, 1) - y * y); };
};
// 1/(1 + e^-x), as torch's vectorised kernel: e^-x = inf gives 0, never NaN
struct SigmoidOp : pw::Def<"sigmoid", Saves::output> {
  static constexpr auto f = [](const auto& x, const Params&) { return pw::sigmoid(x); };
  static constexpr auto df = [](const auto& g, const auto& y, const Params&) { return g * y * (lit(y, 1) - y); };
};
}  // namespace

Tensor exp(const Tensor& x) { return pw::run<ExpOp>(x); }
Tensor log(const Tensor& x) { return pw::run<LogOp>(x); }
Tensor sqrt(const Tensor& x) { return pw::run<SqrtOp>(x); }
Tensor tanh(const Tensor& x) { return pw::run<TanhOp>(x); }
Tensor sigmoid(const Tensor& x) { return pw::run<SigmoidOp>(x); }

}  // namespace xgrad
