// Tests for ops/unary_math.* and ops/activation.* beyond their op-table entries (tests/ops/
// op_table.cpp): special and extreme values against torch (halves for round, signed zeros, NaN and
// infinities, the sign rules of fmod and remainder, activations far out in both tails and at their
// kinks), and the accuracy of the vectorised kernels against the C library.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/unary_math.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using UnaryFn = std::function<Tensor(const Tensor&)>;
struct Case {
  const char* name;
  UnaryFn fn;
  const char* torch;  // with the input bound to x
};

Tensor vec(const std::vector<double>& v, Dtype dt) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, dt);
}

// Distance in units in the last place between two finite values of type T.
template <class T>
double ulps(T got, T want) {
  if (got == want) return 0;
  const T gap = std::nextafter(std::abs(want), std::numeric_limits<T>::infinity()) - std::abs(want);
  return static_cast<double>(std::abs(static_cast<long double>(got) - want) / gap);
}

}  // namespace

TEST_CASE("unary math: special values (signed zeros, halves, NaN, infinities) match torch", "[unary_math][parity]") {
  ParityBatch batch("unary_math_special");
  batch.set_equal_nonfinite();
  const std::vector<double> any = {-kInf, -1e6, -100.5, -2.5, -1.5, -1.0, -0.5,  -1e-12, -0.0, 0.0, 1e-12,
                                   0.5,   1.0,  1.5,    2.5,  3.5,  7.0,  100.5, 1e6,    kInf, kNaN};
  const std::vector<Case> cases = {
      {"sin", [](auto& x) { return sin(x); }, "torch.sin(x)"},
      {"cos", [](auto& x) { return cos(x); }, "torch.cos(x)"},
      {"tan", [](auto& x) { return tan(x); }, "torch.tan(x)"},
      {"asin", [](auto& x) { return asin(x); }, "torch.asin(x)"},
      {"acos", [](auto& x) { return acos(x); }, "torch.acos(x)"},
      {"atan", [](auto& x) { return atan(x); }, "torch.atan(x)"},
      {"sinh", [](auto& x) { return sinh(x); }, "torch.sinh(x)"},
      {"cosh", [](auto& x) { return cosh(x); }, "torch.cosh(x)"},
      {"log1p", [](auto& x) { return log1p(x); }, "torch.log1p(x)"},
      {"expm1", [](auto& x) { return expm1(x); }, "torch.expm1(x)"},
      {"log2", [](auto& x) { return log2(x); }, "torch.log2(x)"},
      {"log10", [](auto& x) { return log10(x); }, "torch.log10(x)"},
      {"erf", [](auto& x) { return erf(x); }, "torch.erf(x)"},
      {"erfc", [](auto& x) { return erfc(x); }, "torch.erfc(x)"},
      {"rsqrt", [](auto& x) { return rsqrt(x); }, "torch.rsqrt(x)"},
      {"reciprocal", [](auto& x) { return reciprocal(x); }, "torch.reciprocal(x)"},
      {"sign", [](auto& x) { return sign(x); }, "torch.sign(x)"},
      {"floor", [](auto& x) { return floor(x); }, "torch.floor(x)"},
      {"ceil", [](auto& x) { return ceil(x); }, "torch.ceil(x)"},
      {"round", [](auto& x) { return round(x); }, "torch.round(x)"},
      {"trunc", [](auto& x) { return trunc(x); }, "torch.trunc(x)"},
      {"round_decimals", [](auto& x) { return round(x, 1); }, "torch.round(x, decimals=1)"},
      {"round_decimals_negative", [](auto& x) { return round(x, -1); }, "torch.round(x, decimals=-1)"},
      {"clamp_min", [](auto& x) { return clamp_min(x, 0.5); }, "torch.clamp_min(x, 0.5)"},
      {"clamp_max", [](auto& x) { return clamp_max(x, -0.5); }, "torch.clamp_max(x, -0.5)"},
      {"fmod_scalar", [](auto& x) { return fmod(x, -1.5); }, "torch.fmod(x, -1.5)"},
      {"remainder_scalar", [](auto& x) { return remainder(x, -1.5); }, "torch.remainder(x, -1.5)"},
      {"remainder_zero", [](auto& x) { return remainder(x, 0.0); }, "torch.remainder(x, 0.0)"},
  };
  for (Dtype dt : {kFloat32, kFloat64})
    for (const auto& c : cases) {
      const Tensor x = vec(any, dt);
      batch.add(fmt::format("{}_{}", c.name, dtype_name(dt)), fmt::format("out = {}", c.torch), {{"x", x, false}},
                [fn = c.fn](const Tensors& in) { return fn(in[0]); });
    }
  batch.run();
  // the signs of zeros, which allclose cannot see
  const Tensor z = vec({-0.0, 0.0, -0.4, 0.4}, kFloat64);
  for (const auto& [name, y] : std::vector<std::pair<const char*, Tensor>>{
           {"round", round(z)}, {"trunc", trunc(z)}, {"ceil", ceil(z)}, {"sign", sign(z)}}) {
    INFO(name);
    const auto v = y.to_vector();
    CHECK(std::signbit(v[0]) == (std::string(name) != "sign"));  // torch.sign(-0.0) is +0.0
    CHECK_FALSE(std::signbit(v[1]));
  }
  CHECK(std::signbit(round(z).to_vector()[2]));  // round(-0.4) = -0.0
  CHECK(std::signbit(ceil(z).to_vector()[2]));
}

TEST_CASE("fmod and remainder: the sign rules and b = 0 match torch, values and gradients", "[unary_math][parity]") {
  ParityBatch batch("fmod_remainder_signs");
  batch.set_equal_nonfinite();
  const std::vector<double> a = {5.0, -5.0, 5.0, -5.0, 5.5, 0.0, -0.0, 3.0, -3.0, 7.25, -7.25, 1.0};
  const std::vector<double> b = {3.0, 3.0, -3.0, -3.0, 2.0, 2.0, -2.0, kInf, kInf, 0.5, -0.5, 0.0};
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor ta = vec(a, dt), tb = vec(b, dt);
    batch.add(fmt::format("fmod_{}", dtype_name(dt)), "out = torch.fmod(a, b)", {{"a", ta, false}, {"b", tb, false}},
              [](const Tensors& in) { return fmod(in[0], in[1]); });
    batch.add(fmt::format("remainder_{}", dtype_name(dt)), "out = torch.remainder(a, b)",
              {{"a", ta, false}, {"b", tb, false}}, [](const Tensors& in) { return remainder(in[0], in[1]); });
    // gradients away from the jumps and from b = 0
    const Tensor ga = vec({5.2, -5.2, 5.2, -5.2, 0.3, -0.3}, dt), gb = vec({3.0, 3.0, -3.0, -3.0, 0.7, -0.7}, dt);
    batch.add(fmt::format("fmod_grad_{}", dtype_name(dt)), "out = torch.fmod(a, b)", {{"a", ga}, {"b", gb}},
              [](const Tensors& in) { return fmod(in[0], in[1]); });
    batch.add(fmt::format("remainder_grad_{}", dtype_name(dt)), "out = torch.remainder(a, b)", {{"a", ga}, {"b", gb}},
              [](const Tensors& in) { return remainder(in[0], in[1]); });
    const Tensor y = vec({0.0, -0.0, 1.0, -1.0, 0.0, kInf}, dt), x = vec({0.0, 0.0, 0.0, -1.0, -1.0, kInf}, dt);
    batch.add(fmt::format("atan2_{}", dtype_name(dt)), "out = torch.atan2(a, b)", {{"a", y, false}, {"b", x, false}},
              [](const Tensors& in) { return atan2(in[0], in[1]); });
  }
  batch.run();
}

TEST_CASE("activations: far tails, kinks and thresholds match torch, values and gradients", "[activation][parity]") {
  ParityBatch batch("activation_extremes");
  batch.set_equal_nonfinite();
  const std::vector<double> xs = {-1000, -100, -30, -20.5, -5, -1,   -1e-8, 0,   1e-8,
                                  0.5,   1,    5,   19.9,  20, 20.1, 30,    100, 1000};
  const std::string F = "torch.nn.functional.";
  const std::vector<Case> cases = {
      {"gelu", [](auto& x) { return gelu(x); }, "gelu(x)"},
      {"gelu_tanh", [](auto& x) { return gelu(x, "tanh"); }, "gelu(x, approximate='tanh')"},
      {"silu", [](auto& x) { return silu(x); }, "silu(x)"},
      {"softplus", [](auto& x) { return softplus(x); }, "softplus(x)"},
      {"softplus_beta", [](auto& x) { return softplus(x, -0.5, 5.0); }, "softplus(x, beta=-0.5, threshold=5.0)"},
      {"mish", [](auto& x) { return mish(x); }, "mish(x)"},
      {"leaky_relu", [](auto& x) { return leaky_relu(x, 0.1); }, "leaky_relu(x, 0.1)"},
      {"elu", [](auto& x) { return elu(x, 0.7); }, "elu(x, alpha=0.7)"},
      {"selu", [](auto& x) { return selu(x); }, "selu(x)"},
      {"hardtanh", [](auto& x) { return hardtanh(x, -1.0, 0.5); }, "hardtanh(x, -1.0, 0.5)"},
      {"logsigmoid", [](auto& x) { return logsigmoid(x); }, "logsigmoid(x)"},
  };
  for (Dtype dt : {kFloat32, kFloat64})
    for (const auto& c : cases) {
      std::vector<double> v = xs;
      if (std::string(c.name) == "hardtanh") v.insert(v.end(), {-1.0, 0.5});  // the boundaries: no gradient
      batch.add(fmt::format("{}_{}", c.name, dtype_name(dt)), fmt::format("out = {}{}", F, c.torch),
                {{"x", vec(v, dt)}}, [fn = c.fn](const Tensors& in) { return fn(in[0]); });
    }
  batch.run();
}

TEST_CASE("unary math: the vectorised kernels are within a few ulp of the C library", "[unary_math][accuracy]") {
  struct Ref {
    const char* name;
    UnaryFn fn;
    double (*ref)(double);
    double lo, hi;
  };
  const std::vector<Ref> refs = {
      {"sin", [](auto& x) { return sin(x); }, [](double v) { return std::sin(v); }, -100, 100},
      {"cos", [](auto& x) { return cos(x); }, [](double v) { return std::cos(v); }, -100, 100},
      {"tan", [](auto& x) { return tan(x); }, [](double v) { return std::tan(v); }, -1.5, 1.5},
      {"asin", [](auto& x) { return asin(x); }, [](double v) { return std::asin(v); }, -1, 1},
      {"acos", [](auto& x) { return acos(x); }, [](double v) { return std::acos(v); }, -1, 1},
      {"atan", [](auto& x) { return atan(x); }, [](double v) { return std::atan(v); }, -50, 50},
      {"sinh", [](auto& x) { return sinh(x); }, [](double v) { return std::sinh(v); }, -20, 20},
      {"cosh", [](auto& x) { return cosh(x); }, [](double v) { return std::cosh(v); }, -20, 20},
      {"log1p", [](auto& x) { return log1p(x); }, [](double v) { return std::log1p(v); }, -0.99, 10},
      {"expm1", [](auto& x) { return expm1(x); }, [](double v) { return std::expm1(v); }, -10, 10},
      {"log2", [](auto& x) { return log2(x); }, [](double v) { return std::log2(v); }, 1e-3, 1e3},
      {"log10", [](auto& x) { return log10(x); }, [](double v) { return std::log10(v); }, 1e-3, 1e3},
      {"erf", [](auto& x) { return erf(x); }, [](double v) { return std::erf(v); }, -6, 6},
      {"erfc", [](auto& x) { return erfc(x); }, [](double v) { return std::erfc(v); }, -3, 9},
      {"rsqrt", [](auto& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 1e-3, 1e3},
  };
  const std::int64_t n = 20001;
  for (const auto& r : refs) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = r.lo + (r.hi - r.lo) * i / (n - 1);
    double worst32 = 0, worst64 = 0;
    const auto y32 = r.fn(vec(v, kFloat32)).to_vector(), y64 = r.fn(vec(v, kFloat64)).to_vector();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float x32 = static_cast<float>(v[i]);
      const double want32 = r.ref(static_cast<double>(x32));  // the float input's exact value, in double
      if (std::isfinite(want32) && std::abs(want32) > 1e-30)
        worst32 = std::max(worst32, ulps(static_cast<float>(y32[i]), static_cast<float>(want32)));
      const double want64 = r.ref(v[i]);
      if (std::isfinite(want64) && std::abs(want64) > 1e-300) worst64 = std::max(worst64, ulps(y64[i], want64));
    }
    INFO(r.name << ": worst float32 error " << worst32 << " ulp, float64 " << worst64 << " ulp");
    CHECK(worst32 <= 4);
    CHECK(worst64 <= 4);
  }
}
