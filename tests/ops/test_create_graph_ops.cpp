// Second derivatives of convolution, batch normalization, cross-entropy and max pooling against
// torch.autograd.grad(..., create_graph=True) (Note [Create graph] in core/autograd.hpp). Each case's
// output is a first gradient computed with create_graph, seeded by the input v; the parity harness
// then backpropagates into it, so the compared gradients are second derivatives (with respect to
// every input, v included). The op table's gradgradcheck covers every entry against finite
// differences; these check the same recorded backwards against the peer.
#include "support.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/normalization.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/unary_math.hpp"

using namespace xgrad;

namespace {
// The gradient of f(inputs[0..n)) with respect to input `wrt`, seeded by inputs[n], recorded.
std::function<Tensor(const Tensors&)> first(std::function<Tensor(const Tensors&)> f, std::size_t n, std::size_t wrt) {
  return [f = std::move(f), n, wrt](const Tensors& in) {
    const Tensors xs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    const Tensor y = f(xs);
    return xgrad::grad({y}, {xs[wrt]}, {in[n]}, std::nullopt, false, true)[0];
  };
}
std::string grad_of(const std::string& x) { return "out = torch.autograd.grad(y, " + x + ", v, create_graph=True)[0]"; }
}  // namespace

TEST_CASE("second derivatives of conv, batch_norm, cross_entropy and max_pool match torch", "[create_graph][parity]") {
  Generator gen(41);
  test::ParityBatch batch("create_graph_ops");
  {
    // grouped, strided, padded conv2d with a bias under tanh: d/da and d/dw, each differentiated again
    const Tensor a = Tensor::randn({2, 4, 5, 6}, gen, kFloat64), w = Tensor::randn({6, 2, 3, 2}, gen, kFloat64),
                 b = Tensor::randn({6}, gen, kFloat64), v = Tensor::randn({2, 6, 3, 4}, gen, kFloat64);
    const std::string Y = "y = torch.tanh(torch.nn.functional.conv2d(a, w, b, stride=2, padding=1, groups=2))\n";
    const auto f = [](const Tensors& in) { return tanh(conv2d(in[0], in[1], in[2], {2}, 1, {1}, 2)); };
    batch.add("conv2d_dx", Y + grad_of("a"), {{"a", a}, {"w", w}, {"b", b}, {"v", v}}, first(f, 3, 0));
    batch.add("conv2d_dw", Y + grad_of("w"), {{"a", a}, {"w", w}, {"b", b}, {"v", v}}, first(f, 3, 1));
    batch.add("conv2d_db", Y + grad_of("b"), {{"a", a}, {"w", w}, {"b", b}, {"v", v}}, first(f, 3, 2));
  }
  {
    // conv_transpose1d, dilated and with output_padding
    const Tensor a = Tensor::randn({2, 4, 5}, gen, kFloat64), w = Tensor::randn({4, 3, 3}, gen, kFloat64),
                 v = Tensor::randn({2, 3, 12}, gen, kFloat64);
    const std::string Y =
        "y = torch.tanh(torch.nn.functional.conv_transpose1d(a, w, stride=2, padding=1, output_padding=1, "
        "dilation=2))\n";
    const auto f = [](const Tensors& in) {
      return tanh(conv_transpose1d(in[0], in[1], Tensor(), {2}, {1}, {1}, 1, {2}));
    };
    batch.add("conv_transpose1d_dx", Y + grad_of("a"), {{"a", a}, {"w", w}, {"v", v}}, first(f, 2, 0));
    batch.add("conv_transpose1d_dw", Y + grad_of("w"), {{"a", a}, {"w", w}, {"v", v}}, first(f, 2, 1));
  }
  {
    // batch_norm in training (batch statistics) and group_norm, with weight and bias
    const Tensor a = Tensor::randn({4, 3, 5}, gen, kFloat64), w = Tensor::randn({3}, gen, kFloat64),
                 b = Tensor::randn({3}, gen, kFloat64), v = Tensor::randn({4, 3, 5}, gen, kFloat64);
    const std::string Y = "y = torch.nn.functional.batch_norm(a, None, None, w, b, training=True) ** 2\n";
    const auto f = [](const Tensors& in) {
      return pow(batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true), 2.0);
    };
    batch.add("batch_norm_train_dx", Y + grad_of("a"), {{"a", a}, {"w", w}, {"b", b}, {"v", v}}, first(f, 3, 0));
    batch.add("batch_norm_train_dw", Y + grad_of("w"), {{"a", a}, {"w", w}, {"b", b}, {"v", v}}, first(f, 3, 1));
    const Tensor a6 = Tensor::randn({2, 6, 4}, gen, kFloat64), w6 = Tensor::randn({6}, gen, kFloat64),
                 b6 = Tensor::randn({6}, gen, kFloat64), v6 = Tensor::randn({2, 6, 4}, gen, kFloat64);
    batch.add("group_norm_dx", "y = torch.nn.functional.group_norm(a, 3, w, b) ** 2\n" + grad_of("a"),
              {{"a", a6}, {"w", w6}, {"b", b6}, {"v", v6}},
              first([](const Tensors& in) { return pow(group_norm(in[0], 3, in[1], in[2]), 2.0); }, 3, 0));
  }
  {
    // cross_entropy with label smoothing and an ignored sample, mean and per-sample
    const Tensor a = Tensor::randn({4, 5}, gen, kFloat64), v = Tensor::randn({}, gen, kFloat64),
                 vn = Tensor::randn({4}, gen, kFloat64);
    const std::vector<std::int64_t> t = {1, 4, 0, 2};
    batch.add("cross_entropy_mean",
              "y = torch.nn.functional.cross_entropy(a, torch.tensor([1, 4, 0, 2]), label_smoothing=0.2, "
              "ignore_index=0)\n" +
                  grad_of("a"),
              {{"a", a}, {"v", v}},
              first([t](const Tensors& in) { return cross_entropy(in[0], t, Reduction::Mean, 0.2, 0); }, 1, 0));
    batch.add("cross_entropy_none",
              "y = torch.nn.functional.cross_entropy(a, torch.tensor([1, 4, 0, 2]), reduction='none')\n" + grad_of("a"),
              {{"a", a}, {"v", vn}},
              first([t](const Tensors& in) { return cross_entropy(in[0], t, Reduction::None); }, 1, 0));
  }
  {
    // overlapping max_pool2d windows (one input can be the arg-max of several), squared
    const Tensor a = Tensor::randn({2, 3, 6, 5}, gen, kFloat64), v = Tensor::randn({2, 3, 3, 3}, gen, kFloat64);
    batch.add("max_pool2d", "y = torch.nn.functional.max_pool2d(a, 3, 2, 1) ** 2\n" + grad_of("a"),
              {{"a", a}, {"v", v}},
              first([](const Tensors& in) { return pow(max_pool2d(in[0], {3}, {2}, {1}), 2.0); }, 1, 0));
  }
  batch.run();
}
