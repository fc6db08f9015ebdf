// Tests for ops/resample_conv.*: gradcheck of the three gradients, the accuracy contract against an
// exact float64 dense reference, PyTorch parity (einsum with a dense T built in torch from the same
// response), 1-vs-2-thread bit equality, and every bad input.
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "support.hpp"
#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/resample_kernels.hpp"
#include "xgrad/ops/kernels/resample_simd512.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {

// The seed's response: cos^2(pi d / w) on |d| <= w/2.
Response cos2(double w) {
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); });
}

// Sorted uniform random fine points on [0, 1] (first and last pinned to the ends).
Tensor random_fine(std::int64_t B, Generator& gen, Dtype dt = kFloat64) {
  std::vector<double> x(static_cast<std::size_t>(B));
  for (auto& v : x) v = gen.uniform();
  std::sort(x.begin(), x.end());
  x.front() = 0;
  x.back() = 1;
  return Tensor::from_vector(x, {B}, dt);
}

// Coarse points in [-margin, 1 + margin], with one point near each end of every row.
Tensor coarse_points(std::int64_t N, std::int64_t A, Generator& gen, double margin, Dtype dt = kFloat64) {
  std::vector<double> c(static_cast<std::size_t>(N * A));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t a = 0; a < A; ++a) {
      double v = gen.uniform(-margin, 1 + margin);
      if (a == 0) v = gen.uniform(-margin, margin);
      if (a == 1) v = 1 + gen.uniform(-margin, margin);
      c[static_cast<std::size_t>(n * A + a)] = v;
    }
  return Tensor::from_vector(c, {N, A}, dt);
}

// Exact dense reference in float64 and the contract's scale max_out sum_b |r||f|.
struct Reference {
  std::vector<double> out;
  double scale = 0;
};
Reference dense_reference(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& r) {
  const std::vector<double> fv = f.to_vector(), cv = coarse.to_vector();
  const std::int64_t B = grid.size(), N = coarse.size(0), A = coarse.size(1);
  const std::int64_t P = f.numel() / (N * B);
  Reference ref;
  ref.out.assign(static_cast<std::size_t>(P * N * A), 0.0);
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t a = 0; a < A; ++a) {
        double s = 0, sabs = 0;
        for (std::int64_t b = 0; b < B; ++b) {
          const double d = cv[static_cast<std::size_t>(n * A + a)] - grid.at(b);
          if (d < r.lo() || d > r.hi()) continue;
          const double t = r(d) * fv[static_cast<std::size_t>((p * N + n) * B + b)];
          s += t;
          sabs += std::abs(t);
        }
        ref.out[static_cast<std::size_t>((p * N + n) * A + a)] = s;
        ref.scale = std::max(ref.scale, sabs);
      }
  return ref;
}

double max_abs_diff(const Tensor& a, const std::vector<double>& b) {
  const std::vector<double> av = a.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < av.size(); ++i) m = std::max(m, std::abs(av[i] - b[i]));
  return m;
}

// Torch code building the dense T from the same response, then the seed's einsum.
const char* kTorchCos2 = R"(
import math
d = coarse[:, :, None] - x[None, None, :]
T = torch.where((d >= -w / 2) & (d <= w / 2), torch.cos(math.pi * d / w) ** 2, torch.zeros((), dtype=d.dtype))
out = torch.einsum('nab,...nb->...na', T, f)
)";

const char* kTorchSampled = R"(
K = v.shape[0]
delta = (hi - lo) / (K - 1)
d = coarse[:, :, None] - x[None, None, :]
u = (d - lo) / delta
i = torch.clamp(torch.floor(u.detach()), 0, K - 2).long()
s = u - i.to(u.dtype)
vx = torch.cat([(2 * v[0] - v[1]).reshape(1), v, (2 * v[-1] - v[-2]).reshape(1)])
vm, v0, v1, v2 = vx[i], vx[i + 1], vx[i + 2], vx[i + 3]
if cubic:
    r = 0.5 * (2 * v0 + (v1 - vm) * s + (2 * vm - 5 * v0 + 4 * v1 - v2) * s ** 2 + (3 * v0 - vm - 3 * v1 + v2) * s ** 3)
else:
    r = v0 + (v1 - v0) * s
T = torch.where((d >= lo) & (d <= hi), r, torch.zeros((), dtype=d.dtype))
out = torch.einsum('nab,...nb->...na', T, f)
)";

std::string with_params(const std::string& code, const std::string& params) { return params + code; }

}  // namespace

TEST_CASE("resample_conv: gradcheck with respect to f and coarse (callable, uniform and non-uniform grids)",
          "[resample_conv]") {
  Generator gen(11);
  const double w = 0.3;
  const Response r = cos2(w);
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / 29, 30);
  const FineGrid pts = FineGrid::points(random_fine(30, gen));
  for (const FineGrid* grid : {&uni, &pts})
    for (const Shape& fs : {Shape{3, 30}, Shape{2, 3, 30}}) {
      INFO((grid->is_uniform() ? "uniform " : "points ") << shape_str(fs));
      Tensor f = test::randn_leaf(fs, gen);
      Tensor c = coarse_points(3, 5, gen, 0.1);
      c.set_requires_grad();
      test::require_gradcheck([&](const Tensors& in) { return resample_conv(in[0], in[1], *grid, r); }, {f, c});
    }
}

TEST_CASE("resample_conv: gradcheck of a sampled response (f, coarse and values)", "[resample_conv]") {
  Generator gen(12);
  const FineGrid uni = FineGrid::uniform(-0.05, 1.1 / 39, 40);
  const FineGrid pts = FineGrid::points(random_fine(40, gen));
  for (Interp interp : {Interp::linear, Interp::cubic})
    for (const FineGrid* grid : {&uni, &pts})
      for (std::int64_t K : {2, 3, 9}) {
        INFO((grid->is_uniform() ? "uniform" : "points") << " K=" << K << " cubic=" << (interp == Interp::cubic));
        Tensor f = test::randn_leaf({2, 3, 40}, gen);
        Tensor c = coarse_points(3, 6, gen, 0.1);
        c.set_requires_grad();
        Tensor v = test::randn_leaf({K}, gen);
        test::require_gradcheck(
            [&](const Tensors& in) {
              return resample_conv(in[0], in[1], *grid, Response::sampled(in[2], -0.12, 0.2, interp));
            },
            {f, c, v});
      }
}

TEST_CASE("resample_conv: gradcheck of a sampled response evaluated through its polyphase table", "[resample_conv]") {
  // A tolerance >= 1e-9 makes float64 use the tabulated path float32 takes by default, so its
  // values gradient (the adjoint of the table's construction) is checked by finite differences.
  Generator gen(17);
  const FineGrid uni = FineGrid::uniform(-0.05, 1.1 / 79, 80);
  ResampleConvOptions opt;
  opt.tolerance = 1e-6;
  for (Interp interp : {Interp::linear, Interp::cubic})
    for (std::int64_t K : {2, 5, 12}) {
      INFO("K=" << K << " cubic=" << (interp == Interp::cubic));
      Tensor f = test::randn_leaf({2, 3, 80}, gen);
      Tensor c = coarse_points(3, 9, gen, 0.1);
      Tensor v = test::randn_leaf({K}, gen);
      test::require_gradcheck(
          [&](const Tensors& in) {
            return resample_conv(in[0], c, uni, Response::sampled(in[1], -0.12, 0.2, interp), opt);
          },
          {f, v});
    }
}

TEST_CASE("resample_conv: float32 values gradient through the table agrees with the exact float64 one",
          "[resample_conv][accuracy]") {
  Generator gen(18);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 3999, 4000);
  const Tensor f64 = Tensor::rand({3, 4000}, gen);
  const Tensor c64 = coarse_points(3, 200, gen, 0.02);
  const Tensor g64 = Tensor::randn({3, 200}, gen);
  // Random values, and degenerate ones whose table alone would be exact at degree 1 with one phase
  // (zeros, a constant, a ramp): the gradient was 1.5% off through such a table (Note [Values
  // gradient through the table]).
  std::vector<double> ramp(40);
  for (std::size_t k = 0; k < ramp.size(); ++k) ramp[k] = static_cast<double>(k) / 39.0;
  const std::pair<const char*, Tensor> cases[] = {{"random", Tensor::rand({40}, gen)},
                                                  {"zeros", Tensor::zeros({40}, kFloat64)},
                                                  {"constant", Tensor::full({40}, 0.5, kFloat64)},
                                                  {"ramp", Tensor::from_vector(ramp, {40}, kFloat64)}};
  for (const auto& [name, v64] : cases) {
    auto values_grad = [&](Dtype dt) {
      Tensor v = v64.to(dt).detach().set_requires_grad();
      const Tensor out = resample_conv(f64.to(dt), c64.to(dt), grid, Response::sampled(v, -0.02, 0.02));
      xgrad::sum(xgrad::mul(out, g64.to(dt))).backward();
      return v.grad().to(kFloat64).to_vector();
    };
    const auto [err, scale] = test::max_error(values_grad(kFloat32), values_grad(kFloat64));
    INFO(name << " values: max error " << err << " of max |grad| " << scale);
    CHECK(err <= 1e-4 * scale);
  }
}

TEST_CASE("resample_conv: accuracy contract against an exact float64 dense reference", "[resample_conv][accuracy]") {
  Generator gen(13);
  struct Case {
    const char* name;
    double w;
    std::int64_t B;
    bool uniform;
  };
  // The seed's geometry scaled down in B (same support in points: w/dx = 1500 for the first), a
  // wide-support case and a non-uniform grid.
  for (const Case& cs : {Case{"seed-like", 0.03, 50000, true}, Case{"few taps", 0.05, 200, true},
                         Case{"non-uniform", 0.05, 4000, false}})
    for (Dtype dt : {kFloat32, kFloat64}) {
      INFO(cs.name << " " << dtype_name(dt));
      const Response r = cos2(cs.w);
      const FineGrid grid = cs.uniform ? FineGrid::uniform(0.0, 1.0 / static_cast<double>(cs.B - 1), cs.B)
                                       : FineGrid::points(random_fine(cs.B, gen));
      const std::int64_t N = 3, A = 40;
      const Tensor f64 = Tensor::randn({N, cs.B}, gen, kFloat64);
      const Tensor c64 = coarse_points(N, A, gen, cs.w / 2);
      // The reference sees exactly the values the op sees (f and coarse rounded to dt).
      const Tensor f = f64.to(dt), c = c64.to(dt);
      const Reference ref = dense_reference(f, c, grid, r);
      const Tensor out = resample_conv(f, c, grid, r);
      const double err = max_abs_diff(out, ref.out);
      const double bound = (dt == kFloat32 ? 1e-5 : 1e-12) * ref.scale;
      INFO("max abs error " << err << ", bound " << bound << " (scale " << ref.scale << ")");
      CHECK(err <= bound);
      // The coarse gradient's table meets the same contract for r' (checked in float64).
      if (dt == kFloat64) {
        const Response dr = Response::callable([r](double d) { return r.derivative(d); }, r.lo(), r.hi());
        const Reference dref = dense_reference(f, c, grid, dr);
        Tensor cg = c.clone_data().set_requires_grad();
        resample_conv(f, cg, grid, r).backward(Tensor::ones({N, A}, dt));
        const double derr = max_abs_diff(cg.grad(), dref.out);
        INFO("coarse gradient max abs error " << derr << ", scale " << dref.scale);
        CHECK(derr <= 1e-12 * dref.scale);
      }
    }
}

TEST_CASE("resample_conv: exact mode and coarse tolerance", "[resample_conv][accuracy]") {
  Generator gen(14);
  const Response r = cos2(0.05);
  const FineGrid grid = FineGrid::uniform(0.0, 1e-3, 1001);
  const Tensor f = Tensor::randn({2, 1001}, gen, kFloat64);
  const Tensor c = coarse_points(2, 30, gen, 0.02);
  const Reference ref = dense_reference(f, c, grid, r);
  ResampleConvOptions exact;
  exact.exact = true;
  CHECK(max_abs_diff(resample_conv(f, c, grid, r, exact), ref.out) <= 1e-14 * ref.scale);
  ResampleConvOptions coarse_tol;
  coarse_tol.tolerance = 1e-4;
  const ResampleConvTableInfo fast = resample_conv_prepare(grid, r, kFloat64, coarse_tol);
  const ResampleConvTableInfo dflt = resample_conv_prepare(grid, r, kFloat64);
  INFO("fast: degree " << fast.degree << " pieces " << fast.pieces << "; default: degree " << dflt.degree << " pieces "
                       << dflt.pieces);
  CHECK(std::string(dflt.method) == "polyphase");
  CHECK(fast.measured_error <= 1e-4);
  CHECK(dflt.measured_error <= 1e-14);
  CHECK(fast.degree * fast.pieces <= dflt.degree * dflt.pieces);
  const double err = max_abs_diff(resample_conv(f, c, grid, r, coarse_tol), ref.out);
  CHECK(err <= 1e-4 * ref.scale);
}

TEST_CASE("resample_conv: values and gradients match PyTorch einsum with a dense T", "[resample_conv][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("resample_conv_") + std::string(dtype_name(dt)));
    Generator gen(15);
    const double w = 0.2;
    const FineGrid uni = FineGrid::uniform(0.0, 1.0 / 63, 64);
    const FineGrid pts = FineGrid::points(random_fine(64, gen));
    int k = 0;
    for (const FineGrid* grid : {&uni, &pts})
      for (const Shape& fs : {Shape{4, 64}, Shape{2, 4, 64}}) {
        Tensor f = test::randn_leaf(fs, gen, dt);
        Tensor c = coarse_points(4, 7, gen, w / 2, dt).set_requires_grad();
        Tensor x = grid->to_tensor(dt);
        const FineGrid g = *grid;
        batch.add(fmt::format("cos2_{}", k++), with_params(kTorchCos2, fmt::format("w = {:.17g}\n", w)),
                  {{"f", f}, {"coarse", c}, {"x", x, false}},
                  [g, w](const Tensors& in) { return resample_conv(in[0], in[1], g, cos2(w)); });
        for (Interp interp : {Interp::linear, Interp::cubic}) {
          Tensor v = test::randn_leaf({11}, gen, dt);
          const double lo = -0.12, hi = 0.09;
          batch.add(
              fmt::format("sampled_{}", k++),
              with_params(kTorchSampled, fmt::format("lo = {:.17g}\nhi = {:.17g}\ncubic = {}\n", lo, hi,
                                                     interp == Interp::cubic ? "True" : "False")),
              {{"f", f}, {"coarse", c}, {"x", x, false}, {"v", v}},
              [g, lo, hi, interp](const Tensors& in) {
                return resample_conv(in[0], in[1], g, Response::sampled(in[3], lo, hi, interp));
              },
              // float32: the coarse gradient sums 64 terms of the response's slope times f, of
              // order 10^2 to 10^3, so a result near 1 carries their rounding (~1e-4)
              -1, dt == kFloat32 ? 1e-3 : -1);
        }
      }
    batch.run();
  }
}

TEST_CASE("resample_conv: bit-identical with 1 and 2 threads", "[resample_conv][threads]") {
  Generator gen(16);
  const std::int64_t B = 20000;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = FineGrid::points(random_fine(B, gen));
  const Response r = cos2(0.03);
  // N = 3 takes the private-buffer path of the f gradient, N = 20 the row-ownership path.
  for (std::int64_t N : {3, 20})
    for (const FineGrid* grid : {&uni, &pts})
      for (bool sampled : {false, true}) {
        INFO("N=" << N << " uniform=" << grid->is_uniform() << " sampled=" << sampled);
        const Tensor f0 = Tensor::randn({N, B}, gen, kFloat32);
        const Tensor c0 = coarse_points(N, 300, gen, 0.015, kFloat32);
        const Tensor v0 = Tensor::rand({33}, gen, kFloat32);
        const Tensor g0 = Tensor::randn({N, 300}, gen, kFloat32);
        test::require_thread_deterministic([&] {
          Tensor f = f0.clone_data().set_requires_grad();
          Tensor c = c0.clone_data().set_requires_grad();
          Tensor v = v0.clone_data().set_requires_grad();
          const Response resp = sampled ? Response::sampled(v, -0.015, 0.015) : r;
          Tensor y = resample_conv(f, c, *grid, resp);
          y.backward(g0);
          Tensors res{y, f.grad(), c.grad()};
          if (sampled) res.push_back(v.grad());
          return res;
        });
      }
}

TEST_CASE("resample_conv: the AVX-512 and the 8-lane float32 loops agree", "[resample_conv][simd]") {
  namespace rs = xgrad::detail::resample;
  if (!rs::simd512_kernels()) WARN("no AVX-512 on this CPU (or XGRAD_CPU_CAPABILITY=avx2): both runs use 8 lanes");
  Generator gen(21);
  const std::int64_t B = 6007, A = 150;  // odd lengths: vector tails at both widths
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const Tensor f0 = Tensor::randn({2, 5, B}, gen, kFloat32);
  const Tensor c0 = coarse_points(5, A, gen, 0.02, kFloat32);
  const Tensor v0 = Tensor::rand({37}, gen, kFloat32);
  const Tensor g0 = Tensor::randn({2, 5, A}, gen, kFloat32);
  for (bool sampled : {false, true}) {
    INFO("sampled=" << sampled);
    auto run = [&](bool wide) {
      xgrad::detail::set_avx512_enabled(wide);
      Tensor f = f0.clone_data().set_requires_grad();
      Tensor v = v0.clone_data().set_requires_grad();
      const Response resp = sampled ? Response::sampled(v, -0.02, 0.02) : cos2(0.04);
      Tensor y = resample_conv(f, c0, grid, resp);
      y.backward(g0);
      xgrad::detail::set_avx512_enabled(true);
      Tensors res{y, f.grad()};
      if (sampled) res.push_back(v.grad());
      return res;
    };
    const Tensors wide = run(true), narrow = run(false);
    // The values gradient's loop does the same operations per element at either width: identical.
    if (sampled) CHECK(wide[2].to_vector() == narrow[2].to_vector());
    // The forward's dot products sum their lanes in a different tree, and the f gradient adds
    // overlapping segments of nearby outputs in a width-dependent order: equal to float32 rounding.
    for (int i : {0, 1}) {
      INFO((i == 0 ? "output" : "f gradient"));
      const auto [err, scale] = test::max_error(wide[static_cast<std::size_t>(i)].to_vector(),
                                                narrow[static_cast<std::size_t>(i)].to_vector());
      INFO("max difference " << err << " of max |value| " << scale);
      CHECK(err <= 1e-6 * scale);
      CHECK(scale > 0);
    }
  }
}

TEST_CASE("resample_conv_graph_bytes: the located taps a forward keeps, and its bad input", "[resample_conv]") {
  // Proportional to the outputs, a few dozen bytes each (the seed's N*A = 10,000: well under 1 MB).
  const std::size_t one = resample_conv_graph_bytes(1);
  CHECK(one >= 24);
  CHECK(one <= 64);
  CHECK(resample_conv_graph_bytes(0) == 0);
  test::require_error([] { FineGrid::uniform(0, 1, std::int64_t{1} << 62).to_tensor(); }, {"too large", "bytes"});
  CHECK(resample_conv_graph_bytes(10000) == 10000 * one);
  test::require_error([] { resample_conv_graph_bytes(-1); }, {"resample_conv_graph_bytes", "'outputs'", "-1"});
}

TEST_CASE("resample_conv: bad inputs raise xgrad::Error naming the argument", "[resample_conv][errors]") {
  const FineGrid grid = FineGrid::uniform(0.0, 0.1, 11);
  const Response r = cos2(0.3);
  const Tensor f = Tensor::zeros({2, 11}, kFloat64);
  const Tensor c = Tensor::zeros({2, 4}, kFloat64);
  test::require_error([&] { resample_conv(Tensor::zeros({11}, kFloat64), c, grid, r); },
                      {"resample_conv", "'f'", "(11,)"});
  test::require_error([&] { resample_conv(f, Tensor::zeros({8}, kFloat64), grid, r); },
                      {"resample_conv", "'coarse'", "(8,)"});
  test::require_error(
      [&] {
        resample_conv(f, Tensor::zeros({3, 4}, kFloat64), grid, r);
      },
      {"resample_conv", "N differs", "(2, 11)", "(3, 4)"});
  test::require_error(
      [&] {
        resample_conv(Tensor::zeros({2, 12}, kFloat64), c, grid, r);
      },
      {"resample_conv", "'f'", "(2, 12)", "'grid'", "11"});
  test::require_error(
      [&] {
        resample_conv(f, Tensor::zeros({2, 4}, kFloat32), grid, r);
      },
      {"resample_conv", "dtype", "'coarse'", "float32"});
  for (double bad : {NAN, INFINITY, -INFINITY}) {
    Tensor cb = Tensor::zeros({2, 4}, kFloat64);
    cb.data<double>()[6] = bad;
    test::require_error([&] { resample_conv(f, cb, grid, r); }, {"resample_conv", "'coarse'", "non-finite", "[1, 2]"});
  }
  auto fn = [](double d) { return d; };
  test::require_error([&] { Response::callable(fn, 0.1, 0.1); }, {"Response::callable", "empty or inverted", "'lo'"});
  test::require_error([&] { Response::callable(fn, 0.2, -0.2); }, {"Response::callable", "empty or inverted", "'hi'"});
  test::require_error([&] { Response::callable(fn, -INFINITY, 0.2); }, {"Response::callable", "finite"});
  test::require_error([&] { Response::sampled(Tensor::zeros({4}, kFloat64), 1.0, 0.0); },
                      {"Response::sampled", "empty or inverted"});
  test::require_error([&] { Response::sampled(Tensor::zeros({1}, kFloat64), -1.0, 1.0); },
                      {"Response::sampled", "'values'", "K >= 2", "(1,)"});
  test::require_error(
      [&] {
        Response::sampled(Tensor::zeros({2, 3}, kFloat64), -1.0, 1.0);
      },
      {"Response::sampled", "'values'", "(2, 3)"});
  test::require_error([&] { Response::callable(Response::Fn(), -1.0, 1.0); }, {"Response::callable", "'fn'"});
  test::require_error(
      [&] {
        FineGrid::points(Tensor::of({0.0, 0.5, 0.5, 1.0}, kFloat64));
      },
      {"FineGrid::points", "'x'", "strictly increasing", "x[2]"});
  test::require_error(
      [&] {
        FineGrid::points(Tensor::of({0.0, 0.5, 0.2}, kFloat64));
      },
      {"FineGrid::points", "'x'", "strictly increasing"});
  test::require_error([&] { FineGrid::points(Tensor::of({0.0, NAN}, kFloat64)); }, {"FineGrid::points", "non-finite"});
  test::require_error([&] { FineGrid::uniform(0.0, 0.0, 10); }, {"FineGrid::uniform", "'dx'"});
  test::require_error([&] { FineGrid::uniform(0.0, 0.1, -1); }, {"FineGrid::uniform", "'size'", "-1"});
  test::require_error([&] { resample_conv(f, c, grid, Response::sampled(Tensor::zeros({5}, kFloat32), -0.1, 0.1)); },
                      {"resample_conv", "dtype", "'values'"});
  // The coarse gradient of a callable needs its derivative.
  const Response no_deriv = Response::callable([](double d) { return 1 - std::abs(d) / 0.15; }, -0.15, 0.15);
  Tensor cg = c.clone_data().set_requires_grad();
  test::require_error([&] { resample_conv(f, cg, grid, no_deriv); }, {"resample_conv", "'coarse'", "derivative"});
  // ... but without grad on coarse it is fine, and the f gradient works.
  Tensor fg = f.clone_data().set_requires_grad();
  resample_conv(fg, c, grid, no_deriv).backward(Tensor::ones({2, 4}, kFloat64));
  CHECK(fg.grad().defined());
}

// ---- sizes (Note [Checked sizes]), zero-length dimensions and call history ----------------------

TEST_CASE("resample_conv: zero-length sizes in the forward and all three gradients", "[resample_conv][sizes]") {
  struct Case {
    const char* name;
    Shape f_shape;  // (batch..., N, B)
    std::int64_t A;
    bool uniform;
  };
  const std::vector<Case> cases = {
      {"N0", {0, 40}, 5, true},
      {"A0", {3, 40}, 0, true},
      {"B0", {3, 0}, 5, true},
      {"B0_points", {3, 0}, 5, false},
      {"batch0", {0, 3, 40}, 5, true},
      {"N0_A0_B0", {0, 0}, 0, true},
      {"batch0_points", {2, 0, 3, 40}, 4, false},
  };
  Generator gen(21);
  for (const Dtype dt : {kFloat32, kFloat64})
    for (const auto& c : cases)
      for (const bool sampled : {false, true}) {
        DYNAMIC_SECTION(c.name << (sampled ? " sampled " : " callable ") << dtype_name(dt)) {
          const std::int64_t B = c.f_shape.back(), N = c.f_shape[c.f_shape.size() - 2];
          Tensor xs = Tensor::linspace(0, 1, B, kFloat64);
          const FineGrid grid =
              c.uniform ? FineGrid::uniform(0, 1.0 / 39, B) : FineGrid::points(xs, /*detect_uniform=*/false);
          Tensor values = test::randn_leaf({9}, gen, dt);
          const Response r = sampled ? Response::sampled(values, -0.1, 0.1) : cos2(0.2);
          Tensor f = test::randn_leaf(c.f_shape, gen, dt);
          Tensor coarse = test::uniform_leaf({N, c.A}, gen, 0, 1, dt);
          Tensor out = resample_conv(f, coarse, grid, r);
          Shape want = c.f_shape;
          want.back() = c.A;
          REQUIRE(out.shape() == want);
          for (double v : out.to_vector()) CHECK(v == 0.0);  // empty sums (B = 0) or no outputs
          out.backward(Tensor::ones(out.shape(), dt));
          REQUIRE(f.grad().shape() == f.shape());
          REQUIRE(coarse.grad().shape() == coarse.shape());
          for (double v : f.grad().to_vector()) CHECK(v == 0.0);
          for (double v : coarse.grad().to_vector()) CHECK(v == 0.0);
          if (sampled) {
            REQUIRE(values.grad().shape() == values.shape());
            for (double v : values.grad().to_vector()) CHECK(v == 0.0);
          }
        }
      }
  // FineGrid of no point, and the size checks of its helpers.
  CHECK(FineGrid::uniform(0, 1, 0).size() == 0);
  CHECK(FineGrid::points(Tensor::zeros({0}, kFloat64)).size() == 0);
  CHECK(FineGrid::uniform(0, 1, 0).to_tensor().numel() == 0);
  CHECK(resample_conv_graph_bytes(0) == 0);
  test::require_error([] { FineGrid::uniform(0, 1, std::int64_t{1} << 62).to_tensor(); }, {"too large", "bytes"});
  test::require_error([] { resample_conv_graph_bytes(std::numeric_limits<std::int64_t>::max()); },
                      {"resample_conv_graph_bytes", "'outputs'", "bytes asked for"});
}

TEST_CASE("resample_conv: a response of minimal support matches the dense sum", "[resample_conv][sizes]") {
  Generator gen(8);
  const FineGrid grid = FineGrid::uniform(0, 0.01, 101);
  for (const Dtype dt : {kFloat32, kFloat64})
    for (const double w : {0.004, 0.01, 0.0100001, 1e-7, 1e-9}) {
      // Narrower than, equal to, just wider than the fine spacing, and 1e-5 of it (outputs see 0 or 1 tap).
      // Zero at both ends, so whether an end tap is counted does not matter.
      const Response r = Response::callable([w](double d) { return 1 - (2 * d / w) * (2 * d / w); }, -w / 2, w / 2);
      Tensor vals = Tensor::of({0.0, 1.0, 0.0}, dt).set_requires_grad();
      const Response rs = Response::sampled(vals, -w / 2, w / 2, Interp::linear);
      // Coarse points on fine points, between them and outside the grid.
      Tensor coarse = Tensor::from_vector({0, 0.005, 0.01, 0.5, 0.505, 0.999, 1.0, 1.003, -0.002, 0.3}, {1, 10}, dt);
      Tensor f = Tensor::randn({2, 1, 101}, gen, dt);
      for (const Response* resp : {&r, &rs}) {
        INFO("w " << w << " " << dtype_name(dt) << (resp->is_sampled() ? " sampled" : " callable"));
        const Tensor out = resample_conv(f, coarse, grid, *resp);
        const Reference ref = dense_reference(f, coarse, grid, *resp);
        // Positions carry the rounding of the coordinates (up to 1.003 here): relative to the
        // support, 8 ulps of them (1.8e-8 of a 1e-7 support).
        const double tol = std::max(dt == kFloat32 ? 1e-5 : 1e-12, 8 * DBL_EPSILON * 1.003 / w);
        CHECK(max_abs_diff(out, ref.out) <= tol * std::max(1.0, ref.scale));
      }
      Tensor y = resample_conv(f, coarse, grid, rs);
      y.backward(Tensor::ones(y.shape(), dt));
      CHECK(vals.grad().shape() == Shape{3});
      for (double v : vals.grad().to_vector()) CHECK(std::isfinite(v));
    }
  // A support so narrow that rounding alone decides which fine points it holds is an Error, not
  // arbitrary sums (Note [Support width and rounding]); so is one too narrow for the tables' cells.
  for (const double w : {1e-14, 1e-280}) {
    const Response tiny = Response::callable([w](double d) { return 1 - (2 * d / w) * (2 * d / w); }, -w / 2, w / 2);
    test::require_error(
        [&] {
          resample_conv(Tensor::ones({1, 101}), Tensor::zeros({1, 3}), grid, tiny);
        },
        {"resample_conv", "'response'", "too narrow"});
  }
  test::require_error([] { Response::callable([](double) { return 1.0; }, 0, 1e-300); },
                      {"Response::callable", "too narrow"});
}

namespace {
// One forward and backward (to f, coarse and the sampled values, a leaf kept by the response) from
// fresh f and coarse leaves: the bits to compare. The response object is reused as given, so its
// state (caches, search hints) carries over between calls.
Tensors resample_run(const Tensor& f0, const Tensor& c0, const FineGrid& grid, const Response& r,
                     const ResampleConvOptions& o = {}) {
  Tensor f = f0.detach().clone_data().set_requires_grad();
  Tensor c = c0.detach().clone_data().set_requires_grad();
  Tensor v = r.is_sampled() ? r.values() : Tensor();
  if (v.defined()) v.zero_grad();
  Tensor out = resample_conv(f, c, grid, r, o);
  out.backward(Tensor::ones(out.shape(), out.dtype()));
  Tensors res{out, f.grad(), c.grad()};
  if (v.defined()) res.push_back(v.grad());
  return res;
}
}  // namespace

TEST_CASE("resample_conv: results do not depend on call history (caches make calls faster, never different)",
          "[resample_conv][history]") {
  Generator gen(99);
  const FineGrid grid = FineGrid::uniform(0, 1.0 / 2999, 3000);
  const FineGrid other_grids[] = {FineGrid::uniform(0, 1.0 / 999, 1000), FineGrid::uniform(0.3, 1.0 / 7000, 5000),
                                  FineGrid::points(random_fine(500, gen)), FineGrid::uniform(0, 1.0 / 2999, 3000)};
  for (const Dtype dt : {kFloat32, kFloat64}) {
    Tensor f = Tensor::randn({2, 3, 3000}, gen, dt);
    Tensor coarse = coarse_points(3, 50, gen, 0.02, dt);
    // A sampled response (its table search) and a callable one (its table cache), each used first
    // through one Response object and later through the same object after other calls.
    std::vector<double> vv(33);
    for (std::size_t k = 0; k < vv.size(); ++k) vv[k] = std::exp(-0.01 * double(k) * double(k)) + 0.1 * gen.uniform();
    Tensor values = Tensor::from_vector(vv, {33}, dt).set_requires_grad();
    for (const Interp interp : {Interp::cubic, Interp::linear}) {
      const Response sampled = Response::sampled(values, -0.01, 0.01, interp);
      const Response callable = cos2(0.02);
      for (const Response* rp : {&sampled, &callable}) {
        const Response& r = *rp;
        const Tensors first = resample_run(f, coarse, grid, r);
        // Disturb every cache: other grids, spacings, tolerances, dtypes, other values of the same
        // response object, and thread counts.
        for (const FineGrid& og : other_grids)
          for (const Dtype odt : {kFloat32, kFloat64})
            for (const int threads : {1, 2})
              with_num_threads(threads, [&] {
                Tensor of = Tensor::randn({1, og.size()}, gen, odt).mul_(5.0);
                Tensor oc = coarse_points(1, 20, gen, 0.05, odt);
                if (r.is_sampled()) {
                  // The same response object on other grids and (cast) dtypes, and another response.
                  if (odt == dt) resample_run(of, oc, og, r);
                  Tensor ov = Tensor::randn({17}, gen, odt).set_requires_grad();
                  resample_run(of, oc, og, Response::sampled(ov, -0.02, 0.01, interp));
                } else {
                  resample_run(of, oc, og, r);
                }
                if (!r.is_sampled()) {
                  ResampleConvOptions o;
                  o.tolerance = 1e-4;
                  resample_run(of, oc, og, r, o);
                  resample_conv_prepare(og, r, odt, o, true);
                }
              });
        for (const int threads : {2, 1}) {
          const Tensors again = with_num_threads(threads, [&] { return resample_run(f, coarse, grid, r); });
          REQUIRE(again.size() == first.size());
          for (std::size_t k = 0; k < first.size(); ++k) CHECK(bit_equal(first[k], again[k]));
        }
        // A fresh response object (empty caches) gives the same bits too, with the sampled tables'
        // process-wide probe memo emptied as well (Note [Probe memo]).
        detail::resample::clear_probe_memo();
        const Response fresh =
            r.is_sampled() ? Response::sampled(values.detach().clone_data().set_requires_grad(), -0.01, 0.01, interp)
                           : cos2(0.02);
        const Tensors clean = resample_run(f, coarse, grid, fresh);
        for (std::size_t k = 0; k < first.size(); ++k) CHECK(bit_equal(first[k], clean[k]));
      }
    }
  }
}

TEST_CASE(
    "resample_conv: a training step with a learnable sampled response takes no new system memory after "
    "warm-up",
    "[resample_conv][memory]") {
  // Its per-output tap plan and its table are rebuilt on every forward (the values change between
  // steps); they come from the storage cache (core/allocator.hpp), like the tensors, so from the
  // second step on every large buffer is a cached one: no fresh mapping, no page faults.
  Generator gen(41);
  const std::int64_t N = 4, A = 500, B = 20000;
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / (B - 1), B);
  Tensor f = Tensor::rand({N, B}, gen).set_requires_grad();
  const Tensor c = coarse_points(N, A, gen, 0.02).to(kFloat32);  // float32: the tabulated path
  Tensor v = Tensor::rand({64}, gen).set_requires_grad();
  auto train = [&](int k) {
    v.data<float>()[k % 64] += 0.01f;  // new values every step, as an optimizer's update would give
    const Tensor out = resample_conv(f, c, grid, Response::sampled(v, -0.015, 0.015, Interp::cubic));
    sum(out * out).backward();
    REQUIRE(v.grad().defined());  // the values are learned: their gradient is part of the step
    f.zero_grad();
    v.zero_grad();
  };
  train(0);
  train(1);
  const MemoryStats before = memory_stats();
  for (int k = 2; k < 6; ++k) train(k);
  const MemoryStats after = memory_stats();
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.cache_hits - before.cache_hits >= 4 * 3);  // the plan, the table and the output gradient at least
}

TEST_CASE("resample_conv: an exception from a callable response leaves the op as an xgrad::Error naming it",
          "[resample_conv][errors]") {
  const FineGrid grid = FineGrid::uniform(0.0, 0.1, 60);
  const Tensor f = Tensor::ones({2, 60}, kFloat64);
  const Tensor coarse = Tensor::of({{1.0, 2.0, 3.0, 4.0}, {1.5, 2.5, 3.5, 4.5}}, kFloat64);
  const auto boom = [](double d) -> double {
    if (d > 0.25) throw std::runtime_error("boom: outside my model");
    return 1.0 - std::abs(d);
  };
  for (const bool exact : {false, true}) {  // tables, and the per-tap path (TBB tasks)
    INFO("exact = " << exact);
    ResampleConvOptions o;
    o.exact = exact;
    test::require_error([&] { (void)resample_conv(f, coarse, grid, Response::callable(boom, -0.5, 0.5), o); },
                        {"resample_conv", "callable 'fn'", "threw", "boom: outside my model"});
  }
  // the derivative too (for the coarse gradient)
  const auto tri = [](double d) { return 1.0 - std::abs(d); };
  const auto bad_d = [](double) -> double { throw std::logic_error("no slope"); };
  const Tensor c = coarse.clone_data().set_requires_grad();
  test::require_error(
      [&] {
        Tensor y = resample_conv(f, c, grid, Response::callable(tri, -0.5, 0.5, bad_d, {0.0}));
        sum(y).backward();
      },
      {"resample_conv", "callable 'derivative'", "threw", "no slope"});
}
