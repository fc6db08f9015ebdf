// Tests for ops/matmul.*: gradcheck, torch parity, thread determinism, bad inputs.
#include <array>

#include "support.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/tiled_gemm.hpp"
#include "xgrad/ops/matmul.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
// (a, b) shape pairs covering every torch.matmul rule: dot, matrix, vector on either side (with
// and without batches), batched with equal, one-sided and two-sided batch broadcasting.
const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{5}, {5}},                    // dot -> 0-d
    {{3, 4}, {4, 2}},              // 2-d x 2-d
    {{1, 1}, {1, 1}},              // smallest matrices
    {{4}, {4, 3}},                 // 1-d x 2-d
    {{3, 4}, {4}},                 // 2-d x 1-d
    {{4}, {2, 4, 3}},              // 1-d x batched
    {{2, 3, 4}, {4}},              // batched x 1-d
    {{2, 3, 4}, {4, 5}},           // batched x matrix (folded into one GEMM)
    {{3, 4}, {2, 4, 5}},           // matrix x batched (a's gradient sums the batch)
    {{2, 3, 4}, {2, 4, 5}},        // equal batches
    {{1, 3, 4}, {2, 4, 5}},        // size-1 batch broadcast on a
    {{2, 1, 3, 4}, {3, 4, 2}},     // batch broadcast both ways: (2, 1) x (3,) -> (2, 3)
    {{2, 1, 3, 4}, {1, 3, 4, 2}},  // (2, 1) x (1, 3) -> (2, 3)
};
}  // namespace

TEST_CASE("matmul: gradcheck over every shape rule", "[matmul]") {
  Generator gen(11);
  for (const auto& [sa, sb] : kShapes) {
    INFO(shape_str(sa) << " @ " << shape_str(sb));
    Tensor a = test::randn_leaf(sa, gen);
    Tensor b = test::randn_leaf(sb, gen);
    test::require_gradcheck([](const Tensors& in) { return matmul(in[0], in[1]); }, {a, b});
  }
}

TEST_CASE("matmul: output shapes follow torch.matmul", "[matmul]") {
  Generator gen(12);
  CHECK(matmul(Tensor::ones({5}), Tensor::ones({5})).shape() == Shape{});
  CHECK(matmul(Tensor::ones({5}), Tensor::ones({5})).item() == 5.0);
  CHECK(matmul(Tensor::ones({4}), Tensor::ones({2, 4, 3})).shape() == Shape{2, 3});
  CHECK(matmul(Tensor::ones({2, 3, 4}), Tensor::ones({4})).shape() == Shape{2, 3});
  CHECK(matmul(Tensor::ones({2, 1, 3, 4}), Tensor::ones({1, 5, 4, 2})).shape() == Shape{2, 5, 3, 2});
  // Empty inner dimension: the product is all zeros, as in torch.
  Tensor z = matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3}));
  CHECK(bit_equal(z, Tensor::zeros({2, 3})));
  // Gradients reach vector inputs with the inputs' own shapes.
  Tensor v = test::randn_leaf({4}, gen);
  Tensor m = test::randn_leaf({2, 4, 3}, gen);
  matmul(v, m).backward(Tensor::ones({2, 3}, kFloat64));
  CHECK(v.grad().shape() == Shape{4});
  CHECK(m.grad().shape() == Shape{2, 4, 3});
}

TEST_CASE("matmul: values and gradients match PyTorch", "[matmul][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("matmul_") + std::string(dtype_name(dt)));
    Generator gen(13);
    int k = 0;
    for (const auto& [sa, sb] : kShapes) {
      Tensor a = test::randn_leaf(sa, gen, dt);
      Tensor b = test::randn_leaf(sb, gen, dt);
      batch.add(fmt::format("small_{}", k++), "out = torch.matmul(a, b)", {{"a", a}, {"b", b}},
                [](const Tensors& in) { return matmul(in[0], in[1]); });
    }
    // Large enough for detail::gemm to cut the products into parallel blocks (both split
    // directions), for the folded batch path and for the broadcast-batch accumulation. float32
    // sums of a few hundred products get an absolute tolerance scaled to their size.
    const double rtol = dt == kFloat32 ? 1e-4 : 1e-10, atol = dt == kFloat32 ? 1e-4 : 1e-11;
    const std::vector<std::pair<Shape, Shape>> large = {
        {{256, 300}, {300, 96}},        // split along m (and the gradients along k and m)
        {{384, 200}, {200, 300}},       // a 3 x 2 grid of tiles
        {{40, 300}, {300, 500}},        // split along n
        {{6, 50, 70}, {70, 300}},       // batched x matrix
        {{3, 1, 64, 80}, {4, 80, 72}},  // broadcast batches
        {{700}, {700, 900}},            // vector x big matrix
        {{900, 700}, {700}},            // big matrix x vector
    };
    for (const auto& [sa, sb] : large) {
      Tensor a = test::randn_leaf(sa, gen, dt);
      Tensor b = test::randn_leaf(sb, gen, dt);
      batch.add(
          fmt::format("large_{}", k++), "out = torch.matmul(a, b)", {{"a", a}, {"b", b}},
          [](const Tensors& in) { return matmul(in[0], in[1]); }, rtol, atol);
    }
    // Only one input requires grad.
    Tensor a = test::randn_leaf({3, 4}, gen, dt);
    Tensor b = test::randn_leaf({4, 2}, gen, dt);
    batch.add("a_only", "out = torch.matmul(a, b)", {{"a", a}, {"b", b, false}},
              [](const Tensors& in) { return matmul(in[0], in[1]); });
    batch.add("b_only", "out = torch.matmul(a, b)", {{"a", a, false}, {"b", b}},
              [](const Tensors& in) { return matmul(in[0], in[1]); });
    batch.run();
  }
}

TEST_CASE("matmul: bit-identical with 1 and 2 threads, on either GEMM backend", "[matmul][threads]") {
  namespace blas = detail::blas;
  Generator gen(14);
  // The brief's reference size, plus odd sizes (edge tiles) and broadcast batches, in both dtypes.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{256, 512}, {512, 384}}, {{257, 513}, {513, 383}}, {{5, 1, 60, 70}, {3, 70, 50}}, {{1000}, {1000, 700}}};
  struct ResetBackend {  // the process's own choice back, however the test ends
    ~ResetBackend() { blas::reset_backend(); }
  } reset;
  for (blas::Backend backend : {blas::Backend::openblas, blas::Backend::xgrad}) {
    blas::set_backend(backend);
    for (Dtype dt : {kFloat32, kFloat64})
      for (const auto& [sa, sb] : cases) {
        INFO(blas::backend_name(backend) << " " << dtype_name(dt) << " " << shape_str(sa) << " @ " << shape_str(sb));
        Tensor a0 = Tensor::randn(sa, gen, dt);
        Tensor b0 = Tensor::randn(sb, gen, dt);
        test::require_thread_deterministic([&] {
          Tensor a = a0.clone_data().set_requires_grad();
          Tensor b = b0.clone_data().set_requires_grad();
          Tensor c = matmul(a, b);
          Generator sg(15);
          c.backward(Tensor::randn(c.shape(), sg, dt));
          return Tensors{c, a.grad(), b.grad()};
        });
      }
  }
}

TEST_CASE("matmul: detail::gemm honours transpose flags and beta", "[matmul]") {
  // C = op(A) op(B) + beta C against a plain triple loop, at a size that detail::gemm cuts into a
  // 2 x 2 grid of tiles and at one it does not cut.
  Generator gen(16);
  for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{300, 260, 40}, std::array<std::int64_t, 3>{13, 7, 5}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO("trans_a " << ta << " trans_b " << tb);
        Tensor a = Tensor::randn(ta ? Shape{k, m} : Shape{m, k}, gen, kFloat64);
        Tensor b = Tensor::randn(tb ? Shape{n, k} : Shape{k, n}, gen, kFloat64);
        Tensor c = Tensor::randn({m, n}, gen, kFloat64);
        Tensor expected = c.clone_data();
        const double *pa = a.data<double>(), *pb = b.data<double>();
        double* pe = expected.data<double>();
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t l = 0; l < k; ++l)
              s += (ta ? pa[l * m + i] : pa[i * k + l]) * (tb ? pb[j * k + l] : pb[l * n + j]);
            pe[i * n + j] = s + 0.5 * pe[i * n + j];
          }
        detail::gemm<double>(ta, tb, m, n, k, pa, ta ? m : k, pb, tb ? k : n, 0.5, c.data<double>(), n);
        CHECK(allclose(c, expected, 1e-12, 1e-12));
      }
}

TEST_CASE("matmul: bad inputs raise xgrad::Error naming op and shapes", "[matmul][errors]") {
  test::require_error(
      [] {
        matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
      },
      {"matmul", "(2, 3)", "(4, 5)", "(3)", "(4)"});
  test::require_error([] { matmul(Tensor::zeros({3}), Tensor::zeros({4})); }, {"matmul", "(3,)", "(4,)"});
  test::require_error([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({2})); }, {"matmul", "(2, 3)", "(2,)"});
  test::require_error(
      [] {
        matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5}));
      },
      {"matmul", "batch", "(2, 3, 4)", "(3, 4, 5)", "2 vs 3"});
  test::require_error(
      [] {
        matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, kFloat64));
      },
      {"matmul", "dtype", "float32", "float64"});
  test::require_error([] { matmul(Tensor::scalar(2.0), Tensor::zeros({3})); }, {"matmul", "()", "(3,)"});
  test::require_error([] { matmul(Tensor::zeros({3}), Tensor::scalar(2.0)); }, {"matmul", "(3,)", "()"});
  test::require_error([] { matmul(Tensor(), Tensor::zeros({3})); }, {"matmul", "undefined"});
}
