// Tests for resample_conv's higher-order gradients (create_graph; Note [Create graph] for
// resample_conv in ops/resample_conv.cpp): the responses' derivatives against finite differences,
// gradgradcheck with respect to every combination of f, the coarse points and the sampled values
// (callable, named and sampled responses; uniform and non-uniform grids), third order, the
// refusals (a callable without r'', beyond what a response carries), PyTorch parity of second
// derivatives (torch autograd through a dense T), float32 against float64, and 1-vs-2-thread bit
// equality of the recorded paths.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/core/functional.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {

// cos^2(pi d / w) on |d| <= w/2, with r' and (optionally) r''.
Response cos2(double w, bool second = true) {
  Response::Fn d2;
  if (second) d2 = [w](double d) { return -2 * M_PI * M_PI / (w * w) * std::cos(2 * M_PI * d / w); };
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); }, {}, d2);
}

// A response of the test set: callable, named or sampled (from the values tensor).
struct Kind {
  std::string name;
  std::function<Response(const Tensor& v)> make;
  bool sampled = false;
};

// A fixed response, built once: its tables are cached in it (as a user's layer keeps its response).
std::function<Response(const Tensor&)> fixed(const Response& r) {
  return [r](const Tensor&) { return r; };
}

std::vector<Kind> kinds() {
  return {
      {"cos2 callable", fixed(cos2(0.2))},
      {"gaussian", fixed(Response::gaussian(0.04, 3.0))},
      {"hann", fixed(Response::hann(0.2))},
      {"bspline3", fixed(Response::bspline(3, 0.05))},
      {"bspline4", fixed(Response::bspline(4, 0.04))},
      {"lanczos2", fixed(Response::lanczos(2, 0.05))},
      {"sampled cubic", [](const Tensor& v) { return Response::sampled(v, -0.09, 0.11, Interp::cubic); }, true},
      {"sampled linear", [](const Tensor& v) { return Response::sampled(v, -0.09, 0.11, Interp::linear); }, true},
  };
}

// Sorted random fine points on [0, 1] (ends pinned).
FineGrid random_points(std::int64_t B, Generator& gen) {
  std::vector<double> x(static_cast<std::size_t>(B));
  for (auto& v : x) v = gen.uniform();
  std::sort(x.begin(), x.end());
  x.front() = 0;
  x.back() = 1;
  return FineGrid::points(Tensor::from_vector(x, {B}, kFloat64));
}

Tensor leaf(const Tensor& t, bool grad) { return t.detach().clone_data().set_requires_grad(grad); }

}  // namespace

TEST_CASE("resample_conv create_graph: the responses' derivatives match finite differences",
          "[resample_conv][create_graph]") {
  Generator gen(40);
  const Tensor v = Tensor::randn({7}, gen, kFloat64);
  for (const Kind& k : kinds()) {
    const Response r = k.make(v);
    INFO(k.name);
    const int top = std::min(r.max_derivative_order(), 4);
    CHECK(top >= 2);  // every named response and the sampled ones have r''
    for (int order = 1; order <= top; ++order)
      for (int i = 0; i < 40; ++i) {
        // interior points, not within 1e-4 of a breakpoint, of a sampled lattice node or of 0 (a kink
        // of a B-spline's derivative)
        const double d = r.lo() + (0.02 + 0.96 * gen.uniform()) * (r.hi() - r.lo());
        bool near = std::abs(d) < 1e-4;
        for (double b : r.breakpoints()) near = near || std::abs(d - b) < 1e-4;
        if (k.sampled) {
          const double u = (d - r.lo()) / ((r.hi() - r.lo()) / 6);
          near = near || std::abs(u - std::round(u)) < 1e-3;
        }
        if (near) continue;
        const double h = 1e-6 * (r.hi() - r.lo());
        const double fd = (r.nth_derivative(d + h, order - 1) - r.nth_derivative(d - h, order - 1)) / (2 * h);
        const double an = r.nth_derivative(d, order);
        double scale = 0;  // max |r^(order)| over a few points, for a relative check
        for (int j = 0; j <= 50; ++j)
          scale = std::max(scale, std::abs(r.nth_derivative(r.lo() + j * (r.hi() - r.lo()) / 50, order)));
        INFO("order " << order << " at d = " << d << ": analytic " << an << " numeric " << fd);
        CHECK(std::abs(an - fd) <= 1e-5 * std::max(scale, 1e-300) + 1e-9);
      }
  }
  // the named responses' first and second derivatives agree with derivative()
  const Response g = Response::gaussian(0.3);
  CHECK(g.nth_derivative(0.1, 1) == g.derivative(0.1));
  CHECK(g.nth_derivative(0.1, 0) == g(0.1));
  CHECK(g.max_derivative_order() == 4);
  CHECK(Response::lanczos(3).max_derivative_order() == 2);
  CHECK(cos2(0.2).max_derivative_order() == 2);
  CHECK(cos2(0.2, false).max_derivative_order() == 1);
  CHECK(Response::sampled(v, -1, 1).max_derivative_order() == std::numeric_limits<int>::max());
  // lanczos's r'' near 0 (the Taylor branch) joins the closed form at |x| = 0.1
  const Response l = Response::lanczos(3);
  CHECK(std::abs(l.nth_derivative(0.1 - 1e-12, 2) - l.nth_derivative(0.1 + 1e-12, 2)) < 1e-9);
  test::require_error([&] { (void)l.nth_derivative(0.1, 3); }, {"Response::nth_derivative", "'order'", "lanczos"});
  test::require_error(
      [] { (void)Response::callable([](double) { return 1.0; }, -1, 1, {}, {}, [](double) { return 0.0; }); },
      {"Response::callable", "'second_derivative'", "'derivative'"});
}

TEST_CASE("resample_conv create_graph: gradgradcheck in every combination of f, coarse and values",
          "[resample_conv][create_graph][gradgradcheck]") {
  Generator gen(41);
  const std::int64_t N = 2, A = 3, B = 24;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = random_points(B, gen);
  for (const FineGrid* grid : {&uni, &pts})
    for (const Kind& k : kinds())
      for (int mask = 1; mask < 8; ++mask) {
        const bool rf = mask & 1, rc = mask & 2, rv = mask & 4;
        if (rv && !k.sampled) continue;
        INFO(k.name << (grid->is_uniform() ? " uniform" : " points") << " f " << rf << " coarse " << rc << " values "
                    << rv);
        const Tensor f = leaf(Tensor::randn({2, N, B}, gen, kFloat64), rf);
        const Tensor c = leaf(Tensor::rand({N, A}, gen, kFloat64) * 0.9 + 0.05, rc);
        const Tensor v = leaf(Tensor::randn({7}, gen, kFloat64), rv);
        const FineGrid gr = *grid;
        const auto make = k.make;
        // the op itself, and (every input) a loss quadratic in the output: second derivatives in f alone too
        const GradcheckReport rep =
            gradgradcheck([&](const Tensors& in) { return resample_conv(in[0], in[1], gr, make(in[2])); }, {f, c, v});
        INFO(rep.message);
        CHECK(rep.ok);
        if (mask == 7 || (mask == 3 && !k.sampled)) {
          const GradcheckReport sq = gradgradcheck(
              [&](const Tensors& in) {
                const Tensor y = resample_conv(in[0], in[1], gr, make(in[2]));
                return y * y;
              },
              {f, c, v});
          INFO(sq.message);
          CHECK(sq.ok);
        }
      }
}

TEST_CASE("resample_conv create_graph: third order with responses that carry it", "[resample_conv][create_graph]") {
  Generator gen(42);
  const std::int64_t N = 2, A = 3, B = 20;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = random_points(B, gen);
  const std::vector<Kind> ks = kinds();
  for (const FineGrid* grid : {&uni, &pts})
    for (const Kind& k : ks) {
      if (k.name != "gaussian" && k.name != "sampled cubic" && k.name != "hann") continue;
      INFO(k.name << (grid->is_uniform() ? " uniform" : " points"));
      const Tensor f = test::randn_leaf({N, B}, gen);
      const Tensor c = leaf(Tensor::rand({N, A}, gen, kFloat64) * 0.9 + 0.05, true);
      const Tensor v = leaf(Tensor::randn({7}, gen, kFloat64), k.sampled);
      const FineGrid gr = *grid;
      const auto make = k.make;
      // fn = d loss / d coarse, recorded: its gradgradcheck checks third derivatives of the loss
      const auto fn = [&](const Tensors& in) {
        AutoGradMode on(true);  // gradgradcheck evaluates fn once without grad
        const Tensor y = resample_conv(in[0], in[1], gr, make(in[2]));
        return xgrad::grad({sum(y * y)}, {in[1]}, {}, std::nullopt, /*create_graph=*/true)[0];
      };
      const GradcheckReport rep = gradgradcheck(fn, {f, c, v});
      INFO(rep.message);
      CHECK(rep.ok);
    }
}

TEST_CASE("resample_conv create_graph: coarse derivatives beyond the response's are refused, naming the order",
          "[resample_conv][create_graph]") {
  Generator gen(43);
  const FineGrid grid = FineGrid::uniform(0.0, 1.0 / 29, 30);
  const Tensor f = test::randn_leaf({3, 30}, gen);
  const Tensor c = leaf(Tensor::rand({3, 4}, gen, kFloat64) * 0.8 + 0.1, true);
  // a callable with r' only: first order in coarse with history, mixed second order (needs r' only),
  // but no second order in coarse
  const Response r1 = cos2(0.2, false);
  const Tensor y = sum(pow(resample_conv(f, c, grid, r1), 2.0));
  const Tensors g = xgrad::grad({y}, {f, c}, {}, std::nullopt, /*create_graph=*/true);
  REQUIRE(g[1].requires_grad());
  const Tensor mixed = xgrad::grad({sum(g[1])}, {f}, {}, /*retain_graph=*/true)[0];
  // the same mixed derivative with a response that has r'': r'' does not enter it
  const Tensor y2 = sum(pow(resample_conv(f, c, grid, cos2(0.2)), 2.0));
  const Tensor gc2 = xgrad::grad({y2}, {c}, {}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(allclose(mixed, xgrad::grad({sum(gc2)}, {f}, {}, true)[0], 1e-13, 1e-13));
  test::require_error([&] { (void)xgrad::grad({sum(g[1])}, {c}); },
                      {"resample_conv", "order 2", "'coarse'", "callable", "d2fn"});
  // with r'': second order in coarse works, the third is refused
  const Tensor gcc = xgrad::grad({sum(gc2)}, {c}, {}, std::nullopt, /*create_graph=*/true)[0];
  test::require_error([&] { (void)xgrad::grad({sum(gcc)}, {c}); },
                      {"resample_conv", "order 3", "'coarse'", "at most its second derivative"});
  // lanczos carries r'' only; a gaussian carries up to r'''' (the fifth order is refused)
  Tensor t = resample_conv(f, c, grid, Response::lanczos(2, 0.04));
  for (int k = 1; k <= 2; ++k) t = xgrad::grad({sum(t * t)}, {c}, {}, std::nullopt, /*create_graph=*/true)[0];
  test::require_error([&] { (void)xgrad::grad({sum(t * t)}, {c}); }, {"resample_conv", "order 3", "lanczos"});
  t = resample_conv(f, c, grid, Response::gaussian(0.03));
  for (int k = 1; k <= 4; ++k) t = xgrad::grad({sum(t * t)}, {c}, {}, std::nullopt, /*create_graph=*/true)[0];
  test::require_error([&] { (void)xgrad::grad({sum(t * t)}, {c}); }, {"resample_conv", "order 5", "gaussian"});
  // a sampled response has every order: its r'''' is 0 (cubic), so the fifth derivative is too
  const Tensor v = test::randn_leaf({8}, gen);
  t = resample_conv(f, c, grid, Response::sampled(v, -0.1, 0.12));
  for (int k = 1; k <= 4; ++k) t = xgrad::grad({sum(t)}, {c}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor g5 = xgrad::grad({sum(t)}, {c})[0];
  CHECK(max(abs(g5)).item() == 0.0);
}

TEST_CASE("resample_conv create_graph: second derivatives match PyTorch autograd through a dense T",
          "[resample_conv][create_graph][parity]") {
  // out = d/dcoarse sum(s * resample_conv(f, coarse)) (and d/dvalues), with history; the harness
  // differentiates it again against torch.autograd.grad(..., create_graph=True) of the same dense
  // computation: second derivatives in (coarse, coarse), (coarse, f), (coarse, values), (values, f).
  const char* kCos2 = R"(
import math
d = coarse[:, :, None] - x[None, None, :]
T = torch.where((d >= -w / 2) & (d <= w / 2), torch.cos(math.pi * d / w) ** 2, torch.zeros((), dtype=d.dtype))
y = torch.einsum('nab,...nb->...na', T, f)
out = torch.autograd.grad((y * s).sum(), coarse, create_graph=True)[0]
)";
  const char* kSampled = R"(
K = v.shape[0]
delta = (hi - lo) / (K - 1)
d = coarse[:, :, None] - x[None, None, :]
u = (d - lo) / delta
i = torch.clamp(torch.floor(u.detach()), 0, K - 2).long()
t = u - i.to(u.dtype)
vx = torch.cat([(2 * v[0] - v[1]).reshape(1), v, (2 * v[-1] - v[-2]).reshape(1)])
vm, v0, v1, v2 = vx[i], vx[i + 1], vx[i + 2], vx[i + 3]
r = 0.5 * (2 * v0 + (v1 - vm) * t + (2 * vm - 5 * v0 + 4 * v1 - v2) * t ** 2 + (3 * v0 - vm - 3 * v1 + v2) * t ** 3)
T = torch.where((d >= lo) & (d <= hi), r, torch.zeros((), dtype=d.dtype))
y = torch.einsum('nab,...nb->...na', T, f)
out = torch.autograd.grad((y * s).sum(), wrt, create_graph=True)[0]
)";
  ParityBatch batch("resample_conv_create_graph");
  Generator gen(44);
  const std::int64_t N = 3, A = 5, B = 40;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = random_points(B, gen);
  const double w = 0.15, lo = -0.08, hi = 0.1;
  int k = 0;
  for (const FineGrid* grid : {&uni, &pts})
    for (const Shape& fs : {Shape{N, B}, Shape{2, N, B}}) {
      const FineGrid gr = *grid;
      const Tensor f = test::randn_leaf(fs, gen);
      const Tensor c = leaf(Tensor::rand({N, A}, gen, kFloat64) * 1.1 - 0.05, true);
      Shape ys = fs;
      ys.back() = A;
      const Tensor s = Tensor::randn(ys, gen, kFloat64);
      const Tensor x = gr.to_tensor();
      batch.add(fmt::format("cos2_{}", k++), fmt::format("w = {:.17g}\n", w) + kCos2,
                {{"f", f}, {"coarse", c}, {"x", x, false}, {"s", s, false}}, [gr, r = cos2(w)](const Tensors& in) {
                  const Tensor y = resample_conv(in[0], in[1], gr, r);
                  return xgrad::grad({sum(y * in[3])}, {in[1]}, {}, std::nullopt, /*create_graph=*/true)[0];
                });
      const Tensor v = test::randn_leaf({9}, gen);
      for (int wrt : {1, 3}) {  // d/dcoarse and d/dvalues
        batch.add(fmt::format("sampled_{}", k++),
                  fmt::format("lo = {:.17g}\nhi = {:.17g}\nwrt = {}\n", lo, hi, wrt == 1 ? "coarse" : "v") + kSampled,
                  {{"f", f}, {"coarse", c}, {"x", x, false}, {"v", v}, {"s", s, false}},
                  [gr, lo, hi, wrt](const Tensors& in) {
                    const Tensor y = resample_conv(in[0], in[1], gr, Response::sampled(in[3], lo, hi));
                    return xgrad::grad({sum(y * in[4])}, {in[static_cast<std::size_t>(wrt)]}, {}, std::nullopt,
                                       /*create_graph=*/true)[0];
                  });
      }
    }
  batch.run();
}

TEST_CASE("resample_conv create_graph: float32 second derivatives (tables of r'') agree with float64",
          "[resample_conv][create_graph]") {
  Generator gen(45);
  const std::int64_t N = 3, A = 40, B = 400;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = random_points(B, gen);
  const Tensor f = Tensor::randn({N, B}, gen, kFloat64), c = Tensor::rand({N, A}, gen, kFloat64);
  const Tensor v = Tensor::randn({12}, gen, kFloat64);
  const Tensor df = Tensor::randn({N, B}, gen, kFloat64), dc = Tensor::randn({N, A}, gen, kFloat64) * 0.01,
               dv = Tensor::randn({12}, gen, kFloat64);
  for (const FineGrid* grid : {&uni, &pts})
    for (const Kind& k : kinds()) {
      if (k.name != "gaussian" && k.name != "bspline4" && k.name != "sampled cubic") continue;
      INFO(k.name << (grid->is_uniform() ? " uniform" : " points"));
      const FineGrid gr = *grid;
      const auto make = k.make;
      auto run = [&](Dtype dt) {
        const auto loss = [&](const Tensors& in) {
          const Tensor y = resample_conv(in[0], in[1], gr, make(in.size() > 2 ? in[2] : Tensor()));
          return sum(y * y);
        };
        Tensors in{f.to(dt), c.to(dt)}, dir{df.to(dt), dc.to(dt)};
        if (k.sampled) in.push_back(v.to(dt)), dir.push_back(dv.to(dt));
        return hvp(loss, in, dir).second;
      };
      const Tensors h32 = run(kFloat32), h64 = run(kFloat64);
      for (std::size_t i = 0; i < h64.size(); ++i) {
        const double scale = max(abs(h64[i])).item();
        const double err = max(abs(h32[i].to(kFloat64) - h64[i])).item();
        INFO("input " << i << ": max error " << err << " of " << scale);
        CHECK(err <= 1e-4 * scale);
      }
    }
}

TEST_CASE("resample_conv create_graph: the recorded paths are bit-identical with 1 and 2 threads",
          "[resample_conv][create_graph][threads]") {
  Generator gen(46);
  const std::int64_t B = 5000;
  const FineGrid uni = FineGrid::uniform(0.0, 1.0 / static_cast<double>(B - 1), B);
  const FineGrid pts = random_points(B, gen);
  // N = 3: the private-buffer scatter; N = 20: rows owned by tasks
  for (std::int64_t N : {3, 20})
    for (const FineGrid* grid : {&uni, &pts})
      for (const Kind& k : kinds()) {
        if (k.name != "gaussian" && k.name != "sampled cubic") continue;
        INFO(k.name << " N=" << N << (grid->is_uniform() ? " uniform" : " points"));
        const Tensor f = Tensor::randn({2, N, B}, gen, kFloat64), c = Tensor::rand({N, 300}, gen, kFloat64);
        const Tensor v = Tensor::randn({15}, gen, kFloat64);
        const Tensor df = Tensor::randn({2, N, B}, gen, kFloat64), dc = Tensor::randn({N, 300}, gen, kFloat64),
                     dv = Tensor::randn({15}, gen, kFloat64);
        const FineGrid gr = *grid;
        const auto make = k.make;
        test::require_thread_deterministic([&] {
          const auto loss = [&](const Tensors& in) {
            const Tensor y = resample_conv(in[0], in[1], gr, make(in.size() > 2 ? in[2] : Tensor()));
            return sum(y * y);
          };
          Tensors in{f, c}, dir{df, dc};
          if (k.sampled) in.push_back(v), dir.push_back(dv);
          auto [val, hv] = hvp(loss, in, dir);
          hv.push_back(val);
          return hv;
        });
      }
}
