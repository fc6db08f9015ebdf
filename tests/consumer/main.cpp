// Uses an installed xgrad from all three layers and checks a gradient against its closed form.
// Exit status 0 only when every check passes.
#include <cmath>
#include <cstdio>
#include <vector>

#include "xgrad/xgrad.hpp"

namespace {

// A layer from the nn layer with one parameter, so the consumer links core, ops and nn.
struct Scale : xgrad::nn::Module {
  Scale() : Module("Scale") { w = register_parameter("w", xgrad::Tensor::of({0.5, -1.0, 2.0}, xgrad::kFloat64)); }
  xgrad::Tensor forward(const xgrad::Tensor& x) const { return xgrad::tanh(w * x) + w * w; }
  xgrad::Tensor w;
};

}  // namespace

int main() {
  using xgrad::Tensor;
  int failures = 0;
  auto expect = [&failures](bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failures;
  };

  Scale layer;
  const Tensor x = Tensor::of({1.0, 2.0, -3.0}, xgrad::kFloat64);
  // y = tanh(w x) + w^2, so dy/dw = x (1 - tanh(w x)^2) + 2 w, elementwise.
  const Tensor y = layer.forward(x);
  y.backward(Tensor::ones(y.shape(), xgrad::kFloat64));

  const std::vector<double> w = layer.w.to_vector(), xs = x.to_vector(), g = layer.w.grad().to_vector();
  double max_err = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double t = std::tanh(w[i] * xs[i]);
    max_err = std::fmax(max_err, std::fabs(g[i] - (xs[i] * (1 - t * t) + 2 * w[i])));
  }
  std::printf("max |grad - closed form| = %.3g\n", max_err);
  expect(max_err < 1e-12, "gradient of tanh(w x) + w^2 matches its closed form");
  expect(layer.num_parameters() == 3, "nn::Module counts its parameters");

  bool threw = false;
  try {
    (void)xgrad::add(x, Tensor::zeros({2}, xgrad::kFloat64));  // shapes (3) and (2) do not broadcast
  } catch (const xgrad::Error&) {
    threw = true;
  }
  expect(threw, "bad shapes throw xgrad::Error");

  // run_consumer_test.cmake configures without a build type, as docs/getting-started.md's recipe
  // is used: its CMakeLists.txt must make that an optimised (Release) build, not CMake's -O0.
#ifdef __OPTIMIZE__
  constexpr bool optimised = true;
#else
  constexpr bool optimised = false;
#endif
  expect(optimised, "compiled with optimisation when no build type is given (the recipe's default: Release)");
  return failures == 0 ? 0 : 1;
}
