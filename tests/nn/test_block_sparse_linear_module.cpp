// Tests for nn/block_sparse_linear.*: parameters hold the stored blocks only, the fan-in aware init,
// forward against a dense reference, to_dense / from_dense, gradients reaching the parameters.
#include <cmath>

#include "support.hpp"
#include "xgrad/nn/block_sparse_linear.hpp"
#include "xgrad/ops/elementwise.hpp"

using namespace xgrad;
using nn::BlockSparseLinear;
using Pattern = BlockSparsePattern;

namespace {
// y = x Wd^T + b computed with plain loops in double, x (m, in).
std::vector<double> dense_reference(const Tensor& x, const Tensor& wd, const Tensor& b) {
  const auto xv = x.to_vector(), wv = wd.to_vector();
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>();
  const std::int64_t out = wd.size(0), in = wd.size(1), m = x.numel() / in;
  std::vector<double> y(static_cast<std::size_t>(m * out));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t i = 0; i < out; ++i) {
      double acc = bv.empty() ? 0.0 : bv[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < in; ++j)
        acc += xv[static_cast<std::size_t>(r * in + j)] * wv[static_cast<std::size_t>(i * in + j)];
      y[static_cast<std::size_t>(r * out + i)] = acc;
    }
  return y;
}
}  // namespace

TEST_CASE("BlockSparseLinear: parameters are the stored blocks only", "[block_sparse_linear][nn]") {
  // The user's diagram: in 4 -> out 6 as two groups (2 -> 3).
  BlockSparseLinear layer(Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}}));
  const auto named = layer.named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "weight");
  CHECK(named[1].first == "bias");
  CHECK(layer.weight().shape() == Shape{2, 3, 2});
  CHECK(layer.bias().shape() == Shape{6});
  CHECK(layer.weight().requires_grad());
  CHECK(layer.num_parameters() == 12 + 6);
  CHECK(layer.parameter_bytes() == (12 + 6) * 4);

  // Unequal groups: a flat weight; no bias.
  BlockSparseLinear flat(Pattern::block_diagonal({{InFeatures{5}, OutFeatures{7}}, {InFeatures{3}, OutFeatures{1}}}),
                         /*with_bias=*/false, kFloat64);
  REQUIRE(flat.named_parameters().size() == 1);
  CHECK(flat.weight().shape() == Shape{38});
  CHECK(flat.weight().dtype() == kFloat64);
  CHECK_FALSE(flat.bias().defined());

  // A 4096 x 4096 layer with 1/16 of its 64 x 64 blocks: 1/16 of the dense bytes.
  std::vector<std::pair<std::int64_t, std::int64_t>> coords;
  for (std::int64_t r = 0; r < 64; ++r)
    for (std::int64_t c = 0; c < 4; ++c) coords.emplace_back(r, (r * 7 + c * 16) % 64);
  BlockSparseLinear big(
      Pattern::from_block_coords(InFeatures{4096}, OutFeatures{4096}, {InFeatures{64}, OutFeatures{64}}, coords));
  CHECK(big.parameter_bytes() == (4096 * 4096 / 16 + 4096) * 4);
}

TEST_CASE("BlockSparseLinear: init bound uses the fan-in over existing connections", "[block_sparse_linear][nn]") {
  // Block row 0 connects 2 blocks of 4 inputs (fan-in 8), row 1 one block (4), row 2 none.
  const Pattern p = Pattern::from_block_mask(InFeatures{12}, OutFeatures{6}, {InFeatures{4}, OutFeatures{2}},
                                             Tensor::of({{1, 0, 1}, {0, 1, 0}, {0, 0, 0}}));
  Generator gen(3);
  BlockSparseLinear layer(p, gen);
  const auto fan = p.row_fan_in();
  REQUIRE(fan == std::vector<std::int64_t>{8, 8, 4, 4, 0, 0});
  const Tensor wd = layer.to_dense();
  const auto wv = wd.to_vector(), bv = layer.bias().to_vector();
  double max_row0 = 0, max_row2 = 0;
  for (std::int64_t i = 0; i < 6; ++i) {
    for (std::int64_t j = 0; j < 12; ++j) {
      const double v = std::abs(wv[static_cast<std::size_t>(i * 12 + j)]);
      if (fan[static_cast<std::size_t>(i)] > 0) REQUIRE(v <= 1.0 / std::sqrt(double(fan[static_cast<std::size_t>(i)])));
      if (i < 2) max_row0 = std::max(max_row0, v);
      if (i == 2 || i == 3) max_row2 = std::max(max_row2, v);
    }
    if (fan[static_cast<std::size_t>(i)] > 0)
      CHECK(std::abs(bv[static_cast<std::size_t>(i)]) <= 1.0 / std::sqrt(double(fan[static_cast<std::size_t>(i)])));
    else
      CHECK(bv[static_cast<std::size_t>(i)] == 0.0);
  }
  // The draws use the range (not a constant): rows with fan-in 4 reach beyond the fan-in-8 bound
  // (8 weights of U(±1/2) all stay below 1/sqrt(8) with probability 6%: over 8 layers, 1e-10).
  CHECK(max_row0 > 0.1);
  Generator more(4);
  for (int rep = 0; rep < 8; ++rep) {
    const auto w = BlockSparseLinear(p, more).to_dense().to_vector();
    for (std::size_t k = 2 * 12; k < 4 * 12; ++k) max_row2 = std::max(max_row2, std::abs(w[k]));
  }
  CHECK(max_row2 > 1.0 / std::sqrt(8.0));
  // Same seed, same layer.
  Generator gen2(3);
  BlockSparseLinear again(p, gen2);
  CHECK(bit_equal(again.weight(), layer.weight()));
}

TEST_CASE("BlockSparseLinear: forward matches the dense reference, to_dense / from_dense",
          "[block_sparse_linear][nn]") {
  Generator gen(4);
  for (const Pattern& p :
       {Pattern::block_diagonal({{InFeatures{5}, OutFeatures{7}}, {InFeatures{3}, OutFeatures{1}}}),
        Pattern::from_block_mask(InFeatures{20}, OutFeatures{12}, {InFeatures{5}, OutFeatures{3}},
                                 Tensor::of({{1, 0, 0, 1}, {0, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 0, 1}}))}) {
    INFO(p.str());
    BlockSparseLinear layer(p, gen, true, kFloat64);
    Tensor x = Tensor::randn({2, 3, p.in_features()}, gen, kFloat64);
    Tensor y = layer(x);
    CHECK(y.shape() == Shape{2, 3, p.out_features()});
    const Tensor wd = layer.to_dense();
    CHECK(bit_equal(wd, block_sparse_to_dense(layer.weight(), p)));
    const auto ref = dense_reference(x, wd, layer.bias());
    CHECK(allclose(y, Tensor::from_vector(ref, y.shape(), kFloat64), 1e-12, 1e-12));
    // A 1-d input.
    Tensor x1 = Tensor::randn({p.in_features()}, gen, kFloat64);
    CHECK(layer(x1).shape() == Shape{p.out_features()});

    // from_dense keeps the blocks and drops everything outside the pattern.
    Tensor dense = Tensor::randn({p.out_features(), p.in_features()}, gen, kFloat64);
    Tensor bias = Tensor::randn({p.out_features()}, gen, kFloat64);
    auto from = BlockSparseLinear::from_dense(dense, p, bias);
    CHECK(from->pattern() == p);
    Tensor masked = Tensor::from_vector(dense.to_vector(), dense.shape(), kFloat64);
    {
      auto mv = p.element_mask(kFloat64).to_vector();
      double* d = masked.data<double>();
      for (std::size_t i = 0; i < mv.size(); ++i) d[i] = mv[i] != 0 ? d[i] : 0.0;  // +0, not -0
    }
    CHECK(bit_equal(from->to_dense(), masked));
    CHECK(allclose(from->forward(x), Tensor::from_vector(dense_reference(x, masked, bias), y.shape(), kFloat64), 1e-12,
                   1e-12));
    // Round trip of a layer through its dense weight gives the same outputs, bit for bit.
    auto copy = BlockSparseLinear::from_dense(layer.to_dense(), p, layer.bias());
    CHECK(bit_equal(copy->forward(x), y));
  }
}

TEST_CASE("BlockSparseLinear: a training step reaches the packed weight and the bias", "[block_sparse_linear][nn]") {
  Generator gen(5);
  BlockSparseLinear layer(Pattern::from_block_mask(InFeatures{24}, OutFeatures{16}, {InFeatures{8}, OutFeatures{8}},
                                                   Tensor::of({{1, 0, 1}, {0, 1, 0}})),
                          gen);
  Tensor x = Tensor::randn({10, 24}, gen);
  Tensor target = Tensor::randn({10, 16}, gen);
  auto loss_of = [&] {
    Tensor d = layer(x) - target;
    Tensor l = (d * d).to(kFloat64);
    double s = 0;
    for (double v : l.to_vector()) s += v;
    return std::make_pair(d, s);
  };
  auto [d, before] = loss_of();
  layer(x).backward(d * 2.0);  // d(sum of squares)/dy
  REQUIRE(layer.weight().grad().defined());
  REQUIRE(layer.bias().grad().defined());
  CHECK(layer.weight().grad().shape() == layer.weight().shape());
  {
    NoGradGuard guard;
    Tensor w = layer.weight();
    Tensor b = layer.bias();
    w.add_(layer.weight().grad(), -0.01);
    b.add_(layer.bias().grad(), -0.01);
  }
  layer.zero_grad();
  CHECK_FALSE(layer.weight().grad().defined());
  CHECK(loss_of().second < before);
}

TEST_CASE("BlockSparseLinear: bad inputs name the argument", "[block_sparse_linear][nn][errors]") {
  const Pattern p = Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}});
  BlockSparseLinear layer(p);
  test::require_error([&] { layer(Tensor::zeros({5, 3})); }, {"block_sparse_linear", "'x'", "(5, 3)", "in_features=4"});
  test::require_error(
      [&] {
        BlockSparseLinear::from_dense(Tensor::zeros({4, 6}), p);
      },
      {"block_sparse_from_dense", "'dense'", "(4, 6)", "out=6"});
  test::require_error(
      [&] {
        BlockSparseLinear::from_dense(Tensor::zeros({6, 4}), p, Tensor::zeros({4}));
      },
      {"from_dense", "'bias'", "(4,)", "(6,)"});
  test::require_error(
      [] {
        BlockSparseLinear(Pattern::block_diagonal(InFeatures{4}, OutFeatures{7},
                                                  {{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}}));
      },
      {"block_diagonal", "'groups'", "out=6", "out=7"});
}
