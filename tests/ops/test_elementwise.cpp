// Tests for ops/elementwise.*: gradcheck, torch parity, thread determinism, bad inputs.
#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
struct BinaryCase {
  const char* name;
  BinaryFn fn;
  const char* torch;
  double lo, hi;  // input range (positive for pow/div denominators)
};
const BinaryCase kBinary[] = {
    {"add", static_cast<BinaryFn>(add), "out = a + b", -2, 2},
    {"sub", static_cast<BinaryFn>(sub), "out = a - b", -2, 2},
    {"mul", static_cast<BinaryFn>(mul), "out = a * b", -2, 2},
    {"div", static_cast<BinaryFn>(div), "out = a / b", 0.5, 2},
    {"pow", static_cast<BinaryFn>(pow), "out = torch.pow(a, b)", 0.5, 2},
    {"maximum", maximum, "out = torch.maximum(a, b)", -2, 2},
    {"minimum", minimum, "out = torch.minimum(a, b)", -2, 2},
};

using UnaryFn = Tensor (*)(const Tensor&);
struct UnaryCase {
  const char* name;
  UnaryFn fn;
  const char* torch;
  double lo, hi;
};
const UnaryCase kUnary[] = {
    {"neg", neg, "out = -x", -2, 2},
    {"exp", exp, "out = torch.exp(x)", -2, 2},
    {"log", log, "out = torch.log(x)", 0.2, 3},
    {"sqrt", sqrt, "out = torch.sqrt(x)", 0.2, 3},
    {"abs", abs, "out = torch.abs(x)", -2, 2},
    {"tanh", tanh, "out = torch.tanh(x)", -2, 2},
    {"sigmoid", sigmoid, "out = torch.sigmoid(x)", -4, 4},
    {"relu", relu, "out = torch.relu(x)", -2, 2},
};

// Shape pairs: same, scalar-with-tensor, broadcast both ways, leading dims.
const std::vector<std::pair<Shape, Shape>> kShapes = {{{}, {}},      {{3}, {3}},       {{2, 3}, {}},
                                                      {{2, 3}, {3}}, {{4, 1}, {1, 5}}, {{2, 1, 3}, {4, 1}}};
}  // namespace

TEST_CASE("binary ops: gradcheck over broadcast shapes", "[elementwise]") {
  Generator gen(1);
  for (const auto& c : kBinary)
    for (const auto& [sa, sb] : kShapes) {
      INFO(c.name << " " << shape_str(sa) << " x " << shape_str(sb));
      Tensor a = test::uniform_leaf(sa, gen, c.lo, c.hi);
      Tensor b = test::uniform_leaf(sb, gen, c.lo, c.hi);
      test::require_gradcheck([&](const Tensors& in) { return c.fn(in[0], in[1]); }, {a, b});
    }
}

TEST_CASE("unary ops: gradcheck", "[elementwise]") {
  Generator gen(2);
  for (const auto& c : kUnary)
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3}}) {
      INFO(c.name << " " << shape_str(s));
      Tensor x = test::uniform_leaf(s, gen, c.lo, c.hi);
      test::require_gradcheck([&](const Tensors& in) { return c.fn(in[0]); }, {x});
    }
  Tensor x = test::uniform_leaf({7}, gen, -2, 2);
  test::require_gradcheck([](const Tensors& in) { return clamp(in[0], -0.5, 0.7); }, {x});
  test::require_gradcheck([](const Tensors& in) { return pow(in[0], 3.0); }, {x});
  Tensor p = test::uniform_leaf({7}, gen, 0.5, 2);
  test::require_gradcheck([](const Tensors& in) { return pow(in[0], -1.5); }, {p});
  test::require_gradcheck([](const Tensors& in) { return 2.0 / in[0] + (1.0 - in[0]) * 3.0; }, {p});
}

TEST_CASE("where and masked_select: gradcheck", "[elementwise]") {
  Generator gen(3);
  Tensor a = test::randn_leaf({3, 4}, gen);
  Tensor b = test::randn_leaf({4}, gen);
  Tensor cond = gt(Tensor::randn({3, 1}, gen, kFloat64), Tensor::scalar(0.0, kFloat64));
  test::require_gradcheck([&](const Tensors& in) { return where(cond, in[0], in[1]); }, {a, b});
  Tensor mask = gt(Tensor::randn({3, 4}, gen, kFloat64), Tensor::scalar(0.0, kFloat64));
  test::require_gradcheck([&](const Tensors& in) { return masked_select(in[0], mask); }, {a});
}

TEST_CASE("elementwise: values and gradients match PyTorch", "[elementwise][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("elementwise_") + std::string(dtype_name(dt)));
    Generator gen(4);
    int k = 0;
    for (const auto& c : kBinary)
      for (const auto& [sa, sb] : kShapes) {
        Tensor a = test::uniform_leaf(sa, gen, c.lo, c.hi, dt);
        Tensor b = test::uniform_leaf(sb, gen, c.lo, c.hi, dt);
        batch.add(fmt::format("{}_{}", c.name, k++), c.torch, {{"a", a}, {"b", b}},
                  [&](const Tensors& in) { return c.fn(in[0], in[1]); });
      }
    for (const auto& c : kUnary) {
      Tensor x = test::uniform_leaf({3, 5}, gen, c.lo, c.hi, dt);
      batch.add(c.name, c.torch, {{"x", x}}, [&](const Tensors& in) { return c.fn(in[0]); });
    }
    Tensor x = test::uniform_leaf({4, 6}, gen, -2, 2, dt);
    batch.add("clamp", "out = torch.clamp(x, -0.5, 0.7)", {{"x", x}},
              [](const Tensors& in) { return clamp(in[0], -0.5, 0.7); });
    batch.add("pow_scalar", "out = torch.pow(x, 3.0)", {{"x", x}}, [](const Tensors& in) { return pow(in[0], 3.0); });
    batch.add("scalar_ops", "out = (2.0 - x) * 3.0 / 4.0 + 1.0", {{"x", x}},
              [](const Tensors& in) { return (2.0 - in[0]) * 3.0 / 4.0 + 1.0; });
    Tensor cond = gt(Tensor::randn({4, 1}, gen, dt), Tensor::scalar(0.0, dt));
    Tensor y = test::uniform_leaf({6}, gen, -2, 2, dt);
    batch.add("where", "out = torch.where(c != 0, x, y)", {{"c", cond, false}, {"x", x}, {"y", y}},
              [](const Tensors& in) { return where(in[0], in[1], in[2]); });
    Tensor mask = gt(Tensor::randn({4, 6}, gen, dt), Tensor::scalar(0.0, dt));
    batch.add("masked_select", "out = torch.masked_select(x, m != 0)", {{"x", x}, {"m", mask, false}},
              [](const Tensors& in) { return masked_select(in[0], in[1]); });
    Tensor big = test::uniform_leaf({1000}, gen, -30, 30, dt);
    batch.add("sigmoid_large", "out = torch.sigmoid(x)", {{"x", big}},
              [](const Tensors& in) { return sigmoid(in[0]); });
    batch.run();
  }
}

TEST_CASE("elementwise: bit-identical with 1 and 2 threads", "[elementwise][threads]") {
  Generator gen(5);
  // Large enough to be split into parallel chunks.
  Tensor a0 = Tensor::randn({300, 400}, gen, kFloat32);
  Tensor b0 = Tensor::randn({400}, gen, kFloat32);
  test::require_thread_deterministic([&] {
    Tensor a = a0.clone_data().set_requires_grad();
    Tensor b = b0.clone_data().set_requires_grad();
    Tensor y = tanh(a * b + exp(a) / (abs(b) + 1.0));
    Tensor seed = Tensor::ones(y.shape(), kFloat32);
    y.backward(seed);
    return Tensors{y, a.grad(), b.grad()};
  });
}

TEST_CASE("elementwise: bad inputs raise xgrad::Error naming op and shapes", "[elementwise][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({4});
  test::require_error([&] { add(a, b); }, {"add", "(2, 3)", "(4,)"});
  test::require_error([&] { mul(a, Tensor::zeros({2, 3}, kFloat64)); }, {"mul", "dtype", "float32", "float64"});
  test::require_error([&] { where(Tensor::zeros({5}), a, a); }, {"where", "(5,)", "(2, 3)"});
  test::require_error([&] { clamp(a, 1.0, -1.0); }, {"clamp", "lo"});
  test::require_error([&] { masked_select(a, Tensor::zeros({2, 3, 1})); }, {"masked_select", "(2, 3, 1)"});
  test::require_error([&] { exp(Tensor()); }, {"exp", "undefined"});
}
