// Sparse training (issue 50): the training step of examples/sparse_training's MLP (784 -> H -> H -> 10,
// ReLU, Adam, batch 128, cross-entropy), dense against block-sparse hidden layers with a static random
// pattern and with a pattern that learns (nn::Sparsifier, RigL and SET, one structure update every
// --update-every steps, so a window of that many steps holds exactly one update: the update's cost is
// amortised as in training). Rows `case,impl,threads,metric,value`:
//   step_ms          median over --reps windows of the window's time / its steps (update included)
//   update_ms        median time of the update steps' sparsifier.step() alone (rigl, set)
//   param_opt_bytes  bytes of the parameters plus Adam's state
// Windows of the runs alternate (dense, static, rigl, set, dense, ...) so that the machine's drift
// reaches every run alike. The data are random (the step's time does not depend on them).
//
// usage: sparse_training [--threads N] [--reps N] [--hidden H] [--density D] [--update-every K]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/xgrad.hpp"

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 1, reps = 5;
  std::int64_t hidden = 2048, batch = 128, update_every = 100;
  double density = 0.1;
};

struct Run {
  std::string impl;
  std::shared_ptr<nn::Sequential> net;
  std::vector<std::shared_ptr<nn::BlockSparseLinear>> sparse;
  std::unique_ptr<nn::Adam> opt;
  std::unique_ptr<nn::Sparsifier> sparsifier;
  std::vector<double> window_ms, update_ms;
};

Run make_run(const std::string& impl, const Options& o) {
  Run r;
  r.impl = impl;
  Generator gen(7);
  r.net = std::make_shared<nn::Sequential>();
  std::int64_t in = 784;
  for (int l = 0; l < 2; ++l) {
    if (impl == "dense") {
      r.net->push_back(std::make_shared<nn::Linear>(in, o.hidden, gen));
    } else {
      auto layer = std::make_shared<nn::BlockSparseLinear>(
          BlockSparsePattern::random(InFeatures{in}, OutFeatures{o.hidden}, {InFeatures{16}, OutFeatures{32}},
                                     o.density, gen),
          gen);
      r.sparse.push_back(layer);
      r.net->push_back(layer);
    }
    r.net->push_back(std::make_shared<nn::ReLU>());
    in = o.hidden;
  }
  r.net->push_back(std::make_shared<nn::Linear>(in, 10, gen));
  r.opt = std::make_unique<nn::Adam>(r.net->parameters(), nn::AdamOptions(1e-3));
  if (impl == "rigl" || impl == "set")
    r.sparsifier =
        std::make_unique<nn::Sparsifier>(r.sparse, *r.opt,
                                         nn::SparsifierOptions(o.update_every, 1 << 30)
                                             .grow(impl == "rigl" ? nn::GrowMode::gradient : nn::GrowMode::random));
  return r;
}

// One window of update_every steps; returns its time in ms and records the update step's sparsifier time.
double window(Run& r, const Options& o, const Tensor& x, const Tensor& y) {
  const auto t0 = Clock::now();
  for (std::int64_t s = 0; s < o.update_every; ++s) {
    r.opt->zero_grad(true);
    cross_entropy(r.net->forward(x), y).backward();
    r.opt->step();
    if (r.sparsifier) {
      const auto u0 = Clock::now();
      if (r.sparsifier->step() > 0)
        r.update_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - u0).count());
    }
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"sparse training step: dense vs static block-sparse vs RigL / SET"};
  app.add_option("--threads", o.threads)->capture_default_str();
  app.add_option("--reps", o.reps, "timed windows per run")->capture_default_str();
  app.add_option("--hidden", o.hidden)->capture_default_str();
  app.add_option("--density", o.density, "block density of the sparse runs")->capture_default_str();
  app.add_option("--update-every", o.update_every, "steps per window (one structure update each)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  set_num_threads(o.threads);
  const std::string c = fmt::format("mlp784_h{}_b{}_d{}", o.hidden, o.batch, o.density);
  Generator gen(3);
  const Tensor x = Tensor::randn({o.batch, 1, 28, 28}, gen);
  std::vector<double> labels(static_cast<std::size_t>(o.batch));
  for (auto& l : labels) l = double(gen.integer(10));
  const Tensor y = Tensor::from_vector(labels, {o.batch}, kInt64);
  const Tensor xf = reshape(x, {o.batch, 784});

  std::vector<Run> runs;
  for (const char* impl : {"dense", "static", "rigl", "set"}) runs.push_back(make_run(impl, o));
  for (auto& r : runs) window(r, o, xf, y);  // warm-up: one window each (first update included)
  for (auto& r : runs) r.update_ms.clear();
  for (int rep = 0; rep < o.reps; ++rep)
    for (auto& r : runs) r.window_ms.push_back(window(r, o, xf, y));
  for (auto& r : runs) {
    std::printf("%s,%s,%d,step_ms,%.6g\n", c.c_str(), r.impl.c_str(), o.threads,
                median(r.window_ms) / double(o.update_every));
    if (r.sparsifier)
      std::printf("%s,%s,%d,update_ms,%.6g\n", c.c_str(), r.impl.c_str(), o.threads, median(r.update_ms));
    double bytes = 0;
    for (const auto& p : r.net->parameters()) {
      bytes += double(p.nbytes());
      for (const auto& b : r.opt->state_buffers(p)) bytes += double(b.nbytes());
    }
    std::printf("%s,%s,%d,param_opt_bytes,%.6g\n", c.c_str(), r.impl.c_str(), o.threads, bytes);
  }
  return 0;
}
