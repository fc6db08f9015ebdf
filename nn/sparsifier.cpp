#include "xgrad/nn/sparsifier.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>
#include <utility>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

namespace xgrad::nn {

namespace {

constexpr const char* kFn = "Sparsifier";

// The indices of the k entries of `score` that come first in the order `before` (ties to the lower
// index), in increasing index order. nth_element: linear on average.
template <class Before>
std::vector<std::int64_t> select(const std::vector<std::int64_t>& ids, const std::vector<double>& score, std::int64_t k,
                                 Before before) {
  std::vector<std::int64_t> v = ids;
  const auto cmp = [&](std::int64_t a, std::int64_t b) {
    const double sa = score[static_cast<std::size_t>(a)], sb = score[static_cast<std::size_t>(b)];
    return before(sa, sb) || (sa == sb && a < b);
  };
  std::nth_element(v.begin(), v.begin() + k, v.end(), cmp);
  v.resize(static_cast<std::size_t>(k));
  std::sort(v.begin(), v.end());
  return v;
}

// NaN compares as nothing, which a selection cannot order: a NaN score counts as `nan_as`.
std::vector<double> ordered(std::vector<double> v, double nan_as) {
  for (double& x : v)
    if (std::isnan(x)) x = nan_as;
  return v;
}

}  // namespace

Sparsifier::Sparsifier(std::vector<std::shared_ptr<BlockSparseLinear>> layers, Optimizer& optimizer,
                       SparsifierOptions options)
    : layers_(std::move(layers)), optimizer_(optimizer), options_(options), gen_(options.seed()) {
  XGRAD_CHECK(!layers_.empty(), "{}: argument 'layers' is empty", kFn);
  std::set<const BlockSparseLinear*> seen;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    XGRAD_CHECK(layers_[i] != nullptr, "{}: argument 'layers' has a null layer at index {}", kFn, i);
    XGRAD_CHECK(seen.insert(layers_[i].get()).second, "{}: argument 'layers' lists layer {} twice", kFn, i);
    const auto [bo, bi] = layers_[i]->pattern().block_shape();
    XGRAD_CHECK(bo > 0 && bi > 0,
                "{}: layer {} ({}) is not a uniform grid of blocks, so blocks cannot move (use a pattern of equal "
                "blocks: from_block_mask, from_block_coords, random)",
                kFn, i, layers_[i]->pattern().str());
  }
  XGRAD_CHECK(options_.update_every() >= 1, "{}: option 'update_every' is {} but must be >= 1", kFn,
              options_.update_every());
  XGRAD_CHECK(options_.end_step() >= 0, "{}: option 'end_step' is {} but must be >= 0", kFn, options_.end_step());
  XGRAD_CHECK(options_.drop_fraction() >= 0.0 && options_.drop_fraction() <= 1.0,
              "{}: option 'drop_fraction' is {} but must be in [0, 1]", kFn, options_.drop_fraction());
  if (options_.grow() == GrowMode::gradient)
    for (auto& l : layers_) l->set_capture(is_update(1));
}

Sparsifier::~Sparsifier() {
  for (auto& l : layers_) l->set_capture(false);
}

bool Sparsifier::is_update(std::int64_t t) const {
  return t > 0 && t % options_.update_every() == 0 && t < options_.end_step();
}

double Sparsifier::drop_fraction(std::int64_t t) const {
  if (t < 0 || t >= options_.end_step()) return 0.0;
  return options_.drop_fraction() / 2.0 * (1.0 + std::cos(std::numbers::pi * double(t) / double(options_.end_step())));
}

std::int64_t Sparsifier::step() {
  ++step_;
  std::int64_t changed = 0;
  if (is_update(step_)) {
    const double f = drop_fraction(step_);
    for (std::size_t i = 0; i < layers_.size(); ++i) changed += update_layer(*layers_[i], i, f);
  }
  if (options_.grow() == GrowMode::gradient)
    for (auto& l : layers_) l->set_capture(is_update(step_ + 1));
  return changed;
}

std::int64_t Sparsifier::update_layer(BlockSparseLinear& layer, std::size_t index, double fraction) {
  const BlockSparsePattern old = layer.pattern();
  const auto [bo, bi] = old.block_shape();
  const Shape grid = old.grid_shape();
  const std::int64_t n = old.num_blocks(), cells = checked_mul(grid[0], grid[1], kFn, "block grid");
  const auto k = static_cast<std::int64_t>(std::floor(fraction * double(n)));
  if (k == 0) return 0;

  // Drop: the k stored blocks of smallest squared Frobenius norm.
  std::vector<double> magnitude;
  {
    NoGradGuard guard;
    const Tensor w = layer.weight();
    magnitude = ordered(sum(mul(w, w), {1, 2}).to_vector(), INFINITY);
  }
  std::vector<std::int64_t> stored(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < n; ++b) stored[static_cast<std::size_t>(b)] = b;
  const std::vector<std::int64_t> drop = select(stored, magnitude, k, [](double a, double b) { return a < b; });

  // Candidates: every cell of the grid not kept (the dropped blocks included, as RigL).
  const auto coords = old.block_coords();
  std::vector<char> kept(static_cast<std::size_t>(cells), 0);
  std::vector<std::pair<std::int64_t, std::int64_t>> keep;
  keep.reserve(static_cast<std::size_t>(n));
  for (std::int64_t b = 0, d = 0; b < n; ++b) {
    if (d < k && drop[static_cast<std::size_t>(d)] == b) {
      ++d;
      continue;
    }
    const auto [r, c] = coords[static_cast<std::size_t>(b)];
    kept[static_cast<std::size_t>(r * grid[1] + c)] = 1;
    keep.emplace_back(r, c);
  }
  std::vector<std::int64_t> candidates;
  candidates.reserve(static_cast<std::size_t>(cells - n + k));
  for (std::int64_t c = 0; c < cells; ++c)
    if (!kept[static_cast<std::size_t>(c)]) candidates.push_back(c);

  // Grow: k candidates, by the dense gradient's block norm (RigL) or at random (SET).
  std::vector<std::int64_t> grow;
  if (options_.grow() == GrowMode::gradient) {
    const auto [x, g] = layer.captured();
    XGRAD_CHECK(x.defined() && g.defined(),
                "{}: layer {} has no captured gradient at update step {}: call step() once after every "
                "optimizer.step(), with a forward and backward through the layer in between",
                kFn, index, step_);
    const Tensor norms = block_grad_norms(x, g, BlockSize{InFeatures{bi}, OutFeatures{bo}});
    grow = select(candidates, ordered(norms.to_vector(), -INFINITY), k, [](double a, double b) { return a > b; });
  } else {
    partial_shuffle(candidates, static_cast<std::size_t>(k), gen_);
    grow.assign(candidates.begin(), candidates.begin() + k);
    std::sort(grow.begin(), grow.end());
  }

  // The new cell list, sorted (a merge of two sorted lists), and the moves.
  std::vector<std::pair<std::int64_t, std::int64_t>> grown;
  grown.reserve(grow.size());
  for (std::int64_t c : grow) grown.emplace_back(c / grid[1], c % grid[1]);
  std::vector<std::pair<std::int64_t, std::int64_t>> next;
  next.reserve(static_cast<std::size_t>(n));
  std::merge(keep.begin(), keep.end(), grown.begin(), grown.end(), std::back_inserter(next));
  const BlockSparsePattern pattern = BlockSparsePattern::from_block_coords(
      InFeatures{old.in_features()}, OutFeatures{old.out_features()}, BlockSize{InFeatures{bi}, OutFeatures{bo}}, next);
  layer.set_pattern(pattern);
  NoGradGuard guard;
  for (Tensor b : optimizer_.state_buffers(layer.weight())) b.copy_(block_sparse_remap(b, old, pattern));
  return k;
}

}  // namespace xgrad::nn
