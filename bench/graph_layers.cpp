// Graph layer steps, ours. The PyTorch peer is torch_graph_layers.py: the same layers written the way
// PyTorch Geometric computes them (index_select of the end points, scatter_reduce / index_add_ to the
// targets), on the same graph; run_graph_layers.sh runs both with 1 and 2 threads and prints ratios.
// Rows: `case,impl,threads,metric,value` (fwdbwd_ms: forward, then backward with a seed of ones, the
// gradients reaching x and every parameter; median of REPS steps after a warm-up of at least 0.3 s).
//
// The graph is index_ops.cpp's (gcn_graph.hpp): N = 10,000 nodes, 168,592 splitmix64 edges src -> dst,
// weight 1 (168,134 after summing duplicates, which is the adjacency ours aggregates over; the peer
// keeps the duplicate edges, as PyG does). x (N, 64) float32. The graph's normalisations are built
// once before timing (nn::Graph caches them), as a training loop on a fixed graph sees them.
//   sage  SAGEConv(64, 64): mean over in-neighbours through lin_l, + lin_r(x), bias
//   gcn   GCNConv(64, 64): D^-1/2 (A + I) D^-1/2 x W + b
//   gat   GATConv(64, 8, heads = 8): attention over in-edges and self-loops, 8 heads concatenated
//
// usage: graph_layers_bench [--threads N] [--reps N]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gcn_graph.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/nn/graph.hpp"

int main(int argc, char** argv) {
  using namespace xgrad;
  using namespace xgrad::bench;  // NOLINT(google-build-using-namespace)
  int threads = 1, reps = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: graph_layers_bench [--threads N] [--reps N]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  const EdgeList e = gcn_edges();
  const nn::Graph graph(nn::graph::adjacency(e.src, e.dst, kNodes));
  (void)graph.mean_norm();
  (void)graph.gcn_norm();
  (void)graph.with_self_loops();
  Generator gen(1);
  const Tensor x = Tensor::randn({kNodes, kFeatures}, gen);
  Tensor xg = x.detach().set_requires_grad();
  nn::SAGEConv sage(kFeatures, 64);
  nn::GCNConv gcn(kFeatures, 64);
  nn::GATConv gat(kFeatures, 8, 8);
  const Tensor seed = Tensor::ones({kNodes, 64});
  const auto step = [&](nn::Module& m, auto&& fwd) {
    return median_ms(
        [&] {
          xg.zero_grad();
          m.zero_grad();
          fwd().backward(seed);
        },
        reps);
  };
  print_row("sage", threads, "fwdbwd_ms", step(sage, [&] { return sage(xg, graph); }));
  print_row("gcn", threads, "fwdbwd_ms", step(gcn, [&] { return gcn(xg, graph); }));
  print_row("gat", threads, "fwdbwd_ms", step(gat, [&] { return gat(xg, graph); }));
  std::printf("# nnz after summing duplicate edges: %lld; threads in use: %d\n",
              static_cast<long long>(graph.num_edges()), get_num_threads());
  return 0;
}
