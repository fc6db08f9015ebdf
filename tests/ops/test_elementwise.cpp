// Tests for ops/elementwise.*: gradcheck, torch parity, thread determinism, bad inputs.
#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/unary_math.hpp"

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

// Note [Saved operands]: with one operand requiring grad, mul and div keep only what that partial reads.
TEST_CASE("mul and div with one operand requiring grad: gradients, second order, and the other operand freed",
          "[elementwise][memory]") {
  Generator gen(3);
  const std::pair<Shape, Shape> shapes[] = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{2, 1, 3}, {4, 1}}};
  for (const BinaryFn fn : {static_cast<BinaryFn>(mul), static_cast<BinaryFn>(div)})
    for (const auto& [sa, sb] : shapes) {
      INFO((fn == static_cast<BinaryFn>(mul) ? "mul " : "div ") << shape_str(sa) << " x " << shape_str(sb));
      const Tensor a = test::uniform_leaf(sa, gen, 0.5, 2), b = test::uniform_leaf(sb, gen, 0.5, 2);
      const Tensor ca = a.detach(), cb = b.detach();
      const auto only_a = [&](const Tensors& in) { return fn(in[0], cb); };
      const auto only_b = [&](const Tensors& in) { return fn(ca, in[0]); };
      test::require_gradcheck(only_a, {a});
      test::require_gradcheck(only_b, {b});
      CHECK(gradgradcheck(only_a, {a}).ok);
      CHECK(gradgradcheck(only_b, {b}).ok);
    }
  // The operand no needed partial reads is released with its last handle, not kept by the node.
  const Tensor x = Tensor::randn({64, 64}, gen).set_requires_grad(), w = Tensor::randn({64, 64}, gen);
  const std::size_t before = memory_stats().allocated_bytes;
  Tensor y;
  {
    const Tensor m = add(x, x);  // an intermediate that requires grad (add saves nothing)
    y = mul(m, w);               // dy/dm = w: m is not needed by backward
  }
  CHECK(memory_stats().allocated_bytes == before + y.nbytes());
  Tensor z;
  {
    const Tensor m = add(x, x);
    z = div(w, m);  // d/dm (w / m) = -w / m^2: both operands are kept
  }
  CHECK(memory_stats().allocated_bytes == before + y.nbytes() + z.nbytes() + x.nbytes());
  sum(y).backward();
  CHECK(allclose(x.grad(), mul(w, 2.0)));
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
  test::require_error(
      [&] {
        atan2(a, Tensor::zeros({2, 3}, kFloat64));
      },
      {"atan2", "dtype", "float32", "float64"});  // (add, sub, mul, div, pow, maximum, minimum promote)
  test::require_error([&] { where(Tensor::zeros({5}), a, a); }, {"where", "(5,)", "(2, 3)"});
  test::require_error([&] { clamp(a, 1.0, -1.0); }, {"clamp", "lo"});
  test::require_error([&] { masked_select(a, Tensor::zeros({2, 3, 1})); }, {"masked_select", "(2, 3, 1)"});
  test::require_error([&] { exp(Tensor()); }, {"exp", "undefined"});
}

// ---- integer and bool dtypes (Note [Integer promotion] in ops/define/elementwise_impl.hpp) -------

namespace {
// Random integers in [-9, 9] of dtype `dt` (0/1 for bool, [0, 18] for uint8).
Tensor ints(const Shape& s, Generator& gen, Dtype dt) {
  Tensor t = Tensor::empty(s, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = std::floor(gen.uniform() * 19.0) - 9.0;
    p[i] = dt == kBool ? (v > 0 ? 1 : 0) : dt == kUInt8 ? v + 9.0 : v;
  }
  return t.to(dt);
}
}  // namespace

TEST_CASE("integer and bool dtypes: values, gradients and result dtypes match PyTorch",
          "[elementwise][dtype][parity]") {
  ParityBatch batch("elementwise_int");
  Generator gen(21);
  const Tensor a = ints({3, 4}, gen, kInt64), b = ints({4}, gen, kInt64), b0 = ints({4}, gen, kInt64);
  const Tensor i32 = ints({3, 4}, gen, kInt32), u8 = ints({3, 4}, gen, kUInt8), m = ints({3, 4}, gen, kBool);
  const Tensor mb = ints({4}, gen, kBool);
  const Tensor x = test::uniform_leaf({4}, gen, -2, 2, kFloat32);
  const Tensor nz = add(b0, mul(eq(b0, Tensor::scalar(0, kInt64)).to(kInt64), 1.0));  // no zero divisor
  struct Case {
    std::string name, torch;
    std::vector<ParityBatch::Input> inputs;
    std::function<Tensor(const Tensors&)> fn;
    Dtype want;
  };
  const std::vector<Case> cases = {
      {"add", "out = a + b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return add(in[0], in[1]); }, kInt64},
      {"sub", "out = a - b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] - in[1]; }, kInt64},
      {"mul", "out = a * b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] * in[1]; }, kInt64},
      {"div_true",
       "out = a / b",
       {{"a", a, false}, {"b", nz, false}},
       [](auto& in) { return in[0] / in[1]; },
       kFloat32},
      {"maximum",
       "out = torch.maximum(a, b)",
       {{"a", a, false}, {"b", b, false}},
       [](auto& in) { return maximum(in[0], in[1]); },
       kInt64},
      {"minimum_i32_i64",
       "out = torch.minimum(a, b)",
       {{"a", i32, false}, {"b", b, false}},
       [](auto& in) { return minimum(in[0], in[1]); },
       kInt64},
      {"add_i32_i64",
       "out = a + b",
       {{"a", i32, false}, {"b", b, false}},
       [](auto& in) { return in[0] + in[1]; },
       kInt64},
      {"add_u8_bool",
       "out = a + m",
       {{"a", u8, false}, {"m", m, false}},
       [](auto& in) { return in[0] + in[1]; },
       kUInt8},
      {"add_bool_bool",
       "out = m + n",
       {{"m", m, false}, {"n", mb, false}},
       [](auto& in) { return in[0] + in[1]; },
       kBool},
      {"mul_bool_bool",
       "out = m * n",
       {{"m", m, false}, {"n", mb, false}},
       [](auto& in) { return in[0] * in[1]; },
       kBool},
      {"add_int_float", "out = a + x", {{"a", a, false}, {"x", x}}, [](auto& in) { return in[0] + in[1]; }, kFloat32},
      {"mul_float_int", "out = x * a", {{"x", x}, {"a", a, false}}, [](auto& in) { return in[0] * in[1]; }, kFloat32},
      {"mul_whole_number", "out = a * 3", {{"a", a, false}}, [](auto& in) { return in[0] * 3.0; }, kInt64},
      {"sub_whole_number", "out = a - 2", {{"a", i32, false}}, [](auto& in) { return in[0] - 2.0; }, kInt32},
      {"add_fraction", "out = a + 2.5", {{"a", a, false}}, [](auto& in) { return in[0] + 2.5; }, kFloat32},
      {"bool_plus_number", "out = m + 2", {{"m", m, false}}, [](auto& in) { return in[0] + 2.0; }, kInt64},
      {"div_number", "out = a / 4", {{"a", a, false}}, [](auto& in) { return in[0] / 4.0; }, kFloat32},
      {"rdiv_number", "out = 3 / a", {{"a", nz, false}}, [](auto& in) { return 3.0 / in[0]; }, kFloat32},
      {"neg", "out = -a", {{"a", a, false}}, [](auto& in) { return -in[0]; }, kInt64},
      {"neg_u8", "out = -a", {{"a", u8, false}}, [](auto& in) { return -in[0]; }, kUInt8},
      {"abs", "out = torch.abs(a)", {{"a", i32, false}}, [](auto& in) { return abs(in[0]); }, kInt32},
      {"gt_int_float",
       "out = a > x",
       {{"a", a, false}, {"x", x, false}},
       [](auto& in) { return gt(in[0], in[1]); },
       kBool},
      {"eq_int_int",
       "out = a == b",
       {{"a", a, false}, {"b", b, false}},
       [](auto& in) { return eq(in[0], in[1]); },
       kBool},
      {"le_u8_i32",
       "out = a <= b",
       {{"a", u8, false}, {"b", i32, false}},
       [](auto& in) { return le(in[0], in[1]); },
       kBool},
      {"ne_f32_f64",
       "out = x != y",
       {{"x", x, false}, {"y", x.detach().to(kFloat64) * 1.0, false}},
       [](auto& in) { return ne(in[0], in[1]); },
       kBool},
      {"logical_and",
       "out = torch.logical_and(a, x)",
       {{"a", a, false}, {"x", x, false}},
       [](auto& in) { return logical_and(in[0], in[1]); },
       kBool},
      {"logical_or",
       "out = torch.logical_or(m, b)",
       {{"m", m, false}, {"b", b, false}},
       [](auto& in) { return logical_or(in[0], in[1]); },
       kBool},
      {"logical_xor",
       "out = torch.logical_xor(m, n)",
       {{"m", m, false}, {"n", mb, false}},
       [](auto& in) { return logical_xor(in[0], in[1]); },
       kBool},
      {"logical_not",
       "out = torch.logical_not(a)",
       {{"a", a, false}},
       [](auto& in) { return logical_not(in[0]); },
       kBool},
      {"where_int",
       "out = torch.where(m, a, b)",
       {{"m", m, false}, {"a", a, false}, {"b", b, false}},
       [](auto& in) { return where(in[0], in[1], in[2]); },
       kInt64},
      {"where_int_float",
       "out = torch.where(m, a, x)",
       {{"m", m, false}, {"a", a, false}, {"x", x}},
       [](auto& in) { return where(in[0], in[1], in[2]); },
       kFloat32},
      {"masked_fill_float",
       "out = x.masked_fill(n, -1.5)",
       {{"x", x}, {"n", mb, false}},
       [](auto& in) { return masked_fill(in[0], in[1], -1.5); },
       kFloat32},
      {"masked_fill_int",
       "out = a.masked_fill(m, 7)",
       {{"a", a, false}, {"m", m, false}},
       [](auto& in) { return masked_fill(in[0], in[1], 7.0); },
       kInt64},
      {"sum_int", "out = a.sum()", {{"a", a, false}}, [](auto& in) { return sum(in[0]); }, kInt64},
      {"sum_bool_axis", "out = m.sum(1)", {{"m", m, false}}, [](auto& in) { return sum(in[0], {1}); }, kInt64},
      {"sum_i32_keepdim",
       "out = a.sum(0, keepdim=True)",
       {{"a", i32, false}},
       [](auto& in) { return sum(in[0], {0}, true); },
       kInt64},
      {"sum_u8_axes",
       "out = a.sum((0, 1))",
       {{"a", u8, false}},
       [](auto& in) {
         return sum(in[0], {0, 1});
       },
       kInt64},
      {"masked_select_int",
       "out = torch.masked_select(a, m)",
       {{"a", a, false}, {"m", m, false}},
       [](auto& in) { return masked_select(in[0], in[1]); },
       kInt64},
  };
  for (const auto& c : cases) {
    Tensors args;
    for (const auto& in : c.inputs) args.push_back(in.value.detach());
    INFO(c.name);
    CHECK(c.fn(args).dtype() == c.want);
    // torch's result dtype must be ours too (parity compares values only).
    batch.add(c.name,
              c.torch + fmt::format("\nassert out.dtype == torch.{}, out.dtype",
                                    c.want == kBool ? "bool" : std::string(dtype_name(c.want))),
              c.inputs, c.fn);
  }
  batch.run();
}

TEST_CASE("integer arithmetic wraps around like PyTorch, bool sub and neg are refused", "[elementwise][dtype]") {
  const std::vector<std::int64_t> mx = {std::numeric_limits<std::int64_t>::max()};
  const Tensor big = Tensor::from_data<std::int64_t>(mx, {1});
  // torch.tensor([2**63 - 1]) + 1 == tensor([-2**63])
  CHECK((big + 1.0).data<std::int64_t>()[0] == std::numeric_limits<std::int64_t>::min());
  CHECK((big * 2.0).data<std::int64_t>()[0] == -2);
  CHECK((Tensor::of({200}, kUInt8) + Tensor::of({100}, kUInt8)).to_vector() == std::vector<double>{44});
  CHECK(abs(Tensor::of({-3, 4}, kInt64)).to_vector() == std::vector<double>{3, 4});
  const std::vector<std::int64_t> huge = {(std::int64_t{1} << 60) + 1, (std::int64_t{1} << 60) + 2};
  CHECK(sum(Tensor::from_data<std::int64_t>(huge, {2})).item<std::int64_t>() == (std::int64_t{1} << 61) + 3);
  test::require_error([] { mean(Tensor::of({1, 2}, kInt64)); }, {"mean", "int64"});
  test::require_error([] { sub(Tensor::of({1}, kBool), Tensor::of({1}, kBool)); }, {"sub", "bool", "logical_xor"});
  test::require_error([] { neg(Tensor::of({1}, kBool)); }, {"neg", "bool", "logical_not"});
  test::require_error([] { abs(Tensor::of({1}, kBool)); }, {"abs", "bool"});
  // Float-only ops name the op, the argument and the dtype.
  test::require_error([] { exp(Tensor::of({1}, kInt64)); }, {"exp", "argument 'x'", "int64", "x.to(xgrad::kFloat32)"});
  test::require_error([] { pow(Tensor::of({1}, kInt64), Tensor::of({1})); }, {"pow", "argument 'a'", "int64"});
  test::require_error([] { clamp(Tensor::of({1}, kInt32), 0, 1); }, {"clamp", "int32"});
  // The int path keeps shapes and broadcast errors naming the op.
  test::require_error(
      [] {
        add(Tensor::zeros({2, 3}, kInt64), Tensor::zeros({4}, kInt64));
      },
      {"add", "(2, 3)", "(4,)"});
  test::require_error([] { gt(Tensor::zeros({2, 3}, kInt64), Tensor::zeros({4})); }, {"gt", "(2, 3)", "(4,)"});
  test::require_error(
      [] {
        masked_fill(Tensor::zeros({3}), Tensor::zeros({2, 3}, kBool), 1.0);
      },
      {"masked_fill", "(2, 3)"});
  // Integer results have no history even when a float input requires grad elsewhere in the graph.
  Tensor x = Tensor::of({0.5, -1.0}).set_requires_grad();
  CHECK_FALSE(gt(x, Tensor::scalar(0.0)).requires_grad());
  CHECK(masked_fill(x, Tensor::of({1, 0}, kBool), 3.0).requires_grad());
}

TEST_CASE("comparisons of int64 are exact beyond 2^53, with tensors and with C++ integers", "[elementwise][dtype]") {
  // B and B + 1 are one double (and one float32): comparing through either would be wrong.
  constexpr std::int64_t B = std::int64_t{1} << 53;
  const Tensor a = Tensor::from_vector(std::vector<std::int64_t>{B, B + 1, B + 2}, {3});
  const Tensor b = Tensor::from_vector(std::vector<std::int64_t>{B + 1}, {});
  const auto bools = [](const Tensor& t) {
    REQUIRE(t.dtype() == kBool);
    return std::vector<bool>(t.data<bool>(), t.data<bool>() + t.numel());
  };
  using VB = std::vector<bool>;
  CHECK(bools(eq(a, b)) == VB{false, true, false});
  CHECK(bools(ne(a, b)) == VB{true, false, true});
  CHECK(bools(lt(a, b)) == VB{true, false, false});
  CHECK(bools(le(a, b)) == VB{true, true, false});
  CHECK(bools(gt(a, b)) == VB{false, false, true});
  CHECK(bools(ge(a, b)) == VB{false, true, true});
  // The operators take a C++ integer as int64, exactly (a double would make B + 1 into B).
  CHECK(bools(a == B + 1) == VB{false, true, false});
  CHECK(bools(a != B + 1) == VB{true, false, true});
  CHECK(bools(a < B + 1) == VB{true, false, false});
  CHECK(bools(a <= B + 1) == VB{true, true, false});
  CHECK(bools(a > B) == VB{false, true, true});
  CHECK(bools(a >= B + 2) == VB{false, false, true});
  CHECK(bools(B + 1 == a) == VB{false, true, false});
  CHECK(bools(B + 1 < a) == VB{false, false, true});
  CHECK(bools(a == static_cast<std::uint64_t>(B + 2)) == VB{false, false, true});
  CHECK(bools(a < std::numeric_limits<std::uint64_t>::max()) == VB{true, true, true});  // beyond int64: a double
  CHECK(bools(Tensor::of({1.0, 2.5}) == 2) == VB{false, false});  // a float x: the number in x's dtype
  CHECK(bools(Tensor::of({1, 0}, kBool) == true) == VB{true, false});
  // maximum and minimum stay in int64 too.
  const Tensor c = Tensor::from_vector(std::vector<std::int64_t>{B + 1, B, B + 1}, {3});
  CHECK(maximum(a, c).data<std::int64_t>()[0] == B + 1);
  CHECK(minimum(a, c).data<std::int64_t>()[1] == B);
  CHECK(maximum(a, c).data<std::int64_t>()[2] == B + 2);
  // torch agrees (the parity compares bool and integer results exactly).
  ParityBatch batch("compare_int64");
  batch.add("eq", "out = a == b\nassert out.dtype == torch.bool", {{"a", a, false}, {"b", b, false}},
            [](const Tensors& in) { return eq(in[0], in[1]); });
  batch.add("le_number", "out = a <= 9007199254740993\nassert out.dtype == torch.bool", {{"a", a, false}},
            [](const Tensors& in) { return in[0] <= B + 1; });
  batch.add("maximum", "out = torch.maximum(a, c)\nassert out.dtype == torch.int64", {{"a", a, false}, {"c", c, false}},
            [](const Tensors& in) { return maximum(in[0], in[1]); });
  batch.run();
}

TEST_CASE("masked_fill refuses a float mask, as torch", "[elementwise][dtype][errors]") {
  // torch wants a bool mask: 1.13 ignores a float one silently (nothing is filled), later versions
  // refuse it. Integer masks keep working (nonzero = fill), as in torch 1.13.
  const Tensor x = Tensor::zeros({2, 3});
  for (const Dtype dt : {kFloat32, kFloat64})
    test::require_error([&] { masked_fill(x, Tensor::ones({3}, dt), 1.0); },
                        {"masked_fill", "argument 'mask'", std::string(dtype_name(dt)), "(3,)", "bool"});
  CHECK(masked_fill(x, Tensor::of({1, 0, 1}, kInt64), 2.0).to_vector() == std::vector<double>{2, 0, 2, 2, 0, 2});
  CHECK(masked_fill(x, Tensor::of({0, 0, 1}, kBool), 2.0).to_vector() == std::vector<double>{0, 0, 2, 0, 0, 2});
}

TEST_CASE("integer ops are bit-identical with 1 and 2 threads", "[elementwise][dtype][threads]") {
  Generator gen(5);
  const Tensor a = ints({300, 200}, gen, kInt64), b = ints({200}, gen, kInt32), m = ints({300, 200}, gen, kBool);
  test::require_thread_deterministic([&] {
    return Tensors{a + b, a * 3.0, gt(a, b), logical_xor(m, a), where(m, a, b), masked_fill(a, m, 2.0), -a, abs(a)};
  });
}

TEST_CASE("float32 with float64 promotes to float64 in add, sub, mul, div and pow, as PyTorch",
          "[elementwise][dtype]") {
  Generator gen(3);
  const Tensor a32 = Tensor::rand({2, 3}, gen, kFloat32) + 0.5;
  const Tensor b64 = Tensor::rand({3}, gen, kFloat64) + 0.5;
  using F = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, F>> ops = {
      {"add", &add},         {"sub", &sub},        {"mul", &mul}, {"div", &div}, {"pow", static_cast<F>(&pow)},
      {"maximum", &maximum}, {"minimum", &minimum}};
  for (const auto& [name, f] : ops) {
    INFO(name);
    Tensor a = a32.detach().clone_data().set_requires_grad();
    Tensor b = b64.detach().clone_data().set_requires_grad();
    const Tensor out = f(a, b);
    CHECK(out.dtype() == kFloat64);
    // the same as computing on a converted to float64 (exact: float32 -> float64 is exact)
    Tensor a64 = a32.to(kFloat64).set_requires_grad();
    Tensor b2 = b64.detach().clone_data().set_requires_grad();
    const Tensor ref = f(a64, b2);
    CHECK(bit_equal(out.detach(), ref.detach()));
    sum(out).backward();
    sum(ref).backward();
    // the float32 operand's gradient comes back in float32 (rounded from float64), as in torch
    CHECK(a.grad().dtype() == kFloat32);
    CHECK(bit_equal(a.grad(), a64.grad().to(kFloat32)));
    CHECK(bit_equal(b.grad(), b2.grad()));
    // either order
    CHECK(f(b64, a32).dtype() == kFloat64);
  }
  // other binary ops still refuse the mix, naming the op
  CHECK_THROWS_WITH(atan2(a32, b64), Catch::Contains("atan2") && Catch::Contains("dtype"));
}

TEST_CASE("maximum and minimum propagate NaN from either operand, as PyTorch", "[elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor a = Tensor::of({nan, 1.0, 2.0, nan}, dt), b = Tensor::of({1.0, nan, 3.0, nan}, dt);
    for (const Tensor& y : {maximum(a, b), minimum(a, b), maximum(b, a), minimum(b, a)}) {
      const std::vector<double> v = y.to_vector();
      CHECK(std::isnan(v[0]));
      CHECK(std::isnan(v[1]));
      CHECK(!std::isnan(v[2]));
      CHECK(std::isnan(v[3]));
    }
    CHECK(maximum(a, b).to_vector()[2] == 3.0);
    CHECK(minimum(a, b).to_vector()[2] == 2.0);
  }
}

TEST_CASE("maximum and minimum split the gradient evenly at ties, as PyTorch", "[elementwise][ties]") {
  // torch: self gets g/2 where self == other, 0 where it lost, g elsewhere (also when NaN)
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {kFloat32, kFloat64}) {
    for (const bool create_graph : {false, true}) {
      INFO(dtype_name(dt) << " create_graph=" << create_graph);
      const Tensor a = Tensor::of({0.0, 1.0, 2.0, nan, -0.0}, dt).set_requires_grad();
      const Tensor b = Tensor::of({0.0, 2.0, 1.0, 1.0, 0.0}, dt).set_requires_grad();
      const Tensor seed = Tensor::of({4.0, 4.0, 4.0, 4.0, 4.0}, dt);
      const Tensors gmax = grad({maximum(a, b)}, {a, b}, {seed}, std::nullopt, create_graph);
      CHECK(gmax[0].detach().to_vector() == std::vector<double>{2, 0, 4, 4, 2});
      CHECK(gmax[1].detach().to_vector() == std::vector<double>{2, 4, 0, 4, 2});
      const Tensors gmin = grad({minimum(a, b)}, {a, b}, {seed}, std::nullopt, create_graph);
      CHECK(gmin[0].detach().to_vector() == std::vector<double>{2, 4, 0, 4, 2});
      CHECK(gmin[1].detach().to_vector() == std::vector<double>{2, 0, 4, 4, 2});
    }
  }
  // relu written as maximum(x, 0) at x = 0: half the gradient (torch), where relu gives 0
  const Tensor x = Tensor::zeros({1}, kFloat64).set_requires_grad();
  maximum(x, Tensor::zeros({}, kFloat64)).backward(Tensor::ones({1}, kFloat64));
  CHECK(x.grad().item() == 0.5);
}

TEST_CASE("comparison and logical operators: libtorch's spellings, values and dtypes match PyTorch",
          "[elementwise][operators][parity]") {
  ParityBatch batch("elementwise_operators");
  Generator gen(34);
  const Tensor a = ints({3, 4}, gen, kInt64), b = ints({4}, gen, kInt64);
  const Tensor m = ints({3, 4}, gen, kBool), n = ints({4}, gen, kBool);
  const Tensor x = Tensor::of({0.1, -1.0, 2.5, 0.0});  // float32: 0.1 compares as 0.1f, as in torch
  const Tensor y = Tensor::of({0.1, 1.0, 2.5, -3.0}, kFloat64);
  struct Case {
    std::string name, torch;
    std::vector<ParityBatch::Input> inputs;
    std::function<Tensor(const Tensors&)> fn;
  };
  const std::vector<Case> cases = {
      {"eq", "out = a == b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] == in[1]; }},
      {"ne", "out = a != b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] != in[1]; }},
      {"lt_int_float", "out = a < x", {{"a", a, false}, {"x", x, false}}, [](auto& in) { return in[0] < in[1]; }},
      {"le_f32_f64", "out = x <= y", {{"x", x, false}, {"y", y, false}}, [](auto& in) { return in[0] <= in[1]; }},
      {"gt", "out = a > b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] > in[1]; }},
      {"ge", "out = a >= b", {{"a", a, false}, {"b", b, false}}, [](auto& in) { return in[0] >= in[1]; }},
      {"eq_number_float32", "out = x == 0.1", {{"x", x, false}}, [](auto& in) { return in[0] == 0.1; }},
      {"ne_number_float64", "out = y != 0.1", {{"y", y, false}}, [](auto& in) { return in[0] != 0.1; }},
      {"gt_zero", "out = x > 0", {{"x", x, false}}, [](auto& in) { return in[0] > 0; }},
      {"int_gt_fraction", "out = a > 2.5", {{"a", a, false}}, [](auto& in) { return in[0] > 2.5; }},
      {"int_le_whole", "out = a <= 3", {{"a", a, false}}, [](auto& in) { return in[0] <= 3.0; }},
      {"int_lt_huge", "out = a < 1e30", {{"a", a, false}}, [](auto& in) { return in[0] < 1e30; }},
      {"bool_eq_two", "out = m == 2", {{"m", m, false}}, [](auto& in) { return in[0] == 2.0; }},
      {"bool_eq_one", "out = m == 1", {{"m", m, false}}, [](auto& in) { return in[0] == 1.0; }},
      {"number_lt_tensor", "out = 0.5 < x", {{"x", x, false}}, [](auto& in) { return 0.5 < in[0]; }},
      {"number_ge_tensor", "out = 2 >= a", {{"a", a, false}}, [](auto& in) { return 2.0 >= in[0]; }},
      {"number_eq_tensor", "out = 0.1 == x", {{"x", x, false}}, [](auto& in) { return 0.1 == in[0]; }},
      {"number_ne_tensor", "out = 1 != a", {{"a", a, false}}, [](auto& in) { return 1.0 != in[0]; }},
      {"number_gt_tensor", "out = 0 > y", {{"y", y, false}}, [](auto& in) { return 0.0 > in[0]; }},
      {"number_le_tensor", "out = 2.5 <= y", {{"y", y, false}}, [](auto& in) { return 2.5 <= in[0]; }},
      {"and", "out = m & n", {{"m", m, false}, {"n", n, false}}, [](auto& in) { return in[0] & in[1]; }},
      {"or", "out = m | n", {{"m", m, false}, {"n", n, false}}, [](auto& in) { return in[0] | in[1]; }},
      {"xor", "out = m ^ n", {{"m", m, false}, {"n", n, false}}, [](auto& in) { return in[0] ^ in[1]; }},
      {"bitwise_not_bool", "out = ~m", {{"m", m, false}}, [](auto& in) { return ~in[0]; }},
      {"not", "out = torch.logical_not(a)", {{"a", a, false}}, [](auto& in) { return !in[0]; }},
      {"mask_of_comparisons",
       "out = (x > 0) & (x < 1)",
       {{"x", x, false}},
       [](auto& in) { return (in[0] > 0) & (in[0] < 1); }},
  };
  for (const auto& c : cases) {
    Tensors args;
    for (const auto& in : c.inputs) args.push_back(in.value.detach());
    INFO(c.name);
    CHECK(c.fn(args).dtype() == kBool);
    batch.add(c.name, c.torch + "\nassert out.dtype == torch.bool, out.dtype", c.inputs, c.fn);
  }
  batch.run();

  // No gradient and no graph, even from a tensor that requires grad (torch's comparisons too).
  const Tensor w = Tensor::of({-1.0, 2.0}, kFloat64).set_requires_grad();
  CHECK_FALSE((w > 0).requires_grad());
  CHECK_FALSE((w == w).requires_grad());
  CHECK((w == w).to_vector() == std::vector<double>{1, 1});
  CHECK(w.is_same(w));  // identity is is_same, as in libtorch
  CHECK_FALSE(w.is_same(w.detach()));
  // A comparison is a mask for where and masked_fill.
  CHECK(where(w > 0, w, w * 0.0).to_vector() == std::vector<double>{0, 2});
  CHECK(masked_fill(w.detach(), w < 0, 5.0).to_vector() == std::vector<double>{5, 2});
}

TEST_CASE("comparison and logical operators: bad operands raise xgrad::Error naming the operator",
          "[elementwise][operators][errors]") {
  const Tensor a = Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3}, {3});
  const Tensor m = Tensor::from_vector(std::vector<bool>{true, false, true}, {3});
  // torch's &, |, ^ and ~ are bitwise on integers: not implemented, so refused rather than given
  // logical meaning.
  test::require_error([&] { (void)(a & m); }, {"operator&", "int64", "(3,)", "bool", "logical_and"});
  test::require_error([&] { (void)(m | a); }, {"operator|", "int64", "(3,)"});
  test::require_error([&] { (void)(a ^ a); }, {"operator^", "int64"});
  test::require_error([&] { (void)~a; }, {"operator~", "int64", "(3,)", "logical_not"});
  test::require_error([&] { (void)(m & Tensor()); }, {"operator&", "undefined"});
  // The comparison's own errors name the op: shapes that do not broadcast, undefined operands.
  test::require_error([&] { (void)(a == Tensor::zeros({2})); }, {"eq", "(3,)", "(2,)"});
  test::require_error([&] { (void)(Tensor() > 0); }, {"gt"});
  test::require_error([&] { (void)(1.0 <= Tensor()); }, {"le"});
}

TEST_CASE("relu keeps NaN and -0 and passes the gradient at a NaN, as torch", "[elementwise][ties]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor x = Tensor::of({nan, -0.0, 0.0, -1.0, 2.0}, dt).set_requires_grad();
    const Tensor y = relu(x);
    const std::vector<double> v = y.to_vector();
    CHECK(std::isnan(v[0]));
    CHECK((v[1] == 0.0 && std::signbit(v[1])));  // -0 stays -0 (torch: clamp_min(x, 0))
    CHECK(v[3] == 0.0);
    y.backward(Tensor::ones({5}, dt));
    CHECK(x.grad().to_vector() == std::vector<double>{1, 0, 0, 0, 1});  // threshold_backward(g, y, 0)
  }
}
