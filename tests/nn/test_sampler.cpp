// nn/sampler.* : neighbour sampling (blocks and their renumbering, without and with replacement,
// weighted draws, both directions, 1-vs-2-thread bit equality), NeighborLoader (every seed once per
// epoch, labels, DistributedSampler's disjoint ranks, errors from the background sampling, early
// exit), the graph layers on blocks against their full-graph outputs, layerwise_inference, float64
// gradcheck through layers on a block, and bad inputs.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/graph.hpp"
#include "xgrad/nn/optim/adam.hpp"
#include "xgrad/nn/sampler.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
namespace graph = xgrad::nn::graph;

namespace {

Tensor edge_index(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst) {
  std::vector<std::int64_t> v(src);
  v.insert(v.end(), dst.begin(), dst.end());
  return Tensor::from_vector(v, {2, static_cast<std::int64_t>(src.size())});
}

// 7 nodes (as tests/nn/test_graph.cpp's, without the repeated edge): a self-loop (3 -> 3), a node
// with out-edges only (0) and an isolated node (6).
const std::vector<std::int64_t> kSrc = {0, 0, 1, 1, 2, 3, 4, 5, 3, 2, 4};
const std::vector<std::int64_t> kDst = {1, 2, 2, 3, 3, 3, 5, 4, 1, 4, 1};
constexpr std::int64_t kNodes = 7;

std::vector<std::int64_t> ints(const Tensor& t) {
  const Tensor c = t.dtype() == kInt64 ? t : t.to(kInt64);
  return {c.data<std::int64_t>(), c.data<std::int64_t>() + c.numel()};
}

// The weighted graph of kSrc -> kDst, weights in [0.5, 2).
nn::Graph small_graph(Dtype dtype) {
  Generator gen(5);
  const Tensor w = Tensor::rand({static_cast<std::int64_t>(kSrc.size())}, gen, dtype);
  return nn::Graph(graph::adjacency(edge_index(kSrc, kDst), kNodes, add(mul(w, 1.5), 0.5)));
}

// A random graph: n nodes, n * avg random edges (repeats summed).
nn::Graph random_graph(std::int64_t n, std::int64_t avg, std::uint64_t seed, bool weights = false) {
  Generator gen(seed);
  std::vector<std::int64_t> src, dst;
  for (std::int64_t e = 0; e < n * avg; ++e) {
    src.push_back(static_cast<std::int64_t>(gen.integer(static_cast<std::uint64_t>(n))));
    dst.push_back(static_cast<std::int64_t>(gen.integer(static_cast<std::uint64_t>(n))));
  }
  if (!weights) return nn::Graph(graph::adjacency(src, dst, n));
  const Tensor w = Tensor::rand({n * avg}, gen, kFloat32);
  return nn::Graph(graph::adjacency(edge_index(src, dst), n, w));
}

// Row g of a CSR matrix as {column: value}.
std::map<std::int64_t, double> row_of(const SparseCsr& a, std::int64_t g) {
  const auto crow = a.pattern().crow();
  const auto col = a.pattern().col();
  const std::vector<double> v = a.values().to_vector();
  std::map<std::int64_t, double> r;
  for (std::int64_t k = crow[static_cast<std::size_t>(g)]; k < crow[static_cast<std::size_t>(g) + 1]; ++k)
    r[col[static_cast<std::size_t>(k)]] = v[static_cast<std::size_t>(k)];
  return r;
}

// Every structural rule of Note [Blocks]: targets first, distinct sources, each block's targets the
// next block's sources, every sampled edge an edge of the graph (with a value of its weight times
// the times drawn), at most `k` distinct neighbours per target; returns the total draws per target
// of the last block (value / weight).
void require_valid_blocks(const nn::MiniBatch& mb, const nn::NeighborSampler& s,
                          const std::vector<std::int64_t>& seeds) {
  const SparseCsr adj[2] = {
      s.direction() == graph::Direction::out ? s.graph().reverse().adjacency() : s.graph().adjacency(),
      s.graph().reverse().adjacency()};
  REQUIRE(mb.blocks.size() == s.fanouts().size());
  REQUIRE(ints(mb.seeds) == seeds);
  REQUIRE(ints(mb.blocks.back().dst_nodes()) == seeds);
  REQUIRE(ints(mb.input_nodes) == ints(mb.blocks.front().src_nodes));
  for (std::size_t l = 0; l < mb.blocks.size(); ++l) {
    const nn::Block& b = mb.blocks[l];
    INFO("block " << l);
    const std::vector<std::int64_t> src = ints(b.src_nodes);
    REQUIRE(static_cast<std::int64_t>(src.size()) == b.num_src());
    REQUIRE(std::set<std::int64_t>(src.begin(), src.end()).size() == src.size());
    if (l + 1 < mb.blocks.size()) REQUIRE(ints(b.dst_nodes()) == ints(mb.blocks[l + 1].src_nodes));
    const std::int64_t k = s.fanouts()[l];
    for (int p = 0; p < (s.direction() == graph::Direction::both ? 2 : 1); ++p) {
      const SparseCsr& a = p == 0 ? b.adj : b.adj_out;
      REQUIRE(a.rows() == b.num_dst());
      REQUIRE(a.cols() == b.num_src());
      for (std::int64_t i = 0; i < b.num_dst(); ++i) {
        const auto full = row_of(adj[p], src[static_cast<std::size_t>(i)]);
        const auto got = row_of(a, i);
        if (k < 0 || (!s.replace() && static_cast<std::int64_t>(full.size()) <= k)) REQUIRE(got.size() == full.size());
        if (k > 0) REQUIRE(static_cast<std::int64_t>(got.size()) <= k);
        std::int64_t draws = 0;
        for (const auto& [local, value] : got) {
          const std::int64_t g = src[static_cast<std::size_t>(local)];
          REQUIRE(full.count(g) == 1);
          const double times = value / full.at(g);
          CHECK(std::abs(times - std::round(times)) < 1e-4);
          CHECK(std::round(times) >= 1);
          if (!s.replace()) CHECK(std::round(times) == 1);
          draws += static_cast<std::int64_t>(std::round(times));
        }
        if (s.replace() && k > 0 && !s.weighted() && !full.empty()) CHECK(draws == k);
      }
    }
  }
}

Tensors block_tensors(const nn::MiniBatch& mb) {
  Tensors r = {mb.input_nodes};
  for (const nn::Block& b : mb.blocks) {
    for (const SparseCsr* a : {&b.adj, &b.adj_out})
      if (a->defined()) r.insert(r.end(), {a->crow_indices(), a->col_indices(), a->values()});
    r.insert(r.end(), {b.src_nodes, b.src_degree, b.src_degree_loops});
  }
  return r;
}

std::vector<std::int64_t> iota(std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(hi - lo));
  std::iota(v.begin(), v.end(), lo);
  return v;
}

}  // namespace

// ---- sampling -----------------------------------------------------------------------------------

TEST_CASE("NeighborSampler: blocks put the targets first and renumber the sampled neighbours", "[nn][sampler]") {
  const nn::Graph g = small_graph(kFloat32);
  const std::vector<std::int64_t> seeds = {3, 1, 6};
  const nn::NeighborSampler all(g, {-1, -1});
  const nn::MiniBatch mb = all.sample(seeds, 1);
  require_valid_blocks(mb, all, seeds);
  // The last block by hand: 3's in-neighbours 1, 2, 3 (self-loop); 1's 0, 3, 4; 6 none. New sources in
  // order of first appearance, each target's neighbours by global id: 2, then 0, 4.
  const nn::Block& b = mb.blocks.back();
  CHECK(ints(b.src_nodes) == std::vector<std::int64_t>{3, 1, 6, 2, 0, 4});
  CHECK(ints(b.adj.crow_indices()) == std::vector<std::int64_t>{0, 3, 6, 6});
  CHECK(ints(b.adj.col_indices()) == std::vector<std::int64_t>{0, 1, 3, 0, 4, 5});
  // The full graph's degrees of the sources (3 has a self-loop; the others get one more).
  const Tensor deg = graph::in_degree(g.adjacency());
  CHECK(allclose(b.src_degree, index_select(deg, 0, b.src_nodes)));
  const std::vector<double> d = b.src_degree.to_vector(), dl = b.src_degree_loops.to_vector();
  CHECK(dl[0] == d[0]);
  for (std::size_t j = 1; j < d.size(); ++j) CHECK(dl[j] == Approx(d[j] + 1));
  // Out-neighbours (Direction::out) and both.
  for (auto dir : {graph::Direction::out, graph::Direction::both}) {
    const nn::NeighborSampler s(g, {-1, 2}, false, dir);
    require_valid_blocks(s.sample(seeds, 4), s, seeds);
  }
}

TEST_CASE("NeighborSampler: without replacement, min(k, degree) distinct neighbours", "[nn][sampler]") {
  const nn::Graph g = random_graph(400, 90, 11);  // degrees around 80: above and below the fan-outs
  const std::vector<std::int64_t> seeds = iota(0, 400);
  for (std::int64_t k : {std::int64_t{5}, std::int64_t{64}, std::int64_t{78}}) {  // Floyd, and (78) the shuffle
    INFO("fan-out " << k);
    const nn::NeighborSampler s(g, {k});
    const nn::MiniBatch mb = s.sample(seeds, 9);
    require_valid_blocks(mb, s, seeds);
    const auto crow = mb.blocks[0].adj.pattern().crow();
    const auto full = g.adjacency().pattern().crow();
    for (std::size_t i = 0; i < seeds.size(); ++i) CHECK(crow[i + 1] - crow[i] == std::min(k, full[i + 1] - full[i]));
  }
  // Weighted, without replacement: distinct too.
  const nn::Graph gw = random_graph(300, 20, 12, true);
  const nn::NeighborSampler s(gw, {6, 3}, false, graph::Direction::in, true);
  require_valid_blocks(s.sample(iota(0, 300), 2), s, iota(0, 300));
}

TEST_CASE("NeighborSampler: with replacement, k draws per node, repeats counted in the values", "[nn][sampler]") {
  const nn::Graph g = random_graph(300, 6, 13);
  const nn::NeighborSampler s(g, {25, 4}, true);
  const std::vector<std::int64_t> seeds = iota(100, 200);
  const nn::MiniBatch mb = s.sample(seeds, 3);
  require_valid_blocks(mb, s, seeds);  // checks Σ draws = k per target with neighbours
  // 25 draws from about 6 neighbours: repeats are certain, so some value is above the weight 1.
  CHECK(max(mb.blocks[0].adj.values()).item() > 1.0);
  const nn::NeighborSampler sb(g, {3, 3}, true, graph::Direction::both);
  require_valid_blocks(sb.sample(seeds, 3), sb, seeds);
}

TEST_CASE("NeighborSampler: weighted draws follow the edge values", "[nn][sampler]") {
  // Node 0's in-neighbours 1..5 with weights 1, 2, 3, 4 and 0.
  const std::vector<std::int64_t> src = {1, 2, 3, 4, 5}, dst = {0, 0, 0, 0, 0};
  const Tensor w = Tensor::of({1, 2, 3, 4, 0}, kFloat64);
  const nn::Graph g(graph::adjacency(edge_index(src, dst), 6, w));
  // With replacement: 20000 draws; each count within 5 standard deviations of 20000 · w / 10.
  const nn::NeighborSampler rep(g, {20000}, true, graph::Direction::in, true);
  const nn::MiniBatch mb = rep.sample(std::vector<std::int64_t>{0}, 17);
  const std::vector<std::int64_t> srcs = ints(mb.blocks[0].src_nodes);
  std::map<std::int64_t, double> counts;  // global id -> value (count · weight)
  for (const auto& [local, value] : row_of(mb.blocks[0].adj, 0)) counts[srcs[static_cast<std::size_t>(local)]] = value;
  for (std::int64_t j = 1; j <= 4; ++j) {
    const double p = static_cast<double>(j) / 10.0;
    const double expected = 20000 * p, sd = std::sqrt(20000 * p * (1 - p));
    INFO("neighbour " << j);
    REQUIRE(counts.count(j) == 1);
    CHECK(std::abs(counts[j] / static_cast<double>(j) - expected) < 5 * sd);  // the value is count · weight
  }
  CHECK(counts.count(5) == 0);  // weight 0: never drawn
  // Without replacement, one neighbour per batch: over 4000 sampling seeds, frequencies w / 10.
  const nn::NeighborSampler one(g, {1}, false, graph::Direction::in, true);
  std::map<std::int64_t, int> freq;
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    const nn::MiniBatch m = one.sample(std::vector<std::int64_t>{0}, seed);
    REQUIRE(m.blocks[0].num_src() == 2);
    ++freq[ints(m.blocks[0].src_nodes)[1]];
  }
  for (std::int64_t j = 1; j <= 4; ++j) {
    const double p = static_cast<double>(j) / 10.0;
    INFO("neighbour " << j << " taken " << freq[j] << " times of 4000");
    CHECK(std::abs(freq[j] - 4000 * p) < 5 * std::sqrt(4000 * p * (1 - p)));
  }
  CHECK(freq.count(5) == 0);
  // Without replacement, k = 4 of 5 with one weight 0: the four others, always.
  const nn::NeighborSampler four(g, {4}, false, graph::Direction::in, true);
  CHECK(four.sample(std::vector<std::int64_t>{0}, 1).blocks[0].adj.nnz() == 4);
  CHECK(ints(four.sample(std::vector<std::int64_t>{0}, 1).blocks[0].src_nodes) ==
        std::vector<std::int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("NeighborSampler: the same blocks at 1 and 2 threads, from the seed alone", "[nn][sampler][threads]") {
  const nn::Graph g = random_graph(3000, 12, 21, true);
  const std::vector<std::int64_t> seeds = iota(0, 3000);
  struct Mode {
    bool replace, weighted;
    graph::Direction direction;
  };
  for (const Mode m : {Mode{false, false, graph::Direction::in}, Mode{true, false, graph::Direction::in},
                       Mode{false, true, graph::Direction::out}, Mode{true, true, graph::Direction::both}}) {
    INFO("replace " << m.replace << " weighted " << m.weighted);
    const nn::NeighborSampler s(g, {8, 4}, m.replace, m.direction, m.weighted);
    test::require_thread_deterministic([&] { return block_tensors(s.sample(seeds, 77)); });
    // Another seed, another sample; the same seed, the same one.
    const Tensors a = block_tensors(s.sample(seeds, 77)), b = block_tensors(s.sample(seeds, 78));
    CHECK_FALSE(bit_equal(a[2], b[2]));
    const Tensors c = block_tensors(s.sample(seeds, 77));
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(bit_equal(a[i], c[i]));
  }
  // Concurrent sample() calls on one sampler (each takes a relabelling map of its own).
  {
    const nn::NeighborSampler s(g, {6, 3});
    const Tensors want = block_tensors(s.sample(iota(0, 500), 5));
    std::vector<Tensors> got(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < got.size(); ++t)
      threads.emplace_back([&, t] { got[t] = block_tensors(s.sample(iota(0, 500), 5)); });
    for (auto& t : threads) t.join();
    for (const Tensors& r : got) {
      REQUIRE(r.size() == want.size());
      for (std::size_t i = 0; i < r.size(); ++i) CHECK(bit_equal(r[i], want[i]));
    }
  }
  // A node's draws depend on (seed, layer, node) only, not on the rest of the batch.
  const nn::NeighborSampler s(g, {5});
  const auto row_alone = row_of(s.sample(std::vector<std::int64_t>{42}, 5).blocks[0].adj, 0);
  const nn::MiniBatch mb = s.sample(std::vector<std::int64_t>{7, 42}, 5);
  const nn::MiniBatch alone = s.sample(std::vector<std::int64_t>{42}, 5);
  std::set<std::int64_t> a, b;
  for (const auto& [local, v] : row_of(mb.blocks[0].adj, 1)) a.insert(ints(mb.blocks[0].src_nodes)[local]);
  for (const auto& [local, v] : row_alone) b.insert(ints(alone.blocks[0].src_nodes)[local]);
  CHECK(a == b);
}

// ---- the loader ---------------------------------------------------------------------------------

TEST_CASE("NeighborLoader: every seed once per epoch, with its label", "[nn][sampler][loader]") {
  const nn::Graph g = random_graph(500, 5, 31);
  const nn::NeighborSampler s(g, {4, 3});
  const std::vector<std::int64_t> train = iota(100, 337);  // 237 seeds: a short last batch
  std::vector<std::int64_t> label_values;
  for (std::int64_t v = 0; v < 500; ++v) label_values.push_back(3 * v);
  const Tensor labels = Tensor::from_vector(label_values, {500});
  nn::NeighborLoader loader(s, Tensor::from_vector(train, {237}), labels,
                            nn::DataLoaderOptions(32).shuffle(true).seed(4));
  REQUIRE(loader.size() == 8);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    std::size_t batches = 0;
    for (auto& batch : loader) {
      const std::vector<std::int64_t> seeds = ints(batch.seeds);
      CHECK(seeds.size() == (batches < 7 ? 32u : 13u));
      require_valid_blocks(batch, s, seeds);
      std::vector<std::int64_t> want;
      for (const std::int64_t v : seeds) want.push_back(3 * v);
      CHECK(ints(batch.labels) == want);
      seen.insert(seen.end(), seeds.begin(), seeds.end());
      ++batches;
    }
    CHECK(batches == 8);
    epochs.push_back(seen);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == train);
  }
  CHECK(epochs[0] != epochs[1]);  // a new order each epoch
  // set_epoch repeats an epoch, batches and samples alike.
  loader.set_epoch(0);
  auto it = loader.begin();
  CHECK(ints(it->seeds) == std::vector<std::int64_t>(epochs[0].begin(), epochs[0].begin() + 32));
  // Leaving a pass early (a batch is being sampled) and destroying the loader neither hangs nor leaks.
}

TEST_CASE("NeighborLoader with DistributedSampler: the ranks' seeds are disjoint and cover the set",
          "[nn][sampler][loader]") {
  const nn::Graph g = random_graph(300, 4, 32);
  const nn::NeighborSampler s(g, {3});
  const std::vector<std::int64_t> train = iota(0, 200);
  std::vector<std::int64_t> all;
  std::vector<std::set<std::int64_t>> ranks;
  for (std::size_t r = 0; r < 2; ++r) {
    auto sampler = std::make_shared<nn::DistributedSampler>(200, 2, r, true, 8);
    nn::NeighborLoader loader(s, Tensor::from_vector(train, {200}), Tensor(), nn::DataLoaderOptions(16), sampler);
    loader.set_epoch(3);
    std::set<std::int64_t> mine;
    for (auto& batch : loader) {
      CHECK_FALSE(batch.labels.defined());
      for (const std::int64_t v : ints(batch.seeds)) mine.insert(v);
    }
    CHECK(mine.size() == 100);
    all.insert(all.end(), mine.begin(), mine.end());
    ranks.push_back(mine);
  }
  std::vector<std::int64_t> both;
  std::set_intersection(ranks[0].begin(), ranks[0].end(), ranks[1].begin(), ranks[1].end(), std::back_inserter(both));
  CHECK(both.empty());
  std::sort(all.begin(), all.end());
  CHECK(all == train);
}

namespace {
// Positions with a repeat in the second batch: the background sampling of that batch fails.
struct RepeatingSampler : nn::Sampler {
  std::size_t size() const override { return 8; }
  std::vector<std::size_t> indices() const override { return {0, 1, 2, 3, 4, 4, 5, 6}; }
};
}  // namespace

TEST_CASE("NeighborLoader: an error of the background sampling reaches the caller, early exits do not hang",
          "[nn][sampler][loader]") {
  const nn::Graph g = random_graph(50, 3, 33);
  const nn::NeighborSampler s(g, {2, 2});
  const Tensor train = Tensor::from_vector(iota(0, 10), {10});
  {
    nn::NeighborLoader loader(s, train, Tensor(), nn::DataLoaderOptions(4), std::make_shared<RepeatingSampler>());
    auto it = loader.begin();
    CHECK(it->seeds.numel() == 4);  // batch 0 is fine; batch 1 is being sampled meanwhile
    ++it;
    test::require_error([&] { (void)*it; }, {"NeighborSampler::sample", "node 4 twice"});
    // A new pass after the error starts cleanly.
    CHECK(loader.begin()->seeds.numel() == 4);
  }
  {
    nn::NeighborLoader loader(s, train, Tensor(), nn::DataLoaderOptions(3).shuffle(true));
    int n = 0;
    for (auto& batch : loader) {
      CHECK(batch.seeds.numel() == 3);
      if (++n == 2) break;  // batch 2 is being sampled: the next begin() and the destructor wait for it
    }
    CHECK(n == 2);
    std::size_t count = 0;
    for (auto& batch : loader) count += static_cast<std::size_t>(batch.seeds.numel());
    CHECK(count == 10);
    (void)loader.begin();  // destroyed with a batch in flight
  }
}

TEST_CASE("NeighborLoader: a two-layer SAGE model trains on sampled blocks", "[nn][sampler][loader]") {
  // Labels a model can read from a node's own features and its neighbours' mean: the class is the
  // argmax of x + mean of the in-neighbours' x over the first 3 columns.
  const nn::Graph g = random_graph(400, 5, 51);
  Generator gen(52);
  const Tensor x = Tensor::randn({400, 6}, gen);
  const Tensor signal = slice(add(x, spmm(g.mean_norm(), x)), 1, 0, 3);
  const Tensor labels = argmax(signal, 1);
  nn::SAGEConv c0(6, 16, gen), c1(16, 3, gen);
  std::vector<Tensor> params = c0.parameters();
  for (const Tensor& p : c1.parameters()) params.push_back(p);
  nn::Adam opt(params, nn::AdamOptions(0.02));
  const nn::NeighborSampler s(g, {5, 5});
  nn::NeighborLoader loader(s, Tensor::from_vector(iota(0, 300), {300}), labels,
                            nn::DataLoaderOptions(50).shuffle(true).seed(3));
  std::vector<double> epoch_loss;
  for (int epoch = 0; epoch < 15; ++epoch) {
    double total = 0.0;
    for (auto& batch : loader) {
      opt.zero_grad();
      const Tensor h = relu(c0(index_select(x, 0, batch.input_nodes), batch.blocks[0]));
      const Tensor loss = cross_entropy(c1(h, batch.blocks[1]), batch.labels);
      loss.backward();
      opt.step();
      total += loss.item();
    }
    epoch_loss.push_back(total / static_cast<double>(loader.size()));
  }
  INFO("first epoch " << epoch_loss.front() << ", last " << epoch_loss.back());
  CHECK(epoch_loss.back() < 0.6 * epoch_loss.front());
  // Evaluation without sampling: accuracy on the held-out nodes 300..399 well above chance (1/3).
  const Tensor logits = nn::layerwise_inference(g, x,
                                                {[&](const Tensor& h, const nn::Block& b) { return relu(c0(h, b)); },
                                                 [&](const Tensor& h, const nn::Block& b) { return c1(h, b); }},
                                                128);
  const std::vector<std::int64_t> pred = ints(argmax(logits, 1)), want = ints(labels);
  int right = 0;
  for (std::size_t i = 300; i < 400; ++i) right += pred[i] == want[i] ? 1 : 0;
  CHECK(right > 60);
}

// ---- layers on blocks ---------------------------------------------------------------------------

namespace {

using LayerFn = std::function<Tensor(const Tensor&, const nn::Graph&, const nn::Block*)>;
template <class L>
LayerFn on(std::shared_ptr<L> layer) {
  return
      [layer](const Tensor& x, const nn::Graph& g, const nn::Block* b) { return b ? (*layer)(x, *b) : (*layer)(x, g); };
}

std::vector<std::pair<std::string, LayerFn>> layers(Dtype dt) {
  using graph::Aggregation;
  using graph::Direction;
  std::vector<std::pair<std::string, LayerFn>> r;
  r.emplace_back("GCNConv", on(std::make_shared<nn::GCNConv>(4, 3, true, true, true, dt, 1)));
  r.emplace_back("GCNConv no self-loops", on(std::make_shared<nn::GCNConv>(4, 3, true, false, true, dt, 2)));
  r.emplace_back("GCNConv unnormalised", on(std::make_shared<nn::GCNConv>(4, 3, true, true, false, dt, 3)));
  r.emplace_back("GraphConv", on(std::make_shared<nn::GraphConv>(4, 3, true, dt, 4)));
  for (auto aggr : {Aggregation::mean, Aggregation::sum, Aggregation::max})
    r.emplace_back("SAGEConv", on(std::make_shared<nn::SAGEConv>(4, 3, aggr, true, true, Direction::in, dt, 5)));
  r.emplace_back("GATConv", on(std::make_shared<nn::GATConv>(4, 3, 2, true, 0.2, 0.0, true, true, dt, 6)));
  r.emplace_back("GATConv mean, no self-loops",
                 on(std::make_shared<nn::GATConv>(4, 3, 2, false, 0.2, 0.0, false, true, dt, 7)));
  return r;
}

}  // namespace

TEST_CASE("Graph layers on blocks: with every neighbour taken, the full-graph outputs of the seeds",
          "[nn][sampler][graph]") {
  const nn::Graph g = small_graph(kFloat64);
  Generator gen(3);
  const Tensor x = Tensor::randn({kNodes, 4}, gen, kFloat64);
  const std::vector<std::int64_t> seeds = {3, 1, 6, 4};
  const Tensor seed_ids = Tensor::from_vector(seeds, {4});
  for (auto& [name, layer] : layers(kFloat64)) {
    INFO(name);
    // One layer; and two, the second on the first's outputs (the sources' own rows from the first block).
    const nn::NeighborSampler one(g, {-1}), two(g, {-1, -1});
    const nn::MiniBatch b1 = one.sample(seeds, 0), b2 = two.sample(seeds, 0);
    const Tensor want1 = index_select(layer(x, g, nullptr), 0, seed_ids);
    CHECK(allclose(layer(index_select(x, 0, b1.input_nodes), g, &b1.blocks[0]), want1, 0.0, 1e-12));
    // The layer's outputs (3 or 6 columns) cut or padded to its 4 inputs.
    const auto to4 = [](const Tensor& t) {
      return t.size(1) >= 4 ? slice(t, 1, 0, 4) : concat({t, Tensor::zeros({t.size(0), 4 - t.size(1)}, kFloat64)}, 1);
    };
    const Tensor h = to4(layer(index_select(x, 0, b2.input_nodes), g, &b2.blocks[0]));
    const Tensor full_h = to4(layer(x, g, nullptr));
    CHECK(allclose(layer(tanh(h), g, &b2.blocks[1]), index_select(layer(tanh(full_h), g, nullptr), 0, seed_ids), 0.0,
                   1e-12));
  }
  // Out-neighbours: a block of Direction::out is the reversed graph's block.
  nn::GCNConv gcn(4, 3, true, true, true, kFloat64, 8);
  const nn::NeighborSampler out(g, {-1}, false, graph::Direction::out);
  const nn::MiniBatch bo = out.sample(seeds, 0);
  CHECK(allclose(gcn(index_select(x, 0, bo.input_nodes), bo.blocks[0]), index_select(gcn(x, g.reverse()), 0, seed_ids),
                 0.0, 1e-12));
  // SAGEConv in each direction on blocks of out and both.
  for (auto dir : {graph::Direction::in, graph::Direction::out, graph::Direction::both}) {
    nn::SAGEConv sage(4, 3, graph::Aggregation::mean, true, true, dir, kFloat64, 9);
    const nn::NeighborSampler sb(g, {-1}, false, graph::Direction::both);
    const nn::MiniBatch m = sb.sample(seeds, 0);
    const Tensor want = index_select(sage(x, g), 0, seed_ids);
    CHECK(allclose(sage(index_select(x, 0, m.input_nodes), m.blocks[0]), want, 0.0, 1e-12));
    if (dir == graph::Direction::out) {
      const nn::MiniBatch mo = out.sample(seeds, 0);
      CHECK(allclose(sage(index_select(x, 0, mo.input_nodes), mo.blocks[0]), want, 0.0, 1e-12));
    }
  }
  // Sparse features.
  nn::GraphConv gc(4, 3, true, kFloat64, 10);
  const nn::MiniBatch m = nn::NeighborSampler(g, {-1}).sample(seeds, 0);
  const SparseCsr xs = to_sparse_csr(relu(index_select(x, 0, m.input_nodes)));
  CHECK(allclose(gc(xs, m.blocks[0]), index_select(gc(relu(x), g), 0, seed_ids), 0.0, 1e-12));
}

TEST_CASE("layerwise_inference: each layer over all nodes in chunks, the full-graph forward", "[nn][sampler][graph]") {
  const nn::Graph g = random_graph(60, 4, 41);
  Generator gen(4);
  const Tensor x = Tensor::randn({60, 8}, gen);
  nn::SAGEConv c1(8, 16, gen), c2(16, 5, gen);
  nn::GCNConv c3(5, 3, gen);
  const Tensor want = c3(relu(c2(relu(c1(x, g)), g)), g);
  const std::vector<nn::BlockLayer> net = {
      [&](const Tensor& h, const nn::Block& b) { return relu(c1(h, b)); },
      [&](const Tensor& h, const nn::Block& b) { return relu(c2(h, b)); },
      [&](const Tensor& h, const nn::Block& b) { return c3(h, b); },
  };
  for (std::int64_t chunk : {std::int64_t{7}, std::int64_t{60}, std::int64_t{100}}) {
    const Tensor got = nn::layerwise_inference(g, x, net, chunk);
    CHECK_FALSE(got.requires_grad());
    CHECK(allclose(got, want, 0.0, 1e-5));
  }
}

TEST_CASE("Graph layers on blocks: gradcheck in float64 with respect to x and every parameter",
          "[nn][sampler][graph]") {
  const nn::Graph g = small_graph(kFloat64);
  const nn::NeighborSampler s(g, {2}, true);  // a sampled block, repeats included
  const nn::MiniBatch m = s.sample(std::vector<std::int64_t>{1, 3, 4}, 12);
  const nn::Block& b = m.blocks[0];
  Generator gen(13);
  const auto check = [&](nn::Module& module, const std::function<Tensor(const Tensor&)>& run) {
    Tensors inputs = {test::randn_leaf({b.num_src(), 4}, gen)};
    for (const Tensor& p : module.parameters()) inputs.push_back(p);
    test::require_gradcheck([&](const Tensors& in) { return run(in[0]); }, inputs);
  };
  nn::GCNConv gcn(4, 3, true, true, true, kFloat64, 1);
  check(gcn, [&](const Tensor& x) { return gcn(x, b); });
  nn::GraphConv gc(4, 3, true, kFloat64, 2);
  check(gc, [&](const Tensor& x) { return gc(x, b); });
  for (auto aggr : {graph::Aggregation::mean, graph::Aggregation::max}) {
    nn::SAGEConv sage(4, 3, aggr, true, true, graph::Direction::in, kFloat64, 3);
    check(sage, [&](const Tensor& x) { return sage(x, b); });
  }
  nn::GATConv gat(4, 3, 2, true, 0.2, 0.0, true, true, kFloat64, 4);
  check(gat, [&](const Tensor& x) { return gat(x, b); });
}

// ---- bad inputs ---------------------------------------------------------------------------------

TEST_CASE("NeighborSampler, NeighborLoader, layers on blocks: bad inputs are errors naming the call and the values",
          "[nn][sampler][errors]") {
  const nn::Graph g = small_graph(kFloat32);
  test::require_error([&] { (void)nn::NeighborSampler(g, {}); }, {"NeighborSampler", "'fanouts' is empty"});
  test::require_error([&] { (void)nn::NeighborSampler(g, {3, 0}); }, {"NeighborSampler", "has 0 at layer 1", "-1"});
  test::require_error([&] { (void)nn::NeighborSampler(g, {-2}); }, {"NeighborSampler", "has -2 at layer 0"});
  test::require_error([&] { (void)nn::NeighborSampler(nn::Graph(), {2}); }, {"NeighborSampler", "no nodes"});
  const Tensor neg = Tensor::of({1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  const nn::Graph gneg(graph::adjacency(edge_index(kSrc, kDst), kNodes, neg));
  test::require_error([&] { (void)nn::NeighborSampler(gneg, {2}, false, graph::Direction::in, true); },
                      {"NeighborSampler", "weighted", "-1"});
  (void)nn::NeighborSampler(gneg, {2});  // unweighted: the values are not read for the draws
  const nn::NeighborSampler s(g, {2});
  test::require_error(
      [&] {
        s.sample(std::vector<std::int64_t>{1, 7}, 0);
      },
      {"NeighborSampler::sample", "7 at position 1", "num_nodes = 7"});
  test::require_error([&] { s.sample(std::vector<std::int64_t>{-1}, 0); }, {"NeighborSampler::sample", "-1"});
  test::require_error([&] { s.sample(std::vector<std::int64_t>{}, 0); }, {"NeighborSampler::sample", "empty"});
  test::require_error(
      [&] {
        s.sample(std::vector<std::int64_t>{2, 5, 2}, 0);
      },
      {"NeighborSampler::sample", "node 2 twice", "positions 0 and 2"});
  test::require_error([&] { s.sample(Tensor::of({1, 2}), 0); }, {"NeighborSampler::sample", "int64 or int32"});
  // The map is clean after an error: the same sampler still samples correctly.
  require_valid_blocks(s.sample(std::vector<std::int64_t>{2, 5}, 0), s, {2, 5});
  // NeighborLoader.
  const Tensor train = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2}, {3});
  test::require_error(
      [&] {
        (void)nn::NeighborLoader(s, Tensor::from_vector(std::vector<std::int64_t>{0, 9}, {2}), Tensor(),
                                 nn::DataLoaderOptions(2));
      },
      {"NeighborLoader", "'input_nodes' has 9 at position 1"});
  test::require_error(
      [&] { (void)nn::NeighborLoader(s, Tensor::zeros({0}, kInt64), Tensor(), nn::DataLoaderOptions(2)); },
      {"NeighborLoader", "non-empty"});
  test::require_error([&] { (void)nn::NeighborLoader(s, train, Tensor::zeros({5}), nn::DataLoaderOptions(2)); },
                      {"NeighborLoader", "'labels'", "num_nodes = 7"});
  test::require_error([&] { (void)nn::NeighborLoader(s, train, Tensor(), nn::DataLoaderOptions(0)); },
                      {"NeighborLoader", "batch_size"});
  test::require_error(
      [&] {
        (void)nn::NeighborLoader(s, train, Tensor(), nn::DataLoaderOptions(2).shuffle(true),
                                 std::make_shared<nn::SequentialSampler>(3));
      },
      {"NeighborLoader", "shuffle"});
  // Layers on blocks.
  const nn::MiniBatch m = s.sample(std::vector<std::int64_t>{1, 3}, 0);
  nn::GCNConv gcn(4, 3);
  test::require_error([&] { gcn(Tensor::zeros({m.blocks[0].num_src() + 1, 4}), m.blocks[0]); }, {"GCNConv", "num_src"});
  test::require_error(
      [&] {
        gcn(Tensor::zeros({m.blocks[0].num_src(), 5}), m.blocks[0]);
      },
      {"GCNConv", "in_channels = 4"});
  test::require_error(
      [&] {
        gcn(Tensor::zeros({m.blocks[0].num_src(), 4}, kFloat64), m.blocks[0]);
      },
      {"GCNConv", "float64"});
  const nn::MiniBatch mb =
      nn::NeighborSampler(g, {2}, false, graph::Direction::both).sample(std::vector<std::int64_t>{1}, 0);
  const Tensor xb = Tensor::zeros({mb.blocks[0].num_src(), 4});
  test::require_error([&] { gcn(xb, mb.blocks[0]); }, {"GCNConv", "Direction::both"});
  nn::GATConv gat(4, 3);
  test::require_error([&] { gat(xb, mb.blocks[0]); }, {"GATConv", "Direction::both"});
  nn::SAGEConv sage_both(4, 3, graph::Aggregation::mean, true, true, graph::Direction::both);
  test::require_error(
      [&] {
        sage_both(Tensor::zeros({m.blocks[0].num_src(), 4}), m.blocks[0]);
      },
      {"SAGEConv", "direction both", "direction in"});
  test::require_error([&] { gcn(Tensor::zeros({1, 4}), nn::Block()); }, {"GCNConv", "'block' is undefined"});
  // layerwise_inference.
  const nn::BlockLayer id = [&](const Tensor& h, const nn::Block& b) { return gcn(h, b); };
  test::require_error(
      [&] {
        nn::layerwise_inference(g, Tensor::zeros({7, 4}), {}, 2);
      },
      {"layerwise_inference", "'layers' is empty"});
  test::require_error(
      [&] {
        nn::layerwise_inference(g, Tensor::zeros({7, 4}), {id}, 0);
      },
      {"layerwise_inference", "chunk_size", "0"});
  test::require_error(
      [&] {
        nn::layerwise_inference(g, Tensor::zeros({6, 4}), {id}, 2);
      },
      {"layerwise_inference", "num_nodes = 7"});
}
