#pragma once
// Graph neural network layers and the graph utilities they use: adjacency matrices in CSR form
// (ops/sparse.hpp), their normalisations, and four message-passing layers with PyTorch Geometric's
// names, semantics and parameter names (GCNConv, GraphConv, SAGEConv, GATConv). The user guide is
// the section "Graph layers" of docs/sparse.md.
//
//   const Tensor edge_index = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 1, 2}, {2, 2});  // 0->1, 1->2
//   nn::Graph g(nn::graph::adjacency(edge_index, 3));   // normalisations cached inside
//   nn::GCNConv conv(16, 32);
//   Tensor y = conv(x, g);                               // x (3, 16) dense or SparseCsr -> (3, 32)
//   Tensor z = conv(x, edge_index);                      // the same, the graph built on each call
//
// Note [Graph convention]: messages flow from source to target (PyG's flow "source_to_target").
// An edge_index is (2, E): row 0 the sources, row 1 the targets. The adjacency matrix A is
// (num_nodes x num_nodes) with A[dst, src] = the edge's weight, so row i holds the in-neighbours of
// node i and spmm(A, X)[i] = Σ_{j -> i} w_ji X[j]: aggregation is one spmm. Aᵀ (reverse) is the
// graph with every edge turned round: its rows hold the out-neighbours.
//
// Note [Graph caches]: a Graph holds an adjacency and computes each normalised form (gcn_norm,
// mean_norm in either direction, the self-loop pattern) on first use, then returns that copy to
// every later call and every layer it is passed to, from any thread; the SparseCsr copies share the
// pattern and so its cached transpose, which the backward passes use. A training loop on a fixed
// graph normalises it once. When the adjacency's values require grad (learned edge weights), each
// call computes its normalisation again, so that the gradient reaches the weights in every step.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::nn {

struct Block;  // nn/sampler.hpp

namespace graph {

/// What the constructors do with an edge given more than once.
enum class Duplicates {
  sum,    ///< one entry whose weight is the sum of the repeated edges' weights (PyG's coalesce)
  error,  ///< an xgrad::Error naming the first repeated edge
};

/// Which neighbours a node aggregates (Note [Graph convention]): its in-neighbours (the sources of
/// its incoming edges; A's rows), its out-neighbours (the targets of its outgoing edges; Aᵀ's rows),
/// or both, each with its own weights.
enum class Direction { in, out, both };

/// How SAGEConv combines a node's neighbours' features (PyG's aggr "mean", "sum", "max").
enum class Aggregation { mean, sum, max };

/// The (num_nodes x num_nodes) adjacency matrix A[dst, src] = weight of the edge src -> dst, from an
/// edge_index (2, E) (int64 or int32; row 0 sources, row 1 targets, as PyG), with weights 1 of
/// `dtype` (float32 or float64). Edges in any order. With Duplicates::sum a repeated edge is one
/// entry with the summed weight. Errors (naming graph::adjacency): edge_index not (2, E), an index
/// outside [0, num_nodes), num_nodes < 0 or too large for the row offsets (num_nodes + 1 int64s)
/// to fit in memory, dtype not floating point, a repeated edge under Duplicates::error.
SparseCsr adjacency(const Tensor& edge_index, std::int64_t num_nodes, Dtype dtype = kFloat32,
                    Duplicates duplicates = Duplicates::sum);
/// The same with edge weights (E,), float32 or float64, whose dtype A takes (undefined: weights 1,
/// float32). A repeated edge's entry is differentiable with respect to edge_weight
/// (sparse_coo_tensor's index_add). Errors also: edge_weight not (E,) or not floating point.
SparseCsr adjacency(const Tensor& edge_index, std::int64_t num_nodes, const Tensor& edge_weight,
                    Duplicates duplicates = Duplicates::sum);
/// The same from two index lists, edge e = src[e] -> dst[e], with weights 1. Errors: as above, and
/// src and dst of different lengths.
SparseCsr adjacency(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst, std::int64_t num_nodes,
                    Dtype dtype = kFloat32, Duplicates duplicates = Duplicates::sum);

/// PyG's add_remaining_self_loops: A with the entry (i, i) added, of weight fill_value, for every
/// node i that has no self-loop; existing self-loops keep their weight. The values are
/// differentiable (the old ones are placed by index_add). Returns `adj` itself when every node has a
/// self-loop. Errors: A not square.
SparseCsr add_remaining_self_loops(const SparseCsr& adj, double fill_value = 1.0);

/// The weighted in-degree of each node, deg_in[i] = Σ_j A[i, j] (A's row sums; the number of
/// incoming edges when the weights are ones), a (num_nodes,) tensor of A's dtype, differentiable
/// with respect to A's values (segment_sum). Errors: A not square.
Tensor in_degree(const SparseCsr& adj);
/// The weighted out-degree, deg_out[j] = Σ_i A[i, j] (A's column sums: in_degree of Aᵀ).
Tensor out_degree(const SparseCsr& adj);

/// GCN's normalisation (PyG's gcn_norm): Â = D^-1/2 Ã D^-1/2 with Ã = add_remaining_self_loops(A)
/// (or A when !add_self_loops) and D = diag(in_degree(Ã)); a node of degree 0 contributes 0 (PyG
/// sets its inf to 0). Same pattern as Ã; differentiable with respect to A's values. Errors: A not
/// square.
SparseCsr gcn_norm(const SparseCsr& adj, bool add_self_loops = true);
/// Mean aggregation: D^-1 A with D = diag(in_degree(A)), so spmm(mean_norm(A), X)[i] is the
/// (weighted) mean of node i's in-neighbours' rows, and 0 for a node without in-neighbours (as PyG's
/// scatter mean). Differentiable with respect to A's values. Errors: A not square.
SparseCsr mean_norm(const SparseCsr& adj);
/// The reversed graph, every edge src -> dst turned into dst -> src: Aᵀ (SparseCsr::t(), from A's
/// cached transposed pattern). Its rows hold out-neighbours.
SparseCsr reverse(const SparseCsr& adj);

}  // namespace graph

/// A graph for the layers: its adjacency (Note [Graph convention]) and the normalised forms the
/// layers use, each computed once and shared (Note [Graph caches]). A cheap handle: copies share
/// the adjacency and the caches. The layers refuse node features whose rows are not num_nodes or
/// whose dtype is not the adjacency's.
class Graph {
 public:
  /// The graph with no nodes.
  Graph();
  /// Takes the adjacency A[dst, src] (e.g. from graph::adjacency). Errors: undefined or not square.
  explicit Graph(SparseCsr adjacency);

  std::int64_t num_nodes() const;
  /// The stored entries of the adjacency (repeated edges counted once).
  std::int64_t num_edges() const;
  Dtype dtype() const;
  const SparseCsr& adjacency() const;
  /// The graph with every edge reversed (graph::reverse), with caches of its own.
  Graph reverse() const;

  /// graph::gcn_norm(adjacency(), add_self_loops), cached.
  SparseCsr gcn_norm(bool add_self_loops = true) const;
  /// graph::mean_norm of the adjacency (Direction::in) or of its reverse (Direction::out), cached.
  /// Errors: Direction::both (two matrices: ask for each).
  SparseCsr mean_norm(graph::Direction direction = graph::Direction::in) const;
  /// graph::add_remaining_self_loops(adjacency()), cached (the pattern GATConv attends over).
  SparseCsr with_self_loops() const;

  struct Impl;

 private:
  explicit Graph(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

/// Node features for the graph layers: a dense (N, F) tensor, or a sparse (N, F) SparseCsr (e.g. a
/// bag of words too wide to be dense). Converts implicitly from either, so each layer's forward
/// takes both. On sparse features a layer multiplies by its weights first (xgrad::linear on the
/// SparseCsr) and aggregates the dense (N, out) result: the same function wherever the aggregation
/// is linear in the features (every one but SAGEConv's max, which refuses sparse features).
class NodeFeatures {
 public:
  NodeFeatures(Tensor x) : dense_(std::move(x)) {}      // NOLINT(google-explicit-constructor): conv(x, graph)
  NodeFeatures(SparseCsr x) : sparse_(std::move(x)) {}  // NOLINT(google-explicit-constructor)
  bool is_sparse() const { return sparse_.defined(); }
  const Tensor& dense() const { return dense_; }
  const SparseCsr& sparse() const { return sparse_; }

 private:
  Tensor dense_;
  SparseCsr sparse_;
};

// Note [Graph layer forms]: each layer's forward takes node features (NodeFeatures: dense or
// sparse) and either an nn::Graph (its normalisations cached across calls: Note [Graph caches]) or
// an edge_index (2, E), int64 or int32, row 0 the sources and row 1 the targets (PyG's), from which
// it builds the graph on every call (graph::adjacency with num_nodes = x's rows, repeated edges
// summed). Errors name the layer: x not (num_nodes, in_channels) or of another dtype than the
// graph, an edge_index not (2, E) or with a node outside [0, N).
//
// Note [Layers on blocks]: forward(x, block) runs a layer on one bipartite block of a sampled
// minibatch (nn/sampler.hpp, Note [Blocks]): x holds the features of the block's num_src source
// nodes, whose first num_dst rows are the targets' (x_dst = x[:num_dst]), and the result has a row
// per target. Each layer computes its full-graph formula with the target's sampled neighbours in
// place of all of them: GraphConv and SAGEConv's sum add the sampled edges' values, SAGEConv's mean
// divides by their sum (the mean over the sample) and its max takes the sampled rows; GATConv attends
// over the sampled edges plus each target's self-loop (when add_self_loops and the sample has none);
// GCNConv adds the same self-loops and weights edge j -> i by (d_i d_j)^-1/2 with the full graph's
// degrees (Block::src_degree_loops, or src_degree without self-loops), not the sample's. So a target
// whose whole neighbourhood was sampled (fan-out -1) gets its full-graph output, up to the order of
// the sums. A block sampled with Direction::out is the reversed graph's block (the layers aggregate
// out-neighbours, as on graph.reverse()); SAGEConv follows its own direction (Direction::in on a
// block of in or both, out on out or both, both on both), and GCNConv, GraphConv and GATConv refuse a
// Direction::both block (two adjacencies; they aggregate one). Errors name the layer: x not
// (num_src, in_channels) or of another dtype than the block, a direction the layer cannot use.
//
// Note [Layer init]: each layer draws its initial parameters from a Generator: the one passed to
// the constructor form taking `Generator& gen`, else a fresh Generator(seed) when `seed` is given,
// else xgrad::default_generator() (torch's default generator: two layers built one after the
// other differ, and xgrad::manual_seed(s) then the same constructions give the same bits). A
// layer's parameter count and bytes are checked before any parameter is allocated (an
// xgrad::Error naming the layer). GATConv's attention-dropout masks come from the default
// generator when it is built from it (no Generator, no seed), else from a generator of its own
// (xgrad::mask_generator).

/// PyG's GCNConv (Kipf and Welling): out = Â X W^T + b, Â = graph::gcn_norm(A, add_self_loops)
/// when `normalize`, else A itself (then no self-loops are added, as PyG). X (N, in) -> (N, out).
/// Parameters as PyG: `lin.weight` (out, in), glorot (xavier_uniform_), and `bias` (out), zeros.
/// The features are transformed first and then aggregated (spmm(Â, X W^T)), as PyG. Gradients
/// reach X, the parameters and the adjacency's values when they require grad (through spmm and
/// the normalisation).
class GCNConv : public Module {
 public:
  /// Errors: negative sizes, a parameter count that overflows or exceeds memory.
  GCNConv(std::int64_t in_channels, std::int64_t out_channels, bool bias = true, bool add_self_loops = true,
          bool normalize = true, Dtype dtype = kFloat32, std::optional<std::uint64_t> seed = std::nullopt);
  GCNConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, bool bias = true,
          bool add_self_loops = true, bool normalize = true, Dtype dtype = kFloat32);

  /// x (N, in_channels) -> (N, out_channels) (Note [Graph layer forms]).
  Tensor forward(const NodeFeatures& x, const Graph& graph);
  /// With an edge_index (2, E) and optional edge weights (E,) of x's dtype (PyG's edge_weight).
  Tensor forward(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight = Tensor());
  Tensor operator()(const NodeFeatures& x, const Graph& graph) { return forward(x, graph); }
  Tensor operator()(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight = Tensor()) {
    return forward(x, edge_index, edge_weight);
  }
  /// On a sampled block (nn/sampler.hpp): x holds the block's source nodes' features (num_src,
  /// in_channels), the result is its targets' (num_dst, ...) (Note [Layers on blocks]).
  Tensor forward(const NodeFeatures& x, const Block& block);
  Tensor operator()(const NodeFeatures& x, const Block& block) { return forward(x, block); }
  /// "16, 32" (PyG's repr: GCNConv(16, 32)).
  std::string extra_repr() const override;

  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  const std::shared_ptr<Linear>& lin() const { return lin_; }
  /// Undefined without bias.
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t in_, out_;
  bool add_self_loops_, normalize_;
  std::shared_ptr<Linear> lin_;
  Tensor bias_;
};

/// PyG's GraphConv (Morris et al., "Weisfeiler and Leman go neural"), sum aggregation:
///   out_i = W_rel · Σ_{j -> i} e_ji x_j + b + W_root · x_i
/// with e_ji the adjacency's weights (1 by default; a repeated edge counts as often as it is given).
/// Parameters as PyG: `lin_rel.weight` (out, in) and `lin_rel.bias` (out) (with bias),
/// `lin_root.weight` (out, in); Linear's init (PyG's Linear: kaiming_uniform with a = sqrt(5)).
/// Aggregation first (spmm(A, X)), then the linear maps, as PyG. Gradients reach X, the parameters
/// and, when they require grad, the adjacency's values.
class GraphConv : public Module {
 public:
  /// Errors: negative sizes, a parameter count that overflows or exceeds memory.
  GraphConv(std::int64_t in_channels, std::int64_t out_channels, bool bias = true, Dtype dtype = kFloat32,
            std::optional<std::uint64_t> seed = std::nullopt);
  GraphConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, bool bias = true,
            Dtype dtype = kFloat32);

  /// x (N, in_channels) -> (N, out_channels) (Note [Graph layer forms]).
  Tensor forward(const NodeFeatures& x, const Graph& graph);
  /// With an edge_index (2, E) and optional edge weights (E,) of x's dtype (PyG's edge_weight).
  Tensor forward(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight = Tensor());
  Tensor operator()(const NodeFeatures& x, const Graph& graph) { return forward(x, graph); }
  Tensor operator()(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight = Tensor()) {
    return forward(x, edge_index, edge_weight);
  }
  /// On a sampled block (nn/sampler.hpp): x holds the block's source nodes' features (num_src,
  /// in_channels), the result is its targets' (num_dst, ...) (Note [Layers on blocks]).
  Tensor forward(const NodeFeatures& x, const Block& block);
  Tensor operator()(const NodeFeatures& x, const Block& block) { return forward(x, block); }
  /// "16, 32" (PyG's repr).
  std::string extra_repr() const override;

  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  const std::shared_ptr<Linear>& lin_rel() const { return lin_rel_; }
  const std::shared_ptr<Linear>& lin_root() const { return lin_root_; }

 private:
  std::int64_t in_, out_;
  std::shared_ptr<Linear> lin_rel_, lin_root_;
};

/// PyG's SAGEConv (GraphSAGE), with PyG's aggregations and a choice of neighbours; agg is the
/// mean, the sum or the per-feature max over the neighbours (PyG's aggr = "mean", "sum", "max"):
///   Direction::in   out_i = W_l · agg_{j -> i} x_j + b + W_r · x_i           (PyG's SAGEConv)
///   Direction::out  out_i = W_l · agg_{i -> j} x_j + b + W_r · x_i           (the reversed graph)
///   Direction::both out_i = W_l · agg_{j -> i} x_j + W_rev · agg_{i -> j} x_j + b + W_r · x_i
/// The W_r term only with root_weight. Both directions suit a directed dependency graph: what a
/// node depends on and what depends on it are aggregated with separate weights. A node without
/// neighbours aggregates to 0 (PyG's scatter). The mean and the sum are weighted by the
/// adjacency's values (with the default weights of 1, PyG's: a repeated edge counts as often as
/// it is given); the max reads the features only. Parameters: `lin_l.weight` (out, in) and
/// `lin_l.bias` (out) (with bias), `lin_rev.weight` (out, in) (Direction::both), `lin_r.weight`
/// (out, in) (root_weight): Linear's init (kaiming_uniform with a = sqrt(5), as PyG's Linear).
/// Aggregation first, then the linear maps, as PyG; on sparse features the maps come first (the
/// mean and the sum are linear), and Aggregation::max refuses them. The mean and the sum are spmm
/// with graph.mean_norm(in / out) or the adjacency (its reverse for out); the max is segment_max
/// over the neighbours' rows gathered in the adjacency's entry order. Gradients reach X, the
/// parameters and, through the mean and the sum, the adjacency's values when they require grad.
class SAGEConv : public Module {
 public:
  /// Errors: negative sizes, a parameter count that overflows or exceeds memory.
  SAGEConv(std::int64_t in_channels, std::int64_t out_channels, graph::Aggregation aggr = graph::Aggregation::mean,
           bool bias = true, bool root_weight = true, graph::Direction direction = graph::Direction::in,
           Dtype dtype = kFloat32, std::optional<std::uint64_t> seed = std::nullopt);
  SAGEConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen,
           graph::Aggregation aggr = graph::Aggregation::mean, bool bias = true, bool root_weight = true,
           graph::Direction direction = graph::Direction::in, Dtype dtype = kFloat32);

  /// x (N, in_channels) -> (N, out_channels) (Note [Graph layer forms]). Errors also: sparse
  /// features with Aggregation::max.
  Tensor forward(const NodeFeatures& x, const Graph& graph);
  Tensor forward(const NodeFeatures& x, const Tensor& edge_index);
  Tensor operator()(const NodeFeatures& x, const Graph& graph) { return forward(x, graph); }
  Tensor operator()(const NodeFeatures& x, const Tensor& edge_index) { return forward(x, edge_index); }
  /// On a sampled block (nn/sampler.hpp): x holds the block's source nodes' features (num_src,
  /// in_channels), the result is its targets' (num_dst, ...) (Note [Layers on blocks]).
  Tensor forward(const NodeFeatures& x, const Block& block);
  Tensor operator()(const NodeFeatures& x, const Block& block) { return forward(x, block); }
  /// "16, 32, aggr=mean" (PyG's; aggr=sum, aggr=max), then ", direction=out" or ", direction=both" unless in.
  std::string extra_repr() const override;

  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  graph::Aggregation aggr() const { return aggr_; }
  graph::Direction direction() const { return direction_; }
  const std::shared_ptr<Linear>& lin_l() const { return lin_l_; }
  /// Null unless Direction::both.
  const std::shared_ptr<Linear>& lin_rev() const { return lin_rev_; }
  /// Null without root_weight.
  const std::shared_ptr<Linear>& lin_r() const { return lin_r_; }

 private:
  std::int64_t in_, out_;
  graph::Aggregation aggr_;
  graph::Direction direction_;
  std::shared_ptr<Linear> lin_l_, lin_rev_, lin_r_;
};

/// PyG's GATConv (graph attention, Veličković et al.), H = heads, C = out_channels:
///   h = X W^T (N, H·C), viewed as (N, H, C);  s_src[n, k] = ⟨h[n, k], att_src[k]⟩, s_dst likewise;
///   e_ij,k = LeakyReLU(s_dst[i, k] + s_src[j, k]; negative_slope) for each edge j -> i;
///   α_·,k = softmax of e over each node's in-edges (segment_softmax over the adjacency's rows), then
///   dropout (training mode only);  out_i,k = Σ_{j -> i} α_ij,k h[j, k];
///   out = the heads concatenated (N, H·C) when concat, else their mean (N, C); + bias.
/// With add_self_loops the attention runs over graph.with_self_loops() (every node attends to
/// itself; the pattern PyG's remove_self_loops + add_self_loops gives), else over the adjacency;
/// a node with no in-edges then gets 0 (+ bias). The adjacency's values are not read: attention
/// replaces the edge weights, and an edge given twice is one edge (PyG would attend to both
/// copies). Parameters as PyG: `lin.weight` (H·C, in) and `att_src`, `att_dst` (1, H, C), glorot
/// (PyG's glorot: U(±sqrt(6 / (size(-2) + size(-1))))); `bias` (H·C) when concat else (C), zeros.
/// The attention-dropout masks are drawn from a generator of the layer's own, seeded from the
/// constructor's Generator or seed, and without either from xgrad::default_generator() at each
/// forward (as torch's dropout).
/// The edge scores are gathers of s_dst and s_src (N, H) by the adjacency's row and column indices
/// (index_select, one op for all heads; its backward is a deterministic row scatter), the softmax is
/// one segment_softmax over all heads, and each head aggregates with one spmm on the pattern holding
/// its α (SparseCsr::with_values). Gradients reach X and every parameter.
class GATConv : public Module {
 public:
  /// forward_with_attention's result, PyG's (out, (edge_index, alpha)) of return_attention_weights.
  struct WithAttention {
    Tensor out;
    /// The edges attended over, (2, E') int64 (row 0 sources, row 1 targets).
    Tensor edge_index;
    /// α (E', H) in edge_index's order, after dropout (differentiable).
    Tensor alpha;
  };

  /// Errors (naming GATConv): negative sizes, heads < 1, dropout outside [0, 1], a non-finite
  /// negative_slope, a parameter count (heads · out_channels · in_channels and the attention
  /// vectors) that overflows or exceeds memory.
  GATConv(std::int64_t in_channels, std::int64_t out_channels, std::int64_t heads = 1, bool concat = true,
          double negative_slope = 0.2, double dropout = 0.0, bool add_self_loops = true, bool bias = true,
          Dtype dtype = kFloat32, std::optional<std::uint64_t> seed = std::nullopt);
  GATConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, std::int64_t heads = 1,
          bool concat = true, double negative_slope = 0.2, double dropout = 0.0, bool add_self_loops = true,
          bool bias = true, Dtype dtype = kFloat32);

  /// x (N, in_channels) -> (N, H·C) or (N, C) (Note [Graph layer forms]).
  Tensor forward(const NodeFeatures& x, const Graph& graph);
  Tensor forward(const NodeFeatures& x, const Tensor& edge_index);
  Tensor operator()(const NodeFeatures& x, const Graph& graph) { return forward(x, graph); }
  Tensor operator()(const NodeFeatures& x, const Tensor& edge_index) { return forward(x, edge_index); }
  /// As forward, with the attention coefficients: on a Graph, the edges are the entries of the
  /// pattern attended over (graph.with_self_loops() or graph.adjacency()) in its order; on an
  /// edge_index, the input edges in their input order (a repeated edge's copies share one α), then
  /// with add_self_loops the self-loops added, in node order (PyG instead moves every self-loop to
  /// the end).
  WithAttention forward_with_attention(const NodeFeatures& x, const Graph& graph);
  WithAttention forward_with_attention(const NodeFeatures& x, const Tensor& edge_index);
  /// On a sampled block (nn/sampler.hpp): x holds the block's source nodes' features (num_src,
  /// in_channels), the result is its targets' (num_dst, ...) (Note [Layers on blocks]).
  Tensor forward(const NodeFeatures& x, const Block& block);
  Tensor operator()(const NodeFeatures& x, const Block& block) { return forward(x, block); }
  /// "16, 32, heads=2" (PyG's).
  std::string extra_repr() const override;

  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  std::int64_t heads() const { return heads_; }
  const std::shared_ptr<Linear>& lin() const { return lin_; }
  const Tensor& att_src() const { return att_src_; }
  const Tensor& att_dst() const { return att_dst_; }
  const Tensor& bias() const { return bias_; }
  /// The generator the attention-dropout masks are drawn from: the layer's own, or
  /// xgrad::default_generator() for a layer built without a Generator or seed.
  Generator& generator() { return gen_ ? *gen_ : default_generator(); }

 private:
  std::int64_t in_, out_, heads_;
  bool concat_;
  double negative_slope_, dropout_;
  bool add_self_loops_;
  std::shared_ptr<Linear> lin_;
  Tensor att_src_, att_dst_, bias_;
  std::optional<Generator> gen_;
  // The attention over the pattern `a` (num_dst x h's rows) of h = lin(x) (num_src, H·C): the
  // targets are h's first num_dst rows (on a graph, all of them).
  WithAttention attend(const Tensor& h, const SparseCsr& a);
};

}  // namespace xgrad::nn
