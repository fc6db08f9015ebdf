// Sparse ops benchmark, ours. The PyTorch peer is torch_sparse_ops.py (the same cases on the same
// graphs); run_sparse_ops.sh runs both with 1 and 2 threads and prints the ratios.
// Rows: `case,impl,threads,metric,value`; a case is `<op>:<graph>:f<F>`.
//
// Graphs:
//   gcn     index_ops.cpp's: N = 10,000 nodes, E = 168,592 edges from splitmix64 (edge k has hash
//           h = splitmix64(k), source h % N, destination floor(N * u^2) with u uniform in [0, 1) from
//           splitmix64(h), weight in [0.5, 1.5)); F = 64
//   rmat17  R-MAT, 2^17 = 131,072 nodes, 16 edges per node (Note [R-MAT graphs] in gcn_graph.hpp);
//           F = 16, 64, 256
//   rmat17deg  rmat17 with its nodes renumbered by descending column count (spmm only; no peer):
//           what a locality-improving node order gains
//   rmat20  R-MAT, 2^20 = 1,048,576 nodes, 16.8M edges; F = 16, 64 (with --big only: minutes per run)
// each as the sparse (N x N) matrix A[dst, src] = weight (duplicate edges summed: sparse_coo_tensor),
// so that A·X is the GCN aggregation out[dst] += w · X[src]. float32.
//
// Cases (fwd_ms: forward; fwdbwd_ms: forward and backward with a seed of ones):
//   spmm           Y = A·X, gradient to X (Aᵀ·G through the cached transposed pattern)
//   spmm_weights   Y = A·X, gradient to X and to A's values (sddmm(A, G, X)) (gcn only)
//   sddmm          s[k] = <X[dst], Z[src]> on the edges, gradients to X and Z (gcn only)
//   sparse_softmax sparse_softmax(A): the softmax over each row's entries, gradient to A's values
//                  (gcn only, at f64 only as a case name: the values are one column; no peer)
//
// Memory-bandwidth bound: `stream,xgrad,T,gbps,..` is the copy bandwidth of this machine at T threads
// (STREAM's copy: 2 x 512 MB arrays, bytes read + bytes written over the median time of 5 copies);
// each spmm case also prints bound_fwd_ms and bound_fwdbwd_ms, the bytes the op must move at the
// least over that bandwidth: CSR row offsets and int64 columns, float32 values, X read once, Y
// written once (forward); the backward adds the transposed pattern (offsets, columns and the int64
// permutation), the values, G read once and dX written once. bound / measured is the fraction of
// the bandwidth bound reached. gathered_gbps: nnz x F x 4 bytes (a row of X per entry, what the
// gather moves without reuse) over the forward's time.
//
// Gathers: `gather_<S>MB,xgrad,T,ns_per_line,..` is the time per random 64-byte line read from a
// working set of S MB (4 to 128), the access of spmm's rows of X at F = 16 with the same prefetch
// distance, per line and thread (T threads gather from one shared set; median of 5 passes over 4M
// lines each). Where it jumps is the cache the gather of X actually gets on this machine.
//
// usage: sparse_ops_bench [--threads N] [--reps N] [--case NAME] [--big]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "gcn_graph.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/sparse.hpp"

namespace {

using namespace xgrad;
using namespace xgrad::bench;  // NOLINT(google-build-using-namespace)

int g_threads = 1;
int g_reps = 15;

SparseCsr to_matrix(const EdgeList& g, std::int64_t n) {
  const auto e = static_cast<std::int64_t>(g.dst.size());
  std::vector<std::int64_t> idx(g.dst);  // (2, E): rows (dst) then columns (src)
  idx.insert(idx.end(), g.src.begin(), g.src.end());
  return sparse_coo_tensor(Tensor::from_data(std::span<const std::int64_t>(idx), {2, e}),
                           Tensor::from_data(std::span<const float>(g.weight), {e}), {n, n});
}

/// g with node v renamed to its rank by the number of edges whose source it is (descending, ties
/// by id), in both columns: the hub rows of X that spmm reads most come first and share lines of cache.
EdgeList degree_sorted(EdgeList g, std::int64_t n) {
  std::vector<std::int64_t> reads(static_cast<std::size_t>(n), 0), order(static_cast<std::size_t>(n));
  for (const std::int64_t v : g.src) ++reads[static_cast<std::size_t>(v)];
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return reads[static_cast<std::size_t>(a)] > reads[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> label(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) label[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
  for (std::int64_t& v : g.src) v = label[static_cast<std::size_t>(v)];
  for (std::int64_t& v : g.dst) v = label[static_cast<std::size_t>(v)];
  return g;
}

/// STREAM copy bandwidth in GB/s at the current thread count (bytes read + written).
double stream_gbps() {
  const std::int64_t n = std::int64_t{128} << 20;  // floats: 512 MB per array
  std::vector<float> a(static_cast<std::size_t>(n), 1.0f), b(static_cast<std::size_t>(n), 0.0f);
  const double ms = median_ms(
      [&] {
        parallel_for(0, n, std::int64_t{1} << 20, [&](std::int64_t lo, std::int64_t hi) {
          std::memcpy(b.data() + lo, a.data() + lo, static_cast<std::size_t>(hi - lo) * sizeof(float));
        });
      },
      5);
  return 2.0 * static_cast<double>(n) * sizeof(float) / (ms * 1e6);
}

/// Nanoseconds per random 64-byte line gathered from a working set of `mb` MB at the current thread
/// count (per line of one thread: each thread gathers its share of the lines), prefetched 12 lines
/// ahead as spmm prefetches its rows.
double gather_ns_per_line(std::int64_t mb) {
  const std::int64_t lines = (mb << 20) / 64, n = std::int64_t{1} << 22;
  std::vector<float> x(static_cast<std::size_t>(lines * 16), 1.0f);
  std::vector<std::uint32_t> at(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    at[static_cast<std::size_t>(k)] =
        static_cast<std::uint32_t>(splitmix64(static_cast<std::uint64_t>(k)) % static_cast<std::uint64_t>(lines));
  std::vector<float> sink(64, 0.0f);
  const double ms = median_ms(
      [&] {
        parallel_for(0, n, std::int64_t{1} << 16, [&](std::int64_t lo, std::int64_t hi) {
          float acc[16] = {};
          for (std::int64_t k = lo; k < hi; ++k) {
            if (k + 12 < hi) __builtin_prefetch(x.data() + std::size_t{at[static_cast<std::size_t>(k + 12)]} * 16);
            const float* line = x.data() + std::size_t{at[static_cast<std::size_t>(k)]} * 16;
            for (int j = 0; j < 16; ++j) acc[j] += line[j];
          }
          sink[static_cast<std::size_t>(lo >> 16) % 64] += acc[0] + acc[15];  // keeps the loads
        });
      },
      5);
  return ms * 1e6 * g_threads / static_cast<double>(n);
}

void row(const std::string& c, const char* metric, double v) { print_row(c, g_threads, metric, v); }

struct Case {
  std::string name;
  std::function<Tensor(bool grad)> forward;
  std::function<void()> clear;
};

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  bool big = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      g_threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      g_reps = std::atoi(argv[++i]);
    else if (a == "--case" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--big")
      big = true;
    else {
      std::fprintf(stderr, "usage: sparse_ops_bench [--threads N] [--reps N] [--case NAME] [--big]\n");
      return 2;
    }
  }
  set_num_threads(g_threads);
  const double gbps = stream_gbps();
  std::printf("stream,xgrad,%d,gbps,%.6g\n", g_threads, gbps);
  for (const std::int64_t mb : {4, 8, 16, 32, 64, 128})
    std::printf("gather_%ldMB,xgrad,%d,ns_per_line,%.6g\n", static_cast<long>(mb), g_threads, gather_ns_per_line(mb));

  struct GraphCase {
    std::string name;
    EdgeList edges;
    std::int64_t nodes;
    std::vector<std::int64_t> widths;
    int reps;
  };
  std::vector<GraphCase> graphs;
  graphs.push_back({"gcn", gcn_edges(), kNodes, {kFeatures}, g_reps});
  graphs.push_back({"rmat17", rmat_edges(17), std::int64_t{1} << 17, {16, 64, 256}, std::max(3, g_reps / 3)});
  // The same graph with its nodes relabelled by how often spmm reads their row of X (entries per
  // column, descending; ties by id): a locality-improving order, as a caller could apply once.
  graphs.push_back({"rmat17deg",
                    degree_sorted(rmat_edges(17), std::int64_t{1} << 17),
                    std::int64_t{1} << 17,
                    {16, 64, 256},
                    std::max(3, g_reps / 3)});
  if (big) graphs.push_back({"rmat20", rmat_edges(20), std::int64_t{1} << 20, {16, 64}, 3});
  Generator gen(1);
  for (GraphCase& gc : graphs) {
    const SparseCsr a = to_matrix(gc.edges, gc.nodes);
    gc.edges = {};
    (void)a.pattern().transposed();  // the cached transpose, built once per pattern (as a training loop sees it)
    Tensor Wg = a.values().detach().set_requires_grad();
    const SparseCsr aw = a.with_values(Wg);
    for (const std::int64_t F : gc.widths) {
      const Tensor X = Tensor::randn({gc.nodes, F}, gen), Z = Tensor::randn({gc.nodes, F}, gen);
      Tensor Xg = X.detach().set_requires_grad(), Zg = Z.detach().set_requires_grad();
      const auto clear = [&] {
        Xg.zero_grad();
        Zg.zero_grad();
        Wg.zero_grad();
      };
      std::vector<Case> cases = {{"spmm", [&](bool grad) { return spmm(a, grad ? Xg : X); }, clear}};
      if (gc.name == "gcn") {
        cases.push_back({"spmm_weights", [&](bool grad) { return grad ? spmm(aw, Xg) : spmm(a, X); }, clear});
        cases.push_back({"sddmm", [&](bool grad) { return grad ? sddmm(a, Xg, Zg) : sddmm(a, X, Z); }, clear});
        cases.push_back({"sparse_softmax", [&](bool grad) { return sparse_softmax(grad ? aw : a).values(); }, clear});
      }
      const std::string suffix = ":" + gc.name + ":f" + std::to_string(F);
      for (const Case& c : cases) {
        if (!only.empty() && c.name != only) continue;
        const std::string name = c.name + suffix;
        const double fwd_ms = median_ms([&] { (void)c.forward(false); }, gc.reps);
        row(name, "fwd_ms", fwd_ms);
        const Tensor out = c.forward(false);
        const Tensor seed = Tensor::ones(out.shape());
        row(name, "fwdbwd_ms",
            median_ms(
                [&] {
                  c.clear();
                  c.forward(true).backward(seed);
                },
                gc.reps));
        if (c.name == "spmm") {
          const double n = static_cast<double>(gc.nodes), nnz = static_cast<double>(a.nnz()),
                       f = static_cast<double>(F);
          const double fwd_bytes = 8 * (n + 1) + 12 * nnz + 8 * n * f;
          const double bwd_bytes = 8 * (n + 1) + 20 * nnz + 8 * n * f;
          row(name, "bound_fwd_ms", fwd_bytes / (gbps * 1e6));
          // What the forward's gather moves at the least without reuse, one row of X per entry, over
          // its time: how close the kernel runs to the copy bandwidth.
          row(name, "gathered_gbps", nnz * f * 4 / (fwd_ms * 1e6));
          row(name, "bound_fwdbwd_ms", (fwd_bytes + bwd_bytes) / (gbps * 1e6));
        }
      }
    }
    std::printf("# %s: %lld nodes, nnz after summing duplicate edges %lld; threads in use: %d\n", gc.name.c_str(),
                static_cast<long long>(gc.nodes), static_cast<long long>(a.nnz()), get_num_threads());
  }
  return 0;
}
