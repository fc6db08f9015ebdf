// Fits y = x^2 on [-2, 2) with a 1-32-1 tanh network and plain SGD, printing the loss as it falls.
#include <cstdio>
#include <string_view>
#include <vector>

#include "xgrad/xgrad.hpp"

using namespace xgrad;

int main(int argc, char** argv) {
  if (argc > 1) {  // it takes no options: say so rather than ignore them
    std::printf("usage: %s  (no options; exits 0 when the loss fell tenfold)\n", argv[0]);
    return std::string_view(argv[1]) == "--help" ? 0 : 2;
  }
  Generator gen(0);  // fixed seed: the same numbers on every machine
  Tensor x = Tensor::rand({256, 1}, gen) * 4.0 - 2.0, y = x * x;
  auto param = [&](const Shape& shape, double scale) {
    return (Tensor::randn(shape, gen) * scale).set_requires_grad();
  };
  Tensor w1 = param({1, 32}, 1.0), b1 = param({32}, 0.5), w2 = param({32, 1}, 0.2), b2 = param({1}, 0.0);
  std::vector<double> losses;
  for (int step = 0; step <= 2000; ++step) {
    Tensor loss = mean(pow(matmul(tanh(matmul(x, w1) + b1), w2) + b2 - y, 2.0));
    loss.backward();
    NoGradGuard no_grad;  // the update is not recorded
    for (Tensor p : {w1, b1, w2, b2}) p.add_(p.grad(), -0.05).zero_grad();
    losses.push_back(loss.item());
    if (step % 200 == 0) std::printf("step %4d  loss %.6f\n", step, losses.back());
  }
  if (losses.back() < losses.front() / 10) return 0;
  std::fprintf(stderr, "quickstart: FAILED: the loss fell from %f to %f, not tenfold\n", losses.front(), losses.back());
  return 1;
}
