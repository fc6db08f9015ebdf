// spectral_fit: recover a high-resolution spectrum from 20 fibres of a synthetic spectrograph, then
// also learn the instrument response and each fibre's wavelength offset: the resampling convolution
// (nn::ResampleConv) end to end.
//
// The instrument: one spectrum S sampled finely (B = 50,000 points, 0.01 A apart, 5000-5500 A) is
// seen by N = 20 fibres. Fibre n has its own non-uniform wavelength solution lambda_n(p) for its
// A = 500 detector pixels, shifted by an unknown offset delta_n, and every pixel reads
//     obs[n, p] = sum_b r(lambda_n(p) + delta_n - fine[b]) * S(fine[b]) * dx + noise,
// with r the instrument's line-spread function (its response). We know lambda_n but not delta_n.
//
// An arc-lamp exposure (--arc, default on) goes through the same fibres and the same response: a lamp
// with emission lines of known wavelength and strength, with its own unknown per-fibre offsets. It
// measures the response's shape, which the science frame alone cannot (Note [Why the arc] at fit()).
//
// Stage 0 fits the response (a learnable sampled response of K values) and the arc's offsets to the
// arc alone. Stage 1 fits S alone, with that response and the nominal wavelengths. Stage 2 fits S,
// the response and per-fibre shifts of both exposures (learn_shift: gradients with respect to the
// coarse points) together. --optimizer adam|lbfgs|lm chooses how (see Fitter and the README).
// Offsets are only defined relative to a reference fibre (moving every fibre and the spectrum
// together changes nothing), so they are reported relative to fibre 0, in detector pixels.
//
// Regularization: the recovered spectrum is a deconvolution, so it needs a prior. The default is a
// smoothness (Tikhonov) penalty on the spectrum's first differences with weight 3, the weight at which
// the final chi2 per pixel of the science frame is 1 (the discrepancy principle: fit to the noise
// level, not below it; a scan gave chi2 0.967 at 1, 0.990 at 2.5, 0.998 at 3, 1.015 at 4, 1.033 at
// 5), and a non-negative response (a line-spread function is). With the old weight 0.05 and no arc
// the spectrum rang next to strong lines (overshoots of 30-40% of the continuum; rms error 0.088);
// weight 5 without the arc gave 0.050; with the arc and weight 3 the rms error is 0.044 (0.0014 after
// smoothing both to the response's width). --prior d2 (curvature) and tv (total variation) are
// selectable and did worse without the arc (0.071, 0.059-0.081).
//
// Uncertainties: each fibre's offset is reported with a 1-sigma error from the Laplace
// approximation (the Gauss-Newton Hessian of the chi2 at the optimum; see shift_sigmas);
// --calibrate K refits K new noise realisations and compares the offsets' scatter with that sigma.
//
// Your own data: --observed obs.npy --wavelengths lambda.npy (both (N, A), float) replace the
// synthetic instrument; the fine grid is set with --fine-start/--fine-step/--fine-size.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <numeric>
#include <vector>

#include "../common/plot.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Settings {
  int fibres = 20, pixels = 500;
  std::int64_t fine_size = 50000;
  double fine_start = 5000.0, fine_step = 0.01;  // Angstrom
  double noise = 0.005;                          // per pixel, the continuum is ~1
  int steps1 = 300, steps2 = 500, steps3 = 0;
  double smoothness3 = 0.5;  // stage 3: weight of the spectrum's penalty with the response and offsets fixed
  int response_samples = 33;
  double half_width = 4.0;                                          // response support [-4, 4] A
  double smoothness = 3.0;                                          // weight of the spectrum's smoothness penalty
  std::string prior = "d1";                                         // spectrum penalty: first or second differences
  double response_smoothness = 0.0;                                 // weight of the response's curvature penalty
  bool positive_response = true;                                    // project the response onto >= 0 after each step
  double lr_spectrum = 0.005, lr_response = 0.01, lr_shift = 0.01;  // Adam, stage 2
  std::uint64_t seed = 7;
  std::string out = "out/spectral_fit";
  std::string observed_npy, wavelengths_npy;
  int threads = 0;
  int calibrate = 0;               // refits with K new noise realisations
  bool arc = true;                 // an arc-lamp exposure through the same fibres constrains the response
  int steps0 = 150;                // stage 0: the response from the arc alone
  std::string optimizer = "adam";  // adam, lbfgs or lm
  int lbfgs_iter = 5;              // L-BFGS iterations per step() (between projections of the response)
  bool stop_at_target = false;     // end the fit when the target is reached
  double target_chi2 = 0;          // report when stage 2 first reaches this science chi2 per pixel
  double arc_line_area = 2.0;      // flux * A of each arc line
};

double gauss(double x, double mu, double s) {
  return std::exp(-0.5 * (x - mu) * (x - mu) / (s * s)) / (s * std::sqrt(2 * M_PI));
}

// The true line-spread function: asymmetric (two Gaussians) with its centroid at zero.
double true_lsf(double d) { return 0.8 * gauss(d, -0.1, 0.85) + 0.2 * gauss(d, 0.4, 1.0); }
// The nominal one the model starts from: a symmetric Gaussian, 25% too wide.
double nominal_lsf(double d) { return gauss(d, 0.0, 1.1); }

struct Truth {
  std::vector<double> spectrum;    // (B)
  std::vector<double> offsets;     // (N) in A
  std::vector<double> dispersion;  // (N) A per pixel, for reporting in pixels
};

// The arc-lamp exposure (--arc): a lamp whose emission lines have known wavelengths and strengths,
// seen through the same fibres and the same response, with its own unknown per-fibre offsets (the
// fibres drift between the two exposures). It measures the response's shape, which the science frame
// alone cannot: the observed r * S is unchanged when the response narrows and the spectrum widens,
// and a smoothness prior on the spectrum prefers exactly that (see the note in fit()).
struct Arc {
  Tensor spectrum;              // (1, B) float32, known
  Tensor observed;              // (N, A) float32
  std::vector<double> offsets;  // (N) A, the truth (not used by the fit)
};

// The synthetic instrument: spectrum, wavelength solutions, offsets, observations.
// The noise is drawn from its own generator (seeded with `noise_seed`), so that --calibrate can observe
// the same instrument and spectrum with new noise.
void simulate(const Settings& s, std::uint64_t noise_seed, Tensor& nominal, Tensor& observed, Truth& truth,
              Arc* arc = nullptr) {
  Generator gen(s.seed);
  const std::int64_t B = s.fine_size;
  // Continuum with a slow wave and a slope, times absorption lines narrower and wider than the response.
  truth.spectrum.assign(static_cast<std::size_t>(B), 0.0);
  std::vector<double> mu(90), depth(90), width(90);
  for (std::size_t j = 0; j < mu.size(); ++j) {
    mu[j] = s.fine_start + 8 + gen.uniform(0, 1) * (s.fine_step * static_cast<double>(B) - 16);
    depth[j] = gen.uniform(0.1, 0.7);
    width[j] = gen.uniform(0.2, 0.8);
  }
  for (std::int64_t b = 0; b < B; ++b) {
    const double x = s.fine_start + s.fine_step * static_cast<double>(b);
    double v = 1.0 + 0.15 * std::sin(2 * M_PI * (x - s.fine_start) / 400) + 0.05 * (x - s.fine_start - 250) / 250;
    for (std::size_t j = 0; j < mu.size(); ++j)
      if (std::abs(x - mu[j]) < 6 * width[j]) v *= 1 - depth[j] * std::exp(-0.5 * std::pow((x - mu[j]) / width[j], 2));
    truth.spectrum[static_cast<std::size_t>(b)] = v;
  }
  // Wavelength solutions: per fibre a start, a dispersion near 0.955 A/pixel and a curvature.
  const int N = s.fibres, A = s.pixels;
  std::vector<double> lam(static_cast<std::size_t>(N * A)), lam_true(lam.size());
  truth.offsets.resize(static_cast<std::size_t>(N));
  truth.dispersion.resize(static_cast<std::size_t>(N));
  for (int n = 0; n < N; ++n) {
    const double start = s.fine_start + 10 + gen.uniform(-2, 2), disp = 0.955 + gen.uniform(-0.005, 0.005),
                 curv = gen.uniform(-2, 2);
    truth.dispersion[static_cast<std::size_t>(n)] = disp;
    truth.offsets[static_cast<std::size_t>(n)] = gen.uniform(-0.5, 0.5) * disp;  // up to half a pixel
    for (int p = 0; p < A; ++p) {
      const double t = static_cast<double>(p) / (A - 1);
      const std::size_t i = static_cast<std::size_t>(n * A + p);
      lam[i] = start + disp * p + curv * t * t;
      lam_true[i] = lam[i] + truth.offsets[static_cast<std::size_t>(n)];
    }
  }
  // Coordinates relative to the grid start keep float32 precise (5000 + 0.3 loses digits).
  for (auto* v : {&lam, &lam_true})
    for (double& x : *v) x -= s.fine_start;
  nominal = Tensor::from_vector(lam, {N, A}, kFloat32);
  const FineGrid grid = FineGrid::uniform(0.0, s.fine_step, B);
  const Response r = Response::callable(true_lsf, -s.half_width, s.half_width);
  const Tensor S = Tensor::from_vector(truth.spectrum, {1, B}, kFloat64);
  Tensor clean =
      resample_conv(expand(S, {N, B}), Tensor::from_vector(lam_true, {N, A}, kFloat64), grid, r) * s.fine_step;
  Generator noise_gen(noise_seed);
  observed = (clean + Tensor::randn({N, A}, noise_gen, kFloat64) * s.noise).to(kFloat32);
  if (arc == nullptr) return;
  // The arc: lines 0.03 A wide (unresolved), about 12 A apart, each of area arc_line_area, drawn from
  // their own generator so that the science frame is the same with and without the arc.
  Generator arc_gen(s.seed + 1000);
  std::vector<double> lamp(static_cast<std::size_t>(B), 0.0);
  const double span = s.fine_step * static_cast<double>(B);
  for (double centre = 8 + arc_gen.uniform(0, 4); centre < span - 8; centre += 12 + arc_gen.uniform(-2, 2)) {
    const double w = 0.03;
    const auto lo = static_cast<std::int64_t>((centre - 6 * w) / s.fine_step),
               hi = static_cast<std::int64_t>((centre + 6 * w) / s.fine_step);
    for (std::int64_t b = std::max<std::int64_t>(lo, 0); b <= std::min(hi, B - 1); ++b)
      lamp[static_cast<std::size_t>(b)] += s.arc_line_area * gauss(s.fine_step * static_cast<double>(b), centre, w);
  }
  arc->offsets.resize(static_cast<std::size_t>(N));
  std::vector<double> lam_arc(lam.size());
  for (int n = 0; n < N; ++n) {
    arc->offsets[static_cast<std::size_t>(n)] =
        arc_gen.uniform(-0.5, 0.5) * truth.dispersion[static_cast<std::size_t>(n)];
    for (int p = 0; p < A; ++p) {
      const std::size_t i = static_cast<std::size_t>(n * A + p);
      lam_arc[i] = lam[i] + arc->offsets[static_cast<std::size_t>(n)];
    }
  }
  const Tensor L = Tensor::from_vector(lamp, {1, B}, kFloat64);
  const Tensor arc_clean =
      resample_conv(expand(L, {N, B}), Tensor::from_vector(lam_arc, {N, A}, kFloat64), grid, r) * s.fine_step;
  arc->spectrum = L.to(kFloat32);
  arc->observed = (arc_clean + Tensor::randn({N, A}, noise_gen, kFloat64) * s.noise).to(kFloat32);
}

// The model: the high-resolution spectrum (a parameter) seen through a resampling convolution with
// a learnable sampled response and a learnable per-fibre shift.
class SpectralModel : public nn::Module {
 public:
  SpectralModel(const Settings& s, const Tensor& nominal_coarse, double initial_level)
      : Module("SpectralModel"), dx_(s.fine_step) {
    spectrum_ = register_parameter("spectrum", Tensor::full({1, s.fine_size}, initial_level, kFloat32));
    std::vector<double> v(static_cast<std::size_t>(s.response_samples));
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = nominal_lsf(-s.half_width + 2 * s.half_width * static_cast<double>(k) / (v.size() - 1));
    nn::ResampleConvConfig config;
    config.learn_shift = true;
    if (s.arc) arc_shift_ = register_parameter("arc_shift", Tensor::zeros({nominal_coarse.size(0), 1}, kFloat32));
    conv_ = register_module("conv", std::make_shared<nn::ResampleConv>(
                                        nominal_coarse, FineGrid::uniform(0.0, s.fine_step, s.fine_size),
                                        Response::sampled(Tensor::from_vector(v, {s.response_samples}, kFloat32),
                                                          -s.half_width, s.half_width, Interp::cubic),
                                        config));
  }
  /// (N, A): every fibre reads the same spectrum.
  Tensor forward() {
    const Tensor& c = conv_->coarse();
    return conv_->forward(expand(spectrum_, {c.size(0), spectrum_.size(1)})) * dx_;
  }
  /// (N, A): the arc exposure through the same response, with the arc's own per-fibre shifts.
  Tensor forward_arc(const Tensor& arc_spectrum) {
    const Tensor& c = conv_->coarse();
    return resample_conv(expand(arc_spectrum, {c.size(0), arc_spectrum.size(1)}), c + arc_shift_, conv_->grid(),
                         conv_->response()) *
           dx_;
  }
  Tensor& spectrum() { return spectrum_; }
  Tensor& arc_shift() { return arc_shift_; }
  Tensor response_values() { return conv_->response().values(); }
  Tensor shift() { return conv_->shift(); }
  std::shared_ptr<nn::ResampleConv> conv() const { return conv_; }

  /// The response and the spectrum's scale are degenerate (r*S is what is seen): keep the
  /// response's integral at 1 and move its scale into the spectrum.
  void normalise_response(double lattice_step) {
    NoGradGuard no_grad;
    Tensor v = response_values();
    const std::vector<double> vv = v.to_vector();
    double integral = 0;  // trapezoid over the lattice
    for (std::size_t k = 0; k < vv.size(); ++k) integral += (k == 0 || k + 1 == vv.size() ? 0.5 : 1.0) * vv[k];
    integral *= lattice_step;
    if (integral > 0) {
      v.mul_(1.0 / integral);
      spectrum_.mul_(integral);
    }
  }

 private:
  double dx_;
  Tensor spectrum_, arc_shift_;
  std::shared_ptr<nn::ResampleConv> conv_;
};

// The arc's chi2 per pixel (mean squared residual in units of the noise).
Tensor arc_chi2(SpectralModel& model, const Arc& arc, const Settings& s) {
  const Tensor resid = (model.forward_arc(arc.spectrum) - arc.observed) * (1.0 / s.noise);
  return mean(resid * resid);
}

// What an objective covers: the science frame with the spectrum's prior, the arc, or both.
enum class Terms { science, arc, both };

// Mean squared residual in units of the noise, plus a smoothness penalty on the spectrum (and the
// arc's mean squared residual when there is an arc and `terms` asks for it). chi2_out: the science
// frame's chi2 per pixel.
Tensor objective(SpectralModel& model, const Tensor& observed, const Arc* arc, const Settings& s,
                 Tensor* chi2_out = nullptr, Terms terms = Terms::both) {
  Tensor loss;
  if (terms != Terms::arc) {
    const Tensor resid = (model.forward() - observed) * (1.0 / s.noise);
    Tensor chi2 = mean(resid * resid);
    const Tensor& S = model.spectrum();
    const std::int64_t B = S.size(1);
    Tensor d = slice(S, 1, 1, B) - slice(S, 1, 0, B - 1);
    if (s.prior == "d2") d = (slice(d, 1, 1, B - 1) - slice(d, 1, 0, B - 2)) * (1.0 / s.fine_step);
    if (chi2_out) *chi2_out = chi2.detach();
    loss = s.prior == "tv" ? chi2 + sum(sqrt(d * d + 1e-8)) * s.smoothness : chi2 + sum(d * d) * s.smoothness;
  }
  if (arc != nullptr && terms != Terms::science) {
    const Tensor a = arc_chi2(model, *arc, s);
    loss = loss.defined() ? loss + a : a;
  }
  if (s.response_smoothness > 0 && terms != Terms::science) {
    const Tensor v = model.response_values();
    const std::int64_t K = v.size(0);
    const Tensor d2 = slice(v, 0, 2, K) - slice(v, 0, 1, K - 1) * 2.0 + slice(v, 0, 0, K - 2);
    loss = loss + sum(d2 * d2) * s.response_smoothness;
  }
  return loss;
}

struct FitLog {
  // After each optimiser step: its index, the science chi2 per pixel, the stage and the seconds
  // since the fit began.
  std::vector<double> step, value, stage, seconds;
  double reached_seconds = -1;  // when the science chi2 first reached --target-chi2 (stage 2 on)
  double reached_cpu = -1;      // the process's CPU seconds (all threads) then
  double cpu_seconds = 0;       // the process's CPU seconds over the whole fit
  std::int64_t reached_step = -1, reached_evals = -1;
  std::int64_t evaluations = 0;      // objective or residual evaluations (lm: also its frame forwards)
  std::int64_t backward_passes = 0;  // backward passes (one per evaluation, one per residual for a Jacobian)
};

// Keeps the response a line-spread function: non-negative (when asked) and of unit area, the scale
// moved into the spectrum.
void project_response(SpectralModel& model, const Settings& s) {
  if (s.positive_response) {
    NoGradGuard ng;
    Tensor v = model.response_values();
    v.copy_(clamp(v.detach(), 0.0, 1e300));
  }
  model.normalise_response(2 * s.half_width / (s.response_samples - 1));
}

// The fit, in stages (--optimizer chooses how each stage is minimised):
//   stage 0 (with the arc): the response and the arc's shifts from the arc alone;
//   stage 1: the spectrum alone (the response so far, no shifts);
//   stage 2: spectrum, response, per-fibre shifts (and the arc's shifts) together;
//   stage 3 (optional): the spectrum alone again with the response and the shifts fixed and its own
//   weight of the prior.
// Note [Why the arc]: the science frame sees r * S only. Narrowing the response while widening the
// spectrum's lines leaves r * S, hence the chi2, unchanged, and the smoothness prior then prefers the
// narrower response: the optimum of the science-only objective has a response narrower than the
// truth (2000 Adam steps of stage 2 take its rms width from the nominal 1.10 A to 0.79 A, the truth
// being 0.90 A, and the spectrum's rms error from 0.050 to 0.060; the 0.050 of 500 steps is early
// stopping). The arc, lines of known wavelength and strength, pins the response's shape.
class Fitter {
 public:
  Fitter(SpectralModel& model, const Tensor& observed, const Arc* arc, const Settings& s, FitLog& log, bool progress)
      : model_(model),
        observed_(observed),
        arc_(arc),
        s_(s),
        log_(log),
        progress_(progress),
        start_(std::chrono::steady_clock::now()) {}

  void run() {
    Tensor v = model_.response_values(), shift = model_.shift();
    Tensor arc_shift = arc_ ? model_.arc_shift() : Tensor();
    auto grads = [&](bool spectrum, bool response, bool shifts) {
      model_.spectrum().set_requires_grad(spectrum);
      v.set_requires_grad(response);
      shift.set_requires_grad(shifts);
      if (arc_) arc_shift.set_requires_grad(response);
    };
    if (arc_ && s_.steps0 > 0) {
      grads(false, true, false);
      minimise(0, {v, arc_shift}, Terms::arc, s_.steps0, {s_.lr_response, s_.lr_shift});
    }
    grads(true, false, false);
    minimise(1, {model_.spectrum()}, Terms::science, s_.steps1, {0.02});
    grads(true, true, true);
    std::vector<Tensor> p2 = {model_.spectrum(), v, shift};
    std::vector<double> lr2 = {s_.lr_spectrum, s_.lr_response, s_.lr_shift};
    if (arc_) {
      p2.push_back(arc_shift);
      lr2.push_back(s_.lr_shift);
    }
    minimise(2, p2, Terms::both, s_.steps2, lr2);
    if (s_.steps3 > 0 && !stop_) {
      grads(true, false, false);
      Settings s3 = s_;
      s3.smoothness = s_.smoothness3;
      s3.response_smoothness = 0;
      minimise(3, {model_.spectrum()}, Terms::science, s_.steps3, {s_.lr_spectrum}, &s3);
    }
    grads(false, true, true);
  }

 private:
  double cpu_seconds() const { return static_cast<double>(std::clock() - cpu_start_) / CLOCKS_PER_SEC; }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  // The stage's loss with a backward pass (what the optimisers' closures run).
  Tensor loss(Terms terms, const Settings& s, double& chi2) {
    Tensor c;
    Tensor l = objective(model_, observed_, arc_, s, &c, terms);
    l.backward();
    ++log_.evaluations;
    ++log_.backward_passes;
    chi2 = c.defined() ? c.item() : l.item();
    return l;
  }
  void record(int stage, double chi2) {
    const double t = seconds();
    log_.step.push_back(static_cast<double>(log_.step.size()));
    log_.value.push_back(chi2);
    log_.stage.push_back(stage);
    log_.seconds.push_back(t);
    log_.cpu_seconds = cpu_seconds();
    if (stage >= 2 && log_.reached_seconds < 0 && s_.target_chi2 > 0 && chi2 <= s_.target_chi2) {
      log_.reached_seconds = t;
      log_.reached_cpu = cpu_seconds();
      stop_ = s_.stop_at_target;
      log_.reached_step = static_cast<std::int64_t>(log_.step.size());
      log_.reached_evals = log_.evaluations;
    }
  }
  void minimise(int stage, const std::vector<Tensor>& params, Terms terms, int steps, const std::vector<double>& lr,
                const Settings* override_settings = nullptr) {
    const Settings& s = override_settings ? *override_settings : s_;
    static const char* names[] = {"stage 0: response from the arc", "stage 1: spectrum",
                                  "stage 2: spectrum + response + offsets", "stage 3: spectrum"};
    utils::ProgressBar bar(names[stage], progress_ ? steps : 0);
    const bool touches_response = stage == 0 || stage == 2;
    if (s_.optimizer == "adam" || (s_.optimizer == "lm" && stage == 1) || stage == 3) {
      std::vector<std::unique_ptr<nn::Adam>> opts;
      for (std::size_t i = 0; i < params.size(); ++i)
        opts.push_back(std::make_unique<nn::Adam>(std::vector<Tensor>{params[i]}, nn::AdamOptions(lr[i])));
      for (int it = 0; it < steps; ++it) {
        for (auto& o : opts) o->zero_grad();
        double chi2 = 0;
        loss(terms, s, chi2);
        for (auto& o : opts) o->step();
        if (touches_response) project_response(model_, s);
        record(stage, chi2);
        if (progress_) bar.update(it + 1, chi2);
        if (stop_) break;
      }
    } else if (s_.optimizer == "lbfgs") {
      // Strong-Wolfe L-BFGS; every step() runs up to lbfgs_iter iterations, then the response is
      // projected (positivity, unit area), which the quasi-Newton history does not know about.
      nn::LBFGS opt(params,
                    nn::LBFGSOptions(1).line_search_fn("strong_wolfe").max_iter(s_.lbfgs_iter).history_size(20));
      double chi2 = 0;
      auto closure = [&] {
        opt.zero_grad();
        return loss(terms, s, chi2);
      };
      for (int it = 0; it < steps; ++it) {
        opt.step(closure);
        if (touches_response) project_response(model_, s);
        record(stage, chi2);
        if (progress_) bar.update(it + 1, chi2);
        if (stop_) break;
      }
    } else {
      lm_stage(stage, params, terms, steps, s, bar);
    }
  }
  void lm_stage(int stage, const std::vector<Tensor>& params, Terms terms, int steps, const Settings& s,
                utils::ProgressBar& bar);

  SpectralModel& model_;
  const Tensor& observed_;
  const Arc* arc_;
  const Settings& s_;
  FitLog& log_;
  bool progress_;
  std::chrono::steady_clock::time_point start_;
  std::clock_t cpu_start_ = std::clock();
  bool stop_ = false;  // --stop-at-target and the target reached
};

// --optimizer lm. nn::least_squares takes the Jacobian of the residuals by one backward pass per
// residual (20,000 here: one Jacobian of the whole residual vector took minutes) and solves dense
// n x n normal equations, so it cannot take the spectrum's 50,000 values, nor the full residual
// vector. It does fit the response: the model is linear in the response's values v,
// model = sum_k v_k M_k with M_k the model seen through the k-th lattice basis function, so
// |(data - model) / noise|^2 = |R v - c|^2 + const with R^T R = M^T M / noise^2 (Cholesky) and
// c = R^-T M^T data / noise^2: the same cost with 33 residuals, whose Jacobian costs 33 backward
// passes. So each step (a round) is:
//   (a) strong-Wolfe L-BFGS (lbfgs_iter iterations) on the parameters other than the response (the
//       spectrum and the shifts in stage 2, the arc's shifts in stage 0) with the response fixed;
//   (b) Levenberg-Marquardt (least_squares, max_iter 1: one accepted step) on the response values
//       with everything else fixed, residuals R v - c over the frames of the stage (plus the
//       response's curvature penalty as residuals when --response-smoothness is set), then the
//       projection onto a non-negative, unit-area response.
// Stage 1 (the spectrum alone, a linear problem) is the same as with adam.
void Fitter::lm_stage(int stage, const std::vector<Tensor>& params, Terms terms, int steps, const Settings& s,
                      utils::ProgressBar& bar) {
  SpectralModel& m = model_;
  Tensor v = m.response_values();
  std::vector<Tensor> others;
  for (const Tensor& p : params)
    if (!p.is_same(v)) others.push_back(p);
  const std::int64_t K = v.numel(), pixels = observed_.numel();
  // The compressed residuals of the response block at the current spectrum and shifts.
  auto response_block = [&]() -> std::pair<Tensor, Tensor> {
    NoGradGuard ng;
    const Tensor saved = v.clone_data();
    std::vector<std::vector<double>> M(static_cast<std::size_t>(K));
    std::vector<double> y;
    auto frames = [&] {
      std::vector<double> out;
      if (terms != Terms::arc) out = m.forward().to_vector();
      if (arc_ && terms != Terms::science) {
        const std::vector<double> a = m.forward_arc(arc_->spectrum).to_vector();
        out.insert(out.end(), a.begin(), a.end());
      }
      return out;
    };
    for (std::int64_t k = 0; k < K; ++k) {
      std::vector<double> e(static_cast<std::size_t>(K), 0.0);
      e[static_cast<std::size_t>(k)] = 1.0;
      v.copy_(Tensor::from_vector(e, {K}, v.dtype()));
      M[static_cast<std::size_t>(k)] = frames();
    }
    v.copy_(saved);
    if (terms != Terms::arc) y = observed_.to_vector();
    if (arc_ && terms != Terms::science) {
      const std::vector<double> a = arc_->observed.to_vector();
      y.insert(y.end(), a.begin(), a.end());
    }
    const double w = 1.0 / (s.noise * s.noise);
    std::vector<double> G(static_cast<std::size_t>(K * K), 0.0), b(static_cast<std::size_t>(K), 0.0);
    for (std::int64_t i = 0; i < K; ++i) {
      const auto& mi = M[static_cast<std::size_t>(i)];
      for (std::size_t q = 0; q < y.size(); ++q) b[static_cast<std::size_t>(i)] += mi[q] * y[q] * w;
      for (std::int64_t j = 0; j <= i; ++j) {
        const auto& mj = M[static_cast<std::size_t>(j)];
        double acc = 0;
        for (std::size_t q = 0; q < y.size(); ++q) acc += mi[q] * mj[q];
        G[static_cast<std::size_t>(i * K + j)] = G[static_cast<std::size_t>(j * K + i)] = acc * w;
      }
    }
    // G = L L^T (L lower); R = L^T, c = L^-1 b.
    std::vector<double> L(static_cast<std::size_t>(K * K), 0.0);
    for (std::int64_t j = 0; j < K; ++j) {
      double d = G[static_cast<std::size_t>(j * K + j)];
      for (std::int64_t k = 0; k < j; ++k)
        d -= L[static_cast<std::size_t>(j * K + k)] * L[static_cast<std::size_t>(j * K + k)];
      if (!(d > 0)) throw std::runtime_error("lm: the response's normal equations are singular");
      L[static_cast<std::size_t>(j * K + j)] = std::sqrt(d);
      for (std::int64_t i = j + 1; i < K; ++i) {
        double t = G[static_cast<std::size_t>(i * K + j)];
        for (std::int64_t k = 0; k < j; ++k)
          t -= L[static_cast<std::size_t>(i * K + k)] * L[static_cast<std::size_t>(j * K + k)];
        L[static_cast<std::size_t>(i * K + j)] = t / L[static_cast<std::size_t>(j * K + j)];
      }
    }
    std::vector<double> c(static_cast<std::size_t>(K)), R(static_cast<std::size_t>(K * K));
    for (std::int64_t i = 0; i < K; ++i) {
      double t = b[static_cast<std::size_t>(i)];
      for (std::int64_t k = 0; k < i; ++k) t -= L[static_cast<std::size_t>(i * K + k)] * c[static_cast<std::size_t>(k)];
      c[static_cast<std::size_t>(i)] = t / L[static_cast<std::size_t>(i * K + i)];
      for (std::int64_t j = 0; j < K; ++j)
        R[static_cast<std::size_t>(i * K + j)] = L[static_cast<std::size_t>(j * K + i)];
    }
    log_.evaluations += (terms == Terms::both && arc_ ? 2 : 1) * K;  // forward passes of a frame, no backward
    return {Tensor::from_vector(R, {K, K}, kFloat64), Tensor::from_vector(c, {K, 1}, kFloat64)};
  };
  nn::LeastSquaresOptions lm;
  lm.max_iter = 1;
  nn::LBFGS opt(others, nn::LBFGSOptions(1).line_search_fn("strong_wolfe").max_iter(s.lbfgs_iter).history_size(20));
  double chi2 = 0;
  for (int it = 0; it < steps; ++it) {
    // (a) everything but the response
    v.set_requires_grad(false);
    opt.step([&] {
      opt.zero_grad();
      return loss(terms, s, chi2);
    });
    // (b) the response
    for (const Tensor& p : others) Tensor(p).set_requires_grad(false);
    v.set_requires_grad(true);
    const auto [R, c] = response_block();
    const nn::LeastSquaresResult res = nn::least_squares(
        [&, &R = R, &c = c] {
          Tensor r = matmul(R, reshape(v.to(kFloat64), {K, 1})) - c;
          if (s.response_smoothness > 0)
            r = cat({r, reshape((slice(v, 0, 2, K) - slice(v, 0, 1, K - 1) * 2.0 + slice(v, 0, 0, K - 2)).to(kFloat64) *
                                    std::sqrt(s.response_smoothness * static_cast<double>(pixels)),
                                {K - 2, 1})},
                    0);
          return r;
        },
        {v}, lm);
    // One backward pass per residual for each Jacobian: at the start and after the accepted step.
    log_.evaluations += res.evaluations;
    log_.backward_passes += (res.iterations + 1) * res.num_residuals;
    for (const Tensor& p : others) Tensor(p).set_requires_grad(true);
    project_response(m, s);
    {
      NoGradGuard ng;
      Tensor c2;
      objective(m, observed_, arc_, s, &c2, terms);
      chi2 = c2.defined() ? c2.item() : objective(m, observed_, arc_, s, nullptr, terms).item();
    }
    record(stage, chi2);
    if (progress_) bar.update(it + 1, chi2);
    if (stop_) break;
  }
}

void fit(SpectralModel& model, const Tensor& observed, const Arc* arc, const Settings& s, FitLog& log, bool progress) {
  Fitter(model, observed, arc, s, log, progress).run();
}

// 1-sigma uncertainties of the per-fibre shifts by the Laplace approximation: near the optimum the
// negative log-likelihood 0.5 * sum(((model - observed) / noise)^2) is a quadratic whose Hessian is
// J^T J (Gauss-Newton: the term with the residuals' second derivatives averages to zero at the
// optimum), J the Jacobian of the residuals. Fibre n's pixels depend on shift n alone, so the
// shifts' block of J^T J is diagonal: H_nn = sum_a (d model[n, a] / d shift_n / noise)^2, with the
// derivative taken by central differences of the model (every fibre shifted by +-h at once). This is
// the uncertainty with the spectrum and the response held at their fitted values (the conditional
// one); --calibrate measures how well it matches the scatter of refits.
std::vector<double> shift_sigmas(SpectralModel& model, const Settings& s) {
  NoGradGuard no_grad;
  Tensor shift = model.shift();
  const Tensor saved = shift.clone_data();
  const double h = 0.01;  // A; the lines are >= 0.2 A wide and the response ~0.9 A
  shift.copy_(saved + h);
  const Tensor up = model.forward().to(kFloat64);
  shift.copy_(saved - h);
  const Tensor down = model.forward().to(kFloat64);
  shift.copy_(saved);
  const Tensor d = (up - down) * (1.0 / (2 * h * s.noise));
  const std::vector<double> info = sum(d * d, {1}).to_vector();
  std::vector<double> sigma(info.size());
  for (std::size_t n = 0; n < info.size(); ++n) sigma[n] = 1.0 / std::sqrt(info[n]);
  return sigma;
}

// sigma of shift_n - shift_0 (independent in the conditional approximation above).
std::vector<double> relative_sigmas(const std::vector<double>& sigma) {
  std::vector<double> rel(sigma.size(), 0.0);
  for (std::size_t n = 1; n < sigma.size(); ++n) rel[n] = std::sqrt(sigma[n] * sigma[n] + sigma[0] * sigma[0]);
  return rel;
}

// --calibrate K: the same instrument and spectrum observed with K new noise realisations, each fitted
// from the start; the scatter of the recovered relative offsets around the truth against the mean
// reported 1-sigma. Returns 1 when they disagree by more than 25%.
int calibrate(const Settings& s, const std::vector<double>& rel_true, const Truth& truth) {
  const int N = s.fibres, K = s.calibrate;
  std::vector<double> sum_err2(static_cast<std::size_t>(N), 0.0), sum_sig2(static_cast<std::size_t>(N), 0.0);
  utils::ProgressBar bar("calibrate: refits with new noise", K);
  for (int k = 0; k < K; ++k) {
    Tensor nominal, observed;
    Truth t;
    Arc arc;
    simulate(s, s.seed + 2 + static_cast<std::uint64_t>(k), nominal, observed, t, s.arc ? &arc : nullptr);
    SpectralModel model(s, nominal, mean(observed).item());
    FitLog log;
    fit(model, observed, s.arc ? &arc : nullptr, s, log, /*progress=*/false);
    const std::vector<double> shift = model.shift().to_vector();
    const std::vector<double> sig = relative_sigmas(shift_sigmas(model, s));
    for (int n = 1; n < N; ++n) {
      const double e = (shift[n] - shift[0]) - rel_true[n];
      sum_err2[n] += e * e;
      sum_sig2[n] += sig[n] * sig[n];
    }
    bar.update(k + 1, log.value.back());
  }
  std::printf("\ncalibration over %d noise realisations (relative offsets, detector pixels):\n", K);
  double all_err2 = 0, all_sig2 = 0;
  for (int n = 1; n < N; ++n) {
    const double scatter = std::sqrt(sum_err2[n] / K), sigma = std::sqrt(sum_sig2[n] / K);
    std::printf("  fibre %2d  rms error %.4f px  reported sigma %.4f px  ratio %.2f\n", n,
                scatter / truth.dispersion[n], sigma / truth.dispersion[n], scatter / sigma);
    all_err2 += sum_err2[n];
    all_sig2 += sum_sig2[n];
  }
  const double ratio = std::sqrt(all_err2 / all_sig2);
  const bool ok = std::abs(ratio - 1.0) <= 0.25;
  std::printf("all fibres: rms error / reported sigma = %.2f (goal: within 25%% of 1): %s\n", ratio,
              ok ? "agree" : "DISAGREE");
  return ok ? 0 : 1;
}

// Gaussian smoothing with a standard deviation of `sigma` samples (truncated at 3 sigma, renormalised at the ends).
std::vector<double> smooth(const std::vector<double>& x, double sigma) {
  const auto half = static_cast<std::ptrdiff_t>(3 * sigma);
  std::vector<double> w(static_cast<std::size_t>(2 * half + 1));
  for (std::ptrdiff_t k = -half; k <= half; ++k)
    w[static_cast<std::size_t>(k + half)] = std::exp(-0.5 * k * k / (sigma * sigma));
  std::vector<double> y(x.size());
  const auto n = static_cast<std::ptrdiff_t>(x.size());
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    double acc = 0, norm = 0;
    for (std::ptrdiff_t k = std::max(-half, -i); k <= std::min(half, n - 1 - i); ++k) {
      acc += w[static_cast<std::size_t>(k + half)] * x[static_cast<std::size_t>(i + k)];
      norm += w[static_cast<std::size_t>(k + half)];
    }
    y[static_cast<std::size_t>(i)] = acc / norm;
  }
  return y;
}

std::vector<double> column(const Tensor& t, std::int64_t row) {
  const std::vector<double> all = t.to_vector();
  const std::int64_t w = t.size(1);
  return {all.begin() + row * w, all.begin() + (row + 1) * w};
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "spectral_fit: recover a high-resolution spectrum, the instrument response and per-fibre wavelength "
      "offsets from 20 fibres (nn::ResampleConv)"};
  app.add_option("--steps1", s.steps1, "Adam steps of stage 1 (spectrum only)")->capture_default_str();
  app.add_option("--steps2", s.steps2, "Adam steps of stage 2 (spectrum, response, offsets)")->capture_default_str();
  app.add_option("--noise", s.noise, "noise per pixel (continuum ~ 1)")->capture_default_str();
  app.add_option("--seed", s.seed, "seed of the synthetic instrument")->capture_default_str();
  app.add_option("--smoothness", s.smoothness, "weight of the spectrum's smoothness penalty")->capture_default_str();
  app.add_option("--steps3", s.steps3, "Adam steps of stage 3 (spectrum only, response and offsets fixed)")
      ->capture_default_str();
  app.add_option("--smoothness3", s.smoothness3, "stage 3 weight of the spectrum's penalty")->capture_default_str();
  app.add_option("--calibrate", s.calibrate,
                 "refit K new noise realisations of the synthetic data and compare the offsets' scatter with "
                 "their reported 1-sigma uncertainties")
      ->capture_default_str();
  app.add_option("--prior", s.prior,
                 "spectrum prior: squared first differences (d1), squared second differences (d2) or total "
                 "variation (tv)")
      ->check(CLI::IsMember({"d1", "d2", "tv"}))
      ->capture_default_str();
  app.add_option("--response-smoothness", s.response_smoothness, "weight of the response's curvature penalty")
      ->capture_default_str();
  app.add_flag("--positive-response,!--no-positive-response", s.positive_response,
               "keep the learned response non-negative (a line-spread function is; default on)");
  app.add_option("--lr-spectrum", s.lr_spectrum, "stage 2 Adam learning rate of the spectrum")->capture_default_str();
  app.add_option("--lr-response", s.lr_response, "stage 2 Adam learning rate of the response")->capture_default_str();
  app.add_option("--lr-shift", s.lr_shift, "stage 2 Adam learning rate of the shifts [A]")->capture_default_str();
  app.add_flag("--arc,!--no-arc", s.arc,
               "add an arc-lamp exposure (known lines, its own unknown offsets) that constrains the response "
               "(synthetic data only; default on)");
  app.add_option("--steps0", s.steps0, "steps of stage 0 (the response from the arc alone)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--optimizer", s.optimizer,
                 "adam; lbfgs (strong-Wolfe L-BFGS in every stage); lm (Levenberg-Marquardt where it fits, see "
                 "the README)")
      ->check(CLI::IsMember({"adam", "lbfgs", "lm"}))
      ->capture_default_str();
  app.add_option("--lbfgs-iter", s.lbfgs_iter, "L-BFGS iterations per step (between projections of the response)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--target-chi2", s.target_chi2,
                 "print the time, steps and evaluations until the science chi2 per pixel first reaches this value "
                 "in stage 2 or later (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--stop-at-target", s.stop_at_target, "end the fit as soon as --target-chi2 is reached");
  app.add_option("--out", s.out, "output folder for CSVs and plots")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_option("--observed", s.observed_npy, "your observations, (N, A) .npy (with --wavelengths)");
  app.add_option("--wavelengths", s.wavelengths_npy, "your nominal wavelengths, (N, A) .npy");
  app.add_option("--fine-start", s.fine_start, "first fine wavelength")->capture_default_str();
  app.add_option("--fine-step", s.fine_step, "fine grid spacing")->capture_default_str();
  app.add_option("--fine-size", s.fine_size, "number of fine points")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (s.threads > 0) set_num_threads(s.threads);

  try {
    Tensor nominal, observed;
    Truth truth;
    Arc arc;
    const bool synthetic = s.observed_npy.empty();
    if (synthetic) {
      std::printf("Simulating %d fibres x %d pixels observing %lld fine samples (noise %.3g)...\n", s.fibres, s.pixels,
                  static_cast<long long>(s.fine_size), s.noise);
      simulate(s, s.seed + 1, nominal, observed, truth, s.arc ? &arc : nullptr);
    } else {
      if (s.wavelengths_npy.empty()) throw std::invalid_argument("--observed needs --wavelengths");
      observed = load_npy(s.observed_npy).to(kFloat32);
      nominal = load_npy(s.wavelengths_npy).to(kFloat32) - s.fine_start;
      if (observed.dim() != 2 || observed.shape() != nominal.shape())
        throw std::invalid_argument("--observed and --wavelengths must both be (N, A) with the same shape, got " +
                                    shape_str(observed.shape()) + " and " + shape_str(nominal.shape()));
      s.arc = false;  // no arc exposure of your instrument (yet)
      s.fibres = static_cast<int>(observed.size(0));
      s.pixels = static_cast<int>(observed.size(1));
    }
    fs::create_directories(s.out);
    const double level = mean(observed).item();
    SpectralModel model(s, nominal, level);
    FitLog log;
    fit(model, observed, synthetic && s.arc ? &arc : nullptr, s, log, /*progress=*/true);
    const std::vector<double>& loss_step = log.step;
    const std::vector<double>& loss_value = log.value;
    const std::vector<double>& loss_stage = log.stage;
    std::printf(
        "final chi2 per pixel %.3f (1.0 = at the noise level); optimizer %s: %zu steps, %lld evaluations, %lld "
        "backward passes, %.1f s (%.1f s CPU)\n",
        loss_value.back(), s.optimizer.c_str(), log.step.size(), static_cast<long long>(log.evaluations),
        static_cast<long long>(log.backward_passes), log.seconds.back(), log.cpu_seconds);
    if (s.target_chi2 > 0) {
      if (log.reached_seconds >= 0)
        std::printf("target chi2 %.4f reached after %.1f s (%.1f s CPU), %lld steps, %lld evaluations (%s)\n",
                    s.target_chi2, log.reached_seconds, log.reached_cpu, static_cast<long long>(log.reached_step),
                    static_cast<long long>(log.reached_evals), s.optimizer.c_str());
      else
        std::printf("target chi2 %.4f NOT reached (%s)\n", s.target_chi2, s.optimizer.c_str());
    }

    // ---- report ----
    const int N = s.fibres;
    const std::vector<double> shift = model.shift().to_vector();
    const std::vector<double> rel_sigma = relative_sigmas(shift_sigmas(model, s));
    std::vector<double> fibre(N), rel_est(N), rel_true(N), err_px(N), sigma_px(N);
    double worst_px = 0;
    for (int n = 0; n < N; ++n) {
      fibre[n] = n;
      rel_est[n] = shift[n] - shift[0];
      if (synthetic) {
        rel_true[n] = truth.offsets[n] - truth.offsets[0];
        err_px[n] = (rel_est[n] - rel_true[n]) / truth.dispersion[n];
        sigma_px[n] = rel_sigma[n] / truth.dispersion[n];
        worst_px = std::max(worst_px, std::abs(err_px[n]));
      }
    }
    std::printf(
        "\nper-fibre wavelength offsets relative to fibre 0, with 1-sigma uncertainties (A; error in detector "
        "pixels):\n");
    for (int n = 0; n < N; ++n) {
      if (synthetic)
        std::printf("  fibre %2d  true %+8.4f  recovered %+8.4f +- %.4f  error %+7.4f px (%+5.1f sigma)\n", n,
                    rel_true[n], rel_est[n], rel_sigma[n], err_px[n],
                    n == 0 ? 0.0 : (rel_est[n] - rel_true[n]) / rel_sigma[n]);
      else
        std::printf("  fibre %2d  recovered %+8.4f +- %.4f\n", n, rel_est[n], rel_sigma[n]);
    }
    const std::vector<double> S = model.spectrum().to_vector();
    std::vector<double> lam(S.size());
    for (std::size_t b = 0; b < S.size(); ++b) lam[b] = s.fine_start + s.fine_step * static_cast<double>(b);
    int status = 0;
    if (synthetic) {
      // Spectrum error over the wavelengths the fibres cover (away from the grid's ends), raw and
      // after smoothing both truth and fit with a Gaussian of the response's core width (0.9 A):
      // detail finer than the response is what no fit of these data can recover.
      const double lo = nominal.to_vector().front() + 5, hi = s.fine_step * static_cast<double>(s.fine_size) - 10;
      const std::vector<double> sm_fit = smooth(S, 0.9 / s.fine_step),
                                sm_true = smooth(truth.spectrum, 0.9 / s.fine_step);
      double se = 0, se_smooth = 0, st = 0;
      std::int64_t cnt = 0;
      for (std::size_t b = 0; b < S.size(); ++b) {
        const double x = s.fine_step * static_cast<double>(b);
        if (x < lo || x > hi) continue;
        se += std::pow(S[b] - truth.spectrum[b], 2);
        se_smooth += std::pow(sm_fit[b] - sm_true[b], 2);
        st += std::pow(truth.spectrum[b] - 1.0, 2);
        ++cnt;
      }
      std::printf("\nworst offset error %.4f px (goal: < 0.1 px)\n", worst_px);
      std::printf(
          "spectrum over %.0f-%.0f A: rms error %.4f against the truth (whose rms depth below 1 is %.4f);\n"
          "  %.4f after smoothing both to the response's width (0.9 A)\n",
          s.fine_start + lo, s.fine_start + hi, std::sqrt(se / cnt), std::sqrt(st / cnt), std::sqrt(se_smooth / cnt));
      if (worst_px >= 0.1) {
        std::fprintf(stderr, "spectral_fit: FAILED: worst fibre offset error %.4f px is not below the goal of 0.1 px\n",
                     worst_px);
        status = 1;
      }
      utils::write_csv((fs::path(s.out) / "offsets.csv").string(),
                       {"fibre", "true_A", "recovered_A", "error_px", "sigma_A", "sigma_px"},
                       {fibre, rel_true, rel_est, err_px, rel_sigma, sigma_px});
      utils::write_csv((fs::path(s.out) / "spectrum.csv").string(), {"wavelength", "true", "recovered"},
                       {lam, truth.spectrum, S});
    } else {
      utils::write_csv((fs::path(s.out) / "offsets.csv").string(), {"fibre", "recovered_A", "sigma_A"},
                       {fibre, rel_est, rel_sigma});
      utils::write_csv((fs::path(s.out) / "spectrum.csv").string(), {"wavelength", "recovered"}, {lam, S});
    }
    if (synthetic && s.calibrate > 0) status = std::max(status, calibrate(s, rel_true, truth));
    // Observed vs model for fibre 0.
    Tensor model_out;
    {
      NoGradGuard ng;
      model_out = model.forward();
    }
    std::vector<double> wl0 = column(nominal, 0);
    for (double& w : wl0) w += s.fine_start;
    utils::write_csv((fs::path(s.out) / "observed_vs_model.csv").string(), {"wavelength", "observed", "model"},
                     {wl0, column(observed, 0), column(model_out, 0)});
    utils::write_csv((fs::path(s.out) / "loss.csv").string(), {"step", "chi2", "stage", "seconds"},
                     {loss_step, loss_value, loss_stage, log.seconds});
    std::vector<double> dd, r_true, r_fit, r_nom;
    const Response learned = model.conv()->response();
    for (int i = 0; i <= 400; ++i) {
      const double d = -s.half_width + 2 * s.half_width * i / 400.0;
      dd.push_back(d);
      r_fit.push_back(learned(d));
      r_nom.push_back(nominal_lsf(d));
      r_true.push_back(synthetic ? true_lsf(d) : 0.0);
    }
    utils::write_csv((fs::path(s.out) / "response.csv").string(), {"offset_A", "true", "learned", "nominal"},
                     {dd, r_true, r_fit, r_nom});

    // The pictures: each says at a glance what it shows (titles name the quantity, axes carry units).
    // gnuplot keeps settings from one plot to the next, so every plot sets its own title and key.
    std::size_t first2 = 0;  // the first step of stage 2
    while (first2 < loss_stage.size() && loss_stage[first2] < 2) ++first2;
    const std::string stage2_at = std::to_string(first2);
    const std::string truth_col = synthetic ? "3" : "2";  // the recovered spectrum's column
    std::string script;
    // Loss: the stages in their own colours, the start of stage 2 marked by a line and a label.
    script += "set output 'loss.png'\nset title 'fit quality: chi^2 per pixel (1 = at the noise level)'\n";
    script +=
        "set xlabel '" + s.optimizer + " step'\nset ylabel 'chi^2 per pixel'\nset logscale y\nset key top right\n";
    script +=
        "set arrow 1 from " + stage2_at + ", graph 0 to " + stage2_at + ", graph 1 nohead dt 2 lw 2 lc rgb 'gray40'\n";
    script += "set label 1 'stage 2: + response and offsets' at " + stage2_at + ", graph 0.5 offset 1,0\n";
    script +=
        "plot 'loss.csv' using 1:($3 == 0 ? $2 : 1/0) with lines lw 2 lc rgb '#2ca02c' "
        "title 'stage 0: response from the arc (arc chi^2)', "
        "'' using 1:($3 == 1 ? $2 : 1/0) with lines lw 2 lc rgb '#1f77b4' "
        "title 'stage 1: spectrum only', '' using 1:($3 == 2 ? $2 : 1/0) with lines lw 2 lc rgb '#d62728' "
        "title 'stage 2: spectrum, response, offsets'";
    script += s.steps3 > 0 ? ", '' using 1:($3 == 3 ? $2 : 1/0) with lines lw 2 lc rgb '#9467bd' title 'stage 3: "
                             "spectrum'\n"
                           : "\n";
    script += "unset arrow 1\nunset label 1\nunset logscale y\n";
    // Observed vs model: the data as visible points, the model as a line, residuals below.
    script += "set output 'observed_vs_model.png'\n";
    script += "set multiplot layout 2,1 title 'fibre 0: observed pixels and the fitted model'\nset lmargin 12\n";
    script += "set title 'flux'\nset key outside top center horizontal\nset ylabel 'flux (continuum = 1)'\n";
    script += "unset xlabel\nset format x ''\n";
    script +=
        "plot 'observed_vs_model.csv' using 1:2 with points pt 7 ps 0.6 lc rgb '#1f77b4' title 'observed', "
        "'' using 1:3 with lines lw 2 lc rgb '#d62728' title 'model'\n";
    script += "set title 'residuals'\nunset key\nset format x '%g'\nset xlabel 'wavelength [A]'\n";
    script += "set ylabel 'observed - model'\n";
    script +=
        "plot 'observed_vs_model.csv' using 1:($2-$3) with points pt 7 ps 0.4 lc rgb '#1f77b4', "
        "0 with lines lc rgb 'gray40'\n";
    script += "unset multiplot\nset lmargin -1\nset key default\nset key autotitle columnhead\n";
    // The recovered high-resolution spectrum, zoomed on a few lines.
    script += "set output 'spectrum.png'\nset title 'high-resolution spectrum (zoom on 5100-5160 A)'\n";
    script += "set xlabel 'wavelength [A]'\nset ylabel 'flux (continuum = 1)'\nset xrange [5100:5160]\n";
    script += "set key bottom right\n";
    script += "plot 'spectrum.csv' using 1:" + truth_col + " with lines lw 2 lc rgb '#d62728' title 'recovered'";
    script += synthetic ? ", '' using 1:2 with lines lw 1 lc rgb 'black' title 'truth'\n" : "\n";
    script += "unset xrange\n";
    // The instrument response.
    script += "set output 'response.png'\nset title 'instrument response (line-spread function)'\n";
    script += "set xlabel 'offset from line centre [A]'\nset ylabel 'response [1/A]'\nset key top right\n";
    script +=
        "plot 'response.csv' using 1:3 with lines lw 2 lc rgb '#d62728' title 'learned', "
        "'' using 1:4 with lines dt 2 lw 2 lc rgb 'gray40' title 'nominal (start)'";
    script += synthetic ? ", '' using 1:2 with lines lw 1 lc rgb 'black' title 'truth'\n" : "\n";
    // The example's point: the per-fibre wavelength offsets, recovered against the truth, and the
    // error in detector pixels against the 0.1 px goal.
    script += "set output 'offsets.png'\nset xrange [-0.5:" + std::to_string(N - 0.5) + "]\n";
    if (synthetic) {
      script += "set multiplot layout 2,1 title 'per-fibre wavelength offsets, relative to fibre 0'\nset lmargin 12\n";
      script += "set title 'offset'\nset key outside top center horizontal\nunset xlabel\nset format x ''\n";
      script += "set ylabel 'offset [A]'\n";
      script +=
          "plot 'offsets.csv' using 1:2 with points pt 6 ps 2 lw 2 lc rgb 'black' title 'truth', "
          "'' using 1:3:5 with yerrorbars pt 7 ps 1 lc rgb '#d62728' title 'recovered (1 sigma)'\n";
      script += "set title 'error of the recovered offset'\nset format x '%g'\nset xlabel 'fibre'\n";
      script += "set ylabel 'error [detector pixels]'\nset autoscale y\n";
      script +=
          "plot 'offsets.csv' using 1:4:6 with yerrorbars pt 7 ps 1 lw 2 lc rgb '#d62728' title 'recovered - truth (1 "
          "sigma)', "
          "0 with lines dt 2 lc rgb 'gray40' notitle\n";
      script += "unset multiplot\n";
    } else {
      script += "set title 'recovered per-fibre wavelength offsets, relative to fibre 0'\nset xlabel 'fibre'\n";
      script += "set ylabel 'offset [A]'\nset key top left\n";
      script +=
          "plot 'offsets.csv' using 1:2:3 with yerrorbars pt 7 ps 1.2 lc rgb '#d62728' title 'recovered (1 sigma)'\n";
    }
    const bool plotted = examples::run_gnuplot(s.out, "plots", script);
    std::printf("\nCSVs%s written to %s/\n", plotted ? " and PNG plots" : "", s.out.c_str());
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spectral_fit: %s\n", e.what());
    return 2;
  }
}
