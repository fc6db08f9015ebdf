// Index ops benchmark, ours. The PyTorch peer is torch_index_ops.py (the same
// cases, the same graph); run_index_ops.sh runs both with 1 and 2 threads and prints the ratios.
// Rows: `case,impl,threads,metric,value`.
//
// The graph: N = 10,000 nodes, E = 168,592 edges from splitmix64 (both sides compute the same one):
// edge k has hash h = splitmix64(k), source h % N, destination floor(N * u^2) with u uniform in
// [0, 1) from splitmix64(h) (in-degrees skewed to low ids, power-law-ish), weight in [0.5, 1.5).
// Features F = 64, float32.
//
// Cases (fwd_ms: forward; fwdbwd_ms: forward and backward with a seed of ones):
//   gcn_aggregate   index_select(X, 0, src) * w[:, None], then index_add into zeros(N, F) at dst
//                   (the aggregation; the gradient goes to X)
//   index_select    X (N, F) at the E sources (gradient to X: a row scatter-add with repeats)
//   index_add       zeros(N, F) + the E rows of M (E, F) at the destinations (gradient to M)
//   gather          X gathered along dim 0 with a row-broadcast (E, F) index of the sources
//   scatter_add     zeros(N, F) scatter_add along dim 0 of M with a row-broadcast (E, F) index of
//                   the destinations (gradient to M)
//   embedding       nn::Embedding(10,000, 64), 100,000 lookups (uniform, splitmix64), gradient to
//                   the table
// --peak CASE runs one forward+backward of CASE and prints peak_rss_bytes (VmHWM: the process's
// peak resident set) and peak_growth_bytes (VmHWM minus VmRSS once the inputs exist); run it in a
// fresh process per case.
//
// usage: index_ops_bench [--threads N] [--reps N] [--case NAME] [--peak NAME]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gcn_graph.hpp"
#include "overhead_harness.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace {

using namespace xgrad;
using namespace xgrad::bench;  // NOLINT(google-build-using-namespace)

constexpr std::int64_t kTable = 10000, kLookups = 100000;

int g_threads = 1;
int g_reps = 15;

struct Graph {
  Tensor src, dst, weight;  // (E) int64, (E) int64, (E, 1) float32
};

Graph make_graph() {
  const EdgeList g = gcn_edges();
  const std::vector<std::int64_t>&s = g.src, &d = g.dst;
  const std::vector<float>& w = g.weight;
  return {Tensor::from_data(std::span<const std::int64_t>(s), {kEdges}),
          Tensor::from_data(std::span<const std::int64_t>(d), {kEdges}),
          Tensor::from_data(std::span<const float>(w), {kEdges, 1})};
}

// (E, F) int64 with every row equal to idx[e]: the row-broadcast index of gather / scatter_add.
Tensor row_broadcast(const Tensor& idx) {
  Tensor t = Tensor::empty({idx.numel(), kFeatures}, kInt64);
  const std::int64_t* p = idx.data<std::int64_t>();
  std::int64_t* q = t.data<std::int64_t>();
  for (std::int64_t e = 0; e < idx.numel(); ++e) std::fill(q + e * kFeatures, q + (e + 1) * kFeatures, p[e]);
  return t;
}

void row(const std::string& c, const char* metric, double v) { print_row(c, g_threads, metric, v); }

using overhead::status_kb;

// One case: its forward (returns the output) on inputs that need grad when `grad` is set, and the
// leaf whose .grad the backward fills.
struct Case {
  std::string name;
  std::function<Tensor(bool grad)> forward;
  std::function<void()> clear;
  Shape out;
};

std::vector<Case> make_cases(const Graph& g) {
  Generator gen(1);
  std::vector<Case> cs;
  Tensor X = Tensor::randn({kNodes, kFeatures}, gen);
  Tensor M = Tensor::randn({kEdges, kFeatures}, gen);
  const Tensor zeros = Tensor::zeros({kNodes, kFeatures});
  const Tensor src_rows = row_broadcast(g.src), dst_rows = row_broadcast(g.dst);
  Tensor Xg = X.detach().set_requires_grad(), Mg = M.detach().set_requires_grad();
  auto clear = [Xg, Mg]() mutable {
    Xg.zero_grad();
    Mg.zero_grad();
  };
  cs.push_back({"gcn_aggregate",
                [=](bool grad) {
                  const Tensor& x = grad ? Xg : X;
                  return index_add(zeros, 0, g.dst, mul(index_select(x, 0, g.src), g.weight));
                },
                clear,
                {kNodes, kFeatures}});
  cs.push_back(
      {"index_select", [=](bool grad) { return index_select(grad ? Xg : X, 0, g.src); }, clear, {kEdges, kFeatures}});
  cs.push_back(
      {"index_add", [=](bool grad) { return index_add(zeros, 0, g.dst, grad ? Mg : M); }, clear, {kNodes, kFeatures}});
  cs.push_back({"gather", [=](bool grad) { return gather(grad ? Xg : X, 0, src_rows); }, clear, {kEdges, kFeatures}});
  cs.push_back({"scatter_add",
                [=](bool grad) { return scatter_add(zeros, 0, dst_rows, grad ? Mg : M); },
                clear,
                {kNodes, kFeatures}});
  auto emb = std::make_shared<nn::Embedding>(kTable, kFeatures, kFloat32, 2);
  std::vector<std::int64_t> look(kLookups);
  for (std::int64_t k = 0; k < kLookups; ++k)
    look[static_cast<std::size_t>(k)] =
        static_cast<std::int64_t>(splitmix64(static_cast<std::uint64_t>(k) + 0x5EED) % kTable);
  const Tensor lookups = Tensor::from_data(std::span<const std::int64_t>(look), {kLookups});
  cs.push_back({"embedding",
                [emb, lookups](bool grad) {
                  if (grad) return emb->forward(lookups);
                  NoGradGuard ng;
                  return emb->forward(lookups);
                },
                [emb] {
                  Tensor w = emb->weight();
                  w.zero_grad();
                },
                {kLookups, kFeatures}});
  return cs;
}

void run_case(const Case& c) {
  const double fwd = median_ms(
      [&] {
        NoGradGuard ng;
        c.forward(false);
      },
      g_reps);
  row(c.name, "fwd_ms", fwd);
  const Tensor seed = Tensor::ones(c.out);
  const double fb = median_ms(
      [&] {
        c.clear();
        c.forward(true).backward(seed);
      },
      g_reps);
  row(c.name, "fwdbwd_ms", fb);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only, peak;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      g_threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      g_reps = std::atoi(argv[++i]);
    else if (a == "--case" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--peak" && i + 1 < argc)
      peak = argv[++i];
    else {
      std::fprintf(stderr, "usage: index_ops_bench [--threads N] [--reps N] [--case NAME] [--peak NAME]\n");
      return 2;
    }
  }
  set_num_threads(g_threads);
  const Graph g = make_graph();
  const std::vector<Case> cases = make_cases(g);
  for (const Case& c : cases) {
    if (!peak.empty()) {
      if (c.name != peak) continue;
      const Tensor seed = Tensor::ones(c.out);
      const std::int64_t base_kb = status_kb("VmRSS:");
      c.forward(true).backward(seed);
      const std::int64_t hwm_kb = status_kb("VmHWM:");
      row(c.name, "peak_rss_bytes", static_cast<double>(hwm_kb) * 1024);
      row(c.name, "peak_growth_bytes", static_cast<double>(hwm_kb - base_kb) * 1024);
      continue;
    }
    if (!only.empty() && c.name != only) continue;
    run_case(c);
  }
  return 0;
}
