// Sparse ops benchmark, ours. The PyTorch peer is torch_sparse_ops.py (the same cases on the same
// graph); run_sparse_ops.sh runs both with 1 and 2 threads and prints the ratios.
// Rows: `case,impl,threads,metric,value`.
//
// The graph is index_ops.cpp's: N = 10,000 nodes, E = 168,592 edges from splitmix64 (edge k has
// hash h = splitmix64(k), source h % N, destination floor(N * u^2) with u uniform in [0, 1) from
// splitmix64(h), weight in [0.5, 1.5)), as the sparse (N x N) matrix A[dst, src] = weight
// (duplicate edges summed: sparse_coo_tensor), so that A·X is the GCN aggregation
// out[dst] += w · X[src]. Features F = 64, float32.
//
// Cases (fwd_ms: forward; fwdbwd_ms: forward and backward with a seed of ones):
//   spmm           Y = A·X, gradient to X (Aᵀ·G through the cached transposed pattern)
//   spmm_weights   Y = A·X, gradient to X and to A's values (sddmm(A, G, X))
//   sddmm          s[k] = <X[dst], Z[src]> on the edges, gradients to X and Z
//
// usage: sparse_ops_bench [--threads N] [--reps N] [--case NAME]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
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

SparseCsr make_graph() {
  const EdgeList g = gcn_edges();
  std::vector<std::int64_t> idx(g.dst);  // (2, E): rows (dst) then columns (src)
  idx.insert(idx.end(), g.src.begin(), g.src.end());
  const std::vector<float>& w = g.weight;
  return sparse_coo_tensor(Tensor::from_data(std::span<const std::int64_t>(idx), {2, kEdges}),
                           Tensor::from_data(std::span<const float>(w), {kEdges}), {kNodes, kNodes});
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
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      g_threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      g_reps = std::atoi(argv[++i]);
    else if (a == "--case" && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: sparse_ops_bench [--threads N] [--reps N] [--case NAME]\n");
      return 2;
    }
  }
  set_num_threads(g_threads);
  const SparseCsr a = make_graph();
  Generator gen(1);
  const Tensor X = Tensor::randn({kNodes, kFeatures}, gen), Z = Tensor::randn({kNodes, kFeatures}, gen);
  Tensor Xg = X.detach().set_requires_grad(), Zg = Z.detach().set_requires_grad();
  Tensor Wg = a.values().detach().set_requires_grad();
  const SparseCsr aw = a.with_values(Wg);
  (void)a.pattern().transposed();  // the cached transpose, built once per pattern (as a training loop sees it)
  const auto clear = [&] {
    Xg.zero_grad();
    Zg.zero_grad();
    Wg.zero_grad();
  };
  const std::vector<Case> cases = {
      {"spmm", [&](bool grad) { return spmm(a, grad ? Xg : X); }, clear},
      {"spmm_weights", [&](bool grad) { return grad ? spmm(aw, Xg) : spmm(a, X); }, clear},
      {"sddmm", [&](bool grad) { return grad ? sddmm(a, Xg, Zg) : sddmm(a, X, Z); }, clear},
  };
  for (const Case& c : cases) {
    if (!only.empty() && c.name != only) continue;
    row(c.name, "fwd_ms", median_ms([&] { (void)c.forward(false); }, g_reps));
    const Tensor out = c.forward(false);
    const Tensor seed = Tensor::ones(out.shape());
    row(c.name, "fwdbwd_ms",
        median_ms(
            [&] {
              c.clear();
              c.forward(true).backward(seed);
            },
            g_reps));
  }
  std::printf("# nnz after summing duplicate edges: %lld; threads in use: %d\n", static_cast<long long>(a.nnz()),
              get_num_threads());
  return 0;
}
