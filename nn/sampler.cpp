#include "xgrad/nn/sampler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <future>
#include <limits>
#include <mutex>
#include <numeric>
#include <utility>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::nn {

namespace {

constexpr const char* kSampler = "NeighborSampler";
constexpr const char* kSample = "NeighborSampler::sample";
constexpr const char* kLoader = "NeighborLoader";

// Note [Sampling streams]: the draws of one (node, layer, part): the Philox blocks keyed by the
// batch's seed at the counters {node's low word, node's high word, 2 · layer + part, 0, 1, 2, ...},
// two 64-bit numbers a block.
class NodeStream {
 public:
  NodeStream(std::uint64_t seed, std::int64_t node, std::int64_t layer, int part)
      : key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)},
        node_lo_(static_cast<std::uint32_t>(static_cast<std::uint64_t>(node))),
        node_hi_(static_cast<std::uint32_t>(static_cast<std::uint64_t>(node) >> 32)),
        layer_(static_cast<std::uint32_t>(2 * layer + part)) {}

  std::uint64_t next_u64() {
    if (used_ == 2) {
      words_ = xgrad::detail::philox4x32({node_lo_, node_hi_, layer_, block_++}, key_);
      used_ = 0;
    }
    const auto w = static_cast<std::size_t>(2 * used_++);
    return (std::uint64_t{words_[w]} << 32) | words_[w + 1];
  }
  /// Uniform on [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Uniform on [0, n), n >= 1, unbiased: draws below 2^64 mod n are rejected, so that the rest are
  /// a whole number of copies of [0, n).
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = (0 - n) % n;
    for (;;) {
      const std::uint64_t r = next_u64();
      if (r >= limit) return r % n;
    }
  }

 private:
  std::array<std::uint32_t, 2> key_;
  std::uint32_t node_lo_, node_hi_, layer_, block_ = 0;
  std::array<std::uint32_t, 4> words_{};
  int used_ = 2;
};

// splitmix64's finaliser: the batch seeds of NeighborLoader.
std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform draw of more than this many neighbours without replacement shuffles the entry numbers
// (O(degree)) instead of Floyd's algorithm, whose membership test is a scan of the draws so far.
constexpr std::int64_t kFloydMax = 64;

}  // namespace

Tensor Block::dst_nodes() const { return slice(src_nodes, 0, 0, num_dst()); }

// ---- NeighborSampler ----------------------------------------------------------------------------

struct NeighborSampler::Impl {
  Graph graph;
  std::vector<std::int64_t> fanouts;
  bool replace = false, weighted = false;
  graph::Direction direction = graph::Direction::in;
  int num_parts = 1;
  SparseCsr parts[2];             // the rows sampled: A (in, both) or Aᵀ (out); Aᵀ for both's out-part
  std::vector<double> cumsum[2];  // weighted: running sums of each row's values, per entry
  Tensor degree, degree_loops;    // (num_nodes,) of part 0, the graph's dtype
  // The relabelling maps (num_nodes entries, all -1 between calls), one per concurrent sample().
  std::mutex mutex;
  std::vector<std::vector<std::int64_t>> maps;

  double value(int part, std::int64_t k) const {
    const Tensor& v = parts[part].values();
    return v.dtype() == kFloat64 ? v.data<double>()[k] : static_cast<double>(v.data<float>()[k]);
  }
};

NeighborSampler::NeighborSampler(Graph graph, std::vector<std::int64_t> fanouts, bool replace,
                                 graph::Direction direction, bool weighted)
    : impl_(std::make_shared<Impl>()) {
  const std::int64_t n = graph.num_nodes();
  XGRAD_CHECK(n > 0, "{}: argument 'graph' has no nodes (num_nodes = 0): there is nothing to sample", kSampler);
  XGRAD_CHECK(!fanouts.empty(), "{}: argument 'fanouts' is empty: give one fan-out per layer (-1 for all neighbours)",
              kSampler);
  for (std::size_t l = 0; l < fanouts.size(); ++l)
    XGRAD_CHECK(fanouts[l] == -1 || fanouts[l] >= 1,
                "{}: argument 'fanouts' has {} at layer {}, but a fan-out must be >= 1, or -1 for all neighbours",
                kSampler, fanouts[l], l);
  Impl& s = *impl_;
  s.graph = graph;
  s.fanouts = std::move(fanouts);
  s.replace = replace;
  s.weighted = weighted;
  s.direction = direction;
  s.num_parts = direction == graph::Direction::both ? 2 : 1;
  s.parts[0] = direction == graph::Direction::out ? graph.reverse().adjacency() : graph.adjacency();
  if (direction == graph::Direction::both) s.parts[1] = graph.reverse().adjacency();
  for (int p = 0; p < s.num_parts; ++p) {
    if (!weighted) continue;
    const CsrPattern& pat = s.parts[p].pattern();
    const auto crow = pat.crow();
    std::vector<double>& cum = s.cumsum[p];
    cum.resize(static_cast<std::size_t>(pat.nnz()));
    for (std::int64_t i = 0; i < n; ++i) {
      double acc = 0.0;
      for (std::int64_t k = crow[static_cast<std::size_t>(i)]; k < crow[static_cast<std::size_t>(i) + 1]; ++k) {
        const double w = s.value(p, k);
        XGRAD_CHECK(std::isfinite(w) && w >= 0.0,
                    "{}: weighted sampling needs finite edge values >= 0, but the edge into node {} (entry {}) has {}",
                    kSampler, i, k, w);
        acc += w;
        cum[static_cast<std::size_t>(k)] = acc;
      }
    }
  }
  // Block::src_degree: part 0's row sums, and with a self-loop of weight 1 where there is none.
  std::vector<double> deg(static_cast<std::size_t>(n)), deg_loops(static_cast<std::size_t>(n));
  const CsrPattern& p0 = s.parts[0].pattern();
  const auto crow = p0.crow();
  const auto col = p0.col();
  parallel_for(0, n, grain_for(16), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      double acc = 0.0;
      bool loop = false;
      for (std::int64_t k = crow[static_cast<std::size_t>(i)]; k < crow[static_cast<std::size_t>(i) + 1]; ++k) {
        acc += s.value(0, k);
        loop = loop || col[static_cast<std::size_t>(k)] == i;
      }
      deg[static_cast<std::size_t>(i)] = acc;
      deg_loops[static_cast<std::size_t>(i)] = loop ? acc : acc + 1.0;
    }
  });
  s.degree = Tensor::from_vector(deg, {n}, graph.dtype());
  s.degree_loops = Tensor::from_vector(deg_loops, {n}, graph.dtype());
}

const Graph& NeighborSampler::graph() const { return impl_->graph; }
const std::vector<std::int64_t>& NeighborSampler::fanouts() const { return impl_->fanouts; }
bool NeighborSampler::replace() const { return impl_->replace; }
bool NeighborSampler::weighted() const { return impl_->weighted; }
graph::Direction NeighborSampler::direction() const { return impl_->direction; }

namespace {

// One part of one layer: for each target, the sampled entries of its row (entry numbers of the
// part's adjacency, increasing) and how often each was drawn.
struct Sampled {
  std::vector<std::int64_t> crow;  // (num_dst + 1)
  std::vector<std::int64_t> entry;
  std::vector<std::int64_t> count;
};

Sampled sample_part(const NeighborSampler::Impl& s, int part, std::span<const std::int64_t> targets, std::int64_t layer,
                    std::uint64_t seed) {
  const CsrPattern& pat = s.parts[part].pattern();
  const auto crow = pat.crow();
  const std::int64_t k = s.fanouts[static_cast<std::size_t>(layer)];
  const auto n_dst = static_cast<std::int64_t>(targets.size());
  const auto degree_of = [&](std::int64_t i) {
    const auto g = static_cast<std::size_t>(targets[static_cast<std::size_t>(i)]);
    return crow[g + 1] - crow[g];
  };
  // Room for each target's draws: all its entries, or at most k distinct ones.
  std::vector<std::int64_t> room(static_cast<std::size_t>(n_dst) + 1, 0);
  for (std::int64_t i = 0; i < n_dst; ++i) {
    const std::int64_t d = degree_of(i);
    room[static_cast<std::size_t>(i) + 1] = room[static_cast<std::size_t>(i)] + (k < 0 ? d : std::min(k, d));
  }
  std::vector<std::int64_t> entry(static_cast<std::size_t>(room[static_cast<std::size_t>(n_dst)])), count(entry.size());
  std::vector<std::int64_t> taken(static_cast<std::size_t>(n_dst));
  const std::int64_t work = k < 0 ? 64 : k * 16;  // a draw costs a Philox block or so
  parallel_for(0, n_dst, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> draws;
    std::vector<double> keys;
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t g = targets[static_cast<std::size_t>(i)];
      const std::int64_t first = crow[static_cast<std::size_t>(g)];
      const std::int64_t d = crow[static_cast<std::size_t>(g) + 1] - first;
      std::int64_t* out = entry.data() + room[static_cast<std::size_t>(i)];
      std::int64_t* times = count.data() + room[static_cast<std::size_t>(i)];
      std::int64_t m = 0;
      draws.clear();
      if (k < 0 || (!s.replace && d <= k)) {
        for (std::int64_t t = 0; t < d; ++t) draws.push_back(t);
      } else if (d > 0) {
        NodeStream rng(seed, g, layer, part);
        const double* cum = s.weighted ? s.cumsum[part].data() + first : nullptr;
        if (s.replace) {
          const double total = s.weighted ? cum[d - 1] : 0.0;
          if (!s.weighted || total > 0.0)
            for (std::int64_t t = 0; t < k; ++t) {
              if (!s.weighted) {
                draws.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(d))));
                continue;
              }
              // The first entry whose running sum exceeds u · total (a zero-weight entry never is).
              const double u = rng.uniform() * total;
              const auto at = static_cast<std::int64_t>(std::upper_bound(cum, cum + d, u) - cum);
              draws.push_back(std::min(at, d - 1));
            }
        } else if (!s.weighted && k <= kFloydMax) {
          // Floyd's algorithm: k distinct numbers of [0, d), each k-subset equally likely.
          for (std::int64_t j = d - k; j < d; ++j) {
            const auto t = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(j + 1)));
            draws.push_back(std::find(draws.begin(), draws.end(), t) == draws.end() ? t : j);
          }
        } else if (!s.weighted) {
          draws.resize(static_cast<std::size_t>(d));
          std::iota(draws.begin(), draws.end(), std::int64_t{0});
          for (std::int64_t t = 0; t < k; ++t)
            std::swap(draws[static_cast<std::size_t>(t)],
                      draws[static_cast<std::size_t>(
                          t + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(d - t))))]);
          draws.resize(static_cast<std::size_t>(k));
        } else {
          // Efraimidis-Spirakis: key log(u) / w with u in (0, 1]; the k largest keys. A weight of 0
          // gives -inf, never taken.
          keys.resize(static_cast<std::size_t>(d));
          for (std::int64_t t = 0; t < d; ++t) {
            const double w = cum[t] - (t > 0 ? cum[t - 1] : 0.0);
            const double u = 1.0 - rng.uniform();
            keys[static_cast<std::size_t>(t)] = w > 0.0 ? std::log(u) / w : -std::numeric_limits<double>::infinity();
          }
          draws.resize(static_cast<std::size_t>(d));
          std::iota(draws.begin(), draws.end(), std::int64_t{0});
          const auto larger = [&](std::int64_t a, std::int64_t c) {
            const double ka = keys[static_cast<std::size_t>(a)], kc = keys[static_cast<std::size_t>(c)];
            return ka > kc || (ka == kc && a < c);
          };
          std::nth_element(draws.begin(), draws.begin() + (k - 1), draws.end(), larger);
          draws.resize(static_cast<std::size_t>(k));
          std::erase_if(draws, [&](std::int64_t t) { return std::isinf(keys[static_cast<std::size_t>(t)]); });
        }
      }
      std::sort(draws.begin(), draws.end());
      for (std::size_t t = 0; t < draws.size(); ++t) {
        if (m > 0 && out[m - 1] == first + draws[t]) {
          ++times[m - 1];
          continue;
        }
        out[m] = first + draws[t];
        times[m] = 1;
        ++m;
      }
      taken[static_cast<std::size_t>(i)] = m;
    }
  });
  Sampled r;
  r.crow.assign(static_cast<std::size_t>(n_dst) + 1, 0);
  for (std::int64_t i = 0; i < n_dst; ++i)
    r.crow[static_cast<std::size_t>(i) + 1] = r.crow[static_cast<std::size_t>(i)] + taken[static_cast<std::size_t>(i)];
  r.entry.resize(static_cast<std::size_t>(r.crow.back()));
  r.count.resize(r.entry.size());
  parallel_for(0, n_dst, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const auto from = static_cast<std::ptrdiff_t>(room[static_cast<std::size_t>(i)]);
      const auto to = static_cast<std::ptrdiff_t>(r.crow[static_cast<std::size_t>(i)]);
      const auto len = static_cast<std::ptrdiff_t>(taken[static_cast<std::size_t>(i)]);
      std::copy(entry.begin() + from, entry.begin() + from + len, r.entry.begin() + to);
      std::copy(count.begin() + from, count.begin() + from + len, r.count.begin() + to);
    }
  });
  return r;
}

// A relabelling map taken from the sampler's pool for one sample() call; the entries it set are
// reset (to -1) on return, also when an error is thrown, so the map goes back clean.
class MapLease {
 public:
  explicit MapLease(NeighborSampler::Impl& s) : s_(s) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.maps.empty()) {
        map_ = std::move(s.maps.back());
        s.maps.pop_back();
      }
    }
    if (map_.empty()) map_.assign(static_cast<std::size_t>(s.graph.num_nodes()), -1);
  }
  ~MapLease() {
    for (const std::int64_t g : touched_) map_[static_cast<std::size_t>(g)] = -1;
    std::lock_guard<std::mutex> lock(s_.mutex);
    s_.maps.push_back(std::move(map_));
  }
  MapLease(const MapLease&) = delete;
  MapLease& operator=(const MapLease&) = delete;
  /// The local id of node g, -1 when it has none.
  std::int64_t at(std::int64_t g) const { return map_[static_cast<std::size_t>(g)]; }
  void set(std::int64_t g, std::int64_t local) {
    touched_.push_back(g);
    map_[static_cast<std::size_t>(g)] = local;
  }
  /// Forget every local id (for the next layer).
  void reset() {
    for (const std::int64_t g : touched_) map_[static_cast<std::size_t>(g)] = -1;
    touched_.clear();
  }

 private:
  NeighborSampler::Impl& s_;
  std::vector<std::int64_t> map_, touched_;
};

// The block's CSR of one part: each row's sampled entries as local columns, sorted, with their
// values (the edge's value times its count).
SparseCsr block_csr(const NeighborSampler::Impl& s, int part, const Sampled& smp,
                    const std::vector<std::int64_t>& local, std::int64_t n_src) {
  const auto n_dst = static_cast<std::int64_t>(smp.crow.size()) - 1;
  std::vector<std::int64_t> col(local.size());
  std::vector<double> val(local.size());
  parallel_for(0, n_dst, grain_for(16), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::size_t> order;
    for (std::int64_t i = b; i < e; ++i) {
      const auto lo = static_cast<std::size_t>(smp.crow[static_cast<std::size_t>(i)]);
      const auto hi = static_cast<std::size_t>(smp.crow[static_cast<std::size_t>(i) + 1]);
      order.resize(hi - lo);
      std::iota(order.begin(), order.end(), lo);
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return local[a] < local[c]; });
      for (std::size_t t = 0; t < order.size(); ++t) {
        const std::size_t k = order[t];
        col[lo + t] = local[k];
        val[lo + t] = s.value(part, smp.entry[k]) * static_cast<double>(smp.count[k]);
      }
    }
  });
  const auto nnz = static_cast<std::int64_t>(col.size());
  return SparseCsr(CsrPattern::from_indices(smp.crow, col, n_dst, n_src, kSample),
                   Tensor::from_vector(val, {nnz}, s.graph.dtype()));
}

}  // namespace

MiniBatch NeighborSampler::sample(std::span<const std::int64_t> seeds, std::uint64_t seed) const {
  Impl& s = *impl_;
  const std::int64_t n = s.graph.num_nodes();
  XGRAD_CHECK(!seeds.empty(), "{}: argument 'seeds' is empty", kSample);
  for (std::size_t i = 0; i < seeds.size(); ++i)
    XGRAD_CHECK(seeds[i] >= 0 && seeds[i] < n,
                "{}: argument 'seeds' has {} at position {}, outside [0, num_nodes = {})", kSample, seeds[i], i, n);
  MapLease map(s);
  std::vector<std::int64_t> targets(seeds.begin(), seeds.end());
  const auto layers = static_cast<std::int64_t>(s.fanouts.size());
  MiniBatch batch;
  batch.blocks.resize(static_cast<std::size_t>(layers));
  for (std::int64_t layer = layers - 1; layer >= 0; --layer) {
    // Note [Blocks]: the targets are the first sources.
    std::vector<std::int64_t> src;
    src.reserve(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const std::int64_t g = targets[i];
      XGRAD_CHECK(map.at(g) < 0,
                  "{}: argument 'seeds' has node {} twice (at positions {} and {}); seeds must be distinct", kSample, g,
                  map.at(g), i);
      map.set(g, static_cast<std::int64_t>(i));
      src.push_back(g);
    }
    Sampled parts[2];
    std::vector<std::int64_t> local[2];
    for (int p = 0; p < s.num_parts; ++p) {
      parts[p] = sample_part(s, p, targets, layer, seed);
      const auto col = s.parts[p].pattern().col();
      local[p].resize(parts[p].entry.size());
      for (std::size_t t = 0; t < parts[p].entry.size(); ++t) {
        const std::int64_t g = col[static_cast<std::size_t>(parts[p].entry[t])];
        std::int64_t id = map.at(g);
        if (id < 0) {
          id = static_cast<std::int64_t>(src.size());
          map.set(g, id);
          src.push_back(g);
        }
        local[p][t] = id;
      }
    }
    const auto n_src = static_cast<std::int64_t>(src.size());
    Block& block = batch.blocks[static_cast<std::size_t>(layer)];
    block.direction = s.direction;
    block.adj = block_csr(s, 0, parts[0], local[0], n_src);
    if (s.num_parts == 2) block.adj_out = block_csr(s, 1, parts[1], local[1], n_src);
    block.src_nodes = Tensor::from_vector(src, {n_src});
    block.src_degree = index_select(s.degree, 0, src);
    block.src_degree_loops = index_select(s.degree_loops, 0, src);
    map.reset();
    targets = std::move(src);
  }
  batch.input_nodes = batch.blocks.front().src_nodes;
  batch.seeds = Tensor::from_vector(std::vector<std::int64_t>(seeds.begin(), seeds.end()),
                                    {static_cast<std::int64_t>(seeds.size())});
  return batch;
}

MiniBatch NeighborSampler::sample(const Tensor& seeds, std::uint64_t seed) const {
  XGRAD_CHECK(seeds.defined() && seeds.dim() == 1 && (seeds.dtype() == kInt64 || seeds.dtype() == kInt32),
              "{}: argument 'seeds' must be a 1-d int64 or int32 tensor, got {} {}", kSample,
              seeds.defined() ? std::string(dtype_name(seeds.dtype())) : std::string("undefined"),
              seeds.defined() ? shape_str(seeds.shape()) : std::string());
  const Tensor ids = seeds.dtype() == kInt64 ? seeds : seeds.to(kInt64);
  return sample(std::span<const std::int64_t>(ids.data<std::int64_t>(), static_cast<std::size_t>(ids.numel())), seed);
}

// ---- NeighborLoader -----------------------------------------------------------------------------

// Note [Sampling ahead]: one pass's state. The task that samples a batch holds copies of what it
// reads (the sampler and the labels are shared handles), never the loader or this state.
struct NeighborLoader::Pass {
  std::vector<std::int64_t> order;  // the seeds of the pass, in batch order
  std::uint64_t epoch = 0;
  std::size_t batches = 0;
  std::future<MiniBatch> next;  // the batch in flight
  std::size_t next_batch = 0;
  MiniBatch current;
  std::size_t current_batch = static_cast<std::size_t>(-1);

  void launch(const NeighborSampler& sampler, const Tensor& labels, const DataLoaderOptions& options,
              std::size_t batch) {
    const std::size_t b = options.batch_size_;
    const std::size_t lo = batch * b, hi = std::min(order.size(), lo + b);
    std::vector<std::int64_t> seeds(order.begin() + static_cast<std::ptrdiff_t>(lo),
                                    order.begin() + static_cast<std::ptrdiff_t>(hi));
    const std::uint64_t seed = mix(mix(options.seed_, epoch), batch);
    next = std::async(std::launch::async, [sampler, labels, seeds = std::move(seeds), seed] {
      MiniBatch m = sampler.sample(seeds, seed);
      if (labels.defined()) {
        NoGradGuard no_grad;
        m.labels = index_select(labels, 0, m.seeds);
      }
      return m;
    });
    next_batch = batch;
  }
  // Waits for the batch in flight and drops it (or its error): a pass left early.
  void wait() {
    if (!next.valid()) return;
    next.wait();
    next = {};
  }
};

NeighborLoader::NeighborLoader(NeighborSampler sampler, Tensor input_nodes, Tensor labels, DataLoaderOptions options,
                               std::shared_ptr<Sampler> index_sampler)
    : sampler_(std::move(sampler)), labels_(std::move(labels)), options_(options), pass_(std::make_unique<Pass>()) {
  const std::int64_t n = sampler_.graph().num_nodes();
  XGRAD_CHECK(input_nodes.defined() && input_nodes.dim() == 1 && input_nodes.numel() > 0 &&
                  (input_nodes.dtype() == kInt64 || input_nodes.dtype() == kInt32),
              "{}: argument 'input_nodes' must be a non-empty 1-d int64 or int32 tensor of seed nodes, got {} {}",
              kLoader, input_nodes.defined() ? std::string(dtype_name(input_nodes.dtype())) : std::string("undefined"),
              input_nodes.defined() ? shape_str(input_nodes.shape()) : std::string());
  input_nodes_ = input_nodes.dtype() == kInt64 ? input_nodes : input_nodes.to(kInt64);
  const std::int64_t* ids = input_nodes_.data<std::int64_t>();
  for (std::int64_t i = 0; i < input_nodes_.numel(); ++i)
    XGRAD_CHECK(ids[i] >= 0 && ids[i] < n,
                "{}: argument 'input_nodes' has {} at position {}, outside [0, num_nodes = {})", kLoader, ids[i], i, n);
  if (labels_.defined())
    XGRAD_CHECK(labels_.dim() >= 1 && labels_.size(0) == n,
                "{}: argument 'labels' has shape {} but must have num_nodes = {} rows (indexed by node id)", kLoader,
                shape_str(labels_.shape()), n);
  XGRAD_CHECK(options_.batch_size_ > 0, "{}: batch_size must be >= 1, got 0", kLoader);
  XGRAD_CHECK(!(index_sampler && options_.shuffle_),
              "{}: shuffle must be false when an index sampler is given (the sampler decides the order)", kLoader);
  const auto count = static_cast<std::size_t>(input_nodes_.numel());
  if (index_sampler)
    index_sampler_ = std::move(index_sampler);
  else if (options_.shuffle_)
    index_sampler_ = std::make_shared<RandomSampler>(count, options_.seed_);
  else
    index_sampler_ = std::make_shared<SequentialSampler>(count);
}

NeighborLoader::~NeighborLoader() { pass_->wait(); }

std::size_t NeighborLoader::size() const {
  const std::size_t n = index_sampler_->size(), b = options_.batch_size_;
  return options_.drop_last_ ? n / b : (n + b - 1) / b;
}

NeighborLoader::iterator NeighborLoader::begin() {
  Pass& p = *pass_;
  p.wait();
  const std::vector<std::size_t> positions = index_sampler_->indices();
  const auto count = static_cast<std::size_t>(input_nodes_.numel());
  const std::int64_t* ids = input_nodes_.data<std::int64_t>();
  p.order.resize(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    XGRAD_CHECK(positions[i] < count, "{}: the index sampler gave position {}, but input_nodes has {} nodes", kLoader,
                positions[i], count);
    p.order[i] = ids[positions[i]];
  }
  p.epoch = index_sampler_->epoch();
  index_sampler_->set_epoch(p.epoch + 1);
  p.batches = size();
  p.current_batch = static_cast<std::size_t>(-1);
  p.current = MiniBatch();
  if (p.batches > 0) p.launch(sampler_, labels_, options_, 0);
  return iterator(this, 0);
}

NeighborLoader::iterator NeighborLoader::end() { return iterator(this, size()); }

MiniBatch& NeighborLoader::fetch(std::size_t batch) {
  Pass& p = *pass_;
  if (batch == p.current_batch) return p.current;
  XGRAD_CHECK(batch < p.batches && p.next.valid() && p.next_batch == batch,
              "{}: batch {} of {} is not the next one of this pass (iterate in order, from begin())", kLoader, batch,
              p.batches);
  p.current = p.next.get();  // rethrows an error of the sampling
  p.current_batch = batch;
  if (batch + 1 < p.batches) p.launch(sampler_, labels_, options_, batch + 1);
  return p.current;
}

MiniBatch& NeighborLoader::iterator::operator*() { return loader_->fetch(batch_); }

NeighborLoader::iterator& NeighborLoader::iterator::operator++() {
  ++batch_;
  return *this;
}

// ---- layerwise_inference ------------------------------------------------------------------------

Tensor layerwise_inference(const Graph& graph, const Tensor& x, const std::vector<BlockLayer>& layers,
                           std::int64_t chunk_size, graph::Direction direction) {
  constexpr const char* op = "layerwise_inference";
  XGRAD_CHECK(!layers.empty(), "{}: argument 'layers' is empty", op);
  XGRAD_CHECK(chunk_size >= 1, "{}: argument 'chunk_size' must be >= 1, got {}", op, chunk_size);
  const std::int64_t n = graph.num_nodes();
  XGRAD_CHECK(x.defined() && x.dim() >= 1 && x.size(0) == n,
              "{}: argument 'x' has shape {} but must have num_nodes = {} rows", op,
              x.defined() ? shape_str(x.shape()) : std::string("undefined"), n);
  NoGradGuard no_grad;
  const NeighborSampler sampler(graph, {-1}, false, direction);
  Tensor h = x;
  std::vector<std::int64_t> ids;
  for (const BlockLayer& layer : layers) {
    Tensors outs;
    for (std::int64_t lo = 0; lo < n; lo += chunk_size) {
      const std::int64_t hi = std::min(n, lo + chunk_size);
      ids.resize(static_cast<std::size_t>(hi - lo));
      std::iota(ids.begin(), ids.end(), lo);
      const MiniBatch mb = sampler.sample(ids, 0);
      const Block& block = mb.blocks.front();
      outs.push_back(layer(index_select(h, 0, block.src_nodes), block));
    }
    h = outs.size() == 1 ? outs.front() : concat(outs, 0);
  }
  return h;
}

}  // namespace xgrad::nn
