// Tests for nn/sparsifier.*: RigL and SET on block-sparse layers (the drop and growth rules against a
// reference computed here from dense tensors, the schedule, the moved weights and optimizer state, the
// same bits at 1 and 2 threads, bad options), and BlockSparseLinear::set_pattern / capture.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "support.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/optim/adam.hpp"
#include "xgrad/nn/optim/sgd.hpp"
#include "xgrad/nn/sparsifier.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
using nn::BlockSparseLinear;
using Pattern = BlockSparsePattern;
using Coords = std::vector<std::pair<std::int64_t, std::int64_t>>;

namespace {

// An (out x in) = (8 x 12) layer of 2 x 3 blocks (a 4 x 4 grid) with 6 blocks stored.
std::shared_ptr<BlockSparseLinear> small_layer(std::uint64_t seed = 1, Dtype dt = kFloat64) {
  Generator g(seed);
  return std::make_shared<BlockSparseLinear>(
      Pattern::random(InFeatures{12}, OutFeatures{8}, {InFeatures{3}, OutFeatures{2}}, 6.0 / 16.0, g), g, true, dt);
}

// The block of an (out, in) dense matrix at grid cell (r, c), 2 x 3 blocks, as a flat vector.
std::vector<double> dense_block(const std::vector<double>& d, std::int64_t in, std::int64_t r, std::int64_t c) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) v.push_back(d[static_cast<std::size_t>((r * 2 + i) * in + c * 3 + j)]);
  return v;
}

double sq_norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}

// One training step of a mean squared error on (x, target) through `layer`.
void train_step(BlockSparseLinear& layer, nn::Optimizer& opt, const Tensor& x, const Tensor& target) {
  opt.zero_grad();
  mse_loss(layer.forward(x), target).backward();
  opt.step();
}

}  // namespace

TEST_CASE("BlockSparsePattern::random stores round(density x grid) distinct blocks", "[sparsifier][block_sparse]") {
  Generator g(3);
  const Pattern p = Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{4}, OutFeatures{3}}, 0.25, g);
  CHECK(p.grid_shape() == Shape{10, 10});
  CHECK(p.num_blocks() == 25);
  CHECK(p.block_shape() == std::pair<std::int64_t, std::int64_t>{3, 4});
  const Coords c = p.block_coords();
  CHECK(std::set(c.begin(), c.end()).size() == 25);
  Generator g2(3);
  CHECK(Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{4}, OutFeatures{3}}, 0.25, g2) == p);
  CHECK(Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{4}, OutFeatures{3}}, 0.0, g).num_blocks() == 0);
  CHECK(Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{4}, OutFeatures{3}}, 1.0, g).num_blocks() == 100);
  CHECK_THROWS_WITH(
      Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{4}, OutFeatures{3}}, 1.5, g),
      Catch::Contains("BlockSparsePattern::random") && Catch::Contains("'density'") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(Pattern::random(InFeatures{40}, OutFeatures{30}, {InFeatures{3}, OutFeatures{3}}, 0.5, g),
                    Catch::Contains("BlockSparsePattern::random") && Catch::Contains("must divide"));
  // A block-diagonal layer of unequal groups has no uniform block shape.
  CHECK(Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{1}, OutFeatures{3}}}).block_shape() ==
        std::pair<std::int64_t, std::int64_t>{0, 0});
}

TEST_CASE("BlockSparseLinear::set_pattern keeps shared blocks, zeroes new ones, keeps the parameter",
          "[sparsifier][block_sparse]") {
  auto layer = small_layer();
  const Tensor w = layer->weight();
  const Pattern before = layer->pattern();
  const std::vector<double> dense_before = layer->to_dense().to_vector();
  Coords next = before.block_coords();
  const auto removed = next.front();
  next.erase(next.begin());
  std::pair<std::int64_t, std::int64_t> added{-1, -1};
  for (std::int64_t c = 0; c < 16 && added.first < 0; ++c)
    if (std::find(next.begin(), next.end(), std::pair{c / 4, c % 4}) == next.end() &&
        std::pair{c / 4, c % 4} != removed)
      added = {c / 4, c % 4};
  next.push_back(added);
  const Pattern after =
      Pattern::from_block_coords(InFeatures{12}, OutFeatures{8}, {InFeatures{3}, OutFeatures{2}}, next);
  const auto v0 = w.impl()->storage->version;
  layer->set_pattern(after);
  CHECK(layer->weight().impl() == w.impl());  // the same parameter
  CHECK(w.impl()->storage->version > v0);
  CHECK(layer->pattern() == after);
  const std::vector<double> dense_after = layer->to_dense().to_vector();
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 4; ++c) {
      INFO("block " << r << ", " << c);
      const bool in_after = std::find(next.begin(), next.end(), std::pair{r, c}) != next.end();
      if (in_after && std::pair{r, c} != added)
        CHECK(dense_block(dense_after, 12, r, c) == dense_block(dense_before, 12, r, c));
      else
        CHECK(sq_norm(dense_block(dense_after, 12, r, c)) == 0.0);
    }
  // Another grid, or another number of blocks, is refused.
  CHECK_THROWS_WITH(layer->set_pattern(Pattern::from_block_coords(InFeatures{12}, OutFeatures{8},
                                                                  {InFeatures{3}, OutFeatures{2}}, {{0, 0}})),
                    Catch::Contains("BlockSparseLinear::set_pattern") && Catch::Contains("'pattern'") &&
                        Catch::Contains("(1, 2, 3)"));
  Coords six;
  for (std::int64_t k = 0; k < 6; ++k) six.emplace_back(k % 2, k / 2);
  CHECK_THROWS_WITH(layer->set_pattern(Pattern::from_block_coords(InFeatures{12}, OutFeatures{8},
                                                                  {InFeatures{2}, OutFeatures{4}}, six)),
                    Catch::Contains("BlockSparseLinear::set_pattern") && Catch::Contains("(6, 4, 2)"));
}

TEST_CASE("Sparsifier (RigL): drops the smallest blocks, grows the largest dense-gradient blocks, moves Adam's state",
          "[sparsifier]") {
  auto layer = small_layer(5);
  nn::Adam opt(layer->parameters(), 0.01);
  // Update at step 2 only, dropping floor(0.5 * 6) = 3 blocks (f(2) = 0.5 with end_step 4 and α = 1).
  nn::Sparsifier sp({layer}, opt, nn::SparsifierOptions(2, 4).drop_fraction(1.0));
  CHECK(sp.drop_fraction(0) == Approx(1.0));
  CHECK(sp.drop_fraction(2) == Approx(0.5));
  CHECK(sp.drop_fraction(4) == 0.0);
  Generator g(9);
  const Tensor x = Tensor::randn({7, 12}, g, kFloat64), target = Tensor::randn({7, 8}, g, kFloat64);
  train_step(*layer, opt, x, target);
  CHECK(sp.step() == 0);  // step 1: arms the capture for step 2
  // Step 2 by hand, keeping what the reference needs: the weights after the optimizer step, the
  // dense weight gradient of this batch and Adam's first moment.
  opt.zero_grad();
  Tensor y = layer->forward(x);
  // dL/dy of mse_loss (mean over 56 elements), for the dense gradient gᵀx of this batch.
  const Tensor dy = mul(sub(y.detach(), target), 2.0 / 56.0);
  mse_loss(y, target).backward();
  opt.step();
  const std::vector<double> w_before = layer->to_dense().to_vector();
  const std::vector<double> gdense = matmul(transpose(dy, 0, 1), x).to_vector();
  const std::vector<double> m_before =
      block_sparse_to_dense(opt.state_buffers(layer->weight()).at(0), layer->pattern()).to_vector();
  const Pattern old = layer->pattern();
  const Coords old_coords = old.block_coords();

  CHECK(sp.step() == 3);
  const Coords now = layer->pattern().block_coords();
  REQUIRE(now.size() == 6);
  // Reference: drop the 3 stored blocks of smallest norm, grow the 3 unkept cells of largest gradient norm.
  std::vector<std::pair<double, std::pair<std::int64_t, std::int64_t>>> mags, grads;
  for (const auto& rc : old_coords) mags.push_back({sq_norm(dense_block(w_before, 12, rc.first, rc.second)), rc});
  std::sort(mags.begin(), mags.end());
  std::set<std::pair<std::int64_t, std::int64_t>> want;
  for (std::size_t k = 3; k < 6; ++k) want.insert(mags[k].second);
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 4; ++c)
      if (!want.count({r, c})) grads.push_back({-sq_norm(dense_block(gdense, 12, r, c)), {r, c}});
  std::sort(grads.begin(), grads.end());
  const std::set<std::pair<std::int64_t, std::int64_t>> kept = want;
  for (std::size_t k = 0; k < 3; ++k) want.insert(grads[k].second);
  CHECK(std::set(now.begin(), now.end()) == want);
  // Weights and Adam's moments: kept blocks unchanged, grown blocks zero (a block dropped and grown
  // again in one update never left: it keeps its values).
  const std::vector<double> w_after = layer->to_dense().to_vector();
  const auto state = opt.state_buffers(layer->weight());
  REQUIRE(state.size() == 2);
  const std::vector<double> m_after = block_sparse_to_dense(state[0], layer->pattern()).to_vector();
  for (const auto& rc : now) {
    INFO("block " << rc.first << ", " << rc.second);
    const bool was = std::find(old_coords.begin(), old_coords.end(), rc) != old_coords.end();
    if (was) {
      CHECK(dense_block(w_after, 12, rc.first, rc.second) == dense_block(w_before, 12, rc.first, rc.second));
      CHECK(dense_block(m_after, 12, rc.first, rc.second) == dense_block(m_before, 12, rc.first, rc.second));
    } else {
      CHECK(sq_norm(dense_block(w_after, 12, rc.first, rc.second)) == 0.0);
      CHECK(sq_norm(dense_block(m_after, 12, rc.first, rc.second)) == 0.0);
    }
  }
  // Training goes on with the new structure; after end_step nothing moves.
  for (int s = 3; s <= 8; ++s) {
    train_step(*layer, opt, x, target);
    CHECK(sp.step() == 0);
  }
  CHECK(layer->pattern().num_blocks() == 6);
}

TEST_CASE("Sparsifier: SET grows at random from its seed, and every mode gives the same bits at 1 and 2 threads",
          "[sparsifier]") {
  const int default_threads = get_num_threads();
  // A layer large enough for the kernels' parallel paths: 256 x 384 in 16 x 16 blocks, 10% stored.
  auto run = [](nn::GrowMode mode, std::uint64_t seed, int threads) {
    set_num_threads(threads);
    Generator g(21);
    auto layer = std::make_shared<BlockSparseLinear>(
        Pattern::random(InFeatures{384}, OutFeatures{256}, {InFeatures{16}, OutFeatures{16}}, 0.1, g), g);
    nn::SGD opt(layer->parameters(), nn::SGDOptions(0.05).momentum(0.9));
    nn::Sparsifier sp({layer}, opt, nn::SparsifierOptions(3, 12).grow(mode).seed(seed));
    const Tensor x = Tensor::randn({300, 384}, g), target = Tensor::randn({300, 256}, g);
    std::int64_t moved = 0;
    for (int s = 0; s < 12; ++s) {
      train_step(*layer, opt, x, target);
      moved += sp.step();
    }
    return std::make_tuple(layer->pattern().block_coords(), layer->weight().to_vector(),
                           opt.state_buffers(layer->weight()).at(0).to_vector(), moved);
  };
  for (const auto mode : {nn::GrowMode::gradient, nn::GrowMode::random}) {
    INFO((mode == nn::GrowMode::gradient ? "gradient" : "random"));
    const auto one = run(mode, 4, 1), two = run(mode, 4, 2);
    CHECK(std::get<3>(one) > 0);
    CHECK(std::get<0>(one) == std::get<0>(two));
    CHECK(std::get<1>(one) == std::get<1>(two));
    CHECK(std::get<2>(one) == std::get<2>(two));
    if (mode == nn::GrowMode::random) CHECK(std::get<0>(run(mode, 5, 2)) != std::get<0>(one));
  }
  set_num_threads(default_threads);
}

TEST_CASE("Sparsifier: bad layers, options and a missing gradient are refused", "[sparsifier]") {
  auto layer = small_layer();
  nn::SGD opt(layer->parameters(), 0.1);
  const auto fails = [&](auto&& make, const std::vector<std::string>& fragments) {
    try {
      make();
      FAIL("no error");
    } catch (const Error& e) {
      for (const auto& f : fragments) CHECK_THAT(e.what(), Catch::Contains(f));
    }
  };
  fails([&] { nn::Sparsifier({}, opt, nn::SparsifierOptions(1, 10)); }, {"Sparsifier", "'layers'", "empty"});
  fails([&] { nn::Sparsifier({layer, nullptr}, opt, nn::SparsifierOptions(1, 10)); }, {"Sparsifier", "null", "1"});
  fails([&] { nn::Sparsifier({layer, layer}, opt, nn::SparsifierOptions(1, 10)); }, {"Sparsifier", "twice"});
  fails([&] { nn::Sparsifier({layer}, opt, nn::SparsifierOptions(0, 10)); }, {"Sparsifier", "'update_every'", "0"});
  fails([&] { nn::Sparsifier({layer}, opt, nn::SparsifierOptions(1, -1)); }, {"Sparsifier", "'end_step'", "-1"});
  fails([&] { nn::Sparsifier({layer}, opt, nn::SparsifierOptions(1, 10).drop_fraction(1.5)); },
        {"Sparsifier", "'drop_fraction'", "1.5"});
  auto uneven = std::make_shared<BlockSparseLinear>(
      Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{1}, OutFeatures{3}}}));
  fails([&] { nn::Sparsifier({uneven}, opt, nn::SparsifierOptions(1, 10)); }, {"Sparsifier", "uniform grid"});
  // An update step with no forward and backward since the previous step().
  nn::Sparsifier sp({layer}, opt, nn::SparsifierOptions(2, 10));
  CHECK(sp.step() == 0);
  fails([&] { sp.step(); }, {"Sparsifier", "layer 0", "no captured gradient", "step 2"});
}

TEST_CASE("Sparsifier at entry granularity: 1 x 1 blocks are a CSR weight whose entries move", "[sparsifier]") {
  Generator g(13);
  // (out x in) = (20 x 30), 60 of 600 entries stored.
  auto layer = std::make_shared<BlockSparseLinear>(
      Pattern::random(InFeatures{30}, OutFeatures{20}, {InFeatures{1}, OutFeatures{1}}, 0.1, g), g, true, kFloat64);
  CHECK(layer->weight().shape() == Shape{60, 1, 1});
  nn::Adam opt(layer->parameters(), 0.01);
  nn::Sparsifier sp({layer}, opt, nn::SparsifierOptions(1, 5).drop_fraction(0.5));
  const Pattern initial = layer->pattern();
  const Tensor x = Tensor::randn({16, 30}, g, kFloat64), target = Tensor::randn({16, 20}, g, kFloat64);
  std::int64_t moved = 0;
  for (int s = 0; s < 6; ++s) {
    // Each entry's weight in the dense matrix equals its packed value, wherever it moved.
    train_step(*layer, opt, x, target);
    moved += sp.step();
    const std::vector<double> dense = layer->to_dense().to_vector(), packed = layer->weight().to_vector();
    const auto coords = layer->pattern().block_coords();
    REQUIRE(coords.size() == 60);
    for (std::size_t k = 0; k < coords.size(); ++k)
      CHECK(dense[static_cast<std::size_t>(coords[k].first * 30 + coords[k].second)] == packed[k]);
  }
  // floor(f(t) x 60) with f(t) = 0.25 (1 + cos(pi t / 5)) at t = 1..4: 27, 19, 10 and 2 entries.
  CHECK(moved == 27 + 19 + 10 + 2);
  CHECK_FALSE(layer->pattern() == initial);
}
