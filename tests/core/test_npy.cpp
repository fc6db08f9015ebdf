// Tests for core/npy.*: round trips, interoperability with NumPy (through Debian's
// /usr/bin/python3 and tests/core/npy_roundtrip.py), refusal of malformed files, atomic saves.
#include <unistd.h>

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
  };
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& c : cases) {
    save_npy(dir.file(c.name + ".npy"), c.t);
    manifest.push_back({{"name", c.name},
                        {"dtype", c.t.dtype() == kFloat32 ? "<f4" : "<f8"},
                        {"shape", c.t.shape()},
                        {"values", c.t.to_vector()}});
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
    dispatch(c.t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (std::int64_t i = 0; i < c.t.numel(); ++i) want.data<T>()[i] = c.t.data<T>()[i] * T(2) + T(1);
    });
    CHECK(bit_equal(mod, want));
  }

  // Arrays numpy wrote: integers and bool load as float64, version 2.0 headers, 0-d, empty.
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
    if (name == "np_int64" || name == "np_bool" || name == "np_int32" || name == "np_uint8")
      CHECK(t.dtype() == kFloat64);
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
