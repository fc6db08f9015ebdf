// Tests for nn/serialize.*: safetensors round trips (tensors, metadata, modules), interoperability
// with an independent NumPy reader/writer (tests/nn/safetensors_check.py), strict and non-strict
// module loading, refusal of malformed files with a precise reason, and atomicity (a failed load
// leaves the module untouched, a failed save leaves the previous file and no temporary file).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/nn/detail/safetensors_header.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/serialize.hpp"

using namespace xgrad;
using xgrad::test::read_bytes;
using xgrad::test::require_error;
using xgrad::test::write_bytes;
using TempDir = xgrad::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string u64_le(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

// A safetensors file with the given header text (not padded) and buffer bytes.
std::string st_file(const std::string& header, const std::string& buffer) {
  return u64_le(header.size()) + header + buffer;
}

// A module tree: float32 and float64 parameters, a buffer, nested children.
struct Leaf : nn::Module {
  Leaf(Dtype dt, Generator& gen, std::int64_t in, std::int64_t out) : Module("Leaf") {
    register_parameter("weight", Tensor::randn({out, in}, gen, dt));
    register_parameter("bias", Tensor::randn({out}, gen, dt));
    register_buffer("running_mean", Tensor::randn({out}, gen, dt));
  }
};

struct Block : nn::Module {
  explicit Block(Generator& gen) : Module("Block") {
    register_parameter("gain", Tensor::randn({}, gen, kFloat64));
    register_module("inner", std::make_shared<Leaf>(kFloat64, gen, 2, 3));
  }
};

struct Net : nn::Module {
  explicit Net(std::uint64_t seed, bool extra = false) : Module("Net") {
    Generator gen(seed);
    register_parameter("scale", Tensor::randn({1}, gen, kFloat32));
    register_buffer("steps", Tensor::full({}, static_cast<double>(seed), kFloat64));
    register_buffer("unset", Tensor());  // undefined buffers are not saved, like torch's None
    register_module("encoder", std::make_shared<Leaf>(kFloat32, gen, 4, 5));
    register_module("block", std::make_shared<Block>(gen));
    if (extra) register_parameter("extra", Tensor::randn({2}, gen, kFloat32));
  }
};

std::vector<std::string> names_of(const nn::NamedTensors& ts) {
  std::vector<std::string> out;
  for (const auto& [n, t] : ts) out.push_back(n);
  return out;
}

nn::NamedTensors clone_state(const nn::Module& m) {
  nn::NamedTensors out;
  for (const auto& [n, t] : nn::state_dict(m)) out.emplace_back(n, t.clone_data());
  return out;
}

void require_state_equal(const nn::Module& m, const nn::NamedTensors& expected) {
  const auto got = nn::state_dict(m);
  REQUIRE(names_of(got) == names_of(expected));
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(bit_equal(got[i].second, expected[i].second));
  }
}

// Expects load_safetensors(path) to throw naming the function, the file and `reason`.
void require_load_error(const std::string& path, const std::string& reason) {
  INFO("reason " << reason);
  require_error([&] { (void)nn::load_safetensors(path); }, {"load_safetensors", path, reason});
}

}  // namespace

TEST_CASE("state_dict names parameters and buffers by dotted name, module by module", "[serialize]") {
  Net net(1);
  const std::vector<std::string> expected = {"scale",
                                             "steps",
                                             "encoder.weight",
                                             "encoder.bias",
                                             "encoder.running_mean",
                                             "block.gain",
                                             "block.inner.weight",
                                             "block.inner.bias",
                                             "block.inner.running_mean"};
  const auto sd = nn::state_dict(net);
  CHECK(names_of(sd) == expected);
  // The entries share storage with the module (they are the module's tensors).
  CHECK(sd[0].second.raw_data() == net.named_parameters()[0].second.raw_data());
}

TEST_CASE("save_safetensors / load_safetensors round trip: dtypes, 0-d, empty, order, metadata", "[serialize]") {
  TempDir dir("rt");
  Generator gen(5);
  const nn::NamedTensors ts = {
      {"z.last", Tensor::randn({2, 3}, gen, kFloat64)},   {"a.first", Tensor::randn({7}, gen, kFloat32)},
      {"scalar", Tensor::scalar(-2.5, kFloat32)},         {"empty", Tensor::zeros({2, 0, 4}, kFloat64)},
      {"odd", Tensor::randn({3}, gen, kFloat32)},  // 12 bytes: misaligns what follows
      {"after_odd", Tensor::randn({2, 2}, gen, kFloat64)}};
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"epoch", "3"}, {"note", "ünïcode"}};
  const std::string path = dir.file("t.safetensors");
  nn::save_safetensors(path, ts, meta);
  const auto bytes = read_bytes(path);
  CHECK(bytes == nn::to_safetensors_bytes(ts, meta));
  std::uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK((8 + hlen) % 8 == 0);  // space-padded so the buffer is 8-byte aligned

  const auto file = nn::load_safetensors(path);
  CHECK(file.metadata == meta);
  REQUIRE(names_of(file.tensors) == names_of(ts));  // file (= given) order
  for (std::size_t i = 0; i < ts.size(); ++i) {
    INFO(ts[i].first);
    CHECK(bit_equal(file.tensors[i].second, ts[i].second));
    CHECK(file.tensors[i].second.raw_data() != ts[i].second.raw_data());  // fresh storage
  }
  CHECK(file.contains("odd"));
  CHECK_FALSE(file.contains("nope"));
  CHECK(bit_equal(file.at("a.first"), ts[1].second));
  require_error([&] { (void)file.at("nope"); }, {"SafetensorsFile::at", "'nope'", "'a.first'"});
  // The in-memory parser agrees, and the generic state functions are the same format.
  CHECK(names_of(nn::parse_safetensors(bytes).tensors) == names_of(ts));
  nn::save_state(dir.file("s.safetensors"), ts);
  const auto st = nn::load_state(dir.file("s.safetensors"));
  REQUIRE(names_of(st) == names_of(ts));
  for (std::size_t i = 0; i < ts.size(); ++i) CHECK(bit_equal(st[i].second, ts[i].second));
  // No tensors at all is a valid file.
  nn::save_safetensors(dir.file("none.safetensors"), {});
  CHECK(nn::load_safetensors(dir.file("none.safetensors")).tensors.empty());
}

TEST_CASE("SafetensorsMetadata: header order, lookups, conversion to and comparison with std::map", "[serialize]") {
  const std::string header = R"({"__metadata__": {"z": "last", "a": "first", "m": ""}})";
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  const nn::SafetensorsMetadata m = nn::parse_safetensors(bytes + header, "mem").metadata;
  REQUIRE(m.size() == 3);
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.emplace_back(k);
  CHECK(keys == std::vector<std::string>{"z", "a", "m"});  // as written, not sorted
  CHECK(m.at("a") == "first");
  CHECK(m.at("m").empty());
  CHECK(m.contains("z"));
  CHECK(!m.contains("b"));
  CHECK(m.count("z") == 1);
  CHECK(m.find("b") == m.end());
  CHECK((*m.find("z")).second == "last");
  CHECK(m.end() - m.begin() == 3);
  test::require_error([&] { (void)m.at("b"); }, {"SafetensorsMetadata::at", "no key 'b'", "'z', 'a', 'm'"});
  const std::map<std::string, std::string> as_map = m;
  CHECK(as_map == std::map<std::string, std::string>{{"a", "first"}, {"m", ""}, {"z", "last"}});
  CHECK(m == as_map);
  CHECK(m == nn::SafetensorsMetadata(as_map));  // equal whatever the order
  CHECK(!(m == std::map<std::string, std::string>{{"a", "first"}, {"m", ""}, {"z", "other"}}));
  CHECK(!(m == std::map<std::string, std::string>{{"a", "first"}}));
  CHECK(nn::SafetensorsMetadata().empty());
}

TEST_CASE("save_safetensors refuses bad arguments", "[serialize]") {
  TempDir dir("args");
  const std::string p = dir.file("x.safetensors");
  const Tensor t = Tensor::ones({2});
  require_error([&] { nn::save_safetensors(p, {{"a", t}, {"a", t}}); }, {"save_safetensors", "duplicate", "'a'"});
  require_error([&] { nn::save_safetensors(p, {{"", t}}); }, {"save_safetensors", "empty name"});
  require_error([&] { nn::save_safetensors(p, {{"__metadata__", t}}); }, {"save_safetensors", "reserved"});
  require_error([&] { nn::save_safetensors(p, {{"u", Tensor()}}); }, {"save_safetensors", "'u'", "undefined"});
  require_error([&] { nn::save_safetensors(p, {{std::string("bad\xff"), t}}); }, {"save_safetensors", "UTF-8"});
  require_error(
      [&] {
        nn::save_safetensors(dir.file("no_such_dir/x.safetensors"), {{"a", t}});
      },
      {"save_safetensors", "no_such_dir", "temporary file"});
  CHECK(dir.entries().empty());
}

TEST_CASE("sparse CSR matrices round trip through safetensors, damaged ones are refused", "[serialize][sparse]") {
  TempDir dir("sparse");
  const std::string p = dir.file("g.safetensors");
  // 3 x 4 with an empty middle row, and an empty 0 x 5 matrix
  const SparseCsr a =
      sparse_csr_tensor(Tensor::from_vector({0, 2, 2, 3}, {4}, kInt64), Tensor::from_vector({1, 3, 0}, {3}, kInt64),
                        Tensor::from_vector({0.5, -2.0, 7.25}, {3}, kFloat64), {3, 4});
  const SparseCsr empty =
      sparse_csr_tensor(Tensor::zeros({1}, kInt64), Tensor::zeros({0}, kInt64), Tensor::zeros({0}, kFloat32), {0, 5});
  nn::NamedTensors tensors{{"dense", Tensor::ones({2})}};
  std::map<std::string, std::string> meta{{"note", "kept"}};
  nn::put_sparse_csr(tensors, meta, "adj", a);
  nn::put_sparse_csr(tensors, meta, "none", empty);
  nn::save_safetensors(p, tensors, meta);
  const nn::SafetensorsFile f = nn::load_safetensors(p);
  const SparseCsr b = nn::get_sparse_csr(f, "adj");
  CHECK(b.pattern() == a.pattern());
  CHECK(b.shape() == a.shape());
  CHECK(b.dtype() == kFloat64);
  CHECK(b.values().to_vector() == std::vector<double>{0.5, -2.0, 7.25});
  const SparseCsr e = nn::get_sparse_csr(f, "none");
  CHECK(e.rows() == 0);
  CHECK(e.cols() == 5);
  CHECK(e.nnz() == 0);
  CHECK(f.metadata.at("note") == "kept");

  require_error([&] { (void)nn::get_sparse_csr(f, "missing"); }, {"get_sparse_csr", "'missing'", "sparse_csr:missing"});
  require_error([&] { nn::put_sparse_csr(tensors, meta, "", a); }, {"put_sparse_csr", "'name'", "empty"});
  require_error([&] { nn::put_sparse_csr(tensors, meta, "u", SparseCsr()); }, {"put_sparse_csr", "undefined"});
  // damaged files: a column out of range, a bad size entry, offsets of the wrong length, a missing array
  const auto damaged = [&](const std::string& key, const Tensor& replacement, const std::string& size) {
    nn::NamedTensors t;
    for (const auto& [n, v] : tensors) t.emplace_back(n, n == key ? replacement : v);
    std::map<std::string, std::string> m = meta;
    if (!size.empty()) m["sparse_csr:adj"] = size;
    if (key == "drop")
      t.erase(std::find_if(t.begin(), t.end(), [](const auto& kv) { return kv.first == "adj.values"; }));
    nn::save_safetensors(p, t, m);
    return nn::load_safetensors(p);
  };
  require_error(
      [&] {
        (void)nn::get_sparse_csr(damaged("adj.col_indices", Tensor::from_vector({1, 4, 0}, {3}, kInt64), ""), "adj");
      },
      {"col_indices", "4"});
  require_error([&] { (void)nn::get_sparse_csr(damaged("", Tensor(), "3;4"), "adj"); },
                {"get_sparse_csr", "'3;4'", "<rows>,<cols>"});
  require_error([&] { (void)nn::get_sparse_csr(damaged("", Tensor(), "9223372036854775807,4"), "adj"); },
                {"get_sparse_csr", "<rows>,<cols>"});
  require_error([&] { (void)nn::get_sparse_csr(damaged("", Tensor(), "5,4"), "adj"); },
                {"get_sparse_csr", "adj.crow_indices", "5 rows"});
  require_error([&] { (void)nn::get_sparse_csr(damaged("drop", Tensor(), ""), "adj"); },
                {"get_sparse_csr", "adj.values"});
}

TEST_CASE("nn::save / nn::load round trip a module tree in place", "[serialize]") {
  TempDir dir("module");
  Net a(1), b(2);
  const std::string path = dir.file("net.safetensors");
  nn::save(a, path, {{"epoch", "7"}});
  const auto handles = b.parameters();
  std::vector<const void*> ptrs;
  for (const auto& p : handles) ptrs.push_back(p.raw_data());
  const auto r = nn::load(b, path);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  require_state_equal(b, clone_state(a));
  // Same storage and still trainable: an optimizer holding the handles sees the loaded values.
  const auto after = b.parameters();
  REQUIRE(after.size() == handles.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].is_same(handles[i]));
    CHECK(after[i].raw_data() == ptrs[i]);
    CHECK(after[i].requires_grad());
    CHECK(after[i].is_leaf());
  }
  CHECK(nn::load_safetensors(path).metadata.at("epoch") == "7");
  // Loading works while grad mode is on and leaves it on.
  CHECK(GradMode::is_enabled());
}

TEST_CASE("Python interop: integer and bool dtypes (I64, I32, U8, BOOL) both ways", "[serialize][python]") {
  TempDir dir("pyint");
  const std::vector<std::int64_t> big = {std::int64_t{1} << 60, -3};
  const nn::NamedTensors sd = {{"labels", Tensor::from_data<std::int64_t>(big, {2})},
                               {"idx", Tensor::of({{-5, 7}, {2147483647, 0}}, kInt32)},
                               {"pixels", Tensor::of({0, 128, 255}, kUInt8)},
                               {"mask", Tensor::of({1, 0, 0, 1}, kBool)},
                               {"w", Tensor::of({0.5, -1.5})}};
  nn::save_safetensors(dir.file("ours.safetensors"), sd, {});
  // Our own reader gives back the same dtypes and bits.
  const auto mine = nn::load_safetensors(dir.file("ours.safetensors"));
  for (const auto& [n, t] : sd) {
    INFO(n);
    CHECK(bit_equal(mine.at(n), t));
  }
  nlohmann::json manifest;
  manifest["file"] = "ours.safetensors";
  manifest["metadata"] = nlohmann::json::object();
  manifest["tensors"] = names_of(sd);
  for (const auto& [n, t] : sd) save_npy(dir.file(n + ".npy"), t);
  write_bytes(dir.file("manifest.json"), manifest.dump());
  const std::string cmd = "/usr/bin/python3 " + std::string(XGRAD_SOURCE_DIR) + "/tests/nn/safetensors_check.py " +
                          dir.path.string() + " > " + dir.file("python.log") + " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    FAIL("safetensors_check.py failed (" << cmd << "):\n" << read_bytes(dir.file("python.log")));
  // numpy's file (its I64/I32/U8/BOOL extras and 2 * a + 1 of ours, computed in each dtype) reads
  // back in the same dtypes, bit for bit.
  const auto file = nn::load_safetensors(dir.file("py.safetensors"));
  for (const std::string n : {"extra.labels", "extra.idx", "extra.pixels", "extra.mask", "labels", "idx", "mask"}) {
    INFO(n);
    const Tensor want = load_npy(dir.file("py__" + n + ".npy"));
    CHECK(bit_equal(file.at(n), want));
  }
  CHECK(file.at("extra.labels").dtype() == kInt64);
  CHECK(file.at("extra.labels").data<std::int64_t>()[1] == (std::int64_t{1} << 40) + 3);
  CHECK(file.at("extra.mask").dtype() == kBool);
  CHECK(file.at("labels").data<std::int64_t>()[0] == (std::int64_t{1} << 61) + 1);
  CHECK(file.at("pixels").to_vector() == std::vector<double>{1, 1, 255});  // 2 * a + 1 wraps in uint8
}

TEST_CASE("Python interop: numpy reads our file, we read numpy's", "[serialize][python]") {
  TempDir dir("py");
  Net net(3);
  const auto sd = nn::state_dict(net);
  const std::map<std::string, std::string> meta = {{"framework", "xgrad"}, {"step", "12"}};
  nn::save(net, dir.file("ours.safetensors"), meta);
  nlohmann::json manifest;
  manifest["file"] = "ours.safetensors";
  manifest["metadata"] = meta;
  manifest["tensors"] = names_of(sd);
  for (const auto& [n, t] : sd) save_npy(dir.file(n + ".npy"), t);
  write_bytes(dir.file("manifest.json"), manifest.dump());
  const std::string cmd = "/usr/bin/python3 " + std::string(XGRAD_SOURCE_DIR) + "/tests/nn/safetensors_check.py " +
                          dir.path.string() + " > " + dir.file("python.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) FAIL("safetensors_check.py failed (" << cmd << "):\n" << read_bytes(dir.file("python.log")));

  const auto py = nlohmann::json::parse(read_bytes(dir.file("py_manifest.json")));
  const auto file = nn::load_safetensors(dir.file("py.safetensors"));
  CHECK(file.metadata == py["metadata"].get<std::map<std::string, std::string>>());
  auto got_names = names_of(file.tensors);
  std::sort(got_names.begin(), got_names.end());
  REQUIRE(got_names == py["tensors"].get<std::vector<std::string>>());
  for (const auto& name : got_names) {
    INFO(name);
    CHECK(bit_equal(file.at(name), load_npy(dir.file("py__" + name + ".npy"))));
  }
  // And the values are 2 * a + 1 of what we wrote, computed by numpy in the tensor's dtype.
  for (const auto& [n, t] : sd) {
    INFO(n);
    const auto& back = file.at(n);
    REQUIRE(back.dtype() == t.dtype());
    const auto v = t.to_vector(), w = back.to_vector();
    REQUIRE(v.size() == w.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      CHECK(w[i] ==
            (t.dtype() == kFloat32 ? static_cast<double>(static_cast<float>(v[i]) * 2.0f + 1.0f) : v[i] * 2.0 + 1.0));
  }
  // The python file's tensors are not in header order in the buffer; the state of a module with
  // those names loads from it non-strictly (the extra.* tensors are unexpected).
  Net other(4);
  const auto r = nn::load(other, dir.file("py.safetensors"), /*strict=*/false);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys == std::vector<std::string>{"extra.empty", "extra.idx", "extra.labels", "extra.mask",
                                                      "extra.matrix", "extra.pixels", "extra.scalar"});
  for (const auto& [n, t] : nn::state_dict(other)) CHECK(bit_equal(t, file.at(n)));
}

TEST_CASE("nn::load strict and non-strict: missing and unexpected keys", "[serialize]") {
  TempDir dir("keys");
  Net small(1), big(2, /*extra=*/true);
  nn::save(small, dir.file("small.safetensors"));
  nn::save(big, dir.file("big.safetensors"));

  SECTION("strict: missing key is an error, nothing is loaded") {
    Net target(9, true);
    const auto before = clone_state(target);
    require_error([&] { (void)nn::load(target, dir.file("small.safetensors")); },
                  {"nn::load", "small.safetensors", "missing keys", "'extra'", "nothing was loaded"});
    require_state_equal(target, before);
  }
  SECTION("strict: unexpected key is an error, nothing is loaded") {
    Net target(9);
    const auto before = clone_state(target);
    require_error([&] { (void)nn::load(target, dir.file("big.safetensors")); },
                  {"nn::load", "big.safetensors", "unexpected keys", "'extra'"});
    require_state_equal(target, before);
  }
  SECTION("non-strict: loads the matching entries and reports the rest") {
    Net target(9, true);
    const Tensor extra_before = target.named_parameters()[1].second.clone_data();
    REQUIRE(target.named_parameters()[1].first == "extra");
    const auto r = nn::load(target, dir.file("small.safetensors"), false);
    CHECK(r.missing_keys == std::vector<std::string>{"extra"});
    CHECK(r.unexpected_keys.empty());
    CHECK(bit_equal(target.named_parameters()[1].second, extra_before));
    for (const auto& [n, t] : nn::state_dict(small)) {
      INFO(n);
      CHECK(bit_equal(nn::load_safetensors(dir.file("small.safetensors")).at(n), t));
    }
    Net target2(10);
    const auto r2 = nn::load(target2, dir.file("big.safetensors"), false);
    CHECK(r2.missing_keys.empty());
    CHECK(r2.unexpected_keys == std::vector<std::string>{"extra"});
    for (const auto& [n, t] : nn::state_dict(target2))
      CHECK(bit_equal(t, nn::load_safetensors(dir.file("big.safetensors")).at(n)));
  }
  SECTION("load_state_dict from memory: duplicate and undefined entries") {
    Net target(9);
    const Tensor t = Tensor::ones({1});
    require_error(
        [&] {
          (void)nn::load_state_dict(target, {{"scale", t}, {"scale", t}}, false);
        },
        {"load_state_dict", "'scale'", "twice"});
    require_error(
        [&] {
          (void)nn::load_state_dict(target, {{"scale", Tensor()}}, false);
        },
        {"load_state_dict", "'scale'", "undefined"});
  }
}

TEST_CASE("nn::load refuses mis-shaped and wrong-dtype tensors and writes nothing", "[serialize]") {
  TempDir dir("mismatch");
  Net src(1);
  auto shape_state = clone_state(src), dtype_state = clone_state(src);
  for (auto& [n, t] : shape_state)
    if (n == "block.inner.weight") t = Tensor::zeros({2, 3}, kFloat64);  // module has (3, 2)
  for (auto& [n, t] : dtype_state)
    if (n == "encoder.bias") t = t.to(kFloat64).clone_data();
  nn::save_safetensors(dir.file("shape.safetensors"), shape_state);
  nn::save_safetensors(dir.file("dtype.safetensors"), dtype_state);
  for (bool strict : {true, false}) {
    INFO("strict " << strict);
    Net target(2);
    const auto before = clone_state(target);
    require_error([&] { (void)nn::load(target, dir.file("shape.safetensors"), strict); },
                  {"nn::load", "'block.inner.weight'", "(3, 2)", "(2, 3)", "nothing was loaded"});
    require_state_equal(target, before);  // even the entries listed before it are untouched
    require_error([&] { (void)nn::load(target, dir.file("dtype.safetensors"), strict); },
                  {"nn::load", "'encoder.bias'", "float32", "float64"});
    require_state_equal(target, before);
  }
}

TEST_CASE("load_safetensors refuses malformed files with the reason", "[serialize]") {
  TempDir dir("bad");
  const std::string p = dir.file("bad.safetensors");
  const std::string f32x2(8, '\0');  // two float32 zeros
  auto expect = [&](const std::string& bytes, const std::string& reason) {
    write_bytes(p, bytes);
    require_load_error(p, reason);
  };
  auto one = [&](const std::string& info) { return st_file("{\"w\":" + info + "}", f32x2); };

  SECTION("size and header length") {
    expect("", "shorter than 8 bytes");
    expect("\x02\0\0", "shorter than 8 bytes");
    expect(u64_le(100) + "{}", "runs past the end of the file");
    expect(u64_le(~0ull) + "{}", "absurd");
    expect(u64_le(0), "does not start with '{'");
    // A valid file cut short: the last tensor's bytes are missing.
    const std::string good = nn::to_safetensors_bytes({{"a", Tensor::ones({4})}, {"b", Tensor::ones({3})}});
    expect(good.substr(0, good.size() - 4), "outside the data buffer");
    expect(good.substr(0, 12), "runs past the end of the file");
    require_error([&] { (void)nn::load_safetensors(dir.file("missing.safetensors")); },
                  {"load_safetensors", "cannot open", "missing.safetensors"});
    require_error([&] { (void)nn::load_safetensors(dir.path.string()); }, {"load_safetensors", "not a regular file"});
  }
  SECTION("JSON") {
    expect(st_file("[1, 2]", ""), "does not start with '{'");
    expect(st_file("{\"w\": ", ""), "not valid JSON");
    expect(st_file("{} x", ""), "not valid JSON");
    expect(st_file("{\"w\xff\": 1}", ""), "not valid JSON");  // invalid UTF-8
    expect(st_file("{\"w\": 3}", ""), "not a JSON object");
    expect(st_file("{\"w\": {\"dtype\": \"F32\", \"shape\": [[[1]]], \"data_offsets\": [0, 4]}}", ""), "nested deeper");
    expect(st_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                   f32x2),
           "duplicate name 'w'");
    expect(st_file(R"({"__metadata__": {"a": 1}})", ""), "'__metadata__' value of 'a' is not a string");
    expect(st_file(R"({"__metadata__": [1]})", ""), "'__metadata__' is not a JSON object");
  }
  SECTION("fields") {
    expect(one(R"({"shape": [2], "data_offsets": [0, 8]})"), "tensor 'w' has no 'dtype' field");
    expect(one(R"({"dtype": "F32", "data_offsets": [0, 8]})"), "tensor 'w' has no 'shape' field");
    expect(one(R"({"dtype": "F32", "shape": [2]})"), "tensor 'w' has no 'data_offsets' field");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1})"), "unknown field 'x'");
    expect(one(R"({"dtype": 4, "shape": [2], "data_offsets": [0, 8]})"), "'dtype' of tensor 'w' is not a string");
    expect(one(R"({"dtype": "F32", "shape": "2", "data_offsets": [0, 8]})"), "'shape' of tensor 'w' is not an array");
    expect(one(R"({"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]})"), "not a non-negative integer");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})"), "not two non-negative integers");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, -8]})"), "not two non-negative integers");
  }
  SECTION("dtypes and shapes") {
    expect(one(R"({"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]})"), "BF16 not supported");
    expect(one(R"({"dtype": "I16", "shape": [1], "data_offsets": [0, 2]})"), "I16 not supported");
    expect(one(R"({"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]})"), "unknown dtype 'Q7'");
    expect(one(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})"), "negative dimension -2");
    expect(one(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]})"), "overflows");
    expect(one(R"({"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 8]})"), "overflows");
  }
  SECTION("offsets") {
    expect(one(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), "needs 12 bytes");
    expect(one(R"({"dtype": "F64", "shape": [2], "data_offsets": [0, 8]})"), "needs 16 bytes");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})"), "end before they begin");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [4, 12]})"), "outside the data buffer of 8 bytes");
    expect(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [18446744073709551608, 0]})"),
           "end before they begin");
    expect(st_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   std::string(12, '\0')),
           "overlap");
    expect(st_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                   f32x2),
           "overlap");
    // Entries out of buffer order are sorted by offset first (the message names them in that order).
    expect(st_file(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                       "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                   std::string(12, '\0')),
           "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    expect(st_file(R"({"c": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
                       "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                   std::string(12, '\0')),
           "bytes [4, 8) before tensor 'c'");
    expect(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", f32x2), "gap");
    expect(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", f32x2), "trailing bytes");
  }
  // In-memory entry point: same checks, no file.
  require_error([] { (void)nn::parse_safetensors(nullptr, 0, "mem"); }, {"mem", "shorter than 8 bytes"});
  require_error([] { (void)nn::parse_safetensors(nullptr, 5); }, {"parse_safetensors", "null"});
}

TEST_CASE("a failed save leaves the previous checkpoint and no temporary file", "[serialize]") {
  TempDir dir("atomic");
  const std::string path = dir.file("model.safetensors");
  Net net(1);
  nn::save(net, path);
  const std::string old_bytes = read_bytes(path);

  SECTION("invalid tensors: refused before anything is written") {
    require_error(
        [&] {
          nn::save_safetensors(path, {{"a", Tensor::ones({2})}, {"b", Tensor()}});
        },
        {"save_safetensors", "'b'", "undefined"});
  }
  SECTION("the write itself fails (file size limit hit mid-write)") {
    // RLIMIT_FSIZE makes write() fail with EFBIG part way through the temporary file (SIGXFSZ is
    // ignored so the failure is reported instead of killing the process).
    struct rlimit old_limit {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = static_cast<rlim_t>(old_bytes.size() + 100);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    Generator gen(1);
    std::string message;
    try {
      nn::save_safetensors(path, {{"big", Tensor::randn({4096}, gen)}});
    } catch (const Error& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
    CHECK(message.find("save_safetensors") != std::string::npos);
    CHECK(message.find("writing") != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
  }
  SECTION("the target is a non-empty folder") {
    const std::string target = dir.file("folder.safetensors");
    fs::create_directories(target + "/keep");
    require_error([&] { nn::save(net, target); },
                  {"save_safetensors", "folder.safetensors", "not a regular file", "directory"});
    CHECK(fs::is_directory(target + "/keep"));
  }
  SECTION("the folder does not exist: the temporary file cannot be created") {
    require_error([&] { nn::save(net, dir.file("folder.safetensors/x/y")); },
                  {"save_safetensors", "No such file or directory"});
  }
  CHECK(read_bytes(path) == old_bytes);
  for (const auto& e : dir.entries()) CHECK((e == "model.safetensors" || e == "folder.safetensors"));
  // The old checkpoint still loads.
  Net other(2);
  (void)nn::load(other, path);
  require_state_equal(other, clone_state(net));
}

TEST_CASE("a failed load leaves the module unchanged: corrupt file and bad values", "[serialize]") {
  TempDir dir("noload");
  Net src(1);
  const std::string good = nn::to_safetensors_bytes(nn::state_dict(src));
  Net target(2);
  const auto before = clone_state(target);
  // Flip the header length, truncate, and corrupt one byte of the header in turn.
  std::string bad1 = good;
  bad1[0] = static_cast<char>(bad1[0] + 1);
  const std::string bad2 = good.substr(0, good.size() - 1);
  std::string bad3 = good;
  bad3[8] = '[';
  int k = 0;
  for (const auto& bytes : {bad1, bad2, bad3}) {
    const std::string p = dir.file(fmt::format("c{}.safetensors", k++));
    write_bytes(p, bytes);
    CHECK_THROWS_AS(nn::load(target, p), Error);
    CHECK_THROWS_AS(nn::load(target, p, false), Error);
    require_state_equal(target, before);
  }
}

// ---- hostile files (Note [Hostile files] in core/file_io.hpp, Note [Safetensors header scanner]) ----------

TEST_CASE("load_safetensors and nn::load refuse non-regular files without blocking, with the OS reason",
          "[serialize][hostile]") {
  TempDir dir("hostile_paths");
  xgrad::test::require_hostile_paths_refused(dir.path.string(), "load_safetensors",
                                             [](const std::string& p) { (void)nn::load_safetensors(p); });
  Net net(1);
  xgrad::test::require_hostile_paths_refused(dir.path.string(), "load_safetensors",
                                             [&](const std::string& p) { (void)nn::load(net, p); });
  xgrad::test::require_hostile_paths_refused(dir.path.string(), "load_safetensors",
                                             [](const std::string& p) { (void)nn::load_state(p); });
}

TEST_CASE("duplicate keys are refused at every level of the header", "[serialize][hostile]") {
  const std::string f32x2(8, '\0');
  const std::string w = R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  auto expect = [&](const std::string& header, const std::string& buffer, const std::string& reason) {
    INFO("header " << header.substr(0, 200));
    require_error([&] { (void)nn::parse_safetensors(st_file(header, buffer), "dup"); }, {"dup", reason});
  };
  expect("{" + w + ", " + w + "}", f32x2, "duplicate name 'w'");
  expect(R"({"__metadata__": {"a": "1"}, "__metadata__": {"b": "2"}})", "", "duplicate name '__metadata__'");
  expect(R"({"__metadata__": {"a": "1", "b": "2", "a": "3"}})", "", "duplicate key 'a' in '__metadata__'");
  expect(R"({"w": {"dtype": "F32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", f32x2,
         "duplicate key 'dtype' in the header entry of tensor 'w'");
  expect(R"({"w": {"dtype": "F32", "shape": [2], "shape": [2], "data_offsets": [0, 8]}})", f32x2,
         "duplicate key 'shape' in the header entry of tensor 'w'");
  expect(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "data_offsets": [0, 8]}})", f32x2,
         "duplicate key 'data_offsets'");
  // Keys equal after JSON unescaping are the same key.
  expect(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "\u0077": {"dtype": "F32", "shape": [2],
             "data_offsets": [0, 8]}})",
         f32x2, "duplicate name 'w'");
  // Far apart: the first and the last of 20000 names.
  std::string many = "{";
  for (int i = 0; i < 20000; ++i)
    many += fmt::format(R"("t{}": {{"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}},)", i);
  many += R"("t0": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})";
  expect(many, "", "duplicate name 't0'");
  // Distinct names that differ only late, or by case, are not duplicates.
  const auto ok = nn::parse_safetensors(st_file(R"({"ab": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                  "aB": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                  "__metadata__": {"k": "1", "K": "2"}})",
                                                ""));
  CHECK(ok.tensors.size() == 2);
  CHECK(ok.metadata.size() == 2);
}

TEST_CASE("SafetensorsMetadata: empty keys and values, escapes, and entries around them read back exactly",
          "[serialize]") {
  // A key ends where its value begins and a value where the next key begins (SafetensorsMetadata::Item):
  // empty strings next to each other, first and last, must not run into their neighbours.
  const std::string header = R"({"__metadata__": {"": "", "a": "", "": "x"}})";  // a duplicate empty key: refused
  require_error([&] { (void)nn::parse_safetensors(st_file(header, ""), "mem"); },
                {"duplicate key '' in '__metadata__'"});
  const auto m =
      nn::parse_safetensors(
          st_file(R"({"__metadata__": {"": "", "a": "", "b\"\u00e4": "q\n", "c": "", "d": "e"}})", ""), "mem")
          .metadata;
  const std::vector<std::pair<std::string, std::string>> want = {
      {"", ""}, {"a", ""}, {"b\"\xc3\xa4", "q\n"}, {"c", ""}, {"d", "e"}};
  REQUIRE(m.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(std::string(m.begin()[static_cast<std::ptrdiff_t>(i)].first) == want[i].first);
    CHECK(std::string(m.begin()[static_cast<std::ptrdiff_t>(i)].second) == want[i].second);
  }
  CHECK(m.at("") == "");
  CHECK(m.at("d") == "e");
  const std::map<std::string, std::string> as_map(want.begin(), want.end());
  CHECK(m == as_map);
  CHECK(nn::SafetensorsMetadata(as_map).to_map() == as_map);
  CHECK(nn::SafetensorsMetadata(std::map<std::string, std::string>{{"", ""}}).at("") == "");
}

TEST_CASE("a duplicate among many metadata keys: the first repeat in header order, at its byte",
          "[serialize][hostile]") {
  // 30000 keys (several parts of the duplicate check), escapes and whitespace before the duplicates, and
  // three groups of equal keys: "k7" at 7, 20000 and 25000; "k9" at 9 and 15000 (the first repeat in
  // header order: reported, with its byte); "k5" at 5 and 29999.
  std::string h = R"({"__metadata__": { "e\"sc\\": "v\"\\" ,)";
  std::size_t at_k9_repeat = 0;
  for (int i = 0; i < 30000; ++i) {
    const int k = i == 20000 || i == 25000 ? 7 : i == 15000 ? 9 : i == 29999 ? 5 : i + 100000;
    if (i == 15000) at_k9_repeat = 8 + h.size() + 1;  // the key's opening quote, counted from the file's start
    h += fmt::format(" \"k{}\" :\t\"{}\" ,", i < 10 ? i : k, i % 3 ? "x" : "y\\\"");
  }
  h.back() = '}';
  h += "}";
  require_error(
      [&] { (void)nn::parse_safetensors(st_file(h, ""), "many.safetensors"); },
      {"many.safetensors", "duplicate key 'k9' in '__metadata__'", fmt::format("(at byte {})", at_k9_repeat)});
}

namespace {

// Seconds per header byte a pathological header may take to parse or refuse: more than an order of
// magnitude above what the linear parser takes in a release build on the loaded 2-core CI machine
// (the test prints its measurements), and below what nlohmann's callback parser used before took on
// headers of a few MB (it grew quadratically or worse). Debug and sanitizer builds are an order of
// magnitude slower and get a looser bound (bench/results/build_and_run_times.md, "The tests' measured
// speeds").
double per_byte_bound() {
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  return 2e-6;
#else
  return 40e-6;
#endif
}

// This thread's CPU time in seconds (user + system): on a machine shared with other work it does not
// count the waits for a core, which wall time does.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The least CPU time of `reps` runs of fn (the least is the run least disturbed by other work).
double min_cpu_seconds(int reps, const std::function<void()>& fn) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_seconds();
    fn();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

// How many times the time of reading a file may a pathological header of the same size take to scan
// (the header scanner alone) or to parse (scan, checks, tensors), or to refuse (the requirement: "in about
// the time it takes to read it"). The read is into memory never touched before
// (read_into_fresh_memory), as a load of the file is. At these 4 MB everything stays in the CPU's
// caches and the read (a copy and 1000 page faults) is fast, so the scan and, more so, the parse
// that builds 110k tensors from 4 MB (a tensor's objects cost more than its 36 bytes of header) take
// larger multiples of it here than at the 100 MB cap, where the read runs at memory speed
// (bench/README.md). nlohmann's callback parser used before took tens of thousands of times the read
// and grew quadratically. So the bounds are loose enough for a busy machine and its
// noisy clocks (CPU times, the least of 5 interleaved runs, still vary by an order of magnitude
// there) and far below a superlinear parse; Debug and sanitizer builds parse an order of magnitude
// slower while their read (a syscall) is not (bench/results/build_and_run_times.md, "The tests'
// measured speeds").
double scan_factor_bound() {
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  return 100;
#else
  return 3000;
#endif
}
double parse_factor_bound() {
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  return 1000;
#else
  return 20000;
#endif
}

// Reads the file at `path` into memory never touched before (fresh anonymous pages, as the buffer of
// a load is), then unmaps it; returns the bytes read.
std::size_t read_into_fresh_memory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  const auto n = static_cast<std::size_t>(st.st_size);
  void* m = ::mmap(nullptr, std::max<std::size_t>(n, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  std::size_t used = 0;
  while (used < n) {
    const ssize_t r = ::read(fd, static_cast<char*>(m) + used, n - used);
    if (r <= 0) break;
    used += static_cast<std::size_t>(r);
  }
  ::munmap(m, std::max<std::size_t>(n, 1));
  ::close(fd);
  return used;
}

// Runs fn once and returns the time it took per byte of `bytes`.
double seconds_per_byte(std::size_t bytes, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  return dt.count() / static_cast<double>(bytes);
}

std::string zero_entry(const std::string& name) {
  return fmt::format(R"("{}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", name);
}

}  // namespace

TEST_CASE("header parsing is linear: multi-MB pathological headers are parsed or refused in bounded time per byte",
          "[serialize][hostile]") {
  constexpr std::size_t kTarget = 4'000'000;  // bytes of header per case
  struct Case {
    std::string name, header, buffer;
    std::string reason;  // empty: must parse
    std::size_t tensors = 0;
  };
  std::vector<Case> cases;
  {  // ~110k small entries: the shape that made the old parser quadratic
    std::string h = "{";
    std::size_t n = 0;
    for (; h.size() < kTarget; ++n) {
      if (n) h += ',';
      h += zero_entry(fmt::format("t{:07}", n));
    }
    cases.push_back({"many entries", h + "}", "", "", n});
    cases.push_back({"many entries then a duplicate", h + "," + zero_entry("t0000000") + "}", "", "duplicate name"});
    cases.push_back({"many entries then a bad one", h + R"(,"z":{"dtype":"F32","shape":[1],"data_offsets":[0,0]}})", "",
                     "needs 4 bytes"});
    cases.push_back({"many entries, truncated", h, "", "not valid JSON"});
  }
  {  // long names sharing a 2000-byte prefix ("duplicate-ish")
    const std::string prefix(2000, 'k');
    std::string h = "{";
    std::size_t n = 0;
    for (; h.size() < kTarget; ++n) {
      if (n) h += ',';
      h += zero_entry(prefix + std::to_string(n));
    }
    cases.push_back({"long similar names", h + "}", "", "", n});
    cases.push_back(
        {"long similar names then a duplicate", h + "," + zero_entry(prefix + "0") + "}", "", "duplicate name"});
  }
  {  // a huge __metadata__
    std::string h = R"({"__metadata__":{)";
    std::size_t n = 0;
    for (; h.size() < kTarget; ++n) h += fmt::format(R"({}"m{}":"v")", n ? "," : "", n);
    cases.push_back({"huge metadata", h + "}}", "", "", 0});
    cases.push_back({"huge metadata then a duplicate key", h + R"(,"m1":"v"}})", "", "duplicate key 'm1'"});
  }
  {  // one name of several MB, and an unterminated string of several MB
    const std::string big(kTarget, 'n');
    cases.push_back({"one huge name", "{" + zero_entry(big) + "}", "", "", 1});
    cases.push_back({"unterminated huge string", "{\"" + big, "", "not valid JSON"});
  }
  {  // deep nesting: refused at the first bracket too deep, whatever follows
    const std::string deep(kTarget, '[');
    cases.push_back({"deep arrays", R"({"w":{"dtype":"F32","shape":)" + deep, "", "nested deeper"});
    std::string objs;
    while (objs.size() < kTarget) objs += R"({"a":)";
    // Refused at the first key outside the schema ("a" is not a field of an entry), before any nesting.
    cases.push_back({"deep objects", "{\"w\":" + objs, "", "unknown field 'a'"});
  }
  {  // a shape array of a million dimensions, and a number of several MB
    std::string dims;
    while (dims.size() < kTarget) dims += "1,";
    cases.push_back({"million dimensions", R"({"w":{"dtype":"F32","shape":[)" + dims + R"(1],"data_offsets":[0,4]}})",
                     std::string(4, '\0'), "more than 64"});
    cases.push_back({"huge number",
                     R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,)" + std::string(kTarget, '9') + "]}}",
                     std::string(4, '\0'), "number overflow"});
  }
  {  // whitespace padding of several MB (valid: the reference writer pads with spaces)
    cases.push_back({"whitespace", "{" + zero_entry("w") + std::string(kTarget, ' ') + "}", "", "", 1});
  }

  double worst = 0.0;
  for (const auto& c : cases) {
    INFO("case '" << c.name << "', header of " << c.header.size() << " bytes");
    const std::string bytes = st_file(c.header, c.buffer);
    std::string message;
    std::size_t count = 0;
    const double spb = seconds_per_byte(c.header.size(), [&] {
      try {
        count = nn::parse_safetensors(bytes, "hostile").tensors.size();
      } catch (const Error& e) {
        message = e.what();
      }
    });
    WARN(fmt::format("{:40} {:9} bytes: {:.3f} us/byte{}", c.name, c.header.size(), spb * 1e6,
                     message.empty() ? "" : " (refused)"));
    worst = std::max(worst, spb);
    CHECK(spb < per_byte_bound());
    if (c.reason.empty()) {
      CHECK(message.empty());
      CHECK(count == c.tensors);
    } else {
      INFO("message: " << message.substr(0, 500));
      CHECK(message.find(c.reason) != std::string::npos);
      CHECK(message.size() < 1000);  // names and tokens of megabytes are not copied into the message
    }
  }
  // The deterministic half: the work of the duplicate-key checks, counted by the scanner under a
  // fixed hash key (Note [Safetensors header scanner]), is linear in the header's length whatever its
  // shape. Every other step of the scanner looks at each byte a bounded number of times.
  for (const auto& c : cases) {
    INFO("case '" << c.name << "', header of " << c.header.size() << " bytes");
    detail::SafetensorsScanCounters n;
    detail::SafetensorsScanOptions opt;
    opt.hash_key[0] = 0x0123456789abcdefull;
    opt.hash_key[1] = 0xfedcba9876543210ull;
    opt.counters = &n;
    try {
      (void)detail::scan_safetensors_header(c.header, "hostile", opt);
    } catch (const Error&) {
    }
    const auto bytes = static_cast<std::uint64_t>(c.header.size());
    CHECK(n.bytes_hashed <= bytes);     // each key hashed once
    CHECK(n.bytes_compared <= bytes);   // equal hashes are rare: a key is compared at most once
    CHECK(n.probes <= 4 * n.keys + 1);  // a table at most 3/4 full
    CHECK(n.rehashed <= 2 * n.keys);    // growth by doubling
    if (c.tensors > 1) CHECK(n.keys >= c.tensors);
  }

  // Against the time it takes to read the same bytes (Note [Safetensors header scanner]: "a header at
  // the cap is parsed or refused in about the time it takes to read it"), in this process and on this
  // machine, CPU time, the least of 5 runs of each, the runs of the three steps interleaved so that a
  // busy spell of the machine falls on all of them. The scanner alone and the whole parse (checks,
  // tensors) each have their bound (see scan_factor_bound); a quadratic parse of these 4 MB headers
  // takes thousands of times the read.
  {
    TempDir rdir("hostile_read");
    double worst_scan = 0, worst_parse = 0;
    for (const auto& c : cases) {
      INFO("case '" << c.name << "', header of " << c.header.size() << " bytes");
      const std::string bytes = st_file(c.header, c.buffer);
      const std::string path = rdir.file("h.safetensors");
      write_bytes(path, bytes);
      double read = 1e300, scan = 1e300, parse = 1e300;
      for (int r = 0; r < 5; ++r) {
        std::size_t got = 0;
        read = std::min(read, min_cpu_seconds(1, [&] { got = read_into_fresh_memory(path); }));
        REQUIRE(got == bytes.size());
        scan = std::min(scan, min_cpu_seconds(1, [&] {
                          try {
                            (void)detail::scan_safetensors_header(c.header, "hostile");
                          } catch (const Error&) {
                          }
                        }));
        parse = std::min(parse, min_cpu_seconds(1, [&] {
                           try {
                             (void)nn::parse_safetensors(bytes, "hostile");
                           } catch (const Error&) {
                           }
                         }));
      }
      // A read shorter than the clock's resolution would make any ratio meaningless.
      read = std::max(read, 1e-5);
      WARN(fmt::format("{:40} read {:6.2f} ms, scan {:7.2f} ms ({:4.1f}x), parse {:7.2f} ms ({:4.1f}x)", c.name,
                       read * 1e3, scan * 1e3, scan / read, parse * 1e3, parse / read));
      worst_scan = std::max(worst_scan, scan / read);
      worst_parse = std::max(worst_parse, parse / read);
      CHECK(scan / read < scan_factor_bound());
      CHECK(parse / read < parse_factor_bound());
    }
    WARN(fmt::format("worst scan / read {:.1f}x (bound {:.0f}x), parse / read {:.1f}x (bound {:.0f}x)", worst_scan,
                     scan_factor_bound(), worst_parse, parse_factor_bound()));
  }

  // The same through a file (read_regular_file + parse), once.
  TempDir dir("hostile_time");
  const std::string p = dir.file("big.safetensors");
  write_bytes(p, st_file(cases[0].header, ""));
  const double file_spb = seconds_per_byte(cases[0].header.size(),
                                           [&] { CHECK(nn::load_safetensors(p).tensors.size() == cases[0].tensors); });
  CHECK(file_spb < per_byte_bound());
  WARN(fmt::format("worst {:.3f} us/byte in memory, {:.3f} us/byte through a file; bound {:.1f}", worst * 1e6,
                   file_spb * 1e6, per_byte_bound() * 1e6));
}

TEST_CASE("saving works for file names up to NAME_MAX (temporary names stay within it)", "[serialize][hostile]") {
  TempDir dir("names");
  Net net(3);
  for (std::size_t len : {std::size_t{1}, std::size_t{200}, std::size_t{230}, std::size_t{254}, std::size_t{255}}) {
    INFO("name of " << len << " bytes");
    const std::string name = std::string(len - 1, 'n') + "s";
    const std::string p = dir.file(name);
    nn::save(net, p);
    nn::save(net, p);  // overwrite
    Net other(4);
    (void)nn::load(other, p);
    require_state_equal(other, clone_state(net));
    save_npy(p, Tensor::of({1, 2}));
    CHECK(load_npy(p).to_vector() == std::vector<double>{1, 2});
    CHECK(dir.entries() == std::vector<std::string>{name});  // no temporary left behind
    fs::remove(p);
  }
  // One byte over NAME_MAX: refused with the OS reason; nothing is created.
  const std::string too_long = dir.file(std::string(256, 'n'));
  require_error([&] { nn::save(net, too_long); }, {"save_safetensors", "File name too long"});
  require_error([&] { save_npy(too_long, Tensor::of({1})); }, {"save_npy", "File name too long"});
  // A name that is not a file name.
  require_error([&] { nn::save(net, dir.path.string() + "/"); }, {"save_safetensors", "not a file name"});
  require_error([&] { nn::save(net, dir.file("..")); }, {"save_safetensors", "not a file name"});
  // Into a missing folder: the OS reason.
  require_error([&] { nn::save(net, dir.file("no/such/dir/m.safetensors")); },
                {"save_safetensors", "No such file or directory"});
  CHECK(dir.entries().empty());
}

TEST_CASE("saving refuses to replace a FIFO, a device or a folder, and replaces a symbolic link",
          "[serialize][hostile]") {
  TempDir dir("save_targets");
  Net net(5);
  const std::string fifo = dir.file("fifo.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The target is checked with lstat, never opened: no blocking on a FIFO without a reader.
  require_error([&] { nn::save(net, fifo); }, {"save_safetensors", fifo, "not a regular file", "FIFO"});
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  // As root a rename over /dev/null would replace the device with a file: refused.
  require_error([&] { nn::save(net, "/dev/null"); }, {"save_safetensors", "/dev/null", "character device"});
  require_error([&] { save_npy("/dev/null", Tensor::of({1})); }, {"save_npy", "/dev/null", "character device"});
  REQUIRE(::lstat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  require_error([&] { nn::save(net, dir.path.string()); }, {"save_safetensors", "directory"});
  // A symbolic link is replaced by the new file (the file it pointed to is untouched).
  const std::string target = dir.file("target.safetensors"), link = dir.file("link.safetensors");
  write_bytes(target, "old");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  nn::save(net, link);
  CHECK(read_bytes(target) == "old");
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  Net other(6);
  (void)nn::load(other, link);
  require_state_equal(other, clone_state(net));
  CHECK(dir.entries() == std::vector<std::string>{"fifo.safetensors", "link.safetensors", "target.safetensors"});
}

TEST_CASE("concurrent saves never collide on temporary files", "[serialize][hostile]") {
  TempDir dir("concurrent");
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::string> errors(kThreads);
  // Each thread saves its own file and the shared one; the shared one ends as one complete version.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRounds; ++r) {
          const nn::NamedTensors state = {{"v", Tensor::full({16}, t * 1000 + r, kFloat64)}};
          nn::save_safetensors(dir.file(fmt::format("own{}.safetensors", t)), state);
          nn::save_safetensors(dir.file("shared.safetensors"), state);
          (void)nn::load_safetensors(dir.file("shared.safetensors"));
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) CHECK(e.empty());
  std::vector<std::string> expected = {"own0.safetensors", "own1.safetensors", "own2.safetensors", "own3.safetensors",
                                       "shared.safetensors"};
  CHECK(dir.entries() == expected);
  for (int t = 0; t < kThreads; ++t)
    CHECK(nn::load_safetensors(dir.file(fmt::format("own{}.safetensors", t))).at("v").to_vector() ==
          std::vector<double>(16, t * 1000 + kRounds - 1));
  const auto shared = nn::load_safetensors(dir.file("shared.safetensors")).at("v").to_vector();
  CHECK(std::fmod(shared[0], 1000.0) == kRounds - 1);  // some thread's last version, whole
  CHECK(shared == std::vector<double>(16, shared[0]));
}

TEST_CASE("safetensors: integer and bool tensors round-trip, and a BOOL byte other than 0 or 1 is refused",
          "[serialize][safetensors]") {
  const Tensor i64 = Tensor::from_vector({-3, 0, 1099511627776.0}, {3}, kFloat64).to(kInt64);  // 2^40
  const Tensor i32 = Tensor::from_vector({-2, 5}, {2}).to(kInt32);
  const Tensor u8 = Tensor::from_vector({0, 255}, {2}).to(kUInt8);
  const Tensor b = Tensor::from_vector({1, 0, 1}, {3}).to(kBool);
  const std::string bytes = nn::to_safetensors_bytes({{"i64", i64}, {"i32", i32}, {"u8", u8}, {"b", b}});
  const nn::SafetensorsFile f = nn::parse_safetensors(bytes, "ints");
  for (const auto& [name, t] : nn::NamedTensors{{"i64", i64}, {"i32", i32}, {"u8", u8}, {"b", b}}) {
    INFO(name);
    CHECK(bit_equal(f.at(name), t));
  }
  // the bool tensor's data is the last 3 bytes of the file: make one of them 2
  std::string bad = bytes;
  bad[bad.size() - 2] = 2;
  test::require_error([&] { nn::parse_safetensors(bad, "bad_bool"); }, {"bad_bool", "BOOL", "byte 2"});
}
