// nn/graph.* : the graph utilities (adjacency, self-loops, degrees, gcn_norm, mean_norm, reverse)
// against dense formulas; GCNConv, GraphConv, SAGEConv (mean, sum, max) and GATConv against PyG's
// definitions written in torch 1.13 (tests/nn/graph_parity.py: values, the gradients of x and of
// every parameter, GAT's attention weights), float64 gradcheck, 1-vs-2-thread bit equality, sparse
// features, edge_index inputs, init from the default generator, degenerate graphs, training,
// state_dict, repr, init and bad inputs.
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/graph.hpp"
#include "xgrad/nn/optim/adam.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/elementwise.hpp"
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

// 7 nodes: a directed graph with a repeated edge (1 -> 2 twice), a self-loop (3 -> 3), a node with
// out-edges only (0), and an isolated node (6).
const std::vector<std::int64_t> kSrc = {0, 0, 1, 1, 2, 3, 4, 5, 1, 3, 2, 4};
const std::vector<std::int64_t> kDst = {1, 2, 2, 3, 3, 3, 5, 4, 2, 1, 4, 1};
// The same without the repeated edge, for GATConv (which attends to an edge once; PyG to each copy).
const std::vector<std::int64_t> kSrcUnique = {0, 0, 1, 1, 2, 3, 4, 5, 3, 2, 4};
const std::vector<std::int64_t> kDstUnique = {1, 2, 2, 3, 3, 3, 5, 4, 1, 4, 1};
constexpr std::int64_t kNodes = 7;

double max_abs(const Tensor& t) { return t.numel() == 0 ? 0.0 : max(abs(t.detach())).item(); }

// ours ≈ reference: max |ours - reference| <= tol · max(1, max |reference|).
void require_close(const Tensor& ours, const Tensor& reference, double tol, const std::string& what) {
  INFO(what << "\nours " << ours << "\nreference " << reference);
  REQUIRE(ours.shape() == reference.shape());
  CHECK(allclose(ours.detach(), reference.detach(), 0.0, tol * std::max(1.0, max_abs(reference))));
}

// The dense (n, n) matrix of a SparseCsr as doubles.
std::vector<double> dense(const SparseCsr& a) { return a.to_dense().to_vector(); }

void randomize_parameters(nn::Module& m, std::uint64_t seed) {
  NoGradGuard guard;
  Generator g(seed);
  for (auto& [name, p] : m.named_parameters()) p.copy_(Tensor::randn(p.shape(), g, p.dtype()).mul_(0.5));
}

struct Case {
  std::string name, ctor;
  std::shared_ptr<nn::Module> module;
  bool unique_edges;
  std::function<Tensor(const nn::NodeFeatures&, const nn::Graph&)> run;
  std::function<Tensor(const nn::NodeFeatures&, const Tensor&)> run_edge_index;
  bool weighted = false;  // the graph carries edge weights (GCNConv, GraphConv)
  bool takes_sparse = true;
};

template <class M>
Case make_case(std::string name, std::string ctor, std::shared_ptr<M> m, bool unique_edges = false) {
  return {std::move(name),
          std::move(ctor),
          m,
          unique_edges,
          [m](const nn::NodeFeatures& x, const nn::Graph& g) { return m->forward(x, g); },
          [m](const nn::NodeFeatures& x, const Tensor& ei) { return m->forward(x, ei); }};
}

Case weighted(Case c) {
  c.weighted = true;
  return c;
}

std::vector<Case> make_cases(Dtype dt) {
  using graph::Aggregation;
  using graph::Direction;
  std::vector<Case> c;
  c.push_back(make_case("gcn", "GCNConv(5, 4)", std::make_shared<nn::GCNConv>(5, 4, true, true, true, dt, 1)));
  c.push_back(make_case("gcn_no_loops_no_bias", "GCNConv(5, 3, bias=False, add_self_loops=False)",
                        std::make_shared<nn::GCNConv>(5, 3, false, false, true, dt, 2)));
  c.push_back(make_case("gcn_no_normalize", "GCNConv(5, 4, normalize=False)",
                        std::make_shared<nn::GCNConv>(5, 4, true, true, false, dt, 3)));
  c.push_back(weighted(
      make_case("gcn_weighted", "GCNConv(5, 4)", std::make_shared<nn::GCNConv>(5, 4, true, true, true, dt, 16))));
  c.push_back(make_case("graphconv", "GraphConv(5, 4)", std::make_shared<nn::GraphConv>(5, 4, true, dt, 11)));
  c.push_back(weighted(make_case("graphconv_weighted_no_bias", "GraphConv(5, 3, bias=False)",
                                 std::make_shared<nn::GraphConv>(5, 3, false, dt, 12))));
  c.push_back(make_case("sage", "SAGEConv(5, 4)",
                        std::make_shared<nn::SAGEConv>(5, 4, Aggregation::mean, true, true, Direction::in, dt, 4)));
  c.push_back(make_case("sage_out_no_root", "SAGEConv(5, 3, root_weight=False, direction='out')",
                        std::make_shared<nn::SAGEConv>(5, 3, Aggregation::mean, true, false, Direction::out, dt, 5)));
  c.push_back(make_case("sage_both_no_bias", "SAGEConv(5, 4, bias=False, direction='both')",
                        std::make_shared<nn::SAGEConv>(5, 4, Aggregation::mean, false, true, Direction::both, dt, 6)));
  c.push_back(make_case("sage_sum_both", "SAGEConv(5, 4, aggr='sum', direction='both')",
                        std::make_shared<nn::SAGEConv>(5, 4, Aggregation::sum, true, true, Direction::both, dt, 13)));
  c.push_back(make_case("sage_max", "SAGEConv(5, 4, aggr='max')",
                        std::make_shared<nn::SAGEConv>(5, 4, Aggregation::max, true, true, Direction::in, dt, 14)));
  c.back().takes_sparse = false;
  c.push_back(make_case("sage_max_both_no_root", "SAGEConv(5, 3, aggr='max', root_weight=False, direction='both')",
                        std::make_shared<nn::SAGEConv>(5, 3, Aggregation::max, true, false, Direction::both, dt, 15)));
  c.back().takes_sparse = false;
  c.push_back(make_case("gat", "GATConv(5, 4)",
                        std::make_shared<nn::GATConv>(5, 4, 1, true, 0.2, 0.0, true, true, dt, 7), true));
  c.push_back(make_case("gat_heads3_concat", "GATConv(5, 2, heads=3, negative_slope=0.1)",
                        std::make_shared<nn::GATConv>(5, 2, 3, true, 0.1, 0.0, true, true, dt, 8), true));
  c.push_back(make_case("gat_heads2_mean_no_loops", "GATConv(5, 3, heads=2, concat=False, add_self_loops=False)",
                        std::make_shared<nn::GATConv>(5, 3, 2, false, 0.2, 0.0, false, true, dt, 9), true));
  c.push_back(make_case("gat_no_bias", "GATConv(5, 3, heads=2, bias=False)",
                        std::make_shared<nn::GATConv>(5, 3, 2, true, 0.2, 0.0, true, false, dt, 10), true));
  return c;
}

// The row of each stored entry of a CSR matrix.
std::vector<std::int64_t> pattern_rows(const SparseCsr& a) {
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t k = a.pattern().crow()[static_cast<std::size_t>(i)];
         k < a.pattern().crow()[static_cast<std::size_t>(i) + 1]; ++k)
      rows.push_back(i);
  return rows;
}

// Positive weights, one per edge of kSrc -> kDst.
Tensor edge_weights(Dtype dt) {
  std::vector<double> w;
  for (std::size_t e = 0; e < kSrc.size(); ++e) w.push_back(0.5 + 0.25 * static_cast<double>(e % 5));
  return Tensor::from_vector(w, {static_cast<std::int64_t>(w.size())}, dt);
}

// The graph a case runs on: kSrc -> kDst (kSrcUnique -> kDstUnique for GATConv), weighted or not.
Tensor case_edges(const Case& c) {
  return c.unique_edges ? edge_index(kSrcUnique, kDstUnique) : edge_index(kSrc, kDst);
}
nn::Graph case_graph(const Case& c, Dtype dt) {
  return nn::Graph(c.weighted ? graph::adjacency(case_edges(c), kNodes, edge_weights(dt))
                              : graph::adjacency(case_edges(c), kNodes, dt));
}

// A random graph with `n` nodes and about `n * avg` edges (some repeated), and features.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> random_edges(std::int64_t n, std::int64_t avg,
                                                                             Generator& gen) {
  std::vector<std::int64_t> src, dst;
  for (std::int64_t e = 0; e < n * avg; ++e) {
    src.push_back(static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(n)));
    dst.push_back(static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(n)));
  }
  return {src, dst};
}

}  // namespace

// ---- utilities ------------------------------------------------------------------------------------

TEST_CASE("graph::adjacency: A[dst, src], repeated edges summed or refused", "[nn][graph]") {
  const SparseCsr a = graph::adjacency(edge_index(kSrc, kDst), kNodes, kFloat64);
  CHECK(a.shape() == Shape{kNodes, kNodes});
  CHECK(a.nnz() == static_cast<std::int64_t>(kSrc.size()) - 1);  // 1 -> 2 twice: one entry
  std::vector<double> want(kNodes * kNodes, 0.0);
  for (std::size_t e = 0; e < kSrc.size(); ++e) want[static_cast<std::size_t>(kDst[e] * kNodes + kSrc[e])] += 1;
  CHECK(dense(a) == want);
  CHECK(a.dtype() == kFloat64);

  // The vector overload, int32 indices and explicit weights give the same matrix.
  CHECK(dense(graph::adjacency(kSrc, kDst, kNodes, kFloat64)) == want);
  CHECK(dense(graph::adjacency(edge_index(kSrc, kDst).to(kInt32), kNodes, kFloat64)) == want);
  CHECK(graph::adjacency(edge_index(kSrc, kDst), kNodes, Tensor()).dtype() == kFloat32);  // no weights: float32 ones
  Tensor w = Tensor::full({static_cast<std::int64_t>(kSrc.size())}, 2.0, kFloat32);
  const SparseCsr aw = graph::adjacency(edge_index(kSrc, kDst), kNodes, w);
  CHECK(aw.dtype() == kFloat32);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(dense(aw)[i] == 2 * want[i]);

  // Summed weights are differentiable: the repeated edge's entry passes its gradient to both copies.
  Generator gen(3);
  Tensor wl = test::randn_leaf({static_cast<std::int64_t>(kSrc.size())}, gen);
  sum(graph::adjacency(edge_index(kSrc, kDst), kNodes, wl).values()).backward();
  CHECK(wl.grad().to_vector() == std::vector<double>(kSrc.size(), 1.0));

  test::require_error([] { graph::adjacency(kSrc, kDst, kNodes, kFloat32, graph::Duplicates::error); },
                      {"graph::adjacency", "1 -> 2", "more than once"});
  CHECK(graph::adjacency(kSrcUnique, kDstUnique, kNodes, kFloat32, graph::Duplicates::error).nnz() ==
        static_cast<std::int64_t>(kSrcUnique.size()));

  // Degenerate graphs.
  CHECK(graph::adjacency(std::vector<std::int64_t>{}, {}, 0).shape() == Shape{0, 0});
  const SparseCsr empty = graph::adjacency(std::vector<std::int64_t>{}, {}, 4);
  CHECK(empty.shape() == Shape{4, 4});
  CHECK(empty.nnz() == 0);
}

TEST_CASE("graph utilities: self-loops, degrees, gcn_norm, mean_norm, reverse against dense formulas", "[nn][graph]") {
  Generator gen(21);
  Tensor w = test::uniform_leaf({static_cast<std::int64_t>(kSrc.size())}, gen, 0.5, 2.0);
  const SparseCsr a = graph::adjacency(edge_index(kSrc, kDst), kNodes, w);
  const std::vector<double> ad = dense(a);
  const auto at = [&](const std::vector<double>& m, std::int64_t i, std::int64_t j) {
    return m[static_cast<std::size_t>(i * kNodes + j)];
  };

  // add_remaining_self_loops: node 3's loop keeps its weight, every other node gets 1.5.
  const SparseCsr l = graph::add_remaining_self_loops(a, 1.5);
  CHECK(l.nnz() == a.nnz() + kNodes - 1);
  const std::vector<double> ld = dense(l);
  for (std::int64_t i = 0; i < kNodes; ++i)
    for (std::int64_t j = 0; j < kNodes; ++j) CHECK(at(ld, i, j) == (i == j && i != 3 ? 1.5 : at(ad, i, j)));
  CHECK(graph::add_remaining_self_loops(l).values().impl() == l.values().impl());  // nothing to add

  // Degrees: row sums (in) and column sums (out).
  const std::vector<double> din = graph::in_degree(a).to_vector(), dout = graph::out_degree(a).to_vector();
  for (std::int64_t i = 0; i < kNodes; ++i) {
    double r = 0, c = 0;
    for (std::int64_t j = 0; j < kNodes; ++j) {
      r += at(ad, i, j);
      c += at(ad, j, i);
    }
    CHECK(din[static_cast<std::size_t>(i)] == Approx(r).epsilon(1e-14));
    CHECK(dout[static_cast<std::size_t>(i)] == Approx(c).epsilon(1e-14));
  }

  // gcn_norm: D^-1/2 (A + I) D^-1/2 with D the row sums; without loops node 0 (no in-edges) has
  // degree 0, and its out-edges get 0 (PyG's inf -> 0).
  for (bool loops : {true, false}) {
    INFO("add_self_loops " << loops);
    const std::vector<double> base = loops ? dense(graph::add_remaining_self_loops(a)) : ad;
    std::vector<double> deg(kNodes, 0.0);
    for (std::int64_t i = 0; i < kNodes; ++i)
      for (std::int64_t j = 0; j < kNodes; ++j) deg[static_cast<std::size_t>(i)] += at(base, i, j);
    const auto dis = [&](std::int64_t i) {
      const double d = deg[static_cast<std::size_t>(i)];
      return d == 0 ? 0.0 : 1.0 / std::sqrt(d);
    };
    const std::vector<double> got = dense(graph::gcn_norm(a, loops));
    for (std::int64_t i = 0; i < kNodes; ++i)
      for (std::int64_t j = 0; j < kNodes; ++j)
        CHECK(at(got, i, j) == Approx(dis(i) * at(base, i, j) * dis(j)).epsilon(1e-14));
  }

  // mean_norm: each non-empty row sums to 1; rows without in-neighbours (0 and 6) stay empty.
  const std::vector<double> mn = dense(graph::mean_norm(a));
  for (std::int64_t i = 0; i < kNodes; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < kNodes; ++j) {
      CHECK(at(mn, i, j) == Approx(at(ad, i, j) / std::max(din[static_cast<std::size_t>(i)], 1e-300)).epsilon(1e-14));
      s += at(mn, i, j);
    }
    CHECK(s == Approx(i == 0 || i == 6 ? 0.0 : 1.0).epsilon(1e-14));
  }

  // reverse: the transpose.
  const std::vector<double> rd = dense(graph::reverse(a));
  for (std::int64_t i = 0; i < kNodes; ++i)
    for (std::int64_t j = 0; j < kNodes; ++j) CHECK(at(rd, i, j) == at(ad, j, i));

  // The normalisations are differentiable with respect to the edge weights (float64 gradcheck).
  const Tensor ei = edge_index(kSrc, kDst);
  test::require_gradcheck(
      [&](const Tensors& in) { return graph::gcn_norm(graph::adjacency(ei, kNodes, in[0])).values(); }, {w});
  test::require_gradcheck(
      [&](const Tensors& in) { return graph::mean_norm(graph::adjacency(ei, kNodes, in[0]).t()).values(); }, {w});

  // Degenerate: no nodes, and nodes without edges.
  for (std::int64_t n : {0, 3}) {
    const SparseCsr e = graph::adjacency(std::vector<std::int64_t>{}, {}, n, kFloat64);
    CHECK(graph::in_degree(e).shape() == Shape{n});
    CHECK(graph::gcn_norm(e).nnz() == n);  // the self-loops, each of weight 1
    CHECK(graph::gcn_norm(e).values().to_vector() == std::vector<double>(static_cast<std::size_t>(n), 1.0));
    CHECK(graph::mean_norm(e).nnz() == 0);
    CHECK(graph::reverse(e).shape() == Shape{n, n});
  }
}

TEST_CASE("Graph: normalisations are computed once and shared, unless the edge weights require grad", "[nn][graph]") {
  nn::Graph g(graph::adjacency(kSrc, kDst, kNodes));
  CHECK(g.num_nodes() == kNodes);
  CHECK(g.num_edges() == static_cast<std::int64_t>(kSrc.size()) - 1);
  CHECK(g.gcn_norm().values().impl() == g.gcn_norm().values().impl());
  CHECK(g.gcn_norm(false).values().impl() == g.gcn_norm(false).values().impl());
  CHECK(g.gcn_norm().values().impl() != g.gcn_norm(false).values().impl());
  CHECK(g.mean_norm(graph::Direction::out).values().impl() == g.mean_norm(graph::Direction::out).values().impl());
  CHECK(g.with_self_loops().pattern().same_object(g.with_self_loops().pattern()));
  const nn::Graph copy = g;  // a handle: the copy shares the caches
  CHECK(copy.mean_norm().values().impl() == g.mean_norm().values().impl());
  CHECK(g.reverse().adjacency().values().impl() == g.reverse().adjacency().values().impl());
  CHECK(dense(g.reverse().mean_norm()) == dense(g.mean_norm(graph::Direction::out)));
  CHECK(dense(g.gcn_norm()) == dense(graph::gcn_norm(g.adjacency())));

  Generator gen(5);
  Tensor w = test::uniform_leaf({static_cast<std::int64_t>(kSrc.size())}, gen, 0.5, 2.0, kFloat32);
  nn::Graph learned(graph::adjacency(edge_index(kSrc, kDst), kNodes, w));
  CHECK(learned.gcn_norm().values().impl() != learned.gcn_norm().values().impl());
  // Two steps on one graph: each backward reaches the weights (a cached graph would be released).
  nn::GraphConv conv(3, 2);
  const Tensor x = Tensor::ones({kNodes, 3});
  for (int step = 0; step < 2; ++step) {
    w.zero_grad();
    sum(conv(x, learned)).backward();
    CHECK(max_abs(w.grad()) > 0);
  }
  CHECK(nn::Graph().num_nodes() == 0);

  // Threads asking a fresh graph at once all get the one stored copy.
  const nn::Graph shared(graph::adjacency(kSrc, kDst, kNodes));
  std::vector<Tensor> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&shared, &got, t] { got[t] = shared.gcn_norm().values(); });
  for (auto& t : threads) t.join();
  for (const Tensor& v : got) CHECK(v.impl() == shared.gcn_norm().values().impl());
}

// ---- layers: parity with PyG's definitions ---------------------------------------------------------

// (A ": " past column 78 of a test name sends Catch2's console reporter into an endless loop when
// the test fails.)
TEST_CASE("graph layers match PyG's definitions in torch 1.13: values, gradients, attention weights",
          "[nn][graph][parity][python]") {
  // Each case runs here (its inputs, parameters and seed saved for graph_parity.py), then the
  // script recomputes it and the results are compared.
  test::TempDir dir("graph_parity");
  nlohmann::json manifest = nlohmann::json::array();
  std::vector<std::pair<std::string, Tensor>> results;  // "<case>__torch_<what>" -> ours
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(dt == kFloat32 ? 31 : 32);
    for (auto& c : make_cases(dt)) {
      const std::string name = c.name + "_" + std::string(dtype_name(dt));
      randomize_parameters(*c.module, 77);
      const Tensor ei = case_edges(c);
      Tensor x = test::randn_leaf({kNodes, 5}, gen, dt);
      save_npy(dir.file(name + "__in_x.npy"), x);
      save_npy(dir.file(name + "__in_ei.npy"), ei);
      if (c.weighted) save_npy(dir.file(name + "__in_w.npy"), edge_weights(dt));
      const Tensor out = c.run(x, case_graph(c, dt));
      const Tensor seed = Tensor::randn(out.shape(), gen, dt);
      save_npy(dir.file(name + "__seed.npy"), seed);
      sum(mul(out, seed)).backward();
      results.emplace_back(name + "__torch_out", out.detach());
      results.emplace_back(name + "__torch_grad_x", x.grad());
      std::vector<std::string> params;
      for (const auto& [n, p] : c.module->named_parameters()) {
        params.push_back(n);
        save_npy(dir.file(name + "__p_" + n + ".npy"), p);
        results.emplace_back(name + "__torch_grad_p_" + n, p.grad());
      }
      bool attention = false;
      if (auto* gat = dynamic_cast<nn::GATConv*>(c.module.get())) {
        // The attention weights on the edge_index form, in the input edges' order and then the
        // self-loops added; the script maps its own (PyG's) edge order onto these edges.
        NoGradGuard no_grad;
        const auto att = gat->forward_with_attention(x, ei);
        save_npy(dir.file(name + "__in_att_ei.npy"), att.edge_index);
        results.emplace_back(name + "__torch_alpha", att.alpha);
        attention = true;
      }
      manifest.push_back({{"name", name},
                          {"dtype", std::string(dtype_name(dt))},
                          {"ctor", c.ctor},
                          {"num_nodes", kNodes},
                          {"params", params},
                          {"weighted", c.weighted},
                          {"attention", attention}});
    }
  }
  std::ofstream(dir.file("manifest.json")) << manifest.dump(1);
  test::run_python_script("tests/nn/graph_parity.py", dir.path.string());
  for (const auto& [file, ours] : results) {
    REQUIRE(ours.defined());
    require_close(ours, load_npy(dir.file(file + ".npy")), ours.dtype() == kFloat32 ? 2e-5 : 1e-12, file);
  }
}

TEST_CASE("GCNConv, GraphConv, SAGEConv, GATConv: gradcheck in float64 with respect to x and every parameter",
          "[nn][graph]") {
  Generator gen(41);
  for (auto& c : make_cases(kFloat64)) {
    INFO("case " << c.name);
    randomize_parameters(*c.module, 78);
    const nn::Graph g = case_graph(c, kFloat64);
    Tensors inputs = {test::randn_leaf({kNodes, 5}, gen)};
    for (const Tensor& p : c.module->parameters()) inputs.push_back(p);
    const auto run = c.run;
    test::require_gradcheck([&g, run](const Tensors& in) { return run(in[0], g); }, inputs);
  }
  // Learned edge weights: the gradient reaches them through GCN's normalisation, GraphConv's sum
  // and SAGE's mean and sum (the edge_index forms, with edge_weight).
  nn::GCNConv conv(5, 3, true, true, true, kFloat64, 9);
  nn::GraphConv gconv(5, 3, true, kFloat64, 10);
  Tensor w = test::uniform_leaf({static_cast<std::int64_t>(kSrc.size())}, gen, 0.5, 2.0);
  const Tensor ei = edge_index(kSrc, kDst);
  test::require_gradcheck([&](const Tensors& in) { return conv(in[0], ei, in[1]); },
                          {test::randn_leaf({kNodes, 5}, gen), w});
  test::require_gradcheck([&](const Tensors& in) { return gconv(in[0], ei, in[1]); },
                          {test::randn_leaf({kNodes, 5}, gen), w});
  for (auto aggr : {graph::Aggregation::mean, graph::Aggregation::sum}) {
    nn::SAGEConv sage(5, 3, aggr, true, true, graph::Direction::both, kFloat64, 11);
    test::require_gradcheck(
        [&](const Tensors& in) { return sage(in[0], nn::Graph(graph::adjacency(ei, kNodes, in[1]))); },
        {test::randn_leaf({kNodes, 5}, gen), w});
  }
}

TEST_CASE("GCNConv, GraphConv, SAGEConv, GATConv: forward and backward are bit-identical at 1 and 2 threads",
          "[nn][graph][threads]") {
  Generator gen(51);
  const auto [src, dst] = random_edges(3000, 8, gen);
  const nn::Graph g(graph::adjacency(src, dst, 3000));
  const Tensor x0 = Tensor::randn({3000, 32}, gen);
  nn::GCNConv gcn(32, 16);
  nn::GraphConv gconv(32, 16);
  nn::SAGEConv sage(32, 16, graph::Aggregation::mean, true, true, graph::Direction::both);
  nn::SAGEConv sage_max(32, 16, graph::Aggregation::max, true, true, graph::Direction::both);
  nn::GATConv gat(32, 8, 4, true, 0.2, 0.3);  // attention dropout on: the masks too
  for (nn::Module* m : std::vector<nn::Module*>{&gcn, &gconv, &sage, &sage_max, &gat}) {
    INFO(m->type_name());
    test::require_thread_deterministic([&] {
      Tensor x = x0.detach().clone_data();
      x.set_requires_grad();
      m->zero_grad();
      gat.generator().manual_seed(3);
      const Tensor out = m == &gcn        ? gcn(x, g)
                         : m == &gconv    ? gconv(x, g)
                         : m == &sage     ? sage(x, g)
                         : m == &sage_max ? sage_max(x, g)
                                          : gat(x, g);
      sum(mul(out, out)).backward();
      Tensors result = {out.detach(), x.grad()};
      for (const Tensor& p : m->parameters()) result.push_back(p.grad());
      return result;
    });
  }
}

TEST_CASE("graph layers on degenerate graphs: no nodes, no edges, isolated nodes", "[nn][graph]") {
  nn::GCNConv gcn(3, 2, true, true, true, kFloat64);
  nn::GraphConv gconv(3, 2, true, kFloat64);
  nn::SAGEConv sage(3, 2, graph::Aggregation::mean, true, true, graph::Direction::both, kFloat64);
  nn::SAGEConv sage_max(3, 2, graph::Aggregation::max, true, true, graph::Direction::both, kFloat64);
  nn::GATConv gat(3, 2, 2, true, 0.2, 0.0, true, true, kFloat64);
  nn::GATConv gat_no_loops(3, 2, 2, false, 0.2, 0.0, false, true, kFloat64);
  for (nn::Module* m : std::vector<nn::Module*>{&gcn, &gconv, &sage, &sage_max, &gat, &gat_no_loops})
    randomize_parameters(*m, 4);
  Generator gen(61);
  for (std::int64_t n : {0, 4}) {
    INFO("nodes " << n);
    const nn::Graph g(graph::adjacency(std::vector<std::int64_t>{}, {}, n, kFloat64));
    Tensor x = test::randn_leaf({n, 3}, gen);
    const Tensor lin_x = gcn.lin()->forward(x);
    // No edges: GCN is X W^T + b (each node its own neighbour, degree 1); GraphConv and SAGE (mean
    // and max: 0 without neighbours) the root term + b; GAT with self-loops attends to itself only
    // (α = 1): h + b; without, b alone.
    require_close(gcn(x, g), add(lin_x, gcn.bias()), 1e-14, "GCNConv");
    require_close(gconv(x, g), add(gconv.lin_root()->forward(x), gconv.lin_rel()->bias()), 1e-14, "GraphConv");
    require_close(sage(x, g), add(sage.lin_r()->forward(x), sage.lin_l()->bias()), 1e-14, "SAGEConv");
    require_close(sage_max(x, g), add(sage_max.lin_r()->forward(x), sage_max.lin_l()->bias()), 1e-14, "SAGEConv max");
    require_close(gat(x, g), add(gat.lin()->forward(x), gat.bias()), 1e-14, "GATConv");
    require_close(gat_no_loops(x, g), expand(reshape(gat_no_loops.bias(), {1, 2}), {n, 2}), 1e-14,
                  "GATConv without self-loops");
    Tensor loss = add(add(add(sum(gcn(x, g)), sum(sage(x, g))), add(sum(gat(x, g)), sum(gat_no_loops(x, g)))),
                      add(sum(gconv(x, g)), sum(sage_max(x, g))));
    loss.backward();
    CHECK(x.grad().shape() == Shape{n, 3});
  }
}

TEST_CASE("graph layers train: a two-layer network's loss falls on a two-community graph", "[nn][graph]") {
  // 40 nodes in two communities (dense inside, a few edges across), labels = community, features
  // noisy so that a node alone is often misclassified.
  Generator gen(71);
  std::vector<std::int64_t> src, dst, labels;
  const std::int64_t n = 40;
  for (std::int64_t e = 0; e < 240; ++e) {
    const std::int64_t a = static_cast<std::int64_t>(gen.next_u64() % n);
    std::int64_t b = static_cast<std::int64_t>(gen.next_u64() % (n / 2)) + (a < n / 2 ? 0 : n / 2);
    if (e % 12 == 0) b = (b + n / 2) % n;  // a cross edge
    src.push_back(a);
    dst.push_back(b);
  }
  std::vector<double> xf;
  for (std::int64_t i = 0; i < n; ++i) {
    labels.push_back(i < n / 2 ? 0 : 1);
    for (int f = 0; f < 4; ++f) xf.push_back((f == 0 ? (i < n / 2 ? 0.5 : -0.5) : 0.0) + gen.normal());
  }
  const nn::Graph g(graph::adjacency(src, dst, n));
  const Tensor x = Tensor::from_vector(xf, {n, 4});
  const auto train = [&](const std::string& kind) {
    nn::Module net("Net");
    std::function<Tensor(const Tensor&)> forward;
    if (kind == "GCNConv") {
      auto a = net.register_module("l1", std::make_shared<nn::GCNConv>(4, 8));
      auto b = net.register_module("l2", std::make_shared<nn::GCNConv>(8, 2, true, true, true, kFloat32, 1));
      forward = [a, b, &g](const Tensor& in) { return (*b)(relu((*a)(in, g)), g); };
    } else if (kind == "GraphConv") {
      auto a = net.register_module("l1", std::make_shared<nn::GraphConv>(4, 8, true, kFloat32, 2));
      auto b = net.register_module("l2", std::make_shared<nn::GraphConv>(8, 2, true, kFloat32, 3));
      forward = [a, b, &g](const Tensor& in) { return (*b)(relu((*a)(in, g)), g); };
    } else if (kind == "SAGEConv") {
      auto a = net.register_module("l1", std::make_shared<nn::SAGEConv>(4, 8));
      auto b = net.register_module(
          "l2", std::make_shared<nn::SAGEConv>(8, 2, graph::Aggregation::max, true, true, graph::Direction::both));
      forward = [a, b, &g](const Tensor& in) { return (*b)(relu((*a)(in, g)), g); };
    } else {
      auto a = net.register_module("l1", std::make_shared<nn::GATConv>(4, 4, 2, true, 0.2, 0.1));
      auto b =
          net.register_module("l2", std::make_shared<nn::GATConv>(8, 2, 1, true, 0.2, 0.0, true, true, kFloat32, 1));
      forward = [a, b, &g](const Tensor& in) { return (*b)(relu((*a)(in, g)), g); };
    }
    nn::Adam opt(net.parameters(), nn::AdamOptions(0.05));
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      opt.zero_grad();
      const Tensor loss = cross_entropy(forward(x), labels);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item();
    }
    INFO(kind << ": loss " << first << " -> " << last);
    CHECK(std::isfinite(last));
    CHECK(last < 0.5 * first);
  };
  for (const std::string kind : {"GCNConv", "GraphConv", "SAGEConv", "GATConv"}) train(kind);
}

// ---- module plumbing -------------------------------------------------------------------------------

TEST_CASE("graph layers: PyG's parameter names and init, state_dict round trip, repr", "[nn][graph]") {
  nn::GCNConv gcn(16, 32);
  nn::GraphConv gconv(16, 32, false);
  nn::SAGEConv sage(16, 32, graph::Aggregation::mean, true, true, graph::Direction::both);
  nn::GATConv gat(16, 8, 4);
  const auto names = [](const nn::Module& m) {
    std::vector<std::string> v;
    for (const auto& [n, p] : m.named_parameters()) v.push_back(n);
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(names(gcn) == std::vector<std::string>{"bias", "lin.weight"});
  CHECK(names(gconv) == std::vector<std::string>{"lin_rel.weight", "lin_root.weight"});
  CHECK(names(nn::GraphConv(4, 2)) == std::vector<std::string>{"lin_rel.bias", "lin_rel.weight", "lin_root.weight"});
  CHECK(names(sage) == std::vector<std::string>{"lin_l.bias", "lin_l.weight", "lin_r.weight", "lin_rev.weight"});
  CHECK(names(nn::SAGEConv(4, 2, graph::Aggregation::mean, false, false)) == std::vector<std::string>{"lin_l.weight"});
  CHECK(names(gat) == std::vector<std::string>{"att_dst", "att_src", "bias", "lin.weight"});
  CHECK(gat.att_src().shape() == Shape{1, 4, 8});
  CHECK(gat.bias().shape() == Shape{32});
  CHECK(nn::GATConv(16, 8, 4, false).bias().shape() == Shape{8});

  // Init: glorot weights (bound sqrt(6 / (fan_in + fan_out)); PyG's glorot on att: last two sizes),
  // zero biases.
  const auto within = [](const Tensor& t, double bound) {
    const double m = max_abs(t);
    return m <= bound && m > 0.8 * bound;
  };
  CHECK(within(gcn.lin()->weight(), std::sqrt(6.0 / 48)));
  CHECK(within(gat.lin()->weight(), std::sqrt(6.0 / 48)));
  CHECK(within(gat.att_src(), std::sqrt(6.0 / 12)));
  CHECK(within(gat.att_dst(), std::sqrt(6.0 / 12)));
  CHECK(max_abs(gcn.bias()) == 0);
  CHECK(max_abs(gat.bias()) == 0);
  CHECK(within(sage.lin_l()->weight(), 1.0 / std::sqrt(16.0)));  // Linear's kaiming_uniform(a = sqrt(5))
  CHECK(within(gconv.lin_rel()->weight(), 1.0 / std::sqrt(16.0)));
  CHECK(within(gconv.lin_root()->weight(), 1.0 / std::sqrt(16.0)));

  // state_dict round trip: a layer with other parameters gives the same output after loading.
  const nn::Graph g(graph::adjacency(kSrc, kDst, kNodes));
  Generator gen(81);
  const Tensor x = Tensor::randn({kNodes, 16}, gen);
  nn::GATConv other(16, 8, 4, true, 0.2, 0.0, true, true, kFloat32, 99);
  randomize_parameters(gat, 5);
  CHECK_FALSE(bit_equal(other(x, g), gat(x, g)));
  nn::load_state_dict(other, nn::state_dict(gat));
  CHECK(bit_equal(other(x, g), gat(x, g)));
  nn::SAGEConv sage2(16, 32, graph::Aggregation::mean, true, true, graph::Direction::both, kFloat32, 7);
  nn::load_state_dict(sage2, nn::state_dict(sage));
  CHECK(bit_equal(sage2(x, g), sage(x, g)));

  std::ostringstream s;
  s << gcn << "\n"
    << nn::SAGEConv(4, 2, graph::Aggregation::mean, true, true, graph::Direction::out) << "\n"
    << gat << "\n"
    << nn::GraphConv(4, 2) << "\n"
    << nn::SAGEConv(4, 2, graph::Aggregation::sum, true, false) << "\n"
    << nn::SAGEConv(4, 2, graph::Aggregation::max, true, false);
  CHECK(s.str() ==
        "GCNConv(\n  16, 32\n  (lin): Linear(in_features=16, out_features=32, bias=False)\n)\n"
        "SAGEConv(\n  4, 2, aggr=mean, direction=out\n"
        "  (lin_l): Linear(in_features=4, out_features=2, bias=True)\n"
        "  (lin_r): Linear(in_features=4, out_features=2, bias=False)\n)\n"
        "GATConv(\n  16, 8, heads=4\n  (lin): Linear(in_features=16, out_features=32, bias=False)\n)\n"
        "GraphConv(\n  4, 2\n  (lin_rel): Linear(in_features=4, out_features=2, bias=True)\n"
        "  (lin_root): Linear(in_features=4, out_features=2, bias=False)\n)\n"
        "SAGEConv(\n  4, 2, aggr=sum\n  (lin_l): Linear(in_features=4, out_features=2, bias=True)\n)\n"
        "SAGEConv(\n  4, 2, aggr=max\n  (lin_l): Linear(in_features=4, out_features=2, bias=True)\n)");
}

TEST_CASE("GATConv: attention coefficients sum to 1 over each node's in-edges, dropout in training only",
          "[nn][graph]") {
  const nn::Graph g(graph::adjacency(kSrcUnique, kDstUnique, kNodes));
  Generator gen(91);
  const Tensor x = Tensor::randn({kNodes, 5}, gen);
  nn::GATConv gat(5, 3, 2, true, 0.2, 0.5);
  gat.eval();
  const Tensor alpha = gat.forward_with_attention(x, g).alpha;
  const SparseCsr loops = g.with_self_loops();
  CHECK(alpha.shape() == Shape{loops.nnz(), 2});
  const Tensor per_node = segment_sum(alpha, loops.crow_indices());
  for (double v : per_node.to_vector()) CHECK(v == Approx(1.0).epsilon(1e-6));
  gat.train();
  const Tensor dropped = gat.forward_with_attention(x, g).alpha;
  std::int64_t zeros = 0;
  for (double v : dropped.to_vector()) zeros += v == 0.0;
  CHECK(zeros > 0);
  CHECK(zeros < dropped.numel());
}

TEST_CASE("graph layers and utilities: bad inputs raise xgrad::Error naming the function and the values",
          "[nn][graph][errors]") {
  const nn::Graph g(graph::adjacency(kSrc, kDst, kNodes));
  nn::GCNConv gcn(5, 3);
  nn::SAGEConv sage(5, 3);
  nn::GATConv gat(5, 3, 2);
  test::require_error([&] { gcn(Tensor::zeros({kNodes, 4}), g); }, {"GCNConv", "'x'", "(7, 4)", "in_channels = 5"});
  test::require_error([&] { sage(Tensor::zeros({6, 5}), g); }, {"SAGEConv", "'x'", "6 rows", "num_nodes = 7"});
  test::require_error([&] { gat(Tensor::zeros({kNodes, 5}, kFloat64), g); }, {"GATConv", "'x'", "float64", "float32"});
  test::require_error([&] { gat(Tensor::zeros({5}), g); }, {"GATConv", "'x'", "(5,)"});
  test::require_error([&] { gcn(Tensor(), g); }, {"GCNConv", "'x'", "undefined"});
  // Sparse features and edge_index inputs: the errors name the layer.
  const SparseCsr xs = to_sparse_csr(Tensor::ones({kNodes, 4}));
  test::require_error([&] { gcn(xs, g); }, {"GCNConv", "'x'", "(7, 4)", "in_channels = 5"});
  nn::SAGEConv sage_max(5, 3, graph::Aggregation::max);
  test::require_error(
      [&] {
        sage_max(to_sparse_csr(Tensor::ones({kNodes, 5})), g);
      },
      {"SAGEConv", "'x'", "SparseCsr", "Aggregation::max"});
  const Tensor x = Tensor::zeros({kNodes, 5});
  test::require_error([&] { sage(x, Tensor::zeros({3, 2}, kInt64)); }, {"SAGEConv", "'edge_index'", "(3, 2)"});
  test::require_error([&] { gat(x, edge_index({0, 1}, {1, 7})); }, {"GATConv", "edge 1", "1 -> 7", "num_nodes = 7"});
  test::require_error(
      [&] {
        gcn(x, edge_index({0, 1}, {1, 2}), Tensor::ones({3}));
      },
      {"GCNConv", "'edge_weight'", "(3,)", "(2,)"});
  test::require_error([&] { nn::GraphConv(5, 3)(x, Tensor::zeros({2, 2})); }, {"GraphConv", "'edge_index'", "float32"});
  test::require_error([] { nn::GATConv bad(5, 3, 0); }, {"GATConv", "'heads'", "0"});
  test::require_error([] { nn::GATConv bad(5, 3, 1, true, 0.2, 1.5); }, {"GATConv", "'dropout'", "1.5"});
  test::require_error([] { nn::GATConv bad(5, 3, 1, true, std::nan("")); }, {"GATConv", "'negative_slope'", "nan"});
  test::require_error([] { nn::GCNConv bad(-1, 3); }, {"GCNConv", "in = -1"});
  test::require_error([] { nn::GraphConv bad(2, -1); }, {"GraphConv", "out = -1"});
  test::require_error([] { nn::SAGEConv bad(2, -3); }, {"SAGEConv", "out = -3"});
  // An integer adjacency: the degree and normalisation functions name themselves, not the ops inside.
  const SparseCsr int_adj = sparse_coo_tensor(edge_index({0, 1}, {1, 2}), Tensor::ones({2}, kInt64), {3, 3});
  test::require_error([&] { graph::in_degree(int_adj); }, {"graph::in_degree", "'adj.values'", "int64"});
  test::require_error([&] { graph::out_degree(int_adj); }, {"graph::out_degree", "'adj.values'", "int64"});
  test::require_error([&] { graph::gcn_norm(int_adj); }, {"graph::gcn_norm", "'adj.values'", "int64"});
  test::require_error([&] { graph::mean_norm(int_adj); }, {"graph::mean_norm", "'adj.values'", "int64"});

  test::require_error(
      [] {
        graph::adjacency({0, 1}, {1, 7}, 7);
      },
      {"graph::adjacency", "edge 1", "1 -> 7", "num_nodes = 7"});
  test::require_error([] { graph::adjacency({-1}, {0}, 3); }, {"graph::adjacency", "-1 -> 0"});
  test::require_error([] { graph::adjacency({0, 1}, {1}, 3); }, {"graph::adjacency", "2 edges", "1"});
  test::require_error([] { graph::adjacency(std::vector<std::int64_t>{}, {}, -2); },
                      {"graph::adjacency", "num_nodes", "-2"});
  test::require_error(
      [] {
        graph::adjacency(Tensor::zeros({3, 2}, kInt64), 3);
      },
      {"graph::adjacency", "'edge_index'", "(3, 2)"});
  test::require_error(
      [] {
        graph::adjacency(Tensor::zeros({2, 2}), 3);
      },
      {"graph::adjacency", "'edge_index'", "float32"});
  test::require_error(
      [] {
        graph::adjacency(edge_index({0, 1}, {1, 2}), 3, Tensor::ones({3}));
      },
      {"graph::adjacency", "'edge_weight'", "(3,)", "(2,)"});
  const SparseCsr rect = to_sparse_csr(Tensor::ones({2, 3}));
  test::require_error([&] { nn::Graph bad(rect); }, {"Graph", "square", "rows=2, cols=3"});
  test::require_error([&] { graph::gcn_norm(rect); }, {"graph::gcn_norm", "square"});
  test::require_error([&] { graph::add_remaining_self_loops(rect); }, {"graph::add_remaining_self_loops", "square"});
  test::require_error([&] { g.mean_norm(graph::Direction::both); }, {"Graph::mean_norm", "'direction'"});
}

TEST_CASE("graph layers and graph::adjacency refuse sizes that overflow or exceed memory, before allocating",
          "[nn][graph][errors]") {
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  // heads · out_channels fits, the three (H·C) vectors do not (and H + C, PyG's glorot bound, overflows).
  test::require_error([] { nn::GATConv bad(0, 1, big); }, {"GATConv", "heads * out_channels", "overflows int64"});
  test::require_error([] { nn::GATConv bad(1 << 20, 1 << 20, 1 << 10); }, {"GATConv", "bytes"});
  test::require_error([] { nn::SAGEConv bad(big, 2); }, {"SAGEConv", "in_channels * out_channels", "overflows int64"});
  test::require_error([] { nn::GCNConv bad(1 << 30, 1 << 30); }, {"GCNConv", "bytes", "memory"});
  test::require_error([] { nn::GraphConv bad(std::int64_t{1} << 40, 1 << 20); }, {"GraphConv", "bytes"});
  // The row offsets of an adjacency with num_nodes nodes are num_nodes + 1 int64s.
  const Tensor ei = edge_index({0}, {1});
  test::require_error([&] { graph::adjacency(ei, big); }, {"graph::adjacency", "'num_nodes'", "overflows int64"});
  test::require_error([&] { graph::adjacency(ei, big, Tensor::ones({1})); }, {"graph::adjacency", "'num_nodes'"});
  test::require_error([] { graph::adjacency({0}, {1}, big); }, {"graph::adjacency", "'num_nodes'"});
  test::require_error([&] { graph::adjacency(ei, std::int64_t{1} << 50); },
                      {"graph::adjacency", "'num_nodes'", "memory"});
}

// ---- sparse features, edge_index inputs, attention in edge order -----------------------------------

TEST_CASE("graph layers take SparseCsr features: the values and gradients of the same dense features",
          "[nn][graph][sparse]") {
  Generator gen(101);
  for (auto& c : make_cases(kFloat64)) {
    if (!c.takes_sparse) continue;
    INFO("case " << c.name);
    randomize_parameters(*c.module, 79);
    const nn::Graph g = case_graph(c, kFloat64);
    // About half the entries zero, as a bag of words has.
    const Tensor dense_x = mul(Tensor::randn({kNodes, 5}, gen, kFloat64),
                               gt(Tensor::randn({kNodes, 5}, gen, kFloat64), Tensor::zeros({1}, kFloat64)));
    Tensor xd = dense_x.clone_data();
    xd.set_requires_grad();
    const SparseCsr pattern = to_sparse_csr(dense_x);
    Tensor values = pattern.values().detach().clone_data();
    values.set_requires_grad();
    const SparseCsr xs = pattern.with_values(values);
    const Tensor seed = Tensor::randn({kNodes, c.run(xd, g).size(1)}, gen, kFloat64);

    c.module->zero_grad();
    const Tensor out_d = c.run(xd, g);
    sum(mul(out_d, seed)).backward();
    Tensors grads_d;
    for (const Tensor& p : c.module->parameters()) grads_d.push_back(p.grad().clone_data());
    c.module->zero_grad();
    const Tensor out_s = c.run(xs, g);
    sum(mul(out_s, seed)).backward();
    require_close(out_s, out_d, 1e-13, "out");
    std::size_t i = 0;
    for (const Tensor& p : c.module->parameters()) require_close(p.grad(), grads_d[i++], 1e-13, "parameter gradient");
    // x's gradient at the stored entries: the dense gradient read there.
    const Tensor flat = add(mul(Tensor::from_vector(pattern_rows(pattern), {pattern.nnz()}), 5), pattern.col_indices());
    require_close(values.grad(), index_select(reshape(xd.grad(), {kNodes * 5}), 0, flat), 1e-13, "x's gradient");
  }
}

TEST_CASE("graph layers take an edge_index (2, E): the same bits as on the nn::Graph it makes", "[nn][graph]") {
  Generator gen(111);
  for (auto& c : make_cases(kFloat64)) {
    if (c.weighted) continue;
    INFO("case " << c.name);
    const Tensor x = Tensor::randn({kNodes, 5}, gen, kFloat64);
    CHECK(bit_equal(c.run_edge_index(x, case_edges(c)), c.run(x, case_graph(c, kFloat64))));
    CHECK(bit_equal(c.run_edge_index(x, case_edges(c).to(kInt32)), c.run(x, case_graph(c, kFloat64))));
    if (c.takes_sparse) {
      const SparseCsr xs = to_sparse_csr(x);
      CHECK(bit_equal(c.run_edge_index(xs, case_edges(c)), c.run(xs, case_graph(c, kFloat64))));
    }
  }
  // With edge weights (PyG's edge_weight of GCNConv and GraphConv).
  const Tensor x = Tensor::randn({kNodes, 5}, gen);
  const Tensor w = edge_weights(kFloat32), ei = edge_index(kSrc, kDst);
  const nn::Graph weighted(graph::adjacency(ei, kNodes, w));
  nn::GCNConv gcn(5, 3);
  nn::GraphConv gconv(5, 3);
  CHECK(bit_equal(gcn(x, ei, w), gcn(x, weighted)));
  CHECK(bit_equal(gconv(x, ei, w), gconv(x, weighted)));
  CHECK_FALSE(bit_equal(gconv(x, ei, w), gconv(x, ei)));
}

TEST_CASE("GATConv::forward_with_attention on an edge_index: α in the input edges' order, then the self-loops added",
          "[nn][graph]") {
  Generator gen(121);
  const Tensor x = Tensor::randn({kNodes, 5}, gen, kFloat64);
  const Tensor ei = edge_index(kSrc, kDst);  // 1 -> 2 given twice, a self-loop 3 -> 3
  const nn::Graph g(graph::adjacency(ei, kNodes, kFloat64));
  for (bool loops : {true, false}) {
    INFO("add_self_loops " << loops);
    nn::GATConv gat(5, 3, 2, true, 0.2, 0.0, loops, true, kFloat64, 5);
    const auto by_graph = gat.forward_with_attention(x, g);
    const auto by_edges = gat.forward_with_attention(x, ei);
    CHECK(bit_equal(by_graph.out, by_edges.out));
    // The pattern form lists the entries attended over (sources, then targets).
    const SparseCsr attended = loops ? g.with_self_loops() : g.adjacency();
    CHECK(by_graph.edge_index.shape() == Shape{2, attended.nnz()});
    CHECK(by_graph.alpha.shape() == Shape{attended.nnz(), 2});
    // The edge_index form: the input edges, then (i, i) for every node without a self-loop.
    std::vector<std::int64_t> src = kSrc, dst = kDst;
    if (loops)
      for (std::int64_t i : {0, 1, 2, 4, 5, 6}) {
        src.push_back(i);
        dst.push_back(i);
      }
    CHECK(bit_equal(by_edges.edge_index, edge_index(src, dst)));
    REQUIRE(by_edges.alpha.shape() == Shape{static_cast<std::int64_t>(src.size()), 2});
    // Each edge's α is its pattern entry's (both copies of 1 -> 2 share one).
    const std::vector<double> pe = by_graph.edge_index.to_vector(), pa = by_graph.alpha.to_vector(),
                              ea = by_edges.alpha.to_vector();
    for (std::size_t e = 0; e < src.size(); ++e) {
      std::size_t k = 0;
      while (k < pa.size() / 2 && (pe[k] != static_cast<double>(src[e]) ||
                                   pe[k + static_cast<std::size_t>(attended.nnz())] != static_cast<double>(dst[e])))
        ++k;
      REQUIRE(k < pa.size() / 2);
      for (std::size_t h = 0; h < 2; ++h) CHECK(ea[2 * e + h] == pa[2 * k + h]);
    }
    // α is differentiable: its gradient reaches the attention vectors.
    gat.zero_grad();
    sum(mul(by_edges.alpha, Tensor::randn(by_edges.alpha.shape(), gen, kFloat64))).backward();
    CHECK(max_abs(gat.att_src().grad()) > 0);
  }
}

// ---- init from the default generator ---------------------------------------------------------------

TEST_CASE(
    "graph layers built without a Generator or seed draw from the default generator, and manual_seed repeats them",
    "[nn][graph][random]") {
  const auto build = [] {
    return std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::GCNConv>(8, 8),    std::make_shared<nn::GCNConv>(8, 8),
        std::make_shared<nn::GraphConv>(8, 8),  std::make_shared<nn::GraphConv>(8, 8),
        std::make_shared<nn::SAGEConv>(8, 8),   std::make_shared<nn::SAGEConv>(8, 8),
        std::make_shared<nn::GATConv>(8, 8, 2), std::make_shared<nn::GATConv>(8, 8, 2)};
  };
  const auto same = [](const nn::Module& a, const nn::Module& b) {
    const auto pa = a.parameters(), pb = b.parameters();
    for (std::size_t i = 0; i < pa.size(); ++i)
      if (!bit_equal(pa[i], pb[i])) return false;
    return pa.size() == pb.size();
  };
  manual_seed(123);
  const auto first = build();
  for (std::size_t i = 0; i < first.size(); i += 2) {
    INFO(first[i]->type_name());
    CHECK_FALSE(same(*first[i], *first[i + 1]));  // one after the other: different draws
  }
  manual_seed(123);
  const auto again = build();
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO(first[i]->type_name());
    CHECK(same(*first[i], *again[i]));
  }

  // A seed is a Generator of its own, the same as passing Generator(seed); neither touches the default one.
  manual_seed(9);
  const double next = default_generator().uniform();
  manual_seed(9);
  Generator g5(5), g6(5), g7(5), g8(5);
  CHECK(same(nn::GCNConv(8, 8, g5), nn::GCNConv(8, 8, true, true, true, kFloat32, 5)));
  CHECK(same(nn::GraphConv(8, 8, g6), nn::GraphConv(8, 8, true, kFloat32, 5)));
  CHECK(same(nn::SAGEConv(8, 8, g7),
             nn::SAGEConv(8, 8, graph::Aggregation::mean, true, true, graph::Direction::in, kFloat32, 5)));
  CHECK(same(nn::GATConv(8, 8, g8, 2), nn::GATConv(8, 8, 2, true, 0.2, 0.0, true, true, kFloat32, 5)));
  CHECK(default_generator().uniform() == next);

  // GATConv's attention dropout without a seed: masks from the default generator at each forward.
  const nn::Graph g(graph::adjacency(kSrcUnique, kDstUnique, kNodes));
  Generator gen(131);
  const Tensor x = Tensor::randn({kNodes, 8}, gen);
  nn::GATConv gat(8, 4, 2, true, 0.2, 0.5);
  manual_seed(7);
  const Tensor a = gat(x, g), b = gat(x, g);
  manual_seed(7);
  CHECK(bit_equal(gat(x, g), a));
  CHECK_FALSE(bit_equal(a, b));
}
