#pragma once
// Minibatch training on graphs too large for one batch (PyG's NeighborLoader, DGL's
// MultiLayerNeighborSampler): for a batch of seed nodes, sample up to k_l neighbours per node and
// layer, build each layer's bipartite block, and run the graph layers on the blocks (nn/graph.hpp:
// each layer's forward(x, block)). The user guide is the section "Minibatches of a large graph" of
// docs/sparse.md.
//
//   nn::NeighborSampler sampler(graph, /*fanouts=*/{10, 5});      // layer 0 takes 10, layer 1 takes 5
//   nn::NeighborLoader loader(sampler, train_nodes, labels, nn::DataLoaderOptions(512).shuffle(true));
//   for (auto& batch : loader) {                                   // the next batch is sampled meanwhile
//     Tensor h = relu(conv0(index_select(x, 0, batch.input_nodes), batch.blocks[0]));
//     Tensor logits = conv1(h, batch.blocks[1]);                   // (batch size, classes)
//   }
//
// Note [Blocks]: layer l of an L-layer network maps the features of block l's source nodes to its
// target nodes. The last block's targets are the seeds; each block's sources are its targets followed
// by their sampled neighbours not among them (DGL's convention: the targets are the first source
// ids, so x_dst = x_src[:num_dst]), and block l's sources are block l - 1's targets. A block's
// adjacency is (num_dst x num_src) in CSR form with block-local ids: row i holds target i's sampled
// neighbours, as Note [Graph convention]'s A[dst, src] restricted to the sample. New source ids are
// given in order of first appearance (targets in order, each one's neighbours by global id), so a
// block is a function of the seeds, the graph and the sampling seed only.
//
// Note [Sampling streams]: each target's draws come from Philox (core/detail/philox.hpp) keyed by the
// batch's sampling seed, at a counter made of (node, layer, direction, draw), never from a shared
// sequential stream: a node's sample depends on nothing else, so the targets are sampled in parallel
// (TBB, over the targets) with the same blocks at any thread count. A node that is a target of two
// batches sampled with the same seed draws the same neighbours in both.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/graph.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::nn {

/// One layer's bipartite graph of a sampled minibatch (Note [Blocks]), DGL's block.
struct Block {
  /// (num_dst x num_src): row i holds target i's sampled neighbours in the block's direction (its
  /// in-neighbours for Direction::in and both, its out-neighbours for Direction::out), as block-local
  /// source ids, with the sampled edges' values (the adjacency's weights; times the number of times
  /// the edge was drawn when sampling with replacement). The values are data, not the graph's
  /// tensor: no gradient reaches the full adjacency's values through a block.
  SparseCsr adj;
  /// Direction::both only (else undefined): the sampled out-neighbours, over the same source ids.
  SparseCsr adj_out;
  /// (num_src,) int64: the global id of each source node; the first num_dst are the targets.
  Tensor src_nodes;
  /// (num_src,) in the adjacency's dtype: each source node's weighted degree in the full graph (the
  /// row sum of the adjacency the sampler reads: A for Direction::in and both, Aᵀ for out), and the
  /// same with a self-loop of weight 1 added where the full graph has none (in_degree of
  /// graph::add_remaining_self_loops). GCNConv normalises a block with them, so that a target whose
  /// whole neighbourhood was taken gets its full-graph result.
  Tensor src_degree, src_degree_loops;
  /// The direction the sampler followed.
  graph::Direction direction = graph::Direction::in;

  std::int64_t num_dst() const { return adj.rows(); }
  std::int64_t num_src() const { return adj.cols(); }
  /// The targets' global ids: the first num_dst() of src_nodes.
  Tensor dst_nodes() const;
  Dtype dtype() const { return adj.dtype(); }
};

/// A sampled minibatch: blocks[0] is the input layer's, blocks[L - 1] the output layer's, whose
/// targets are the seeds.
struct MiniBatch {
  std::vector<Block> blocks;
  /// (num_src of blocks[0],) int64: the nodes whose input features the first layer reads.
  Tensor input_nodes;
  /// (batch,) int64: the seeds, the targets of the last block, in the order given.
  Tensor seeds;
  /// The seeds' labels (labels[seeds] of NeighborLoader's labels); undefined from NeighborSampler.
  Tensor labels;
};

/// Samples the blocks of a minibatch from a graph (PyG's NeighborSampler with num_neighbors, DGL's
/// MultiLayerNeighborSampler with fanouts; the fan-outs are listed from the input layer to the output
/// layer, DGL's order, so fanouts[l] is block l's).
///
/// For each target node and each layer l, from the target's neighbours in `direction`:
///  - fanouts[l] = -1, or without replacement a node with at most fanouts[l] neighbours: all of them
///    (the weights are not read: edges of weight 0 included);
///  - without replacement: fanouts[l] distinct neighbours, uniformly (Floyd's algorithm) or, when
///    `weighted`, with probabilities proportional to the edge values (Efraimidis-Spirakis: each edge's
///    key log(u) / w, the largest keys taken; an edge of weight 0 is never taken, so a node may get
///    fewer);
///  - with replacement: fanouts[l] draws, uniformly or proportional to the edge values (a node whose
///    weights sum to 0 gets none); an edge drawn c times is one entry whose value is c times its weight.
/// Direction::both samples fanouts[l] in-neighbours and fanouts[l] out-neighbours of each target
/// (Block::adj and Block::adj_out) and takes both sets as sources.
///
/// Cost per batch: the sampled edges and the batch's nodes, plus, per target, its degree for a
/// weighted draw without replacement (every key is drawn) and for a uniform draw of more than 64 of
/// its neighbours without replacement (a partial shuffle of its entry numbers). Per sampler, once:
/// the degrees and self-loops of every node (Block::src_degree), the running sums of each row's
/// weights when `weighted`, and the relabelling maps (num_nodes int64 each), kept for later batches
/// and reset at the touched entries only. sample() is thread-safe (each call takes a map of its own).
class NeighborSampler {
 public:
  /// Errors (naming NeighborSampler): a graph with no nodes; an empty fan-out list; a fan-out that is
  /// neither -1 (all neighbours) nor >= 1 (0 and other negatives are refused: a layer that samples
  /// nothing is a layer that does not see the graph); with `weighted`, a negative or non-finite edge
  /// value.
  NeighborSampler(Graph graph, std::vector<std::int64_t> fanouts, bool replace = false,
                  graph::Direction direction = graph::Direction::in, bool weighted = false);

  /// The blocks of the batch `seeds` (global ids, distinct), sampled with `seed` (Note [Sampling
  /// streams]). Errors (naming NeighborSampler::sample): no seeds, a seed outside [0, num_nodes), a
  /// seed given twice.
  MiniBatch sample(std::span<const std::int64_t> seeds, std::uint64_t seed) const;
  /// The same from a 1-d int64 or int32 tensor.
  MiniBatch sample(const Tensor& seeds, std::uint64_t seed) const;

  const Graph& graph() const;
  const std::vector<std::int64_t>& fanouts() const;
  std::int64_t num_layers() const { return static_cast<std::int64_t>(fanouts().size()); }
  bool replace() const;
  bool weighted() const;
  graph::Direction direction() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// Iterates over shuffled batches of seed nodes and yields each batch's MiniBatch (blocks, input
/// node ids, the seeds and their labels), PyG's NeighborLoader. The seeds of an epoch are
/// input_nodes in the order of the index sampler (over positions 0 .. input_nodes.size(0) - 1): the
/// one given (e.g. nn::DistributedSampler, so that the ranks of a data-parallel job get disjoint
/// seeds), else RandomSampler(size, options.seed_) with shuffle, else SequentialSampler; the epochs
/// advance as DataLoader's (Note [Epochs and reproducibility]). Batch b of epoch e is sampled with a
/// seed mixed from (options.seed_, e, b), so a run repeats itself at any thread count.
///
/// Note [Sampling ahead]: while the caller trains on batch b, batch b + 1 is sampled on a background
/// thread (std::async: one batch of lookahead, TBB inside it). An error while sampling is rethrown
/// where that batch is dereferenced. Leaving a pass early, starting a new one or destroying the loader
/// waits for the batch being sampled (it ends on its own: sampling never waits on the caller), so
/// nothing outlives the loader.
///
/// Errors (naming NeighborLoader): input_nodes not a non-empty 1-d int64 or int32 tensor of nodes in
/// [0, num_nodes); labels (when defined) whose first dimension is not num_nodes (they are indexed by
/// global node id); batch_size 0; shuffle with an explicit index sampler; an index sampler whose
/// size() exceeds input_nodes' length is refused when its indices are drawn.
class NeighborLoader {
 public:
  NeighborLoader(NeighborSampler sampler, Tensor input_nodes, Tensor labels, DataLoaderOptions options,
                 std::shared_ptr<Sampler> index_sampler = nullptr);
  ~NeighborLoader();
  NeighborLoader(const NeighborLoader&) = delete;
  NeighborLoader& operator=(const NeighborLoader&) = delete;

  class iterator {
   public:
    using value_type = MiniBatch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    /// Waits for this batch (sampled in the background) and starts sampling the next one.
    MiniBatch& operator*();
    MiniBatch* operator->() { return &**this; }
    iterator& operator++();
    bool operator==(const iterator& other) const { return batch_ == other.batch_; }

   private:
    friend class NeighborLoader;
    iterator(NeighborLoader* loader, std::size_t batch) : loader_(loader), batch_(batch) {}
    NeighborLoader* loader_ = nullptr;
    std::size_t batch_ = 0;
  };

  /// Starts a pass (waiting for a batch still being sampled by an earlier one): draws the index
  /// sampler's indices for its current epoch, advances its epoch, and starts sampling batch 0.
  iterator begin();
  iterator end();
  /// Batches per epoch.
  std::size_t size() const;
  void set_epoch(std::uint64_t epoch) { index_sampler_->set_epoch(epoch); }
  std::uint64_t epoch() const { return index_sampler_->epoch(); }
  const NeighborSampler& sampler() const { return sampler_; }
  Sampler& index_sampler() { return *index_sampler_; }

 private:
  struct Pass;
  MiniBatch& fetch(std::size_t batch);
  NeighborSampler sampler_;
  Tensor input_nodes_, labels_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> index_sampler_;
  std::unique_ptr<Pass> pass_;  // the current pass: its seeds, its batch in flight (nn/sampler.cpp)
};

/// One layer of a network on blocks, with its activation: features of the block's sources -> the
/// block's targets' outputs, e.g. [&](const Tensor& x, const nn::Block& b) { return relu(conv(x, b)); }.
using BlockLayer = std::function<Tensor(const Tensor& x, const Block& block)>;

/// Layer-wise full-graph inference (PyG's `inference` for sampled models): each layer in turn over
/// all nodes, in chunks of `chunk_size` target nodes whose whole neighbourhood (fan-out -1) is one
/// block, so evaluation needs no sampling and holds one layer's outputs for all nodes plus one chunk's
/// neighbourhood at a time. x (num_nodes, F) -> (num_nodes, F_L). Runs without recording gradients
/// (NoGradGuard); put dropout layers in eval mode first. Errors (naming layerwise_inference): no
/// layers, chunk_size < 1, x not (num_nodes, ...).
Tensor layerwise_inference(const Graph& graph, const Tensor& x, const std::vector<BlockLayer>& layers,
                           std::int64_t chunk_size, graph::Direction direction = graph::Direction::in);

}  // namespace xgrad::nn
