// Tests for core/npy.*: round trips, interoperability with NumPy (through Debian's
// /usr/bin/python3 and tests/core/npy_roundtrip.py), refusal of malformed files, atomic saves.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support.hpp"

using namespace xgrad;
using xgrad::test::read_bytes;
using xgrad::test::require_error;
using xgrad::test::write_bytes;
using TempDir = xgrad::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A version 1.0 .npy file with the given header dict (padded as numpy does) and data bytes.
std::string npy_v1(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
  h.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  return out + h + data;
}

// Expects load_npy(path) to throw an xgrad::Error naming the file and containing `reason`.
void require_load_error(const std::string& path, const std::string& reason) {
  INFO("file " << path);
  require_error([&] { (void)load_npy(path); }, {"load_npy", path, reason});
}
}  // namespace

TEST_CASE("save_npy / load_npy round trip: float32, float64, 0-d, 1-d, 3-d, empty", "[npy]") {
  TempDir dir("rt");
  Generator gen(3);
  int k = 0;
  for (Dtype dt : {kFloat32, kFloat64})
    for (const Shape& s : {Shape{}, Shape{1}, Shape{7}, Shape{2, 3, 4}, Shape{0}, Shape{2, 0, 3}}) {
      INFO(dtype_name(dt) << " " << shape_str(s));
      const Tensor t = Tensor::randn(s, gen, dt);
      const std::string path = dir.file(fmt::format("t{}.npy", k++));
      save_npy(path, t);
      const Tensor back = load_npy(path);
      CHECK(bit_equal(back, t));
      // The in-memory variant produces the same bytes as the file.
      const std::string bytes = read_bytes(path);
      CHECK(bytes == to_npy_bytes(t));
      CHECK(bit_equal(from_npy_bytes(bytes), t));
      // numpy's layout: the data starts on a 64-byte boundary after a version 1.0 header.
      CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
      CHECK((bytes.size() - t.nbytes()) % 64 == 0);
    }
  // Special values survive bit for bit.
  const double inf = std::numeric_limits<double>::infinity();
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor sp = Tensor::of({std::nan(""), inf, -inf, -0.0, 5e-324, 1e-45}, dt);
    save_npy(dir.file("special.npy"), sp);
    CHECK(bit_equal(load_npy(dir.file("special.npy")), sp));
  }
  // Other writers' headers: keys in another order, double quotes, no trailing comma, extra spaces.
  const std::string data(16, '\0');
  const Tensor other =
      from_npy_bytes(npy_v1("{\"shape\": ( 2 , ), \"descr\": \"<f8\", \"fortran_order\": False}", data));
  CHECK(other.shape() == Shape{2});
  CHECK(other.to_vector() == std::vector<double>{0, 0});
  // Saving a tensor that requires grad stores its values.
  Tensor w = Tensor::of({1, 2}).set_requires_grad();
  save_npy(dir.file("w.npy"), w);
  CHECK(bit_equal(load_npy(dir.file("w.npy")), w.detach()));
  require_error([&] { save_npy(dir.file("u.npy"), Tensor()); }, {"save_npy", "undefined"});
}

TEST_CASE("npy interoperability with NumPy", "[npy][numpy]") {
  TempDir dir("numpy");
  Generator gen(8);
  struct Case {
    std::string name;
    Tensor t;
  };
  std::vector<Case> cases = {
      {"f32_0d", Tensor::scalar(-0.375)},
      {"f64_0d", Tensor::scalar(1.0 / 3.0, kFloat64)},
      {"f32_1d", Tensor::randn({9}, gen, kFloat32)},
      {"f64_1d", Tensor::randn({5}, gen, kFloat64)},
      {"f32_3d", Tensor::randn({2, 3, 4}, gen, kFloat32)},
      {"f64_3d", Tensor::randn({3, 1, 2}, gen, kFloat64)},
      {"f64_empty", Tensor::zeros({0, 2}, kFloat64)},
      {"i64_2d", Tensor::of({{-3, 0, 7}, {1099511627776, -4503599627370496, 5}}, kInt64)},
      {"i32_1d", Tensor::of({-6, 0, 2147483647}, kInt32)},
      {"u8_1d", Tensor::of({0, 1, 200, 255}, kUInt8)},
      {"bool_2d", Tensor::of({{1, 0}, {0, 1}}, kBool)},
      {"i64_0d", Tensor::scalar(-42, kInt64)},
  };
  const auto descr = [](Dtype d) {
    return d == kFloat32   ? "<f4"
           : d == kFloat64 ? "<f8"
           : d == kInt64   ? "<i8"
           : d == kInt32   ? "<i4"
           : d == kUInt8   ? "|u1"
                           : "|b1";
  };
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& c : cases) {
    save_npy(dir.file(c.name + ".npy"), c.t);
    manifest.push_back(
        {{"name", c.name}, {"dtype", descr(c.t.dtype())}, {"shape", c.t.shape()}, {"values", c.t.to_vector()}});
  }
  {
    std::ofstream f(dir.file("manifest.json"));
    f << manifest.dump();
  }
  const std::string cmd = "/usr/bin/python3 " + std::string(XGRAD_SOURCE_DIR) +
                          "/tests/core/npy_roundtrip.py roundtrip " + dir.path.string() + " > " +
                          dir.file("python.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    FAIL("numpy script failed (" << cmd << "):\n" << read_bytes(dir.file("python.log")));
  }

  // numpy checked our files (dtype, shape, exact values) and wrote x * 2 + 1 in the same dtype.
  for (const auto& c : cases) {
    INFO(c.name);
    const Tensor mod = load_npy(dir.file(c.name + "_mod.npy"));
    REQUIRE(mod.dtype() == c.t.dtype());
    REQUIRE(mod.shape() == c.t.shape());
    Tensor want = Tensor::empty(c.t.shape(), c.t.dtype());
    dispatch_all(c.t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      // In T's own arithmetic, as numpy: uint8 and int32 wrap around, bool gives True.
      for (std::int64_t i = 0; i < c.t.numel(); ++i) {
        if constexpr (std::is_floating_point_v<T>)
          want.data<T>()[i] = c.t.data<T>()[i] * T(2) + T(1);
        else
          want.data<T>()[i] = static_cast<T>(static_cast<std::uint64_t>(c.t.data<T>()[i]) * 2u + 1u);
      }
    });
    CHECK(bit_equal(mod, want));
  }

  // Arrays numpy wrote: int64, int32, uint8 and bool load in their dtype, version 2.0 headers, 0-d, empty.
  nlohmann::json expected;
  {
    std::ifstream f(dir.file("numpy_expected.json"));
    f >> expected;
  }
  for (const auto& [name, e] : expected.items()) {
    INFO(name);
    const Tensor t = load_npy(dir.file(name + ".npy"));
    CHECK(t.shape() == e["shape"].get<Shape>());
    CHECK(t.to_vector() == e["values"].get<std::vector<double>>());
    if (name == "np_int64") CHECK(t.dtype() == kInt64);
    if (name == "np_int32") CHECK(t.dtype() == kInt32);
    if (name == "np_uint8") CHECK(t.dtype() == kUInt8);
    if (name == "np_bool") CHECK(t.dtype() == kBool);
    if (name == "np_int16") CHECK(t.dtype() == kFloat64);
  }
  CHECK(load_npy(dir.file("np_v2.npy")).dtype() == kFloat32);
  CHECK(load_npy(dir.file("np_empty.npy")).dtype() == kFloat32);

  // Layouts numpy can write but xgrad refuses, each with the reason.
  require_load_error(dir.file("bad_fortran.npy"), "Fortran");
  require_load_error(dir.file("bad_bigendian.npy"), "big-endian");
  require_load_error(dir.file("bad_object.npy"), "'|O'");
  require_load_error(dir.file("bad_complex.npy"), "'<c16'");
}

TEST_CASE("malformed .npy files throw an Error naming the file and the reason", "[npy]") {
  TempDir dir("bad");
  const std::string good = to_npy_bytes(Tensor::of({1, 2, 3}, kFloat64));
  const std::string data8(24, '\0');
  struct Case {
    std::string name, bytes, reason;
  };
  std::string long_header = npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", data8);
  long_header[8] = '\xff';  // header length 0xffXX runs past the end
  long_header[9] = '\x7f';
  std::string v2_truncated("\x93NUMPY\x02\x00\x10\x00\x00", 11);
  std::string v2_long("\x93NUMPY\x02\x00\xff\xff\xff\x0f", 12);
  std::string bad_magic = good;
  bad_magic[5] = 'X';
  std::string version9 = good;
  version9[6] = '\x09';
  const std::vector<Case> cases = {
      {"empty", "", "magic"},
      {"bad_magic", bad_magic, "magic"},
      {"text", "hello world, this is not numpy", "magic"},
      {"truncated_data", good.substr(0, good.size() - 5), "needs 24 data bytes but the file has 19"},
      {"extra_data", good + "xyz", "needs 24 data bytes but the file has 27"},
      {"truncated_header", good.substr(0, 40), "runs past the end"},
      {"long_header", long_header, "runs past the end"},
      {"v2_truncated", v2_truncated, "truncated header length"},
      {"v2_long", v2_long, "runs past the end"},
      {"version_9", version9, "unsupported format version 9"},
      {"fortran", npy_v1("{'descr': '<f8', 'fortran_order': True, 'shape': (3,), }", data8), "Fortran"},
      {"fortran_garbage", npy_v1("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (3,), }", data8), "fortran_order"},
      {"bigendian", npy_v1("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", data8), "big-endian"},
      {"object", npy_v1("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", data8), "unsupported dtype"},
      {"float16", npy_v1("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", data8), "'<f2'"},
      {"descr_junk", npy_v1("{'descr': '<f8junk', 'fortran_order': False, 'shape': (3,), }", data8), "'<f8junk'"},
      {"descr_long_int", npy_v1("{'descr': '<i16', 'fortran_order': False, 'shape': (3,), }", data8), "'<i16'"},
      {"descr_not_string", npy_v1("{'descr': 8, 'fortran_order': False, 'shape': (3,), }", data8), "descr"},
      {"no_descr", npy_v1("{'fortran_order': False, 'shape': (3,), }", data8), "'descr'"},
      {"no_shape", npy_v1("{'descr': '<f8', 'fortran_order': False, }", data8), "'shape'"},
      {"shape_garbage", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3x,), }", data8), "shape"},
      {"shape_negative", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,), }", data8), "shape"},
      {"shape_not_tuple", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': [3], }", data8), "tuple"},
      {"shape_unterminated", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3, ", ""), "shape"},
      {"shape_huge",
       npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999, 99999999999999), }", data8), "shape"},
      {"shape_too_many_digits",
       npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", data8), "shape"},
      // 5581 * 826318942560005 = 2^62 + 1 elements: times 8 bytes wraps around to 8 bytes, the
      // size of the data, so a byte count computed without an overflow check would match the file.
      {"shape_bytes_wrap_f8",
       npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (5581, 826318942560005), }", std::string(8, '\0')),
       "too large"},
      {"shape_bytes_wrap_i8",
       npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (5581, 826318942560005), }", std::string(8, '\0')),
       "too large"},
  };
  for (const auto& c : cases) {
    INFO("case " << c.name);
    const std::string path = dir.file(c.name + ".npy");
    write_bytes(path, c.bytes);
    require_load_error(path, c.reason);
    // The in-memory parser names the given source.
    require_error([&] { (void)from_npy_bytes(c.bytes, "buffer:" + c.name); }, {"buffer:" + c.name});
  }
  require_load_error(dir.file("does_not_exist.npy"), "cannot open");
  require_load_error(dir.path.string(), "");  // a directory is not a file
}

TEST_CASE("save_npy is atomic", "[npy]") {
  TempDir dir("atomic");
  const std::string path = dir.file("a.npy");
  save_npy(path, Tensor::of({1, 2, 3}));
  save_npy(path, Tensor::of({4, 5}, kFloat64));               // overwrite
  CHECK(dir.entries() == std::vector<std::string>{"a.npy"});  // no temporary left behind
  CHECK(load_npy(path).to_vector() == std::vector<double>{4, 5});

  // Into a missing folder: an Error naming the path, and nothing is created.
  const std::string missing = dir.file("no/such/dir/b.npy");
  require_error([&] { save_npy(missing, Tensor::of({1})); }, {"no/such/dir/b.npy"});
  CHECK_FALSE(fs::exists(dir.path / "no"));
  CHECK(dir.entries() == std::vector<std::string>{"a.npy"});

  // Onto a path that is a directory: the rename fails, the temporary is removed, the folder stays.
  fs::create_directories(dir.path / "sub");
  fs::create_directories(dir.path / "sub" / "x.npy" / "inner");
  require_error([&] { save_npy(dir.file("sub/x.npy"), Tensor::of({1})); }, {"x.npy"});
  std::vector<std::string> sub;
  for (const auto& e : fs::directory_iterator(dir.path / "sub")) sub.push_back(e.path().filename().string());
  CHECK(sub == std::vector<std::string>{"x.npy"});
  CHECK(fs::is_directory(dir.path / "sub" / "x.npy"));
}

// ---- hostile files (Note [Hostile files] in core/file_io.hpp) ---------------------------------------

namespace {
// A version 2.0 .npy file (4-byte header length) with the given header text, unpadded.
std::string npy_v2(const std::string& header, const std::string& data) {
  std::string out("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}
}  // namespace

TEST_CASE("load_npy refuses non-regular files without blocking, with the OS reason", "[npy][hostile]") {
  TempDir dir("npy_hostile_paths");
  xgrad::test::require_hostile_paths_refused(dir.path.string(), "load_npy",
                                             [](const std::string& p) { (void)load_npy(p); });
}

TEST_CASE(".npy headers are parsed as the dict literal numpy writes: keys once, shapes bounded", "[npy][hostile]") {
  const std::string d8(24, '\0');
  auto expect = [&](const std::string& dict, const std::string& reason) {
    INFO("header " << dict.substr(0, 200));
    require_error([&] { (void)from_npy_bytes(npy_v1(dict, d8), "hdr"); }, {"load_npy", "hdr", reason});
  };
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'descr': '<f4', }", "duplicate key 'descr'");
  expect("{'descr': '<f8', 'shape': (3,), 'fortran_order': False, 'shape': (6,), }", "duplicate key 'shape'");
  expect("{'descr': '<f8', 'fortran_order': False, 'fortran_order': True, 'shape': (3,)}",
         "duplicate key 'fortran_order'");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1, }", "unknown key 'extra'");
  expect("{'descr': '<f8', 'fortran_order': False}", "no 'shape' key");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3)}", "parenthesised integer");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3,,)}", "bad dimension");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (03,)}", "leading zero");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)} junk", "unexpected text after the header dict");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)", "expected ',' or '}'");
  expect("{'descr': '<f\\x38', 'fortran_order': False, 'shape': (3,)}", "escape");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", "does not fit in 64 bits");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", "overflows");
  // As in numpy, the product of the non-zero dimensions must fit even when another one is 0.
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (3037000500, 3037000500, 0, 5)}", "overflows");
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 0)}",
         "needs 0 data bytes but the file has 24");
  std::string dims = "(";
  for (int i = 0; i < 65; ++i) dims += "1, ";
  expect("{'descr': '<f8', 'fortran_order': False, 'shape': " + dims + ")}", "more than 64 dimensions");
  // Version 1.1 does not exist (numpy reads only 1.0, 2.0 and 3.0).
  std::string v11 = to_npy_bytes(Tensor::of({1, 2, 3}, kFloat64));
  v11[7] = '\x01';
  require_error([&] { (void)from_npy_bytes(v11, "v11"); }, {"unsupported format version 1.1"});

  // What numpy accepts: any key order, double quotes, whitespace and line breaks between tokens,
  // no trailing comma, 64 dimensions, a 0-d shape.
  auto load = [&](const std::string& dict, const std::string& data) { return from_npy_bytes(npy_v1(dict, data)); };
  CHECK(load("{\"shape\":(3,),\"fortran_order\":False,\"descr\":\"<f8\"}", d8).shape() == Shape{3});
  CHECK(load("{ 'descr' : '<f8' ,\n 'fortran_order' :\tFalse , 'shape' : ( 1 , 3 , ) }", d8).shape() == Shape{1, 3});
  CHECK(load("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", std::string(8, '\0')).dim() == 0);
  std::string dims64 = "(";
  for (int i = 0; i < 64; ++i) dims64 += "1, ";
  CHECK(load("{'descr': '<f8', 'fortran_order': False, 'shape': " + dims64 + ")}", std::string(8, '\0')).dim() == 64);
}

TEST_CASE(".npy header parsing is linear: multi-MB hostile headers are parsed or refused in bounded time per byte",
          "[npy][hostile]") {
  // The parser is one pass over the header; version 2.0 and 3.0 headers may be up to 4 GB long.
  // The bound is orders of magnitude above what release builds take here (the test prints it;
  // bench/results/build_and_run_times.md): a wide margin for a loaded machine and for debug /
  // sanitizer builds.
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  const double bound = 1e-6;
#else
  const double bound = 20e-6;
#endif
  constexpr std::size_t kBig = 4'000'000;
  const std::string d8(24, '\0');
  struct Case {
    std::string name, header, reason;  // empty reason: must load
  };
  const std::vector<Case> cases = {
      {"whitespace", "{'descr': '<f8', 'fortran_order': False, 'shape': (3,)" + std::string(kBig, ' ') + "}", ""},
      {"huge descr", "{'descr': '" + std::string(kBig, 'f') + "', 'fortran_order': False, 'shape': (3,)}",
       "unsupported dtype"},
      {"huge unknown key", "{'" + std::string(kBig, 'k') + "': 1}", "unknown key"},
      {"unterminated string", "{'descr': '" + std::string(kBig, 'f'), "unterminated"},
      {"huge dimension", "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::string(kBig, '9') + ",)}",
       "does not fit in 64 bits"},
      {"many commas", "{'descr': '<f8', 'fortran_order': False, 'shape': (1" + std::string(kBig, ',') + ")}",
       "bad dimension"},
      {"many dimensions",
       "{'descr': '<f8', 'fortran_order': False, 'shape': (" +
           [&] {
             std::string s;
             while (s.size() < kBig) s += "1,";
             return s;
           }() +
           ")}",
       "more than 64 dimensions"},
      {"nested brackets", "{'descr': '<f8', 'fortran_order': False, 'shape': " + std::string(kBig, '(') + "}",
       "bad dimension"},
  };
  for (const auto& c : cases) {
    INFO("case '" << c.name << "', header of " << c.header.size() << " bytes");
    const std::string bytes = npy_v2(c.header, d8);
    std::string message;
    const auto t0 = std::chrono::steady_clock::now();
    std::int64_t numel = -1;
    try {
      numel = from_npy_bytes(bytes, "hostile").numel();
    } catch (const Error& e) {
      message = e.what();
    }
    const double spb = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                       static_cast<double>(c.header.size());
    WARN(fmt::format("{:22} {:8} bytes: {:.4f} us/byte", c.name, c.header.size(), spb * 1e6));
    CHECK(spb < bound);
    INFO("message: " << message.substr(0, 300));
    if (c.reason.empty()) {
      CHECK(message.empty());
      CHECK(numel == 3);
    } else {
      CHECK(message.find(c.reason) != std::string::npos);
      CHECK(message.size() < 1000);  // megabytes of header are not copied into the message
    }
  }
}

TEST_CASE("save_npy writes names up to NAME_MAX and refuses longer ones with the OS reason", "[npy][hostile]") {
  TempDir dir("npy_names");
  const std::string name(255, 'a');
  save_npy(dir.file(name), Tensor::of({7, 8}));
  save_npy(dir.file(name), Tensor::of({9}));
  CHECK(load_npy(dir.file(name)).to_vector() == std::vector<double>{9});
  CHECK(dir.entries() == std::vector<std::string>{name});
  require_error([&] { save_npy(dir.file(name + "b"), Tensor::of({1})); }, {"save_npy", "File name too long"});
  require_error([&] { save_npy(dir.file("missing/x.npy"), Tensor::of({1})); },
                {"save_npy", "missing/x.npy", "No such file or directory"});
  CHECK(dir.entries() == std::vector<std::string>{name});
}

TEST_CASE("a file too large for memory is an xgrad::Error, not std::bad_alloc", "[npy][hostile]") {
  // An 8 TB sparse file (no disk used): refused before the buffer is asked for, as more than the
  // machine's memory and swap (also under sanitizers, whose allocators would abort instead).
  TempDir dir("npy_sparse");
  const std::string p = dir.file("sparse.npy");
  write_bytes(p, to_npy_bytes(Tensor::of({1, 2, 3})));
  if (::truncate(p.c_str(), static_cast<off_t>(8) << 40) != 0) {
    WARN("skipped: cannot make an 8 TB sparse file here");
    return;
  }
  require_error([&] { (void)load_npy(p); }, {"load_npy", "file size", "8796093022209 bytes", "memory and swap"});
}
