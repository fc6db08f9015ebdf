// nn::Conv1d/Conv2d/ConvTranspose2d and the pooling layers (nn/conv.*, nn/pool.*): parameter shapes,
// torch's init bounds, forward = the op, errors. Reprs: tests/nn/test_module.cpp.
#include <cmath>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/conv.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/pool.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;
using V = std::vector<std::int64_t>;

namespace {
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::abs(v));
  return m;
}
}  // namespace

TEST_CASE("nn::Conv2d: parameters, torch's init bounds, forward is conv2d", "[nn][conv]") {
  nn::Conv2d conv(nn::ConvOptions(4, 6, {3, 2}).stride({2}).padding(1).groups(2), 7);
  CHECK(conv.weight().shape() == Shape{6, 2, 3, 2});
  CHECK(conv.bias().shape() == Shape{6});
  CHECK(conv.named_parameters().size() == 2);
  const double bound = 1 / std::sqrt(2.0 * 3 * 2);  // fan_in = in / groups * kernel
  CHECK(max_abs(conv.weight()) <= bound);
  CHECK(max_abs(conv.weight()) > 0.5 * bound);
  CHECK(max_abs(conv.bias()) <= bound);
  Generator gen(1);
  const Tensor x = Tensor::randn({3, 4, 8, 7}, gen);
  CHECK(bit_equal(conv(x), conv2d(x, conv.weight(), conv.bias(), {2}, 1, {1}, 2)));
  nn::Conv2d same(nn::ConvOptions(4, 5, {4}).padding("same").bias(false));
  CHECK(!same.bias().defined());
  CHECK(same(x).shape() == Shape{3, 5, 8, 7});
}

TEST_CASE("nn::Conv1d and nn::ConvTranspose2d: shapes and forward", "[nn][conv]") {
  Generator gen(2);
  nn::Conv1d c1(3, 8, 5);
  CHECK(c1.weight().shape() == Shape{8, 3, 5});
  CHECK(c1(Tensor::randn({2, 3, 20}, gen)).shape() == Shape{2, 8, 16});
  nn::ConvTranspose2d ct(nn::ConvOptions(4, 6, {3}).stride({2}).padding(1).output_padding({1}).groups(2));
  CHECK(ct.weight().shape() == Shape{4, 3, 3, 3});
  CHECK(max_abs(ct.weight()) <= 1 / std::sqrt(3.0 * 9));  // torch's fan_in: weight.size(1) * kernel
  const Tensor x = Tensor::randn({2, 4, 5, 6}, gen);
  const Tensor y = ct(x);
  CHECK(y.shape() == Shape{2, 6, 10, 12});
  CHECK(bit_equal(y, conv_transpose2d(x, ct.weight(), ct.bias(), {2}, {1}, {1}, 2)));
}

TEST_CASE("conv layers refuse bad options with messages naming the layer", "[nn][conv]") {
  test::require_error([] { nn::Conv2d(nn::ConvOptions(3, 4, {3}).groups(2)); }, {"Conv2d", "groups = 2", "3"});
  test::require_error([] { nn::Conv2d(nn::ConvOptions(2, 4, {3}).padding_mode("reflect")); },
                      {"Conv2d", "padding_mode", "reflect"});
  test::require_error([] { nn::Conv2d(nn::ConvOptions(2, 4, {0})); }, {"Conv2d", "kernel_size", "0"});
  test::require_error([] { nn::Conv2d(nn::ConvOptions(2, 4, {3}).stride({2}).padding("same")); },
                      {"Conv2d", "\"same\"", "stride"});
  test::require_error([] { nn::ConvTranspose2d(nn::ConvOptions(2, 4, {3}).padding("same")); },
                      {"ConvTranspose2d", "padding", "same"});
  test::require_error([] { nn::Conv1d(nn::ConvOptions(2, 4, {3, 3})); }, {"Conv1d", "kernel_size", "2"});
  test::require_error([] { nn::Conv2d(nn::ConvOptions(-1, 4, {3})); }, {"Conv2d", "in = -1"});
  nn::Conv2d conv(2, 4, 3);
  test::require_error([&] { conv(Tensor::zeros({1, 3, 5, 5})); }, {"conv2d", "(1, 3, 5, 5)", "channels"});
}

TEST_CASE("pooling layers: forward is the op", "[nn][pool]") {
  Generator gen(3);
  const Tensor x = Tensor::randn({2, 3, 9, 8}, gen), x1 = Tensor::randn({2, 3, 11}, gen);
  CHECK(bit_equal(nn::MaxPool2d(V{3}, V{2}, V{1})(x), max_pool2d(x, {3}, {2}, {1})));
  CHECK(nn::MaxPool2d(V{2})(x).shape() == Shape{2, 3, 4, 4});
  CHECK(bit_equal(nn::MaxPool1d(V{3}, V{}, V{1}, V{1}, true)(x1), max_pool1d(x1, {3}, {3}, {1}, {1}, true)));
  CHECK(bit_equal(nn::AvgPool2d(V{2, 3}, V{}, V{1}, false, false, 4)(x),
                  avg_pool2d(x, {2, 3}, {}, {1}, false, false, 4)));
  CHECK(bit_equal(nn::AvgPool1d(V{3}, V{2})(x1), avg_pool1d(x1, {3}, {2})));
  CHECK(nn::AdaptiveAvgPool2d(V{1})(x).shape() == Shape{2, 3, 1, 1});
  CHECK(bit_equal(nn::AdaptiveAvgPool1d(V{4})(x1), adaptive_avg_pool1d(x1, {4})));
  test::require_error([&] { nn::MaxPool2d(V{0})(x); }, {"max_pool2d", "'kernel_size'"});
}

TEST_CASE("a small CNN learns: conv, relu, pool, flatten, linear", "[nn][conv]") {
  // Two classes of 8 x 8 images: a bright square in the top-left or in the bottom-right corner.
  Generator gen(11);
  const std::int64_t n = 32;
  Tensor x = Tensor::randn({n, 1, 8, 8}, gen, kFloat32).mul_(0.1);
  std::vector<std::int64_t> labels(n);
  float* p = x.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    labels[i] = i % 2;
    const std::int64_t off = labels[i] ? 4 : 0;
    for (std::int64_t r = 0; r < 4; ++r)
      for (std::int64_t c = 0; c < 4; ++c) p[i * 64 + (off + r) * 8 + off + c] += 1;
  }
  nn::Sequential net({std::make_shared<nn::Conv2d>(nn::ConvOptions(1, 4, {3}).padding(1)), std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::MaxPool2d>(V{2}), std::make_shared<nn::Flatten>(),
                      std::make_shared<nn::Linear>(64, 2)});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    for (auto& [name, prm] : net.named_parameters()) prm.zero_grad();
    const Tensor loss = cross_entropy(net(x), labels);
    if (step == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    for (auto& [name, prm] : net.named_parameters()) {
      NoGradGuard guard;
      Tensor q = prm;
      q.add_(prm.grad(), -0.5);
    }
  }
  CHECK(last < 0.2 * first);
}
