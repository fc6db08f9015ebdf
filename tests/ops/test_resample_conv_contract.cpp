// Tests for two helpers of ops/resample_conv.hpp:
// resample_conv_prepare(..., derivative = true) builds both tables, and resample_conv_error_bound
// returns the accuracy contract's bound, which actual errors against a float64 dense sum respect.
#include <cmath>
#include <numbers>

#include "support.hpp"
#include "xgrad/ops/resample_conv.hpp"

using namespace xgrad;

namespace {

// cos^2(pi d / w) on |d| <= w/2, with its derivative.
Response hann(double w) {
  return Response::callable([w](double d) { return std::pow(std::cos(std::numbers::pi * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -std::numbers::pi / w * std::sin(2 * std::numbers::pi * d / w); });
}

// max |out - exact| where exact is the dense sum in float64 of r over the values the op saw (f and
// coarse as rounded to their dtype), and the contract's scale max sum |r||f| computed here on its own.
struct Measured {
  double error = 0, scale = 0;
};
Measured measure(const Tensor& out, const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& r) {
  const std::vector<double> o = out.to_vector(), fv = f.to_vector(), cv = coarse.to_vector();
  const std::int64_t B = grid.size(), N = coarse.size(0), A = coarse.size(1), P = f.numel() / (N * B);
  Measured m;
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t a = 0; a < A; ++a) {
        double exact = 0, mag = 0;
        for (std::int64_t b = 0; b < B; ++b) {
          const double rd = r(cv[static_cast<std::size_t>(n * A + a)] - grid.at(b));  // 0 outside [lo, hi]
          const double fb = fv[static_cast<std::size_t>((p * N + n) * B + b)];
          exact += rd * fb;
          mag += std::abs(rd) * std::abs(fb);
        }
        m.error = std::max(m.error, std::abs(o[static_cast<std::size_t>((p * N + n) * A + a)] - exact));
        m.scale = std::max(m.scale, mag);
      }
  return m;
}

Tensor sorted_points(std::int64_t B, Generator& gen) {
  std::vector<double> x(static_cast<std::size_t>(B));
  for (auto& v : x) v = gen.uniform(0.0, 1.0);
  std::sort(x.begin(), x.end());
  return Tensor::from_vector(x, {B}, kFloat64);
}

Tensor coarse_in(std::int64_t N, std::int64_t A, double lo, double hi, Generator& gen) {
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (auto& v : c) v = gen.uniform(lo, hi);
  return Tensor::from_vector(c, {N, A}, kFloat64);
}

}  // namespace

TEST_CASE("resample_conv_prepare: derivative = true builds the forward and the derivative table",
          "[resample_conv][prepare]") {
  Generator gen(5);
  for (const bool uniform : {true, false})
    for (const Dtype dt : {kFloat32, kFloat64}) {
      INFO((uniform ? "uniform" : "points") << " " << dtype_name(dt));
      const FineGrid grid = uniform ? FineGrid::uniform(0.0, 1e-3, 1001) : FineGrid::points(sorted_points(500, gen));
      const Response r = hann(0.05);  // a fresh response: an empty cache
      CHECK(resample_conv_cached_bytes(r) == 0);
      const ResampleConvTableInfo deriv = resample_conv_prepare(grid, r, dt, {}, /*derivative=*/true);
      const std::size_t after_both = resample_conv_cached_bytes(r);
      // The forward table is already there: asking for it builds nothing more.
      const ResampleConvTableInfo fwd = resample_conv_prepare(grid, r, dt);
      CHECK(resample_conv_cached_bytes(r) == after_both);
      CHECK(fwd.bytes > 0);
      CHECK(deriv.bytes > 0);
      CHECK(after_both == fwd.bytes + deriv.bytes);
      CHECK(std::string(fwd.method) == std::string(deriv.method));
      // And neither a forward nor a backward to the coarse points builds one.
      Tensor c = coarse_in(2, 7, 0.1, 0.9, gen).to(dt).set_requires_grad();
      resample_conv(Tensor::randn({2, grid.size()}, gen, dt), c, grid, r).backward(Tensor::ones({2, 7}, dt));
      CHECK(resample_conv_cached_bytes(r) == after_both);
    }
  // Sampled responses (tables per forward, never cached) and the error for a callable without r'.
  const Response s = Response::sampled(Tensor::randn({9}, gen, kFloat32), -0.02, 0.02);
  const FineGrid g100 = FineGrid::uniform(0, 1e-3, 100);
  CHECK(std::string(resample_conv_prepare(g100, s, kFloat32).method) == "sampled-polyphase");
  const std::string dm = resample_conv_prepare(g100, s, kFloat32, {}, true).method;
  CHECK((dm == "sampled-polyphase" || dm == "sampled"));  // r' of a cubic is less smooth: may not tabulate
  CHECK(resample_conv_cached_bytes(s) == 0);
  const Response no_deriv = Response::callable([](double d) { return 1 - std::abs(d) * 10; }, -0.1, 0.1);
  test::require_error(
      [&] { (void)resample_conv_prepare(FineGrid::uniform(0, 1e-3, 100), no_deriv, kFloat64, {}, true); },
      {"resample_conv_prepare", "without derivative"});
}

TEST_CASE("resample_conv_error_bound: actual errors against a float64 dense sum stay below it",
          "[resample_conv][accuracy]") {
  Generator gen(21);
  struct Case {
    const char* name;
    double w;
    std::int64_t B;
    bool uniform;
    Shape batch;
    int response;  // 0: callable, 1: sampled cubic, 2: sampled linear
    bool exact;
  };
  const Case cases[] = {
      {"wide support (w/dx = 600)", 0.03, 20000, true, {}, 0, false},
      {"few taps", 0.05, 200, true, {}, 0, false},
      {"non-uniform grid", 0.05, 3000, false, {}, 0, false},
      {"batched f", 0.02, 1500, true, {2, 3}, 0, false},
      {"exact mode", 0.05, 400, true, {}, 0, true},
      {"sampled cubic", 0.04, 2000, true, {}, 1, false},
      {"sampled linear, non-uniform", 0.04, 1500, false, {2}, 2, false},
  };
  for (const Case& cs : cases)
    for (const Dtype dt : {kFloat32, kFloat64}) {
      INFO(cs.name << " " << dtype_name(dt));
      const FineGrid grid = cs.uniform ? FineGrid::uniform(0.0, 1.0 / static_cast<double>(cs.B - 1), cs.B)
                                       : FineGrid::points(sorted_points(cs.B, gen));
      Response r = hann(cs.w);
      if (cs.response > 0) {
        std::vector<double> v(17);
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = r(-cs.w / 2 + cs.w * static_cast<double>(k) / 16) + 0.1;
        r = Response::sampled(Tensor::from_vector(v, {17}, dt), -cs.w / 2, cs.w / 2,
                              cs.response == 1 ? Interp::cubic : Interp::linear);
      }
      const std::int64_t N = 3, A = 25;
      Shape fs = cs.batch;
      fs.push_back(N);
      fs.push_back(cs.B);
      const Tensor f = Tensor::randn(fs, gen, kFloat64).mul_(3.0).to(dt);
      const Tensor c = coarse_in(N, A, -cs.w / 4, 1 + cs.w / 4, gen).to(dt);  // some supports past the ends
      ResampleConvOptions o;
      o.exact = cs.exact;
      const Tensor out = resample_conv(f, c, grid, r, o);
      const double bound = resample_conv_error_bound(f, c, grid, r, o);
      const Measured m = measure(out, f, c, grid, r);
      INFO("max abs error " << m.error << ", bound " << bound << ", scale " << m.scale);
      CHECK(m.error <= bound);
      // The bound is the contract's formula, computed independently here.
      CHECK(bound == Approx((dt == kFloat32 ? 1e-5 : 1e-12) * m.scale).epsilon(1e-9));
      CHECK(bound > 0);
    }
}

TEST_CASE("resample_conv_error_bound: degenerate sizes, tolerances and bad input", "[resample_conv][accuracy]") {
  Generator gen(22);
  const Response r = hann(0.05);
  const FineGrid grid = FineGrid::uniform(0.0, 1e-3, 1001);
  const Tensor f = Tensor::randn({2, 1001}, gen, kFloat64);
  const Tensor c = coarse_in(2, 5, 0.0, 1.0, gen);
  // Empty sums are exact.
  CHECK(resample_conv_error_bound(Tensor::zeros({2, 1001}), Tensor::zeros({2, 0}), grid, r) == 0.0);
  CHECK(resample_conv_error_bound(Tensor::zeros({0, 2, 1001}), Tensor::zeros({2, 3}), grid, r) == 0.0);
  CHECK(resample_conv_error_bound(Tensor::zeros({2, 0}), Tensor::zeros({2, 3}), FineGrid::uniform(0, 1, 0), r) == 0.0);
  // A coarse point whose support misses the grid: nothing to sum.
  CHECK(resample_conv_error_bound(f, Tensor::full({2, 1}, 5.0, kFloat64), grid, r) == 0.0);
  // A finer tolerance keeps the contract; a coarser one is outside it.
  ResampleConvOptions finer;
  finer.tolerance = 1e-15;
  CHECK(resample_conv_error_bound(f, c, grid, r, finer) == resample_conv_error_bound(f, c, grid, r));
  ResampleConvOptions coarser;
  coarser.tolerance = 1e-4;
  test::require_error(
      [&] { (void)resample_conv_error_bound(f, c, grid, r, coarser); },
      {"resample_conv_error_bound", "'options'", "tolerance 0.0001", "coarser than the float64 default"});
  coarser.exact = true;  // exact mode ignores the tolerance
  CHECK(resample_conv_error_bound(f, c, grid, r, coarser) == resample_conv_error_bound(f, c, grid, r));
  // What resample_conv refuses, this refuses too, naming itself.
  test::require_error(
      [&] {
        (void)resample_conv_error_bound(f, Tensor::zeros({3, 5}, kFloat64), grid, r);
      },
      {"resample_conv_error_bound", "coarse"});
  test::require_error([&] { (void)resample_conv_error_bound(f.to(kFloat32), c, grid, r); },
                      {"resample_conv_error_bound", "dtype mismatch"});
  test::require_error([&] { (void)resample_conv_error_bound(Tensor(), c, grid, r); },
                      {"resample_conv_error_bound", "'f'"});
}
