// resample_conv: forward, the three backward kernels' wiring, argument checks, FineGrid and
// Response. The tables are fitted in detail/resample_tables.cpp, the TBB kernels are in
// detail/resample_kernels.cpp.
#include "xgrad/ops/resample_conv.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/resample_kernels.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

namespace detail::resample {

/// Shared state behind a Response handle (the cache is filled lazily, under a mutex).
struct ResponseState {
  bool sampled = false;
  double lo = 0, hi = 0;
  Response::Fn fn, dfn;
  // Derivatives of order 2, 3, ...: higher[k - 2] = r^(k) (Note [Response derivatives] in
  // resample_conv.cpp). Empty for a sampled response, whose derivatives of every order are its
  // interpolant's (sampled_cells).
  std::vector<Response::Fn> higher;
  std::vector<double> breakpoints;  // sorted, inside (lo, hi)
  std::string name = "callable";
  std::string spec;  // a named response as its constructor is written, "gaussian(sigma=0.5, truncate=4)"
  Tensor values;
  Interp interp = Interp::cubic;
  /// The derivative of this order of a callable (0: fn), or null when the response lacks it.
  const Response::Fn* nth(int order) const {
    if (order == 0) return &fn;
    if (order == 1) return dfn ? &dfn : nullptr;
    const std::size_t k = static_cast<std::size_t>(order - 2);
    return order > 1 && k < higher.size() && higher[k] ? &higher[k] : nullptr;
  }
  /// The highest derivative order available (INT_MAX for a sampled response).
  int max_order() const;
  struct Entry {
    bool polyphase;
    int order;  // of the derivative tabulated (0: the response itself)
    double dx;
    double tol;
    std::shared_ptr<const Table> table;  // null: no table meets tol (exact evaluation)
    std::string why;                     // with a null table: the reason
  };
  std::mutex mutex;
  std::vector<Entry> cache;  // tables are functions of the key: a hit returns what a build would
  /// The table of the derivative of this order (0: the response) for the key (built on the first
  /// call; the order must be available). A null table (per-tap evaluation) sets `why` and, the first
  /// time, calls the fallback handler (Note [Fallback handler] in resample_conv.hpp).
  std::shared_ptr<const Table> get(bool polyphase, int order, double dx, double tol, std::string* why = nullptr);
};

namespace {
// Note [Fallback handler]: by default one line on stderr, the first time only in the process (as
// PyTorch's TORCH_WARN_ONCE does, e.g. for its MPS-to-CPU fallback).
void warn_once(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "xgrad warning: %s (shown once; ResampleConvOptions::strict refuses this, and "
                 "set_resample_conv_fallback_handler replaces this warning)\n",
                 message.c_str());
  });
}
std::mutex g_handler_mutex;
ResampleConvFallbackHandler g_handler = warn_once;
}  // namespace

ResampleConvFallbackHandler exchange_fallback_handler(ResampleConvFallbackHandler h) {
  std::lock_guard<std::mutex> lock(g_handler_mutex);
  std::swap(g_handler, h);
  return h;
}

int ResponseState::max_order() const {
  if (sampled) return std::numeric_limits<int>::max();
  int k = 0;
  while (nth(k + 1) != nullptr) ++k;
  return k;
}

std::shared_ptr<const Table> ResponseState::get(bool polyphase, int order, double dx, double tol, std::string* why) {
  std::string message;
  std::shared_ptr<const Table> t;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& e : cache)
      if (e.polyphase == polyphase && e.order == order && e.tol == tol && (!polyphase || e.dx == dx)) {
        if (why && !e.table) *why = e.why;
        return e.table;
      }
    const auto& g = *nth(order);
    const bool derivative = order > 0;
    const std::string what = order == 0   ? std::string("forward")
                             : order == 1 ? std::string("derivative")
                                          : fmt::format("derivative of order {}", order);
    std::string reason;
    t = polyphase ? build_polyphase(g, lo, hi, dx, tol, breakpoints, &reason)
                  : build_lattice(g, lo, hi, tol, breakpoints, &reason);
    if (!t && breakpoints.empty())
      reason +=
          "; if the response has kinks or jumps inside its support, declare them as breakpoints "
          "(Response::callable(fn, lo, hi, dfn, breakpoints)), or raise ResampleConvOptions::tolerance";
    if (!t) {
      message = fmt::format(
          "resample_conv: the {} response (support [{}, {}]) has no {} table for {}: {}; its {} is evaluated at "
          "every tap (slow)",
          name, lo, hi, what,
          polyphase ? fmt::format("a uniform grid of spacing {}", dx) : std::string("a non-uniform grid"), reason,
          derivative ? what : std::string("callable"));
      if (why) *why = message;
    }
    cache.push_back({polyphase, order, dx, tol, t, message});
  }
  if (!message.empty()) {  // the first time only; outside the table mutex (the handler may call the op)
    ResampleConvFallbackHandler h;
    {
      std::lock_guard<std::mutex> lock(g_handler_mutex);
      h = g_handler;
    }
    if (h) h(message);
  }
  return t;
}

}  // namespace detail::resample

namespace rs = detail::resample;

// ---- FineGrid -----------------------------------------------------------------------------------
FineGrid FineGrid::uniform(double x0, double dx, std::int64_t size) {
  XGRAD_CHECK(std::isfinite(x0), "FineGrid::uniform: argument 'x0' must be finite, got {}", x0);
  XGRAD_CHECK(std::isfinite(dx) && dx > 0, "FineGrid::uniform: argument 'dx' must be finite and > 0, got {}", dx);
  XGRAD_CHECK(size >= 0, "FineGrid::uniform: argument 'size' must be >= 0, got {}", size);
  FineGrid g;
  g.uniform_ = true;
  g.x0_ = x0;
  g.dx_ = dx;
  g.size_ = size;
  return g;
}

FineGrid FineGrid::points(const Tensor& x, bool detect_uniform) {
  XGRAD_CHECK(x.defined(), "FineGrid::points: argument 'x' is an undefined tensor");
  XGRAD_CHECK(x.dim() == 1, "FineGrid::points: argument 'x' must be a 1-d tensor, got {}", shape_str(x.shape()));
  auto v = std::make_shared<std::vector<double>>(x.to_vector());
  for (std::size_t i = 0; i < v->size(); ++i) {
    XGRAD_CHECK(std::isfinite((*v)[i]), "FineGrid::points: argument 'x' has a non-finite value {} at index {}", (*v)[i],
                i);
    XGRAD_CHECK(i == 0 || (*v)[i] > (*v)[i - 1],
                "FineGrid::points: argument 'x' must be strictly increasing, but x[{}] = {} <= x[{}] = {}", i, (*v)[i],
                i - 1, (*v)[i - 1]);
  }
  // Note [Uniform points] (resample_conv.hpp): points within their own rounding of a uniform grid.
  const std::int64_t B = static_cast<std::int64_t>(v->size());
  if (detect_uniform && B >= 2) {
    const double x0 = v->front(), dx = (v->back() - x0) / static_cast<double>(B - 1);
    const double eps = x.dtype() == kFloat32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
    const double tol = 4 * eps * std::max(std::abs(x0), std::abs(v->back()));
    double dev = 0;
    for (std::int64_t b = 0; b < B && dev <= tol; ++b)
      dev = std::max(dev, std::abs((*v)[static_cast<std::size_t>(b)] - (x0 + static_cast<double>(b) * dx)));
    if (dev <= tol && dx > 0) {
      FineGrid g = uniform(x0, dx, B);
      g.deviation_ = dev;
      return g;
    }
  }
  FineGrid g;
  g.uniform_ = false;
  g.size_ = static_cast<std::int64_t>(v->size());
  g.x0_ = v->empty() ? 0.0 : v->front();
  g.dx_ = 0;
  g.xs_ = std::move(v);
  return g;
}

Tensor FineGrid::to_tensor(Dtype dtype) const {
  Tensor t = Tensor::empty({size_}, dtype);  // checked: a grid too large for memory is an Error
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (std::int64_t b = 0; b < size_; ++b) p[b] = static_cast<T>(at(b));
  });
  return t;
}

// ---- Response -----------------------------------------------------------------------------------
namespace {
void check_support(const char* fn, double lo, double hi) {
  XGRAD_CHECK(std::isfinite(lo) && std::isfinite(hi), "{}: arguments 'lo' and 'hi' must be finite, got [{}, {}]", fn,
              lo, hi);
  XGRAD_CHECK(lo < hi, "{}: empty or inverted support: arguments 'lo' = {} must be < 'hi' = {}", fn, lo, hi);
  // The tables cut [lo, hi] into up to 2^20 cells (and a sampled lattice into K-1): their widths
  // must stay normal numbers, or positions divided by them overflow.
  XGRAD_CHECK(std::isfinite(hi - lo) && hi - lo >= std::ldexp(DBL_MIN, 64),
              "{}: support [{}, {}] is too narrow or too wide: 'hi' - 'lo' = {} must be finite and >= {}", fn, lo, hi,
              hi - lo, std::ldexp(DBL_MIN, 64));
}
}  // namespace

namespace {
// A user's callable as resample_conv runs it: an exception it throws (from the table building, or
// from a TBB task of the per-tap path: TBB carries it to the caller) leaves resample_conv as an
// xgrad::Error naming the op, which callable threw and where, and the callable's own message.
Response::Fn named_callable(Response::Fn f, const char* which) {
  if (!f) return f;
  return [f = std::move(f), which](double d) -> double {
    try {
      return f(d);
    } catch (const std::exception& e) {
      throw Error(fmt::format("resample_conv: the response's {} threw at d = {}: {}", which, d, e.what()));
    } catch (...) {
      throw Error(fmt::format("resample_conv: the response's {} threw a non-standard exception at d = {}", which, d));
    }
  };
}
}  // namespace

Response Response::callable(Fn fn, double lo, double hi, Fn derivative, std::vector<double> breakpoints,
                            Fn second_derivative) {
  XGRAD_CHECK(static_cast<bool>(fn), "Response::callable: argument 'fn' is empty");
  XGRAD_CHECK(!second_derivative || derivative,
              "Response::callable: argument 'second_derivative' is given without argument 'derivative'");
  check_support("Response::callable", lo, hi);
  // Note [Breakpoints] (resample_kernels.hpp): inside the support, and apart by more than the
  // rounding of its coordinates (the table nodes next to a breakpoint are evaluated a few units of
  // rounding inside it).
  std::sort(breakpoints.begin(), breakpoints.end());
  const double sep = std::max(1e-9 * (hi - lo), 64 * DBL_EPSILON * std::max(std::abs(lo), std::abs(hi)));
  for (std::size_t i = 0; i < breakpoints.size(); ++i) {
    const double b = breakpoints[i];
    XGRAD_CHECK(std::isfinite(b) && b > lo && b < hi,
                "Response::callable: argument 'breakpoints' must lie strictly inside the support ({}, {}), got {}", lo,
                hi, b);
    const double prev = i == 0 ? lo : breakpoints[i - 1];
    XGRAD_CHECK(b - prev > sep && (i + 1 < breakpoints.size() || hi - b > sep),
                "Response::callable: argument 'breakpoints' has {} within {} of {} (another breakpoint or a support "
                "end): breakpoints must be distinct and apart by more than that",
                b, sep, b - prev > sep ? hi : prev);
  }
  Response r;
  r.state_ = std::make_shared<rs::ResponseState>();
  r.state_->sampled = false;
  r.state_->lo = lo;
  r.state_->hi = hi;
  r.state_->fn = named_callable(std::move(fn), "callable 'fn'");
  r.state_->dfn = named_callable(std::move(derivative), "callable 'derivative'");
  if (second_derivative)
    r.state_->higher.push_back(named_callable(std::move(second_derivative), "callable 'second_derivative'"));
  r.state_->breakpoints = std::move(breakpoints);
  return r;
}

// ---- named responses (with derivatives and breakpoints) -------------------------------------------
namespace {
void check_positive(const char* fn, const char* arg, double v) {
  XGRAD_CHECK(std::isfinite(v) && v > 0, "{}: argument '{}' must be finite and > 0, got {}", fn, arg, v);
}
// Note [Response derivatives]: the gradient of resample_conv with respect to the coarse points is
// the same resampling with r' (d out / d coarse = sum_b r'(coarse - fine[b]) f[b]), so a derivative
// of order k with respect to them is a resampling with r^(k). A callable carries fn, its derivative
// and optionally its second; the named responses carry theirs analytically up to order
// kNamedOrders (lanczos: 2); a sampled response has every order (its interpolant's piecewise
// polynomial, differentiated cell by cell). The op convolves the derivative of the order it was
// built with (order 0 for resample_conv itself; the recorded backward builds higher ones).
constexpr int kNamedOrders = 4;
// `nth(k, d)` is r^(k)(d), k = 2 .. orders.
Response named(std::string name, Response::Fn fn, double lo, double hi, Response::Fn dfn, std::vector<double> bps,
               const std::function<double(int, double)>& nth, int orders) {
  Response r = Response::callable(std::move(fn), lo, hi, std::move(dfn), std::move(bps));
  r.state()->name = std::move(name);
  for (int k = 2; k <= orders; ++k) r.state()->higher.push_back([nth, k](double d) { return nth(k, d); });
  return r;
}
// sinc(x) = sin(pi x)/(pi x) and its derivative; Taylor series near 0, where the closed forms cancel.
double sinc(double x) {
  const double y = M_PI * x;
  if (std::abs(x) >= 0.1) return std::sin(y) / y;
  const double y2 = y * y;  // sum_k (-1)^k y^(2k) / (2k+1)!, k <= 7
  double s = 0, term = 1;
  for (int k = 0; k <= 7; ++k) {
    s += term;
    term *= -y2 / static_cast<double>((2 * k + 2) * (2 * k + 3));
  }
  return s;
}
double dsinc(double x) {
  const double y = M_PI * x;
  if (std::abs(x) >= 0.1) return (std::cos(y) - std::sin(y) / y) / x;
  const double y2 = y * y;      // pi * sum_{k>=1} (-1)^k 2k y^(2k-1) / (2k+1)!
  double s = 0, term = -y / 6;  // k = 1: -y / 3!
  for (int k = 1; k <= 7; ++k) {
    s += 2 * k * term;
    term *= -y2 / static_cast<double>((2 * k + 2) * (2 * k + 3));
  }
  return M_PI * s;
}
// sinc''(x), with the Taylor series near 0.
double d2sinc(double x) {
  const double y = M_PI * x;
  if (std::abs(x) >= 0.1) {
    const double s = std::sin(y), c = std::cos(y);
    return M_PI * M_PI * (-s / y - 2 * c / (y * y) + 2 * s / (y * y * y));
  }
  const double y2 = y * y;        // pi^2 * sum_{k>=1} (-1)^k 2k (2k-1) y^(2k-2) / (2k+1)!
  double s = 0, term = -1.0 / 6;  // k = 1: -1 / 3!
  for (int k = 1; k <= 8; ++k) {
    s += 2 * k * (2 * k - 1) * term;
    term *= -y2 / static_cast<double>((2 * k + 2) * (2 * k + 3));
  }
  return M_PI * M_PI * s;
}
// Centred cardinal B-spline M_n(x) of order n <= 4 and its derivative, piece by piece (no
// truncated-power cancellation). Only called on [-n/2, n/2].
double bspline_value(int n, double x) {
  const double a = std::abs(x);
  switch (n) {
    case 1:
      return 1.0;
    case 2:
      return 1 - a;
    case 3:
      return a <= 0.5 ? 0.75 - a * a : 0.5 * (1.5 - a) * (1.5 - a);
    default:
      return a <= 1 ? 2.0 / 3 - a * a + 0.5 * a * a * a : (2 - a) * (2 - a) * (2 - a) / 6;
  }
}
double bspline_slope(int n, double x) {
  const double a = std::abs(x), sg = std::signbit(x) ? -1.0 : 1.0;
  switch (n) {
    case 1:
      return 0.0;
    case 2:
      return -sg;
    case 3:
      return a <= 0.5 ? -2 * x : -sg * (1.5 - a);
    default:
      return a <= 1 ? -2 * x + 1.5 * x * a : -sg * 0.5 * (2 - a) * (2 - a);
  }
}
// Its derivative of order k >= 2 (0 from k = n on: the jumps at the knots are not differentiated).
double bspline_nth(int n, int k, double x) {
  const double a = std::abs(x), sg = std::signbit(x) ? -1.0 : 1.0;
  if (k >= n) return 0.0;
  if (n == 3) return a <= 0.5 ? -2.0 : 1.0;  // k = 2
  if (k == 2) return a <= 1 ? -2 + 3 * a : 2 - a;
  return a <= 1 ? 3 * sg : -sg;  // n = 4, k = 3
}
}  // namespace

Response Response::gaussian(double sigma, double truncate) {
  check_positive("Response::gaussian", "sigma", sigma);
  check_positive("Response::gaussian", "truncate", truncate);
  const double half = truncate * sigma;
  const double norm = 1 / (sigma * std::sqrt(2 * M_PI) * std::erf(truncate / std::sqrt(2.0)));
  Response r = named(
      "gaussian", [=](double d) { return norm * std::exp(-0.5 * (d / sigma) * (d / sigma)); }, -half, half,
      [=](double d) { return -d / (sigma * sigma) * norm * std::exp(-0.5 * (d / sigma) * (d / sigma)); }, {},
      [=](int k, double d) {
        // (-1/sigma)^k He_k(x) times the gaussian, x = d/sigma (probabilists' Hermite polynomials)
        const double x = d / sigma;
        double h0 = 1, h1 = x;
        for (int j = 1; j < k; ++j) {
          const double h2 = x * h1 - j * h0;
          h0 = h1;
          h1 = h2;
        }
        return (k % 2 == 0 ? 1.0 : -1.0) * h1 / std::pow(sigma, k) * norm * std::exp(-0.5 * x * x);
      },
      kNamedOrders);
  r.state()->spec = fmt::format("gaussian(sigma={}, truncate={})", sigma, truncate);
  return r;
}

Response Response::hann(double width) {
  check_positive("Response::hann", "width", width);
  Response r = named(
      "hann", [=](double d) { return 2 / width * std::pow(std::cos(M_PI * d / width), 2); }, -width / 2, width / 2,
      [=](double d) { return -2 * M_PI / (width * width) * std::sin(2 * M_PI * d / width); }, {},
      [=](int k, double d) {  // r = (1 + cos(t)) / width, t = 2 pi d / width
        const double t = 2 * M_PI * d / width, sc = std::pow(2 * M_PI / width, k) / width;
        switch (k % 4) {
          case 0:
            return sc * std::cos(t);
          case 1:
            return -sc * std::sin(t);
          case 2:
            return -sc * std::cos(t);
          default:
            return sc * std::sin(t);
        }
      },
      kNamedOrders);
  r.state()->spec = fmt::format("hann(width={})", width);
  return r;
}

Response Response::box(double width) {
  check_positive("Response::box", "width", width);
  Response r = bspline(1, width);
  r.state_->name = "box";
  r.state_->spec = fmt::format("box(width={})", width);
  return r;
}

Response Response::triangle(double width) {
  check_positive("Response::triangle", "width", width);
  Response r = bspline(2, width / 2);
  r.state_->name = "triangle";
  r.state_->spec = fmt::format("triangle(width={})", width);
  return r;
}

Response Response::bspline(int order, double h) {
  XGRAD_CHECK(order >= 1 && order <= 4, "Response::bspline: argument 'order' must be 1, 2, 3 or 4, got {}", order);
  check_positive("Response::bspline", "h", h);
  const double half = 0.5 * order * h;
  std::vector<double> knots;  // interior knots (k - n/2) h, k = 1 .. n-1
  for (int k = 1; k < order; ++k) knots.push_back((k - 0.5 * order) * h);
  Response r = named(
      "bspline" + std::to_string(order), [=](double d) { return bspline_value(order, d / h) / h; }, -half, half,
      [=](double d) { return bspline_slope(order, d / h) / (h * h); }, std::move(knots),
      [=](int k, double d) { return bspline_nth(order, k, d / h) / std::pow(h, k + 1); }, kNamedOrders);
  r.state()->spec = fmt::format("bspline(order={}, h={})", order, h);
  return r;
}

Response Response::lanczos(int a, double scale) {
  XGRAD_CHECK(a >= 1, "Response::lanczos: argument 'a' must be >= 1, got {}", a);
  check_positive("Response::lanczos", "scale", scale);
  const double ad = a;
  Response r = named(
      "lanczos" + std::to_string(a), [=](double d) { return sinc(d / scale) * sinc(d / scale / ad); }, -ad * scale,
      ad * scale,
      [=](double d) {
        const double x = d / scale;
        return (dsinc(x) * sinc(x / ad) + sinc(x) * dsinc(x / ad) / ad) / scale;
      },
      {},
      [=](int, double d) {  // k = 2
        const double x = d / scale;
        return (d2sinc(x) * sinc(x / ad) + 2 * dsinc(x) * dsinc(x / ad) / ad + sinc(x) * d2sinc(x / ad) / (ad * ad)) /
               (scale * scale);
      },
      2);
  r.state()->spec = fmt::format("lanczos(a={}, scale={})", a, scale);
  return r;
}

Response Response::sampled(const Tensor& values, double lo, double hi, Interp interp) {
  XGRAD_CHECK(values.defined(), "Response::sampled: argument 'values' is an undefined tensor");
  XGRAD_CHECK(values.dim() == 1, "Response::sampled: argument 'values' must be 1-d (K,), got {}",
              shape_str(values.shape()));
  XGRAD_CHECK(values.numel() >= 2, "Response::sampled: argument 'values' needs K >= 2 samples, got shape {}",
              shape_str(values.shape()));
  check_support("Response::sampled", lo, hi);
  XGRAD_CHECK((hi - lo) / static_cast<double>(values.numel() - 1) >= std::ldexp(DBL_MIN, 32),
              "Response::sampled: support [{}, {}] is too narrow for K = {} samples (lattice spacing {})", lo, hi,
              values.numel(), (hi - lo) / static_cast<double>(values.numel() - 1));
  Response r;
  r.state_ = std::make_shared<rs::ResponseState>();
  r.state_->sampled = true;
  r.state_->lo = lo;
  r.state_->hi = hi;
  r.state_->values = values;
  r.state_->interp = interp;
  return r;
}

bool Response::is_sampled() const { return state_->sampled; }
bool Response::has_derivative() const { return state_->sampled || static_cast<bool>(state_->dfn); }
int Response::max_derivative_order() const { return state_->max_order(); }
double Response::lo() const { return state_->lo; }
double Response::hi() const { return state_->hi; }
Interp Response::interp() const { return state_->interp; }
const std::vector<double>& Response::breakpoints() const { return state_->breakpoints; }
const std::string& Response::name() const {
  static const std::string kSampled = "sampled";
  return state_->sampled ? kSampled : state_->name;
}

const std::string& Response::spec() const {
  XGRAD_CHECK(state_ != nullptr, "Response::spec: the response is empty");
  return state_->spec.empty() ? name() : state_->spec;
}
const Tensor& Response::values() const { return state_->values; }

namespace {
double eval_sampled(const rs::ResponseState& s, double d, int order) {
  if (d < s.lo || d > s.hi) return 0;
  const std::vector<double> v = s.values.to_vector();
  const std::int64_t K = static_cast<std::int64_t>(v.size());
  const double delta = (s.hi - s.lo) / static_cast<double>(K - 1);
  const std::vector<double> cells = rs::sampled_cells(v, s.interp == Interp::linear, delta, order);
  const double u = (d - s.lo) / delta;
  const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(u)), 0, K - 2);
  const double t = u - static_cast<double>(i);
  const double* a = &cells[static_cast<std::size_t>(i * 4)];
  return ((a[3] * t + a[2]) * t + a[1]) * t + a[0];
}
}  // namespace

double Response::operator()(double d) const {
  if (state_->sampled) return eval_sampled(*state_, d, 0);
  return d < state_->lo || d > state_->hi ? 0.0 : state_->fn(d);
}

double Response::derivative(double d) const {
  XGRAD_CHECK(has_derivative(), "Response::derivative: this callable response was built without a derivative");
  if (state_->sampled) return eval_sampled(*state_, d, 1);
  return d < state_->lo || d > state_->hi ? 0.0 : state_->dfn(d);
}

double Response::nth_derivative(double d, int order) const {
  XGRAD_CHECK(order >= 0 && order <= max_derivative_order(),
              "Response::nth_derivative: argument 'order' = {} is not available: the {} response has derivatives up "
              "to order {}",
              order, spec(), max_derivative_order());
  if (state_->sampled) return eval_sampled(*state_, d, order);
  const Fn* fn = state_->nth(order);
  return fn == nullptr || d < state_->lo || d > state_->hi ? 0.0 : (*fn)(d);
}

// ---- the op ---------------------------------------------------------------------------------------
namespace {

double default_tolerance(Dtype dtype, const ResampleConvOptions& o) {
  if (o.tolerance > 0) return o.tolerance;
  return dtype == kFloat32 ? 1e-7 : 1e-14;
}

// An Evaluator with the storage it points to (move only: ev points into cells' heap buffer).
struct EvalHolder {
  rs::Evaluator ev;
  std::shared_ptr<const rs::Table> table;
  std::vector<double> cells;
};

EvalHolder make_evaluator(const FineGrid& grid, const Response& r, const Tensor& values, Dtype dtype,
                          const ResampleConvOptions& o, int order) {
  EvalHolder h;
  const rs::ResponseState& s = *r.state();
  if (s.sampled) {
    const std::int64_t K = values.numel();
    h.ev.kind = rs::Evaluator::sampled;
    h.ev.delta = (s.hi - s.lo) / static_cast<double>(K - 1);
    h.cells = rs::sampled_cells(values.to_vector(), s.interp == Interp::linear, h.ev.delta, order);
    h.ev.cells = h.cells.data();
    h.ev.ncells = K - 1;
    // Note [Sampled responses on a uniform grid]: with a tolerance a float32 result can use (the
    // float32 default, or a coarser one asked for), the interpolated response is tabulated per
    // forward as a polyphase table, like a callable: far fewer operations per tap than evaluating
    // the interpolation at every tap. Float64 keeps the exact per-tap evaluation. The gradient
    // with respect to the values is that of the exact interpolation within the tolerance: the table
    // also fits a generic response on the same lattice (Note [Values gradient through the table]).
    const double tol = default_tolerance(dtype, o);
    const int smoothness = (s.interp == Interp::cubic ? 2 : 1) - order;  // < 0: piecewise constant or zero
    if (grid.is_uniform() && !o.exact && tol >= 1e-9 && smoothness >= 0) {
      // The probe (Note [Values gradient through the table]): sin^2(pi k / (K - 1)), a smooth bump
      // from 0 to 1 and back over the lattice, with the same interpolation (K = 2: the ramp 0, 1).
      std::vector<double> bump(static_cast<std::size_t>(K));
      for (std::int64_t k = 0; k < K; ++k) {
        const double sk = std::sin(M_PI * static_cast<double>(k) / static_cast<double>(K - 1));
        bump[static_cast<std::size_t>(k)] = K == 2 ? static_cast<double>(k) : sk * sk;
      }
      const std::vector<double> probe = rs::sampled_cells(bump, s.interp == Interp::linear, h.ev.delta, order);
      h.table = rs::build_polyphase_sampled(h.cells, probe, h.ev.delta, s.lo, s.hi, grid.dx(), tol, smoothness);
      if (h.table) {
        h.ev.kind = rs::Evaluator::polyphase;
        h.ev.table = h.table.get();
      }
    }
    return h;
  }
  std::string why;
  if (!o.exact) h.table = r.state()->get(grid.is_uniform(), order, grid.dx(), default_tolerance(dtype, o), &why);
  XGRAD_CHECK(o.exact || h.table || !o.strict, "{} (refused: ResampleConvOptions::strict is set)", why);
  if (h.table) {
    h.ev.kind = h.table->polyphase ? rs::Evaluator::polyphase : rs::Evaluator::lattice;
    h.ev.table = h.table.get();
  } else {
    h.ev.kind = rs::Evaluator::exact;
    h.ev.fn = s.nth(order);
  }
  return h;
}

rs::Geometry make_geometry(const FineGrid& grid, const Response& r) {
  rs::Geometry g;
  g.uniform = grid.is_uniform();
  g.x0 = grid.x0();
  g.dx = grid.dx();
  g.B = grid.size();
  g.xs = grid.is_uniform() ? nullptr : grid.xs().data();
  g.lo = r.lo();
  g.hi = r.hi();
  return g;
}

void check_args(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& response) {
  constexpr const char* op = "resample_conv";
  XGRAD_CHECK(f.defined(), "{}: argument 'f' is an undefined tensor", op);
  XGRAD_CHECK(coarse.defined(), "{}: argument 'coarse' is an undefined tensor", op);
  XGRAD_CHECK(response.state() != nullptr, "{}: argument 'response' is empty (use Response::callable or ::sampled)",
              op);
  XGRAD_CHECK(f.dim() >= 2, "{}: argument 'f' must be (N, B) or (batch..., N, B), got {}", op, shape_str(f.shape()));
  XGRAD_CHECK(coarse.dim() == 2, "{}: argument 'coarse' must be (N, A), got {}", op, shape_str(coarse.shape()));
  XGRAD_CHECK(f.size(-2) == coarse.size(0),
              "{}: N differs between argument 'f' {} (N = {}) and argument 'coarse' {} (N = {})", op,
              shape_str(f.shape()), f.size(-2), shape_str(coarse.shape()), coarse.size(0));
  XGRAD_CHECK(f.size(-1) == grid.size(), "{}: argument 'f' {} has B = {} fine samples but argument 'grid' has {}", op,
              shape_str(f.shape()), f.size(-1), grid.size());
  XGRAD_CHECK(f.dtype() == coarse.dtype(), "{}: dtype mismatch: argument 'f' is {} but argument 'coarse' is {}", op,
              f.dtype(), coarse.dtype());
  if (response.is_sampled()) {
    const Tensor& v = response.values();
    XGRAD_CHECK(v.dtype() == f.dtype(),
                "{}: dtype mismatch: argument 'f' is {} but the sampled response 'values' {} is {}", op, f.dtype(),
                shape_str(v.shape()), v.dtype());
  }
  const std::vector<double> c = coarse.to_vector();
  for (std::size_t i = 0; i < c.size(); ++i)
    XGRAD_CHECK(std::isfinite(c[i]), "{}: argument 'coarse' {} has a non-finite value {} at [{}, {}]", op,
                shape_str(coarse.shape()), c[i], static_cast<std::int64_t>(i) / coarse.size(1),
                static_cast<std::int64_t>(i) % coarse.size(1));
  // Note [Support width and rounding]: positions are differences c - x_b of coordinates, exact only
  // to their rounding (about 2^-52 of their magnitude). A support narrower than 2^-40 of the
  // coordinates' magnitude would hold fine points by rounding alone (and its per-cell positions
  // would cancel to garbage), so it is refused. Narrow supports above that are fine: the tables,
  // which count taps within 1e-9 fine spacings of the support's ends, are not used for supports
  // under 1e-6 fine spacings (build_polyphase*), so no interior tap is lost to that slack.
  double scale = 0.0;
  for (const double v : c) scale = std::max(scale, std::abs(v));
  if (grid.size() > 0) scale = std::max({scale, std::abs(grid.at(0)), std::abs(grid.at(grid.size() - 1))});
  const double width = response.hi() - response.lo(), need = std::ldexp(scale, -40);
  XGRAD_CHECK(width >= need,
              "{}: argument 'response' has support [{}, {}] (width {}) too narrow for coordinates up to {} in "
              "magnitude: its width must be at least {} (2^-40 of that), or which fine points fall in it is "
              "decided by rounding",
              op, response.lo(), response.hi(), width, scale, need);
}

// Note [Create graph] for resample_conv: with r^(m) the response's derivative of order m (Note
// [Response derivatives]) and
//   S_m(f)[..., n, a] = sum_b r^(m)(coarse[n, a] - fine[b]) f[..., n, b],
// the op is S_0, and the first derivatives of <g, S_m(f)> are products of the same family:
//   d/df      = S_m^T(g)[..., n, b] = sum_a g[..., n, a] r^(m)(coarse[n, a] - fine[b])  (a scatter)
//   d/dcoarse = sum_batch g * S_(m+1)(f)                   (the response's next derivative)
//   d/dvalues = V_m(g, f)[k] = sum g[..., n, a] f[..., n, b] phi_k^(m)(coarse[n, a] - fine[b])
// with phi_k the interpolation's weight of value k (a sampled r is linear in its values: r =
// sum_k v_k phi_k). Three ops make the family, each built with its order m: ResampleConvFn (S_m),
// ResampleConvBackwardF (S_m^T, linear in g; "resample_conv_backward_f") and
// ResampleConvBackwardValues (V_m, bilinear in g and f, independent of the values;
// "resample_conv_backward_values"). Each one's backward is written with the three of them (and mul, sum),
// so each is differentiable again, to any order, in f, the coarse points and the values:
//   S_m^T(g) with upstream h: d/dg = S_m(h), d/dcoarse = sum_batch g * S_(m+1)(h), d/dvalues = V_m(g, h)
//   V_m(g, f) with upstream u: the products of the values u in their place, S_m(f; u) for g,
//   S_m^T(g; u) for f, sum_batch g * S_(m+1)(f; u) for the coarse points, and nothing for the values
//   (S is bilinear in f and the values: the second derivative in the values alone is 0).
// A derivative of order k in the coarse points needs r^(k); when the response lacks it the gradient
// is refused, when it is asked, with an error naming the op and the order. ResampleConvFn's backward
// is ResampleConvBackward, run by apply_fused: its kernel is the first-order pass (which reuses what
// the forward located), its formula the products above, recorded when the result will be
// differentiated; the other two ops' backwards always call the ops above (slower: one tensor op per
// product; the same TBB kernels, so deterministic too). V_m evaluates the interpolation exactly
// (never a float32 table).
struct Family {  // what the three ops share
  FineGrid grid;
  Response response;
  ResampleConvOptions options;
  int order = 0;  // the derivative of the response that the op convolves
  // The op resample_conv itself (not one recorded by a backward): only its values gradient may go
  // through a float32 sampled table (Note [Values gradient through the table]), a table fitted to
  // the response's own values. A recorded product's values are often a gradient or a dummy seed
  // (zeros, in the double-vjp construction), whose table can be trivial (one phase of degree 1 fits
  // zero): the adjoint of that table is no values gradient at all, so those take the exact one.
  bool top = false;
  Family inner() const {
    Family n = *this;
    n.top = false;
    return n;
  }
  Family next() const {
    Family n = inner();
    ++n.order;
    return n;
  }
};

rs::Problem make_problem(const Shape& fs, const std::vector<double>& coarse, std::int64_t A) {
  rs::Problem pr;
  pr.N = fs[fs.size() - 2];
  pr.A = A;
  pr.P = 1;
  for (std::size_t i = 0; i + 2 < fs.size(); ++i) pr.P *= fs[i];
  pr.coarse = coarse.data();
  return pr;
}

// Zero-length sizes (batch 0, N = 0, A = 0 or B = 0): every output is an empty sum, every gradient
// is zero; the kernels and tables are not run at all.
bool degenerate(const rs::Problem& pr, const FineGrid& grid) {
  return pr.P == 0 || pr.N == 0 || pr.A == 0 || grid.size() == 0;
}

// A derivative of this order with respect to the coarse points needs r^(order).
void check_coarse_order(const Response& r, int order) {
  XGRAD_CHECK(order > 1 || r.has_derivative(),
              "resample_conv: the gradient with respect to argument 'coarse' needs the response's derivative: "
              "pass it as Response::callable(fn, lo, hi, dfn)");
  XGRAD_CHECK(order <= r.max_derivative_order(),
              "resample_conv: a derivative of order {} with respect to argument 'coarse' (through create_graph) needs "
              "the response's derivative of order {}, but the {} response has derivatives up to order {}{}",
              order, order, r.spec(), r.max_derivative_order(),
              r.name() != "callable" ? ""
              : order == 2           ? ": pass r'' as Response::callable(fn, lo, hi, dfn, breakpoints, d2fn)"
                                     : " (a callable response carries at most its second derivative)");
}

struct ResampleConvFn : Function<ResampleConvFn> {
  static constexpr const char* kName = "resample_conv";
  static constexpr bool kDifferentiableBackward = true;  // Note [Create graph] above
  Family fam;
  Shape f_shape;
  EvalHolder fwd_eval;  // reused by the f gradient (a sampled response's table is built per forward)
  // Every output's taps under fwd_eval (polyphase tables only): located once in the forward and
  // reused by the f and values gradients (N*A * 40 bytes, held with the graph like the table).
  rs::TapsVector taps;

  Tensor forward(const Tensor& f, const Tensor& coarse, const Tensor& values, const Family& fm) {
    fam = fm;
    f_shape = f.shape();
    const std::vector<double> c = coarse.to_vector();
    rs::Problem pr = make_problem(f_shape, c, coarse.size(1));
    Shape out_shape = f_shape;
    out_shape.back() = coarse.size(1);
    save_for_backward({f, coarse, values});
    if (degenerate(pr, fam.grid)) return Tensor::zeros(out_shape, f.dtype());  // no output, or no fine point
    Tensor out = Tensor::empty(out_shape, f.dtype());
    fwd_eval = make_evaluator(fam.grid, fam.response, values, f.dtype(), fam.options, fam.order);
    const rs::Geometry geo = make_geometry(fam.grid, fam.response);
    taps = rs::plan_taps(geo, fwd_eval.ev, pr);
    pr.taps = taps.empty() ? nullptr : taps.data();
    dispatch(f.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      rs::forward<T>(geo, fwd_eval.ev, pr, f.data<T>(), out.data<T>());
    });
    return out;
  }

  Tensors backward(const Tensors& grads);
};

struct ResampleConvBackwardF : Function<ResampleConvBackwardF> {
  static constexpr const char* kName = "resample_conv_backward_f";
  static constexpr bool kDifferentiableBackward = true;
  Family fam;

  Tensor forward(const Tensor& g, const Tensor& coarse, const Tensor& values, const Family& fm, const Shape& f_shape) {
    fam = fm;
    save_for_backward({g, coarse, values});
    const std::vector<double> c = coarse.to_vector();
    rs::Problem pr = make_problem(f_shape, c, coarse.size(1));
    if (degenerate(pr, fam.grid)) return Tensor::zeros(f_shape, g.dtype());
    const EvalHolder eh = make_evaluator(fam.grid, fam.response, values, g.dtype(), fam.options, fam.order);
    const rs::Geometry geo = make_geometry(fam.grid, fam.response);
    const rs::TapsVector taps = rs::plan_taps(geo, eh.ev, pr);
    pr.taps = taps.empty() ? nullptr : taps.data();
    Tensor gf = Tensor::empty(f_shape, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      rs::backward_f<T>(geo, eh.ev, pr, g.data<T>(), gf.data<T>());
    });
    return gf;
  }
  Tensors backward(const Tensors& grads);
};

struct ResampleConvBackwardValues : Function<ResampleConvBackwardValues> {
  static constexpr const char* kName = "resample_conv_backward_values";
  static constexpr bool kDifferentiableBackward = true;
  Family fam;

  // V_m(g, f), a (K,) tensor: the exact interpolation's values gradient (backward_cells).
  Tensor forward(const Tensor& g, const Tensor& f, const Tensor& coarse, const Family& fm, std::int64_t K) {
    fam = fm;
    save_for_backward({g, f, coarse});
    const std::vector<double> c = coarse.to_vector();
    const rs::Problem pr = make_problem(f.shape(), c, coarse.size(1));
    if (degenerate(pr, fam.grid)) return Tensor::zeros({K}, f.dtype());
    const double delta = (fam.response.hi() - fam.response.lo()) / static_cast<double>(K - 1);
    const rs::Geometry geo = make_geometry(fam.grid, fam.response);
    std::vector<double> gcells;
    dispatch(f.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      gcells = rs::backward_cells<T>(geo, K - 1, delta, pr, f.data<T>(), g.data<T>());
    });
    return Tensor::from_vector(
        rs::sampled_cells_adjoint(gcells, K, fam.response.interp() == Interp::linear, delta, fam.order), {K},
        f.dtype());
  }
  Tensors backward(const Tensors& grads);
};

// d/dcoarse <g, S_m(f)> = sum over the batch dimensions of g * S_(m+1)(f), recorded.
Tensor coarse_grad(const Tensor& g, const Tensor& f, const Tensor& coarse, const Tensor& values, const Family& fam) {
  check_coarse_order(fam.response, fam.order + 1);
  const Tensor prod = mul(g, xgrad::apply<ResampleConvFn>(f, coarse, values, fam.next()));
  if (prod.dim() == 2) return prod;
  const std::int64_t N = coarse.size(0), A = coarse.size(1);
  std::int64_t P = 1;
  for (std::int64_t i = 0; i + 2 < prod.dim(); ++i) P *= prod.size(i);
  return sum(reshape(prod, {P, N, A}), {0});
}

// The gradients of resample_conv, all three in one op (Note [Fused ops]). The kernel is the
// first-order pass: the f gradient reuses the forward's evaluator and located taps, the f and values
// gradients run concurrently, the values gradient goes through the forward's table when it used one
// (Note [Values gradient through the table]) and the coarse gradient sums g * S_(m+1)(f) over the
// batch in double. The formula is the recorded products of Note [Create graph] for resample_conv.
struct ResampleConvBackward {
  static constexpr const char* kName = "resample_conv_backward";
  static Tensors kernel(const Tensor& g, const Tensor& f, const Tensor& coarse, const Tensor& values,
                        const ResampleConvFn& node);
  static Tensors formula(const Tensor& g, const Tensor& f, const Tensor& coarse, const Tensor& values,
                         const ResampleConvFn& node) {
    Tensor gf, gc, gv;
    if (node.needs_input_grad(0))
      gf = xgrad::apply<ResampleConvBackwardF>(g, coarse, values, node.fam.inner(), node.f_shape);
    if (node.needs_input_grad(1)) gc = coarse_grad(g, f, coarse, values, node.fam);
    if (values.defined() && node.needs_input_grad(2))
      gv = xgrad::apply<ResampleConvBackwardValues>(g, f, coarse, node.fam.inner(), values.numel());
    return {gf, gc, gv};
  }
};

Tensors ResampleConvBackward::kernel(const Tensor& g, const Tensor& f, const Tensor& coarse, const Tensor& values,
                                     const ResampleConvFn& node) {
  const Family& fam = node.fam;
  const FineGrid& grid = fam.grid;
  const Response& response = fam.response;
  const bool want_f = node.needs_input_grad(0), want_c = node.needs_input_grad(1),
             want_v = values.defined() && node.needs_input_grad(2);
  const std::vector<double> c = coarse.to_vector();
  rs::Problem pr = make_problem(node.f_shape, c, coarse.size(1));
  pr.taps = node.taps.empty() ? nullptr : node.taps.data();  // only with fwd_eval's table
  rs::Problem pr_other = pr;
  pr_other.taps = nullptr;
  const rs::Geometry geo = make_geometry(grid, response);
  Tensor gf, gc, gv;
  if (want_c) check_coarse_order(response, fam.order + 1);
  if (degenerate(pr, grid)) {
    if (want_f) gf = Tensor::zeros(node.f_shape, f.dtype());
    if (want_c) gc = Tensor::zeros(coarse.shape(), coarse.dtype());
    if (want_v) gv = Tensor::zeros(values.shape(), values.dtype());
    return {gf, gc, gv};
  }
  dispatch(f.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The f and values gradients are independent: with two or more threads they run concurrently,
    // so neither pass's tail (its last, unevenly sized tasks) leaves a thread idle.
    std::vector<double> gcells;
    auto grad_f = [&] {
      if (!want_f) return;
      gf = Tensor::empty(node.f_shape, f.dtype());
      rs::backward_f<T>(geo, node.fwd_eval.ev, pr, g.data<T>(), gf.data<T>());
    };
    auto grad_cells = [&] {
      if (!want_v) return;
      const std::int64_t K = values.numel();
      const double delta = (response.hi() - response.lo()) / static_cast<double>(K - 1);
      // Through the table when the forward used one (Note [Values gradient through the table]).
      gcells =
          node.fwd_eval.ev.kind == rs::Evaluator::polyphase && fam.top
              ? rs::backward_cells_polyphase<T>(geo, *node.fwd_eval.table, K - 1, delta, pr, f.data<T>(), g.data<T>())
              : rs::backward_cells<T>(geo, K - 1, delta, pr, f.data<T>(), g.data<T>());
    };
    parallel_invoke(grad_f, grad_cells);
    if (want_c) {
      const EvalHolder eh = make_evaluator(grid, response, values, f.dtype(), fam.options, fam.order + 1);
      Tensor d = Tensor::empty(g.shape(), f.dtype());
      rs::forward<T>(geo, eh.ev, pr_other, f.data<T>(), d.data<T>());
      gc = Tensor::empty(coarse.shape(), coarse.dtype());
      const T* dp = d.data<T>();
      const T* gp = g.data<T>();
      T* out = gc.data<T>();
      const std::int64_t NA = pr.N * pr.A;
      for (std::int64_t i = 0; i < NA; ++i) {
        double acc = 0;
        for (std::int64_t p = 0; p < pr.P; ++p)
          acc += static_cast<double>(gp[p * NA + i]) * static_cast<double>(dp[p * NA + i]);
        out[i] = static_cast<T>(acc);
      }
    }
    if (want_v) {
      const std::int64_t K = values.numel();
      const double delta = (response.hi() - response.lo()) / static_cast<double>(K - 1);
      gv = Tensor::from_vector(
          rs::sampled_cells_adjoint(gcells, K, response.interp() == Interp::linear, delta, fam.order), values.shape(),
          values.dtype());
    }
  });
  return {gf, gc, gv};
}

Tensors ResampleConvFn::backward(const Tensors& grads) {
  const Tensors s = saved();
  return apply_fused<ResampleConvBackward>(grads[0], s[0], s[1], s[2], *this);
}

// S_m^T(g) with upstream h (in or outside create_graph: the same recorded products).
Tensors ResampleConvBackwardF::backward(const Tensors& grads) {
  const Tensors s = saved();
  const Tensor &g = s[0], &coarse = s[1], &values = s[2], &h = grads[0];
  Tensor gg, gc, gv;
  if (needs_input_grad(0)) gg = xgrad::apply<ResampleConvFn>(h, coarse, values, fam.inner());
  if (needs_input_grad(1)) gc = coarse_grad(g, h, coarse, values, fam);
  if (values.defined() && needs_input_grad(2))
    gv = xgrad::apply<ResampleConvBackwardValues>(g, h, coarse, fam, values.numel());
  return {gg, gc, gv};
}

// V_m(g, f) with upstream u: the products with the values u in place of the response's values.
Tensors ResampleConvBackwardValues::backward(const Tensors& grads) {
  const Tensors s = saved();
  const Tensor &g = s[0], &f = s[1], &coarse = s[2], &u = grads[0];
  Tensor gg, gf, gc;
  if (needs_input_grad(0)) gg = xgrad::apply<ResampleConvFn>(f, coarse, u, fam.inner());
  if (needs_input_grad(1)) gf = xgrad::apply<ResampleConvBackwardF>(g, coarse, u, fam, f.shape());
  if (needs_input_grad(2)) gc = coarse_grad(g, f, coarse, u, fam);
  return {gg, gf, gc};
}

}  // namespace

namespace {
[[noreturn]] void out_of_memory(const Tensor& f, const Tensor& coarse, std::size_t graph_bytes,
                                const std::exception& e) {
  detail::throw_error(fmt::format(
      "resample_conv: out of memory for f {} and coarse {} (the op's buffers include {} bytes of located taps, {} "
      "bytes of coarse points and, per thread, a weight per fine point of an output's support): {}",
      shape_str(f.shape()), shape_str(coarse.shape()), graph_bytes,
      static_cast<std::size_t>(coarse.numel()) * sizeof(double), e.what()));
}
}  // namespace

Tensor resample_conv(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& response,
                     const ResampleConvOptions& options) {
  check_args(f, coarse, grid, response);
  XGRAD_CHECK(!(GradMode::is_enabled() && coarse.requires_grad() && !response.has_derivative()),
              "resample_conv: argument 'coarse' requires grad, but the callable response has no derivative: pass it "
              "as Response::callable(fn, lo, hi, dfn), or detach coarse");
  // strict: a slow fallback of the coarse gradient is refused now, not in the backward (the table
  // is cached in the response, so the backward does not build it again).
  if (options.strict && !response.is_sampled() && !options.exact && GradMode::is_enabled() && coarse.requires_grad() &&
      f.numel() > 0 && coarse.numel() > 0)
    make_evaluator(grid, response, Tensor(), f.dtype(), options, 1);
  const Tensor values = response.is_sampled() ? response.values() : Tensor();
  // The located taps kept with the graph (N*A of them): a size no buffer can have is an error
  // stating the bytes, as is running out of memory in the op's own buffers.
  const std::size_t graph_bytes = resample_conv_graph_bytes(checked_numel(coarse.shape(), "resample_conv", "coarse"));
  try {
    return apply<ResampleConvFn>(f, coarse, values, Family{grid, response, options, 0, true});
  } catch (const std::bad_alloc& e) {
    out_of_memory(f, coarse, graph_bytes, e);
  } catch (const std::length_error& e) {  // a scratch buffer (one output's taps) no vector can hold
    out_of_memory(f, coarse, graph_bytes, e);
  }
}

ResampleConvTableInfo resample_conv_prepare(const FineGrid& grid, const Response& response, Dtype dtype,
                                            const ResampleConvOptions& options, bool derivative) {
  XGRAD_CHECK(response.state() != nullptr, "resample_conv_prepare: argument 'response' is empty");
  XGRAD_CHECK(!derivative || response.has_derivative(),
              "resample_conv_prepare: a derivative table was asked for a callable response without derivative");
  ResampleConvTableInfo info;
  const Tensor values = response.is_sampled() ? response.values() : Tensor();
  // With `derivative`, the forward table first (cached in the response like the derivative one):
  // a layer whose coarse points learn needs both (the header's contract).
  if (derivative) (void)make_evaluator(grid, response, values, dtype, options, 0);
  const EvalHolder eh = make_evaluator(grid, response, values, dtype, options, derivative ? 1 : 0);
  if (response.is_sampled() && !eh.table) {
    info.method = "sampled";
    info.degree = response.interp() == Interp::cubic ? 3 : 1;
    info.pieces = response.values().numel() - 1;
    info.bytes = eh.cells.size() * sizeof(double);
    return info;
  }
  if (!eh.table) {
    info.method = "exact";
    return info;
  }
  const rs::Table& t = *eh.table;
  info.method = response.is_sampled() ? "sampled-polyphase" : t.polyphase ? "polyphase" : "lattice";
  info.degree = t.degree;
  info.pieces = t.polyphase ? t.phases() : t.cells;
  info.taps = t.polyphase ? t.stride : 0;
  info.measured_error = t.measured_error;
  info.bytes = t.bytes() + eh.cells.size() * sizeof(double);
  return info;
}

ResampleConvFallbackHandler set_resample_conv_fallback_handler(ResampleConvFallbackHandler handler) {
  return rs::exchange_fallback_handler(std::move(handler));
}

std::size_t resample_conv_cached_bytes(const Response& response) {
  std::lock_guard<std::mutex> lock(response.state()->mutex);
  std::size_t total = 0;
  for (const auto& e : response.state()->cache)
    if (e.table) total += e.table->bytes();
  return total;
}

std::size_t resample_conv_graph_bytes(std::int64_t outputs) {
  XGRAD_CHECK(outputs >= 0, "resample_conv_graph_bytes: argument 'outputs' must be >= 0, got {}", outputs);
  return checked_nbytes(outputs, sizeof(rs::Taps), "resample_conv_graph_bytes", "outputs");
}

double resample_conv_error_bound(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& response,
                                 const ResampleConvOptions& options) {
  constexpr const char* fn = "resample_conv_error_bound";
  try {
    check_args(f, coarse, grid, response);  // what resample_conv itself would refuse
  } catch (const Error& e) {
    detail::throw_error(fmt::format("{}: {}", fn, e.what()));
  }
  const double default_tol = f.dtype() == kFloat32 ? 1e-7 : 1e-14;
  XGRAD_CHECK(options.tolerance >= 0 && (options.exact || options.tolerance <= default_tol),
              "{}: argument 'options' has tolerance {}, coarser than the {} default {}: the accuracy contract "
              "covers the default tolerance, a finer one and exact mode",
              fn, options.tolerance, dtype_name(f.dtype()), default_tol);
  const double c = f.dtype() == kFloat32 ? 1e-5 : 1e-12;
  const std::int64_t B = grid.size(), N = coarse.size(0), A = coarse.size(1);
  if (f.numel() == 0 || N == 0 || A == 0 || B == 0) return 0.0;  // empty sums: exact
  const std::int64_t P = f.numel() / (N * B);
  const std::vector<double> fv = f.to_vector(), cv = coarse.to_vector();
  const double lo = response.lo(), hi = response.hi();

  // r evaluated exactly; a sampled response's interpolation cells are built once.
  std::vector<double> cells;
  double delta = 0;
  std::int64_t K = 0;
  if (response.is_sampled()) {
    const std::vector<double> v = response.values().to_vector();
    K = static_cast<std::int64_t>(v.size());
    delta = (hi - lo) / static_cast<double>(K - 1);
    cells = rs::sampled_cells(v, response.interp() == Interp::linear, delta, false);
  }
  auto r_abs = [&](double d) {
    if (!response.is_sampled()) return std::abs(response(d));
    const double u = (d - lo) / delta;
    const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(u)), 0, K - 2);
    const double t = u - static_cast<double>(i);
    const double* a = &cells[static_cast<std::size_t>(i * 4)];
    return std::abs(((a[3] * t + a[2]) * t + a[1]) * t + a[0]);
  };

  double scale = 0;
  std::vector<double> w;  // |r| at the taps of one output
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t a = 0; a < A; ++a) {
      const double x = cv[static_cast<std::size_t>(n * A + a)];
      // The fine points with x - fine[b] in [lo, hi], i.e. fine[b] in [x - hi, x - lo].
      std::int64_t b0, b1;
      if (grid.is_uniform()) {
        // Clamped in double first (a far coarse point gives indices beyond any integer); one index
        // of slack on each side, the exact test below decides.
        const double nb = static_cast<double>(B);
        b0 = static_cast<std::int64_t>(std::clamp(std::floor((x - hi - grid.x0()) / grid.dx()) - 1, 0.0, nb));
        b1 = static_cast<std::int64_t>(std::clamp(std::ceil((x - lo - grid.x0()) / grid.dx()) + 2, 0.0, nb));
      } else {
        const auto& xs = grid.xs();
        b0 = std::lower_bound(xs.begin(), xs.end(), x - hi) - xs.begin();
        b1 = std::upper_bound(xs.begin(), xs.end(), x - lo) - xs.begin();
      }
      w.assign(static_cast<std::size_t>(std::max<std::int64_t>(b1 - b0, 0)), 0.0);
      for (std::int64_t b = b0; b < b1; ++b) {
        const double d = x - grid.at(b);
        if (d >= lo && d <= hi) w[static_cast<std::size_t>(b - b0)] = r_abs(d);
      }
      for (std::int64_t p = 0; p < P; ++p) {
        const double* fr = &fv[static_cast<std::size_t>((p * N + n) * B)];
        double sum = 0;
        for (std::int64_t b = b0; b < b1; ++b) sum += w[static_cast<std::size_t>(b - b0)] * std::abs(fr[b]);
        scale = std::max(scale, sum);
      }
    }
  return c * scale;
}

}  // namespace xgrad
