// Tests for nn/serialize.*: safetensors round trips (tensors, metadata, modules), interoperability
// with an independent NumPy reader/writer (tests/nn/safetensors_check.py), strict and non-strict
// module loading, refusal of malformed files with a precise reason, and atomicity (a failed load
// leaves the module untouched, a failed save leaves the previous file and no temporary file).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support.hpp"
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
  CHECK(r.unexpected_keys == std::vector<std::string>{"extra.empty", "extra.matrix", "extra.scalar"});
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
    expect(one(R"({"dtype": "I64", "shape": [1], "data_offsets": [0, 8]})"), "I64 not supported");
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
  SECTION("the rename fails (the target is a non-empty folder)") {
    const std::string target = dir.file("folder.safetensors");
    fs::create_directories(target + "/keep");
    require_error([&] { nn::save(net, target); }, {"save_safetensors", "renaming", "folder.safetensors"});
    CHECK(fs::is_directory(target + "/keep"));
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
