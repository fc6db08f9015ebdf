// block_sparse_mlp: a classifier on a grouped task, trained three ways side by side.
//
// The task: G independent sensor groups (16 features each). Each group has its own hidden
// non-linear "detector"; the label is the group whose detector fires hardest (G classes). A network
// that mirrors this structure gives each group its own sub-network:
//   1. block-diagonal: nn::BlockSparseLinear layers whose weights are G diagonal blocks
//      (group g's 16 inputs feed only group g's 64 hidden units, and so on), then a dense head;
//   2. random block-sparse: the same layer sizes and the same number of stored blocks, but the
//      blocks placed at random (a pattern that ignores the groups);
//   3. dense masked: ordinary dense weights multiplied by the block-diagonal mask in every forward,
//      the PyTorch pruning-mask way: the same function as 1, with every zero stored and multiplied.
// It prints accuracy, parameter bytes and time per epoch for each, and plots the loss curves.
//
// Your own data: --data X.npy (n, features) --labels y.npy (n) integer-valued; features must be
// divisible by --groups.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "../common/plot.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Settings {
  std::int64_t groups = 8, features_per_group = 16, hidden_per_group = 64;
  std::int64_t train = 16384, test = 4096;
  int epochs = 8;
  std::size_t batch = 128;
  double lr = 2e-3;
  std::uint64_t seed = 3;
  std::string out = "out/block_sparse_mlp";
  std::string data_npy, labels_npy;
  int threads = 0;
};

// The synthetic task: x ~ N(0, 1) in G groups; score_g = v_g . tanh(U_g x_g); label = argmax_g score_g.
void make_task(const Settings& s, Tensor& x, Tensor& y, std::int64_t n, Generator& gen, std::uint64_t teacher_seed) {
  const std::int64_t G = s.groups, F = s.features_per_group, H = 24;
  Generator teacher(teacher_seed);
  std::vector<double> U(static_cast<std::size_t>(G * H * F)), v(static_cast<std::size_t>(G * H));
  for (double& u : U) u = teacher.normal() / std::sqrt(static_cast<double>(F)) * 2.0;
  for (double& w : v) w = teacher.normal();
  x = Tensor::randn({n, G * F}, gen);
  const std::vector<double> xs = x.to_vector();
  std::vector<double> labels(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    double best = -1e300;
    for (std::int64_t g = 0; g < G; ++g) {
      double score = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        double a = 0;
        for (std::int64_t f = 0; f < F; ++f)
          a += U[static_cast<std::size_t>((g * H + h) * F + f)] * xs[static_cast<std::size_t>(i * G * F + g * F + f)];
        score += v[static_cast<std::size_t>(g * H + h)] * std::tanh(a);
      }
      if (score > best) {
        best = score;
        labels[static_cast<std::size_t>(i)] = static_cast<double>(g);
      }
    }
  }
  y = Tensor::from_vector(labels, {n}, kInt64);  // class indices
}

// A dense layer whose weight is multiplied by a fixed 0/1 mask in every forward (torch's pruning way).
class MaskedLinear : public nn::UnaryModule {
 public:
  MaskedLinear(const Tensor& mask, Generator& gen) : UnaryModule("MaskedLinear") {
    const std::int64_t out = mask.size(0), in = mask.size(1);
    // Same init rule as BlockSparseLinear: fan-in counted over the connections that exist.
    const std::vector<double> m = mask.to_vector();
    std::vector<double> w(m.size()), b(static_cast<std::size_t>(out));
    for (std::int64_t i = 0; i < out; ++i) {
      double fan_in = 0;
      for (std::int64_t j = 0; j < in; ++j) fan_in += m[static_cast<std::size_t>(i * in + j)];
      const double bound = fan_in > 0 ? 1 / std::sqrt(fan_in) : 0;
      for (std::int64_t j = 0; j < in; ++j) w[static_cast<std::size_t>(i * in + j)] = gen.uniform(-bound, bound);
      b[static_cast<std::size_t>(i)] = gen.uniform(-bound, bound);
    }
    weight_ = register_parameter("weight", Tensor::from_vector(w, {out, in}));
    bias_ = register_parameter("bias", Tensor::from_vector(b, {out}));
    mask_ = register_buffer("mask", mask.clone_data());
  }
  Tensor forward(const Tensor& x) override { return nn::functional::linear(x, weight_ * mask_, bias_); }

 private:
  Tensor weight_, bias_, mask_;
};

struct Model {
  std::string name;
  std::shared_ptr<nn::Sequential> net;
  std::vector<double> loss_curve;
  double seconds_per_epoch = 0, accuracy = 0;
  std::size_t bytes = 0;
};

double accuracy(nn::Sequential& net, const Tensor& x, const Tensor& y) {
  NoGradGuard ng;
  net.eval();
  const Tensor logits = net.forward(x);
  net.train();
  return nn::metrics::accuracy(logits, y);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "block_sparse_mlp: a grouped classification task trained with block-diagonal, random block-sparse and "
      "dense masked layers side by side"};
  app.add_option("--groups", s.groups, "sensor groups (= classes for the synthetic task)")->capture_default_str();
  app.add_option("--hidden-per-group", s.hidden_per_group, "hidden units per group")->capture_default_str();
  app.add_option("--train", s.train, "training samples (synthetic)")->capture_default_str();
  app.add_option("--test", s.test, "test samples (synthetic)")->capture_default_str();
  app.add_option("--epochs", s.epochs, "epochs")->capture_default_str();
  app.add_option("--batch", s.batch, "batch size")->capture_default_str();
  app.add_option("--lr", s.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--seed", s.seed, "seed")->capture_default_str();
  app.add_option("--out", s.out, "output folder for CSVs and plots")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_option("--data", s.data_npy, "your features, (n, features) .npy (with --labels)");
  app.add_option("--labels", s.labels_npy, "your class labels, (n) .npy of integer values");
  CLI11_PARSE(app, argc, argv);
  if (s.threads > 0) set_num_threads(s.threads);

  try {
    Generator gen(s.seed);
    Tensor x_train, y_train, x_test, y_test;
    std::int64_t classes = s.groups;
    if (s.data_npy.empty()) {
      make_task(s, x_train, y_train, s.train, gen, s.seed + 100);
      make_task(s, x_test, y_test, s.test, gen, s.seed + 100);
    } else {
      if (s.labels_npy.empty()) throw std::invalid_argument("--data needs --labels");
      const Tensor x = load_npy(s.data_npy).to(kFloat32), labels_in = load_npy(s.labels_npy);
      const Tensor y = labels_in.to(kInt64);  // class indices
      if (!allclose(y.to(kFloat64), labels_in.to(kFloat64), 0, 0))
        throw std::invalid_argument("--labels must hold integer class indices");
      if (x.dim() != 2 || y.dim() != 1 || x.size(0) != y.size(0) || x.size(0) < 2)
        throw std::invalid_argument("--data must be (n, features) and --labels (n), n >= 2; got " +
                                    shape_str(x.shape()) + " and " + shape_str(y.shape()));
      if (x.size(1) % s.groups != 0)
        throw std::invalid_argument("--data has " + std::to_string(x.size(1)) +
                                    " features, not divisible by --groups " + std::to_string(s.groups));
      s.features_per_group = x.size(1) / s.groups;
      const std::vector<double> labels = y.to_vector();
      classes = static_cast<std::int64_t>(*std::max_element(labels.begin(), labels.end())) + 1;
      const std::int64_t n_test = std::max<std::int64_t>(1, x.size(0) / 5);  // last 20% held out
      x_train = slice(x, 0, 0, x.size(0) - n_test);
      y_train = slice(y, 0, 0, x.size(0) - n_test);
      x_test = slice(x, 0, x.size(0) - n_test, x.size(0));
      y_test = slice(y, 0, x.size(0) - n_test, x.size(0));
    }
    const std::int64_t G = s.groups, in = G * s.features_per_group, hidden = G * s.hidden_per_group;
    std::printf("task: %lld groups x %lld features -> %lld classes; %lld train / %lld test samples\n",
                static_cast<long long>(G), static_cast<long long>(s.features_per_group),
                static_cast<long long>(classes), static_cast<long long>(x_train.size(0)),
                static_cast<long long>(x_test.size(0)));

    // The three patterns. Block-diagonal: group g's inputs feed group g's hidden units.
    const auto diag1 = BlockSparsePattern::block_diagonal(std::vector<BlockSparsePattern::DiagonalGroup>(
        G, {InFeatures{s.features_per_group}, OutFeatures{s.hidden_per_group}}));
    const auto diag2 = BlockSparsePattern::block_diagonal(std::vector<BlockSparsePattern::DiagonalGroup>(
        G, {InFeatures{s.hidden_per_group}, OutFeatures{s.hidden_per_group}}));
    // Random: the same block grid and the same number of blocks (G), at random places.
    auto random_pattern = [&](std::int64_t out, std::int64_t inputs, std::int64_t bo, std::int64_t bi) {
      std::vector<std::pair<std::int64_t, std::int64_t>> all;
      for (std::int64_t r = 0; r < out / bo; ++r)
        for (std::int64_t c = 0; c < inputs / bi; ++c) all.emplace_back(r, c);
      for (std::size_t i = all.size() - 1; i > 0; --i)  // Fisher-Yates with our seeded generator
        std::swap(all[i], all[static_cast<std::size_t>(gen.uniform(0, 1) * static_cast<double>(i + 1)) % (i + 1)]);
      all.resize(static_cast<std::size_t>(G));
      return BlockSparsePattern::from_block_coords(InFeatures{inputs}, OutFeatures{out},
                                                   {InFeatures{bi}, OutFeatures{bo}}, all);
    };
    const auto rand1 = random_pattern(hidden, in, s.hidden_per_group, s.features_per_group);
    const auto rand2 = random_pattern(hidden, hidden, s.hidden_per_group, s.hidden_per_group);

    std::vector<Model> models(3);
    models[0].name = "block-diagonal";
    models[0].net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
        std::make_shared<nn::BlockSparseLinear>(diag1, gen), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::BlockSparseLinear>(diag2, gen), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(hidden, classes, gen)});
    models[1].name = "random block-sparse";
    models[1].net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
        std::make_shared<nn::BlockSparseLinear>(rand1, gen), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::BlockSparseLinear>(rand2, gen), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(hidden, classes, gen)});
    models[2].name = "dense masked";
    models[2].net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
        std::make_shared<MaskedLinear>(ne(nn::BlockSparseLinear(diag1).to_dense(), Tensor::scalar(0.0)).to(kFloat32),
                                       gen),
        std::make_shared<nn::ReLU>(),
        std::make_shared<MaskedLinear>(ne(nn::BlockSparseLinear(diag2).to_dense(), Tensor::scalar(0.0)).to(kFloat32),
                                       gen),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(hidden, classes, gen)});

    auto train_set = std::make_shared<nn::TensorDataset>(x_train, y_train);
    for (Model& m : models) {
      nn::DataLoader loader(train_set, nn::DataLoaderOptions(s.batch).shuffle(true).seed(s.seed));
      nn::Adam opt(m.net->parameters(), nn::AdamOptions(s.lr));
      // Parameter bytes, buffers included (the dense model's mask is memory it needs to run).
      m.bytes = m.net->parameter_bytes();
      for (const auto& [name, b] : m.net->named_buffers()) m.bytes += b.nbytes();
      utils::ProgressBar bar(m.name, static_cast<long>(s.epochs) * static_cast<long>(loader.size()));
      long step = 0;
      for (int epoch = 0; epoch < s.epochs; ++epoch) {
        for (auto& batch : loader) {
          opt.zero_grad();
          Tensor loss = cross_entropy(m.net->forward(batch.data), batch.target);
          loss.backward();
          opt.step();
          m.loss_curve.push_back(loss.item());
          bar.update(++step, m.loss_curve.back());
        }
      }
      m.seconds_per_epoch = bar.seconds() / s.epochs;
      m.accuracy = accuracy(*m.net, x_test, y_test);
    }

    std::printf("\n%-22s %10s %16s %16s\n", "model", "test acc", "param bytes", "s / epoch");
    for (const Model& m : models)
      std::printf("%-22s %9.2f%% %16zu %16.3f\n", m.name.c_str(), 100 * m.accuracy, m.bytes, m.seconds_per_epoch);
    std::printf("block-diagonal vs dense masked: %.1f%% of the bytes, %.2fx the speed, accuracy %+.2f points\n",
                100.0 * static_cast<double>(models[0].bytes) / static_cast<double>(models[2].bytes),
                models[2].seconds_per_epoch / models[0].seconds_per_epoch,
                100 * (models[0].accuracy - models[2].accuracy));

    fs::create_directories(s.out);
    // Loss per step is noisy (one batch each): the CSV keeps it raw and also as a moving average
    // over the last epoch's worth of steps (at most 50), plotted against the epoch.
    const std::size_t n_steps = models[0].loss_curve.size();
    const double steps_per_epoch = static_cast<double>(n_steps) / s.epochs;
    const std::size_t window = std::max<std::size_t>(1, std::min<std::size_t>(50, n_steps / s.epochs));
    std::vector<double> epoch_at(n_steps);
    for (std::size_t i = 0; i < n_steps; ++i) epoch_at[i] = static_cast<double>(i + 1) / steps_per_epoch;
    std::vector<std::vector<double>> columns{epoch_at};
    for (const Model& m : models) columns.push_back(m.loss_curve);
    for (const Model& m : models) {
      std::vector<double> avg(n_steps);
      double run = 0;
      for (std::size_t i = 0; i < n_steps; ++i) {
        run += m.loss_curve[i] - (i >= window ? m.loss_curve[i - window] : 0.0);
        avg[i] = run / static_cast<double>(std::min(i + 1, window));
      }
      columns.push_back(std::move(avg));
    }
    utils::write_csv((fs::path(s.out) / "loss.csv").string(),
                     {"epoch", "block_diagonal", "random_block_sparse", "dense_masked", "block_diagonal_avg",
                      "random_block_sparse_avg", "dense_masked_avg"},
                     columns);
    // One row per model: what the example is about (accuracy, memory, time) as a bar chart.
    std::vector<double> index, acc, kbytes, ms_epoch;
    for (std::size_t k = 0; k < models.size(); ++k) {
      index.push_back(static_cast<double>(k));
      acc.push_back(100 * models[k].accuracy);
      kbytes.push_back(static_cast<double>(models[k].bytes) / 1024.0);
      ms_epoch.push_back(1000 * models[k].seconds_per_epoch);
    }
    utils::write_csv((fs::path(s.out) / "summary.csv").string(),
                     {"model", "test_accuracy_pct", "param_kib", "ms_per_epoch"}, {index, acc, kbytes, ms_epoch});
    const std::string names =
        "set xtics (\"block\\ndiagonal\" 0, \"random\\nblock-sparse\" 1, \"dense\\nmasked\" 2)\nunset xlabel\n";
    // Headroom above the tallest bar for its value label.
    const std::string bars =
        "set style fill solid 0.8 border -1\nset boxwidth 0.6\nset xrange [-0.6:2.6]\nset yrange [0:*]\n"
        "set offsets 0, 0, graph 0.1, 0\nset bmargin 4\nunset key\n";
    const bool plotted = examples::run_gnuplot(
        s.out, "plots",
        "set output 'loss.png'\nset title sprintf('training loss (moving average over %d steps)', " +
            std::to_string(window) +
            ")\nset xlabel 'epoch'\nset ylabel 'cross-entropy loss'\nset key top right\n"
            "plot 'loss.csv' using 1:5 with lines lw 3 lc rgb '#1f77b4' title 'block-diagonal', "
            "'' using 1:6 with lines lw 2 dt 2 lc rgb '#2ca02c' title 'random block-sparse', "
            "'' using 1:7 with lines lw 2 dt 4 lc rgb '#d62728' title 'dense masked'\n"
            "set output 'summary.png'\nset multiplot layout 1,3 title 'same task, three layer types'\n" +
            names + bars +
            "set title 'test accuracy (higher is better)'\nset ylabel '%'\n"
            "plot 'summary.csv' using 1:2 with boxes lc rgb '#1f77b4', '' using 1:2:(sprintf('%.1f%%', $2)) with "
            "labels offset 0,1\n"
            "set title 'parameter memory (lower is better)'\nset ylabel 'KiB'\n"
            "plot 'summary.csv' using 1:3 with boxes lc rgb '#2ca02c', '' using 1:3:(sprintf('%.0f', $3)) with labels "
            "offset 0,1\n"
            "set title 'training time (lower is better)'\nset ylabel 'ms per epoch'\n"
            "plot 'summary.csv' using 1:4 with boxes lc rgb '#d62728', '' using 1:4:(sprintf('%.0f', $4)) with "
            "labels offset 0,1\n"
            "unset multiplot\n");
    std::printf("\nCSVs%s written to %s/\n", plotted ? " and PNG plots" : "", s.out.c_str());
    // Exit status: the structured sparse model must match the dense one's accuracy (within 2 points).
    if (models[0].accuracy + 0.02 < models[2].accuracy) {
      std::fprintf(stderr,
                   "block_sparse_mlp: FAILED: block-diagonal accuracy %.4f is more than 2 points below the dense "
                   "masked model's %.4f (try more --epochs)\n",
                   models[0].accuracy, models[2].accuracy);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "block_sparse_mlp: %s\n", e.what());
    return 2;
  }
}
