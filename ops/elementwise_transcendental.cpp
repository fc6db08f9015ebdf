// The transcendental pointwise ops of ops/elementwise.hpp: exp, log, sqrt, tanh and sigmoid, as
// Pointwise ops (Note [One formula] in ops/detail/pointwise.hpp) on xsimd's math; the others are in
// elementwise_arithmetic.cpp (Note [Elementwise build time] in ops/detail/elementwise_impl.hpp).
#include "xgrad/ops/detail/pointwise.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad {

namespace {

using namespace detail::pw::words;  // NOLINT(google-build-using-namespace): Note [One formula]

struct ExpOp {
  static constexpr const char* kName = "exp";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::exp(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * y;
  }
};
struct LogOp {
  static constexpr const char* kName = "log";
  static constexpr Saves kSaves = Saves::input;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::log(x);
  }
  template <class V>
  static V df(const V& g, const V& x, const Params&) {
    return g / x;
  }
};
struct SqrtOp {
  static constexpr const char* kName = "sqrt";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::sqrt(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g / (lit(y, 2) * y);
  }
};
struct TanhOp {
  static constexpr const char* kName = "tanh";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::tanh(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * (lit(y, 1) - y * y);
  }
};
// 1/(1 + e^-x), as torch's vectorised kernel: e^-x = inf gives 0, never NaN
struct SigmoidOp {
  static constexpr const char* kName = "sigmoid";
  static constexpr Saves kSaves = Saves::output;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return pw::sigmoid(x);
  }
  template <class V>
  static V df(const V& g, const V& y, const Params&) {
    return g * y * (lit(y, 1) - y);
  }
};
}  // namespace

Tensor exp(const Tensor& x) { return pw::run<ExpOp>(x); }
Tensor log(const Tensor& x) { return pw::run<LogOp>(x); }
Tensor sqrt(const Tensor& x) { return pw::run<SqrtOp>(x); }
Tensor tanh(const Tensor& x) { return pw::run<TanhOp>(x); }
Tensor sigmoid(const Tensor& x) { return pw::run<SigmoidOp>(x); }

}  // namespace xgrad
