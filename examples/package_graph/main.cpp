// package_graph: predicts a Debian package's Section (libs, python, games, ... 58 of them in Debian
// 12's main area) from the words of its one-line description and from its dependency graph, read
// from the package index apt keeps on every Debian machine (`apt-cache dumpavail`, through
// nn::datasets::read_apt_packages; `apt-get update` fills an empty index).
//
// Data: one node per package; edges package -> dependency from Depends, Pre-Depends, Recommends
// and Suggests (every alternative of `a | b`; virtual and missing names give no edge:
// nn::datasets::dependency_edges). Features: the bag of words of the short description (lowercase
// runs of letters a-z; the words occurring at least --min-count times over all descriptions), 1 for
// each word a description holds, as a SparseCsr (packages x vocabulary). 10% of the labelled
// packages train, the rest is split in half into validation and test, by a seeded shuffle.
//
// Two models of the library's layers, trained full-batch with Adam on the cross-entropy of the
// training nodes, with early stopping on validation accuracy (the test accuracy reported is the one
// at the best validation epoch):
//   mlp:   nn::Linear on the sparse rows of X, relu, dropout, nn::Linear (while training, only the
//          training nodes' rows of X)
//   sage:  two nn::SAGEConv layers with Direction::both: h' = act(W_r·h + W_rev·mean over what the
//          package depends on + W_l·mean over what depends on it + b), the first on the SparseCsr
//          X itself (the layer multiplies by its weights first, then averages)
//   gat (--model gat, instead of sage): the same two layers with attention in place of the two
//          means: an nn::GATConv over each direction (the graph and its reverse, without
//          self-loops) plus an nn::Linear for the package itself.
//
// --minibatch trains the sage model on sampled minibatches instead (nn/sampler.hpp, issue 52): batches
// of --batch-size training nodes through nn::NeighborLoader, up to --fanouts neighbours per node and
// layer in each direction (Direction::both, as the layers aggregate), one Adam step per batch, the
// first layer on the batch's rows of the sparse X. An epoch is one pass over the training nodes; the
// evaluation after each epoch runs nn::layerwise_inference over the whole graph (every neighbour, no
// sampling), so the accuracies are the full-graph model's. The MLP baseline stays full-batch.
//
// Writes to --out: history_<model>.csv (per epoch: loss, train/validation/test accuracy) and
// loss.png / accuracy.png, sections.csv and sections.png (per-section test accuracy of both
// models and the graph model's most frequent mistake), degrees.csv and degrees.png (the
// distribution of neighbourhood sizes). Exits non-zero when the graph model is not ahead of the
// MLP by --min-margin (accuracy points / 100).
//
//   build/release/examples/package_graph              # the full run
//   build/release/examples/package_graph --quick      # the short run (scripts/main.sh, the test)
//   build/release/examples/package_graph --minibatch --fanouts 10,10 --batch-size 512
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/plot.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;
namespace ds = xgrad::nn::datasets;

namespace {

struct Settings {
  int min_count = 3;
  std::int64_t hidden = 64;
  int max_epochs = 200;
  int patience = 20;
  double lr = 0.01;
  double weight_decay = 5e-4;
  double dropout = 0.5;
  double train_fraction = 0.1;
  std::string model = "sage";
  std::uint64_t seed = 0;
  int threads = 0;
  bool quick = false;
  double min_margin = 0.08;
  std::string out = "out/package_graph";
  bool minibatch = false;
  std::string fanouts = "10,10";  // per layer, input layer first; -1: every neighbour
  std::int64_t batch_size = 512;
  std::int64_t inference_chunk = 4096;
};

/// "10,10" -> {10, 10}: one fan-out per graph layer, each >= 1 or -1 (every neighbour).
std::vector<std::int64_t> parse_fanouts(const std::string& text, std::size_t layers) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw Error(fmt::format("--fanouts: '{}' is not a list of integers such as 10,10 (item '{}')", text, item));
    if (v == 0 || v < -1)
      throw Error(fmt::format(
          "--fanouts: a fan-out must be >= 1 (neighbours sampled per node) or -1 (every neighbour), got {} in '{}'", v,
          text));
    out.push_back(v);
    pos = comma + 1;
  }
  if (out.size() != layers)
    throw Error(fmt::format("--fanouts: the model has {} graph layers, so it takes {} fan-outs, got {} in '{}'", layers,
                            layers, out.size(), text));
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the dataset -----------------------------------------------------------------------------

struct Data {
  std::int64_t nodes = 0, edges = 0, unresolved = 0;
  std::vector<std::string> classes;  // section names, sorted; class id = index
  std::vector<std::int64_t> label;   // per node; -1 without a Section
  std::vector<std::string> vocabulary;
  SparseCsr x;        // (nodes, vocabulary): 1 where the description holds the word
  SparseCsr x_train;  // its rows of the training nodes
  nn::Graph graph;    // edges package -> dependency
  std::vector<std::int64_t> out_degree, in_degree;
  std::vector<std::int64_t> train, val, test;  // node ids
};

/// Lowercase runs of ASCII letters.
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  for (char c : text + ' ') {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c >= 'a' && c <= 'z') {
      w.push_back(c);
    } else if (!w.empty()) {
      words.push_back(std::move(w));
      w.clear();
    }
  }
  return words;
}

/// The rows `nodes` of a (constant) CSR matrix, in that order.
SparseCsr take_rows(const SparseCsr& a, const std::vector<std::int64_t>& nodes) {
  const auto crow = a.pattern().crow();
  const auto col = a.pattern().col();
  const std::vector<double> values = a.values().to_vector();
  std::vector<std::int64_t> tcrow{0}, tcol;
  std::vector<float> tvalues;
  for (auto i : nodes) {
    for (auto k = crow[static_cast<std::size_t>(i)]; k < crow[static_cast<std::size_t>(i + 1)]; ++k) {
      tcol.push_back(col[static_cast<std::size_t>(k)]);
      tvalues.push_back(static_cast<float>(values[static_cast<std::size_t>(k)]));
    }
    tcrow.push_back(static_cast<std::int64_t>(tcol.size()));
  }
  const auto rows = static_cast<std::int64_t>(nodes.size()), nnz = static_cast<std::int64_t>(tcol.size());
  return sparse_csr_tensor(Tensor::from_vector(tcrow, {rows + 1}), Tensor::from_vector(tcol, {nnz}),
                           Tensor::from_vector(tvalues, {nnz}), {rows, a.cols()});
}

/// The same with the node ids in a 1-d int64 tensor (a block's src_nodes, a batch's input_nodes).
SparseCsr take_rows(const SparseCsr& a, const Tensor& nodes) {
  const std::int64_t* p = nodes.data<std::int64_t>();
  return take_rows(a, std::vector<std::int64_t>(p, p + nodes.numel()));
}

Data load(const Settings& s) {
  Data d;
  const auto packages = ds::read_apt_packages();
  const ds::DependencyGraph g = ds::dependency_edges(packages);
  d.nodes = static_cast<std::int64_t>(packages.size());
  d.edges = static_cast<std::int64_t>(g.src.size());
  d.unresolved = g.unresolved;
  const auto n = static_cast<std::size_t>(d.nodes);

  // labels
  std::map<std::string, std::int64_t> section_id;
  for (const auto& p : packages)
    if (!p.section.empty()) section_id.emplace(p.section, 0);
  for (auto& [name, id] : section_id) {
    id = static_cast<std::int64_t>(d.classes.size());
    d.classes.push_back(name);
  }
  d.label.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    if (!packages[i].section.empty()) d.label[i] = section_id.at(packages[i].section);

  // bag of words
  std::vector<std::vector<std::string>> doc(n);
  std::unordered_map<std::string, std::int64_t> count;
  for (std::size_t i = 0; i < n; ++i) {
    doc[i] = words_of(packages[i].description);
    for (const auto& w : doc[i]) ++count[w];
  }
  for (const auto& [w, c] : count)
    if (c >= s.min_count) d.vocabulary.push_back(w);
  std::sort(d.vocabulary.begin(), d.vocabulary.end());
  std::unordered_map<std::string, std::int64_t> word_id;
  for (std::size_t v = 0; v < d.vocabulary.size(); ++v) word_id.emplace(d.vocabulary[v], static_cast<std::int64_t>(v));
  std::vector<std::int64_t> crow{0}, col;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> row;
    for (const auto& w : doc[i])
      if (const auto it = word_id.find(w); it != word_id.end()) row.push_back(it->second);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    col.insert(col.end(), row.begin(), row.end());
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  // Binary values, not normalised: a package's first-layer input is the sum of its words' rows of
  // W1. (Term frequencies divided by the row's total trained more slowly, to a lower accuracy in both
  // models: 64% and 77% against 67% and 80% with --quick's sizes; bench/results/tuning_notes.md.)
  const auto nnz = static_cast<std::int64_t>(col.size());
  d.x = sparse_csr_tensor(Tensor::from_vector(crow, {d.nodes + 1}), Tensor::from_vector(col, {nnz}),
                          Tensor::ones({nnz}), {d.nodes, static_cast<std::int64_t>(d.vocabulary.size())});

  // the graph: A[dependency, package] (nn/graph.hpp's convention: row i holds what depends on i)
  d.graph = nn::Graph(nn::graph::adjacency(g.src, g.dst, d.nodes));
  d.out_degree.assign(n, 0);
  d.in_degree.assign(n, 0);
  for (std::size_t e = 0; e < g.src.size(); ++e) {
    ++d.out_degree[static_cast<std::size_t>(g.src[e])];
    ++d.in_degree[static_cast<std::size_t>(g.dst[e])];
  }

  // splits: a seeded Fisher-Yates shuffle of the labelled nodes
  std::vector<std::int64_t> labelled;
  for (std::size_t i = 0; i < n; ++i)
    if (d.label[i] >= 0) labelled.push_back(static_cast<std::int64_t>(i));
  Generator gen(s.seed);
  shuffle(labelled, gen);
  const auto n_train = static_cast<std::size_t>(std::llround(s.train_fraction * static_cast<double>(labelled.size())));
  const std::size_t n_val = (labelled.size() - n_train) / 2;
  d.train.assign(labelled.begin(), labelled.begin() + static_cast<std::ptrdiff_t>(n_train));
  d.val.assign(labelled.begin() + static_cast<std::ptrdiff_t>(n_train),
               labelled.begin() + static_cast<std::ptrdiff_t>(n_train + n_val));
  d.test.assign(labelled.begin() + static_cast<std::ptrdiff_t>(n_train + n_val), labelled.end());
  d.x_train = take_rows(d.x, d.train);
  return d;
}

// ---- the models ------------------------------------------------------------------------------

struct Model {
  std::string name;
  std::shared_ptr<nn::Module> net;  // the parameters
  /// Logits for the training nodes when `training` (dropout on), else for every node.
  std::function<Tensor(bool training)> forward;
  /// With --minibatch (sage only): the seeds' logits from a sampled batch (dropout on), and every
  /// node's logits by layer-wise inference over the whole graph (dropout off).
  std::function<Tensor(const nn::MiniBatch& batch)> forward_batch;
  std::function<Tensor()> inference;
};

Model make_mlp(const Data& d, const Settings& s, Generator& gen) {
  const auto c = static_cast<std::int64_t>(d.classes.size());
  auto net = std::make_shared<nn::Module>("MLP");
  auto l1 = net->register_module("l1", std::make_shared<nn::Linear>(d.x.cols(), s.hidden, gen));
  auto l2 = net->register_module("l2", std::make_shared<nn::Linear>(s.hidden, c, gen));
  const double drop = s.dropout;
  return {"mlp",
          net,
          [l1, l2, &d, &gen, drop](bool training) {
            const Tensor h = relu((*l1)(training ? d.x_train : d.x));
            return (*l2)(nn::functional::dropout(h, drop, training, gen));
          },
          {},
          {}};
}

/// Two graph layers on d.graph, the first on the sparse words: logits for every node, or for the
/// training nodes.
template <class Layer>
std::function<Tensor(bool)> two_layers(const Data& d, const Settings& s, Generator& gen, std::shared_ptr<Layer> l1,
                                       std::shared_ptr<Layer> l2) {
  const double drop = s.dropout;
  return [l1, l2, &d, &gen, drop](bool training) {
    const Tensor h = nn::functional::dropout(relu((*l1)(d.x, d.graph)), drop, training, gen);
    const Tensor logits = (*l2)(h, d.graph);
    return training ? index_select(logits, 0, d.train) : logits;
  };
}

Model make_sage(const Data& d, const Settings& s, Generator& gen) {
  const auto c = static_cast<std::int64_t>(d.classes.size());
  using nn::graph::Aggregation, nn::graph::Direction;
  auto net = std::make_shared<nn::Module>("SAGE");
  auto l1 = net->register_module(
      "l1", std::make_shared<nn::SAGEConv>(d.x.cols(), s.hidden, gen, Aggregation::mean, true, true, Direction::both));
  auto l2 = net->register_module(
      "l2", std::make_shared<nn::SAGEConv>(s.hidden, c, gen, Aggregation::mean, true, true, Direction::both));
  Model m{"sage", net, two_layers(d, s, gen, l1, l2), {}, {}};
  const double drop = s.dropout;
  // On blocks (nn/sampler.hpp): the first layer reads the sparse word rows of the batch's input nodes.
  m.forward_batch = [l1, l2, &d, &gen, drop](const nn::MiniBatch& b) {
    const Tensor h = nn::functional::dropout(relu((*l1)(take_rows(d.x, b.input_nodes), b.blocks[0])), drop, true, gen);
    return (*l2)(h, b.blocks[1]);
  };
  // Layer-wise over every node: the first layer takes its block's sources' word rows itself, so the
  // features handed to it are a placeholder of no columns (the words are never made dense).
  const std::int64_t chunk = s.inference_chunk;
  m.inference = [l1, l2, &d, chunk] {
    const std::vector<nn::BlockLayer> layers = {
        [&d, l1](const Tensor&, const nn::Block& b) { return relu((*l1)(take_rows(d.x, b.src_nodes), b)); },
        [l2](const Tensor& x, const nn::Block& b) { return (*l2)(x, b); },
    };
    return nn::layerwise_inference(d.graph, Tensor::zeros({d.nodes, 0}), layers, chunk, Direction::both);
  };
  return m;
}

/// A SAGE layer with attention in place of the means: a GATConv over what depends on a package (the
/// graph), one over what it depends on (the reverse graph), neither with self-loops (a package
/// without neighbours there contributes 0), and a Linear of the package itself with the bias.
struct AttentionLayer : nn::Module {
  std::shared_ptr<nn::GATConv> in, out;
  std::shared_ptr<nn::Linear> self;
  AttentionLayer(std::int64_t in_channels, std::int64_t out_channels, Generator& gen) : Module("AttentionLayer") {
    in = register_module(
        "in", std::make_shared<nn::GATConv>(in_channels, out_channels, gen, 1, true, 0.2, 0.0, false, false));
    out = register_module(
        "out", std::make_shared<nn::GATConv>(in_channels, out_channels, gen, 1, true, 0.2, 0.0, false, false));
    self = register_module("self", std::make_shared<nn::Linear>(in_channels, out_channels, gen));
  }
  Tensor operator()(const nn::NodeFeatures& x, const nn::Graph& graph) {
    const Tensor root = x.is_sparse() ? (*self)(x.sparse()) : (*self)(x.dense());
    return add(add((*in)(x, graph), (*out)(x, graph.reverse())), root);
  }
};

Model make_gat(const Data& d, const Settings& s, Generator& gen) {
  const auto c = static_cast<std::int64_t>(d.classes.size());
  auto net = std::make_shared<nn::Module>("GAT");
  auto l1 = net->register_module("l1", std::make_shared<AttentionLayer>(d.x.cols(), s.hidden, gen));
  auto l2 = net->register_module("l2", std::make_shared<AttentionLayer>(s.hidden, c, gen));
  return {"gat", net, two_layers(d, s, gen, l1, l2), {}, {}};
}

// ---- training --------------------------------------------------------------------------------

struct History {
  std::vector<double> epoch, loss, train_acc, val_acc, test_acc;
  int best_epoch = 0;
  double best_val = -1, test_at_best = 0, seconds = 0;
  std::vector<std::int64_t> prediction_at_best;  // per node
  double seconds_per_epoch() const { return epoch.empty() ? 0 : seconds / static_cast<double>(epoch.size()); }
};

double accuracy_on(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& label,
                   const std::vector<std::int64_t>& nodes) {
  std::int64_t ok = 0;
  for (auto i : nodes) ok += pred[static_cast<std::size_t>(i)] == label[static_cast<std::size_t>(i)];
  return nodes.empty() ? 0 : static_cast<double>(ok) / static_cast<double>(nodes.size());
}

History train(Model& m, const Data& d, const Settings& s) {
  History h;
  std::vector<std::int64_t> train_label;
  for (auto i : d.train) train_label.push_back(d.label[static_cast<std::size_t>(i)]);
  const Tensor target = Tensor::from_vector(train_label, {static_cast<std::int64_t>(train_label.size())});
  nn::Adam opt(m.net->parameters(), nn::AdamOptions(s.lr).weight_decay(s.weight_decay));
  const bool minibatch = s.minibatch && m.forward_batch;
  std::unique_ptr<nn::NeighborLoader> loader;
  if (minibatch) {
    nn::NeighborSampler sampler(d.graph, parse_fanouts(s.fanouts, 2), false, nn::graph::Direction::both);
    loader = std::make_unique<nn::NeighborLoader>(
        sampler, Tensor::from_vector(d.train, {static_cast<std::int64_t>(d.train.size())}),
        Tensor::from_vector(d.label, {d.nodes}),
        nn::DataLoaderOptions(static_cast<std::size_t>(s.batch_size)).shuffle(true).seed(s.seed + 3));
    std::printf(
        "  %-4s on minibatches: %zu batches of up to %lld training nodes per epoch, fan-outs %s (each "
        "direction)\n",
        m.name.c_str(), loader->size(), static_cast<long long>(s.batch_size), s.fanouts.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= s.max_epochs; ++epoch) {
    double epoch_loss = 0;
    if (minibatch) {  // one step per batch; the epoch's loss is the mean over its seeds
      std::int64_t seen = 0;
      for (auto& batch : *loader) {
        opt.zero_grad(true);
        Tensor loss = cross_entropy(m.forward_batch(batch), batch.labels);
        loss.backward();
        opt.step();
        epoch_loss += loss.item() * static_cast<double>(batch.seeds.numel());
        seen += batch.seeds.numel();
      }
      epoch_loss /= static_cast<double>(std::max<std::int64_t>(1, seen));
    } else {
      opt.zero_grad(true);
      Tensor loss = cross_entropy(m.forward(true), target);
      loss.backward();
      opt.step();
      epoch_loss = loss.item();
    }
    std::vector<std::int64_t> pred;
    {
      NoGradGuard no_grad;
      pred = nn::metrics::predict(minibatch ? m.inference() : m.forward(false));
    }
    h.epoch.push_back(epoch);
    h.loss.push_back(epoch_loss);
    h.train_acc.push_back(100 * accuracy_on(pred, d.label, d.train));
    h.val_acc.push_back(100 * accuracy_on(pred, d.label, d.val));
    h.test_acc.push_back(100 * accuracy_on(pred, d.label, d.test));
    if (h.val_acc.back() > h.best_val) {
      h.best_val = h.val_acc.back();
      h.best_epoch = epoch;
      h.test_at_best = h.test_acc.back();
      h.prediction_at_best = std::move(pred);
    }
    if (epoch % 10 == 0 || epoch == 1)
      std::printf("  %-4s epoch %3d: loss %.4f, accuracy train %.2f%%, validation %.2f%% (best %.2f%% at %d)\n",
                  m.name.c_str(), epoch, h.loss.back(), h.train_acc.back(), h.val_acc.back(), h.best_val, h.best_epoch);
    std::fflush(stdout);
    if (epoch - h.best_epoch >= s.patience) break;
  }
  h.seconds = seconds_since(t0);
  return h;
}

// ---- outputs ---------------------------------------------------------------------------------

void write_outputs(const Settings& s, const Data& d, const History& mlp, const History& graph,
                   const std::string& graph_name) {
  fs::create_directories(s.out);
  for (const auto* h : {&mlp, &graph})
    utils::write_csv((fs::path(s.out) / ("history_" + (h == &mlp ? std::string("mlp") : graph_name) + ".csv")).string(),
                     {"epoch", "loss", "train_accuracy_pct", "val_accuracy_pct", "test_accuracy_pct"},
                     {h->epoch, h->loss, h->train_acc, h->val_acc, h->test_acc});

  // per section: test nodes, each model's accuracy, the graph model's most frequent wrong answer
  const std::size_t nc = d.classes.size();
  std::vector<std::int64_t> support(nc, 0), ok_mlp(nc, 0), ok_graph(nc, 0);
  std::vector<std::vector<std::int64_t>> confused(nc, std::vector<std::int64_t>(nc, 0));
  for (auto i : d.test) {
    const auto t = static_cast<std::size_t>(d.label[static_cast<std::size_t>(i)]);
    const auto pm = static_cast<std::size_t>(mlp.prediction_at_best[static_cast<std::size_t>(i)]);
    const auto pg = static_cast<std::size_t>(graph.prediction_at_best[static_cast<std::size_t>(i)]);
    ++support[t];
    ok_mlp[t] += pm == t;
    ok_graph[t] += pg == t;
    ++confused[t][pg];
  }
  std::vector<std::size_t> order(nc);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&support](std::size_t a, std::size_t b) { return support[a] > support[b]; });
  std::string csv = "section,test_packages,mlp_accuracy_pct," + graph_name + "_accuracy_pct,most_confused_with," +
                    graph_name + "_share_of_that_mistake_pct\n";
  for (auto c : order) {
    std::size_t worst = c;
    for (std::size_t p = 0; p < nc; ++p)
      if (p != c && (worst == c || confused[c][p] > confused[c][worst])) worst = p;
    const double n = static_cast<double>(std::max<std::int64_t>(1, support[c]));
    const bool any = worst != c && confused[c][worst] > 0;
    csv += fmt::format("{},{},{:.2f},{:.2f},{},{:.2f}\n", d.classes[c], support[c], 100 * ok_mlp[c] / n,
                       100 * ok_graph[c] / n, any ? d.classes[worst] : "-", any ? 100 * confused[c][worst] / n : 0.0);
  }
  write_file_atomic((fs::path(s.out) / "sections.csv").string(), csv, "package_graph");

  // neighbourhood sizes in power-of-two buckets: 0, 1, 2-3, 4-7, ...
  std::vector<double> bucket_lo, n_out, n_in;
  auto bucket = [](std::int64_t deg) {
    std::size_t b = 0;
    while (deg > 0) {
      deg >>= 1;
      ++b;
    }
    return b;
  };
  for (std::size_t i = 0; i < d.out_degree.size(); ++i)
    for (const auto& [deg, dest] : {std::pair{d.out_degree[i], &n_out}, std::pair{d.in_degree[i], &n_in}}) {
      const std::size_t b = bucket(deg);
      for (auto* v : {&n_out, &n_in, &bucket_lo})
        while (v->size() <= b) v->push_back(0);
      (*dest)[b] += 1;
    }
  std::string deg_csv = "degree_range,depends_on,depended_by\n";
  for (std::size_t b = 0; b < n_out.size(); ++b) {
    const std::int64_t lo = b == 0 ? 0 : std::int64_t{1} << (b - 1), hi = b == 0 ? 0 : (std::int64_t{1} << b) - 1;
    deg_csv +=
        fmt::format("{},{},{}\n", lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi), n_out[b], n_in[b]);
  }
  write_file_atomic((fs::path(s.out) / "degrees.csv").string(), deg_csv, "package_graph");

  const std::string g = graph_name;
  const bool plotted = examples::run_gnuplot(
      s.out, "plots",
      "set output 'loss.png'\nset title 'training loss (cross-entropy on the training packages)'\n"
      "set xlabel 'epoch'\nset ylabel 'loss'\nset logscale y\n"
      "plot 'history_mlp.csv' using 1:2 with lines lw 2 title 'mlp (words)', 'history_" +
          g + ".csv' using 1:2 with lines lw 2 title '" + g +
          " (words + graph)'\nunset logscale y\n"
          "set output 'accuracy.png'\nset title 'accuracy per epoch'\nset ylabel '%'\nset key bottom right\n"
          "plot 'history_mlp.csv' using 1:4 with lines lw 2 lc rgb '#1f77b4' title 'mlp validation', "
          "'' using 1:3 with lines dt 2 lc rgb '#1f77b4' title 'mlp train', 'history_" +
          g + ".csv' using 1:4 with lines lw 2 lc rgb '#d62728' title '" + g +
          " validation', '' using 1:3 with lines dt 2 lc rgb '#d62728' title '" + g +
          " train'\n"
          "set output 'sections.png'\nset terminal pngcairo size 1600,700 font ',10' noenhanced\n"
          "set title 'test accuracy per section (sections by number of test packages)'\nset style data histograms\n"
          "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset boxwidth 0.9\n"
          "set xtics rotate by -60 scale 0\nset xlabel ''\nset ylabel '%'\nset yrange [0:100]\nset key top right\n"
          "plot 'sections.csv' using 3:xtic(1) title 'mlp' lc rgb '#1f77b4', '' using 4 title '" +
          g +
          "' lc rgb '#d62728'\n"
          "set output 'degrees.png'\nset terminal pngcairo size 1200,700 font ',11' noenhanced\n"
          "set title 'neighbourhood sizes: packages by number of dependencies and of dependants'\n"
          "set xlabel 'neighbours'\nset ylabel 'packages'\nset logscale y\nset yrange [0.8:*]\nset xtics rotate by "
          "-45\n"
          "plot 'degrees.csv' using 2:xtic(1) title 'depends on (out-degree)' lc rgb '#2ca02c', '' using 3 "
          "title 'depended on by (in-degree)' lc rgb '#9467bd'\n");
  std::printf("\nhistory_mlp.csv, history_%s.csv, sections.csv, degrees.csv%s written to %s/\n", g.c_str(),
              plotted ? ", loss.png, accuracy.png, sections.png, degrees.png" : "", s.out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"package_graph: a Debian package's Section from its description's words and its dependency graph"};
  app.add_option("--model", s.model, "graph model: sage (mean aggregation) or gat (attention)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sage", "gat"}));
  app.add_option("--min-count", s.min_count, "vocabulary: words occurring at least this often")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--hidden", s.hidden, "hidden width of both models")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", s.max_epochs, "most epochs (full batch)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--patience", s.patience, "stop after this many epochs without a better validation accuracy")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", s.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--weight-decay", s.weight_decay, "Adam weight decay")->capture_default_str();
  app.add_option("--dropout", s.dropout, "dropout on the hidden layer")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  app.add_option("--train-fraction", s.train_fraction, "share of the labelled packages that train")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 0.9));
  app.add_option("--seed", s.seed, "seed of the split, the init and the dropout masks")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_option("--min-margin", s.min_margin,
                 "exit non-zero unless the graph model's test accuracy exceeds the MLP's by this much (0.08: 8 points)")
      ->capture_default_str();
  app.add_option("--out", s.out, "output folder for CSVs and plots")->capture_default_str();
  app.add_flag("--minibatch", s.minibatch,
               "train the sage model on sampled minibatches of the training nodes (NeighborLoader), evaluate it "
               "layer-wise on the whole graph");
  app.add_option("--fanouts", s.fanouts,
                 "with --minibatch: neighbours sampled per node and layer in each direction, input layer first "
                 "(-1: all)")
      ->capture_default_str();
  app.add_option("--batch-size", s.batch_size, "with --minibatch: training nodes (seeds) per batch")
      ->capture_default_str();
  app.add_flag("--quick", s.quick,
               "a short run (hidden 32, at most 25 epochs, lr 0.02, margin 0.05) for tests and the main job");
  CLI11_PARSE(app, argc, argv);
  if (s.quick) {
    if (app.count("--hidden") == 0) s.hidden = 32;
    if (app.count("--epochs") == 0) s.max_epochs = 25;
    if (app.count("--patience") == 0) s.patience = 10;
    if (app.count("--lr") == 0) s.lr = 0.02;
    if (app.count("--min-margin") == 0) s.min_margin = 0.05;
  }
  if (s.threads > 0) set_num_threads(s.threads);
  try {  // bad minibatch settings fail before the data is read
    if (s.batch_size < 1)
      throw Error(fmt::format("--batch-size: training nodes per batch must be >= 1, got {}", s.batch_size));
    (void)parse_fanouts(s.fanouts, 2);
    if (s.minibatch && s.model != "sage")
      throw Error(fmt::format("--minibatch trains the sage model only (--model {} given)", s.model));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "package_graph: %s\n", e.what());
    return 2;
  }

  try {
    const auto t0 = std::chrono::steady_clock::now();
    const Data d = load(s);
    const double load_seconds = seconds_since(t0);
    std::printf(
        "Debian package index (apt-cache dumpavail): %lld packages, %lld depends-on edges (%lld relation names "
        "virtual or missing: no edge), %zu sections\n"
        "bag of words: %zu words occurring >= %d times, %lld non-zeros; split %zu train / %zu validation / %zu "
        "test; read and built in %.1f s, %d threads\n",
        static_cast<long long>(d.nodes), static_cast<long long>(d.edges), static_cast<long long>(d.unresolved),
        d.classes.size(), d.vocabulary.size(), s.min_count, static_cast<long long>(d.x.nnz()), d.train.size(),
        d.val.size(), d.test.size(), load_seconds, get_num_threads());

    // one generator per model (init and dropout masks): the MLP's run does not depend on --model
    Generator mlp_gen(s.seed + 1), graph_gen(s.seed + 2);
    Model mlp = make_mlp(d, s, mlp_gen);
    Model graph = s.model == "gat" ? make_gat(d, s, graph_gen) : make_sage(d, s, graph_gen);
    const History hm = train(mlp, d, s);
    const History hg = train(graph, d, s);
    write_outputs(s, d, hm, hg, graph.name);

    std::printf("\n%-5s %-8s %-11s %-9s %-10s %s\n", "model", "epochs", "best epoch", "val acc", "test acc",
                "time per epoch");
    for (const auto* m : {&mlp, &graph}) {
      const History& h = m == &mlp ? hm : hg;
      std::printf("%-5s %-8zu %-11d %6.2f%%   %6.2f%%    %.0f ms\n", m->name.c_str(), h.epoch.size(), h.best_epoch,
                  h.best_val, h.test_at_best, 1000 * h.seconds_per_epoch());
    }
    const double margin = (hg.test_at_best - hm.test_at_best) / 100;
    std::printf("%s - mlp: %+.2f points of test accuracy (required: %+.2f)\n", graph.name.c_str(), 100 * margin,
                100 * s.min_margin);
    if (margin < s.min_margin) {
      std::fprintf(stderr, "package_graph: FAILED: the graph model is %.2f points ahead of the MLP, below %.2f\n",
                   100 * margin, 100 * s.min_margin);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "package_graph: %s\n", e.what());
    return 2;
  }
}
