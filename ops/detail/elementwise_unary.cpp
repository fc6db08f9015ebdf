// neg, exp, log, sqrt and the forms with a number (ops/elementwise.hpp).
#include "xgrad/ops/detail/elementwise_impl.hpp"
#include "xgrad/ops/detail/pointwise.hpp"

namespace xgrad {

using namespace detail::ew;  // NOLINT(google-build-using-namespace): the op structs

namespace {
bool is_integer(const Tensor& t) { return t.defined() && !is_floating_point(t.dtype()); }

using detail::pw::lit;
using detail::pw::NoParams;
using detail::pw::Saves;
namespace pw = detail::pw;

struct NegOp {
  static constexpr const char* kName = "neg";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = NoParams;
  template <class V>
  static V f(const V& x, const Params&) {
    return -x;
  }
  template <class V>
  static V df(const V& g, const V&, const Params&) {
    return -g;
  }
};
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
// a (op) s for a number s, taken in a's dtype (no 0-d tensor for s): the same float operations as
// the broadcasting tensor form, so the same bits.
struct Number {
  double s = 0;
};
struct AddNumberOp {
  static constexpr const char* kName = "add";
  static constexpr Saves kSaves = Saves::nothing;
  static constexpr bool kPassGrad = true;
  using Params = Number;
  template <class V>
  static V f(const V& x, const Params& p) {
    return x + lit(x, p.s);
  }
};
struct SubNumberOp {
  static constexpr const char* kName = "sub";
  static constexpr Saves kSaves = Saves::nothing;
  static constexpr bool kPassGrad = true;
  using Params = Number;
  template <class V>
  static V f(const V& x, const Params& p) {
    return x - lit(x, p.s);
  }
};
struct MulNumberOp {
  static constexpr const char* kName = "mul";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = Number;
  template <class V>
  static V f(const V& x, const Params& p) {
    return x * lit(x, p.s);
  }
  template <class V>
  static V df(const V& g, const V&, const Params& p) {
    return g * lit(g, p.s);
  }
};
struct DivNumberOp {
  static constexpr const char* kName = "div";
  static constexpr Saves kSaves = Saves::nothing;
  using Params = Number;
  template <class V>
  static V f(const V& x, const Params& p) {
    return x / lit(x, p.s);
  }
  template <class V>
  static V df(const V& g, const V&, const Params& p) {
    return g / lit(g, p.s);
  }
};
// s / x: dx = -g*s/x^2, as DivOp::db with a = s
struct NumberDivOp {
  static constexpr const char* kName = "div";
  static constexpr Saves kSaves = Saves::input;
  using Params = Number;
  template <class V>
  static V f(const V& x, const Params& p) {
    return lit(x, p.s) / x;
  }
  template <class V>
  static V df(const V& g, const V& x, const Params& p) {
    return -g * lit(x, p.s) / (x * x);
  }
};
}  // namespace

Tensor add(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::add, "add", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&add));
  return pw::run<AddNumberOp>(a, Number{b});
}
Tensor sub(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::sub, "sub", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&sub));
  return pw::run<SubNumberOp>(a, Number{b});
}
Tensor mul(const Tensor& a, double b) {
  if (is_integer(a)) [[unlikely]]
    return int_scalar(IntKind::mul, "mul", a, b, static_cast<Tensor (*)(const Tensor&, double)>(&mul));
  return pw::run<MulNumberOp>(a, Number{b});
}
// Division of an integer tensor is true division in float32.
Tensor div(const Tensor& a, double b) { return pw::run<DivNumberOp>(is_integer(a) ? a.to(kFloat32) : a, Number{b}); }
Tensor operator/(double a, const Tensor& b) {
  return pw::run<NumberDivOp>(is_integer(b) ? b.to(kFloat32) : b, Number{a});
}
Tensor neg(const Tensor& x) {
  if (is_integer(x)) [[unlikely]]
    return int_neg(x);
  return pw::run<NegOp>(x);
}
Tensor exp(const Tensor& x) { return pw::run<ExpOp>(x); }
Tensor log(const Tensor& x) { return pw::run<LogOp>(x); }
Tensor sqrt(const Tensor& x) { return pw::run<SqrtOp>(x); }

}  // namespace xgrad
