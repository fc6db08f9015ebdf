// Metrics (nn/metrics.hpp) and the training utilities (nn/utils/).
#include <cstdio>

#include "support.hpp"
#include "xgrad/nn/metrics.hpp"
#include "xgrad/nn/utils/csv_writer.hpp"
#include "xgrad/nn/utils/progress.hpp"

using namespace xgrad;

TEST_CASE("metrics: predict, accuracy and the confusion matrix", "[metrics]") {
  // 5 rows, 3 classes; row 3 ties between classes 0 and 2 (the first wins, as torch.argmax).
  const Tensor scores = Tensor::of({{0.1, 2.0, -1.0}, {3.0, 0.0, 0.5}, {0.0, 0.1, 0.2}, {1.0, 0.0, 1.0}, {-2, -1, -3}});
  CHECK(nn::metrics::predict(scores) == std::vector<std::int64_t>{1, 0, 2, 0, 1});
  const std::vector<std::int64_t> targets = {1, 0, 1, 2, 1};
  CHECK(nn::metrics::accuracy(scores, targets) == 3.0 / 5.0);
  CHECK(nn::metrics::accuracy(scores, Tensor::of({1, 0, 1, 2, 1})) == 3.0 / 5.0);
  const Tensor cm = nn::metrics::confusion_matrix(scores, targets);
  CHECK(cm.shape() == Shape{3, 3});
  // rows: truth, columns: prediction
  CHECK(cm.to_vector() == std::vector<double>{1, 0, 0, 0, 2, 1, 1, 0, 0});
  CHECK(nn::metrics::accuracy(Tensor::zeros({0, 3}), std::vector<std::int64_t>{}) == 0.0);
}

TEST_CASE("metrics: bad inputs", "[metrics]") {
  const Tensor scores = Tensor::of({{0.1, 2.0}, {3.0, 0.0}});
  test::require_error([&] { (void)nn::metrics::accuracy(scores, std::vector<std::int64_t>{1}); },
                      {"accuracy", "2 rows", "1 targets"});
  test::require_error(
      [&] {
        (void)nn::metrics::accuracy(scores, std::vector<std::int64_t>{0, 2});
      },
      {"accuracy", "target 2", "[0, 2)"});
  test::require_error(
      [&] {
        (void)nn::metrics::accuracy(scores, Tensor::of({0.5, 1}));
      },
      {"accuracy", "0.5", "not a class index"});
  test::require_error([&] { (void)nn::metrics::confusion_matrix(Tensor::ones({3}), std::vector<std::int64_t>{0}); },
                      {"predict", "(n, C)", "(3,)"});
  test::require_error([&] { (void)nn::metrics::predict(Tensor::of({{0.0, std::nan("")}})); }, {"predict", "NaN"});
}

TEST_CASE("utils: CsvWriter writes a header and one flushed row per call, write_csv writes columns", "[utils]") {
  test::TempDir dir("csv");
  {
    utils::CsvWriter w(dir.file("log.csv"), {"epoch", "loss"});
    w.row({1, 0.5});
    CHECK(test::read_bytes(dir.file("log.csv")) == "epoch,loss\n1,0.5\n");  // readable while it runs
    w.row({2, 0.25});
    test::require_error([&] { w.row({3}); }, {"CsvWriter", "1 values", "2 columns"});
  }
  CHECK(test::read_bytes(dir.file("log.csv")) == "epoch,loss\n1,0.5\n2,0.25\n");
  utils::write_csv(dir.file("cols.csv"), {"x", "y"}, {{1, 2}, {0.125, 1e-10}});
  CHECK(test::read_bytes(dir.file("cols.csv")) == "x,y\n1,0.125\n2,1e-10\n");
  test::require_error(
      [&] {
        utils::write_csv(dir.file("bad.csv"), {"x", "y"}, {{1, 2}, {3}});
      },
      {"write_csv", "column 'y' has 1 values"});
  test::require_error([&] { utils::CsvWriter(dir.file("no/such/dir.csv"), {"a"}); },
                      {"CsvWriter", "No such file or directory"});
  test::require_error([&] { utils::CsvWriter(dir.file("c.csv"), {"a,b"}); }, {"CsvWriter", "comma"});
}

TEST_CASE("utils: ProgressBar prints a line per tenth when not on a terminal", "[utils]") {
  test::TempDir dir("progress");
  std::FILE* f = std::fopen(dir.file("bar.txt").c_str(), "w");
  REQUIRE(f != nullptr);
  {
    utils::ProgressBar bar("train", 20, f);
    for (long i = 1; i <= 20; ++i) bar.update(i, 1.0 / static_cast<double>(i));
    CHECK(bar.seconds() >= 0);
  }
  std::fclose(f);
  const std::string text = test::read_bytes(dir.file("bar.txt"));
  int lines = 0;
  for (char c : text) lines += c == '\n';
  CHECK(lines == 11);  // 10%, 20%, ..., 100% and the first step's 5% (decile 0)
  CHECK(text.find("train 100% 20/20 loss 5.0000e-02") != std::string::npos);
  test::require_error([] { utils::ProgressBar("x", -1); }, {"ProgressBar", "total", "-1"});
}
