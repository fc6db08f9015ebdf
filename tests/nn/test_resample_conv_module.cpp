// Tests for nn::ResampleConv: it matches the op, registers the right parameters and buffers, owns
// copies of its geometry, precomputes its tables once, trains a sampled response, and checks its
// arguments.
#include <atomic>
#include <cmath>

#include "support.hpp"
#include "xgrad/nn/resample_conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;

namespace {
Response cos2(double w) {
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
}
Tensor sorted_coarse(std::int64_t N, std::int64_t A, Generator& gen, Dtype dt) {
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t a = 0; a < A; ++a) c[static_cast<std::size_t>(n * A + a)] = gen.uniform(-0.02, 1.02);
    std::sort(c.begin() + n * A, c.begin() + (n + 1) * A);
  }
  return Tensor::from_vector(c, {N, A}, dt);
}
}  // namespace

TEST_CASE("nn::ResampleConv: matches the op, parameters and buffers, precomputed tables", "[nn][resample_conv]") {
  Generator gen(21);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 999, 1000);
  const Tensor coarse = sorted_coarse(4, 30, gen, kFloat32);
  const Tensor f = Tensor::randn({2, 4, 1000}, gen, kFloat32);
  const Response r = cos2(0.05);

  auto conv = std::make_shared<nn::ResampleConv>(coarse, grid, r);
  CHECK(conv->parameters().empty());
  REQUIRE(conv->named_buffers().size() == 1);
  CHECK(conv->named_buffers()[0].first == "coarse");
  CHECK(bit_equal(conv->forward(f), resample_conv(f, coarse, grid, r)));
  CHECK(std::string(conv->table_info().method) == "polyphase");
  CHECK(conv->table_info().measured_error <= 1e-7);
  // Precomputed at construction, and forward builds nothing more.
  const std::size_t held = conv->bytes_held();
  CHECK(held > 0);
  CHECK(held < std::size_t(1) << 20);
  (*conv)(f);
  CHECK(conv->bytes_held() == held);
  // The layer owns a copy of coarse.
  Tensor c2 = coarse.clone_data();
  auto conv2 = std::make_shared<nn::ResampleConv>(c2, grid, r);
  const Tensor before = conv2->forward(f);
  c2.fill_(0.5);
  CHECK(bit_equal(conv2->forward(f), before));

  // Gradient to f flows through the layer (float64 gradcheck).
  auto conv64 = std::make_shared<nn::ResampleConv>(coarse.to(kFloat64), FineGrid::uniform(0.0, 1.0 / 39, 40), cos2(0.2),
                                                   nn::ResampleConvConfig{true, {}});
  REQUIRE(conv64->parameters().size() == 1);
  CHECK(conv64->named_parameters()[0].first == "coarse");
  Tensor f64 = test::randn_leaf({4, 40}, gen);
  test::require_gradcheck([&](const Tensors& in) { return conv64->forward(in[0]); }, {f64});
  // ... and to its learnable coarse points.
  conv64->forward(f64).backward(Tensor::ones({4, 30}, kFloat64));
  CHECK(conv64->coarse().grad().defined());
}

TEST_CASE("nn::ResampleConv: a sampled response is a parameter that trains", "[nn][resample_conv]") {
  Generator gen(22);
  const double w = 0.06;
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 1999, 2000);
  const Tensor coarse = sorted_coarse(3, 50, gen, kFloat64);
  const Tensor f = Tensor::randn({3, 2000}, gen, kFloat64);
  // Target: the cos^2 response; start from a flat sampled response of K = 16 values.
  const Tensor target = resample_conv(f, coarse, grid, cos2(w));
  auto conv = std::make_shared<nn::ResampleConv>(coarse, grid,
                                                 Response::sampled(Tensor::full({16}, 0.5, kFloat64), -w / 2, w / 2));
  REQUIRE(conv->parameters().size() == 1);
  CHECK(conv->named_parameters()[0].first == "response_values");
  Tensor v = conv->parameters()[0];
  auto loss_fn = [&] {
    Tensor d = conv->forward(f) - target;
    return mean(d * d);
  };
  const double loss0 = loss_fn().item();
  // Gradient descent with a step from the Lipschitz bound of this quadratic (plain, no optimizer).
  double loss = loss0;
  for (int it = 0; it < 200; ++it) {
    Tensor l = loss_fn();
    l.backward();
    {
      NoGradGuard ng;
      v.add_(v.grad(), -0.05);
    }
    conv->zero_grad();
    loss = l.item();
  }
  INFO("loss " << loss0 << " -> " << loss);
  CHECK(loss < 1e-2 * loss0);
  // The learnt values approach the sampled target response.
  const std::vector<double> vv = v.to_vector();
  double err = 0;
  for (std::size_t k = 0; k < vv.size(); ++k)
    err = std::max(err, std::abs(vv[k] - std::pow(std::cos(M_PI * (-w / 2 + w * static_cast<double>(k) / 15) / w), 2)));
  INFO("max value error " << err);
  CHECK(err < 0.1);
}

TEST_CASE("nn::ResampleConv: bad arguments", "[nn][resample_conv][errors]") {
  const FineGrid grid = FineGrid::uniform(0.0, 0.1, 11);
  const Response no_deriv = Response::callable([](double d) { return 1 - std::abs(d); }, -1.0, 1.0);
  test::require_error([&] { nn::ResampleConv(Tensor::zeros({5}), grid, no_deriv); },
                      {"nn::ResampleConv", "'coarse'", "(5,)"});
  Tensor bad = Tensor::zeros({2, 3});
  bad.data<float>()[4] = NAN;
  test::require_error([&] { nn::ResampleConv(bad, grid, no_deriv); }, {"nn::ResampleConv", "non-finite", "[1, 1]"});
  test::require_error(
      [&] {
        nn::ResampleConv(Tensor::zeros({2, 3}), grid, no_deriv, nn::ResampleConvConfig{true, {}});
      },
      {"nn::ResampleConv", "learn_coarse", "derivative"});
  nn::ResampleConv ok(Tensor::zeros({2, 3}), grid, no_deriv);
  test::require_error([&] { ok.forward(Tensor::zeros({3, 11})); }, {"resample_conv", "N differs"});
}

TEST_CASE("nn::ResampleConv: a learnable per-row shift", "[nn][resample_conv]") {
  Generator gen(23);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 59, 60);
  const Tensor coarse = sorted_coarse(3, 7, gen, kFloat64);
  nn::ResampleConvConfig config;
  config.learn_shift = true;
  auto conv = std::make_shared<nn::ResampleConv>(coarse, grid, cos2(0.2), config);
  REQUIRE(conv->named_parameters().size() == 1);
  CHECK(conv->named_parameters()[0].first == "shift");
  CHECK(conv->shift().shape() == Shape{3, 1});
  // A shift s reads the same as the op at coarse + s.
  {
    NoGradGuard ng;
    Tensor s = conv->shift();
    s.copy_(Tensor::from_vector({0.01, -0.02, 0.005}, {3, 1}, kFloat64));
  }
  Tensor f = test::randn_leaf({3, 60}, gen);
  const Tensor expected =
      resample_conv(f, coarse + Tensor::from_vector({0.01, -0.02, 0.005}, {3, 1}, kFloat64), grid, cos2(0.2));
  CHECK(bit_equal(conv->forward(f), expected));
  // Its gradient (float64 gradcheck through the layer, shift as the input).
  Tensor shift = conv->shift();
  test::require_gradcheck([&](const Tensors&) { return conv->forward(f); }, {shift});
  test::require_error(
      [&] {
        nn::ResampleConvConfig c;
        c.learn_shift = true;
        nn::ResampleConv(coarse, grid, Response::callable([](double d) { return 1 - std::abs(d); }, -1.0, 1.0), c);
      },
      {"nn::ResampleConv", "learn_shift", "derivative"});
}

TEST_CASE("nn::ResampleConv: its repr names a named response with its parameters", "[nn][resample_conv][repr]") {
  const Tensor coarse = Tensor::from_vector({0.2, 0.4, 0.6}, {1, 3}, kFloat64);
  const FineGrid grid = FineGrid::uniform(0.0, 0.01, 100);
  const std::vector<std::pair<Response, std::string>> cases = {
      {Response::gaussian(0.05), "gaussian(sigma=0.05, truncate=4)"},
      {Response::gaussian(0.05, 3.5), "gaussian(sigma=0.05, truncate=3.5)"},
      {Response::hann(0.3), "hann(width=0.3)"},
      {Response::box(0.2), "box(width=0.2)"},
      {Response::triangle(0.25), "triangle(width=0.25)"},
      {Response::bspline(3, 0.1), "bspline(order=3, h=0.1)"},
      {Response::lanczos(3), "lanczos(a=3, scale=1)"},
      {Response::lanczos(2, 0.02), "lanczos(a=2, scale=0.02)"},
      {cos2(0.2), "callable"},
      {Response::sampled(Tensor::ones({5}, kFloat64), -0.1, 0.1), "sampled"},
  };
  for (const auto& [r, want] : cases) {
    INFO(want);
    CHECK(r.spec() == want);
    const nn::ResampleConv conv(coarse, grid, r);
    const std::string repr = conv.extra_repr();
    CHECK(repr.find("response=" + want + ", ") != std::string::npos);
  }
  // The name keeps its short form (it is used in messages).
  CHECK(Response::gaussian(0.05).name() == "gaussian");
  CHECK(Response::bspline(3, 0.1).name() == "bspline3");
  test::require_error([] { (void)Response().spec(); }, {"Response::spec", "empty"});
}

TEST_CASE("nn::ResampleConv: construction builds each table once, forward and backward build none",
          "[nn][resample_conv]") {
  // Counts the evaluations of a callable response and of its derivative: building a table calls
  // them, a cache hit does not.
  struct Counts {
    std::atomic<long> fn{0}, dfn{0};
  };
  const auto counted = [](double w, Counts& n) {
    return Response::callable(
        [w, &n](double d) {
          ++n.fn;
          return std::pow(std::cos(M_PI * d / w), 2);
        },
        -w / 2, w / 2,
        [w, &n](double d) {
          ++n.dfn;
          return -M_PI / w * std::sin(2 * M_PI * d / w);
        });
  };
  Generator gen(5);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 199, 200);
  const Tensor coarse = sorted_coarse(3, 12, gen, kFloat64);
  for (const bool learn : {false, true}) {
    INFO("learn_coarse=" << learn);
    // The reference: the tables the layer needs, each built by one call of the op's prepare.
    Counts ref;
    const Response r_ref = counted(0.1, ref);
    (void)resample_conv_prepare(grid, r_ref, kFloat64, {}, learn);
    REQUIRE(ref.fn > 0);
    CHECK((ref.dfn > 0) == learn);

    Counts n;
    nn::ResampleConv conv(coarse, grid, counted(0.1, n), nn::ResampleConvConfig{learn, {}});
    CHECK(n.fn == ref.fn);
    CHECK(n.dfn == ref.dfn);
    CHECK(conv.bytes_held() == resample_conv_cached_bytes(r_ref));
    CHECK(std::string(conv.table_info().method) == resample_conv_prepare(grid, r_ref, kFloat64).method);
    // Forward and backward use the tables built at construction.
    const long fn_built = n.fn, dfn_built = n.dfn;
    Tensor f = test::randn_leaf({2, 3, 200}, gen);
    sum(conv(f)).backward();
    CHECK(f.grad().defined());
    CHECK(n.fn == fn_built);
    CHECK(n.dfn == dfn_built);
  }
}
