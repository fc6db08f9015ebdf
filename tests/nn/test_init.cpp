// Tests for nn/init.*: torch's gains and fans, bounds and statistics of every initialiser, seeded
// reproducibility, in-place semantics on parameters, and bad inputs.
#include <algorithm>
#include <cmath>
#include <functional>

#include "support.hpp"
#include "xgrad/nn/init.hpp"

using namespace xgrad;
namespace init = xgrad::nn::init;
using init::FanMode;
using init::Nonlinearity;
using xgrad::test::ParityBatch;

namespace {
struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};
Stats stats(const Tensor& t) {
  const auto v = t.to_vector();
  Stats s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / double(v.size()));
  return s;
}

// A uniform U(-bound, bound) sample of n values: inside the bounds, reaching close to both, with
// the uniform's standard deviation bound/sqrt(3) (its sampling error is ~0.5% at n = 40000).
void require_uniform(const Tensor& t, double bound) {
  const Stats s = stats(t);
  INFO("bound " << bound << " min " << s.min << " max " << s.max << " std " << s.std);
  REQUIRE(s.min >= -bound);
  REQUIRE(s.max <= bound);
  CHECK(s.min < -0.99 * bound);
  CHECK(s.max > 0.99 * bound);
  CHECK(std::abs(s.mean) < 0.03 * bound);
  CHECK(s.std == Approx(bound / std::sqrt(3.0)).epsilon(0.03));
}

void require_normal(const Tensor& t, double mean, double std) {
  const Stats s = stats(t);
  INFO("expected mean " << mean << " std " << std << ", got mean " << s.mean << " std " << s.std);
  CHECK(std::abs(s.mean - mean) < 0.03 * std);
  CHECK(s.std == Approx(std).epsilon(0.03));
}
}  // namespace

TEST_CASE("init: calculate_gain matches torch", "[init][parity]") {
  ParityBatch batch("init_gain");
  const Tensor dummy = Tensor::scalar(0.0, kFloat64);
  struct G {
    const char* name;
    Nonlinearity nl;
    double param;
    const char* torch_args;
  };
  const G cases[] = {{"linear", Nonlinearity::linear, 0.01, "'linear'"},
                     {"conv2d", Nonlinearity::conv2d, 0.01, "'conv2d'"},
                     {"sigmoid", Nonlinearity::sigmoid, 0.01, "'sigmoid'"},
                     {"tanh", Nonlinearity::tanh, 0.01, "'tanh'"},
                     {"relu", Nonlinearity::relu, 0.01, "'relu'"},
                     {"leaky_relu_default", Nonlinearity::leaky_relu, 0.01, "'leaky_relu'"},
                     {"leaky_relu_sqrt5", Nonlinearity::leaky_relu, std::sqrt(5.0), "'leaky_relu', math.sqrt(5)"},
                     {"selu", Nonlinearity::selu, 0.01, "'selu'"}};
  for (const auto& c : cases) {
    const double ours = init::calculate_gain(c.nl, c.param);
    batch.add(c.name,
              fmt::format("import math\nout = torch.tensor(torch.nn.init.calculate_gain({}), dtype=torch.float64)",
                          c.torch_args),
              {{"x", dummy, false}}, [ours](const Tensors&) { return Tensor::scalar(ours, kFloat64); });
  }
  batch.run();
}

TEST_CASE("init: fans follow torch's rule", "[init]") {
  CHECK(init::calculate_fan_in_and_fan_out(Tensor::zeros({3, 5})) == std::pair<std::int64_t, std::int64_t>{5, 3});
  // (out, in, kh, kw): the receptive field multiplies both fans.
  CHECK(init::calculate_fan_in_and_fan_out(Tensor::zeros({4, 2, 3, 3})) ==
        std::pair<std::int64_t, std::int64_t>{18, 36});
}

TEST_CASE("init: uniform variants stay in their bounds with the uniform's spread", "[init]") {
  Generator gen(1);
  for (Dtype dt : {kFloat32, kFloat64}) {
    Tensor t = Tensor::empty({200, 200}, dt);
    init::uniform_(t, gen, -0.5, 2.0);
    const Stats s = stats(t);
    CHECK(s.min >= -0.5);
    CHECK(s.max <= 2.0);
    CHECK(s.mean == Approx(0.75).margin(0.03));

    Tensor w = Tensor::empty({100, 400}, dt);  // fan_in 400, fan_out 100
    init::xavier_uniform_(w, gen, 2.0);
    require_uniform(w, 2.0 * std::sqrt(6.0 / 500.0));
    init::kaiming_uniform_(w, gen);  // a = 0, fan_in, leaky_relu: gain sqrt(2)
    require_uniform(w, std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(400.0));
    init::kaiming_uniform_(w, gen, std::sqrt(5.0));  // nn::Linear's choice: bound 1/sqrt(fan_in)
    require_uniform(w, 1.0 / std::sqrt(400.0));
    init::kaiming_uniform_(w, gen, 0.0, FanMode::fan_out, Nonlinearity::relu);
    require_uniform(w, std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(100.0));
    Tensor conv = Tensor::empty({40, 10, 10, 10}, dt);  // fan_in 1000, fan_out 4000
    init::xavier_uniform_(conv, gen);
    require_uniform(conv, std::sqrt(6.0 / 5000.0));
  }
}

TEST_CASE("init: normal variants have the requested standard deviation", "[init]") {
  Generator gen(2);
  for (Dtype dt : {kFloat32, kFloat64}) {
    Tensor t = Tensor::empty({200, 300}, dt);  // fan_in 300, fan_out 200
    init::normal_(t, gen, 3.0, 0.5);
    require_normal(t, 3.0, 0.5);
    init::xavier_normal_(t, gen, 5.0 / 3.0);
    require_normal(t, 0.0, 5.0 / 3.0 * std::sqrt(2.0 / 500.0));
    init::kaiming_normal_(t, gen, 0.0, FanMode::fan_in, Nonlinearity::relu);
    require_normal(t, 0.0, std::sqrt(2.0) / std::sqrt(300.0));
    init::kaiming_normal_(t, gen, 0.2, FanMode::fan_out);
    require_normal(t, 0.0, std::sqrt(2.0 / 1.04) / std::sqrt(200.0));
    init::normal_(t, gen, 1.0, 0.0);  // std 0 is allowed: a constant
    CHECK(stats(t).min == 1.0);
    CHECK(stats(t).max == 1.0);
  }
}

TEST_CASE("init: constants, and writes in place into a parameter without history", "[init]") {
  Tensor p = Tensor::empty({3, 4}, kFloat64).set_requires_grad();
  const std::uint32_t version = p.impl()->storage->version;
  init::constant_(p, 2.5);
  for (double v : p.to_vector()) CHECK(v == 2.5);
  init::ones_(p);
  for (double v : p.to_vector()) CHECK(v == 1.0);
  init::zeros_(p);
  for (double v : p.to_vector()) CHECK(v == 0.0);
  Generator gen(3);
  Tensor& same = init::xavier_uniform_(p, gen);
  CHECK(&same == &p);
  CHECK(p.requires_grad());
  CHECK(p.is_leaf());
  CHECK(p.grad_fn() == nullptr);
  CHECK(p.shape() == Shape{3, 4});
  CHECK(p.impl()->storage->version > version);  // in-place writes are visible to saved-tensor checks
  // Zero-element tensors are left alone (torch warns and does nothing).
  Tensor empty = Tensor::zeros({0, 5});
  CHECK_NOTHROW(init::kaiming_uniform_(empty, gen));
}

TEST_CASE("init: the same seed gives the same values", "[init]") {
  using Fn = std::function<void(Tensor&, Generator&)>;
  const Fn fns[] = {[](Tensor& t, Generator& g) { init::uniform_(t, g); },
                    [](Tensor& t, Generator& g) { init::normal_(t, g); },
                    [](Tensor& t, Generator& g) { init::xavier_uniform_(t, g); },
                    [](Tensor& t, Generator& g) { init::xavier_normal_(t, g); },
                    [](Tensor& t, Generator& g) { init::kaiming_uniform_(t, g); },
                    [](Tensor& t, Generator& g) { init::kaiming_normal_(t, g); }};
  for (const auto& fn : fns) {
    Tensor a = Tensor::empty({7, 9}), b = Tensor::empty({7, 9}), c = Tensor::empty({7, 9});
    Generator g1(42), g2(42), g3(43);
    fn(a, g1);
    fn(b, g2);
    fn(c, g3);
    CHECK(bit_equal(a, b));
    CHECK_FALSE(bit_equal(a, c));
  }
}

TEST_CASE("init: bad inputs raise xgrad::Error", "[init][errors]") {
  Generator gen(4);
  Tensor v = Tensor::zeros({5});
  Tensor s = Tensor::scalar(1.0);
  test::require_error([&] { init::xavier_uniform_(v, gen); }, {"xavier_uniform_", "fewer than 2 dimensions", "(5,)"});
  test::require_error([&] { init::xavier_normal_(s, gen); }, {"xavier_normal_", "fewer than 2 dimensions", "()"});
  test::require_error([&] { init::kaiming_uniform_(v, gen); }, {"kaiming_uniform_", "fewer than 2 dimensions"});
  test::require_error([&] { init::kaiming_normal_(v, gen); }, {"kaiming_normal_", "fewer than 2 dimensions"});
  test::require_error([&] { init::uniform_(v, gen, 1.0, -1.0); }, {"uniform_", "a = 1", "b = -1"});
  test::require_error([&] { init::normal_(v, gen, 0.0, -1.0); }, {"normal_", "std = -1"});
  Tensor undefined;
  test::require_error([&] { init::zeros_(undefined); }, {"constant_", "undefined"});
  test::require_error([&] { init::uniform_(undefined, gen); }, {"uniform_", "undefined"});
  test::require_error([&] { init::xavier_uniform_(undefined, gen); }, {"xavier_uniform_", "undefined"});
  // Fans that overflow int64 (no elements, so nothing to allocate): an Error naming the call.
  Tensor huge = Tensor::empty({std::int64_t{1} << 40, 0, std::int64_t{1} << 40});
  test::require_error([&] { init::xavier_uniform_(huge, gen); }, {"init::xavier_uniform_", "'tensor'", "overflows"});
  test::require_error([&] { init::kaiming_normal_(huge, gen); }, {"init::kaiming_normal_", "'tensor'", "overflows"});
}

TEST_CASE("init: the random initialisers refuse integer and bool tensors, as torch's do", "[init][errors]") {
  Generator gen(0);
  for (const Dtype dt : {kInt64, kInt32, kUInt8, kBool}) {
    INFO(dtype_name(dt));
    Tensor t = Tensor::zeros({3, 4}, dt);
    test::require_error([&] { init::xavier_uniform_(t, gen); },
                        {"init::xavier_uniform_", "'tensor'", std::string(dtype_name(dt)), "(3, 4)"});
    test::require_error([&] { init::xavier_normal_(t, gen); }, {"init::xavier_normal_", "'tensor'"});
    test::require_error([&] { init::kaiming_uniform_(t, gen); }, {"init::kaiming_uniform_", "'tensor'"});
    test::require_error([&] { init::kaiming_normal_(t, gen); }, {"init::kaiming_normal_", "'tensor'"});
    test::require_error([&] { init::uniform_(t, gen, 0, 1); }, {"init::uniform_", "'tensor'"});
    test::require_error([&] { init::normal_(t, gen, 0, 1); }, {"init::normal_", "'tensor'"});
    CHECK(t.to(kFloat64).to_vector() == std::vector<double>(12, 0.0));  // untouched
  }
  // the constant ones take any dtype, as torch's
  Tensor i = Tensor::zeros({2, 2}, kInt64);
  init::constant_(i, 3);
  CHECK(i.to_vector() == std::vector<double>(4, 3.0));
  init::ones_(i);
  CHECK(i.to_vector() == std::vector<double>(4, 1.0));
}
