#include "xgrad/nn/graph.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <utility>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/nn/sampler.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace {

bool is_float(Dtype dt) { return dt == kFloat32 || dt == kFloat64; }

void check_square(const SparseCsr& adj, const char* op) {
  XGRAD_CHECK(adj.defined(), "{}: argument 'adj' is undefined", op);
  XGRAD_CHECK(adj.rows() == adj.cols(), "{}: argument 'adj' must be a square (num_nodes x num_nodes) adjacency, got {}",
              op, adj.str());
}

// The degree and normalisation functions sum edge weights with the float segment and index ops:
// an integer adjacency is refused here, naming the public call (not the op inside it).
void check_weighted(const SparseCsr& adj, const char* op) {
  check_square(adj, op);
  check_floating(op, "adj.values", adj.values());
}

// deg^p where deg != 0, else 0 (PyG's masked_fill of inf). The power is taken of 1 at those
// entries, so that no inf reaches the backward (0 · inf would be NaN).
Tensor safe_pow(const Tensor& deg, double p) {
  const Tensor zero = Tensor::zeros(deg.shape(), deg.dtype());
  const Tensor nonzero = ne(deg, zero);
  return where(nonzero, pow(where(nonzero, deg, Tensor::ones(deg.shape(), deg.dtype())), p), zero);
}

// The adjacency from edges src[e] -> dst[e] (validated) and weights (E,).
SparseCsr build_adjacency(const std::int64_t* src, const std::int64_t* dst, std::int64_t num_edges,
                          std::int64_t num_nodes, const Tensor& weight, graph::Duplicates duplicates, const char* op) {
  for (std::int64_t e = 0; e < num_edges; ++e)
    XGRAD_CHECK(src[e] >= 0 && src[e] < num_nodes && dst[e] >= 0 && dst[e] < num_nodes,
                "{}: edge {} is {} -> {}, but node indices must be in [0, num_nodes = {})", op, e, src[e], dst[e],
                num_nodes);
  const auto n = static_cast<std::size_t>(num_edges);
  std::vector<std::int64_t> indices(2 * n);  // (2, E): rows (targets), then columns (sources)
  std::copy(dst, dst + num_edges, indices.begin());
  std::copy(src, src + num_edges, indices.begin() + static_cast<std::ptrdiff_t>(n));
  if (duplicates == graph::Duplicates::error) {
    std::vector<std::pair<std::int64_t, std::int64_t>> pairs(n);
    for (std::size_t e = 0; e < n; ++e) pairs[e] = {src[e], dst[e]};
    std::sort(pairs.begin(), pairs.end());
    const auto twice = std::adjacent_find(pairs.begin(), pairs.end());
    XGRAD_CHECK(twice == pairs.end(),
                "{}: edge {} -> {} is given more than once (duplicates = Duplicates::error; Duplicates::sum adds "
                "their weights)",
                op, twice == pairs.end() ? 0 : twice->first, twice == pairs.end() ? 0 : twice->second);
  }
  return sparse_coo_tensor(Tensor::from_vector(indices, {2, num_edges}), weight, {num_nodes, num_nodes});
}

// Note [Checked sizes]: the adjacency's row offsets are num_nodes + 1 int64s; an impossible count
// is refused here, naming the call, before anything is allocated.
void check_num_nodes(std::int64_t num_nodes, const char* op) {
  XGRAD_CHECK(num_nodes >= 0, "{}: argument 'num_nodes' must be >= 0, got {}", op, num_nodes);
  check_host_memory(checked_nbytes(checked_add(num_nodes, 1, op, "num_nodes"), sizeof(std::int64_t), op, "num_nodes"),
                    op, "num_nodes");
}

Tensor default_weights(std::int64_t num_edges, Dtype dtype) {
  XGRAD_CHECK(is_float(dtype), "graph::adjacency: argument 'dtype' must be float32 or float64, got {}", dtype);
  return Tensor::ones({num_edges}, dtype);
}

// graph::adjacency from an edge_index (2, E) and weights (E,) (undefined: ones of `dtype`); `op`
// names the public call in the errors.
SparseCsr edge_index_adjacency(const Tensor& edge_index, std::int64_t num_nodes, const Tensor& edge_weight, Dtype dtype,
                               graph::Duplicates duplicates, const char* op) {
  check_num_nodes(num_nodes, op);
  XGRAD_CHECK(edge_index.defined() && edge_index.dim() == 2 && edge_index.size(0) == 2,
              "{}: argument 'edge_index' must have shape (2, num_edges) (sources, then targets), got {}", op,
              edge_index.defined() ? shape_str(edge_index.shape()) : std::string("undefined"));
  XGRAD_CHECK(edge_index.dtype() == kInt64 || edge_index.dtype() == kInt32,
              "{}: argument 'edge_index' must be int64 or int32, got {}", op, edge_index.dtype());
  const std::int64_t e = edge_index.size(1);
  Tensor weight = edge_weight;
  if (weight.defined())
    XGRAD_CHECK(weight.shape() == Shape{e} && is_float(weight.dtype()),
                "{}: argument 'edge_weight' is {} {} but must be ({},) float32 or float64 (one per edge)", op,
                weight.dtype(), shape_str(weight.shape()), e);
  else
    weight = default_weights(e, dtype);
  const Tensor idx = edge_index.to(kInt64);
  const std::int64_t* p = idx.data<std::int64_t>();
  return build_adjacency(p, p + e, e, num_nodes, weight, duplicates, op);
}

// x must be the (num_nodes, in) features of `graph`, of its dtype.
void check_features(const NodeFeatures& x, const Graph& graph, std::int64_t in, const char* module) {
  const bool defined = x.is_sparse() || x.dense().defined();
  XGRAD_CHECK(defined, "{}: argument 'x' is undefined", module);
  const Shape shape = x.is_sparse() ? x.sparse().shape() : x.dense().shape();
  const Dtype dtype = x.is_sparse() ? x.sparse().dtype() : x.dense().dtype();
  XGRAD_CHECK(shape.size() == 2 && shape[1] == in,
              "{}: argument 'x' has shape {} but must be (num_nodes, in_channels = {})", module, shape_str(shape), in);
  XGRAD_CHECK(shape[0] == graph.num_nodes(), "{}: argument 'x' has {} rows (shape {}) but the graph has num_nodes = {}",
              module, shape[0], shape_str(shape), graph.num_nodes());
  XGRAD_CHECK(dtype == graph.dtype(), "{}: argument 'x' is {} but the graph's adjacency is {}", module, dtype,
              graph.dtype());
}

// The graph of an edge_index (2, E) over x's rows, with x's dtype (Note [Graph layer forms]).
Graph graph_of(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight, const char* module) {
  XGRAD_CHECK(x.is_sparse() || x.dense().defined(), "{}: argument 'x' is undefined", module);
  XGRAD_CHECK(x.is_sparse() || x.dense().dim() >= 1,
              "{}: argument 'x' has shape {} but must be (num_nodes, in_channels)", module,
              shape_str(x.dense().shape()));
  const std::int64_t n = x.is_sparse() ? x.sparse().rows() : x.dense().size(0);
  const Dtype dtype = x.is_sparse() ? x.sparse().dtype() : x.dense().dtype();
  return Graph(edge_index_adjacency(edge_index, n, edge_weight, is_float(dtype) ? dtype : kFloat32,
                                    graph::Duplicates::sum, module));
}

// lin(x) on dense or sparse features.
Tensor apply(Linear& lin, const NodeFeatures& x) { return x.is_sparse() ? lin(x.sparse()) : lin(x.dense()); }

// Note [Layer init]: the parameter count of a layer, checked before any parameter is allocated.
void check_parameters(std::int64_t count, Dtype dtype, const char* module) {
  check_host_memory(checked_nbytes(count, dtype_size(dtype), module, "in_channels, out_channels"), module,
                    "in_channels, out_channels");
}

// `matrices` (out, in) weights and `vectors` (out) biases: checked (Note [Layer init]).
void check_channels(std::int64_t in, std::int64_t out, std::int64_t matrices, std::int64_t vectors, Dtype dtype,
                    const char* module) {
  XGRAD_CHECK(in >= 0 && out >= 0, "{}: in_channels and out_channels must be >= 0, got in = {}, out = {}", module, in,
              out);
  const char* arg = "in_channels * out_channels";
  check_parameters(checked_add(checked_mul(matrices, checked_mul(in, out, module, arg), module, arg),
                               checked_mul(vectors, out, module, "out_channels"), module, arg),
                   dtype, module);
}

// A Linear (in -> out) initialised from `gen`, its weight then re-drawn with glorot when asked
// (PyG's Linear(weight_initializer='glorot')).
std::shared_ptr<Linear> make_linear(std::int64_t in, std::int64_t out, bool bias, bool glorot, Dtype dtype,
                                    Generator& gen) {
  auto lin = std::make_shared<Linear>(in, out, gen, bias, dtype);
  if (glorot) {
    Tensor w = lin->weight();
    init::xavier_uniform_(w, gen);
  }
  return lin;
}

// The adjacency of the neighbours `direction` (in or out) picks: A, or Aᵀ (the graph's cached reverse).
SparseCsr neighbours(const Graph& graph, graph::Direction direction) {
  return direction == graph::Direction::in ? graph.adjacency() : graph.reverse().adjacency();
}

// The aggregation over the neighbours `direction` picks (in or out), of x (N, F): the weighted
// mean (spmm with mean_norm), the weighted sum (spmm with A), or the per-column max over the
// neighbours' rows gathered in entry order, 0 for a node without neighbours (PyG's scatter max).
Tensor aggregate(const Graph& graph, graph::Direction direction, graph::Aggregation aggr, const Tensor& x) {
  if (aggr == graph::Aggregation::mean) return spmm(graph.mean_norm(direction), x);
  const SparseCsr a = neighbours(graph, direction);
  if (aggr == graph::Aggregation::sum) return spmm(a, x);
  return xgrad::detail::segment_max_rows(xgrad::detail::index_select_cols(x, a.pattern()), a.pattern(),
                                         /*empty_value=*/0.0);
}

// The (2, nnz) edge_index of a pattern's entries, in entry order: row 0 sources (columns), row 1
// targets (rows).
Tensor pattern_edges(const CsrPattern& p) { return stack({p.col_indices(), p.row_indices()}, 0); }

// The entry of pattern p at (row, col), or -1 when it is not stored.
std::int64_t entry_at(const CsrPattern& p, std::int64_t row, std::int64_t col) {
  const auto cols = p.col();
  const auto first = cols.begin() + p.crow()[static_cast<std::size_t>(row)];
  const auto last = cols.begin() + p.crow()[static_cast<std::size_t>(row) + 1];
  const auto it = std::lower_bound(first, last, col);
  return it != last && *it == col ? it - cols.begin() : -1;
}

Tensor add_bias(const Tensor& x, const Tensor& bias) { return bias.defined() ? add(x, bias) : x; }

// add_remaining_self_loops for rows <= cols (a square adjacency, or a block whose targets are its
// first sources): the entry (i, i) of weight fill_value for every row i without one.
SparseCsr remaining_self_loops(const SparseCsr& adj, double fill_value, const char* op) {
  const CsrPattern& p = adj.pattern();
  const auto crow = p.crow();
  const auto col = p.col();
  const auto n = static_cast<std::size_t>(p.rows());
  std::vector<std::int64_t> ncrow(n + 1, 0), ncol, dest(static_cast<std::size_t>(p.nnz()));
  std::vector<double> base;  // fill_value at the new self-loops, 0 elsewhere
  ncol.reserve(static_cast<std::size_t>(p.nnz()) + n);
  base.reserve(static_cast<std::size_t>(p.nnz()) + n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto self = static_cast<std::int64_t>(i);
    bool has_loop = false;
    for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k)
      has_loop = has_loop || col[static_cast<std::size_t>(k)] == self;
    bool placed = has_loop;
    for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      const std::int64_t c = col[static_cast<std::size_t>(k)];
      if (!placed && c > self) {
        ncol.push_back(self);
        base.push_back(fill_value);
        placed = true;
      }
      dest[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(ncol.size());
      ncol.push_back(c);
      base.push_back(0.0);
    }
    if (!placed) {
      ncol.push_back(self);
      base.push_back(fill_value);
    }
    ncrow[i + 1] = static_cast<std::int64_t>(ncol.size());
  }
  if (static_cast<std::int64_t>(ncol.size()) == p.nnz()) return adj;
  const auto nnz = static_cast<std::int64_t>(ncol.size());
  CsrPattern np = CsrPattern::from_indices(ncrow, ncol, p.rows(), p.cols(), op);
  const Tensor values =
      index_add(Tensor::from_vector(base, {nnz}, adj.dtype()), 0, Tensor::from_vector(dest, {p.nnz()}), adj.values());
  return SparseCsr(std::move(np), values);
}

// x must be the (num_src, in) features of `block`, of its dtype (Note [Layers on blocks]).
void check_block_features(const NodeFeatures& x, const Block& block, std::int64_t in, const char* module) {
  XGRAD_CHECK(block.adj.defined() && block.src_nodes.defined(),
              "{}: argument 'block' is undefined (use the blocks NeighborSampler::sample makes)", module);
  XGRAD_CHECK(x.is_sparse() || x.dense().defined(), "{}: argument 'x' is undefined", module);
  const Shape shape = x.is_sparse() ? x.sparse().shape() : x.dense().shape();
  const Dtype dtype = x.is_sparse() ? x.sparse().dtype() : x.dense().dtype();
  XGRAD_CHECK(shape.size() == 2 && shape[1] == in,
              "{}: argument 'x' has shape {} but must be (num_src, in_channels = {})", module, shape_str(shape), in);
  XGRAD_CHECK(shape[0] == block.num_src(),
              "{}: argument 'x' has {} rows (shape {}) but the block has num_src = {} source nodes (num_dst = {})",
              module, shape[0], shape_str(shape), block.num_src(), block.num_dst());
  XGRAD_CHECK(dtype == block.dtype(), "{}: argument 'x' is {} but the block's adjacency is {}", module, dtype,
              block.dtype());
}

// The adjacency GCNConv, GraphConv and GATConv aggregate on a block: its only one (Direction::in or
// out); a Direction::both block holds two, and is refused.
const SparseCsr& block_adjacency(const Block& block, const char* module) {
  XGRAD_CHECK(block.direction != graph::Direction::both,
              "{}: argument 'block' was sampled with Direction::both (an in- and an out-adjacency), but the layer "
              "aggregates one direction: sample with Direction::in or Direction::out",
              module);
  return block.adj;
}

// The targets' rows: the first n of x's (Note [Blocks]).
Tensor dst_rows(const Tensor& x, std::int64_t n) { return x.size(0) == n ? x : slice(x, 0, 0, n); }

// aggregate() on a block's adjacency a (num_dst x num_src) and the sources' features x: the mean
// divides by the sampled edges' weight sums (D^-1 a, D = a's row sums), as graph::mean_norm.
Tensor block_aggregate(const SparseCsr& a, graph::Aggregation aggr, const Tensor& x) {
  if (aggr == graph::Aggregation::mean) {
    const Tensor inv = safe_pow(xgrad::detail::segment_sum_rows(a.values(), a.pattern()), -1.0);
    return spmm(a.with_values(mul(a.values(), xgrad::detail::index_select_rows(inv, a.pattern()))), x);
  }
  if (aggr == graph::Aggregation::sum) return spmm(a, x);
  return xgrad::detail::segment_max_rows(xgrad::detail::index_select_cols(x, a.pattern()), a.pattern(),
                                         /*empty_value=*/0.0);
}

}  // namespace

// ---- utilities ----------------------------------------------------------------------------------

namespace graph {

SparseCsr adjacency(const Tensor& edge_index, std::int64_t num_nodes, Dtype dtype, Duplicates duplicates) {
  return edge_index_adjacency(edge_index, num_nodes, Tensor(), dtype, duplicates, "graph::adjacency");
}

SparseCsr adjacency(const Tensor& edge_index, std::int64_t num_nodes, const Tensor& edge_weight,
                    Duplicates duplicates) {
  return edge_index_adjacency(edge_index, num_nodes, edge_weight, kFloat32, duplicates, "graph::adjacency");
}

SparseCsr adjacency(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst, std::int64_t num_nodes,
                    Dtype dtype, Duplicates duplicates) {
  check_num_nodes(num_nodes, "graph::adjacency");
  XGRAD_CHECK(src.size() == dst.size(), "graph::adjacency: 'src' has {} edges but 'dst' has {}", src.size(),
              dst.size());
  const auto e = static_cast<std::int64_t>(src.size());
  return build_adjacency(src.data(), dst.data(), e, num_nodes, default_weights(e, dtype), duplicates,
                         "graph::adjacency");
}

SparseCsr add_remaining_self_loops(const SparseCsr& adj, double fill_value) {
  constexpr const char* op = "graph::add_remaining_self_loops";
  check_weighted(adj, op);
  return remaining_self_loops(adj, fill_value, op);
}

Tensor in_degree(const SparseCsr& adj) {
  check_weighted(adj, "graph::in_degree");
  return xgrad::detail::segment_sum_rows(adj.values(), adj.pattern());
}

Tensor out_degree(const SparseCsr& adj) {
  check_weighted(adj, "graph::out_degree");
  return in_degree(adj.t());
}

SparseCsr gcn_norm(const SparseCsr& adj, bool add_self_loops) {
  check_weighted(adj, "graph::gcn_norm");
  const SparseCsr a = add_self_loops ? add_remaining_self_loops(adj) : adj;
  const Tensor dis = safe_pow(in_degree(a), -0.5);
  // PyG's order: deg^-1/2[source] · w · deg^-1/2[target].
  return a.with_values(mul(mul(xgrad::detail::index_select_cols(dis, a.pattern()), a.values()),
                           xgrad::detail::index_select_rows(dis, a.pattern())));
}

SparseCsr mean_norm(const SparseCsr& adj) {
  check_weighted(adj, "graph::mean_norm");
  const Tensor inv = safe_pow(in_degree(adj), -1.0);
  return adj.with_values(mul(adj.values(), xgrad::detail::index_select_rows(inv, adj.pattern())));
}

SparseCsr reverse(const SparseCsr& adj) {
  check_square(adj, "graph::reverse");
  return adj.t();
}

}  // namespace graph

// ---- Graph --------------------------------------------------------------------------------------

struct Graph::Impl {
  SparseCsr adj;
  // Note [Graph caches]: filled on first use. The value is computed outside the lock (the ops run
  // TBB tasks, and a task must not wait on a lock its own thread holds); the first one stored wins.
  std::mutex mutex;
  std::optional<SparseCsr> gcn[2], mean[2], loops;
  std::shared_ptr<Impl> reversed;
};

namespace {
template <class F>
SparseCsr cached(Graph::Impl& impl, std::optional<SparseCsr>& slot, F&& compute) {
  if (impl.adj.values().requires_grad()) return compute();  // learned weights: a fresh graph every call
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    if (slot) return *slot;
  }
  SparseCsr value = compute();
  std::lock_guard<std::mutex> lock(impl.mutex);
  if (!slot) slot = std::move(value);
  return *slot;
}
}  // namespace

Graph::Graph() : impl_(std::make_shared<Impl>()) { impl_->adj = SparseCsr(CsrPattern(), Tensor::zeros({0}, kFloat32)); }

Graph::Graph(SparseCsr adjacency) : impl_(std::make_shared<Impl>()) {
  check_square(adjacency, "Graph");
  XGRAD_CHECK(is_float(adjacency.dtype()), "Graph: the adjacency's values must be float32 or float64, got {}",
              adjacency.dtype());
  impl_->adj = std::move(adjacency);
}

std::int64_t Graph::num_nodes() const { return impl_->adj.rows(); }
std::int64_t Graph::num_edges() const { return impl_->adj.nnz(); }
Dtype Graph::dtype() const { return impl_->adj.dtype(); }
const SparseCsr& Graph::adjacency() const { return impl_->adj; }

Graph Graph::reverse() const {
  const auto make = [this] {
    auto r = std::make_shared<Impl>();
    r->adj = graph::reverse(impl_->adj);
    return r;
  };
  if (impl_->adj.values().requires_grad()) return Graph(make());
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->reversed) return Graph(impl_->reversed);
  }
  std::shared_ptr<Impl> r = make();  // outside the lock, as `cached`
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->reversed) impl_->reversed = std::move(r);
  return Graph(impl_->reversed);
}

SparseCsr Graph::gcn_norm(bool add_self_loops) const {
  return cached(*impl_, impl_->gcn[add_self_loops ? 1 : 0],
                [&] { return graph::gcn_norm(impl_->adj, add_self_loops); });
}

SparseCsr Graph::mean_norm(graph::Direction direction) const {
  XGRAD_CHECK(direction != graph::Direction::both,
              "Graph::mean_norm: argument 'direction' must be Direction::in or Direction::out (ask for each)");
  if (direction == graph::Direction::in)
    return cached(*impl_, impl_->mean[0], [&] { return graph::mean_norm(impl_->adj); });
  return cached(*impl_, impl_->mean[1], [&] { return graph::mean_norm(graph::reverse(impl_->adj)); });
}

SparseCsr Graph::with_self_loops() const {
  return cached(*impl_, impl_->loops, [&] { return graph::add_remaining_self_loops(impl_->adj); });
}

// ---- GCNConv ------------------------------------------------------------------------------------

GCNConv::GCNConv(std::int64_t in_channels, std::int64_t out_channels, bool bias, bool add_self_loops, bool normalize,
                 Dtype dtype, std::optional<std::uint64_t> seed)
    : GCNConv(in_channels, out_channels, SeedOrDefault(seed), bias, add_self_loops, normalize, dtype) {}

GCNConv::GCNConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, bool bias, bool add_self_loops,
                 bool normalize, Dtype dtype)
    : Module("GCNConv"), in_(in_channels), out_(out_channels), add_self_loops_(add_self_loops), normalize_(normalize) {
  check_channels(in_, out_, 1, 1, dtype, "GCNConv");
  lin_ = register_module("lin", make_linear(in_, out_, false, true, dtype, gen));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({out_}, dtype));
}

Tensor GCNConv::forward(const NodeFeatures& x, const Graph& graph) {
  check_features(x, graph, in_, "GCNConv");
  return add_bias(spmm(normalize_ ? graph.gcn_norm(add_self_loops_) : graph.adjacency(), apply(*lin_, x)), bias_);
}

Tensor GCNConv::forward(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight) {
  return forward(x, graph_of(x, edge_index, edge_weight, "GCNConv"));
}

Tensor GCNConv::forward(const NodeFeatures& x, const Block& block) {
  check_block_features(x, block, in_, "GCNConv");
  const SparseCsr& adj = block_adjacency(block, "GCNConv");
  const Tensor h = apply(*lin_, x);
  if (!normalize_) return add_bias(spmm(adj, h), bias_);
  // Note [Layers on blocks]: the full graph's degrees, with the self-loops gcn_norm adds.
  const SparseCsr a = add_self_loops_ ? remaining_self_loops(adj, 1.0, "GCNConv") : adj;
  const Tensor dis = safe_pow(add_self_loops_ ? block.src_degree_loops : block.src_degree, -0.5);  // (num_src,)
  return add_bias(spmm(a.with_values(mul(mul(xgrad::detail::index_select_cols(dis, a.pattern()), a.values()),
                                         xgrad::detail::index_select_rows(dst_rows(dis, a.rows()), a.pattern()))),
                       h),
                  bias_);
}

// ---- GraphConv ----------------------------------------------------------------------------------

GraphConv::GraphConv(std::int64_t in_channels, std::int64_t out_channels, bool bias, Dtype dtype,
                     std::optional<std::uint64_t> seed)
    : GraphConv(in_channels, out_channels, SeedOrDefault(seed), bias, dtype) {}

GraphConv::GraphConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, bool bias, Dtype dtype)
    : Module("GraphConv"), in_(in_channels), out_(out_channels) {
  check_channels(in_, out_, 2, 1, dtype, "GraphConv");
  lin_rel_ = register_module("lin_rel", make_linear(in_, out_, bias, false, dtype, gen));
  lin_root_ = register_module("lin_root", make_linear(in_, out_, false, false, dtype, gen));
}

Tensor GraphConv::forward(const NodeFeatures& x, const Graph& graph) {
  check_features(x, graph, in_, "GraphConv");
  const SparseCsr& a = graph.adjacency();
  // On sparse features: W · (A x) = A (x Wᵀ), and x Wᵀ is dense.
  const Tensor rel = x.is_sparse() ? add_bias(spmm(a, linear(x.sparse(), lin_rel_->weight())), lin_rel_->bias())
                                   : (*lin_rel_)(spmm(a, x.dense()));
  return add(rel, apply(*lin_root_, x));
}

Tensor GraphConv::forward(const NodeFeatures& x, const Tensor& edge_index, const Tensor& edge_weight) {
  return forward(x, graph_of(x, edge_index, edge_weight, "GraphConv"));
}

Tensor GraphConv::forward(const NodeFeatures& x, const Block& block) {
  check_block_features(x, block, in_, "GraphConv");
  const SparseCsr& a = block_adjacency(block, "GraphConv");
  const std::int64_t n = block.num_dst();
  if (x.is_sparse())
    return add(add_bias(spmm(a, linear(x.sparse(), lin_rel_->weight())), lin_rel_->bias()),
               dst_rows((*lin_root_)(x.sparse()), n));
  return add((*lin_rel_)(spmm(a, x.dense())), (*lin_root_)(dst_rows(x.dense(), n)));
}

// ---- SAGEConv -----------------------------------------------------------------------------------

SAGEConv::SAGEConv(std::int64_t in_channels, std::int64_t out_channels, graph::Aggregation aggr, bool bias,
                   bool root_weight, graph::Direction direction, Dtype dtype, std::optional<std::uint64_t> seed)
    : SAGEConv(in_channels, out_channels, SeedOrDefault(seed), aggr, bias, root_weight, direction, dtype) {}

SAGEConv::SAGEConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, graph::Aggregation aggr,
                   bool bias, bool root_weight, graph::Direction direction, Dtype dtype)
    : Module("SAGEConv"), in_(in_channels), out_(out_channels), aggr_(aggr), direction_(direction) {
  const bool both = direction == graph::Direction::both;
  check_channels(in_, out_, 1 + (both ? 1 : 0) + (root_weight ? 1 : 0), 1, dtype, "SAGEConv");
  lin_l_ = register_module("lin_l", make_linear(in_, out_, bias, false, dtype, gen));
  if (both) lin_rev_ = register_module("lin_rev", make_linear(in_, out_, false, false, dtype, gen));
  if (root_weight) lin_r_ = register_module("lin_r", make_linear(in_, out_, false, false, dtype, gen));
}

Tensor SAGEConv::forward(const NodeFeatures& x, const Graph& graph) {
  check_features(x, graph, in_, "SAGEConv");
  XGRAD_CHECK(!(x.is_sparse() && aggr_ == graph::Aggregation::max),
              "SAGEConv: argument 'x' is a SparseCsr, which Aggregation::max does not take (the max of the "
              "neighbours' rows is not linear in them, so the layer cannot multiply by its weights first); use "
              "mean or sum, or dense features");
  const graph::Direction first = direction_ == graph::Direction::out ? graph::Direction::out : graph::Direction::in;
  // On sparse features: W · agg(x) = agg(x Wᵀ) for the mean and the sum, and x Wᵀ is dense.
  const auto term = [&](Linear& lin, graph::Direction d) {
    return x.is_sparse() ? aggregate(graph, d, aggr_, linear(x.sparse(), lin.weight()))
                         : lin(aggregate(graph, d, aggr_, x.dense()));
  };
  Tensor out = term(*lin_l_, first);
  if (x.is_sparse()) out = add_bias(out, lin_l_->bias());
  if (lin_rev_) out = add(out, term(*lin_rev_, graph::Direction::out));
  if (lin_r_) out = add(out, apply(*lin_r_, x));
  return out;
}

Tensor SAGEConv::forward(const NodeFeatures& x, const Tensor& edge_index) {
  return forward(x, graph_of(x, edge_index, Tensor(), "SAGEConv"));
}

Tensor SAGEConv::forward(const NodeFeatures& x, const Block& block) {
  check_block_features(x, block, in_, "SAGEConv");
  XGRAD_CHECK(!(x.is_sparse() && aggr_ == graph::Aggregation::max),
              "SAGEConv: argument 'x' is a SparseCsr, which Aggregation::max does not take; use mean or sum, or "
              "dense features");
  using graph::Direction;
  const bool ok = direction_ == Direction::both ? block.direction == Direction::both
                                                : block.direction == direction_ || block.direction == Direction::both;
  XGRAD_CHECK(ok,
              "SAGEConv: the layer aggregates over direction {} but argument 'block' was sampled with direction {} "
              "(in takes a block of in or both, out one of out or both, both one of both)",
              direction_ == Direction::in    ? "in"
              : direction_ == Direction::out ? "out"
                                             : "both",
              block.direction == Direction::in    ? "in"
              : block.direction == Direction::out ? "out"
                                                  : "both");
  // The block's adjacency of in-neighbours (adj, unless it was sampled with out) and of out-neighbours.
  const SparseCsr& first =
      direction_ == Direction::out && block.direction == Direction::both ? block.adj_out : block.adj;
  const std::int64_t n = block.num_dst();
  const auto term = [&](Linear& lin, const SparseCsr& a) {
    return x.is_sparse() ? block_aggregate(a, aggr_, linear(x.sparse(), lin.weight()))
                         : lin(block_aggregate(a, aggr_, x.dense()));
  };
  Tensor out = term(*lin_l_, first);
  if (x.is_sparse()) out = add_bias(out, lin_l_->bias());
  if (lin_rev_) out = add(out, term(*lin_rev_, block.adj_out));
  if (lin_r_) out = add(out, x.is_sparse() ? dst_rows((*lin_r_)(x.sparse()), n) : (*lin_r_)(dst_rows(x.dense(), n)));
  return out;
}

// ---- GATConv ------------------------------------------------------------------------------------

GATConv::GATConv(std::int64_t in_channels, std::int64_t out_channels, std::int64_t heads, bool concat,
                 double negative_slope, double dropout, bool add_self_loops, bool bias, Dtype dtype,
                 std::optional<std::uint64_t> seed)
    : GATConv(in_channels, out_channels, SeedOrDefault(seed), heads, concat, negative_slope, dropout, add_self_loops,
              bias, dtype) {}

GATConv::GATConv(std::int64_t in_channels, std::int64_t out_channels, Generator& gen, std::int64_t heads, bool concat,
                 double negative_slope, double dropout, bool add_self_loops, bool bias, Dtype dtype)
    : Module("GATConv"),
      in_(in_channels),
      out_(out_channels),
      heads_(heads),
      concat_(concat),
      negative_slope_(negative_slope),
      dropout_(dropout),
      add_self_loops_(add_self_loops) {
  constexpr const char* op = "GATConv";
  XGRAD_CHECK(in_channels >= 0 && out_channels >= 0,
              "GATConv: in_channels and out_channels must be >= 0, got in = {}, out = {}", in_channels, out_channels);
  XGRAD_CHECK(heads >= 1, "GATConv: argument 'heads' must be >= 1, got {}", heads);
  XGRAD_CHECK(dropout >= 0.0 && dropout <= 1.0, "GATConv: argument 'dropout' must be in [0, 1], got {}", dropout);
  XGRAD_CHECK(std::isfinite(negative_slope), "GATConv: argument 'negative_slope' must be finite, got {}",
              negative_slope);
  // lin (H·C, in), att_src and att_dst (H·C each), bias (H·C) at most (Note [Layer init]).
  const char* arg = "heads * out_channels";
  const std::int64_t hc = checked_mul(heads, out_channels, op, arg);
  check_parameters(checked_add(checked_mul(hc, in_channels, op, "heads * out_channels * in_channels"),
                               checked_mul(3, hc, op, arg), op, arg),
                   dtype, op);
  lin_ = register_module("lin", make_linear(in_, hc, false, true, dtype, gen));
  // PyG's glorot on (1, H, C): U(±sqrt(6 / (H + C))), from the last two sizes (their sum in double:
  // H + C may not fit in int64).
  const double bound = std::sqrt(6.0 / (static_cast<double>(heads_) + static_cast<double>(out_)));
  Tensor att_src = Tensor::empty({1, heads_, out_}, dtype);
  Tensor att_dst = Tensor::empty({1, heads_, out_}, dtype);
  init::uniform_(att_src, gen, -bound, bound);
  init::uniform_(att_dst, gen, -bound, bound);
  att_src_ = register_parameter("att_src", att_src);
  att_dst_ = register_parameter("att_dst", att_dst);
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({concat ? hc : out_}, dtype));
  gen_ = mask_generator(gen);  // attention-dropout masks: the default generator's, or its own
}

GATConv::WithAttention GATConv::forward_with_attention(const NodeFeatures& x, const Graph& graph) {
  check_features(x, graph, in_, "GATConv");
  return attend(apply(*lin_, x), add_self_loops_ ? graph.with_self_loops() : graph.adjacency());
}

Tensor GATConv::forward(const NodeFeatures& x, const Block& block) {
  check_block_features(x, block, in_, "GATConv");
  const SparseCsr& a = block_adjacency(block, "GATConv");
  return attend(apply(*lin_, x), add_self_loops_ ? remaining_self_loops(a, 1.0, "GATConv") : a).out;
}

GATConv::WithAttention GATConv::attend(const Tensor& h, const SparseCsr& a) {
  const std::int64_t n = h.size(0);                  // the sources (on a graph, every node)
  const Tensor hv = reshape(h, {n, heads_, out_});   // h (n, H·C)
  const Tensor s_src = sum(mul(hv, att_src_), {2});  // (n, H)
  const Tensor s_dst = sum(mul(a.rows() == n ? hv : slice(hv, 0, 0, a.rows()), att_dst_), {2});  // (num_dst, H)
  const std::int64_t nnz = a.nnz();
  // e[k] = s_dst[target] + s_src[source] for entry k: two gathers of (N, H) rows, all heads at once
  // (rather than an sddmm per head, which computes a width-2 dot product per entry and head).
  // Both gathers' backward run over the pattern's row offsets and cached transpose (Note [Pattern gathers]
  // in ops/sparse.cpp), and the softmax takes its row offsets unchecked (Note [Pattern tensors]).
  const Tensor e = leaky_relu(
      add(xgrad::detail::index_select_rows(s_dst, a.pattern()), xgrad::detail::index_select_cols(s_src, a.pattern())),
      negative_slope_);
  const Tensor alpha =
      functional::dropout(xgrad::detail::segment_softmax_rows(e, a.pattern()), dropout_, is_training(), generator());
  // One spmm per head. The heads are split along dim 0 of (H, nnz) and (H, N, C) copies: a slice
  // of a column of (nnz, H) or (N, H·C) copies and scatters back one short row per entry or node.
  const Tensor alpha_h = heads_ == 1 ? alpha : transpose(alpha, 0, 1);  // (H, nnz)
  const Tensor h_h = heads_ == 1 ? h : permute(hv, {1, 0, 2});          // (H, N, C)
  Tensors outs;
  for (std::int64_t k = 0; k < heads_; ++k) {
    const Tensor ak = reshape(heads_ == 1 ? alpha_h : slice(alpha_h, 0, k, k + 1), {nnz});
    const Tensor hk = heads_ == 1 ? h : reshape(slice(h_h, 0, k, k + 1), {n, out_});
    outs.push_back(spmm(a.with_values(ak), hk));
  }
  const Tensor out = heads_ == 1 ? outs[0] : concat_ ? xgrad::concat(outs, 1) : mean(stack(outs, 0), {0});
  return {add_bias(out, bias_), pattern_edges(a.pattern()), alpha};
}

GATConv::WithAttention GATConv::forward_with_attention(const NodeFeatures& x, const Tensor& edge_index) {
  const Graph graph = graph_of(x, edge_index, Tensor(), "GATConv");
  WithAttention r = forward_with_attention(x, graph);
  // α's entries in the input edges' order, then the self-loops added (nodes without one).
  const SparseCsr& adj = graph.adjacency();
  const CsrPattern p = add_self_loops_ ? graph.with_self_loops().pattern() : adj.pattern();
  const Tensor ei = edge_index.to(kInt64);
  const std::int64_t e = ei.size(1);
  const std::int64_t* src = ei.data<std::int64_t>();
  std::vector<std::int64_t> entry(static_cast<std::size_t>(e)), loops;
  for (std::int64_t k = 0; k < e; ++k) entry[static_cast<std::size_t>(k)] = entry_at(p, src[e + k], src[k]);
  if (add_self_loops_)
    for (std::int64_t i = 0; i < graph.num_nodes(); ++i)
      if (entry_at(adj.pattern(), i, i) < 0) {
        loops.push_back(i);
        entry.push_back(entry_at(p, i, i));
      }
  const auto l = static_cast<std::int64_t>(loops.size());
  std::vector<std::int64_t> loop_edges(loops);
  loop_edges.insert(loop_edges.end(), loops.begin(), loops.end());
  r.edge_index = xgrad::concat({ei, Tensor::from_vector(loop_edges, {2, l})}, 1);
  r.alpha = index_select(r.alpha, 0, entry);
  return r;
}

Tensor GATConv::forward(const NodeFeatures& x, const Graph& graph) { return forward_with_attention(x, graph).out; }

Tensor GATConv::forward(const NodeFeatures& x, const Tensor& edge_index) {
  return forward(x, graph_of(x, edge_index, Tensor(), "GATConv"));
}

}  // namespace xgrad::nn
