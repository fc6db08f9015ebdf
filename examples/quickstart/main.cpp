// Fits y = x^2 on [-2, 2) with a 1-32-1 tanh network and plain SGD, printing the loss as it falls.
#include <cstdio>
#include <vector>

#include "xgrad/xgrad.hpp"

using namespace xgrad;

int main() {
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
  return losses.back() < losses.front() / 10 ? 0 : 1;  // exit status: did the loss fall tenfold?
}
