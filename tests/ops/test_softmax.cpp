// Tests for ops/softmax.*: gradcheck, torch parity, stability, thread determinism, bad inputs.
#include <cmath>
#include <limits>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/softmax.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
using SoftmaxFn = Tensor (*)(const Tensor&, std::int64_t);
struct SoftmaxOp {
  const char* name;
  SoftmaxFn fn;
  const char* torch;
};
const SoftmaxOp kOps[] = {{"softmax", softmax, "torch.softmax"}, {"log_softmax", log_softmax, "torch.log_softmax"}};

struct AxisCase {
  Shape shape;
  std::int64_t axis;
};
// 0-d, 1-d, rows (last axis), columns (leading / middle axis), negative axes, size-1 axes.
const std::vector<AxisCase> kAxes = {{{}, -1},        {{}, 0},        {{5}, 0},       {{5}, -1},
                                     {{3, 4}, 1},     {{3, 4}, 0},    {{3, 4}, -2},   {{2, 3, 4}, 1},
                                     {{2, 3, 4}, -1}, {{2, 3, 4}, 0}, {{2, 1, 3}, 1}, {{4, 1}, -1}};
}  // namespace

TEST_CASE("softmax: gradcheck over shapes and axes", "[softmax]") {
  Generator gen(21);
  for (const auto& op : kOps)
    for (const auto& c : kAxes) {
      INFO(op.name << " x" << shape_str(c.shape) << " axis " << c.axis);
      Tensor x = test::randn_leaf(c.shape, gen);
      test::require_gradcheck([&](const Tensors& in) { return op.fn(in[0], c.axis); }, {x});
    }
}

TEST_CASE("softmax: values and gradients match PyTorch", "[softmax][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("softmax_") + std::string(dtype_name(dt)));
    Generator gen(22);
    int k = 0;
    for (const auto& op : kOps) {
      for (const auto& c : kAxes) {
        Tensor x = test::randn_leaf(c.shape, gen, dt);
        batch.add(fmt::format("{}_{}", op.name, k++), fmt::format("out = {}(x, dim={})", op.torch, c.axis), {{"x", x}},
                  [&](const Tensors& in) { return op.fn(in[0], c.axis); });
      }
      // Logits of +-1000: exp overflows unless the maximum is subtracted first. Rows and columns.
      Tensor big = Tensor::of({{1000, -1000, 0, 999}, {-1000, -1000, -999, -1001}, {1000, 1000, 1000, 1000}}, dt)
                       .set_requires_grad();
      for (std::int64_t axis : {0, 1})
        batch.add(fmt::format("{}_1000_axis{}", op.name, axis), fmt::format("out = {}(x, dim={})", op.torch, axis),
                  {{"x", big}}, [&](const Tensors& in) { return op.fn(in[0], axis); });
      // Columns wider than one column block (64), and long rows.
      Tensor wide = test::randn_leaf({3, 5, 70}, gen, dt);
      batch.add(fmt::format("{}_wide_cols", op.name), fmt::format("out = {}(x, dim=1)", op.torch), {{"x", wide}},
                [&](const Tensors& in) { return op.fn(in[0], 1); });
      Tensor longrow = test::uniform_leaf({2, 3001}, gen, -20, 20, dt);  // full batches and a tail
      batch.add(fmt::format("{}_long_rows", op.name), fmt::format("out = {}(x, dim=-1)", op.torch), {{"x", longrow}},
                [&](const Tensors& in) { return op.fn(in[0], -1); });
    }
    // Cross-entropy-like composite: the gradients flow through log_softmax, softmax and mean.
    Tensor z = test::randn_leaf({6, 5}, gen, dt);
    Tensor w = test::randn_leaf({6, 5}, gen, dt);
    batch.add("composite", "out = torch.mean(torch.log_softmax(z, 1) * torch.softmax(w, 0), dim=(0, 1))",
              {{"z", z}, {"w", w}}, [](const Tensors& in) { return mean(log_softmax(in[0], 1) * softmax(in[1], 0)); });
    batch.run();
  }
}

TEST_CASE("softmax: stable for large logits", "[softmax]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    Tensor x = Tensor::of({{1000, -1000, 0}, {-1000, -1000, -1000}}, dt).set_requires_grad();
    const Tensor s = softmax(x, 1);
    const Tensor ls = log_softmax(x, 1);
    for (double v : s.to_vector()) CHECK(std::isfinite(v));
    for (double v : ls.to_vector()) CHECK(!std::isnan(v));
    // Each row of softmax sums to one; log_softmax is log of softmax where softmax is not 0.
    const auto rs = sum(s, {1}).to_vector();
    for (double v : rs) CHECK(v == Approx(1.0).epsilon(1e-6));
    CHECK(ls.to_vector()[0] == Approx(0.0).margin(1e-6));
    CHECK(ls.to_vector()[1] == Approx(-2000.0));
    sum(ls * s).backward();
    for (double v : x.grad().to_vector()) CHECK(std::isfinite(v));
  }
}

TEST_CASE("softmax: rows of -inf give NaN like torch", "[softmax]") {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::of({{-inf, -inf}, {1, -inf}}, kFloat64);
  const auto s = softmax(x, 1).to_vector();
  CHECK((std::isnan(s[0]) && std::isnan(s[1])));
  CHECK((s[2] == 1.0 && s[3] == 0.0));
  const auto ls = log_softmax(x, 1).to_vector();
  CHECK((std::isnan(ls[0]) && std::isnan(ls[1])));
  CHECK((ls[2] == 0.0 && ls[3] == -inf));
  // A NaN anywhere in a row makes the whole row NaN (torch does the same); other rows are untouched.
  std::vector<double> v(2 * 19, 0.5);
  v[13] = std::nan("");
  const auto sn = softmax(Tensor::from_vector(v, {2, 19}, kFloat32), 1).to_vector();
  for (std::size_t i = 0; i < sn.size(); ++i) CHECK(std::isnan(sn[i]) == (i < 19));
}

TEST_CASE("softmax: bit-identical with 1 and 2 threads", "[softmax][threads]") {
  Generator gen(23);
  const Tensor a0 = Tensor::randn({512, 1024}, gen, kFloat32);
  const Tensor b0 = Tensor::randn({8, 256, 200}, gen, kFloat64);
  test::require_thread_deterministic([&] {
    Tensors out;
    for (const auto& op : kOps) {
      for (std::int64_t axis : {-1, 0}) {  // rows, then columns
        Tensor a = a0.clone_data().set_requires_grad();
        Tensor y = op.fn(a, axis);
        y.backward(a0);  // a non-uniform seed so that the backward sums are not trivial
        out.push_back(y);
        out.push_back(a.grad());
      }
      Tensor b = b0.clone_data().set_requires_grad();
      Tensor y = op.fn(b, 1);  // middle axis: column blocks over (outer, inner)
      y.backward(b0);
      out.push_back(y);
      out.push_back(b.grad());
    }
    return out;
  });
}

TEST_CASE("softmax: empty tensors", "[softmax]") {
  Tensor x = Tensor::zeros({0, 4}, kFloat64).set_requires_grad();
  Tensor y = softmax(x, 1);
  CHECK(y.shape() == Shape{0, 4});
  y.backward(Tensor::zeros({0, 4}, kFloat64));
  CHECK(x.grad().shape() == Shape{0, 4});
  CHECK(log_softmax(Tensor::zeros({3, 0}), 1).shape() == Shape{3, 0});
}

TEST_CASE("softmax: bad inputs raise xgrad::Error naming op, axis and shape", "[softmax][errors]") {
  Tensor x = Tensor::zeros({2, 3});
  for (const auto& op : kOps) {
    INFO(op.name);
    test::require_error([&] { op.fn(x, 2); }, {op.name, "axis 2", "(2, 3)"});
    test::require_error([&] { op.fn(x, -3); }, {op.name, "axis -3", "(2, 3)"});
    test::require_error([&] { op.fn(Tensor::scalar(1.0), 1); }, {op.name, "axis 1", "()"});
    test::require_error([&] { op.fn(Tensor(), -1); }, {op.name, "undefined"});
  }
}
