// Tests for core/tensor.*, core/random.* and core/xtensor_interop.hpp: creation functions, dtypes,
// 0-d scalars, seeded random numbers, item(), to(dtype), printing, in-place ops and bad shapes.
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <sstream>
#include <thread>
#include <xtensor/xtensor.hpp>

#include "support.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/xtensor_interop.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {
std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

std::uint32_t version_of(const Tensor& t) { return t.impl()->storage->version; }
}  // namespace

// ---- creation ---------------------------------------------------------------------------------

TEST_CASE("zeros, ones, full, scalar: values, shapes, dtypes", "[tensor]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    for (const Shape& s : {Shape{}, Shape{1}, Shape{4}, Shape{2, 3}, Shape{2, 1, 3, 2}, Shape{0}, Shape{3, 0, 2}}) {
      INFO(dtype_name(dt) << " " << shape_str(s));
      const Tensor z = Tensor::zeros(s, dt);
      const Tensor o = Tensor::ones(s, dt);
      const Tensor f = Tensor::full(s, -2.75, dt);
      for (const Tensor* t : {&z, &o, &f}) {
        CHECK(t->shape() == s);
        CHECK(t->dim() == static_cast<std::int64_t>(s.size()));
        CHECK(t->numel() == shape_numel(s));
        CHECK(t->dtype() == dt);
        CHECK(t->nbytes() == static_cast<std::size_t>(shape_numel(s)) * dtype_size(dt));
        CHECK(t->is_leaf());
        CHECK_FALSE(t->requires_grad());
      }
      for (double v : z.to_vector()) CHECK(v == 0.0);
      for (double v : o.to_vector()) CHECK(v == 1.0);
      for (double v : f.to_vector()) CHECK(v == -2.75);
    }
  }
  // 0-d scalars have no dimensions and one element.
  const Tensor s = Tensor::scalar(3.5, kFloat64);
  CHECK(s.dim() == 0);
  CHECK(s.shape().empty());
  CHECK(s.numel() == 1);
  CHECK(s.item() == 3.5);
  CHECK(Tensor::scalar(0.1).dtype() == kFloat32);
  CHECK(Tensor::scalar(0.1).item() == static_cast<double>(0.1f));
  // full converts the value to the dtype.
  CHECK(Tensor::full({2}, 0.1, kFloat32).to_vector()[1] == static_cast<double>(0.1f));
  CHECK(Tensor::full({2}, 0.1, kFloat64).to_vector()[1] == 0.1);
}

TEST_CASE("from_vector, from_data and Tensor::of", "[tensor]") {
  const Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.data<double>()[4] == 5.0);  // row-major: (1, 1)
  const Tensor a32 = Tensor::from_vector({0.1, 0.2}, {2}, kFloat32);
  CHECK(a32.data<float>()[0] == 0.1f);
  CHECK(Tensor::from_vector({7}, {}, kFloat64).item() == 7.0);
  require_error([] { Tensor::from_vector({1, 2, 3}, {2, 2}); }, {"from_vector", "3 values", "(2, 2)"});

  const std::vector<float> fv{1.5f, -2.5f, 3.25f};
  const Tensor f = Tensor::from_data<float>(fv, {3, 1});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.shape() == Shape{3, 1});
  CHECK(f.to_vector() == std::vector<double>{1.5, -2.5, 3.25});
  const std::vector<double> dv{1, 2};
  CHECK(Tensor::from_data<double>(dv, {2}).dtype() == kFloat64);
  require_error([&] { Tensor::from_data<double>(dv, {3}); }, {"from_data", "(3,)"});

  const Tensor v = Tensor::of({1, 2, 3});
  CHECK(v.shape() == Shape{3});
  CHECK(v.dtype() == kFloat32);
  CHECK(v.to_vector() == std::vector<double>{1, 2, 3});
  const Tensor m = Tensor::of({{1, 2}, {3, 4}, {5, 6}}, kFloat64);
  CHECK(m.shape() == Shape{3, 2});
  CHECK(m.dtype() == kFloat64);
  CHECK(m.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  require_error([] { Tensor::of({{1, 2}, {3}}); }, {"Tensor::of", "ragged"});
}

TEST_CASE("from_vector of integer, float and bool vectors: torch::tensor's dtypes, exact values", "[tensor]") {
  // A braced list still picks the std::vector<double> form (float32, as before).
  CHECK(Tensor::from_vector({1, 2}, {2}).dtype() == kFloat32);
  CHECK(Tensor::from_vector({1.0, 2.0}, {2}).dtype() == kFloat32);

  const std::vector<std::int64_t> big{(std::int64_t{1} << 53) + 1, -3, 0};  // not exact as a double
  const Tensor i = Tensor::from_vector(big, {3});
  CHECK(i.dtype() == kInt64);
  CHECK(i.shape() == Shape{3});
  CHECK(i.data<std::int64_t>()[0] == (std::int64_t{1} << 53) + 1);
  CHECK(i.data<std::int64_t>()[1] == -3);
  CHECK(Tensor::from_vector(big, {3, 1}, kFloat64).to_vector() == std::vector<double>{0x1p53, -3, 0});
  require_error([&] { Tensor::from_vector(big, {2, 2}); }, {"from_vector", "3 values", "(2, 2)"});

  const Tensor ints = Tensor::from_vector(std::vector<int>{4, -5}, {2});  // int gives int64, as torch::tensor
  CHECK(ints.dtype() == kInt64);
  CHECK(ints.to_vector() == std::vector<double>{4, -5});
  const Tensor f = Tensor::from_vector(std::vector<float>{0.1f, 2.5f}, {1, 2});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.data<float>()[0] == 0.1f);
  CHECK(Tensor::from_vector(std::vector<std::uint8_t>{255, 1}, {2}).dtype() == kUInt8);
  const Tensor b = Tensor::from_vector(std::vector<bool>{true, false, true}, {3});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector() == std::vector<double>{1, 0, 1});
  CHECK(Tensor::from_vector(std::vector<bool>{true, false}, {2}, kFloat32).to_vector() == std::vector<double>{1, 0});
  CHECK(Tensor::from_vector(std::vector<std::int64_t>{}, {0, 3}).shape() == Shape{0, 3});
}

TEST_CASE("arange: counts and values like numpy.arange", "[tensor]") {
  struct Case {
    double start, stop, step;
    std::int64_t count;  // what numpy.arange gives: ceil((stop - start) / step), at least 0
  };
  const Case cases[] = {{0, 10, 1, 10}, {0, 1, 0.1, 10}, {-1, 1, 0.25, 8}, {5, 0, -1, 5},     {0, 10, 3, 4},
                        {1, 1, 1, 0},   {1, 0, 1, 0},    {0, 0.5, 1, 1},   {2.5, -1, -0.5, 7}};
  for (const auto& c : cases)
    for (Dtype dt : {kFloat32, kFloat64}) {
      INFO("arange(" << c.start << ", " << c.stop << ", " << c.step << ") " << dtype_name(dt));
      const Tensor t = Tensor::arange(c.start, c.stop, c.step, dt);
      REQUIRE(t.shape() == Shape{c.count});
      CHECK(t.dtype() == dt);
      const auto v = t.to_vector();
      for (std::int64_t i = 0; i < c.count; ++i) {
        const double want = c.start + static_cast<double>(i) * c.step;
        CHECK(v[static_cast<std::size_t>(i)] ==
              (dt == kFloat32 ? static_cast<double>(static_cast<float>(want)) : want));
        // every value lies in [start, stop) in the step's direction
        if (c.step > 0) CHECK(v[static_cast<std::size_t>(i)] < c.stop);
        if (c.step < 0) CHECK(v[static_cast<std::size_t>(i)] > c.stop);
      }
    }
  CHECK(Tensor::arange(0, 4).to_vector() == std::vector<double>{0, 1, 2, 3});
  require_error([] { Tensor::arange(0, 1, 0); }, {"arange", "step"});
  require_error([] { Tensor::arange(0, std::numeric_limits<double>::infinity()); }, {"arange", "inf"});
  require_error([] { Tensor::arange(0, 1e30); }, {"arange", "too many"});
  require_error([] { Tensor::arange(-1e300, 1e300, 1e-300); }, {"arange", "too many"});
}

TEST_CASE("linspace: counts, exact end points, values agree with torch.linspace", "[tensor]") {
  CHECK(Tensor::linspace(0, 1, 0).shape() == Shape{0});
  CHECK(Tensor::linspace(3, 7, 1, kFloat64).to_vector() == std::vector<double>{3});  // torch: [start]
  CHECK(Tensor::linspace(0, 1, 5, kFloat64).to_vector() == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  require_error([] { Tensor::linspace(0, 1, -1); }, {"linspace", "-1"});

  struct Case {
    double start, stop;
    std::int64_t steps;
    Dtype dtype;
  };
  const std::vector<Case> cases = {{-1.3, 2.7, 7, kFloat64},  {-1.3, 2.7, 7, kFloat32},     {0.1, 0.7, 100, kFloat64},
                                   {0.1, 0.7, 100, kFloat32}, {-3.3, 1000, 1001, kFloat64}, {1, -2.2, 33, kFloat32},
                                   {1, -2.2, 33, kFloat64},   {0.2, 0.3, 2, kFloat64},      {5, 5, 4, kFloat32},
                                   {-0.7, 0.9, 1, kFloat64}};
  const auto dir = std::filesystem::temp_directory_path() / ("xgrad_linspace_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  nlohmann::json js = nlohmann::json::array();
  for (const auto& c : cases)
    js.push_back({{"start", c.start}, {"stop", c.stop}, {"steps", c.steps}, {"dtype", dtype_name(c.dtype)}});
  {
    std::ofstream f(dir / "linspace.json");
    f << js.dump();
  }
  const std::string cmd = "/usr/bin/python3 " + std::string(XGRAD_SOURCE_DIR) +
                          "/tests/core/npy_roundtrip.py linspace " + dir.string() + " > " +
                          (dir / "python.log").string() + " 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO("linspace(" << c.start << ", " << c.stop << ", " << c.steps << ") " << dtype_name(c.dtype));
    const Tensor ours = Tensor::linspace(c.start, c.stop, c.steps, c.dtype);
    const Tensor ref = load_npy((dir / ("linspace_" + std::to_string(i) + ".npy")).string());
    REQUIRE(ref.shape() == ours.shape());
    REQUIRE(ref.dtype() == ours.dtype());
    const auto o = ours.to_vector();
    const auto r = ref.to_vector();
    // End points are exact (torch and we evaluate from both ends).
    CHECK(o.front() == r.front());
    CHECK(o.back() == r.back());
    // Interior points: torch's vectorised kernel evaluates blocks of SIMD width from the block's
    // first point, so the last bits of interior points depend on torch's CPU dispatch; we agree
    // to a few ulps.
    INFO("ours " << ours << "\ntorch " << ref);
    const double tol = c.dtype == kFloat32 ? 4e-7 : 1e-15;
    const double scale = std::max(std::abs(c.start), std::abs(c.stop));
    for (std::size_t k = 0; k < o.size(); ++k) CHECK(std::abs(o[k] - r[k]) <= tol * scale);
  }
  std::filesystem::remove_all(dir);
}

// ---- random numbers -----------------------------------------------------------------------------

TEST_CASE("Philox4x32-10: Random123's known-answer vectors", "[random]") {
  using detail::philox4x32;
  using W = std::array<std::uint32_t, 4>;
  CHECK(philox4x32({0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // The vectorised lanes compute the same blocks (counter: the block number's halves, then 0, 0).
  std::uint32_t w[4][detail::kPhiloxLanes];
  const std::uint64_t key = 0x299f31d0a4093822ULL, base = 0xfffffff8ULL;  // lanes cross a 2^32 boundary
  detail::philox_lanes(key, base, w);
  for (int l = 0; l < detail::kPhiloxLanes; ++l) {
    const std::uint64_t c = base + static_cast<std::uint64_t>(l);
    const W want = philox4x32({static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), 0, 0},
                              {0xa4093822, 0x299f31d0});
    CHECK(W{w[0][l], w[1][l], w[2][l], w[3][l]} == want);
  }
}

TEST_CASE("Generator: scalar draws take one block each, manual_seed restarts and a copy repeats", "[random]") {
  const auto block = [](std::uint64_t seed, std::uint64_t b) {
    return detail::philox4x32({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b >> 32), 0, 0},
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  };
  Generator g(0x123456789abcdefULL);
  const auto b0 = block(0x123456789abcdefULL, 0), b1 = block(0x123456789abcdefULL, 1);
  CHECK(g.next_u64() == (std::uint64_t{b0[1]} << 32 | b0[0]));
  CHECK(g.uniform() == static_cast<double>((std::uint64_t{b1[1]} << 32 | b1[0]) >> 11) * 0x1.0p-53);
  CHECK(g.offset() == 2);
  const Generator copy = g;  // same seed and position
  Generator h = copy;
  CHECK(h.next_u64() == g.next_u64());
  g.manual_seed(0x123456789abcdefULL);
  CHECK(g.offset() == 0);
  CHECK(g.next_u64() == (std::uint64_t{b0[1]} << 32 | b0[0]));
  Generator r(3);
  for (int i = 0; i < 1000; ++i) CHECK(r.integer(7) < 7);
  CHECK(r.integer(1) == 0);
  require_error([&] { (void)r.integer(0); }, {"integer", "positive"});
}

TEST_CASE("rand, randn, uniform_, normal_: the documented layout of the Philox stream", "[random]") {
  // Note [Counter-based random numbers] (core/random.hpp): a bulk draw takes whole groups of 16
  // blocks; element 64g + 16k + l (float32 uniform) takes word k of block 16g + l, element 32g + 16h + l
  // (float64 uniform) words 2h, 2h + 1, and a block's Box-Muller pair goes to 32g + l and 32g + 16 + l.
  constexpr std::uint64_t seed = 77;
  const auto block = [](std::uint64_t b) {
    return detail::philox4x32({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b >> 32), 0, 0},
                              {static_cast<std::uint32_t>(seed), 0});
  };
  const auto u53 = [](std::uint32_t lo, std::uint32_t hi) {
    return static_cast<double>((std::uint64_t{hi} << 32 | lo) >> 11) * 0x1.0p-53;
  };
  const std::int64_t n = 150;  // two full groups of float32 values and part of a third
  Generator g(seed);
  const auto f = Tensor::rand({n}, g, kFloat32).to_vector();
  CHECK(g.offset() == 3 * 16);  // whole groups
  for (std::int64_t i = 0; i < n; ++i) {
    const auto w = block(static_cast<std::uint64_t>(16 * (i / 64) + i % 16));
    CHECK(f[static_cast<std::size_t>(i)] == static_cast<double>(w[(i % 64) / 16] >> 8) * 0x1.0p-24);
  }
  const auto d = Tensor::rand({n}, g, kFloat64).to_vector();  // starts at block 48
  for (std::int64_t i = 0; i < n; ++i) {
    const auto w = block(static_cast<std::uint64_t>(48 + 16 * (i / 32) + i % 16));
    const std::int64_t h = (i % 32) / 16;
    CHECK(d[static_cast<std::size_t>(i)] == u53(w[2 * h], w[2 * h + 1]));
  }
  // normal: u1 = 2 - (1.m1), u2 = (1.m2) - 1 with the top 52 bits of words 0-1 and 2-3 as mantissas,
  // Box-Muller with xgrad's own log and sin/cos (Note [Box-Muller without libm]): within a few ulp of
  // libm's values.
  const auto mantissa = [](std::uint32_t lo, std::uint32_t hi) {
    return std::bit_cast<double>(0x3ff0000000000000ULL | (std::uint64_t{hi} << 32 | lo) >> 12);
  };
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gn(seed);
    const auto z = Tensor::randn({n}, gn, dt).to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto w = block(static_cast<std::uint64_t>(16 * (i / 32) + i % 16));
      const double u1 = 2.0 - mantissa(w[0], w[1]), th = 2.0 * std::numbers::pi * (mantissa(w[2], w[3]) - 1.0);
      const double want = std::sqrt(-2.0 * std::log(u1)) * ((i % 32) < 16 ? std::cos(th) : std::sin(th));
      const double tol = dt == kFloat32 ? 1.2e-7 : 1e-15;  // float32: one rounding of the double value
      CHECK(std::abs(z[static_cast<std::size_t>(i)] - want) <= tol * (1.0 + std::abs(want)));
    }
  }
  // The scalar draw is the first of the same pair.
  Generator g1n(seed), g2n(seed);
  CHECK(g1n.normal() == Tensor::randn({1}, g2n, kFloat64).item());
  // uniform_ and normal_ in place are the same draws, scaled.
  Generator g1(seed), g2(seed);
  Tensor t = Tensor::empty({5, 7}, kFloat64);
  t.uniform_(-2.0, 3.0, g1);
  const auto base = Tensor::rand({5, 7}, g2, kFloat64).to_vector();
  const auto tv = t.to_vector();
  for (std::size_t i = 0; i < tv.size(); ++i) CHECK(tv[i] == Approx(-2.0 + 5.0 * base[i]).epsilon(1e-15).margin(1e-15));
  require_error([&] { t.uniform_(1.0, 0.0, g1); }, {"uniform_", "from <= to"});
  require_error([&] { t.normal_(0.0, -1.0, g1); }, {"normal_", "std"});
  Tensor ints = Tensor::zeros({3}, kInt64);
  require_error([&] { ints.uniform_(0.0, 1.0, g1); }, {"uniform_", "int64"});
  CHECK(Tensor::rand({}, g1).dim() == 0);
  CHECK(Tensor::rand({0, 3}, g1).numel() == 0);
}

TEST_CASE("random fills: the same bits at 1 and 2 threads, and from threads drawing at once", "[random]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    const auto draw = [&] {
      Generator g(5);
      return Tensors{Tensor::rand({1000003}, g, dt), Tensor::randn({300001}, g, dt)};
    };
    const Tensors one = with_num_threads(1, draw), two = with_num_threads(2, draw);
    CHECK(bit_equal(one[0], two[0]));
    CHECK(bit_equal(one[1], two[1]));
  }
  // Concurrent draws from one generator reserve disjoint blocks: 4 threads x 100 draws use 400 blocks.
  Generator shared(9);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::uint64_t>> got(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) got[static_cast<std::size_t>(t)].push_back(shared.next_u64());
    });
  for (auto& th : threads) th.join();
  CHECK(shared.offset() == 400);
  std::vector<std::uint64_t> all;
  for (const auto& v : got) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Generator serial(9);
  std::vector<std::uint64_t> want;
  for (int i = 0; i < 400; ++i) want.push_back(serial.next_u64());
  std::sort(want.begin(), want.end());
  CHECK(all == want);
}

TEST_CASE("the default generator: manual_seed repeats its draws", "[random]") {
  manual_seed(31);
  const Tensor a = Tensor::rand({4, 4}), b = Tensor::randn({3});
  manual_seed(31);
  CHECK(bit_equal(Tensor::rand({4, 4}), a));
  CHECK(bit_equal(Tensor::randn({3}), b));
  CHECK_FALSE(bit_equal(Tensor::rand({4, 4}), a));  // the stream goes on
  Generator own(31);
  CHECK(bit_equal(Tensor::rand({4, 4}, own), a));  // the default generator is a Generator like any other
}

TEST_CASE("randn and rand: statistics are sane", "[random]") {
  Generator g(2024);
  const std::int64_t n = 200000;
  const auto v = Tensor::randn({n}, g, kFloat64).to_vector();
  double mean = 0, m2 = 0, m4 = 0;
  std::int64_t within1 = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  for (double x : v) {
    m2 += (x - mean) * (x - mean);
    m4 += std::pow(x - mean, 4);
    within1 += std::abs(x) < 1.0;
  }
  const double var = m2 / static_cast<double>(n - 1);
  const double kurt = m4 / static_cast<double>(n) / (var * var);
  // Standard errors: mean 1/sqrt(n) = 0.0022, variance sqrt(2/n) = 0.0032; allow about 5 sigma.
  CHECK(std::abs(mean) < 0.011);
  CHECK(std::abs(var - 1.0) < 0.016);
  CHECK(std::abs(kurt - 3.0) < 0.06);
  CHECK(std::abs(static_cast<double>(within1) / static_cast<double>(n) - 0.682689) < 0.006);

  const auto u = Tensor::rand({n}, g, kFloat64).to_vector();
  double umean = 0, umin = 1, umax = 0;
  for (double x : u) {
    umean += x;
    umin = std::min(umin, x);
    umax = std::max(umax, x);
  }
  umean /= static_cast<double>(n);
  CHECK(std::abs(umean - 0.5) < 0.004);  // sd 0.29/sqrt(n) = 0.00065
  CHECK(umin >= 0.0);
  CHECK(umin < 1e-3);
  CHECK(umax < 1.0);
  CHECK(umax > 1 - 1e-3);
}

// ---- xtensor interop ----------------------------------------------------------------------------

TEST_CASE("from_xtensor, to_xarray, as_xtensor", "[tensor][xtensor]") {
  xt::xarray<double> a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const Tensor t = from_xtensor(a);
  CHECK(t.dtype() == kFloat64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  a(0, 0) = 100;  // a copy: the tensor is independent
  CHECK(t.to_vector()[0] == 1.0);

  xt::xtensor<float, 3> b = xt::ones<float>({2, 1, 4});
  const Tensor tb = from_xtensor(b);
  CHECK(tb.dtype() == kFloat32);
  CHECK(tb.shape() == Shape{2, 1, 4});

  // An unevaluated expression, and a column-major container, are evaluated row-major.
  const Tensor te = from_xtensor(a * 2.0 + 1.0);
  CHECK(te.to_vector() == std::vector<double>{201, 5, 7, 9, 11, 13});
  xt::xarray<double, xt::layout_type::column_major> cm = {{1.0, 2.0}, {3.0, 4.0}};
  CHECK(from_xtensor(cm).to_vector() == std::vector<double>{1, 2, 3, 4});

  // 0-d
  xt::xarray<double> s = 4.25;
  const Tensor ts = from_xtensor(s);
  CHECK(ts.dim() == 0);
  CHECK(ts.item() == 4.25);

  // to_xarray: owning copy, converting dtype.
  const Tensor f32 = Tensor::of({{0.5, 1.5}, {2.5, 3.5}});
  const xt::xarray<double> back = to_xarray<double>(f32);
  REQUIRE(back.shape().size() == 2);
  CHECK(back.shape()[0] == 2);
  CHECK(back(1, 0) == 2.5);
  const xt::xarray<float> same = to_xarray<float>(f32);
  CHECK(same(1, 1) == 3.5f);
  CHECK(to_xarray<double>(Tensor::scalar(2.0)).dimension() == 0);

  // as_xtensor: a writable view of the tensor's storage.
  Tensor v = Tensor::zeros({2, 2}, kFloat64);
  auto view = as_xtensor<double>(v);
  view(1, 0) = 9.0;
  CHECK(v.to_vector() == std::vector<double>{0, 0, 9, 0});
  CHECK(view.shape()[1] == 2);
  require_error([&] { (void)as_xtensor<float>(v); }, {"data<float32>", "float64"});
}

// ---- item, to(dtype), metadata ------------------------------------------------------------------

TEST_CASE("item(): one element only", "[tensor]") {
  CHECK(Tensor::scalar(-1.25, kFloat64).item() == -1.25);
  CHECK(Tensor::full({1, 1, 1}, 6.5).item() == 6.5);
  require_error([] { (void)Tensor::zeros({2, 3}).item(); }, {"item", "(2, 3)", "6 elements"});
  require_error([] { (void)Tensor::zeros({0}).item(); }, {"item", "0 elements"});
  require_error([] { (void)Tensor().item(); }, {"undefined"});
}

TEST_CASE("to(dtype): values and gradient", "[tensor][autograd]") {
  const Tensor x64 = Tensor::of({0.1, -1e-3, 3.0, 1e30}, kFloat64);
  const Tensor x32 = x64.to(kFloat32);
  CHECK(x32.dtype() == kFloat32);
  CHECK(x32.shape() == x64.shape());
  const auto v = x32.to_vector();
  const auto w = x64.to_vector();
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<double>(static_cast<float>(w[i])));
  CHECK(x32.to(kFloat64).to_vector() == v);  // widening is exact
  CHECK(x64.to(kFloat64).is_same(x64));      // same dtype: the same tensor
  CHECK(Tensor::scalar(2.5).to(kFloat64).dim() == 0);

  // Differentiable: the gradient comes back in the input's dtype.
  Tensor a = Tensor::of({1.5, -2.0, 0.25}).set_requires_grad();
  Tensor b = a.to(kFloat64);
  REQUIRE(b.grad_fn());
  CHECK(std::string(b.grad_fn()->name()) == "to");
  Tensor y = mul(b, Tensor::of({2.0, 3.0, 4.0}, kFloat64));
  y.backward(Tensor::of({1.0, 10.0, 100.0}, kFloat64));
  REQUIRE(a.grad().defined());
  CHECK(a.grad().dtype() == kFloat32);
  CHECK(a.grad().to_vector() == std::vector<double>{2.0, 30.0, 400.0});

  // A float64 leaf through float32 and back: the gradient is converted on the way back too, and
  // accumulates with the direct path's gradient (values chosen exactly representable in float32).
  Tensor c = Tensor::of({0.5, -4.0}, kFloat64).set_requires_grad();
  Tensor round_trip = c.to(kFloat32).to(kFloat64);
  CHECK(round_trip.grad_fn());
  add(mul(round_trip, 3.0), c).backward(Tensor::of({1.0, 2.0}, kFloat64));
  CHECK(c.grad().dtype() == kFloat64);
  CHECK(c.grad().to_vector() == std::vector<double>{4.0, 8.0});
  // Under NoGradGuard the conversion records nothing.
  NoGradGuard ng;
  CHECK_FALSE(c.to(kFloat32).requires_grad());
}

TEST_CASE("metadata accessors and undefined tensors", "[tensor]") {
  const Tensor t = Tensor::zeros({2, 3, 4});
  CHECK(t.size(0) == 2);
  CHECK(t.size(-1) == 4);
  require_error([&] { (void)t.size(3); }, {"size", "(2, 3, 4)"});
  require_error([&] { (void)t.data<double>(); }, {"data<float64>", "float32"});
  const Tensor u;
  CHECK_FALSE(u.defined());
  require_error([&] { (void)u.shape(); }, {"shape", "undefined"});
  require_error([&] { (void)u.numel(); }, {"numel", "undefined"});

  // detach shares storage; clone_data does not; alias_with_shape reshapes without copying.
  Tensor a = Tensor::arange(0, 6, 1, kFloat64);
  Tensor d = a.detach();
  Tensor c = a.clone_data();
  Tensor r = alias_with_shape(a, {2, 3});
  d.data<double>()[0] = 42;
  CHECK(a.to_vector()[0] == 42);
  CHECK(r.to_vector()[0] == 42);
  CHECK(c.to_vector()[0] == 0);
  CHECK(r.shape() == Shape{2, 3});
  require_error([&] { alias_with_shape(a, {4, 2}); }, {"reshape", "(6,)", "(4, 2)"});
  CHECK(bit_equal(Tensor(), Tensor()));
  CHECK_FALSE(bit_equal(Tensor::zeros({2}), Tensor::zeros({2}, kFloat64)));
}

TEST_CASE("negative dimensions are an Error", "[tensor]") {
  Generator g(1);
  require_error([] { Tensor::zeros({2, -1}); }, {"negative dimension", "(2, -1)"});
  require_error([] { Tensor::ones({-3}); }, {"negative dimension", "(-3,)"});
  require_error([] { Tensor::full({-1, 4}, 1.0); }, {"negative dimension"});
  require_error([] { Tensor::empty({-2}, kFloat64); }, {"negative dimension"});
  require_error([&] { Tensor::rand({2, -5}, g); }, {"negative dimension"});
  require_error([&] { Tensor::randn({-1}, g); }, {"negative dimension"});
  require_error([] { Tensor::from_vector({1, 2}, {-1, -2}); }, {"negative dimension"});
}

TEST_CASE("shapes whose size overflows are an Error, zero-size shapes are not", "[tensor]") {
  // 2^62 * 8 elements overflows int64; 2^61 float64 elements overflow the byte count.
  const std::int64_t big = std::int64_t{1} << 62;
  require_error([&] { Tensor::zeros({big, 8}); }, {"too large", "(4611686018427387904, 8)"});
  require_error([&] { Tensor::empty({std::int64_t{1} << 61}, kFloat64); }, {"too large", "float64"});
  require_error([&] { Tensor::ones({big, big, big}); }, {"too large"});
  // A zero dimension makes any shape empty.
  const Tensor e = Tensor::zeros({big, 0, big});
  CHECK(e.numel() == 0);
  CHECK(e.nbytes() == 0);
  CHECK(e.to_vector().empty());
}

// ---- printing -----------------------------------------------------------------------------------

TEST_CASE("printing", "[tensor]") {
  CHECK(to_string(Tensor::of({1, 2.5, -3})) == "tensor([1, 2.5, -3], dtype=float32)");
  CHECK(to_string(Tensor::scalar(3.5, kFloat64)) == "tensor(3.5, dtype=float64)");
  CHECK(to_string(Tensor::of({{1, 2}, {3, 4}}, kFloat64)) == "tensor([[1, 2],\n        [3, 4]], dtype=float64)");
  CHECK(to_string(Tensor::zeros({0})) == "tensor([], dtype=float32)");
  CHECK(to_string(Tensor()) == "tensor(undefined)");

  Tensor x = Tensor::of({1, 2}).set_requires_grad();
  CHECK(to_string(x) == "tensor([1, 2], dtype=float32, requires_grad=True)");
  const std::string y = to_string(mul(x, x));
  CHECK(y.find("tensor(") == 0);
  CHECK(y.find("dtype=float32") != std::string::npos);
  CHECK(y.find("grad_fn=<mul>") != std::string::npos);
  CHECK(y.find("[1, 4]") != std::string::npos);

  // Dimensions longer than 12 are summarised, keeping six entries at each end.
  const std::string longs = to_string(Tensor::arange(0, 100, 1, kFloat64));
  INFO(longs);
  CHECK(longs == "tensor([0, 1, 2, 3, 4, 5, ..., 94, 95, 96, 97, 98, 99], dtype=float64)");
  const std::string rows = to_string(alias_with_shape(Tensor::arange(0, 40, 1, kFloat64), {20, 2}));
  INFO(rows);
  CHECK(rows.find("[10, 11],\n        ...,\n        [28, 29]") != std::string::npos);
  CHECK(rows.find("[12, 13]") == std::string::npos);
}

// ---- in-place ops -------------------------------------------------------------------------------

TEST_CASE("in-place ops: values, version counter, refusal on leaves requiring grad", "[tensor][autograd]") {
  Tensor t = Tensor::zeros({2, 2}, kFloat64);
  std::uint32_t v = version_of(t);
  t.fill_(1.5);
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector() == std::vector<double>{1.5, 1.5, 1.5, 1.5});
  t.add_(Tensor::of({{1, 2}, {3, 4}}, kFloat64), 2.0);
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector() == std::vector<double>{3.5, 5.5, 7.5, 9.5});
  t.add_(Tensor::ones({2, 2}, kFloat64));
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector() == std::vector<double>{4.5, 6.5, 8.5, 10.5});
  t.mul_(-2);
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector() == std::vector<double>{-9, -13, -17, -21});
  t.copy_(Tensor::of({{0.1, 0.2}, {0.3, 0.4}}));  // float32 source, converted
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector()[0] == static_cast<double>(0.1f));
  t.zero_();
  CHECK(version_of(t) == ++v);
  CHECK(t.to_vector() == std::vector<double>{0, 0, 0, 0});
  // A view shares the version counter (same storage).
  Tensor d = t.detach();
  d.fill_(1);
  CHECK(version_of(t) == ++v);

  require_error([&] { t.add_(Tensor::ones({2})); }, {"add_", "(2, 2)", "(2,)"});
  require_error([&] { t.add_(Tensor::ones({2, 2}, kFloat32)); }, {"add_", "float64", "float32"});
  require_error([&] { t.copy_(Tensor::ones({4})); }, {"copy_", "(4,)", "(2, 2)"});

  // Leaves that require grad: refused in grad mode, allowed under NoGradGuard (optimizer updates).
  Tensor w = Tensor::ones({3}).set_requires_grad();
  const std::uint32_t wv = version_of(w);
  require_error([&] { w.fill_(0); }, {"fill_", "in-place", "requires grad"});
  require_error([&] { w.add_(Tensor::ones({3})); }, {"add_", "in-place"});
  require_error([&] { w.mul_(2); }, {"mul_", "in-place"});
  require_error([&] { w.copy_(Tensor::ones({3})); }, {"copy_", "in-place"});
  CHECK(version_of(w) == wv);  // refused ops do not bump the version
  CHECK(w.to_vector() == std::vector<double>{1, 1, 1});
  {
    NoGradGuard ng;
    w.add_(Tensor::ones({3}), -0.5);
    w.mul_(4);
  }
  CHECK(w.to_vector() == std::vector<double>{2, 2, 2});
  CHECK(version_of(w) == wv + 2);
  // Non-leaf outputs of recorded ops require grad too.
  Tensor y = mul(w, w);
  require_error([&] { y.fill_(0); }, {"fill_", "in-place"});
  // set_requires_grad only on leaves.
  require_error([&] { y.set_requires_grad(); }, {"set_requires_grad", "mul"});
}

// ---- checked sizes (Note [Checked sizes]) ---------------------------------------------------------

TEST_CASE("checked size arithmetic names the op and the argument", "[tensor][sizes]") {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(checked_mul(3, 4, "op", "a") == 12);
  CHECK(checked_add(max - 1, 1, "op", "a") == max);
  test::require_error([&] { checked_mul(max / 2 + 1, 2, "my_op", "my_arg"); }, {"my_op", "'my_arg'", "overflows"});
  test::require_error([&] { checked_add(max, 1, "my_op", "my_arg"); }, {"my_op", "'my_arg'", "overflows"});
  test::require_error([&] { checked_numel({2, -3}, "my_op", "shape"); }, {"my_op", "negative dimension", "(2, -3)"});
  // The element count and every stride must fit; a zero dimension empties the shape.
  const std::int64_t big = std::int64_t{1} << 62;
  CHECK(checked_numel({big, 0, big}, "op", "s") == 0);
  CHECK(checked_numel({}, "op", "s") == 1);
  test::require_error([&] { checked_numel({0, big, big}, "my_op", "shape"); }, {"my_op", "too large"});
  test::require_error([&] { contiguous_strides({0, big, 4}); }, {"too large"});
  CHECK(contiguous_strides({big, 0, big}) == Shape{0, big, 1});
  test::require_error([&] { checked_nbytes(max / 4, 8, "my_op", "x"); }, {"my_op", "'x'", "bytes asked for"});
  CHECK(checked_nbytes(10, 8, "op", "x") == 80);
}

TEST_CASE("a request for more memory than exists states the bytes, never a bare bad_alloc", "[tensor][sizes]") {
  // 2^45 float32 elements: 2^47 bytes, representable but more than the address space can hold.
  const std::int64_t n = std::int64_t{1} << 45;
  try {
    (void)Tensor::empty({n});
    FAIL("a 128 TiB tensor was allocated");
  } catch (const std::bad_alloc&) {
    FAIL("std::bad_alloc escaped");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("140737488355328 bytes"));
  }
  test::require_error([&] { (void)Tensor::zeros({n, 2}, kFloat64); }, {"bytes"});
  // Overflowing byte counts and negative sizes in every creation function.
  test::require_error([] { Tensor::linspace(0, 1, std::int64_t{1} << 62, kFloat64); }, {"too large", "bytes"});
  test::require_error([] { Tensor::arange(0, 0x1p61, 1, kFloat64); }, {"too large", "bytes"});
  test::require_error(
      [] {
        Tensor::zeros({0, std::int64_t{1} << 62, 8});
      },
      {"too large", "(0, 4611686018427387904, 8)"});
}

TEST_CASE("an op whose result's size overflows names the op and the shape", "[tensor][sizes]") {
  const std::int64_t big = std::int64_t{1} << 62;
  // (2^62, 2^62, 0) is a valid empty tensor (its strides are (0, 0, 1)); reducing away the 0 would
  // make a (2^62, 2^62) result, which no int64 can count.
  const Tensor z = Tensor::zeros({big, big, 0});
  CHECK(z.numel() == 0);
  test::require_error([&] { (void)sum(z, {2}); },
                      {"sum: cannot make its result", "(4611686018427387904, 4611686018427387904", "too large"});
  test::require_error([&] { (void)mean(z, {2}); }, {"mean", "too large"});
  // Outside an op the error is the tensor's own, as before.
  test::require_error([&] { (void)Tensor::empty({big, big}); }, {"tensor: argument 'shape'", "too large"});
}

TEST_CASE("aliases and views refuse shapes whose size overflows", "[tensor][sizes]") {
  const std::int64_t big = std::int64_t{1} << 62;
  const Tensor e = Tensor::zeros({0});
  // (0, 2^62, 2^62) has zero elements but its strides overflow: it must not pass as a view.
  test::require_error([&] { alias_with_shape(e, {0, big, big}); }, {"reshape", "too large"});
  // Products that wrap to the right count: 2^32 * 2^32 * 4 wraps to 0 (mod 2^64); 2^63 * 2 wraps to 0.
  test::require_error(
      [&] {
        alias_with_shape(e, {std::int64_t{1} << 32, std::int64_t{1} << 32, 4});
      },
      {"reshape", "too large"});
  const Tensor t = Tensor::zeros({4});
  test::require_error([&] { alias_with_shape(t, {std::int64_t{1} << 62, 4, 1}); }, {"reshape"});
  // Valid empty views of huge zero-size shapes keep working.
  const Tensor v = alias_with_shape(Tensor::zeros({big, 0}), {0, big});
  CHECK(v.numel() == 0);
  CHECK(v.shape() == Shape{0, big});
}

TEST_CASE("zero-size tensors: creation, copies and conversions", "[tensor][sizes]") {
  for (const Dtype dt : {kFloat32, kFloat64})
    for (const Shape& s : {Shape{0}, Shape{3, 0}, Shape{0, 5}, Shape{2, 0, 7}}) {
      Tensor z = Tensor::zeros(s, dt);
      CHECK(z.numel() == 0);
      CHECK(z.nbytes() == 0);
      CHECK(Tensor::ones(s, dt).numel() == 0);
      CHECK(Tensor::full(s, 2.0, dt).to_vector().empty());
      CHECK(bit_equal(z.clone_data(), z));
      CHECK(z.to(dt == kFloat32 ? kFloat64 : kFloat32).shape() == s);
      z.add_(Tensor::ones(s, dt)).mul_(2.0).copy_(Tensor::ones(s, dt));
      CHECK(allclose(z, Tensor::zeros(s, dt)));
      CHECK(Tensor::from_vector({}, s, dt).shape() == s);
    }
  CHECK(Tensor::arange(3, 3).numel() == 0);
  CHECK(Tensor::linspace(0, 1, 0).numel() == 0);
}

namespace {
// An overload pair like the ops' (a Tensor or a list of axes/indices in the same position).
int braced_pick(const Tensor&) { return 1; }
int braced_pick(const std::vector<std::int64_t>&) { return 2; }
}  // namespace

TEST_CASE("a braced list never converts to a Tensor: overloads taking a vector are not ambiguous", "[tensor]") {
  // Compile-level: each call below was ambiguous while Tensor(std::shared_ptr<TensorImpl>) was a
  // plain (explicit) constructor, since {0} initialises a shared_ptr (a null pointer constant).
  static_assert(!std::is_convertible_v<std::shared_ptr<TensorImpl>, Tensor>);
  static_assert(std::is_constructible_v<Tensor, std::shared_ptr<TensorImpl>>);
  CHECK(braced_pick({0}) == 2);
  CHECK(braced_pick({0, 1}) == 2);
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64);
  CHECK(braced_pick(x) == 1);
  CHECK(sum(x, {0}).to_vector() == std::vector<double>{5, 7, 9});
  CHECK(sum(x, {0, 1}).to_vector() == std::vector<double>{21});
  CHECK(index_select(x, 0, {0}).to_vector() == std::vector<double>{1, 2, 3});
  CHECK(index_select(x, 1, {2, 0}).to_vector() == std::vector<double>{3, 1, 6, 4});
  // A handle from an impl still works (the constructor takes exactly std::shared_ptr<TensorImpl>).
  const Tensor alias(x.impl());
  CHECK(alias.is_same(x));
}
