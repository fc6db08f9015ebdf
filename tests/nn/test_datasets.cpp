// Tests for nn/datasets/*: the IDX reader (plain and gzip; values of every IDX type; hostile and
// corrupt files refused), FashionMNIST on the files of the Debian package dataset-fashion-mnist
// (checked against numpy's reading of them) and on small synthetic files, and WordList on
// wamerican's /usr/share/dict/american-english and on a small list (vocabulary, encoding, context
// examples, determinism of the split). When a package is missing the real-file tests WARN and are
// skipped, unless the suite is configured with XGRAD_REQUIRE_ALL (scripts/test.sh), where they fail.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "support.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/datasets/fashion_mnist.hpp"
#include "xgrad/nn/datasets/idx.hpp"
#include "xgrad/nn/datasets/words.hpp"

using namespace xgrad;
namespace ds = xgrad::nn::datasets;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// True when the package's file is there; otherwise WARNs (or FAILs under XGRAD_REQUIRE_ALL).
bool have_package(const std::string& file, const std::string& package) {
  if (exists(file)) return true;
#ifdef XGRAD_REQUIRE_DATASETS
  FAIL("'" << file << "' is missing: install the Debian package " << package << " (scripts/install-deps.sh)");
#else
  WARN("'" << file << "' is missing: the Debian package " << package
           << " is not installed, test skipped (scripts/install-deps.sh installs it)");
#endif
  return false;
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

/// An IDX file: magic 00 00 type ndim, the dims, then `payload`.
std::string idx(unsigned char type, const std::vector<std::uint32_t>& dims, const std::string& payload) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) s += be32(d);
  return s + payload;
}

/// gzip -n of `path` into `path + ".gz"` (the gzip tool is in every Debian system).
std::string gzip_file(const std::string& path) {
  const std::string cmd = fmt::format("gzip -n -c '{}' > '{}.gz'", path, path);
  REQUIRE(std::system(cmd.c_str()) == 0);
  return path + ".gz";
}

}  // namespace

// ---- IDX ------------------------------------------------------------------------------------------

TEST_CASE("read_idx: values of every IDX type, plain and gzip-compressed", "[datasets][idx]") {
  test::TempDir dir("idx_values");
  // uint8 (2, 3)
  const std::string u8 = idx(0x08, {2, 3}, std::string{0, 1, 2, 3, char(200), char(255)});
  test::write_bytes(dir.file("u8.idx"), u8);
  Tensor t = ds::read_idx(dir.file("u8.idx"));
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == kFloat32);
  CHECK(t.to_vector() == std::vector<double>{0, 1, 2, 3, 200, 255});
  CHECK(bit_equal(ds::read_idx(gzip_file(dir.file("u8.idx"))), t));
  // int8, int16, int32 (big-endian, signed), float32, float64
  CHECK(ds::parse_idx(idx(0x09, {2}, std::string{char(0xff), 5}), "i8").to_vector() == std::vector<double>{-1, 5});
  CHECK(ds::parse_idx(idx(0x0B, {2}, std::string{char(0xff), char(0xfe), 1, 0}), "i16").to_vector() ==
        std::vector<double>{-2, 256});
  CHECK(ds::parse_idx(idx(0x0C, {1}, be32(0xfffffffd)), "i32", kFloat64).to_vector() == std::vector<double>{-3});
  float f = 1.5f;
  std::uint32_t fb;
  std::memcpy(&fb, &f, 4);
  CHECK(ds::parse_idx(idx(0x0D, {1}, be32(fb)), "f32").to_vector() == std::vector<double>{1.5});
  double d = -0.25;
  std::uint64_t db;
  std::memcpy(&db, &d, 8);
  CHECK(ds::parse_idx(idx(0x0E, {1}, be32(static_cast<std::uint32_t>(db >> 32)) + be32(static_cast<std::uint32_t>(db))),
                      "f64", kFloat64)
            .to_vector() == std::vector<double>{-0.25});
  // an empty dim is a valid empty array
  CHECK(ds::parse_idx(idx(0x08, {0, 28}, ""), "empty").shape() == Shape{0, 28});
}

TEST_CASE("read_idx: corrupt and hostile files are refused with the reason", "[datasets][idx][errors]") {
  auto refuse = [](const std::string& bytes, const std::vector<std::string>& fragments) {
    test::require_error([&] { ds::parse_idx(bytes, "bad.idx"); }, {"parse_idx", "'bad.idx'"});
    test::require_error([&] { ds::parse_idx(bytes, "bad.idx"); }, fragments);
  };
  refuse("", {"bad.idx", "0 bytes"});
  refuse(std::string{1, 0, 8, 1} + be32(1) + "x", {"magic", "01 00"});
  refuse(idx(0x07, {1}, "x"), {"unknown IDX value type 0x07"});
  refuse(idx(0x08, {}, ""), {"0 dims"});
  refuse(std::string{0, 0, 8, 9} + std::string(36, '\0'), {"9 dims"});
  refuse(std::string{0, 0, 8, 3} + be32(2), {"truncated", "8 bytes", "16-byte header"});
  refuse(idx(0x08, {2, 3}, "12345"), {"17 bytes", "6 values of uint8", "(2, 3)", "needs exactly 18"});
  refuse(idx(0x08, {2, 3}, "1234567"), {"19 bytes", "needs exactly 18"});  // trailing byte
  refuse(idx(0x0C, {2}, "1234"), {"int32", "needs exactly 16"});
  refuse(idx(0x08, {0x80000000u}, ""), {"dim 0 is 2147483648", "2^31"});
  // dims whose product overflows int64 (each below 2^31): refused by checked arithmetic, nothing allocated
  refuse(idx(0x08, {0x7fffffff, 0x7fffffff, 0x7fffffff}, ""), {"more than 2^63 values"});
  refuse(idx(0x0E, {0x7fffffff, 0x7fffffff, 2}, ""), {"float64", "more than 2^63 bytes"});
  // a huge but representable size against a short file
  refuse(idx(0x0E, {0x7fffffff, 0x7fff}, ""), {"needs exactly"});

  test::TempDir dir("idx_bad");
  test::require_hostile_paths_refused(dir.path.string(), "read_idx", [](const std::string& p) { ds::read_idx(p); });
  // gzip: corrupt, truncated, trailing garbage, and inflating beyond the limit
  const std::string good = idx(0x08, {4, 1000}, std::string(4000, 'a'));
  test::write_bytes(dir.file("g.idx"), good);
  const std::string gz = test::read_bytes(gzip_file(dir.file("g.idx")));
  REQUIRE(gz.size() > 30);
  std::string corrupt = gz;
  corrupt[gz.size() / 2] = static_cast<char>(corrupt[gz.size() / 2] ^ 0x55);
  corrupt[gz.size() / 2 + 1] = static_cast<char>(corrupt[gz.size() / 2 + 1] ^ 0x55);
  test::write_bytes(dir.file("corrupt.gz"), corrupt);
  test::require_error([&] { ds::read_idx(dir.file("corrupt.gz")); }, {"read_idx", "corrupt.gz", "gzip"});
  test::write_bytes(dir.file("trunc.gz"), gz.substr(0, gz.size() - 9));
  test::require_error([&] { ds::read_idx(dir.file("trunc.gz")); }, {"read_idx", "trunc.gz", "truncated gzip"});
  test::write_bytes(dir.file("trail.gz"), gz + "xyz");
  test::require_error([&] { ds::read_idx(dir.file("trail.gz")); }, {"read_idx", "trail.gz", "3 bytes after"});
  CHECK(ds::read_maybe_gzip(dir.file("g.idx.gz"), "t").size() == good.size());
  test::require_error([&] { ds::read_maybe_gzip(dir.file("g.idx.gz"), "t", 1000); },
                      {"t", "g.idx.gz", "more than 1000 bytes"});
  test::require_error([&] { ds::read_maybe_gzip(dir.file("g.idx"), "t", 1000); }, {"t", "g.idx", "more than 1000"});
}

TEST_CASE("read_idx: a gzip bomb is refused after inflating about the size its IDX header declares",
          "[datasets][idx][errors]") {
  test::TempDir dir("idx_bomb");
  // The inflated bytes are a shell pipeline's: `header`, then `mb` MB of zeros, gzip -1.
  auto bomb = [&](const std::string& name, const std::string& header, int mb) {
    const std::string head = dir.file(name + ".head");
    test::write_bytes(head, header);
    const std::string path = dir.file(name + ".gz");
    const std::string cmd =
        fmt::format("{{ cat '{}'; head -c {}000000 /dev/zero; }} | gzip -1 -n -c > '{}'", head, mb, path);
    REQUIRE(std::system(cmd.c_str()) == 0);
    return path;
  };
  // The number N in "first N bytes" / "refused after N bytes": how far the stream was inflated.
  auto inflated = [](const std::string& message, const std::string& before) {
    const auto at = message.find(before);
    REQUIRE(at != std::string::npos);
    return std::stoull(message.substr(at + before.size()));
  };
  auto message_of = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    FAIL("no error");
    return std::string();
  };

  // 1000 values declared, 40 MB inflated: refused once the stream passes 1008 bytes, a chunk later.
  const std::string small = bomb("small", idx(0x08, {1000}, ""), 40);
  std::string m = message_of([&] { (void)ds::read_idx(small); });
  INFO(m);
  CHECK(m.find("read_idx") != std::string::npos);
  CHECK(m.find("more than the 1008 bytes its header declares") != std::string::npos);
  CHECK(inflated(m, "refused after ") <= 1008 + 65536);
  // The same through FashionMNIST's reader.
  m = message_of([&] { (void)ds::read_idx_bytes(small, "FashionMNIST"); });
  CHECK(m.find("FashionMNIST") != std::string::npos);
  CHECK(m.find("its header declares") != std::string::npos);
  // Not an IDX file at all (zeros: value type 0x00): refused after the first inflated chunk.
  const std::string zeros = bomb("zeros", "", 40);
  m = message_of([&] { (void)ds::read_idx(zeros); });
  INFO(m);
  CHECK(m.find("unknown IDX value type 0x00") != std::string::npos);
  CHECK(inflated(m, "gzip stream's first ") <= 65536);
  // A wrong magic, before the dims are even inflated.
  const std::string magic = bomb("magic", std::string{'\x01', '\0', '\x08', '\x01'}, 1);
  m = message_of([&] { (void)ds::read_idx(magic); });
  CHECK(m.find("magic starts 01 00") != std::string::npos);
  // A header declaring more than a gzip file may inflate to (2^31 - 1 float64 values, ~16 GiB): refused
  // at once, before inflating the rest.
  const std::string huge = bomb("huge", idx(0x0E, {0x7fffffff}, ""), 1);
  m = message_of([&] { (void)ds::read_idx(huge); });
  INFO(m);
  CHECK(m.find("declares 17179869184 bytes") != std::string::npos);
  CHECK(m.find("more than the 1073741824 bytes") != std::string::npos);
  // A well-formed file still reads, and one shorter than its header declares is refused as before.
  const std::string good = idx(0x08, {2, 3}, "abcdef");
  test::write_bytes(dir.file("ok.idx"), good);
  CHECK(ds::read_idx(gzip_file(dir.file("ok.idx"))).shape() == Shape{2, 3});
  test::write_bytes(dir.file("short.idx"), idx(0x08, {2, 3}, "abc"));
  test::require_error([&] { (void)ds::read_idx(gzip_file(dir.file("short.idx"))); },
                      {"parse_idx", "short.idx.gz", "needs exactly 18"});
}

// ---- FashionMNIST ---------------------------------------------------------------------------------

TEST_CASE("FashionMNIST: the Debian package's files, as numpy reads them", "[datasets][fashion_mnist]") {
  const std::string root = ds::FashionMNIST::kDefaultRoot;
  if (!have_package(root + "/train-images-idx3-ubyte.gz", "dataset-fashion-mnist")) return;
  test::TempDir dir("fashion_mnist");
  test::run_python_script("tests/nn/fashion_mnist_check.py", dir.path.string());
  std::istringstream expected(test::read_bytes(dir.file("fashion_mnist.txt")));
  for (auto split : {ds::FashionMNIST::Split::train, ds::FashionMNIST::Split::test}) {
    const ds::FashionMNIST data(split);
    std::vector<std::int64_t> want(16);
    for (auto& v : want) expected >> v;
    const std::int64_t n = want[0];
    CHECK(n == (split == ds::FashionMNIST::Split::train ? 60000 : 10000));
    REQUIRE(static_cast<std::int64_t>(data.size()) == n);
    CHECK(data.images().shape() == Shape{n, 1, 28, 28});
    CHECK(data.images().dtype() == kFloat32);
    CHECK(data.labels().shape() == Shape{n});
    CHECK(data.labels().dtype() == kInt64);
    // pixels are byte / 255: back to bytes exactly
    const float* px = data.images().data<float>();
    std::int64_t total = 0, first = 0, last = 0;
    bool in_range = true;
    for (std::int64_t i = 0; i < data.images().numel(); ++i) {
      in_range = in_range && px[i] >= 0.0f && px[i] <= 1.0f;
      const auto byte = static_cast<std::int64_t>(std::lround(px[i] * 255.0f));
      total += byte;
      if (i < 784) first += byte;
      if (i >= data.images().numel() - 784) last += byte;
    }
    CHECK(in_range);
    CHECK(total == want[1]);
    CHECK(first == want[2]);
    CHECK(last == want[3]);
    const auto labels = data.labels().to_vector();
    CHECK(labels.front() == static_cast<double>(want[4]));
    CHECK(labels.back() == static_cast<double>(want[5]));
    for (int c = 0; c < 10; ++c)
      CHECK(std::count(labels.begin(), labels.end(), c) == want[static_cast<std::size_t>(6 + c)]);
    // one example and a batch through the DataLoader API
    const nn::Example e = data.get(0);
    CHECK(e.data.shape() == Shape{1, 28, 28});
    CHECK(e.target.dim() == 0);
    CHECK(e.target.item() == static_cast<double>(want[4]));
  }
  auto test = std::make_shared<ds::FashionMNIST>(ds::FashionMNIST::Split::test);
  nn::DataLoader loader(test, nn::DataLoaderOptions().batch_size(64).shuffle(true).seed(3));
  const nn::Example batch = *loader.begin();
  CHECK(batch.data.shape() == Shape{64, 1, 28, 28});
  CHECK(batch.target.shape() == Shape{64});
  CHECK(batch.target.dtype() == kInt64);
  CHECK(ds::FashionMNIST::kClasses[9] == std::string("Ankle boot"));
}

TEST_CASE("FashionMNIST: small synthetic files, missing and inconsistent files", "[datasets][fashion_mnist][errors]") {
  test::TempDir dir("fashion_synthetic");
  const std::string root = dir.path.string();
  std::string pixels(2 * 784, '\0');
  pixels[0] = static_cast<char>(255);
  pixels[784 + 5] = static_cast<char>(51);
  test::write_bytes(dir.file("t10k-images-idx3-ubyte"), idx(0x08, {2, 28, 28}, pixels));
  gzip_file(dir.file("t10k-images-idx3-ubyte"));  // the .gz is preferred; both hold the same
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx(0x08, {2}, std::string{7, 2}));
  const ds::FashionMNIST data(ds::FashionMNIST::Split::test, root);
  REQUIRE(data.size() == 2);
  CHECK(data.images().data<float>()[0] == 1.0f);
  CHECK(data.images().data<float>()[784 + 5] == 51.0f / 255.0f);
  CHECK(data.labels().to_vector() == std::vector<double>{7, 2});

  // the train split is missing here: the file is named (no package hint for a root of one's own)
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::train, root); },
                      {"FashionMNIST", "train-images-idx3-ubyte.gz", "not found"});
  // a label outside 0..9, counts that differ, images that are not 28x28, values not uint8
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx(0x08, {2}, std::string{7, 12}));
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::test, root); },
                      {"FashionMNIST", "label 12", "sample 1"});
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx(0x08, {3}, std::string{7, 2, 1}));
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::test, root); },
                      {"FashionMNIST", "(3,)", "2 images"});
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx(0x0C, {2}, be32(1) + be32(2)));
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::test, root); }, {"FashionMNIST", "uint8"});
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx(0x08, {2}, std::string{7, 2}));
  std::remove(dir.file("t10k-images-idx3-ubyte.gz").c_str());
  test::write_bytes(dir.file("t10k-images-idx3-ubyte"), idx(0x08, {2, 28, 27}, std::string(2 * 28 * 27, '\0')));
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::test, root); },
                      {"FashionMNIST", "(2, 28, 27)", "(N, 28, 28)"});
  // a corrupt file: read_idx's error, naming the file
  test::write_bytes(dir.file("t10k-images-idx3-ubyte"), idx(0x08, {2, 28, 28}, "short"));
  test::require_error([&] { ds::FashionMNIST(ds::FashionMNIST::Split::test, root); },
                      {"parse_idx", "t10k-images-idx3-ubyte", "needs exactly"});
  if (!exists(ds::FashionMNIST::kDefaultRoot))
    test::require_error([] { ds::FashionMNIST(); }, {"install it with: apt-get install dataset-fashion-mnist"});
}

// ---- WordList -------------------------------------------------------------------------------------

TEST_CASE("WordList: a small list: filtering, vocabulary, encoding and context examples", "[datasets][words]") {
  test::TempDir dir("words");
  test::write_bytes(dir.file("words"), "emma\nolivia\nAva\nx's\nemma\n\nbo\r\ncaf\xc3\xa9\n");
  ds::WordListOptions o;
  o.path = dir.file("words");
  o.val_fraction = 0.34;
  const ds::WordList w(o);
  // kept: emma, olivia, bo (Ava has a capital, x's an apostrophe, cafe an accent; emma once)
  CHECK(w.characters() == "abeilmov");
  CHECK(w.vocab_size() == 9);
  const auto& train = w.words(ds::WordList::Split::train);
  const auto& val = w.words(ds::WordList::Split::val);
  CHECK(train.size() == 2);  // floor(0.34 * 3) = 1 for validation
  CHECK(val.size() == 1);
  std::set<std::string> all(train.begin(), train.end());
  all.insert(val.begin(), val.end());
  CHECK(all == std::set<std::string>{"emma", "olivia", "bo"});
  CHECK(w.encode("bo") == std::vector<std::int64_t>{2, 7});
  CHECK(w.decode({2, 7, 0}) == "bo.");
  test::require_error([&] { (void)w.encode("bz"); }, {"WordList::encode", "'z'", "\"bz\""});
  test::require_error([&] { (void)w.decode({9}); }, {"WordList::decode", "id 9", "[0, 9)"});
  // context examples of block 2: one per character and one for the end of each word
  auto ctx = w.context_dataset(ds::WordList::Split::val, 2);
  const std::string word = val[0];
  REQUIRE(ctx->size() == word.size() + 1);
  CHECK(ctx->data().dtype() == kInt64);
  CHECK(ctx->target().dtype() == kInt64);
  const auto ids = w.encode(word);
  for (std::size_t i = 0; i <= word.size(); ++i) {
    const nn::Example e = ctx->get(i);
    const double prev2 = i >= 2 ? static_cast<double>(ids[i - 2]) : 0,
                 prev1 = i >= 1 ? static_cast<double>(ids[i - 1]) : 0;
    CHECK(e.data.to_vector() == std::vector<double>{prev2, prev1});
    CHECK(e.target.item() == (i < word.size() ? static_cast<double>(ids[i]) : 0.0));
  }
  test::require_error([&] { (void)w.context_dataset(ds::WordList::Split::train, 0); }, {"block_size", "0"});
  // a block too large for memory (or for int64) is refused naming the call and the argument
  for (const std::int64_t huge : {std::int64_t{1} << 50, std::numeric_limits<std::int64_t>::max()})
    test::require_error([&] { (void)w.context_dataset(ds::WordList::Split::train, huge); },
                        {"WordList::context_dataset", "'block_size'"});
  // other options
  o.lowercase_letters_only = false;
  o.val_fraction = 0;
  const ds::WordList wide(o);
  CHECK(wide.words(ds::WordList::Split::train).size() == 5);  // + Ava, x's (not cafe: not ASCII)
  CHECK(wide.words(ds::WordList::Split::val).empty());
  CHECK(wide.characters() == "'Aabeilmosvx");
}

TEST_CASE("WordList: the split is a pure function of the seed", "[datasets][words]") {
  ds::WordListOptions o;
  if (!have_package(o.path, "wamerican")) return;
  const ds::WordList a(o), b(o);
  CHECK(a.characters() == "abcdefghijklmnopqrstuvwxyz");
  CHECK(a.words(ds::WordList::Split::train) == b.words(ds::WordList::Split::train));
  CHECK(a.words(ds::WordList::Split::val) == b.words(ds::WordList::Split::val));
  const auto& train = a.words(ds::WordList::Split::train);
  const auto& val = a.words(ds::WordList::Split::val);
  const std::size_t n = train.size() + val.size();
  CHECK(n > 50000);
  CHECK(val.size() == n / 10);
  std::set<std::string> tr(train.begin(), train.end());
  CHECK(tr.size() == train.size());
  CHECK(std::none_of(val.begin(), val.end(), [&](const std::string& s) { return tr.count(s) > 0; }));
  o.seed = 1;
  const ds::WordList c(o);
  CHECK(c.words(ds::WordList::Split::val) != a.words(ds::WordList::Split::val));
  std::set<std::string> va(val.begin(), val.end()),
      vc(c.words(ds::WordList::Split::val).begin(), c.words(ds::WordList::Split::val).end());
  std::set<std::string> all_a = tr,
                        all_c(c.words(ds::WordList::Split::train).begin(), c.words(ds::WordList::Split::train).end());
  all_a.insert(va.begin(), va.end());
  all_c.insert(vc.begin(), vc.end());
  CHECK(all_a == all_c);  // the same words, split differently
  auto ctx = a.context_dataset(ds::WordList::Split::val, 3);
  std::size_t chars = 0;
  for (const auto& s : val) chars += s.size() + 1;
  CHECK(ctx->size() == chars);
}

TEST_CASE("WordList: missing files and bad options are refused", "[datasets][words][errors]") {
  test::TempDir dir("words_bad");
  ds::WordListOptions o;
  o.path = dir.file("nope");
  test::require_error([&] { ds::WordList w(o); }, {"WordList", "nope", "No such file"});
  test::write_bytes(dir.file("caps"), "Ava\nBob\n");
  o.path = dir.file("caps");
  test::require_error([&] { ds::WordList w(o); }, {"WordList", "no word left"});
  o.val_fraction = 1.0;
  test::require_error([&] { ds::WordList w(o); }, {"WordList", "val_fraction", "1"});
  test::require_hostile_paths_refused(dir.path.string(), "WordList", [](const std::string& p) {
    ds::WordListOptions q;
    q.path = p;
    ds::WordList w(q);
  });
  if (!exists(ds::WordListOptions().path))
    test::require_error([] { ds::WordList w; }, {"install it with: apt-get install wamerican"});
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The words of the bash array `name=( ... )` in `script` (comments dropped; the array ends at the
/// first ')' outside a comment).
std::set<std::string> bash_array(const std::string& script, const std::string& name) {
  const std::size_t start = script.find("\n" + name + "=(");
  REQUIRE(start != std::string::npos);
  std::set<std::string> words;
  std::istringstream lines(script.substr(start + name.size() + 3));
  for (std::string line; std::getline(lines, line);) {
    std::string code = line.substr(0, line.find('#'));
    const std::size_t close = code.find(')');
    std::istringstream ws(code.substr(0, close));
    for (std::string w; ws >> w;) words.insert(w);
    if (close != std::string::npos) return words;
  }
  FAIL("bash array " << name << " is not closed");
  return words;
}

/// The text of every source file of examples/<name>/ and of examples/common/ (headers they share).
std::string example_sources(const std::string& name) {
  std::string all;
  for (const std::string& dir : {"/examples/" + name, std::string("/examples/common")}) {
    const std::filesystem::path root = std::string(XGRAD_SOURCE_DIR) + dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root))
      if (e.is_regular_file() && (e.path().extension() == ".cpp" || e.path().extension() == ".hpp"))
        all += read_text(e.path().string());
  }
  return all;
}

/// The package dpkg says installs `path` ("" when dpkg does not know the file or is not there).
std::string dpkg_owner(const std::string& path) {
  const std::string cmd = "dpkg-query -S '" + path + "' 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  const std::size_t colon = out.find(':');
  return colon == std::string::npos ? "" : out.substr(0, colon);
}

}  // namespace

// A fresh machine runs `bash scripts/main.sh`, which installs only install-deps.sh's main_packages
// before running its examples: a dataset that only the test packages bring (once: wamerican) makes
// the main job fail there while every machine with the test packages passes.
TEST_CASE("the main job installs the package of every dataset and data file its examples read",
          "[datasets][main_job]") {
  struct Loader {
    std::string name, package, default_path;
  };
  const std::vector<Loader> loaders = {
      {"FashionMNIST", ds::FashionMNIST::kPackage, ds::FashionMNIST::kDefaultRoot},
      {"WordList", ds::WordList::kPackage, ds::WordList::kDefaultPath},
  };
  // every loader of nn/datasets that names a package is in the list above
  std::size_t declared = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(XGRAD_SOURCE_DIR) + "/nn/datasets"))
    if (e.path().extension() == ".hpp") {
      const std::string text = read_text(e.path().string());
      for (std::size_t at = text.find("kPackage ="); at != std::string::npos; at = text.find("kPackage =", at + 1))
        ++declared;
    }
  CHECK(declared == loaders.size());
  CHECK(ds::WordListOptions().path == ds::WordList::kDefaultPath);

  const std::set<std::string> main_packages =
      bash_array(read_text(XGRAD_SOURCE_DIR "/scripts/install-deps.sh"), "main_packages");
  const std::set<std::string> examples = bash_array(read_text(XGRAD_SOURCE_DIR "/scripts/main.sh"), "examples");
  REQUIRE(main_packages.count("cmake") == 1);  // the parser found the list
  REQUIRE(examples.size() >= 2);
  int uses = 0;
  for (const auto& example : examples) {
    const std::string src = example_sources(example);
    INFO("scripts/main.sh runs examples/" << example);
    REQUIRE(!src.empty());
    for (const auto& l : loaders)
      if (src.find("datasets::" + l.name) != std::string::npos) {
        ++uses;
        INFO("it reads nn::datasets::" << l.name << ", whose files come with the Debian package " << l.package
                                       << ": add it to main_packages in scripts/install-deps.sh");
        CHECK(main_packages.count(l.package) == 1);
      }
    // a file path written into the example itself must come from a package the main job installs
    for (std::size_t at = src.find("\"/usr/"); at != std::string::npos; at = src.find("\"/usr/", at + 1)) {
      const std::string path = src.substr(at + 1, src.find('"', at + 1) - at - 1);
      const std::string owner = dpkg_owner(path);
      INFO("examples/" << example << " names '" << path << "', installed by '" << owner << "'");
      CHECK(!owner.empty());
      CHECK(main_packages.count(owner) == 1);
    }
  }
  CHECK(uses >= 2);  // fashion_cnn and char_model: the scan sees the loaders
  // each loader names the package that really installs its default path (when dpkg knows it)
  for (const auto& l : loaders) {
    if (!have_package(l.default_path, l.package)) continue;
    INFO(l.name << "'s default path " << l.default_path);
    CHECK(dpkg_owner(l.default_path) == l.package);
  }
}
