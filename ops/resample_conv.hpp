#pragma once
// Resampling convolution ("pseudo-continuous" convolution): each row of a finely sampled signal is
// convolved with a compactly supported response r and read out at its own coarse, non-uniform
// points. The forward and first-order gradients are the `/// @op` row of resample_conv below (from
// which docs/ops.md's table is generated).
//
// f: (N, B) or (batch..., N, B); coarse: (N, A), any order, any spacing; fine: a uniform grid
// (x0 + b*dx, b < B: the fast path) or any strictly increasing (B,) points. r is zero outside its
// support [lo, hi]. A coarse point whose support reaches past the ends of the fine grid uses only
// the fine points that exist (f is taken as zero outside the grid; nothing is extrapolated).
// Whether a fine point exactly on a support end is counted is decided within rounding, which
// matters only for responses that are not zero at their ends. The coarse gradient needs r′:
// callable responses need their derivative, sampled ones always have it; the jumps of r at lo/hi,
// if r is not zero there, are not differentiated.
//
// Higher order (create_graph, Note [Create graph] in core/autograd.hpp), in f, coarse and values, to
// any order: each first-order gradient is recorded as a product of the same family, itself
// differentiable (Note [Create graph] for resample_conv in resample_conv.cpp). With r^(m) the response's m-th
// derivative and S_m(f) = sum_b r^(m)(coarse - fine[b]) f[b] (resample_conv is S_0):
//   d f of <g, S_m(f)>      = S_m^T(g), the transposed resampling (linear in g)
//   d coarse of <g, S_m(f)> = sum_batch g * S_(m+1)(f)   (so r^(k) for the k-th coarse derivative)
//   d values of <g, S_m(f)> = sum g[..., n, a] f[..., n, b] phi_k^(m)(coarse[n, a] - fine[b]), with
//                             r = sum_k values[k] phi_k (bilinear in f and values: d2/dvalues2 = 0)
// A derivative of order k with respect to the coarse points needs r^(k): a callable carries r' and
// optionally r'' (so second order), the named responses carry theirs up to order 4 (lanczos: 2), a
// sampled response has every order (its interpolant's, piecewise polynomial: r'' of a cubic one is
// piecewise linear). Asking for a coarse derivative beyond what the response carries is an
// xgrad::Error naming the op and the order. The recorded products are slower than the first-order
// kernels (which a backward without create_graph still runs), and as deterministic.
//
// Responses:
// - Response::callable(fn, lo, hi, dfn, breakpoints, d2fn): a fixed double(double) function (and
//   optionally its first and second derivatives). On a uniform grid it is tabulated once per (grid spacing, tolerance)
//   as a polyphase table of piecewise polynomials (see Note [Polyphase table] in resample_kernels.hpp): the degree and
//   the number of phases are chosen automatically by measuring the table against fn. On a non-uniform grid it is
//   tabulated on a fine lattice over [lo, hi] the same way.
// - Response::sampled(values, lo, hi, interp): a learnable response given by K >= 2 values on the
//   uniform lattice lo + k*(hi-lo)/(K-1), interpolated linearly or with Catmull-Rom cubics (Keys,
//   a = -1/2; the two missing end neighbours are linearly extrapolated: v[-1] = 2v[0] - v[1],
//   v[K] = 2v[K-1] - v[K-2]). Float64 evaluates the interpolation exactly at every tap; float32 on a
//   uniform grid tabulates it per forward as a polyphase table within the float32 tolerance, of a
//   degree and phase count that also fit a generic response on the same lattice, so that the values
//   gradient (the adjoint of the tabulated forward) is that of the exact interpolation within the
//   tolerance whatever the values, degenerate ones (zeros, a constant) included.
//
// Accuracy contract (callable responses): against the exact dense sum in float64, the max abs error
// is <= 1e-5 * max over outputs of sum_b |r||f| for float32 and <= 1e-12 * that for float64, with
// the default tolerance. ResampleConvOptions::tolerance trades accuracy for speed; ::exact
// evaluates fn at every tap instead (slow: one std::function call per tap).
//
// Zero-length sizes (batch 0, N = 0, A = 0, or a grid of B = 0 points) are allowed: the output is
// zeros (empty sums) and so is every gradient. Sizes are checked (Note [Checked sizes]). A support
// narrower than 2^-40 of the coordinates' magnitude is an error (rounding alone would decide which
// fine points it holds: Note [Support width and rounding] in resample_conv.cpp).
//
// Determinism: results are bit-identical for any number of threads (fixed partitioning; the
// scatter of the f gradient goes to rows owned by one task, or to private per-chunk buffers added
// in a fixed order; no atomics), and independent of call history: the tables cached in a response
// are functions of their key, and a sampled response's per-forward table search keeps no state
// between calls (Note [Deterministic table search] in resample_tables.cpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

namespace detail::resample {
struct ResponseState;
}

/// The fine sampling grid of a resample_conv: uniform (the fast path) or arbitrary increasing points.
class FineGrid {
 public:
  /// x0 + b*dx for b in [0, size). dx > 0, size >= 0, all finite.
  static FineGrid uniform(double x0, double dx, std::int64_t size);
  /// The points of a 1-d tensor (float32 or float64), finite and strictly increasing (may be empty).
  /// Note [Uniform points]: with `detect_uniform` (the default), points that are a uniform grid up to
  /// their own rounding (a float64 or float32 linspace) give a uniform grid, which takes the fast
  /// path: B >= 2 and max_b |x[b] - (x[0] + b*dx)| <= 4 * eps * max(|x[0]|, |x[B-1]|) with
  /// dx = (x[B-1] - x[0]) / (B-1) and eps the machine epsilon of x's dtype (2^-23 for float32,
  /// 2^-52 otherwise). That maximum is kept as uniform_deviation(); the op then computes with the
  /// points x[0] + b*dx (see the accuracy contract in docs/resample_conv.md). detect_uniform = false
  /// keeps the given points as they are (the non-uniform path).
  static FineGrid points(const Tensor& x, bool detect_uniform = true);

  bool is_uniform() const { return uniform_; }
  /// For a grid that FineGrid::points detected as uniform: max_b |x[b] - (x0 + b*dx)| over the given
  /// points (0 for FineGrid::uniform and for non-uniform grids).
  double uniform_deviation() const { return deviation_; }
  std::int64_t size() const { return size_; }
  double x0() const { return x0_; }
  double dx() const { return dx_; }
  /// The points of a non-uniform grid (empty for a uniform one).
  const std::vector<double>& xs() const { return *xs_; }
  double at(std::int64_t b) const { return uniform_ ? x0_ + static_cast<double>(b) * dx_ : (*xs_)[b]; }
  /// All the points as a (B,) tensor.
  Tensor to_tensor(Dtype dtype = kFloat64) const;

 private:
  bool uniform_ = true;
  std::int64_t size_ = 0;
  double x0_ = 0, dx_ = 1;
  double deviation_ = 0;
  std::shared_ptr<const std::vector<double>> xs_ = std::make_shared<const std::vector<double>>();
};

enum class Interp { linear, cubic };

/// A compactly supported response r(d), zero outside [lo, hi] (finite, lo < hi, and hi - lo at least
/// 2^64 * DBL_MIN, about 4e-289, so that the table cells stay normal numbers).
class Response {
 public:
  using Fn = std::function<double(double)>;
  /// A fixed response. `derivative` (optional) is dr/dd; without it the gradient with respect to
  /// the coarse points is an error. fn is only evaluated on [lo, hi]. `breakpoints` (optional):
  /// the points strictly inside (lo, hi) where fn or one of its derivatives is not smooth (kinks,
  /// jumps of fn or of dfn, the joins of a piecewise function); the tables are then fitted piece
  /// by piece between them (Note [Breakpoints] in resample_kernels.hpp). Without them a kink inside
  /// the support can defeat every table, and fn is called at every tap (slow: see
  /// ResampleConvOptions::strict and set_resample_conv_fallback_handler).
  /// `second_derivative` (optional, needs `derivative`): d2r/dd2, for second derivatives with respect to
  /// the coarse points (create_graph); without it they are an error. Its jumps must be among the
  /// breakpoints too for its tables (they are built only when a second derivative is asked).
  static Response callable(Fn fn, double lo, double hi, Fn derivative = {}, std::vector<double> breakpoints = {},
                           Fn second_derivative = {});
  /// Named responses, centred on 0, with their derivatives (up to order 4; lanczos up to 2) and
  /// breakpoints. All but lanczos have unit area (their integral over the support is 1). The
  /// derivatives of a B-spline beyond its degree are 0 (the jumps at its knots, like those at the
  /// support's ends, are not differentiated).
  /// gaussian: exp(-d^2 / (2 sigma^2)) on [-truncate*sigma, truncate*sigma], normalised over that
  /// support (sigma > 0, truncate > 0; scipy.ndimage's default truncate is 4).
  static Response gaussian(double sigma, double truncate = 4.0);
  /// hann: (2/width) cos^2(pi d / width) on [-width/2, width/2] (the Hann window, zero at its ends).
  static Response hann(double width);
  /// box: 1/width on [-width/2, width/2] (B-spline of order 1).
  static Response box(double width);
  /// triangle: (2/width) (1 - 2|d|/width) on [-width/2, width/2] (B-spline of order 2); breakpoint 0.
  static Response triangle(double width);
  /// bspline: the centred cardinal B-spline of order 1..4 (degree order-1) with knot spacing h,
  /// M_order(d/h)/h on [-order*h/2, order*h/2]; breakpoints at its interior knots.
  static Response bspline(int order, double h);
  /// lanczos: the Lanczos kernel sinc(x) sinc(x/a), x = d/scale, sinc(x) = sin(pi x)/(pi x), on
  /// [-a*scale, a*scale] (a >= 1; 1 at d = 0, as in image resampling; not normalised).
  static Response lanczos(int a, double scale = 1.0);
  /// A learnable response: K >= 2 values (a 1-d float tensor, may require grad) on the uniform
  /// lattice lo + k*(hi-lo)/(K-1), interpolated per `interp`.
  static Response sampled(const Tensor& values, double lo, double hi, Interp interp = Interp::cubic);

  bool is_sampled() const;
  bool has_derivative() const;  // always true for sampled responses
  /// The highest order of derivative the response carries: 0 (a callable without derivative), 1 or
  /// 2 for a callable, 4 for the named responses (lanczos: 2), INT_MAX for a sampled response.
  int max_derivative_order() const;
  double lo() const;
  double hi() const;
  Interp interp() const;
  /// The declared breakpoints of a callable, sorted (empty for a sampled response).
  const std::vector<double>& breakpoints() const;
  /// "callable", "sampled", or the named response's name ("gaussian", "bspline3", ...).
  const std::string& name() const;
  /// A named response as a user writes it, with its parameters: "gaussian(sigma=0.5, truncate=4)",
  /// "hann(width=0.3)", "box(width=0.2)", "triangle(width=0.2)", "bspline(order=3, h=0.1)",
  /// "lanczos(a=3, scale=1)"; name() for a callable or sampled response.
  const std::string& spec() const;
  /// The sampled values (undefined for a callable).
  const Tensor& values() const;
  /// r(d) evaluated exactly (the callable, or the interpolation of the current values).
  double operator()(double d) const;
  /// r'(d) (error for a callable without derivative).
  double derivative(double d) const;
  /// r^(order)(d), order >= 0 (error beyond max_derivative_order()).
  double nth_derivative(double d, int order) const;

  const std::shared_ptr<detail::resample::ResponseState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::resample::ResponseState> state_;
};

struct ResampleConvOptions {
  /// Max error of a tabulated callable response relative to max|r| on [lo, hi] (and of its
  /// derivative relative to max|r'|). 0 picks the default for the dtype of f: 1e-7 for float32,
  /// 1e-14 for float64, which meet the accuracy contract above. Larger values give cheaper
  /// tables (lower degree), e.g. 1e-4 when 4 digits are enough.
  double tolerance = 0;
  /// Evaluate a callable at every tap instead of through a table (slow; a reference mode).
  bool exact = false;
  /// Refuse the slow fallback: when no table of a callable response (or of its derivative, for the
  /// coarse gradient) can be built, raise an xgrad::Error saying why instead of calling fn at every
  /// tap. An explicit `exact` is not a fallback and is allowed.
  bool strict = false;
};

/// Note [Fallback handler]: called once per (response, table) when a callable response falls back
/// to per-tap evaluation (no table meets the tolerance), with a message naming the response, the
/// table and the reason. The default handler prints the first such message of the process to
/// stderr, once (like PyTorch's TORCH_WARN_ONCE for its slow fallbacks); installing a handler
/// replaces it (e.g. to log every one, or to raise), an empty function silences it. Thread-safe;
/// returns the previous handler (install it again to restore the default).
using ResampleConvFallbackHandler = std::function<void(const std::string&)>;
ResampleConvFallbackHandler set_resample_conv_fallback_handler(ResampleConvFallbackHandler handler);

/// f and coarse must have the same dtype (and the sampled values too). Differentiable in f, coarse
/// and the sampled response values (to any order: the top of this file).
/// @op `resample_conv(f, coarse, grid, r)` | out[..., n, a] = Σ_b r(coarse[n, a] − fine[b])·f[..., n, b]
///   | df[..., n, b] = Σ_a g[..., n, a]·r(coarse[n, a] − fine[b]) (a scatter);
///     dcoarse[n, a] = Σ_batch g[..., n, a]·Σ_b r′(coarse[n, a] − fine[b])·f[..., n, b];
///     dvalues[k] = Σ g[..., n, a]·Σ_b ∂r(coarse[n, a] − fine[b])/∂values[k]·f[..., n, b] (a sampled r);
///     create_graph: all three recorded as resampling products, with r^(k) for the k-th coarse derivative — see
///     [resample_conv.md](resample_conv.md)
///   | — (compared through a dense sum in torch)
Tensor resample_conv(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& response,
                     const ResampleConvOptions& options = {});

/// What the op precomputes for a (grid, response, dtype): the tables of a callable response, or
/// for a sampled one the table each forward builds from the current values (float32 on a uniform
/// grid), which that forward's graph holds until its backward.
struct ResampleConvTableInfo {
  // "polyphase", "lattice", "sampled-polyphase" (a sampled response's per-forward table),
  // "sampled" (no table: per-tap interpolation) or "exact" (no table)
  const char* method = "";
  int degree = 0;             // polynomial degree per piece
  std::int64_t pieces = 0;    // phases (polyphase) or lattice cells
  std::int64_t taps = 0;      // max taps per output (polyphase row length)
  double measured_error = 0;  // relative to max|r| (or max|r'| for the derivative table)
  std::size_t bytes = 0;      // memory held by the table (and a sampled response's cell coefficients)
};

/// Builds (once; later calls hit a cache kept in the response) the tables that resample_conv
/// uses for this grid, response and dtype, and describes them (a sampled response's table is
/// built from its current values and not cached: the values change between steps).
/// derivative = false: builds the forward table (used by the forward and the gradient with respect
/// to f) and describes it. derivative = true: builds both the forward table and the derivative
/// table (r', used by the gradient with respect to the coarse points), so that neither the first
/// forward nor the first backward builds one, and describes the derivative table (call again with
/// false, a cache hit, for the forward table's description). Error: derivative = true for a
/// callable without derivative.
ResampleConvTableInfo resample_conv_prepare(const FineGrid& grid, const Response& response, Dtype dtype,
                                            const ResampleConvOptions& options = {}, bool derivative = false);

/// The accuracy contract's bound (top of this file; docs/resample_conv.md) for
/// resample_conv(f, coarse, grid, response, options): the largest error against the exact dense sum
/// in float64, max over outputs |out - sum_b r(coarse[n, a] - fine[b]) f[..., n, b]|, that the
/// contract allows for these inputs,
///   bound = c * max over outputs (batch, n, a) of sum_b |r(coarse[n, a] - fine[b])| * |f[..., n, b]|,
/// c = 1e-5 for float32 and 1e-12 for float64 (the dtype of f), with r evaluated exactly (the
/// callable, or the interpolation of the sampled values). Costs one evaluation of r per tap (like
/// the `exact` mode). Errors: the arguments resample_conv would refuse; a tolerance coarser than the
/// dtype's default (the contract holds for the default or a finer one, and for `exact`).
double resample_conv_error_bound(const Tensor& f, const Tensor& coarse, const FineGrid& grid, const Response& response,
                                 const ResampleConvOptions& options = {});

/// Bytes held in the response's table cache (all tables built so far).
std::size_t resample_conv_cached_bytes(const Response& response);

/// Bytes a forward through a table keeps with its graph until the backward, besides the table: the
/// located taps (fine offset, phase, sigma) of each of its `outputs` = N*A coarse points, which the
/// gradients reuse instead of locating every output again.
std::size_t resample_conv_graph_bytes(std::int64_t outputs);

}  // namespace xgrad
