// Minibatch training on a large graph (issue 52), ours: an epoch of neighbour sampling and training of
// a 2-layer SAGE (mean) model through nn::NeighborLoader. The PyTorch peer is
// torch_graph_minibatch.py (the same uniform sampler in vectorised torch ops, the same model and
// optimizer); run_graph_minibatch.sh runs both with 1 and 2 threads and prints the ratios.
//
// Graph: Note [R-MAT graphs] in gcn_graph.hpp, N = 2^scale nodes and 16 N edges src -> dst
// (duplicates summed), A[dst, src]: a node's neighbours are its in-neighbours. x (N, 64) float32
// randn; labels: argmax of the first 16 columns of x + mean over in-neighbours of x (16 classes).
// Training nodes: the i with splitmix64(i) % 100 < 10. An epoch: the training nodes shuffled
// (DataLoaderOptions(1024).shuffle(true)), per batch of 1024 seeds nn::NeighborSampler's blocks with
// fan-outs (10, 10) (uniform, without replacement), then h = relu(SAGEConv(64, 64)(x[input_nodes],
// block 0)), logits = SAGEConv(64, 16)(h, block 1), cross-entropy on the seeds, backward, Adam (lr
// 0.01). The loader samples batch b + 1 on a background thread while batch b trains (Note [Sampling
// ahead]).
//
// Rows `case,impl,threads,metric,value` (case sage_rmat<scale>): epoch_ms and sampled_edges_per_s
// (medians over REPS epochs after one warm-up epoch), batches_per_epoch, edges_per_batch and
// input_nodes_per_batch (means over every batch), loss_first (the first batch's) and loss_last (the
// mean over the last epoch's batches), peak_rss_mb (VmHWM of /proc/self/status: the whole process,
// the graph's construction included) and train_peak_rss_mb (VmHWM reset through
// /proc/self/clear_refs once the graph, x and the labels are built: the training epochs' peak, the
// data included; absent where the kernel refuses the reset), and ours only:
// data_mb (tensor storage live before training: the graph, x, the labels), peak_alloc_mb
// (memory_stats().peak_allocated_bytes over the whole run), train_peak_alloc_mb (the same over the
// training epochs, the data included: reset_peak_memory_stats() before them) and
// train_peak_cached_mb (the caching allocator's peak of freed buffers kept, which RSS counts).
//
// usage: graph_minibatch_bench [--threads N] [--reps N] [--scale S] [--big] [--batches B]
//   --big: scale 21 (2^21 nodes, 2^25 edges); --batches B: at most B batches per epoch (0: all)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gcn_graph.hpp"
#include "overhead_harness.hpp"
#include "xgrad/core/allocator.hpp"
#include "xgrad/xgrad.hpp"

namespace {

constexpr std::int64_t kHidden = 64, kClasses = 16, kBatch = 1024, kTrainPercent = 10;

double vm_hwm_mb() { return static_cast<double>(overhead::status_kb("VmHWM:")) / 1024; }

/// Resets VmHWM to the current RSS (Linux's /proc/self/clear_refs, value 5), so that a later
/// vm_hwm_mb() is the peak of what ran after the reset; false where the kernel refuses.
bool reset_vm_hwm() {
  std::ofstream f("/proc/self/clear_refs");
  return static_cast<bool>(f << "5" << std::flush);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace xgrad;
  using namespace xgrad::bench;  // NOLINT(google-build-using-namespace)
  int threads = 1, reps = 3, scale = 17;
  std::int64_t max_batches = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--scale" && i + 1 < argc)
      scale = std::atoi(argv[++i]);
    else if (a == "--big")
      scale = 21;
    else if (a == "--batches" && i + 1 < argc)
      max_batches = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: graph_minibatch_bench [--threads N] [--reps N] [--scale S] [--big] [--batches B]\n");
      return 2;
    }
  }
  if (scale < 4 || scale > 26 || reps < 1 || max_batches < 0) {
    std::fprintf(stderr, "graph_minibatch_bench: need 4 <= scale <= 26, reps >= 1, batches >= 0\n");
    return 2;
  }
  set_num_threads(threads);
  const std::int64_t n = std::int64_t{1} << scale;
  const std::string c = "sage_rmat" + std::to_string(scale);

  nn::Graph graph;
  {
    const EdgeList e = rmat_edges(scale);
    graph = nn::Graph(nn::graph::adjacency(e.src, e.dst, n));
  }
  Generator gen(1);
  const Tensor x = Tensor::randn({n, kFeatures}, gen);
  Tensor labels;
  {
    NoGradGuard no_grad;
    const Tensor x16 = slice(x, 1, 0, kClasses);
    // a Graph of its own, so that its cached mean normalisation is freed here (the peer frees its own)
    labels = argmax(add(x16, spmm(nn::Graph(graph.adjacency()).mean_norm(), x16)), 1);
  }
  std::vector<std::int64_t> train;
  for (std::int64_t i = 0; i < n; ++i)
    if (splitmix64(static_cast<std::uint64_t>(i)) % 100 < static_cast<std::uint64_t>(kTrainPercent)) train.push_back(i);
  const double data_mb = static_cast<double>(memory_stats().allocated_bytes) / (1 << 20);
  const double build_rss_mb = vm_hwm_mb();
  const bool hwm_reset = reset_vm_hwm();
  const double build_peak_alloc_mb = static_cast<double>(memory_stats().peak_allocated_bytes) / (1 << 20);
  reset_peak_memory_stats();

  nn::SAGEConv conv0(kFeatures, kHidden, gen), conv1(kHidden, kClasses, gen);
  std::vector<Tensor> params = conv0.parameters();
  for (const Tensor& p : conv1.parameters()) params.push_back(p);
  nn::Adam opt(params, nn::AdamOptions(0.01));
  const nn::NeighborSampler sampler(graph, {10, 10});
  nn::NeighborLoader loader(sampler, Tensor::from_vector(train, {static_cast<std::int64_t>(train.size())}), labels,
                            nn::DataLoaderOptions(kBatch).shuffle(true).seed(1));

  double total_edges = 0, total_inputs = 0, total_batches = 0;
  struct EpochResult {
    std::vector<double> losses;
    double edges = 0;
  };
  const auto epoch = [&] {
    EpochResult r;
    std::int64_t b = 0;
    for (auto& batch : loader) {
      if (max_batches > 0 && b++ >= max_batches) break;
      const double e = static_cast<double>(batch.blocks[0].adj.nnz() + batch.blocks[1].adj.nnz());
      r.edges += e;
      total_edges += e;
      total_inputs += static_cast<double>(batch.input_nodes.numel());
      total_batches += 1;
      const Tensor h = relu(conv0(index_select(x, 0, batch.input_nodes), batch.blocks[0]));
      const Tensor loss = cross_entropy(conv1(h, batch.blocks[1]), batch.labels);
      opt.zero_grad(true);
      loss.backward();
      opt.step();
      r.losses.push_back(loss.item());
    }
    return r;
  };

  EpochResult r = epoch();  // warm-up
  const double loss_first = r.losses.front();
  const auto batches = static_cast<double>(r.losses.size());
  std::vector<double> times, rates;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    r = epoch();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    times.push_back(t);
    rates.push_back(r.edges / t);
  }
  std::sort(times.begin(), times.end());
  std::sort(rates.begin(), rates.end());
  double loss_last = 0;
  for (double l : r.losses) loss_last += l;
  loss_last /= static_cast<double>(r.losses.size());

  print_row(c, threads, "epoch_ms", 1000 * times[times.size() / 2]);
  print_row(c, threads, "sampled_edges_per_s", rates[rates.size() / 2]);
  print_row(c, threads, "batches_per_epoch", batches);
  print_row(c, threads, "edges_per_batch", total_edges / total_batches);
  print_row(c, threads, "input_nodes_per_batch", total_inputs / total_batches);
  print_row(c, threads, "loss_first", loss_first);
  print_row(c, threads, "loss_last", loss_last);
  const double train_rss_mb = vm_hwm_mb();
  print_row(c, threads, "peak_rss_mb", hwm_reset ? std::max(build_rss_mb, train_rss_mb) : train_rss_mb);
  if (hwm_reset) print_row(c, threads, "train_peak_rss_mb", train_rss_mb);
  print_row(c, threads, "data_mb", data_mb);
  const MemoryStats m = memory_stats();
  const double train_peak_alloc_mb = static_cast<double>(m.peak_allocated_bytes) / (1 << 20);
  print_row(c, threads, "peak_alloc_mb", std::max(build_peak_alloc_mb, train_peak_alloc_mb));
  print_row(c, threads, "train_peak_alloc_mb", train_peak_alloc_mb);
  print_row(c, threads, "train_peak_cached_mb", static_cast<double>(m.peak_cached_bytes) / (1 << 20));
  std::printf("# %lld nodes, %lld edges after summing duplicates, %zu training nodes; threads in use: %d\n",
              static_cast<long long>(n), static_cast<long long>(graph.num_edges()), train.size(), get_num_threads());
  return 0;
}
