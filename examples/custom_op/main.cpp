// custom_op: add your own differentiable op in one file, check its gradient, and train with it.
// docs/extending.md walks through this file step by step.
//
// The op: SiLU (a.k.a. swish), y = x * sigmoid(x), with
//   dy/dx = s + x * s * (1 - s),   s = sigmoid(x).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "xgrad/xgrad.hpp"

using namespace xgrad;

// The backward is an op of its own, given twice on purpose: as a fast kernel (plain loops) and as
// a formula of differentiable ops. apply_fused runs the kernel in an ordinary backward and the
// formula when the gradient will be differentiated again (create_graph), so one backward serves
// first and second order (Note [Fused ops] in xgrad/core/fused.hpp). The built-in ops do the same.
struct SiluBackward {
  static constexpr const char* kName = "my_silu_backward";
  // dx = g * (s + x * s * (1 - s)), s = sigmoid(x), in one pass over the data.
  static Tensor kernel(const Tensor& g, const Tensor& x) {
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *xs = x.data<T>(), *gs = g.data<T>();
      T* out = gx.data<T>();
      parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          const T s = T(1) / (T(1) + std::exp(-xs[i]));
          out[i] = gs[i] * (s + xs[i] * s * (T(1) - s));
        }
      });
    });
    return gx;
  }
  // The same with public ops, which record themselves: differentiable to any order.
  static Tensor formula(const Tensor& g, const Tensor& x) {
    const Tensor s = sigmoid(x);
    return g * (s + x * s * (1.0 - s));
  }
};

// Step 1: the op is a struct deriving from Function<Self>. Its members are what backward needs.
struct Silu : Function<Silu> {
  static constexpr const char* kName = "my_silu";  // used in error messages and graph printing
  // backward runs SiluBackward through apply_fused, whose formula is differentiable: create_graph
  // (second derivatives, Hessian-vector products) may go through this op.
  static constexpr bool kDifferentiableBackward = true;

  // Step 2: forward runs in no-grad mode and computes the result with plain loops over the data
  // (any float type: dispatch picks float or double at run time). It saves x for backward.
  Tensor forward(const Tensor& x) {
    XGRAD_CHECK(x.defined(), "my_silu: argument 'x' is an undefined tensor");
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* xs = x.data<T>();
      T* ys = y.data<T>();
      // parallel_for splits [0, n) into chunks of at least `grain` elements across TBB threads;
      // each element is computed by exactly one task, so the result does not depend on threads.
      parallel_for(0, x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ys[i] = xs[i] / (T(1) + std::exp(-xs[i]));
      });
    });
    save_for_backward({x});
    return y;
  }

  // Step 3: backward gets the gradient of the loss with respect to each output and returns the
  // gradient with respect to each tensor input (undefined where needs_input_grad(i) is false).
  Tensors backward(const Tensors& grads) {
    if (!needs_input_grad(0)) return {Tensor()};
    // saved(0) throws if x was modified in place after forward. Every tensor the formula reads is
    // an argument, so that apply_fused sees whether any of them carries history.
    return {apply_fused<SiluBackward>(grads[0], saved(0))};
  }
};

// Step 4: the public function. apply<> runs forward and records the op on the tape when x
// requires grad.
// (xgrad ships its own xgrad::silu; this one is named my_silu so that the two do not clash.)
Tensor my_silu(const Tensor& x) { return apply<Silu>(x); }

int main(int argc, char** argv) {
  int steps = 500;
  std::uint64_t seed = 0;
  CLI::App app{"custom_op: a user-defined op (SiLU) with its own forward and backward, gradchecked and trained"};
  app.add_option("--steps", steps, "training steps")->capture_default_str();
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Step 5: check the hand-written backward against central differences, in float64.
  Generator gen(seed);
  Tensor x = Tensor::randn({4, 5}, gen, kFloat64).set_requires_grad();
  const GradcheckReport report = gradcheck([](const Tensors& in) { return my_silu(in[0]); }, {x});
  std::printf("gradcheck: %s (max abs error %.2e)\n", report.ok ? "passed" : "FAILED", report.max_abs_error);
  if (!report.ok) {
    std::printf("%s\n", report.message.c_str());
    return 1;
  }
  // The second derivative goes through SiluBackward's formula: gradgradcheck compares it with
  // central differences of the kernel.
  const GradcheckReport report2 = gradgradcheck([](const Tensors& in) { return my_silu(in[0]); }, {x});
  std::printf("gradgradcheck: %s (max abs error %.2e)\n", report2.ok ? "passed" : "FAILED", report2.max_abs_error);
  if (!report2.ok) {
    std::printf("%s\n", report2.message.c_str());
    return 1;
  }
  // ... and against the library's own op.
  if (!allclose(my_silu(x), xgrad::silu(x), 1e-12, 1e-14)) {
    std::fprintf(stderr, "custom_op: my_silu differs from xgrad::silu\n");
    return 1;
  }

  // Step 6: use it like any built-in op: a 1-16-1 network with SiLU fits tanh(3x) (x^2 + 1/2).
  Tensor xs = Tensor::rand({128, 1}, gen) * 2.0 - 1.0, ys = tanh(xs * 3.0) * (xs * xs + 0.5);
  Tensor w1 = (Tensor::randn({1, 16}, gen)).set_requires_grad(), b1 = Tensor::zeros({16}).set_requires_grad();
  Tensor w2 = (Tensor::randn({16, 1}, gen) * 0.25).set_requires_grad(), b2 = Tensor::zeros({1}).set_requires_grad();
  nn::Adam opt({w1, b1, w2, b2}, nn::AdamOptions(0.02));
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(matmul(my_silu(matmul(xs, w1) + b1), w2) + b2, ys);
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
    if (step % 100 == 0) std::printf("step %4d  loss %.6f\n", step, last);
  }
  std::printf("loss %.6f -> %.6f\n", first, last);
  if (!(last < first / 10)) {
    std::fprintf(stderr, "custom_op: FAILED: the loss fell from %.6f to %.6f, not tenfold (try more --steps)\n", first,
                 last);
    return 1;
  }
  return 0;
}
