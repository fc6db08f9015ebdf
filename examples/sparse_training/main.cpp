// sparse_training: a wide MLP on Fashion-MNIST trained dense, block-sparse with a static random
// structure, and block-sparse with a structure that learns (RigL, or SET), at the same epochs.
//
// The model: Flatten, 784 -> H -> H (ReLU after each), then a dense Linear(H, 10) head. In the sparse
// runs both hidden layers are nn::BlockSparseLinear at density d (90% and 95% block sparsity by
// default), blocks of 16 inputs x 32 outputs (784 = 49 x 16), placed at random (BlockSparsePattern::random);
// the RigL runs move them with nn::Sparsifier every --update-every steps until 75% of the training
// (drop fraction 0.3, cosine-decayed). Adam with a cosine-decayed learning rate, batch 128.
//
// --task words trains the same two sparse hidden layers in a character MLP (makemore's, Bengio et al.
// 2003) on the word list of wamerican: the ids of the --context previous characters, embedded in
// --embed features each (8 x 16 = 128 inputs), predict the next character (27 classes); the measure is
// the held-out loss in bits per character (lower is better) beside the next-character accuracy.
//
// It prints, per run: test accuracy and loss, training time per step (sparsifier updates included), and the
// bytes of the parameters and of Adam's state; and writes to --out: runs.csv (one row per run),
// accuracy.csv (test accuracy per epoch and run), mask_turnover.csv (the share of each RigL layer's
// blocks that were not in its initial pattern, per update step), mask_<run>_{initial,final}.csv (the
// second layer's block mask), and the plots accuracy_vs_density.png, accuracy.png, mask_turnover.png,
// mask.png (gnuplot). The method and the measured table are in docs/sparse_training.md.
//
//   build/release/examples/sparse_training                # the full comparison
//   build/release/examples/sparse_training --quick        # the short form of the main job and the tests
//   build/release/examples/sparse_training --task words   # the character MLP
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "../common/plot.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Settings {
  std::string task = "fashion";          // or "words": the character MLP on wamerican
  std::int64_t context = 8, embed = 16;  // the character MLP's input: context ids x embed features
  int epochs = 10;
  std::size_t batch = 128;
  std::string optimizer = "adam";
  double lr = 0;  // 0: the optimizer's default below
  std::int64_t hidden = 2048;
  std::int64_t block_in = 16, block_out = 32;
  std::vector<double> densities{0.1, 0.05};
  std::vector<std::string> methods{"dense", "static", "rigl"};
  std::int64_t update_every = 100;
  double drop_fraction = 0.3;
  double end_fraction = 0.75;
  bool erdos_renyi = false;  // structure updates stop after this share of the steps (RigL's T_end)
  std::int64_t train_size = 0, test_size = 0;
  std::uint64_t seed = 0;
  int threads = 0;
  bool quick = false;
  double min_accuracy = 0.85;
  std::string data = nn::datasets::FashionMNIST::kDefaultRoot;
  std::string out = "out/sparse_training";
};

struct Run {
  std::string name, method;
  double density = 1.0;
  double accuracy = 0, loss = 0, ms_per_step = 0;  // test accuracy (%) and loss (nats per example)
  double param_bytes = 0, optimizer_bytes = 0;
  std::vector<double> epoch_accuracy;
};

// The MLP of one run: sparse hidden layers (or dense ones), a dense head.
struct Model {
  std::shared_ptr<nn::Sequential> net;
  std::vector<std::shared_ptr<nn::BlockSparseLinear>> sparse;
};

// in0: the width of the first hidden layer's input; classes: the head's outputs. The character MLP
// starts with an embedding of its context ids (makemore's MLP, Bengio et al. 2003).
Model make_model(const Settings& s, const std::string& method, double density, std::int64_t in0, std::int64_t classes,
                 Generator& gen) {
  Model m;
  m.net = std::make_shared<nn::Sequential>();
  if (s.task == "words") m.net->push_back(std::make_shared<nn::Embedding>(classes, s.embed, gen));
  m.net->push_back(std::make_shared<nn::Flatten>());
  // Per-layer densities: uniform, or Erdős-Rényi (RigL's ER: d_l proportional to (in_l + out_l) /
  // (in_l out_l), scaled so that the layers store the same total as at uniform density, each at most 1).
  const std::vector<std::int64_t> ins{in0, s.hidden};
  std::vector<double> d(2, density);
  if (s.erdos_renyi) {
    double stored = 0, weight = 0;
    for (const auto i : ins) {
      stored += density * double(i) * double(s.hidden);
      weight += double(i + s.hidden);
    }
    for (std::size_t l = 0; l < 2; ++l)
      d[l] = std::min(1.0, stored / weight / double(ins[l]) * double(ins[l] + s.hidden) / double(s.hidden));
  }
  std::int64_t in = in0;
  for (std::size_t l = 0; l < 2; ++l) {
    if (method == "dense") {
      m.net->push_back(std::make_shared<nn::Linear>(in, s.hidden, gen));
    } else {
      const BlockSize block{InFeatures{s.block_in}, OutFeatures{s.block_out}};
      auto layer = std::make_shared<nn::BlockSparseLinear>(
          BlockSparsePattern::random(InFeatures{in}, OutFeatures{s.hidden}, block, d[l], gen), gen);
      m.sparse.push_back(layer);
      m.net->push_back(layer);
    }
    m.net->push_back(std::make_shared<nn::ReLU>());
    in = s.hidden;
  }
  m.net->push_back(std::make_shared<nn::Linear>(in, classes, gen));
  return m;
}

// Test accuracy and mean cross-entropy (nats) in eval mode, without a graph, in batches of 1000.
std::pair<double, double> evaluate(nn::Sequential& net, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  net.eval();
  Tensors parts;
  for (std::int64_t i = 0; i < x.size(0); i += 1000)
    parts.push_back(net.forward(slice(x, 0, i, std::min(x.size(0), i + 1000))));
  net.train();
  const Tensor logits = cat(parts, 0);
  return {nn::metrics::accuracy(logits, y), cross_entropy(logits, y).item()};
}

// "0.1,0.05" -> {0.1, 0.05}.
template <class T>
std::vector<T> split_list(const std::string& text) {
  std::vector<T> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::stringstream is(item);
    T x{};
    is >> x;
    if (is.fail()) throw std::invalid_argument("cannot read '" + item + "' in the list '" + text + "'");
    v.push_back(x);
  }
  return v;
}

// The (block rows, block columns) 0/1 mask of a layer's pattern, one CSV row per block row.
void write_mask(const std::string& path, const BlockSparsePattern& p) {
  const Shape grid = p.grid_shape();
  std::vector<char> mask(static_cast<std::size_t>(grid[0] * grid[1]), 0);
  for (const auto& [r, c] : p.block_coords()) mask[static_cast<std::size_t>(r * grid[1] + c)] = 1;
  std::string text;
  for (std::int64_t r = 0; r < grid[0]; ++r) {
    for (std::int64_t c = 0; c < grid[1]; ++c) {
      text += mask[static_cast<std::size_t>(r * grid[1] + c)] ? '1' : '0';
      text += c + 1 < grid[1] ? "," : "\n";
    }
  }
  write_file_atomic(path, text, "sparse_training");
}

// The share of p's blocks that are not in `initial`.
double turnover(const BlockSparsePattern& initial, const BlockSparsePattern& p) {
  const auto a = initial.block_coords(), b = p.block_coords();
  std::vector<std::pair<std::int64_t, std::int64_t>> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  return b.empty() ? 0.0 : 1.0 - double(common.size()) / double(b.size());
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  std::string densities = "0.1,0.05", methods = "dense,static,rigl";
  CLI::App app{"sparse_training: a wide MLP on Fashion-MNIST, dense vs static block-sparse vs RigL"};
  app.add_option("--task", s.task,
                 "fashion (the MLP on Fashion-MNIST) or words (a character MLP on wamerican: --context ids "
                 "embedded in --embed features, predicting the next character)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion", "words"}));
  app.add_option("--context", s.context, "words: characters of context")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--embed", s.embed, "words: features per character")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", s.epochs, "epochs (the same for every run)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", s.batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--optimizer", s.optimizer, "adam, or sgd (momentum 0.9, as the RigL paper)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--lr", s.lr, "peak learning rate, cosine-decayed to 0 (0: 1e-3 for Adam, 0.05 for SGD)")
      ->capture_default_str();
  app.add_option("--hidden", s.hidden, "width of the two hidden layers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--block-in", s.block_in, "inputs per block (must divide 784 and --hidden)")->capture_default_str();
  app.add_option("--block-out", s.block_out, "outputs per block (must divide --hidden)")->capture_default_str();
  app.add_option("--densities", densities, "block densities of the sparse runs, comma-separated")
      ->capture_default_str();
  app.add_option("--methods", methods, "runs: dense, static, set, rigl (comma-separated)")->capture_default_str();
  app.add_option("--update-every", s.update_every, "steps between structure updates (RigL's delta T)")
      ->capture_default_str();
  app.add_option("--drop-fraction", s.drop_fraction, "share of blocks moved at the first update (RigL's alpha)")
      ->capture_default_str();
  app.add_flag("--erdos-renyi", s.erdos_renyi,
               "per-layer densities by RigL's Erdős-Rényi rule instead of uniform (the same total stored)");
  app.add_option("--train", s.train_size, "use the first N training images (0: all 60000)")->capture_default_str();
  app.add_option("--test", s.test_size, "use the first N test images (0: all 10000)")->capture_default_str();
  app.add_option("--seed", s.seed, "seed of the inits, patterns and shuffles")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_option("--min-accuracy", s.min_accuracy, "exit non-zero when a run's test accuracy is below this")
      ->capture_default_str();
  app.add_option("--data", s.data, "folder of the Fashion-MNIST IDX files")->capture_default_str();
  app.add_option("--out", s.out, "output folder for CSVs and plots")->capture_default_str();
  app.add_flag("--quick", s.quick,
               "the main job's short form: hidden 1024, 12000 training and 2000 test images, 2 epochs, density "
               "0.1, accuracy >= 75%");
  CLI11_PARSE(app, argc, argv);
  if (s.quick) {
    if (app.count("--hidden") == 0) s.hidden = 1024;
    if (s.train_size == 0) s.train_size = 12000;
    if (s.test_size == 0) s.test_size = 2000;
    if (app.count("--epochs") == 0) s.epochs = 2;
    if (app.count("--densities") == 0) densities = "0.1";
    if (app.count("--update-every") == 0) s.update_every = 25;
    if (app.count("--min-accuracy") == 0) s.min_accuracy = 0.75;
  }
  if (s.task == "words" && app.count("--min-accuracy") == 0) s.min_accuracy = 0;
  if (s.threads > 0) set_num_threads(s.threads);
  if (s.lr == 0) s.lr = s.optimizer == "adam" ? 1e-3 : 0.05;

  try {
    s.densities = split_list<double>(densities);
    s.methods = split_list<std::string>(methods);
    for (const auto& m : s.methods)
      if (m != "dense" && m != "static" && m != "set" && m != "rigl")
        throw std::invalid_argument("--methods: unknown method '" + m + "' (dense, static, set, rigl)");
    if (s.train_size < 0 || s.test_size < 0) throw std::invalid_argument("--train and --test must be >= 0");

    // The training set, the test inputs and labels, the first hidden layer's input width, the classes.
    std::shared_ptr<nn::TensorDataset> train;
    Tensor x_test, y_test;
    std::int64_t in0 = 784, classes = 10;
    auto first = [](const Tensor& t, std::int64_t n) { return n == 0 ? t : slice(t, 0, 0, std::min(n, t.size(0))); };
    if (s.task == "fashion") {
      using nn::datasets::FashionMNIST;
      const FashionMNIST train_full(FashionMNIST::Split::train, s.data), test_full(FashionMNIST::Split::test, s.data);
      // Pixels standardised with the training set's mean and standard deviation.
      auto standardise = [](const Tensor& x) { return div(sub(x, 0.2860), 0.3530); };
      train = std::make_shared<nn::TensorDataset>(standardise(first(train_full.images(), s.train_size)),
                                                  first(train_full.labels(), s.train_size));
      x_test = standardise(first(test_full.images(), s.test_size));
      y_test = first(test_full.labels(), s.test_size);
      std::printf("Fashion-MNIST: %zu training images, %lld test images; MLP 784-%lld-%lld-10", train->size(),
                  static_cast<long long>(x_test.size(0)), static_cast<long long>(s.hidden),
                  static_cast<long long>(s.hidden));
    } else {
      using nn::datasets::WordList;
      const WordList words;
      const auto tr = words.context_dataset(WordList::Split::train, s.context);
      const auto va = words.context_dataset(WordList::Split::val, s.context);
      train = std::make_shared<nn::TensorDataset>(first(tr->data(), s.train_size), first(tr->target(), s.train_size));
      x_test = first(va->data(), s.test_size);
      y_test = first(va->target(), s.test_size);
      in0 = s.context * s.embed;
      classes = words.vocab_size();
      std::printf(
          "wamerican: %zu training and %lld held-out next-character examples; embedding %lld x %lld, MLP "
          "%lld-%lld-%lld-%lld",
          train->size(), static_cast<long long>(x_test.size(0)), static_cast<long long>(s.context),
          static_cast<long long>(s.embed), static_cast<long long>(in0), static_cast<long long>(s.hidden),
          static_cast<long long>(s.hidden), static_cast<long long>(classes));
    }
    std::printf(", blocks of %lld in x %lld out; %d epochs of batch %zu; %d threads\n",
                static_cast<long long>(s.block_in), static_cast<long long>(s.block_out), s.epochs, s.batch,
                get_num_threads());

    std::vector<Run> runs;
    std::vector<double> turn_step, turn_value;
    std::vector<std::string> turn_run;
    for (const auto& method : s.methods) {
      const std::vector<double> ds = method == "dense" ? std::vector<double>{1.0} : s.densities;
      for (const double density : ds) {
        Run run;
        run.method = method;
        run.density = density;
        run.name = method == "dense" ? "dense" : fmt::format("{}-{}", method, density);
        Generator gen(s.seed);
        Model model = make_model(s, method, density, in0, classes, gen);
        nn::DataLoader loader(train, nn::DataLoaderOptions(s.batch).shuffle(true).seed(s.seed + 1));
        std::unique_ptr<nn::Optimizer> optimizer;
        if (s.optimizer == "adam")
          optimizer = std::make_unique<nn::Adam>(model.net->parameters(), nn::AdamOptions(s.lr));
        else
          optimizer = std::make_unique<nn::SGD>(model.net->parameters(), nn::SGDOptions(s.lr).momentum(0.9));
        nn::Optimizer& opt = *optimizer;
        const long total = static_cast<long>(s.epochs) * static_cast<long>(loader.size());
        std::unique_ptr<nn::Sparsifier> sparsifier;
        std::vector<BlockSparsePattern> initial;
        for (const auto& l : model.sparse) initial.push_back(l->pattern());
        if (method == "rigl" || method == "set")
          sparsifier = std::make_unique<nn::Sparsifier>(
              model.sparse, opt,
              nn::SparsifierOptions(s.update_every, static_cast<std::int64_t>(s.end_fraction * double(total)))
                  .drop_fraction(s.drop_fraction)
                  .grow(method == "rigl" ? nn::GrowMode::gradient : nn::GrowMode::random)
                  .seed(s.seed + 2));
        utils::ProgressBar bar(run.name, total);
        double train_seconds = 0;
        long step = 0;
        for (int epoch = 1; epoch <= s.epochs; ++epoch) {
          const auto t0 = std::chrono::steady_clock::now();
          for (auto& batch : loader) {
            opt.param_groups()[0].lr = s.lr * 0.5 * (1 + std::cos(std::numbers::pi * double(step) / double(total)));
            opt.zero_grad(true);
            Tensor loss = cross_entropy(model.net->forward(batch.data), batch.target);
            loss.backward();
            opt.step();
            if (sparsifier) {
              sparsifier->step();
              // Every update step is logged, also one that moved no block (the moving runs then share
              // their steps: one column each in mask_turnover.csv).
              if (sparsifier->is_update(sparsifier->step_count()))
                for (std::size_t l = 0; l < model.sparse.size(); ++l) {
                  turn_run.push_back(fmt::format("{} layer {}", run.name, l + 1));
                  turn_step.push_back(double(step + 1));
                  turn_value.push_back(turnover(initial[l], model.sparse[l]->pattern()));
                }
            }
            bar.update(++step, loss.item());
          }
          train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const auto [accuracy, loss] = evaluate(*model.net, x_test, y_test);
          run.epoch_accuracy.push_back(100 * accuracy);
          run.loss = loss;
          std::printf("%s epoch %d: test accuracy %.2f%%, loss %.4f nats (%.4f bits)\n", run.name.c_str(), epoch,
                      run.epoch_accuracy.back(), loss, loss / std::numbers::ln2);
          std::fflush(stdout);
        }
        run.accuracy = run.epoch_accuracy.back();
        run.ms_per_step = 1000 * train_seconds / double(std::max(1L, total));
        for (const auto& p : model.net->parameters()) {
          run.param_bytes += double(p.nbytes());
          for (const auto& b : opt.state_buffers(p)) run.optimizer_bytes += double(b.nbytes());
        }
        if (!model.sparse.empty()) {
          fs::create_directories(s.out);
          write_mask((fs::path(s.out) / ("mask_" + run.name + "_initial.csv")).string(), initial[1]);
          write_mask((fs::path(s.out) / ("mask_" + run.name + "_final.csv")).string(), model.sparse[1]->pattern());
        }
        runs.push_back(run);
      }
    }

    // The table, against the dense run when there is one.
    const Run* dense = nullptr;
    for (const auto& r : runs)
      if (r.method == "dense") dense = &r;
    std::printf("\n%-14s %8s %9s %10s %11s %11s %14s %9s\n", "run", "density", "test acc", "bits", "ms/step",
                "vs dense", "param+opt MB", "vs dense");
    for (const auto& r : runs) {
      const double mem = r.param_bytes + r.optimizer_bytes;
      std::printf("%-14s %8.3f %8.2f%% %10.4f %11.2f %11s %14.2f %9s\n", r.name.c_str(), r.density, r.accuracy,
                  r.loss / std::numbers::ln2, r.ms_per_step,
                  dense ? fmt::format("{:.3f}x", r.ms_per_step / dense->ms_per_step).c_str() : "-", mem / 1e6,
                  dense ? fmt::format("{:.3f}x", mem / (dense->param_bytes + dense->optimizer_bytes)).c_str() : "-");
    }

    fs::create_directories(s.out);
    std::vector<std::vector<double>> cols(7);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      cols[0].push_back(double(i));
      cols[1].push_back(r.density);
      cols[2].push_back(r.accuracy);
      cols[3].push_back(r.ms_per_step);
      cols[4].push_back(r.param_bytes);
      cols[5].push_back(r.optimizer_bytes);
      cols[6].push_back(r.loss / std::numbers::ln2);
    }
    utils::write_csv((fs::path(s.out) / "runs.csv").string(),
                     {"run_index", "density", "test_accuracy_pct", "ms_per_step", "param_bytes", "optimizer_bytes",
                      "test_loss_bits"},
                     cols);
    std::string legend = "# run_index: ";
    for (std::size_t i = 0; i < runs.size(); ++i) legend += fmt::format("{}={} ", i, runs[i].name);
    write_file_atomic((fs::path(s.out) / "runs_legend.txt").string(), legend + "\n", "sparse_training");
    std::vector<std::vector<double>> acc_cols(1 + runs.size());
    std::vector<std::string> acc_names{"epoch"};
    for (int e = 1; e <= s.epochs; ++e) acc_cols[0].push_back(e);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      acc_names.push_back(runs[i].name);
      acc_cols[i + 1] = runs[i].epoch_accuracy;
    }
    utils::write_csv((fs::path(s.out) / "accuracy.csv").string(), acc_names, acc_cols);
    // Every moving run has the same update steps (same schedule): one column per (run, layer).
    std::vector<std::string> turn_names{"step"};
    std::vector<std::vector<double>> turn_cols(1);
    for (std::size_t i = 0; i < turn_step.size(); ++i) {
      auto it = std::find(turn_names.begin(), turn_names.end(), turn_run[i]);
      if (it == turn_names.end()) {
        turn_names.push_back(turn_run[i]);
        turn_cols.emplace_back();
        it = turn_names.end() - 1;
      }
      auto& col = turn_cols[static_cast<std::size_t>(it - turn_names.begin())];
      if (it == turn_names.begin() + 1) turn_cols[0].push_back(turn_step[i]);
      col.push_back(turn_value[i]);
    }
    if (!turn_step.empty()) utils::write_csv((fs::path(s.out) / "mask_turnover.csv").string(), turn_names, turn_cols);

    std::string plots =
        "set output 'accuracy_vs_density.png'\nset title 'test accuracy against block density'\n"
        "set xlabel 'block density (stored share of the hidden weights)'\nset ylabel 'test accuracy (%)'\n"
        "set logscale x\nset offsets graph 0.08, graph 0.08, graph 0.08, graph 0.08\nset key bottom right\n";
    std::string plot_cmd = "plot ";
    for (const auto& method : s.methods) {
      plot_cmd += fmt::format(
          "'runs.csv' using 2:({} ? $3 : 1/0) with linespoints pt 7 ps 2 lw 2 "
          "title '{}', ",
          [&] {
            std::string cond = "(0";
            for (std::size_t i = 0; i < runs.size(); ++i)
              if (runs[i].method == method) cond += fmt::format(" || $1 == {}", i);
            return cond + ")";
          }(),
          method);
    }
    plots += plot_cmd.substr(0, plot_cmd.size() - 2) + "\nunset logscale x\nset offsets 0, 0, 0, 0\n";
    plots +=
        "set output 'accuracy.png'\nset title 'test accuracy after each epoch'\nset xlabel 'epoch'\n"
        "set ylabel 'test accuracy (%)'\nset xtics 1\nplot for [i=2:" +
        std::to_string(runs.size() + 1) + "] 'accuracy.csv' using 1:i with linespoints lw 2\nset xtics autofreq\n";
    if (!turn_step.empty())
      plots +=
          "set output 'mask_turnover.png'\nset title 'share of blocks not in the initial random pattern'\n"
          "set xlabel 'training step'\nset ylabel 'share'\nset key bottom right\nplot for [i=2:" +
          std::to_string(turn_names.size()) + "] 'mask_turnover.csv' using 1:i with lines lw 2\n";
    for (const auto& r : runs)
      if (r.method == "rigl" || r.method == "set") {
        plots +=
            "set output 'mask.png'\nunset key\nunset grid\nset size ratio -1\nset palette gray negative\n"
            "unset colorbox\nset autoscale xfix\nset autoscale yfix\nset yrange [*:*] reverse\n"
            "set xlabel 'block column (" +
            std::to_string(s.block_in) +
            " inputs each)'\n"
            "set ylabel 'block row (" +
            std::to_string(s.block_out) +
            " outputs each)'\n"
            "set multiplot layout 1,2\nset title '" +
            r.name +
            ": second layer, initial blocks'\n"
            "plot 'mask_" +
            r.name + "_initial.csv' matrix with image\nset title '" + r.name +
            ": second layer, final blocks'\nplot 'mask_" + r.name +
            "_final.csv' matrix with image\n"
            "unset multiplot\n";
        break;
      }
    const bool plotted = examples::run_gnuplot(s.out, "plots", plots);
    std::printf("\nruns.csv, accuracy.csv, mask_turnover.csv, mask_*.csv%s written to %s/\n",
                plotted ? " and accuracy_vs_density.png, accuracy.png, mask_turnover.png, mask.png" : "",
                s.out.c_str());

    for (const auto& r : runs)
      if (r.accuracy < 100 * s.min_accuracy) {
        std::fprintf(stderr, "sparse_training: FAILED: %s reached %.2f%%, below %.2f%%\n", r.name.c_str(), r.accuracy,
                     100 * s.min_accuracy);
        return 1;
      }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparse_training: %s\n", e.what());
    return 2;
  }
}
