// Second derivatives of convolution, batch normalization, cross-entropy and max pooling against
// torch.autograd.grad(..., create_graph=True) (Note [Create graph] in core/autograd.hpp). Each case's
// output is a first gradient computed with create_graph, seeded by the input v; the parity harness
// then backpropagates into it, so the compared gradients are second derivatives (with respect to
// every input, v included). The op table's gradgradcheck covers every entry against finite
// differences; these check the same recorded backwards against the peer.
#include "support.hpp"
#include "xgrad/core/gradcheck.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/normalization.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/unary_math.hpp"

using namespace xgrad;

namespace {
// The gradient of f(inputs[0..n)) with respect to input `wrt`, seeded by inputs[n], recorded.
std::function<Tensor(const Tensors&)> first(std::function<Tensor(const Tensors&)> f, std::size_t n, std::size_t wrt) {
  return [f = std::move(f), n, wrt](const Tensors& in) {
    const Tensors xs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    const Tensor y = f(xs);
    return xgrad::grad({y}, {xs[wrt]}, {in[n]}, std::nullopt, /*create_graph=*/true)[0];
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

TEST_CASE("third derivatives: gradgradcheck of recorded first gradients", "[create_graph]") {
  // fn returns the recorded gradient of a scalar loss with respect to every input; gradgradcheck of
  // fn checks the loss's third derivatives, through the ops a recorded backward records (conv's
  // conv2d_backward_weight and conv2d_backward_input, pooling's max_pool_backward /
  // max_pool_double_backward and avg_pool_backward, NllScatter).
  Generator gen(43);
  // (gradcheck's numeric pass calls fn in no-grad mode on plain tensors: fn turns grad mode on and
  // makes leaves of them itself, and returns values without history there.)
  const auto grads_of = [](std::function<Tensor(const Tensors&)> loss) {
    return [loss = std::move(loss)](const Tensors& in) {
      struct Restore {
        bool prev = GradMode::is_enabled();
        ~Restore() { GradMode::set_enabled(prev); }
      } restore;
      GradMode::set_enabled(true);
      Tensors leaves;
      for (const Tensor& t : in) leaves.push_back(t.requires_grad() ? t : t.detach().set_requires_grad());
      Tensors flat;
      for (const Tensor& g : xgrad::grad({loss(leaves)}, leaves, {}, std::nullopt, /*create_graph=*/true))
        flat.push_back(reshape(g, {-1}));
      const Tensor out = concat(flat, 0);
      return restore.prev ? out : out.detach();
    };
  };
  const auto check = [](const char* what, const std::function<Tensor(const Tensors&)>& fn, const Tensors& in) {
    INFO(what);
    const GradcheckReport rep = gradgradcheck(fn, in);
    INFO(rep.message);
    CHECK(rep.ok);
  };
  const Tensor x = test::randn_leaf({2, 4, 5, 5}, gen), w = test::randn_leaf({4, 2, 2, 3}, gen);
  check("conv2d", grads_of([](const Tensors& in) {
          return sum(pow(tanh(conv2d(in[0], in[1], Tensor(), {2, 1}, 1, {1}, 2)), 2.0));
        }),
        {x, w});
  const Tensor xt = test::randn_leaf({2, 4, 3}, gen), wt = test::randn_leaf({4, 3, 2}, gen);
  check("conv_transpose1d",
        grads_of([](const Tensors& in) { return sum(pow(sin(conv_transpose1d(in[0], in[1], Tensor(), {2})), 2.0)); }),
        {xt, wt});
  const Tensor xp = test::randn_leaf({2, 3, 6, 5}, gen);
  check("max_pool2d and avg_pool2d", grads_of([](const Tensors& in) {
          return sum(pow(max_pool2d(in[0], {3}, {2}, {1}), 3.0)) +
                 sum(pow(avg_pool2d(in[0], {2}, {1}, {1}, false, false), 3.0));
        }),
        {xp});
  const Tensor z = test::randn_leaf({4, 5}, gen);
  check("cross_entropy and nll_loss", grads_of([](const Tensors& in) {
          return cross_entropy(in[0], std::vector<std::int64_t>{1, 4, 0, 2}, Reduction::Mean, 0.1) +
                 nll_loss(pow(in[0], 3.0), std::vector<std::int64_t>{0, 1, 2, 3});
        }),
        {z});
  const Tensor xb = test::randn_leaf({4, 3, 2}, gen), wb = test::randn_leaf({3}, gen);
  check("batch_norm and group_norm", grads_of([](const Tensors& in) {
          return sum(pow(batch_norm(in[0], Tensor(), Tensor(), in[1], Tensor(), true), 3.0)) +
                 sum(pow(group_norm(in[0], 3, in[1]), 3.0));
        }),
        {xb, wb});
  const Tensor xr = test::randn_leaf({3, 4}, gen);
  check("prod, var, std, norm", grads_of([](const Tensors& in) {
          return sum(prod(in[0], {1})) + sum(var(in[0], {0})) + sum(xgrad::std(in[0], {1})) + norm(in[0], 3.0);
        }),
        {xr});
}

TEST_CASE("prod's recorded backward is exact with zeros: rows with 0, 1, 2 and 3 of them", "[create_graph]") {
  // second and third derivatives of a product are polynomials: finite differences check them at
  // the zeros too. Exactly two zeros in a row take prod_of_others (reduction.cpp), the rest y / x.
  const Tensor x = Tensor::from_vector({0.7, -1.3, 0.9, 1.1,  //
                                        0.0, 0.8, -1.2, 1.4,  //
                                        0.0, 1.5, 0.0, -0.6,  //
                                        0.0, 0.0, 1.2, 0.0},
                                       {4, 4}, kFloat64)
                       .set_requires_grad();
  for (const std::vector<std::int64_t>& axes : {std::vector<std::int64_t>{1}, std::vector<std::int64_t>{0}}) {
    INFO("axes " << axes[0]);
    const GradcheckReport rep = gradgradcheck([&](const Tensors& in) { return prod(in[0], axes); }, {x});
    INFO(rep.message);
    CHECK(rep.ok);
    // the first-order values agree with the raw kernel's (Note [Product gradient])
    const Tensor v = Tensor::from_vector({0.5, -2.0, 1.5, 3.0}, {4}, kFloat64);
    const Tensor raw = xgrad::grad({prod(x, axes)}, {x}, {v})[0];
    const Tensor rec = xgrad::grad({prod(x, axes)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
    CHECK(allclose(raw, rec.detach(), 1e-13, 1e-13));  // y / x rounds otherwise than prefix * suffix
  }
}
