// Tests for ops/loss.*: gradcheck, torch parity (values and gradients, large logits), thread
// determinism across the parallel threshold, reductions over empty/ignored batches, bad inputs.
#include <cmath>
#include <string>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/softmax.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
const Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};
const char* torch_reduction(Reduction r) {
  return r == Reduction::None ? "'none'" : (r == Reduction::Mean ? "'mean'" : "'sum'");
}

// The pointwise losses with their torch spelling (parameters chosen away from the kinks' scale).
struct PointwiseOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&, Reduction)> fn;
  std::string torch;  // torch.nn.functional call prefix, completed with "reduction=...)"
};
std::vector<PointwiseOp> pointwise_ops() {
  return {
      {"mse_loss", [](const Tensor& x, const Tensor& t, Reduction r) { return mse_loss(x, t, r); },
       "torch.nn.functional.mse_loss(x, t, "},
      {"l1_loss", [](const Tensor& x, const Tensor& t, Reduction r) { return l1_loss(x, t, r); },
       "torch.nn.functional.l1_loss(x, t, "},
      {"huber_loss", [](const Tensor& x, const Tensor& t, Reduction r) { return huber_loss(x, t, r, 0.7); },
       "torch.nn.functional.huber_loss(x, t, delta=0.7, "},
      {"smooth_l1_loss", [](const Tensor& x, const Tensor& t, Reduction r) { return smooth_l1_loss(x, t, r, 0.5); },
       "torch.nn.functional.smooth_l1_loss(x, t, beta=0.5, "},
      {"smooth_l1_loss_beta0",
       [](const Tensor& x, const Tensor& t, Reduction r) { return smooth_l1_loss(x, t, r, 0.0); },
       "torch.nn.functional.smooth_l1_loss(x, t, beta=0.0, "},
  };
}

// Random class indices in [0, classes), with every `ignore_every`-th sample set to -100.
std::vector<std::int64_t> random_classes(std::int64_t n, std::int64_t classes, Generator& gen,
                                         std::int64_t ignore_every = 0) {
  const auto u = Tensor::rand({n}, gen, kFloat64).to_vector();
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] = std::min<std::int64_t>(classes - 1, static_cast<std::int64_t>(u[i] * static_cast<double>(classes)));
    if (ignore_every > 0 && i % static_cast<std::size_t>(ignore_every) == 1) y[i] = -100;
  }
  return y;
}

Tensor classes_tensor(const std::vector<std::int64_t>& y, const Shape& shape, Dtype dt = kFloat64) {
  return Tensor::from_vector(std::vector<double>(y.begin(), y.end()), shape, dt);
}

// Score shapes (C), (N, C), (N, C, d1, d2) and the matching target shapes.
struct ClassCase {
  Shape scores, target;
};
const std::vector<ClassCase> kClassCases = {{{5}, {}}, {{4, 5}, {4}}, {{3, 4, 2, 3}, {3, 2, 3}}, {{6, 1}, {6}}};
std::int64_t classes_of(const ClassCase& c) { return c.scores.size() == 1 ? c.scores[0] : c.scores[1]; }
}  // namespace

TEST_CASE("loss: pointwise losses pass gradcheck for input and target", "[loss]") {
  Generator gen(51);
  for (const auto& op : pointwise_ops())
    for (Reduction r : kReductions)
      for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 4}}) {
        INFO(op.name << " " << torch_reduction(r) << " " << shape_str(s));
        Tensor x = test::randn_leaf(s, gen);
        Tensor t = test::randn_leaf(s, gen);
        test::require_gradcheck([&](const Tensors& in) { return op.fn(in[0], in[1], r); }, {x, t});
      }
}

TEST_CASE("loss: cross_entropy and nll_loss pass gradcheck", "[loss]") {
  Generator gen(52);
  for (const auto& c : kClassCases)
    for (Reduction r : kReductions) {
      const std::int64_t n = shape_numel(c.target);
      const auto y = random_classes(n, classes_of(c), gen, n > 2 ? 3 : 0);
      for (double eps : {0.0, 0.2}) {
        INFO("cross_entropy " << shape_str(c.scores) << " " << torch_reduction(r) << " eps " << eps);
        Tensor z = test::randn_leaf(c.scores, gen);
        test::require_gradcheck([&](const Tensors& in) { return cross_entropy(in[0], y, r, eps); }, {z});
      }
      INFO("nll_loss " << shape_str(c.scores) << " " << torch_reduction(r));
      Tensor p = test::randn_leaf(c.scores, gen);
      test::require_gradcheck([&](const Tensors& in) { return nll_loss(in[0], y, r); }, {p});
    }
}

TEST_CASE("loss: binary_cross_entropy_with_logits passes gradcheck (input, target, pos_weight)", "[loss]") {
  Generator gen(53);
  for (Reduction r : kReductions) {
    INFO(torch_reduction(r));
    Tensor x = test::randn_leaf({4, 3}, gen);
    Tensor t = test::uniform_leaf({4, 3}, gen, 0, 1);
    test::require_gradcheck([&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r); },
                            {x, t});
    Tensor w = test::uniform_leaf({3}, gen, 0.5, 2);
    test::require_gradcheck([&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); },
                            {x, t, w});
    Tensor w1 = test::uniform_leaf({1, 1}, gen, 0.5, 2);
    test::require_gradcheck([&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); },
                            {x, t, w1});
  }
}

TEST_CASE("loss: values and gradients match PyTorch", "[loss][parity]") {
  ParityBatch batch("loss");  // one batch for both dtypes: Python and torch start once
  Generator gen(54);
  int k = 0;
  for (Dtype dt : {kFloat32, kFloat64}) {
    for (const auto& op : pointwise_ops())
      for (Reduction r : kReductions) {
        Tensor x = test::randn_leaf({5, 4}, gen, dt);
        Tensor t = test::randn_leaf({5, 4}, gen, dt);
        batch.add(fmt::format("{}_{}", op.name, k++),
                  fmt::format("out = {}reduction={})", op.torch, torch_reduction(r)), {{"x", x}, {"t", t}},
                  [&](const Tensors& in) { return op.fn(in[0], in[1], r); });
      }
    for (const auto& c : kClassCases)
      for (Reduction r : kReductions)
        for (double eps : {0.0, 0.1}) {
          const std::int64_t n = shape_numel(c.target);
          const auto y = random_classes(n, classes_of(c), gen, n > 2 ? 4 : 0);
          Tensor z = test::randn_leaf(c.scores, gen, dt);
          const Tensor yt = classes_tensor(y, c.target, dt);
          // The tensor overload...
          batch.add(fmt::format("ce_{}", k++),
                    fmt::format("out = torch.nn.functional.cross_entropy(z, y.long(), reduction={}, "
                                "label_smoothing={})",
                                torch_reduction(r), eps),
                    {{"z", z}, {"y", yt, false}},
                    [&](const Tensors& in) { return cross_entropy(in[0], in[1].to(kInt64), r, eps); });
          // ... and the vector overload, on logits of +-1e3 (exp overflows without the max shift).
          Tensor big = (z.detach() * Tensor::scalar(1000.0, dt)).set_requires_grad();
          batch.add(fmt::format("ce_big_{}", k++),
                    fmt::format("out = torch.nn.functional.cross_entropy(z, y.long(), reduction={}, "
                                "label_smoothing={})",
                                torch_reduction(r), eps),
                    {{"z", big}, {"y", yt, false}}, [&](const Tensors& in) { return cross_entropy(in[0], y, r, eps); });
          if (eps != 0) continue;
          Tensor lp = test::randn_leaf(c.scores, gen, dt);
          batch.add(fmt::format("nll_{}", k++),
                    fmt::format("out = torch.nn.functional.nll_loss(p, y.long(), reduction={})", torch_reduction(r)),
                    {{"p", lp}, {"y", yt, false}},
                    [&](const Tensors& in) { return nll_loss(in[0], in[1].to(kInt64), r); });
        }
    // nll_loss after log_softmax is cross_entropy: the gradient flows through both ops.
    {
      Tensor z = test::randn_leaf({6, 7}, gen, dt);
      const auto y = random_classes(6, 7, gen);
      batch.add(fmt::format("nll_log_softmax_{}", k++),
                "out = torch.nn.functional.nll_loss(torch.log_softmax(z, 1), y.long())",
                {{"z", z}, {"y", classes_tensor(y, {6}, dt), false}},
                [&](const Tensors& in) { return nll_loss(log_softmax(in[0], 1), y); });
    }
    for (Reduction r : kReductions) {
      Tensor x = test::randn_leaf({5, 3}, gen, dt);
      Tensor t = test::uniform_leaf({5, 3}, gen, 0, 1, dt);
      Tensor w = test::uniform_leaf({3}, gen, 0.5, 3, dt);
      batch.add(fmt::format("bce_{}", k++),
                fmt::format("out = torch.nn.functional.binary_cross_entropy_with_logits(x, t, reduction={})",
                            torch_reduction(r)),
                {{"x", x}, {"t", t}},
                [&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r); });
      // torch 1.13 cannot differentiate pos_weight, so it is a constant here (gradcheck covers it).
      batch.add(fmt::format("bce_pw_{}", k++),
                fmt::format("out = torch.nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=w, "
                            "reduction={})",
                            torch_reduction(r)),
                {{"x", x}, {"t", t}, {"w", w, false}},
                [&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); });
      // Logits of +-1e3 and 0/1 targets: log(1 + exp(1000)) must not overflow.
      Tensor big = Tensor::of({{1000, -1000, 0}, {-1000, 1000, 999}}, dt).set_requires_grad();
      Tensor tb = Tensor::of({{0, 1, 1}, {0, 1, 0.5}}, dt).set_requires_grad();
      batch.add(fmt::format("bce_big_{}", k++),
                fmt::format("out = torch.nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=w, "
                            "reduction={})",
                            torch_reduction(r)),
                {{"x", big}, {"t", tb}, {"w", Tensor::of({2, 0.5, 1}, dt), false}},
                [&](const Tensors& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); });
    }
  }
  batch.run();
}

TEST_CASE("loss: large logits stay finite", "[loss]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    Tensor z = Tensor::of({{1000, -1000, 0}, {-1000, -1000, -1000}, {1000, 1000, -1000}}, dt).set_requires_grad();
    const Tensor l = cross_entropy(z, std::vector<std::int64_t>{1, 2, 0}, Reduction::None);
    const auto v = l.to_vector();
    CHECK(v[0] == Approx(2000.0));         // lse = 1000, z_y = -1000
    CHECK(v[1] == Approx(std::log(3.0)));  // all equal
    CHECK(v[2] == Approx(std::log(2.0)));  // two tied maxima
    l.backward(Tensor::ones({3}, dt));
    for (double g : z.grad().to_vector()) CHECK(std::isfinite(g));
  }
}

TEST_CASE("loss: tensor and vector targets agree, ignore_index and empty batches", "[loss]") {
  Generator gen(55);
  Tensor z = Tensor::randn({8, 5}, gen, kFloat64);
  const auto y = random_classes(8, 5, gen, 3);
  for (Reduction r : kReductions) {
    CHECK(bit_equal(cross_entropy(z, y, r, 0.1), cross_entropy(z, classes_tensor(y, {8}, kInt64), r, 0.1)));
    CHECK(bit_equal(cross_entropy(z, y, r, 0.1), cross_entropy(z, classes_tensor(y, {8}, kInt32), r, 0.1)));
    CHECK(bit_equal(nll_loss(z, y, r), nll_loss(z, classes_tensor(y, {8}, kInt64), r)));
  }
  // An ignored sample adds nothing: its loss is 0 and its gradient row is 0.
  Tensor zl = z.clone_data().set_requires_grad();
  const Tensor per = cross_entropy(zl, y, Reduction::None);
  per.backward(Tensor::ones({8}, kFloat64));
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] != -100) continue;
    CHECK(per.to_vector()[i] == 0.0);
    for (int c = 0; c < 5; ++c) CHECK(zl.grad().to_vector()[i * 5 + static_cast<std::size_t>(c)] == 0.0);
  }
  // A custom ignore_index.
  CHECK(cross_entropy(z, std::vector<std::int64_t>(8, 7), Reduction::Sum, 0.0, 7).item() == 0.0);
  // Sum over an empty batch is 0, None is empty; Mean is refused (see loss.hpp).
  Tensor e = Tensor::zeros({0, 5}, kFloat64).set_requires_grad();
  CHECK(cross_entropy(e, std::vector<std::int64_t>{}, Reduction::Sum).item() == 0.0);
  CHECK(cross_entropy(e, std::vector<std::int64_t>{}, Reduction::None).shape() == Shape{0});
  CHECK(mse_loss(Tensor::zeros({0}), Tensor::zeros({0}), Reduction::Sum).item() == 0.0);
  test::require_error([&] { cross_entropy(e, std::vector<std::int64_t>{}); }, {"cross_entropy", "mean", "(0, 5)"});
  test::require_error([&] { cross_entropy(z, std::vector<std::int64_t>(8, -100)); },
                      {"cross_entropy", "mean", "all ignored", "(8, 5)"});
  test::require_error([&] { mse_loss(Tensor::zeros({0, 2}), Tensor::zeros({0, 2})); }, {"mse_loss", "mean", "(0, 2)"});
}

TEST_CASE("loss: bit-identical with 1 and 2 threads above the parallel threshold", "[loss][threads]") {
  Generator gen(56);
  const Tensor z0 = Tensor::randn({4096, 100}, gen, kFloat32);
  const auto y = random_classes(4096, 100, gen, 17);
  const Tensor x0 = Tensor::randn({300, 400}, gen, kFloat64);
  const Tensor t0 = Tensor::rand({300, 400}, gen, kFloat64);
  const Tensor seed = Tensor::randn({300, 400}, gen, kFloat64);
  const Tensor pw0 = Tensor::rand({400}, gen, kFloat64);
  const Tensor ce_seed = Tensor::randn({4096}, gen, kFloat32);    // outside: both runs must see the same
  const Tensor z3 = Tensor::randn({32, 10, 500}, gen, kFloat32);  // (N, C, d): the strided path
  const auto y3 = random_classes(32 * 500, 10, gen, 13);
  test::require_thread_deterministic([&] {
    Tensors out;
    for (Reduction r : kReductions) {
      for (double eps : {0.0, 0.1}) {
        Tensor z = z0.clone_data().set_requires_grad();
        Tensor l = cross_entropy(z, y, r, eps);
        l.backward(r == Reduction::None ? ce_seed : Tensor());
        out.push_back(l);
        out.push_back(z.grad());
      }
      Tensor zs = z3.clone_data().set_requires_grad();
      Tensor ls = cross_entropy(zs, y3, r, 0.05);
      ls.backward(r == Reduction::None ? Tensor::ones({32, 500}, kFloat32) : Tensor());
      out.push_back(ls);
      out.push_back(zs.grad());
      Tensor x = x0.clone_data().set_requires_grad();
      Tensor t = t0.clone_data().set_requires_grad();
      Tensor pw = pw0.clone_data().set_requires_grad();
      for (int which = 0; which < 4; ++which) {
        Tensor l = which == 0   ? mse_loss(x, t, r)
                   : which == 1 ? huber_loss(x, t, r, 0.3)
                   : which == 2 ? binary_cross_entropy_with_logits(x, t, r)
                                : binary_cross_entropy_with_logits(x, t, r, pw);
        l.backward(r == Reduction::None ? seed : Tensor());
        out.push_back(l);
      }
      out.push_back(x.grad());
      out.push_back(t.grad());
      out.push_back(pw.grad());
    }
    return out;
  });
}

TEST_CASE("loss: bad inputs raise xgrad::Error naming loss, argument and shapes", "[loss][errors]") {
  const Tensor a = Tensor::zeros({4, 3}), b = Tensor::zeros({4, 1});
  for (const auto& op : pointwise_ops()) {
    INFO(op.name);
    test::require_error([&] { op.fn(a, b, Reduction::Mean); }, {"target", "(4, 1)", "(4, 3)", "broadcasting"});
    test::require_error([&] { op.fn(a, Tensor::zeros({4, 3}, kFloat64), Reduction::Sum); }, {"dtype", "float64"});
    test::require_error([&] { op.fn(Tensor(), a, Reduction::Sum); }, {"input", "undefined"});
  }
  test::require_error([&] { mse_loss(a, b); }, {"mse_loss", "(4, 1)", "(4, 3)"});
  test::require_error([&] { huber_loss(a, a, Reduction::Mean, 0.0); }, {"huber_loss", "delta", "0"});
  test::require_error([&] { smooth_l1_loss(a, a, Reduction::Mean, -1.0); }, {"smooth_l1_loss", "beta", "-1"});
  test::require_error([&] { mse_loss(a, a, static_cast<Reduction>(7)); }, {"mse_loss", "reduction", "7"});

  using V = std::vector<std::int64_t>;
  test::require_error(
      [&] {
        cross_entropy(a, V{0, 1, 2});
      },
      {"cross_entropy", "3 class indices", "(4, 3)", "4 samples"});
  test::require_error(
      [&] {
        cross_entropy(a, V{0, 1, 3, 0});
      },
      {"cross_entropy", "class index 3", "position 2", "[0, 3)"});
  test::require_error([&] { cross_entropy(a, V{0, -1, 2, 0}); }, {"cross_entropy", "class index -1", "(4, 3)"});
  test::require_error([&] { cross_entropy(Tensor::scalar(1.0), V{0}); }, {"cross_entropy", "logits", "0-d"});
  test::require_error([&] { cross_entropy(Tensor(), V{0}); }, {"cross_entropy", "logits", "undefined"});
  test::require_error(
      [&] {
        cross_entropy(a, V{0, 1, 2, 0}, Reduction::Mean, 1.5);
      },
      {"cross_entropy", "label_smoothing", "1.5"});
  // Class indices come as int64 or int32 tensors; a float target says how to convert.
  test::require_error(
      [&] {
        cross_entropy(a, Tensor::of({0, 1, 2, 0}));
      },
      {"cross_entropy", "argument 'target'", "int64", "float32", "target.to(xgrad::kInt64)"});
  test::require_error([&] { cross_entropy(a, Tensor::of({0, 1, 2, 0}, kBool)); }, {"cross_entropy", "target", "bool"});
  test::require_error(
      [&] {
        cross_entropy(a.to(kInt64), V{0, 1, 2, 0});
      },
      {"cross_entropy", "argument 'logits'", "int64"});
  test::require_error(
      [&] {
        cross_entropy(a, Tensor::of({0, 1, 5, 0}, kInt64));
      },
      {"cross_entropy", "class index 5", "position 2"});
  test::require_error(
      [&] {
        cross_entropy(a, Tensor::of({0, 1, 2}));
      },
      {"cross_entropy", "target", "shape (3,)", "(4, 3)", "shape (4,)"});
  test::require_error([&] { cross_entropy(a, Tensor::zeros({4, 1})); }, {"cross_entropy", "(4, 1)", "shape (4,)"});
  test::require_error(
      [&] {
        cross_entropy(Tensor::zeros({2, 3, 5}), Tensor::zeros({2, 3}));
      },
      {"cross_entropy", "(2, 3)", "(2, 3, 5)", "(2, 5)"});
  test::require_error([&] { nll_loss(a, V{0, 1, 7, 0}); }, {"nll_loss", "class index 7", "[0, 3)"});
  test::require_error([&] { nll_loss(a, Tensor::of({0, 1, 2, 0})); }, {"nll_loss", "target", "float32", "kInt64"});
  test::require_error([&] { mse_loss(a.to(kInt64), a.to(kInt64)); }, {"mse_loss", "argument 'input'", "int64"});
  test::require_error([&] { nll_loss(Tensor::zeros({5}), Tensor::of({1})); }, {"nll_loss", "shape (1,)", "shape ()"});

  const std::string bce = "binary_cross_entropy_with_logits";
  test::require_error([&] { binary_cross_entropy_with_logits(a, b); }, {bce, "target", "(4, 1)", "(4, 3)"});
  test::require_error([&] { binary_cross_entropy_with_logits(a, a, Reduction::Mean, Tensor::zeros({4})); },
                      {bce, "pos_weight", "(4,)", "(4, 3)"});
  test::require_error(
      [&] {
        binary_cross_entropy_with_logits(a, a, Reduction::Mean, Tensor::zeros({2, 4, 3}));
      },
      {bce, "pos_weight", "(2, 4, 3)", "(4, 3)"});
  test::require_error([&] { binary_cross_entropy_with_logits(a, a, Reduction::Mean, Tensor::zeros({3}, kFloat64)); },
                      {bce, "pos_weight", "float64", "float32"});
}
