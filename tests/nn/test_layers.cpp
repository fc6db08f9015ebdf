// Tests for nn/linear.* (dense and sparse input), nn/layer_norm.*, nn/embedding.*, nn/dropout.*, nn/activation.*: value
// and gradient parity with the same torch.nn modules (our weights passed in through functional_call), gradcheck,
// torch's default init, dropout's masks and statistics, and bad inputs.
#include <fmt/ranges.h>  // fmt::join

#include <cmath>
#include <memory>

#include "support.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/nn/block_sparse_linear.hpp"
#include "xgrad/nn/conv.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/nn/layer_norm.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/optim/sgd.hpp"
#include "xgrad/nn/rnn.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
// Python that runs torch module `ctor` with the given parameters (our values) on `arg`.
std::string torch_call(const std::string& ctor, const std::string& params, const std::string& arg) {
  return fmt::format("from torch.nn.utils.stateless import functional_call\nout = functional_call({}, {{{}}}, ({},))",
                     ctor, params, arg);
}
}  // namespace

// ---- Linear ---------------------------------------------------------------------------------------

TEST_CASE("Linear: values and gradients match torch.nn.Linear", "[linear][parity]") {
  ParityBatch batch("linear");  // one batch for both dtypes: Python and torch start once
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(11);
    const std::string py_dt = dt == kFloat32 ? "torch.float32" : "torch.float64";
    const std::vector<Shape> xs = {{5}, {4, 5}, {2, 3, 5}, {2, 1, 3, 5}, {1, 5}};
    int k = 0;
    for (const auto& xshape : xs)
      for (bool bias : {true, false}) {
        Tensor x = test::randn_leaf(xshape, gen, dt);
        Tensor w = test::randn_leaf({3, 5}, gen, dt);
        Tensor b = test::randn_leaf({3}, gen, dt);
        const std::string ctor =
            fmt::format("torch.nn.Linear(5, 3, bias={}, dtype={})", bias ? "True" : "False", py_dt);
        if (bias)
          batch.add(fmt::format("linear_{}_{}", dtype_name(dt), k++), torch_call(ctor, "'weight': w, 'bias': b", "x"),
                    {{"x", x}, {"w", w}, {"b", b}}, [](const Tensors& in) {
                      nn::Linear layer(in[1], in[2]);
                      return layer(in[0]);
                    });
        else
          batch.add(fmt::format("linear_{}_{}", dtype_name(dt), k++), torch_call(ctor, "'weight': w", "x"),
                    {{"x", x}, {"w", w}}, [](const Tensors& in) {
                      nn::Linear layer(in[1]);
                      return layer(in[0]);
                    });
      }
    // A larger layer, so the product goes through the blocked GEMM path.
    Tensor x = test::randn_leaf({4, 33, 70}, gen, dt);
    Tensor w = test::randn_leaf({65, 70}, gen, dt);
    Tensor b = test::randn_leaf({65}, gen, dt);
    batch.add(
        fmt::format("linear_large_{}", dtype_name(dt)),
        torch_call(fmt::format("torch.nn.Linear(70, 65, dtype={})", py_dt), "'weight': w, 'bias': b", "x"),
        {{"x", x}, {"w", w}, {"b", b}}, [](const Tensors& in) { return nn::functional::linear(in[0], in[1], in[2]); },
        dt == kFloat32 ? 1e-4 : -1, dt == kFloat32 ? 1e-4 : -1);
  }
  batch.run();
}

TEST_CASE("Linear: gradcheck in float64", "[linear]") {
  Generator gen(12);
  for (const Shape& xshape : {Shape{4}, Shape{3, 4}, Shape{2, 2, 4}}) {
    INFO("x " << shape_str(xshape));
    test::require_gradcheck([](const Tensors& in) { return nn::functional::linear(in[0], in[1], in[2]); },
                            {test::randn_leaf(xshape, gen), test::randn_leaf({3, 4}, gen), test::randn_leaf({3}, gen)});
  }
}

TEST_CASE("Linear: torch's default init, seeded", "[linear][init]") {
  nn::Linear layer(400, 300, true, kFloat64, 5);
  CHECK(layer.weight().shape() == Shape{300, 400});
  CHECK(layer.bias().shape() == Shape{300});
  CHECK(layer.weight().dtype() == kFloat64);
  const double bound = 1.0 / std::sqrt(400.0);
  double wmax = 0, bmax = 0, sq = 0;
  for (double v : layer.weight().to_vector()) {
    wmax = std::max(wmax, std::abs(v));
    sq += v * v;
  }
  for (double v : layer.bias().to_vector()) bmax = std::max(bmax, std::abs(v));
  CHECK(wmax <= bound);
  CHECK(wmax > 0.99 * bound);
  CHECK(bmax <= bound);
  CHECK(bmax > 0.9 * bound);
  CHECK(std::sqrt(sq / 120000.0) == Approx(bound / std::sqrt(3.0)).epsilon(0.02));

  // The seed overload is the Generator overload with Generator(seed); other seeds differ.
  Generator gen(5);
  nn::Linear same(400, 300, gen, true, kFloat64);
  CHECK(bit_equal(same.weight().detach(), layer.weight().detach()));
  CHECK(bit_equal(same.bias().detach(), layer.bias().detach()));
  nn::Linear other(400, 300, true, kFloat64, 6);
  CHECK_FALSE(bit_equal(other.weight().detach(), layer.weight().detach()));

  nn::Linear no_bias(3, 2, false);
  CHECK_FALSE(no_bias.bias().defined());
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK(no_bias(Tensor::ones({3})).shape() == Shape{2});
}

TEST_CASE("Linear: bad inputs raise xgrad::Error", "[linear][errors]") {
  nn::Linear layer(4, 3);
  test::require_error([&] { layer(Tensor::zeros({2, 5})); }, {"Linear", "'x'", "(2, 5)", "in_features = 4"});
  test::require_error([&] { layer(Tensor::scalar(1.0)); }, {"Linear", "'x'", "()"});
  test::require_error([&] { layer(Tensor()); }, {"Linear", "undefined"});
  test::require_error([&] { layer(Tensor::zeros({2, 4}, kFloat64)); }, {"linear", "float64", "float32"});
  test::require_error([] { nn::Linear bad(-1, 3); }, {"Linear", "in = -1"});
  test::require_error([] { nn::Linear bad(Tensor::zeros({3})); }, {"Linear", "'weight'", "(3,)"});
  test::require_error([] { nn::Linear bad(Tensor::zeros({3, 2}), Tensor::zeros({2})); }, {"Linear", "'bias'", "(2,)"});
  test::require_error(
      [] {
        nn::functional::linear(Tensor::zeros({2}), Tensor::zeros({2, 2}), Tensor::zeros({3}));
      },
      {"linear", "'bias'", "(3,)"});
}

// ---- LayerNorm ------------------------------------------------------------------------------------

TEST_CASE("Linear: takes a sparse input (bag-of-words rows) and trains on it", "[linear][sparse]") {
  // 40 documents over a vocabulary of 30 words, 2-4 words each; the targets are a fixed linear map
  // of the word counts, which the layer learns from the sparse rows alone
  Generator g(4);
  std::vector<std::int64_t> crow{0}, col;
  std::vector<double> counts;
  for (std::int64_t i = 0; i < 40; ++i) {
    const auto words = 2 + static_cast<std::int64_t>(g.uniform() * 3);
    std::int64_t c = static_cast<std::int64_t>(g.uniform() * 10);
    for (std::int64_t k = 0; k < words && c < 30; ++k, c += 1 + static_cast<std::int64_t>(g.uniform() * 9)) {
      col.push_back(c);
      counts.push_back(1 + std::floor(g.uniform() * 3));
    }
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto n = static_cast<std::int64_t>(col.size());
  const auto long_tensor = [](const std::vector<std::int64_t>& v) {
    return Tensor::from_data<std::int64_t>(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
  };
  const SparseCsr x =
      sparse_csr_tensor(long_tensor(crow), long_tensor(col), Tensor::from_vector(counts, {n}, kFloat32), {40, 30});
  const Tensor target = nn::Linear(30, 2, true, kFloat32, 7)(x.to_dense()).detach();

  nn::Linear fc(30, 2);
  CHECK(allclose(fc(x), fc(x.to_dense()), 1e-5, 1e-6));  // the sparse path is the dense layer
  CHECK(allclose(nn::functional::linear(x, fc.weight(), fc.bias()), fc(x)));
  nn::SGD opt(fc.parameters(), nn::SGDOptions(0.05));
  const double first = mse_loss(fc(x), target).item();
  double last = first;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    const Tensor loss = mse_loss(fc(x), target);
    loss.backward();
    opt.step();
    last = loss.item();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.01 * first);
  test::require_error([&] { nn::Linear(29, 2)(x); }, {"Linear", "'x'", "(40, 30)", "in_features = 29"});
}

TEST_CASE("LayerNorm: values and gradients match torch.nn.LayerNorm", "[layer_norm][parity]") {
  ParityBatch batch("layer_norm");  // one batch for both dtypes: Python and torch start once
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(21);
    const std::string py_dt = dt == kFloat32 ? "torch.float32" : "torch.float64";
    struct C {
      Shape x, norm;
      double eps;
    };
    const std::vector<C> cases = {
        {{3, 5}, {5}, 1e-5},          {{5}, {5}, 1e-5},    {{2, 3, 4}, {3, 4}, 1e-5}, {{2, 3, 4}, {4}, 1e-3},
        {{2, 3, 4}, {2, 3, 4}, 1e-5}, {{4, 1}, {1}, 1e-5}, {{6, 200}, {200}, 1e-5}};
    int k = 0;
    for (const auto& c : cases) {
      // One element per row in float32: torch computes x * rstd - mean * rstd, whose rounding error
      // (|x| * 316 * 6e-8) is far above the tolerance, while ours is exactly 0. float64 only.
      if (dt == kFloat32 && shape_numel(c.norm) == 1) continue;
      // An offset in x checks that the variance is computed stably (centred first). Not with one
      // element per row: there the output is (x - mean) / sqrt(eps), i.e. rounding noise times 316.
      const double offset = shape_numel(c.norm) > 1 ? 10.0 : 0.0;
      Tensor x = (Tensor::randn(c.x, gen, dt) * 3.0 + offset).detach().set_requires_grad();
      Tensor w = test::randn_leaf(c.norm, gen, dt);
      Tensor b = test::randn_leaf(c.norm, gen, dt);
      const std::string norm = fmt::format("[{}]", fmt::join(c.norm, ", "));
      batch.add(fmt::format("affine_{}_{}", dtype_name(dt), k),
                torch_call(fmt::format("torch.nn.LayerNorm({}, eps={}, dtype={})", norm, c.eps, py_dt),
                           "'weight': w, 'bias': b", "x"),
                {{"x", x}, {"w", w}, {"b", b}}, [c](const Tensors& in) {
                  nn::LayerNorm ln(c.norm, in[1], in[2], c.eps);
                  return ln(in[0]);
                });
      batch.add(fmt::format("plain_{}_{}", dtype_name(dt), k++),
                fmt::format("out = torch.nn.LayerNorm({}, eps={}, elementwise_affine=False, dtype={})(x)", norm, c.eps,
                            py_dt),
                {{"x", x}}, [c, dt](const Tensors& in) {
                  nn::LayerNorm ln(c.norm, c.eps, /*elementwise_affine=*/false, dt);
                  return ln(in[0]);
                });
    }
  }
  batch.run();
}

TEST_CASE("LayerNorm: gradcheck in float64", "[layer_norm]") {
  Generator gen(22);
  for (const auto& [xs, ns] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4}}, {{2, 3, 2}, {3, 2}}, {{4}, {4}}}) {
    INFO("x " << shape_str(xs) << " normalized " << shape_str(ns));
    test::require_gradcheck(
        [ns = ns](const Tensors& in) { return nn::functional::layer_norm(in[0], ns, in[1], in[2], 1e-5); },
        {test::randn_leaf(xs, gen), test::randn_leaf(ns, gen), test::randn_leaf(ns, gen)});
  }
}

TEST_CASE("LayerNorm: parameters and defaults", "[layer_norm]") {
  nn::LayerNorm ln(Shape{2, 3});
  CHECK(ln.weight().to_vector() == std::vector<double>(6, 1.0));
  CHECK(ln.bias().to_vector() == std::vector<double>(6, 0.0));
  CHECK(ln.eps() == 1e-5);
  CHECK(ln.named_parameters().size() == 2);
  nn::LayerNorm plain(Shape{3}, 1e-5, false);
  CHECK(plain.named_parameters().empty());
  CHECK_FALSE(plain.weight().defined());
}

TEST_CASE("LayerNorm: bad inputs raise xgrad::Error", "[layer_norm][errors]") {
  nn::LayerNorm ln(Shape{4});
  test::require_error([&] { ln(Tensor::zeros({4, 3})); }, {"layer_norm", "(4, 3)", "normalized_shape (4,)"});
  test::require_error([&] { ln(Tensor::scalar(1.0)); }, {"layer_norm", "()"});
  test::require_error([&] { ln(Tensor::zeros({2, 4}, kFloat64)); }, {"layer_norm", "'weight'", "float32"});
  test::require_error([] { nn::LayerNorm bad(Shape{}); }, {"LayerNorm", "normalized_shape", "empty"});
  test::require_error([] { nn::LayerNorm bad(Shape{3}, -1.0); }, {"LayerNorm", "eps", "-1"});
  test::require_error([] { nn::LayerNorm bad(Shape{3}, Tensor::ones({3}), Tensor()); }, {"LayerNorm", "'bias'"});
  test::require_error([] { nn::LayerNorm bad(Shape{3}, Tensor::ones({2}), Tensor::ones({2})); },
                      {"LayerNorm", "(2,)", "(3,)"});
}

// ---- Embedding ------------------------------------------------------------------------------------

TEST_CASE("Embedding: values and gradients match torch.nn.Embedding", "[embedding][parity]") {
  ParityBatch batch("embedding");  // one batch for both dtypes: Python and torch start once
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(31);
    const std::string ctor =
        fmt::format("torch.nn.Embedding(7, 3, dtype={})", dt == kFloat32 ? "torch.float32" : "torch.float64");
    Tensor w = test::randn_leaf({7, 3}, gen, dt);
    // Repeated indices: their gradients add up in the weight's row.
    const std::vector<std::int64_t> ids = {0, 6, 2, 2, 5, 2};
    std::vector<double> idv(ids.begin(), ids.end());
    for (const Shape& s : {Shape{6}, Shape{2, 3}, Shape{3, 1, 2}}) {
      Tensor idx = Tensor::from_vector(idv, s, dt);
      batch.add(fmt::format("tensor_{}_{}", dtype_name(dt), s.size()), torch_call(ctor, "'weight': w", "idx.long()"),
                {{"w", w}, {"idx", idx, false}}, [](const Tensors& in) {
                  nn::Embedding emb(in[0]);
                  return emb(in[1].to(kInt64));  // float for the parity batch, int64 for us
                });
    }
    batch.add(fmt::format("vector_{}", dtype_name(dt)), torch_call(ctor, "'weight': w", "idx.long()"),
              {{"w", w}, {"idx", Tensor::from_vector(idv, {6}, dt), false}}, [ids](const Tensors& in) {
                nn::Embedding emb(in[0]);
                return emb(ids);
              });
  }
  batch.run();
}

TEST_CASE("Embedding: init, from_pretrained and shapes", "[embedding]") {
  nn::Embedding emb(1000, 50, kFloat64, 3);
  const auto v = emb.weight().to_vector();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  CHECK(std::abs(mean) < 0.02);  // N(0, 1), like torch
  CHECK(std::sqrt(sq / double(v.size())) == Approx(1.0).epsilon(0.02));
  CHECK(emb({4}).shape() == Shape{1, 50});
  CHECK(emb(std::vector<std::int64_t>{}).shape() == Shape{0, 50});
  CHECK(emb(Tensor::scalar(7, kInt64)).shape() == Shape{50});
  CHECK(emb(Tensor::scalar(7, kInt64)).to_vector() == emb({7}).to_vector());
  CHECK(emb(Tensor::of({{7, 1}}, kInt32)).to_vector() == emb(Tensor::of({{7, 1}}, kInt64)).to_vector());
  CHECK(emb(Tensor::of({{7, 1}}, kInt32)).shape() == Shape{1, 2, 50});

  const Tensor table = Tensor::of({{1, 2}, {3, 4}});
  auto frozen = nn::Embedding::from_pretrained(table);
  CHECK_FALSE(frozen->weight().requires_grad());
  CHECK((*frozen)({1}).to_vector() == std::vector<double>{3, 4});
  auto trainable = nn::Embedding::from_pretrained(table, /*freeze=*/false);
  CHECK(trainable->weight().requires_grad());
  CHECK_FALSE(table.requires_grad());
}

TEST_CASE("Embedding: bad inputs raise xgrad::Error", "[embedding][errors]") {
  nn::Embedding emb(5, 2);
  test::require_error([&] { emb({0, 5}); }, {"Embedding", "index 5", "position 1", "5 embeddings"});
  test::require_error([&] { emb({-1}); }, {"Embedding", "index -1"});
  test::require_error([&] { emb(Tensor::of({1, 7}, kInt64)); }, {"Embedding", "index 7"});
  test::require_error(
      [&] {
        emb(Tensor::of({1, 2}));
      },
      {"Embedding", "'indices'", "int64", "float32", "indices.to(xgrad::kInt64)"});
  test::require_error([&] { emb(Tensor::of({1, 0}, kBool)); }, {"Embedding", "bool"});
  test::require_error([&] { emb(Tensor()); }, {"Embedding", "undefined"});
  // Long index lists are range-checked across threads (all_in_range_parallel): a bad index in any
  // chunk, low or high, is found and the first one named, at 1 and 2 threads.
  for (const int threads : {1, 2}) {
    with_num_threads(threads, [&] {
      std::vector<std::int64_t> many(200000, 4);
      many[150001] = -3;
      many[199999] = 5;
      test::require_error([&] { emb(many); }, {"Embedding", "index -3", "position 150001"});
      many[150001] = 0;
      test::require_error(
          [&] {
            emb(Tensor::from_data(std::span<const std::int64_t>(many), {400, 500}));
          },
          {"Embedding", "index 5", "position 199999"});
      many[199999] = 4;
      CHECK(emb(many).size(0) == 200000);
    });
  }
  test::require_error([] { nn::Embedding bad(-2, 3); }, {"Embedding", "-2"});
  test::require_error([] { nn::Embedding bad(Tensor::zeros({4})); }, {"Embedding", "'weight'", "(4,)"});
}

// ---- the default generator -----------------------------------------------------------------------

namespace {
// Every parameter of `m`, detached, in order.
Tensors params_of(nn::Module& m) {
  Tensors out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone_data());
  return out;
}
bool same_params(const Tensors& a, const Tensors& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!bit_equal(a[i], b[i])) return false;
  return true;
}
// A model built from layers without a generator or a seed, as a libtorch program writes it.
Tensors build_model() {
  nn::Sequential seq(nn::Linear(8, 8), nn::ReLU(), nn::Linear(8, 8));
  nn::Conv2d conv(nn::ConvOptions(3, 4, {3}));
  nn::Embedding emb(10, 6);
  nn::GRU gru(6, 5);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2));
  nn::BlockSparseLinear bsl(
      BlockSparsePattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}}));
  Tensors all;
  for (nn::Module* m : std::initializer_list<nn::Module*>{&seq, &conv, &emb, &gru, &mha, &bsl})
    for (const Tensor& t : params_of(*m)) all.push_back(t);
  Tensor w = Tensor::empty({4, 5});
  nn::init::xavier_uniform_(w);
  all.push_back(w);
  nn::Dropout drop(0.5);
  all.push_back(drop(Tensor::ones({64})));
  all.push_back(Tensor::randn({7}));
  return all;
}
}  // namespace

TEST_CASE("layers without a generator draw from the default generator: distinct, and repeated by manual_seed",
          "[linear][init][random]") {
  // Two layers built one after the other start from different values (not both from seed 0).
  nn::Linear a(8, 8), b(8, 8);
  CHECK_FALSE(bit_equal(a.weight().detach(), b.weight().detach()));
  nn::Sequential seq(nn::Linear(8, 8), nn::ReLU(), nn::Linear(8, 8));
  const auto ps = seq.parameters();
  CHECK_FALSE(bit_equal(ps[0].detach(), ps[2].detach()));
  // The same program after the same seed: the same bits, at 1 and at 2 threads.
  manual_seed(2024);
  const Tensors first = with_num_threads(1, build_model);
  manual_seed(2024);
  const Tensors again = with_num_threads(2, build_model);
  CHECK(same_params(first, again));
  manual_seed(2025);
  CHECK_FALSE(same_params(build_model(), first));
  // A seed or a generator still gives a layer values of its own, whatever the default generator's state.
  nn::Linear s1(8, 8, true, kFloat32, 3), s2(8, 8, true, kFloat32, 3);
  CHECK(bit_equal(s1.weight().detach(), s2.weight().detach()));
}

// ---- Dropout --------------------------------------------------------------------------------------

TEST_CASE("Dropout: the same seed gives the same mask, eval mode is the identity", "[dropout]") {
  const Tensor x = Tensor::ones({64, 32}, kFloat64);
  nn::Dropout a(0.4, 17), b(0.4, 17), c(0.4, 18);
  const Tensor ya = a(x), yb = b(x), yc = c(x);
  CHECK(bit_equal(ya, yb));
  CHECK_FALSE(bit_equal(ya, yc));
  CHECK_FALSE(bit_equal(a(x), ya));  // the generator moves on: the next mask differs
  a.generator().manual_seed(17);
  CHECK(bit_equal(a(x), ya));  // reseeding repeats it

  Generator g1(5), g2(5);
  nn::Dropout d1(0.4, g1), d2(0.4, g2);
  CHECK(bit_equal(d1(x), d2(x)));

  a.eval();
  CHECK(a(x).is_same(x));
  nn::Dropout none(0.0, 1);
  CHECK(none(x).is_same(x));
}

TEST_CASE("Dropout: inverted scaling keeps the mean, the gradient is the mask", "[dropout]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    const double p = 0.3;
    nn::Dropout drop(p, 99);
    const Tensor x = Tensor::full({100000}, 2.0, dt).set_requires_grad();
    const Tensor y = drop(x);
    const auto yv = y.to_vector();
    const double kept = 2.0 / (1.0 - p);
    std::int64_t zeros = 0;
    double total = 0;
    for (double v : yv) {
      REQUIRE((v == 0.0 || v == Approx(kept).epsilon(1e-6)));
      zeros += v == 0.0;
      total += v;
    }
    // Binomial(100000, 0.3): sd of the zero fraction is 0.0014; of the mean, 2 * 0.0022.
    CHECK(double(zeros) / 1e5 == Approx(p).margin(0.01));
    CHECK(total / 1e5 == Approx(2.0).margin(0.03));
    sum(y).backward();
    const auto g = x.grad().to_vector();
    for (std::size_t i = 0; i < g.size(); i += 97) REQUIRE(g[i] == Approx(yv[i] / 2.0).epsilon(1e-6));
  }
}

TEST_CASE("Dropout: p = 1 zeroes everything, with a zero gradient (as torch)", "[dropout]") {
  nn::Dropout d(1.0, 3);
  Generator gen(4);
  Tensor x = Tensor::randn({4, 5}, gen).set_requires_grad();
  const Tensor y = d(x);
  for (double v : y.to_vector()) REQUIRE(v == 0.0);
  sum(y).backward();
  for (double v : x.grad().to_vector()) REQUIRE(v == 0.0);
  d.eval();
  CHECK(d(x).to_vector() == x.to_vector());
}

TEST_CASE("Dropout: bad inputs raise xgrad::Error", "[dropout][errors]") {
  test::require_error([] { nn::Dropout d(1.5); }, {"Dropout", "[0, 1]", "got 1.5"});
  test::require_error([] { nn::Dropout d(-0.1); }, {"Dropout", "got -0.1"});
  test::require_error([] { nn::Dropout d(std::nan("")); }, {"Dropout", "nan"});
  Generator gen(1);
  test::require_error([&] { nn::functional::dropout(Tensor::ones({2}), 1.5, true, gen); }, {"dropout", "got 1.5"});
  nn::Dropout d(0.5);
  test::require_error([&] { d(Tensor()); }, {"Dropout", "undefined"});
}

// ---- activations ----------------------------------------------------------------------------------

TEST_CASE("Activation modules match torch.nn", "[activation][parity]") {
  ParityBatch batch("activation_modules");
  Generator gen(41);
  Tensor x = test::randn_leaf({3, 4, 2}, gen);
  struct A {
    const char* name;
    std::shared_ptr<nn::UnaryModule> module;
    const char* torch;
  };
  const std::vector<A> mods = {
      {"relu", std::make_shared<nn::ReLU>(), "torch.nn.ReLU()"},
      {"tanh", std::make_shared<nn::Tanh>(), "torch.nn.Tanh()"},
      {"sigmoid", std::make_shared<nn::Sigmoid>(), "torch.nn.Sigmoid()"},
      {"softmax", std::make_shared<nn::Softmax>(1), "torch.nn.Softmax(dim=1)"},
      {"log_softmax", std::make_shared<nn::LogSoftmax>(-1), "torch.nn.LogSoftmax(dim=-1)"},
      {"identity", std::make_shared<nn::Identity>(), "torch.nn.Identity()"},
      {"flatten", std::make_shared<nn::Flatten>(), "torch.nn.Flatten()"},
      {"flatten_0_1", std::make_shared<nn::Flatten>(0, 1), "torch.nn.Flatten(0, 1)"},
      {"gelu", std::make_shared<nn::GELU>(), "torch.nn.GELU()"},
      {"gelu_tanh", std::make_shared<nn::GELU>("tanh"), "torch.nn.GELU(approximate='tanh')"},
      {"silu", std::make_shared<nn::SiLU>(), "torch.nn.SiLU()"},
      {"softplus", std::make_shared<nn::Softplus>(), "torch.nn.Softplus()"},
      {"softplus_2_1", std::make_shared<nn::Softplus>(2.0, 1.0), "torch.nn.Softplus(beta=2.0, threshold=1.0)"},
      {"mish", std::make_shared<nn::Mish>(), "torch.nn.Mish()"},
      {"leaky_relu", std::make_shared<nn::LeakyReLU>(), "torch.nn.LeakyReLU()"},
      {"leaky_relu_0_2", std::make_shared<nn::LeakyReLU>(0.2), "torch.nn.LeakyReLU(0.2)"},
      {"elu", std::make_shared<nn::ELU>(), "torch.nn.ELU()"},
      {"elu_0_5", std::make_shared<nn::ELU>(0.5), "torch.nn.ELU(alpha=0.5)"},
      {"selu", std::make_shared<nn::SELU>(), "torch.nn.SELU()"},
      {"hardtanh", std::make_shared<nn::Hardtanh>(), "torch.nn.Hardtanh()"},
      {"hardtanh_bounds", std::make_shared<nn::Hardtanh>(-0.5, 0.8), "torch.nn.Hardtanh(-0.5, 0.8)"},
      {"logsigmoid", std::make_shared<nn::LogSigmoid>(), "torch.nn.LogSigmoid()"},
      {"hardswish", std::make_shared<nn::Hardswish>(), "torch.nn.Hardswish()"},
      {"hardsigmoid", std::make_shared<nn::Hardsigmoid>(), "torch.nn.Hardsigmoid()"}};
  for (const auto& m : mods)
    batch.add(m.name, fmt::format("out = {}(x)", m.torch), {{"x", x}},
              [mod = m.module](const Tensors& in) { return (*mod)(in[0]); });
  batch.run();
}

TEST_CASE("Activation modules: bad inputs raise xgrad::Error", "[activation][errors]") {
  nn::Softmax sm(2);
  test::require_error([&] { sm(Tensor::zeros({2, 3})); }, {"softmax", "axis 2"});
  nn::Flatten fl(1, 3);
  test::require_error([&] { fl(Tensor::zeros({2, 3})); }, {"flatten"});
  nn::Identity id;
  test::require_error([&] { id(Tensor()); }, {"Identity", "undefined"});
  test::require_error([] { nn::GELU g("exact"); }, {"GELU", "'approximate'", "exact"});
  test::require_error([] { nn::Softplus s(0.0); }, {"Softplus", "'beta'"});
  test::require_error([] { nn::LeakyReLU l(std::nan("")); }, {"LeakyReLU", "'negative_slope'", "NaN"});
  test::require_error([] { nn::ELU e(std::nan("")); }, {"ELU", "'alpha'", "NaN"});
  test::require_error([] { nn::Hardtanh h(1.0, -1.0); }, {"Hardtanh", "'min_val' (1)", "'max_val' (-1)"});
  nn::GELU gelu;
  test::require_error([&] { gelu(Tensor()); }, {"gelu", "undefined"});
}
