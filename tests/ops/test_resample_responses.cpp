// Tests for resample_conv's grids and responses: uniform grids given as points (FineGrid::points
// detects them and takes the fast path), responses that declare breakpoints (tables fitted piece by
// piece), the named responses against independent float64 formulas, and the visible fallback
// (ResampleConvOptions::strict, set_resample_conv_fallback_handler).
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/ops/resample_conv.hpp"

using namespace xgrad;

namespace {

using Fn = std::function<double(double)>;

// Sorted uniform random points on [0, 1] (ends pinned).
Tensor random_points(std::int64_t B, Generator& gen) {
  std::vector<double> x(static_cast<std::size_t>(B));
  for (auto& v : x) v = gen.uniform();
  std::sort(x.begin(), x.end());
  x.front() = 0;
  x.back() = 1;
  return Tensor::from_vector(x, {B}, kFloat64);
}

Tensor coarse_in(std::int64_t N, std::int64_t A, Generator& gen, double margin, Dtype dt) {
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (auto& v : c) v = gen.uniform(-margin, 1 + margin);
  return Tensor::from_vector(c, {N, A}, dt);
}

// The dense sum over the given points xs with r = fn on [lo, hi], in float64, and the contract's
// scale max over outputs of sum_b |r||f|.
struct Dense {
  std::vector<double> out;
  double scale = 0;
};
Dense dense(const Tensor& f, const Tensor& coarse, const std::vector<double>& xs, const Fn& fn, double lo, double hi) {
  const std::vector<double> fv = f.to_vector(), cv = coarse.to_vector();
  const std::int64_t B = static_cast<std::int64_t>(xs.size()), N = coarse.size(0), A = coarse.size(1);
  Dense d;
  d.out.assign(static_cast<std::size_t>(N * A), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t a = 0; a < A; ++a) {
      double s = 0, sabs = 0;
      for (std::int64_t b = 0; b < B; ++b) {
        const double dd = cv[static_cast<std::size_t>(n * A + a)] - xs[static_cast<std::size_t>(b)];
        if (dd < lo || dd > hi) continue;
        const double t = fn(dd) * fv[static_cast<std::size_t>(n * B + b)];
        s += t;
        sabs += std::abs(t);
      }
      d.out[static_cast<std::size_t>(n * A + a)] = s;
      d.scale = std::max(d.scale, sabs);
    }
  return d;
}

std::vector<double> grid_points(const FineGrid& g) {
  std::vector<double> x(static_cast<std::size_t>(g.size()));
  for (std::int64_t b = 0; b < g.size(); ++b) x[static_cast<std::size_t>(b)] = g.at(b);
  return x;
}

double max_diff(const Tensor& a, const std::vector<double>& b) {
  const std::vector<double> av = a.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < av.size(); ++i) m = std::max(m, std::abs(av[i] - b[i]));
  return m;
}

// ---- independent float64 (long double) formulas of the named responses --------------------------
long double sinc_ref(long double x) { return x == 0 ? 1.0L : std::sin(M_PIl * x) / (M_PIl * x); }

// Centred cardinal B-spline by the truncated-power formula (not the library's piecewise form).
long double bspline_ref(int n, long double x) {
  if (n == 1) return std::abs(x) <= 0.5L ? 1.0L : 0.0L;
  long double s = 0, binom = 1, fact = 1;
  for (int k = 1; k < n; ++k) fact *= k;
  for (int k = 0; k <= n; ++k) {
    const long double t = x + n / 2.0L - k;
    if (t > 0) s += (k % 2 ? -1 : 1) * binom * std::pow(t, n - 1);
    binom = binom * (n - k) / (k + 1);
  }
  return s / fact;
}

struct Named {
  std::string name;
  Response r;
  Fn fn, dfn;
};

std::vector<Named> named_responses() {
  std::vector<Named> v;
  {
    const double s = 0.01, t = 3.5;
    const double norm = 1 / (s * std::sqrt(2 * M_PI) * std::erf(t / std::sqrt(2.0)));
    v.push_back({"gaussian", Response::gaussian(s, t), [=](double d) { return norm * std::exp(-d * d / (2 * s * s)); },
                 [=](double d) { return -d / (s * s) * norm * std::exp(-d * d / (2 * s * s)); }});
  }
  {
    const double w = 0.05;
    v.push_back({"hann", Response::hann(w), [=](double d) { return 2 / w * std::pow(std::cos(M_PI * d / w), 2); },
                 [=](double d) { return -4 / w * std::cos(M_PI * d / w) * std::sin(M_PI * d / w) * M_PI / w; }});
    v.push_back({"box", Response::box(w), [=](double) { return 1 / w; }, [](double) { return 0.0; }});
    v.push_back({"triangle", Response::triangle(w),
                 [=](double d) { return 2 / w * std::max(0.0, 1 - 2 * std::abs(d) / w); },
                 [=](double d) { return d > 0 ? -4 / (w * w) : 4 / (w * w); }});
  }
  for (int n = 1; n <= 4; ++n) {
    const double h = 0.0125;
    v.push_back({"bspline" + std::to_string(n), Response::bspline(n, h),
                 [=](double d) { return static_cast<double>(bspline_ref(n, d / static_cast<long double>(h)) / h); },
                 [=](double d) {
                   // M_n' (x) = M_{n-1}(x + 1/2) - M_{n-1}(x - 1/2)
                   if (n == 1) return 0.0;
                   const long double x = d / static_cast<long double>(h);
                   return static_cast<double>((bspline_ref(n - 1, x + 0.5L) - bspline_ref(n - 1, x - 0.5L)) / h / h);
                 }});
  }
  {
    const int a = 3;
    const double sc = 0.01;
    auto L = [=](long double x) { return sinc_ref(x) * sinc_ref(x / a); };
    v.push_back({"lanczos3", Response::lanczos(a, sc), [=](double d) { return static_cast<double>(L(d / sc)); },
                 [=](double d) {
                   // 4th-order central difference in long double (the formula cancels near 0)
                   const long double x = d / static_cast<long double>(sc), e = 1e-4L;
                   const long double dl = (8 * (L(x + e) - L(x - e)) - (L(x + 2 * e) - L(x - 2 * e))) / (12 * e);
                   return static_cast<double>(dl / sc);
                 }});
  }
  return v;
}

}  // namespace

// First in this file: the default handler prints only the first fallback of the process (ctest
// runs each test case in its own process; a whole-binary run takes them in this order).
TEST_CASE("resample_conv: by default the first fallback is printed to stderr, once", "[resample_conv]") {
  const FineGrid grid = FineGrid::uniform(0.0, 1e-3, 1001);
  const double tl = -0.02071, th = 0.03137;
  auto tri = [=](double d) { return d < 0 ? 1 - d / tl : 1 - d / th; };
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  std::fflush(stderr);
  const int saved = dup(2);
  REQUIRE(dup2(fileno(tmp), 2) >= 0);
  for (int i = 0; i < 2; ++i)  // two responses, two fallbacks, one line
    resample_conv_prepare(grid, Response::callable(tri, tl, th), kFloat64);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(tmp);
  std::string text;
  for (int ch; (ch = std::fgetc(tmp)) != EOF;) text.push_back(static_cast<char>(ch));
  std::fclose(tmp);
  INFO("stderr: " << text);
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = text.find("xgrad warning: resample_conv:", at)) != std::string::npos; ++at) ++lines;
  CHECK(lines == 1);
  CHECK(text.find("evaluated at every tap") != std::string::npos);
  CHECK(text.find("strict") != std::string::npos);
}

// ---- item 1: uniform grids given as points ---------------------------------------------------------

// torch.linspace for float32 on the CPU: computed in float, from both ends.
static Tensor torch_like_linspace_f32(float start, float end, std::int64_t steps) {
  std::vector<double> x(static_cast<std::size_t>(steps));
  const float step = (end - start) / static_cast<float>(steps - 1);
  const std::int64_t half = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i)
    x[static_cast<std::size_t>(i)] =
        i < half ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  return Tensor::from_vector(x, {steps}, kFloat32);
}

TEST_CASE("FineGrid::points: a float64 or float32 linspace is detected as uniform (fast path)", "[resample_conv]") {
  const std::int64_t B = 4001;
  struct Case {
    const char* name;
    Tensor x;
  };
  const std::vector<Case> cases = {
      {"linspace f64 [0, 1]", Tensor::linspace(0, 1, B, kFloat64)},
      {"linspace f32 [0, 1]", Tensor::linspace(0, 1, B, kFloat32)},
      {"torch-like f32 [0, 1]", torch_like_linspace_f32(0.f, 1.f, B)},
      {"linspace f64 [-3, 7]", Tensor::linspace(-3, 7, B, kFloat64)},
      {"torch-like f32 [-3, 7]", torch_like_linspace_f32(-3.f, 7.f, B)},
  };
  Generator gen(101);
  const Response r = Response::hann(0.05);
  for (const auto& cs : cases)
    for (const Dtype dt : {kFloat32, kFloat64}) {
      INFO(cs.name << " " << dtype_name(dt));
      const FineGrid g = FineGrid::points(cs.x);
      REQUIRE(g.is_uniform());
      const std::vector<double> given = cs.x.to_vector();
      const double eps = cs.x.dtype() == kFloat32 ? FLT_EPSILON : DBL_EPSILON;
      const double mag = std::max(std::abs(given.front()), std::abs(given.back()));
      CHECK(g.uniform_deviation() <= 4 * eps * mag);
      CHECK(g.x0() == given.front());
      CHECK(g.dx() == (given.back() - given.front()) / (B - 1));
      // The same results as FineGrid::uniform with that x0, dx (the same grid, the same path).
      const FineGrid u = FineGrid::uniform(g.x0(), g.dx(), B);
      const Tensor f = Tensor::randn({3, B}, gen, dt);
      const double lo = given.front(), span = given.back() - given.front();
      Tensor c = (Tensor::rand({3, 30}, gen, kFloat64) * (span * 1.1) + (lo - 0.05 * span)).to(dt);
      const Tensor out = resample_conv(f, c, g, r), out_u = resample_conv(f, c, u, r);
      CHECK(max_diff(out, out_u.to_vector()) == 0);
      CHECK(std::string(resample_conv_prepare(g, r, dt).method) == "polyphase");
      // Against the dense sum over the *given* points: the contract plus the points' displacement
      // times sum_b |r'||f| (docs/resample_conv.md, "Uniform grids given as points").
      const Dense ref = dense(
          f, c, given, [&](double d) { return r(d); }, r.lo(), r.hi());
      const Dense dref = dense(
          f, c, given, [&](double d) { return r.derivative(d); }, r.lo(), r.hi());
      const double bound =
          (dt == kFloat32 ? 1e-5 : 1e-12) * ref.scale + g.uniform_deviation() * dref.scale * (1 + 1e-6);
      const double err = max_diff(out, ref.out);
      INFO("error " << err << " bound " << bound << " deviation " << g.uniform_deviation());
      CHECK(err <= bound);
      // On [0, 1] (the float32 rounding of the points is at most 3e-8 or so) the plain float32
      // contract holds against the given points as well.
      if (dt == kFloat32 && given.front() == 0) CHECK(err <= 1e-5 * ref.scale);
    }
}

TEST_CASE("FineGrid::points: points off a uniform grid stay non-uniform, detect_uniform = false keeps them",
          "[resample_conv]") {
  Generator gen(102);
  CHECK_FALSE(FineGrid::points(random_points(100, gen)).is_uniform());
  std::vector<double> x = Tensor::linspace(0, 1, 1001, kFloat64).to_vector();
  x[500] += 1e-9;  // far above float64 rounding
  CHECK_FALSE(FineGrid::points(Tensor::from_vector(x, {1001}, kFloat64)).is_uniform());
  // The same displacement is within float32 rounding of 1: a float32 grid of these values is uniform.
  std::vector<double> x32 = Tensor::linspace(0, 1, 1001, kFloat32).to_vector();
  x32[500] = static_cast<float>(x32[500] + 1e-8);
  CHECK(FineGrid::points(Tensor::from_vector(x32, {1001}, kFloat32)).is_uniform());
  const FineGrid kept = FineGrid::points(Tensor::linspace(0, 1, 11, kFloat64), /*detect_uniform=*/false);
  CHECK_FALSE(kept.is_uniform());
  CHECK(kept.uniform_deviation() == 0);
  CHECK(kept.xs().size() == 11);
  CHECK_FALSE(FineGrid::points(Tensor::of({0.5}, kFloat64)).is_uniform());  // one point: no spacing
  CHECK(FineGrid::points(Tensor::of({0.5, 2.0}, kFloat64)).is_uniform());
}

// ---- item 2: breakpoints and named responses ----------------------------------------------------------

TEST_CASE("resample_conv: named responses against float64 formulas (values and the coarse gradient)",
          "[resample_conv][accuracy]") {
  Generator gen(103);
  const std::int64_t B = 4000, N = 3, A = 40;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / (B - 1), B);
  const FineGrid pts = FineGrid::points(random_points(B, gen));
  for (const Named& nr : named_responses())
    for (const FineGrid* grid : {&uni, &pts})
      for (const Dtype dt : {kFloat32, kFloat64}) {
        INFO(nr.name << (grid->is_uniform() ? " uniform " : " points ") << dtype_name(dt));
        // Every named response, and its derivative, gets a table: never the per-tap fallback.
        ResampleConvOptions strict;
        strict.strict = true;
        const ResampleConvTableInfo info = resample_conv_prepare(*grid, nr.r, dt, strict);
        const ResampleConvTableInfo dinfo = resample_conv_prepare(*grid, nr.r, dt, strict, true);
        CHECK(std::string(info.method) == (grid->is_uniform() ? "polyphase" : "lattice"));
        CHECK(std::string(dinfo.method) == (grid->is_uniform() ? "polyphase" : "lattice"));
        const Tensor f = Tensor::randn({N, B}, gen, dt);
        Tensor c = coarse_in(N, A, gen, 0.03, dt).set_requires_grad();
        const std::vector<double> xs = grid_points(*grid);
        // The named response is the formula: check a few values directly too.
        for (double d : {nr.r.lo() * 0.77, nr.r.lo() * 0.31, 0.0, nr.r.hi() * 0.52, nr.r.hi() * 0.93})
          CHECK(std::abs(nr.r(d) - nr.fn(d)) <= 1e-13 * std::abs(nr.fn(0.0)));
        const Dense ref = dense(f, c, xs, nr.fn, nr.r.lo(), nr.r.hi());
        Tensor out = resample_conv(f, c, *grid, nr.r, strict);
        const double err = max_diff(out, ref.out), bound = (dt == kFloat32 ? 1e-5 : 1e-12) * ref.scale;
        INFO("error " << err << " bound " << bound << " (table degree " << info.degree << ", " << info.pieces
                      << " pieces)");
        CHECK(err <= bound);
        out.backward(Tensor::ones({N, A}, dt));
        const Dense dref = dense(f, c, xs, nr.dfn, nr.r.lo(), nr.r.hi());
        const double derr = max_diff(c.grad(), dref.out);
        const double dbound = (dt == kFloat32 ? 1e-5 : 1e-12) * std::max(dref.scale, 1e-300);
        INFO("coarse gradient error " << derr << " bound " << dbound);
        CHECK(derr <= dbound);
      }
}

TEST_CASE("resample_conv: gradcheck of the named responses (f and coarse)", "[resample_conv]") {
  Generator gen(104);
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / 39, 40);
  const FineGrid pts = FineGrid::points(random_points(40, gen));
  const std::vector<Response> rs = {Response::gaussian(0.05, 3), Response::hann(0.3),       Response::box(0.3),
                                    Response::triangle(0.3),     Response::bspline(3, 0.1), Response::bspline(4, 0.07),
                                    Response::lanczos(2, 0.08)};
  for (const Response& r : rs)
    for (const FineGrid* grid : {&uni, &pts}) {
      INFO(r.name() << (grid->is_uniform() ? " uniform" : " points"));
      Tensor f = test::randn_leaf({3, 40}, gen);
      Tensor c = coarse_in(3, 6, gen, 0.1, kFloat64).set_requires_grad();
      test::require_gradcheck([&](const Tensors& in) { return resample_conv(in[0], in[1], *grid, r); }, {f, c});
    }
}

TEST_CASE("resample_conv: a triangle or box takes the table path, without breakpoints a kink falls back",
          "[resample_conv]") {
  const FineGrid grid = FineGrid::uniform(0.0, 1e-3, 2001);
  const double w = 0.0503;  // the kink at 0 is not a multiple of dx from the support's ends
  for (const Dtype dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    for (const Response& r : {Response::triangle(w), Response::box(w)}) {
      const ResampleConvTableInfo info = resample_conv_prepare(grid, r, dt);
      CHECK(std::string(info.method) == "polyphase");
      CHECK(info.degree == 1);  // piecewise linear: exact at degree 1
      CHECK(std::string(resample_conv_prepare(grid, r, dt, {}, true).method) == "polyphase");
    }
  }
  // A triangle as a plain callable: its kink at 0 defeats the float64 tables (the fallback this
  // issue is about); declaring the breakpoint fixes it. (Asymmetric, so that no phase boundary
  // happens to fall on the kink.)
  const double tl = -0.02071, th = 0.03137;
  auto tri = [=](double d) { return d < 0 ? 1 - d / tl : 1 - d / th; };
  auto dtri = [=](double d) { return d < 0 ? -1 / tl : -1 / th; };
  CHECK(std::string(resample_conv_prepare(grid, Response::callable(tri, tl, th, dtri), kFloat64).method) == "exact");
  CHECK(std::string(resample_conv_prepare(grid, Response::callable(tri, tl, th, dtri, {0.0}), kFloat64).method) ==
        "polyphase");
  // A trapezoid (a piecewise-linear line-spread function) with kinks at arbitrary positions.
  const double a = 0.0123, b = 0.0171, lo = -0.021, hi = 0.025;
  auto trap = [=](double d) { return d < -a ? (d - lo) / (-a - lo) : d > b ? (hi - d) / (hi - b) : 1.0; };
  const Response tr = Response::callable(trap, lo, hi, {}, {b, -a});
  CHECK(tr.breakpoints() == std::vector<double>{-a, b});
  for (const Dtype dt : {kFloat32, kFloat64}) {
    const ResampleConvTableInfo info = resample_conv_prepare(grid, tr, dt);
    CHECK(std::string(info.method) == "polyphase");
    Generator gen(105);
    const Tensor f = Tensor::randn({2, 2001}, gen, dt);
    const Tensor c = coarse_in(2, 50, gen, 0.02, dt);
    const Dense ref = dense(f, c, grid_points(grid), trap, lo, hi);
    CHECK(max_diff(resample_conv(f, c, grid, tr), ref.out) <= (dt == kFloat32 ? 1e-5 : 1e-12) * ref.scale);
  }
  // On a non-uniform grid those breakpoints lie on no lattice of <= 64 cells: per-tap fallback.
  Generator gen(106);
  const FineGrid pts = FineGrid::points(random_points(500, gen));
  CHECK(std::string(resample_conv_prepare(pts, tr, kFloat64).method) == "exact");
}

TEST_CASE("resample_conv: strict refuses the per-tap fallback, the fallback handler is called once",
          "[resample_conv][errors]") {
  const FineGrid grid = FineGrid::uniform(0.0, 1e-3, 1001);
  const double w = 0.0503;
  const double tl = -0.02071, th = 0.03137;  // an asymmetric triangle, as above
  auto tri = [=](double d) { return d < 0 ? 1 - d / tl : 1 - d / th; };
  auto dtri = [=](double d) { return d < 0 ? -1 / tl : -1 / th; };
  const Tensor f = Tensor::ones({2, 1001}, kFloat64);
  const Tensor c = Tensor::full({2, 5}, 0.5, kFloat64);
  ResampleConvOptions strict;
  strict.strict = true;
  test::require_error([&] { resample_conv(f, c, grid, Response::callable(tri, tl, th, dtri), strict); },
                      {"resample_conv", "callable response", "forward table", "tolerance", "breakpoints", "strict"});
  test::require_error([&] { resample_conv_prepare(grid, Response::callable(tri, tl, th, dtri), kFloat64, strict); },
                      {"resample_conv", "strict"});
  // The coarse gradient's derivative table (dtri jumps at 0, tri has the breakpoint only in its
  // derivative's eyes): refused at the call, before any backward.
  const Response smooth_but_bad_derivative = Response::callable(
      [w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
      [w](double d) { return std::abs(d) < w / 4 ? 0.0 : 1.0; });  // a jumping "derivative", no breakpoints
  Tensor cg = c.clone_data().set_requires_grad();
  test::require_error([&] { resample_conv(f, cg, grid, smooth_but_bad_derivative, strict); },
                      {"resample_conv", "derivative table", "strict"});
  CHECK_NOTHROW(resample_conv(f, c, grid, smooth_but_bad_derivative, strict));  // no coarse gradient asked
  // An explicit exact mode is not a fallback.
  ResampleConvOptions exact_strict = strict;
  exact_strict.exact = true;
  CHECK_NOTHROW(resample_conv(f, c, grid, Response::callable(tri, tl, th, dtri), exact_strict));

  // The handler: once per (response, table), with the reason; nothing without a fallback.
  std::vector<std::string> seen;
  const ResampleConvFallbackHandler previous =
      set_resample_conv_fallback_handler([&](const std::string& m) { seen.push_back(m); });
  const Response kinked = Response::callable(tri, tl, th, dtri);
  const Tensor out1 = resample_conv(f, c, grid, kinked);
  const Tensor out2 = resample_conv(f, c, grid, kinked);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].find("evaluated at every tap") != std::string::npos);
  CHECK(seen[0].find("breakpoints") != std::string::npos);
  CHECK(max_diff(out1, out2.to_vector()) == 0);
  resample_conv(f, c, grid, Response::triangle(w));
  CHECK(seen.size() == 1);
  set_resample_conv_fallback_handler(previous);
  resample_conv(f, c, grid, Response::callable(tri, tl, th, dtri));  // the previous handler is back: ours is not called
  CHECK(seen.size() == 1);
}

TEST_CASE("resample_conv: bad breakpoints and named-response arguments raise xgrad::Error", "[resample_conv][errors]") {
  auto one = [](double) { return 1.0; };
  test::require_error([&] { Response::callable(one, -1, 1, {}, {1.5}); },
                      {"Response::callable", "'breakpoints'", "strictly inside", "1.5"});
  test::require_error([&] { Response::callable(one, -1, 1, {}, {-1.0}); },
                      {"Response::callable", "'breakpoints'", "strictly inside"});
  test::require_error([&] { Response::callable(one, -1, 1, {}, {NAN}); }, {"Response::callable", "'breakpoints'"});
  test::require_error(
      [&] {
        Response::callable(one, -1, 1, {}, {0.25, 0.25});
      },
      {"Response::callable", "'breakpoints'", "distinct"});
  test::require_error([] { Response::gaussian(0); }, {"Response::gaussian", "'sigma'"});
  test::require_error([] { Response::gaussian(1, -2); }, {"Response::gaussian", "'truncate'"});
  test::require_error([] { Response::hann(-1); }, {"Response::hann", "'width'"});
  test::require_error([] { Response::box(INFINITY); }, {"Response::box", "'width'"});
  test::require_error([] { Response::triangle(0); }, {"Response::triangle", "'width'"});
  test::require_error([] { Response::bspline(5, 1); }, {"Response::bspline", "'order'", "5"});
  test::require_error([] { Response::bspline(2, 0); }, {"Response::bspline", "'h'"});
  test::require_error([] { Response::lanczos(0); }, {"Response::lanczos", "'a'"});
  test::require_error([] { Response::lanczos(2, -1); }, {"Response::lanczos", "'scale'"});
  CHECK(Response::bspline(4, 0.5).breakpoints() == std::vector<double>{-0.5, 0.0, 0.5});
  CHECK(Response::triangle(2).breakpoints() == std::vector<double>{0.0});
  CHECK(Response::box(2).breakpoints().empty());
  CHECK(Response::gaussian(1).name() == "gaussian");
  CHECK(Response::bspline(3, 1).name() == "bspline3");
}

TEST_CASE("resample_conv: a breakpoint table is bit-identical with 1 and 2 threads", "[resample_conv][threads]") {
  Generator gen(107);
  const std::int64_t B = 20000;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / (B - 1), B);
  const FineGrid pts = FineGrid::points(random_points(B, gen));
  for (const Response& r : {Response::triangle(0.03), Response::bspline(4, 0.008)})
    for (const FineGrid* grid : {&uni, &pts})
      for (std::int64_t N : {3, 20}) {
        INFO(r.name() << " N=" << N << " uniform=" << grid->is_uniform());
        const Tensor f0 = Tensor::randn({N, B}, gen, kFloat32);
        const Tensor c0 = coarse_in(N, 300, gen, 0.015, kFloat32);
        const Tensor g0 = Tensor::randn({N, 300}, gen, kFloat32);
        test::require_thread_deterministic([&] {
          // A fresh response each time, so the tables are built under the thread count too.
          const Response fresh = r.name() == "triangle" ? Response::triangle(0.03) : Response::bspline(4, 0.008);
          Tensor f = f0.clone_data().set_requires_grad();
          Tensor c = c0.clone_data().set_requires_grad();
          Tensor y = resample_conv(f, c, *grid, fresh);
          y.backward(g0);
          return Tensors{y, f.grad(), c.grad()};
        });
      }
}
