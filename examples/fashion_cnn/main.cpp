// fashion_cnn: a small convolutional network trained on Fashion-MNIST (70000 28x28 grey images of
// 10 kinds of clothing), read from the Debian package dataset-fashion-mnist.
//
// The model (model.hpp), two conv + pool blocks with batch norm, then a dropout-regularised head:
//   Conv2d(1, 32, 3, pad 1) BatchNorm2d ReLU MaxPool2d(2)     28x28 -> 14x14
//   Conv2d(32, 32, 3, pad 1) BatchNorm2d ReLU MaxPool2d(2)    14x14 -> 7x7
//   Flatten Dropout(0.25) Linear(1568, 128) ReLU Dropout(0.25) Linear(128, 10)
// trained with Adam on a one-cycle schedule (the lr rises linearly over the first 15% of the steps,
// then falls along a cosine to zero), batch 64. The defaults (4 epochs, 3752 steps) reached 91.77%
// test accuracy (--epochs 3: 91.30%, too close to the bar to be the default; the run times are in
// bench/results/build_and_run_times.md); the program exits non-zero below 91% (below 75% with --quick).
//
// It prints the test accuracy after every epoch and the confusion matrix at the end, and writes to
// --out: loss.csv / accuracy.csv with loss.png / accuracy.png (gnuplot), confusion.csv, and the
// trained model as fashion_cnn.safetensors (reloaded into a fresh model as a check).
//
//   build/release/examples/fashion_cnn               # the full run
//   build/release/examples/fashion_cnn --quick       # ~300 steps on a subset (the test and main job)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "../common/plot.hpp"
#include "model.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Settings {
  int epochs = 4;
  std::size_t batch = 64;
  double lr = 3e-3;             // the peak of the one-cycle schedule
  double warmup = 0.15;         // the share of the steps spent rising to the peak
  std::int64_t train_size = 0;  // 0: all 60000
  std::int64_t test_size = 0;   // 0: all 10000
  std::uint64_t seed = 0;
  int threads = 0;
  bool quick = false;
  double min_accuracy = 0.91;
  std::string data = nn::datasets::FashionMNIST::kDefaultRoot;
  std::string out = "out/fashion_cnn";
};

// The one-cycle lr at step t of `total`: linear from lr/25 to lr over the warmup, then a cosine to 0.
double one_cycle(const Settings& s, long t, long total) {
  const double warm = std::max(1.0, s.warmup * static_cast<double>(total));
  const double x = static_cast<double>(t);
  if (x < warm) return s.lr * (0.04 + 0.96 * x / warm);
  const double p = (x - warm) / std::max(1.0, static_cast<double>(total) - warm);
  return s.lr * 0.5 * (1 + std::cos(std::numbers::pi * std::min(1.0, p)));
}

// Test logits in eval mode, without a graph, in batches of 1000 (the (n, 10) scores).
Tensor predict_all(nn::Module& net, nn::UnaryModule& model, const Tensor& x) {
  NoGradGuard no_grad;
  net.eval();
  Tensors parts;
  for (std::int64_t i = 0; i < x.size(0); i += 1000)
    parts.push_back(model.forward(slice(x, 0, i, std::min(x.size(0), i + 1000))));
  net.train();
  return cat(parts, 0);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"fashion_cnn: a small CNN (two conv + pool blocks, batch norm, dropout) on Fashion-MNIST"};
  app.add_option("--epochs", s.epochs, "epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", s.batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", s.lr, "peak learning rate (Adam, one-cycle schedule)")->capture_default_str();
  app.add_option("--train", s.train_size, "use the first N training images (0: all 60000)")->capture_default_str();
  app.add_option("--test", s.test_size, "use the first N test images (0: all 10000)")->capture_default_str();
  app.add_option("--seed", s.seed, "seed of the init, the shuffles and the dropout masks")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_option("--min-accuracy", s.min_accuracy, "exit non-zero below this test accuracy")->capture_default_str();
  app.add_option("--data", s.data, "folder of the Fashion-MNIST IDX files")->capture_default_str();
  app.add_option("--out", s.out, "output folder for CSVs, plots and the checkpoint")->capture_default_str();
  app.add_flag("--quick", s.quick,
               "a short run for tests: 6000 training and 2000 test images, 3 epochs (~280 steps), "
               "accuracy >= 75%");
  CLI11_PARSE(app, argc, argv);
  if (s.quick) {
    if (s.train_size == 0) s.train_size = 6000;
    if (s.test_size == 0) s.test_size = 2000;
    if (app.count("--epochs") == 0) s.epochs = 3;
    if (app.count("--min-accuracy") == 0) s.min_accuracy = 0.75;
  }
  if (s.threads > 0) set_num_threads(s.threads);

  try {
    if (s.train_size < 0 || s.test_size < 0) throw std::invalid_argument("--train and --test must be >= 0");
    using nn::datasets::FashionMNIST;
    const FashionMNIST train_full(FashionMNIST::Split::train, s.data), test_full(FashionMNIST::Split::test, s.data);
    auto first = [](const Tensor& t, std::int64_t n) { return n == 0 ? t : slice(t, 0, 0, std::min(n, t.size(0))); };
    auto train = std::make_shared<nn::TensorDataset>(first(train_full.images(), s.train_size),
                                                     first(train_full.labels(), s.train_size));
    const Tensor x_test = first(test_full.images(), s.test_size), y_test = first(test_full.labels(), s.test_size);
    std::printf("Fashion-MNIST: %zu training images, %lld test images; %d epochs of batch %zu, %d threads\n",
                train->size(), static_cast<long long>(x_test.size(0)), s.epochs, s.batch, get_num_threads());

    auto model = examples::make_fashion_cnn(s.seed);
    std::cout << *model << "\n";
    nn::DataLoader loader(train, nn::DataLoaderOptions(s.batch).shuffle(true).seed(s.seed + 1));
    nn::Adam opt(model->parameters(), nn::AdamOptions(s.lr));
    const long total = static_cast<long>(s.epochs) * static_cast<long>(loader.size());
    utils::ProgressBar bar("train", total);

    std::vector<double> step_loss, epoch_index, train_acc, test_acc, epoch_loss;
    long step = 0;
    for (int epoch = 1; epoch <= s.epochs; ++epoch) {
      double loss_sum = 0, correct = 0, seen = 0;
      for (auto& batch : loader) {
        opt.param_groups()[0].lr = one_cycle(s, step, total);
        opt.zero_grad(true);
        const Tensor logits = model->forward(batch.data);
        Tensor loss = cross_entropy(logits, batch.target);
        loss.backward();
        opt.step();
        const double l = loss.item();
        const double n = static_cast<double>(batch.data.size(0));
        step_loss.push_back(l);
        loss_sum += l * n;
        correct += nn::metrics::accuracy(logits.detach(), batch.target) * n;
        seen += n;
        bar.update(++step, l);
      }
      const double acc = nn::metrics::accuracy(predict_all(*model, *model, x_test), y_test);
      epoch_index.push_back(epoch);
      epoch_loss.push_back(loss_sum / seen);
      train_acc.push_back(100 * correct / seen);
      test_acc.push_back(100 * acc);
      std::printf("epoch %d: train loss %.4f, train accuracy %.2f%%, test accuracy %.2f%% (%.0f s so far)\n", epoch,
                  epoch_loss.back(), train_acc.back(), test_acc.back(), bar.seconds());
      std::fflush(stdout);
    }
    const double seconds = bar.seconds();

    const Tensor scores = predict_all(*model, *model, x_test);
    const double accuracy = nn::metrics::accuracy(scores, y_test);
    const Tensor confusion = nn::metrics::confusion_matrix(scores, y_test);
    const std::vector<double> cm = confusion.to_vector();
    std::printf("\ntest accuracy %.2f%% after %d epochs, %.1f s of training (%.1f ms per step)\n", 100 * accuracy,
                s.epochs, seconds, 1000 * seconds / static_cast<double>(std::max(1L, total)));
    std::printf("\nconfusion matrix (rows: true class, columns: predicted class)\n%12s", "");
    for (int p = 0; p < 10; ++p) std::printf(" %5d", p);
    std::printf("  recall\n");
    for (int t = 0; t < 10; ++t) {
      double row = 0;
      std::printf("%d %-10s", t, FashionMNIST::kClasses[static_cast<std::size_t>(t)]);
      for (int p = 0; p < 10; ++p) {
        const double c = cm[static_cast<std::size_t>(t * 10 + p)];
        row += c;
        std::printf(" %5.0f", c);
      }
      std::printf("  %5.1f%%\n", row > 0 ? 100 * cm[static_cast<std::size_t>(t * 11)] / row : 0.0);
    }

    fs::create_directories(s.out);
    std::vector<std::vector<double>> cm_columns(11);
    std::vector<std::string> cm_names{"true_class"};
    for (int t = 0; t < 10; ++t) cm_columns[0].push_back(t);
    for (int p = 0; p < 10; ++p) {
      cm_names.push_back("predicted_" + std::to_string(p));
      for (int t = 0; t < 10; ++t)
        cm_columns[static_cast<std::size_t>(p + 1)].push_back(cm[static_cast<std::size_t>(t * 10 + p)]);
    }
    utils::write_csv((fs::path(s.out) / "confusion.csv").string(), cm_names, cm_columns);

    // Loss per step is noisy: the CSV keeps it raw and as a moving average over 50 steps.
    const std::size_t window = std::min<std::size_t>(50, std::max<std::size_t>(1, step_loss.size() / 10));
    std::vector<double> at_epoch, avg;
    double run = 0;
    for (std::size_t i = 0; i < step_loss.size(); ++i) {
      at_epoch.push_back(static_cast<double>(i + 1) / static_cast<double>(loader.size()));
      run += step_loss[i] - (i >= window ? step_loss[i - window] : 0.0);
      avg.push_back(run / static_cast<double>(std::min(i + 1, window)));
    }
    utils::write_csv((fs::path(s.out) / "loss.csv").string(), {"epoch", "loss", "loss_avg"},
                     {at_epoch, step_loss, avg});
    utils::write_csv((fs::path(s.out) / "accuracy.csv").string(),
                     {"epoch", "train_loss", "train_accuracy_pct", "test_accuracy_pct"},
                     {epoch_index, epoch_loss, train_acc, test_acc});
    const bool plotted = examples::run_gnuplot(
        s.out, "plots",
        "set output 'loss.png'\nset title sprintf('training loss (moving average over %d steps)', " +
            std::to_string(window) +
            ")\nset xlabel 'epoch'\nset ylabel 'cross-entropy loss'\nset logscale y\n"
            "plot 'loss.csv' using 1:2 with lines lc rgb '#c0c0c0' title 'per step', "
            "'' using 1:3 with lines lw 3 lc rgb '#1f77b4' title 'moving average'\nunset logscale y\n"
            "set output 'accuracy.png'\nset title 'accuracy after each epoch'\nset xlabel 'epoch'\n"
            "set ylabel '%'\nset key bottom right\nset xtics 1\n"
            "plot 'accuracy.csv' using 1:3 with linespoints lw 2 lc rgb '#2ca02c' title 'train (running, dropout on)', "
            "'' using 1:4 with linespoints lw 3 lc rgb '#d62728' title 'test'\n");

    // The checkpoint, reloaded into a fresh model: the predictions must be the same.
    const std::string checkpoint = (fs::path(s.out) / "fashion_cnn.safetensors").string();
    nn::save(*model, checkpoint, {{"test_accuracy", std::to_string(accuracy)}, {"epochs", std::to_string(s.epochs)}});
    auto reloaded = examples::make_fashion_cnn(s.seed + 1);
    nn::load(*reloaded, checkpoint);
    const Tensor head = slice(x_test, 0, 0, std::min<std::int64_t>(1000, x_test.size(0)));
    if (nn::metrics::predict(predict_all(*reloaded, *reloaded, head)) !=
        nn::metrics::predict(predict_all(*model, *model, head)))
      throw std::runtime_error("the reloaded checkpoint " + checkpoint + " predicts differently");
    std::printf("\nconfusion.csv, loss.csv, accuracy.csv%s and fashion_cnn.safetensors written to %s/\n",
                plotted ? ", loss.png, accuracy.png" : "", s.out.c_str());

    if (accuracy < s.min_accuracy) {
      std::fprintf(stderr, "fashion_cnn: FAILED: test accuracy %.2f%% is below %.2f%%\n", 100 * accuracy,
                   100 * s.min_accuracy);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_cnn: %s\n", e.what());
    return 2;
  }
}
