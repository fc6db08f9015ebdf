// nn::Conv1d/Conv2d/ConvTranspose2d and the pooling layers (nn/conv.*, nn/pool.*): parameter shapes,
// torch's init bounds, forward = the op, errors. Reprs: tests/nn/test_module.cpp.
#include <cmath>
#include <sstream>

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
  test::require_error([] { nn::Conv2d(nn::ConvOptions(2, 4, {3}).padding_mode("mirror")); },
                      {"Conv2d", "padding_mode", "'zeros', 'reflect', 'replicate', 'circular'", "mirror"});
  test::require_error([] { nn::ConvTranspose1d(nn::ConvOptions(2, 4, {3}).padding_mode("reflect")); },
                      {"ConvTranspose1d", "padding_mode 'zeros'", "reflect"});
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

TEST_CASE("nn::ConvTranspose1d: shapes, init bound, forward is conv_transpose1d", "[nn][conv]") {
  Generator gen(4);
  nn::ConvTranspose1d ct(nn::ConvOptions(4, 6, {3}).stride({2}).padding(1).output_padding({1}).groups(2), 5);
  CHECK(ct.weight().shape() == Shape{4, 3, 3});
  CHECK(ct.bias().shape() == Shape{6});
  CHECK(max_abs(ct.weight()) <= 1 / std::sqrt(3.0 * 3));  // torch's fan_in: weight.size(1) * kernel
  const Tensor x = Tensor::randn({2, 4, 7}, gen);
  const Tensor y = ct(x);
  CHECK(y.shape() == Shape{2, 6, 14});  // (7 - 1) 2 - 2 + 2 + 1 + 1
  CHECK(bit_equal(y, conv_transpose1d(x, ct.weight(), ct.bias(), {2}, {1}, {1}, 2)));
  CHECK(nn::ConvTranspose1d(3, 2, 4)(Tensor::randn({3, 5}, gen)).shape() == Shape{2, 8});  // unbatched
  std::ostringstream repr;
  repr << ct;
  CHECK(repr.str() ==
        "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), output_padding=(1,), groups=2)");
}

TEST_CASE("Conv1d/Conv2d padding_mode reflect, replicate, circular match torch's layers", "[nn][conv][parity]") {
  test::ParityBatch batch("conv_padding_mode");
  Generator gen(5);
  for (const std::string mode : {"zeros", "reflect", "replicate", "circular"}) {
    // Conv2d with padding (1, 2), stride 2, dilation (1, 2); and padding "same" with an even kernel.
    auto c2 = std::make_shared<nn::Conv2d>(
        nn::ConvOptions(2, 3, {3}).padding({1, 2}).stride({2}).dilation({1, 2}).padding_mode(mode).dtype(kFloat64), 1);
    auto same = std::make_shared<nn::Conv2d>(
        nn::ConvOptions(2, 3, {2, 4}).padding("same").padding_mode(mode).bias(false).dtype(kFloat64), 2);
    auto c1 = std::make_shared<nn::Conv1d>(nn::ConvOptions(3, 2, {3}).padding(2).padding_mode(mode).dtype(kFloat64), 3);
    const Tensor x2 = Tensor::randn({2, 2, 6, 7}, gen, kFloat64), x1 = Tensor::randn({2, 3, 5}, gen, kFloat64);
    batch.add("conv2d_" + mode,
              "m = torch.nn.Conv2d(2, 3, 3, padding=(1, 2), stride=2, dilation=(1, 2), padding_mode='" + mode +
                  "').double()\nwith torch.no_grad():\n  m.weight.copy_(w)\n  m.bias.copy_(b)\nout = m(x)",
              {{"x", x2}, {"w", c2->weight(), false}, {"b", c2->bias(), false}},
              [c2](const Tensors& in) { return (*c2)(in[0]); });
    batch.add("conv2d_same_" + mode,
              "m = torch.nn.Conv2d(2, 3, (2, 4), padding='same', bias=False, padding_mode='" + mode +
                  "').double()\nwith torch.no_grad():\n  m.weight.copy_(w)\nout = m(x)",
              {{"x", x2}, {"w", same->weight(), false}}, [same](const Tensors& in) { return (*same)(in[0]); });
    batch.add("conv1d_" + mode,
              "m = torch.nn.Conv1d(3, 2, 3, padding=2, padding_mode='" + mode +
                  "').double()\nwith torch.no_grad():\n  m.weight.copy_(w)\n  m.bias.copy_(b)\nout = m(x)",
              {{"x", x1}, {"w", c1->weight(), false}, {"b", c1->bias(), false}},
              [c1](const Tensors& in) { return (*c1)(in[0]); });
  }
  batch.run();
}

TEST_CASE("padding_mode: repr, weight gradients, errors naming the layer", "[nn][conv]") {
  Generator gen(6);
  nn::Conv2d conv(nn::ConvOptions(2, 3, {3}).padding(1).padding_mode("circular"));
  std::ostringstream repr;
  repr << conv;
  CHECK(repr.str() == "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=circular)");
  const Tensor x = Tensor::randn({2, 2, 5, 4}, gen);
  // Circular padding by hand: wrap one row / column around each side, then a conv without padding.
  const Tensor rows = cat({slice(x, 2, 4, 5), x, slice(x, 2, 0, 1)}, 2);
  const Tensor wrapped = cat({slice(rows, 3, 3, 4), rows, slice(rows, 3, 0, 1)}, 3);
  CHECK(bit_equal(conv(x), conv2d(wrapped, conv.weight(), conv.bias())));
  sum(conv(x)).backward();
  CHECK(conv.weight().grad().defined());
  CHECK(conv.weight().grad().shape() == Shape{3, 2, 3, 3});
  nn::Conv1d wide(nn::ConvOptions(1, 1, {3}).padding(4).padding_mode("circular"));
  test::require_error([&] { wide(Tensor::zeros({1, 1, 3})); }, {"Conv1d", "circular", "(4, 4)", "size 3"});
  nn::Conv1d reflect(nn::ConvOptions(1, 1, {3}).padding(3).padding_mode("reflect"));
  test::require_error([&] { reflect(Tensor::zeros({1, 1, 3})); }, {"pad", "reflect"});
  test::require_error([&] { reflect(Tensor()); }, {"Conv1d", "undefined"});
}

TEST_CASE("MaxPool1d/2d forward_with_indices: the op's values and indices", "[nn][pool]") {
  Generator gen(7);
  const Tensor x = Tensor::randn({2, 3, 9, 8}, gen), x1 = Tensor::randn({2, 3, 11}, gen);
  nn::MaxPool2d p2(V{3}, V{2}, V{1});
  const Tensors r2 = p2.forward_with_indices(x), o2 = max_pool2d_with_indices(x, {3}, {2}, {1});
  REQUIRE(r2.size() == 2);
  CHECK(bit_equal(r2[0], p2(x)));
  CHECK(bit_equal(r2[1], o2[1]));
  CHECK(r2[1].dtype() == kInt64);
  nn::MaxPool1d p1(V{3}, V{}, V{1}, V{1}, true);
  const Tensors r1 = p1.forward_with_indices(x1), o1 = max_pool1d_with_indices(x1, {3}, {3}, {1}, {1}, true);
  CHECK(bit_equal(r1[0], p1(x1)));
  CHECK(bit_equal(r1[1], o1[1]));
  // Each index points at the maximum of its window in the input.
  const std::vector<double> xv = x1.to_vector(), vals = r1[0].to_vector(), idx = r1[1].to_vector();
  CHECK(r1[0].size(2) == 4);  // ceil((11 + 2 - 3) / 3) + 1 = 5, less the window starting in the padding
  for (std::size_t i = 0; i < vals.size(); ++i) CHECK(xv[(i / 4) * 11 + static_cast<std::size_t>(idx[i])] == vals[i]);
  test::require_error([&] { p2.forward_with_indices(Tensor::zeros({3})); }, {"max_pool2d"});
}
