#pragma once
// The graph and timer shared by index_ops.cpp and sparse_ops.cpp (their PyTorch peers share
// torch_index_ops.py's): N = 10,000 nodes, E = 168,592 edges from splitmix64. Edge k has hash
// h = splitmix64(k), source h % N, destination floor(N * u^2) with u uniform in [0, 1) from
// splitmix64(h) (in-degrees skewed to low ids), weight in [0.5, 1.5). Features F = 64.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace xgrad::bench {

constexpr std::int64_t kNodes = 10000, kEdges = 168592, kFeatures = 64;

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct EdgeList {
  std::vector<std::int64_t> src, dst;
  std::vector<float> weight;
};

inline EdgeList gcn_edges() {
  EdgeList g{std::vector<std::int64_t>(kEdges), std::vector<std::int64_t>(kEdges), std::vector<float>(kEdges)};
  for (std::int64_t k = 0; k < kEdges; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const std::uint64_t h = splitmix64(static_cast<std::uint64_t>(k));
    const double u = static_cast<double>(splitmix64(h) >> 11) * 0x1.0p-53;
    g.src[i] = static_cast<std::int64_t>(h % kNodes);
    g.dst[i] = std::min<std::int64_t>(kNodes - 1, static_cast<std::int64_t>(kNodes * u * u));
    g.weight[i] = 0.5f + static_cast<float>((h >> 40) & 0xFFFF) / 65536.0f;
  }
  return g;
}

/// Note [R-MAT graphs]: a power-law graph of N = 2^scale nodes and E = 16 N edges (Chakrabarti et
/// al.'s recursive matrix, quadrant probabilities a, b, c, d = 0.57, 0.19, 0.19, 0.05, Graph500's).
/// Edge k descends `scale` levels; at level l, u = (splitmix64(k * 64 + l) >> 11) * 2^-53 picks the
/// quadrant (u < a: top left; < a + b: top right; < a + b + c: bottom left; else bottom right), which
/// sets bit (scale - 1 - l) of the row (dst) and of the column (src). Weight 1. torch_sparse_ops.py
/// draws the same edges with numpy; duplicates are summed (sparse_coo_tensor) on both sides.
inline EdgeList rmat_edges(int scale) {
  const std::int64_t n_edges = std::int64_t{16} << scale;
  EdgeList g{std::vector<std::int64_t>(static_cast<std::size_t>(n_edges)),
             std::vector<std::int64_t>(static_cast<std::size_t>(n_edges)),
             std::vector<float>(static_cast<std::size_t>(n_edges), 1.0f)};
  for (std::int64_t k = 0; k < n_edges; ++k) {
    std::int64_t r = 0, c = 0;
    for (int l = 0; l < scale; ++l) {
      const double u =
          static_cast<double>(splitmix64(static_cast<std::uint64_t>(k) * 64 + static_cast<std::uint64_t>(l)) >> 11) *
          0x1.0p-53;
      const std::int64_t bit = std::int64_t{1} << (scale - 1 - l);
      if (u >= 0.57 + 0.19 + 0.19)
        r |= bit, c |= bit;
      else if (u >= 0.57 + 0.19)
        r |= bit;
      else if (u >= 0.57)
        c |= bit;
    }
    g.dst[static_cast<std::size_t>(k)] = r;
    g.src[static_cast<std::size_t>(k)] = c;
  }
  return g;
}

/// One CSV row `case,xgrad,threads,metric,value`.
inline void print_row(const std::string& c, int threads, const char* metric, double v) {
  std::printf("%s,xgrad,%d,%s,%.6g\n", c.c_str(), threads, metric, v);
  std::fflush(stdout);
}

/// Median wall time of `reps` calls in ms, after a warm-up of at least 0.3 s (and two calls): the
/// first calls of a process run slow on fresh pages.
inline double median_ms(const std::function<void()>& fn, int reps) {
  using Clock = std::chrono::steady_clock;
  const auto w0 = Clock::now();
  for (int i = 0; i < 2 || Clock::now() - w0 < std::chrono::milliseconds(300); ++i) fn();
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    ts.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

}  // namespace xgrad::bench
