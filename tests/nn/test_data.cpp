// Tests for nn/data.*: TensorDataset, the generic and fast batch gathers, samplers (sequential, random,
// distributed), the DataLoader (batching, last partial batch, drop_last, epochs, reproducible
// shuffling), CSV and .npy readers, and the errors of each.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "support.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/utils/csv_writer.hpp"
#include "xgrad/ops/loss.hpp"

using namespace xgrad;
using namespace xgrad::nn;
using test::require_error;

namespace {

// data row i = (i, 10 i + 1, 100 i + 2) as float64; target row i = -i.
std::shared_ptr<TensorDataset> rows_dataset(std::size_t n, bool with_target = true) {
  std::vector<double> d, t;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i);
    d.insert(d.end(), {x, 10 * x + 1, 100 * x + 2});
    t.push_back(-x);
  }
  const auto ni = static_cast<std::int64_t>(n);
  return std::make_shared<TensorDataset>(Tensor::from_vector(d, {ni, 3}, kFloat64),
                                         with_target ? Tensor::from_vector(t, {ni}, kFloat32) : Tensor());
}

// The dataset indices a batch holds, read back from column 0 of its data.
std::vector<std::size_t> batch_indices(const Example& b) {
  std::vector<std::size_t> out;
  const auto v = b.data.to_vector();
  for (std::size_t r = 0; r < v.size() / 3; ++r) out.push_back(static_cast<std::size_t>(v[r * 3]));
  return out;
}

std::vector<std::size_t> one_pass(DataLoader& loader) {
  std::vector<std::size_t> all;
  for (auto& b : loader) {
    const auto idx = batch_indices(b);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  return all;
}

// A dataset without a get_batch override, to exercise the generic stacking path.
class Squares : public Dataset {
 public:
  explicit Squares(std::size_t n, std::size_t ragged_at = SIZE_MAX) : n_(n), ragged_at_(ragged_at) {}
  std::size_t size() const override { return n_; }
  Example get(std::size_t i) const override {
    const double x = static_cast<double>(i);
    const Shape s = i == ragged_at_ ? Shape{3} : Shape{2};
    return Example{Tensor::full(s, x * x, kFloat64), Tensor::scalar(x, kFloat64)};
  }

 private:
  std::size_t n_, ragged_at_;
};

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() /
          ("xgrad_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

}  // namespace

TEST_CASE("TensorDataset: rows as examples, copies without history", "[data]") {
  auto ds = rows_dataset(5);
  CHECK(ds->size() == 5);
  const Example e = ds->get(3);
  CHECK(e.data.shape() == Shape{3});
  CHECK(e.data.dtype() == kFloat64);
  CHECK(e.data.to_vector() == std::vector<double>{3, 31, 302});
  CHECK(e.target.shape() == Shape{});
  CHECK(e.target.dtype() == kFloat32);
  CHECK(e.target.item() == -3.0);
  // A copy: writing to it leaves the dataset alone.
  const_cast<Tensor&>(e.data).fill_(0.0);
  CHECK(ds->get(3).data.to_vector() == std::vector<double>{3, 31, 302});

  auto no_target = rows_dataset(4, false);
  CHECK_FALSE(no_target->get(0).target.defined());
  const Example b = no_target->get_batch(std::vector<std::size_t>{2, 0});
  CHECK(b.data.shape() == Shape{2, 3});
  CHECK_FALSE(b.target.defined());

  // A leaf requiring grad yields batches without history.
  Tensor w = Tensor::ones({4, 2}, kFloat64);
  w.set_requires_grad();
  TensorDataset grad_ds(w);
  const Example gb = grad_ds.get_batch(std::vector<std::size_t>{1, 3});
  CHECK_FALSE(gb.data.requires_grad());
}

TEST_CASE("TensorDataset: errors", "[data]") {
  require_error([] { (void)TensorDataset(Tensor()); }, {"TensorDataset", "data", "undefined"});
  require_error([] { (void)TensorDataset(Tensor::scalar(1.0)); }, {"TensorDataset", "'data'", "()"});
  require_error(
      [] {
        (void)TensorDataset(Tensor::zeros({4, 2}), Tensor::zeros({5}));
      },
      {"TensorDataset", "first dimensions differ", "(4, 2)", "(5,)"});
  require_error([] { (void)TensorDataset(Tensor::zeros({4, 2}), Tensor::scalar(1.0)); }, {"TensorDataset", "'target'"});
  auto ds = rows_dataset(3);
  require_error([&] { ds->get(3); }, {"TensorDataset::get", "index 3", "size 3"});
  require_error([&] { ds->get_batch(std::vector<std::size_t>{0, 7}); }, {"get_batch", "index 7", "size 3"});
  require_error([&] { ds->get_batch(std::vector<std::size_t>{}); }, {"get_batch", "indices", "empty"});
}

TEST_CASE("Dataset::get_batch: generic stacking matches get() and checks shapes", "[data]") {
  Squares sq(6);
  const std::vector<std::size_t> idx{4, 1, 5};
  const Example b = sq.get_batch(idx);
  CHECK(b.data.shape() == Shape{3, 2});
  CHECK(b.target.shape() == Shape{3});
  CHECK(b.data.to_vector() == std::vector<double>{16, 16, 1, 1, 25, 25});
  CHECK(b.target.to_vector() == std::vector<double>{4, 1, 5});

  Squares ragged(6, 5);
  require_error([&] { ragged.get_batch(idx); }, {"get_batch", "example 5", "(3,)", "example 4", "(2,)"});
  require_error([&] { sq.get_batch(std::vector<std::size_t>{6}); }, {"get_batch", "index 6", "size 6"});

  // The loader uses the generic path for such datasets.
  DataLoader loader(std::make_shared<Squares>(5), DataLoaderOptions(2));
  std::vector<Shape> shapes;
  for (auto& batch : loader) shapes.push_back(batch.data.shape());
  CHECK(shapes == std::vector<Shape>{{2, 2}, {2, 2}, {1, 2}});
}

TEST_CASE("DataLoader: sequential batches, shapes and the last partial batch", "[data]") {
  const std::size_t n = GENERATE(1, 7, 8, 9);
  const std::size_t bs = GENERATE(1, 3, 8);
  CAPTURE(n, bs);
  DataLoader loader(rows_dataset(n), DataLoaderOptions().batch_size(bs));
  CHECK(loader.size() == (n + bs - 1) / bs);
  std::size_t batches = 0, next = 0;
  for (auto& batch : loader) {
    const std::size_t expect = std::min(bs, n - next);
    REQUIRE(batch.data.shape() == Shape{static_cast<std::int64_t>(expect), 3});
    REQUIRE(batch.target.shape() == Shape{static_cast<std::int64_t>(expect)});
    CHECK(batch.data.dtype() == kFloat64);
    CHECK(batch.target.dtype() == kFloat32);
    const auto d = batch.data.to_vector();
    const auto t = batch.target.to_vector();
    for (std::size_t r = 0; r < expect; ++r) {
      const double i = static_cast<double>(next + r);
      REQUIRE(d[r * 3 + 0] == i);
      REQUIRE(d[r * 3 + 1] == 10 * i + 1);
      REQUIRE(d[r * 3 + 2] == 100 * i + 2);
      REQUIRE(t[r] == -i);
    }
    next += expect;
    ++batches;
  }
  CHECK(batches == loader.size());
  CHECK(next == n);
}

TEST_CASE("DataLoader: drop_last drops only a short final batch", "[data]") {
  const std::size_t n = GENERATE(7, 8, 9);
  DataLoader loader(rows_dataset(n), DataLoaderOptions(4).drop_last(true).shuffle(true).seed(3));
  CHECK(loader.size() == n / 4);
  std::size_t batches = 0;
  std::set<std::size_t> seen;
  for (auto& batch : loader) {
    CHECK(batch.data.size(0) == 4);
    for (auto i : batch_indices(batch)) CHECK(seen.insert(i).second);
    ++batches;
  }
  CHECK(batches == n / 4);
  CHECK(seen.size() == (n / 4) * 4);
}

TEST_CASE("DataLoader: shuffling is a permutation, reproducible by seed, new each epoch", "[data]") {
  const std::size_t n = 50;
  DataLoader a(rows_dataset(n), DataLoaderOptions(8).shuffle(true).seed(42));
  DataLoader b(rows_dataset(n), DataLoaderOptions(8).shuffle(true).seed(42));
  DataLoader c(rows_dataset(n), DataLoaderOptions(8).shuffle(true).seed(43));
  std::vector<std::vector<std::size_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    CHECK(a.epoch() == static_cast<std::uint64_t>(e));
    const auto pa = one_pass(a);
    // Every index exactly once per epoch.
    auto sorted = pa;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::size_t> iota(n);
    for (std::size_t i = 0; i < n; ++i) iota[i] = i;
    REQUIRE(sorted == iota);
    CHECK(pa == one_pass(b));                           // same seed, same epoch: same order
    CHECK(pa != one_pass(c));                           // another seed: another order
    CHECK(pa != iota);                                  // actually shuffled
    for (const auto& prev : epochs) CHECK(pa != prev);  // a new order each epoch
    epochs.push_back(pa);
  }
  // set_epoch replays an epoch.
  a.set_epoch(1);
  CHECK(one_pass(a) == epochs[1]);
  CHECK(a.epoch() == 2);
  // The order is Fisher-Yates from Generator(seed + epoch), the documented recipe.
  CHECK(epochs[2] == random_permutation(n, 42 + 2));
}

TEST_CASE("random_permutation: fixed by the seed on every machine", "[data]") {
  // Derived from the Philox4x32-10 stream (core/detail/philox.hpp, checked against Random123's known
  // answers): the documented Fisher-Yates recipe (swap p[i-1] with p[integer(i)] for i = n..2, each
  // integer from one block's first two words, rejection above the largest multiple of i) written
  // independently here.
  const std::uint64_t seed = 12345;
  std::vector<std::size_t> expect{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::uint32_t block = 0;
  const auto next = [&] {
    const auto w = detail::philox4x32({block++, 0, 0, 0}, {static_cast<std::uint32_t>(seed), 0});
    return std::uint64_t{w[1]} << 32 | w[0];
  };
  for (std::size_t i = expect.size(); i > 1; --i) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % i;
    std::uint64_t x = next();
    while (x >= limit) x = next();
    std::swap(expect[i - 1], expect[x % i]);
  }
  CHECK(random_permutation(10, seed) == expect);
  CHECK(random_permutation(0, 1).empty());
  CHECK(random_permutation(1, 1) == std::vector<std::size_t>{0});
}

TEST_CASE("DataLoader: explicit sampler, and errors", "[data]") {
  auto ds = rows_dataset(6);
  auto sampler = std::make_shared<SequentialSampler>(4);
  DataLoader loader(ds, DataLoaderOptions(3), sampler);
  CHECK(loader.size() == 2);
  CHECK(one_pass(loader) == std::vector<std::size_t>{0, 1, 2, 3});

  require_error([&] { (void)DataLoader(ds, DataLoaderOptions(0)); }, {"DataLoader", "batch_size", "0"});
  require_error([&] { (void)DataLoader(nullptr, DataLoaderOptions(2)); }, {"DataLoader", "dataset", "null"});
  require_error([&] { (void)DataLoader(std::make_shared<Squares>(0), DataLoaderOptions(2)); }, {"DataLoader", "empty"});
  require_error([&] { (void)DataLoader(ds, DataLoaderOptions(2).shuffle(true), sampler); },
                {"DataLoader", "shuffle", "sampler"});
  // A sampler that reaches past the dataset fails when the batch is built.
  DataLoader too_far(ds, DataLoaderOptions(4), std::make_shared<SequentialSampler>(8));
  require_error([&] { one_pass(too_far); }, {"DataLoader", "index 6", "size 6"});
}

TEST_CASE("DistributedSampler: torch semantics (padding, drop_last, disjoint shares)", "[data]") {
  const std::size_t n = GENERATE(1, 5, 9, 10, 11);
  const std::size_t replicas = GENERATE(1, 2, 3, 4);
  const bool shuffle = GENERATE(false, true);
  CAPTURE(n, replicas, shuffle);
  for (bool drop_last : {false, true}) {
    if (drop_last && n < replicas) continue;  // every rank would get 0 indices
    std::vector<std::vector<std::size_t>> shares;
    for (std::size_t r = 0; r < replicas; ++r) {
      DistributedSampler s(n, replicas, r, shuffle, 7, drop_last);
      s.set_epoch(3);
      shares.push_back(s.indices());
      CHECK(shares.back().size() == s.size());
      CHECK(s.size() == (drop_last ? n / replicas : (n + replicas - 1) / replicas));
    }
    // The reference: the epoch order padded cyclically (or cut), dealt round-robin.
    std::vector<std::size_t> order = shuffle ? random_permutation(n, 7 + 3) : std::vector<std::size_t>();
    if (!shuffle)
      for (std::size_t i = 0; i < n; ++i) order.push_back(i);
    const std::size_t total = shares[0].size() * replicas;
    std::vector<std::size_t> padded;
    for (std::size_t k = 0; k < total; ++k) padded.push_back(order[k % n]);
    for (std::size_t r = 0; r < replicas; ++r)
      for (std::size_t k = 0; k < shares[r].size(); ++k) REQUIRE(shares[r][k] == padded[r + k * replicas]);
    // Without drop_last, every index appears at least once; with it, none twice.
    std::multiset<std::size_t> all;
    for (const auto& s : shares) all.insert(s.begin(), s.end());
    for (std::size_t i = 0; i < n; ++i) {
      if (!drop_last)
        CHECK(all.count(i) >= 1);
      else
        CHECK(all.count(i) <= 1);
    }
  }
}

TEST_CASE("DistributedSampler: plugs into the DataLoader, epochs, errors", "[data]") {
  auto ds = rows_dataset(10);
  auto s0 = std::make_shared<DistributedSampler>(10, 2, 0, true, 5);
  auto s1 = std::make_shared<DistributedSampler>(10, 2, 1, true, 5);
  DataLoader l0(ds, DataLoaderOptions(2), s0), l1(ds, DataLoaderOptions(2), s1);
  CHECK(l0.size() == 3);
  for (std::uint64_t e = 0; e < 2; ++e) {
    s0->set_epoch(e);  // torch style: set the epoch on the sampler
    l1.set_epoch(e);   // or on the loader
    const auto a = one_pass(l0), b = one_pass(l1);
    std::vector<std::size_t> both(a);
    both.insert(both.end(), b.begin(), b.end());
    std::sort(both.begin(), both.end());
    for (std::size_t i = 0; i < 10; ++i) CHECK(both[i] == i);
  }
  require_error([] { (void)DistributedSampler(10, 0, 0); }, {"DistributedSampler", "num_replicas", "0"});
  require_error([] { (void)DistributedSampler(10, 2, 2); }, {"DistributedSampler", "rank", "2", "num_replicas"});
  require_error([] { (void)DistributedSampler(0, 2, 0); }, {"DistributedSampler", "dataset_size"});
}

TEST_CASE("read_csv: numbers, header, delimiter, blank lines, CRLF", "[data][csv]") {
  TempDir tmp;
  const auto p = tmp.write("a.csv", "x,y,z\n1,2.5,-3e2\r\n\n 4 ,\t+5 , nan\n7,8,9");
  const Tensor t = read_csv(p);
  CHECK(t.shape() == Shape{3, 3});
  CHECK(t.dtype() == kFloat32);
  const auto v = t.to_vector();
  CHECK(v[0] == 1);
  CHECK(v[1] == 2.5);
  CHECK(v[2] == -300);
  CHECK(v[3] == 4);
  CHECK(v[4] == 5);
  CHECK(std::isnan(v[5]));
  CHECK(v[8] == 9);

  const auto q = tmp.write("b.tsv", "0.1;0.2\n0.3;0.4\n");
  const Tensor u = read_csv(q, CsvOptions{';', false, kFloat64});
  CHECK(u.dtype() == kFloat64);
  CHECK(u.to_vector() == std::vector<double>{0.1, 0.2, 0.3, 0.4});  // exact decimal -> double rounding
  // Feeds a TensorDataset directly.
  TensorDataset ds(u);
  CHECK(ds.size() == 2);
}

TEST_CASE("read_csv: errors name the file and line:column", "[data][csv]") {
  TempDir tmp;
  const auto bad = tmp.write("bad.csv", "a,b\n1,2\n3,x7\n");
  require_error([&] { read_csv(bad); }, {"read_csv", "bad.csv:3:3", "field 2", "'x7'", "not a number"});
  const auto trailing = tmp.write("trail.csv", "1,2\n3,4abc\n");
  require_error(
      [&] {
        read_csv(trailing, CsvOptions{',', false, kFloat32});
      },
      {"trail.csv:2:3", "'4abc'", "not a number"});
  const auto ragged = tmp.write("ragged.csv", "a,b\n1,2\n3,4\n5,6,7\n");
  require_error([&] { read_csv(ragged); }, {"read_csv", "ragged.csv:4:1", "3 fields", "line 2", "has 2"});
  const auto empty_field = tmp.write("ef.csv", "1,,3\n");
  require_error([&] { read_csv(empty_field, CsvOptions{',', false, kFloat32}); }, {"ef.csv:1:3", "field 2", "empty"});
  const auto empty = tmp.write("empty.csv", "");
  require_error([&] { read_csv(empty); }, {"read_csv", "empty.csv", "no data rows", "empty"});
  const auto header_only = tmp.write("h.csv", "a,b\n\n");
  require_error([&] { read_csv(header_only); }, {"read_csv", "h.csv", "no data rows", "header"});
  require_error([&] { read_csv((tmp.dir / "missing.csv").string()); },
                {"read_csv", "cannot open", "missing.csv", "No such file or directory"});
  require_error([&] { read_csv(bad, CsvOptions{'.', true, kFloat32}); }, {"read_csv", "delimiter"});
}

TEST_CASE("npy_dataset: two .npy files make a TensorDataset", "[data][npy]") {
  TempDir tmp;
  Generator gen(1);
  const Tensor x = Tensor::randn({6, 2, 2}, gen, kFloat64), y = Tensor::randn({6}, gen, kFloat32);
  const auto xp = (tmp.dir / "x.npy").string(), yp = (tmp.dir / "y.npy").string(), zp = (tmp.dir / "z.npy").string();
  save_npy(xp, x);
  save_npy(yp, y);
  save_npy(zp, Tensor::zeros({5}));
  auto ds = npy_dataset(xp, yp);
  REQUIRE(ds->size() == 6);
  CHECK(bit_equal(ds->data(), x));
  CHECK(bit_equal(ds->target(), y));
  DataLoader loader(ds, DataLoaderOptions(4));
  std::vector<std::int64_t> sizes;
  for (auto& b : loader) {
    CHECK(b.data.shape() == Shape{b.data.size(0), 2, 2});
    sizes.push_back(b.data.size(0));
  }
  CHECK(sizes == std::vector<std::int64_t>{4, 2});
  CHECK_FALSE(npy_dataset(xp)->target().defined());
  require_error([&] { npy_dataset(xp, zp); }, {"npy_dataset", "x.npy", "z.npy", "first dimensions differ"});
  require_error([&] { npy_dataset((tmp.dir / "nope.npy").string()); },
                {"load_npy", "nope.npy", "No such file or directory"});
}

TEST_CASE("read_csv and npy_dataset refuse non-regular files without blocking, with the OS reason",
          "[data][csv][npy][hostile]") {
  TempDir tmp;
  const std::string dir = tmp.dir.string();
  test::require_hostile_paths_refused(dir, "read_csv", [](const std::string& p) { (void)read_csv(p); });
  test::require_hostile_paths_refused(dir, "load_npy", [](const std::string& p) { (void)npy_dataset(p); });
  // The target file goes through the same reader.
  const auto xp = (tmp.dir / "x.npy").string();
  save_npy(xp, Tensor::zeros({3, 2}));
  test::require_hostile_paths_refused(dir, "load_npy", [&](const std::string& p) { (void)npy_dataset(xp, p); });
}

TEST_CASE("read_csv: a field of megabytes is quoted short in the error, a large file reads in linear time",
          "[data][csv][hostile]") {
  TempDir tmp;
  const auto huge = tmp.write("huge.csv", "1," + std::string(4'000'000, 'x') + "\n");
  std::string message;
  try {
    (void)read_csv(huge, CsvOptions{',', false, kFloat32});
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("huge.csv:1:3") != std::string::npos);
  CHECK(message.find("(4000000 bytes)") != std::string::npos);
  CHECK(message.size() < 1000);
  // 200000 rows x 5 columns (~4 MB) in well under a second per MB.
  std::string text = "a,b,c,d,e\n";
  for (int r = 0; r < 200000; ++r) text += fmt::format("{},{}.5,-{},{}e-3,{}\n", r, r, r, r, r % 7);
  const auto big = tmp.write("big.csv", text);
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor t = read_csv(big);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(t.shape() == Shape{200000, 5});
  CHECK(t.to_vector()[199999 * 5 + 2] == -199999.0);
  WARN(fmt::format("read_csv: {} bytes in {:.3f} s", text.size(), seconds));
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  const double bound = 1e-6;  // seconds per byte: far above release's (bench/results/build_and_run_times.md)
#else
  const double bound = 20e-6;
#endif
  CHECK(seconds / static_cast<double>(text.size()) < bound);
}

TEST_CASE("utils::write_csv and CsvWriter never block on a FIFO, write_csv is atomic", "[data][csv][hostile]") {
  TempDir tmp;
  const std::string fifo = (tmp.dir / "fifo.csv").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No reader: the streaming log's open fails at once (O_NONBLOCK) with the OS reason.
  require_error([&] { utils::CsvWriter(fifo, {"a"}); }, {"CsvWriter", fifo, "No such device or address"});
  // The one-go writer refuses to replace it.
  require_error([&] { utils::write_csv(fifo, {"a"}, {{1.0}}); }, {"write_csv", fifo, "not a regular file", "FIFO"});
  // A name of NAME_MAX bytes; no temporary file left behind.
  const std::string name(255, 'c');
  utils::write_csv((tmp.dir / name).string(), {"a", "b"}, {{1, 2}, {3, 4}});
  CHECK(read_csv((tmp.dir / name).string()).to_vector() == std::vector<double>{1, 3, 2, 4});
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(tmp.dir)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  CHECK(entries == std::vector<std::string>{name, "fifo.csv"});
}

TEST_CASE("int64 labels travel through TensorDataset, DataLoader and npy_dataset into cross_entropy", "[data][dtype]") {
  Generator gen(9);
  const Tensor x = Tensor::randn({10, 3}, gen);
  const Tensor y = Tensor::of({0, 2, 1, 1, 0, 2, 2, 1, 0, 1}, kInt64);
  DataLoader loader(std::make_shared<TensorDataset>(x, y), DataLoaderOptions(4).shuffle(true).seed(1));
  std::int64_t seen = 0;
  for (auto& b : loader) {
    REQUIRE(b.target.dtype() == kInt64);
    const auto idx = b.target.to_vector();
    std::vector<std::int64_t> cls(idx.begin(), idx.end());
    const Tensor logits = b.data;  // (B, 3) as scores
    CHECK(bit_equal(cross_entropy(logits, b.target), cross_entropy(logits, cls)));
    seen += b.target.numel();
  }
  CHECK(seen == 10);
  test::TempDir dir("int_labels");
  save_npy(dir.file("x.npy"), x);
  save_npy(dir.file("y.npy"), y);
  const auto ds = npy_dataset(dir.file("x.npy"), dir.file("y.npy"));
  CHECK(ds->target().dtype() == kInt64);
  CHECK(bit_equal(ds->target(), y));
}

TEST_CASE("read_csv: an integer dtype reads integers exactly and refuses the rest", "[data][csv]") {
  TempDir tmp;
  const auto ok = tmp.write("int.csv", "1,-2\n7.0,1e3\n9007199254740993,+4\n");
  const Tensor t = read_csv(ok, CsvOptions{',', false, kInt64});
  CHECK(t.dtype() == kInt64);
  CHECK(t.shape() == Shape{3, 2});
  const std::int64_t* p = t.data<std::int64_t>();
  CHECK(std::vector<std::int64_t>(p, p + 6) == std::vector<std::int64_t>{1, -2, 7, 1000, 9007199254740993, 4});
  const auto frac = tmp.write("frac.csv", "1,2\n3,1.5\n");
  require_error(
      [&] {
        read_csv(frac, CsvOptions{',', false, kInt64});
      },
      {"read_csv", "frac.csv:2:3", "field 2", "'1.5'", "not an integer", "int64"});
  const auto nan = tmp.write("nan.csv", "nan\n");
  require_error([&] { read_csv(nan, CsvOptions{',', false, kInt32}); }, {"read_csv", "'nan'", "not an integer"});
  const auto wide = tmp.write("wide.csv", "300\n");
  require_error(
      [&] {
        read_csv(wide, CsvOptions{',', false, kUInt8});
      },
      {"read_csv", "'300'", "outside the range of uint8", "[0, 255]"});
  const auto two = tmp.write("two.csv", "0\n1\n2\n");
  require_error([&] { read_csv(two, CsvOptions{',', false, kBool}); }, {"read_csv", ":3:", "'2'", "bool"});
  const Tensor b = read_csv(tmp.write("bool.csv", "0,1\n"), CsvOptions{',', false, kBool});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector() == std::vector<double>{0, 1});
  // a float dtype still reads 1.5 as 1.5
  CHECK(read_csv(frac, CsvOptions{',', false, kFloat64}).to_vector() == std::vector<double>{1, 2, 3, 1.5});
}
