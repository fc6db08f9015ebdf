// Tests for nn/optim.* and nn/lr_scheduler.*: step-by-step parity with PyTorch 1.13's optimizers
// (foreach=False), schedulers and clip_grad_norm_ (tests/nn/optim_parity.py), state_dict round trips,
// thread determinism, float32, and bad inputs.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "support.hpp"
#include "xgrad/nn/lr_scheduler.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
using nlohmann::json;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<nn::Optimizer>(const std::vector<Tensor>&)>;
using MakeScheduler = std::function<std::shared_ptr<nn::LRScheduler>(nn::Optimizer&)>;

// Slice k of a stacked [K, *shape] tensor, as a fresh tensor of `shape`.
Tensor slice(const Tensor& stacked, std::int64_t k, const Shape& shape) {
  Tensor out = Tensor::empty(shape, stacked.dtype());
  const std::size_t bytes = out.nbytes();
  std::memcpy(out.raw_data(), static_cast<const char*>(stacked.raw_data()) + static_cast<std::size_t>(k) * bytes,
              bytes);
  return out;
}

// Writes `t` into slice k of `stacked`.
void put_slice(Tensor& stacked, std::int64_t k, const Tensor& t) {
  const std::size_t bytes = t.nbytes();
  std::memcpy(static_cast<char*>(stacked.raw_data()) + static_cast<std::size_t>(k) * bytes, t.raw_data(), bytes);
}

Shape stacked_shape(std::int64_t k, const Shape& s) {
  Shape out{k};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// One optimizer run: parameters, their gradients at every step, and what we computed.
struct OptimRun {
  std::vector<Tensor> init;              // initial parameters
  std::vector<Tensor> grads;             // [K, *shape] each
  std::vector<Tensor> outs;              // parameters after each step, [K, *shape] each
  std::vector<std::vector<double>> lrs;  // at construction and after each step
  std::vector<double> norms;             // clip_grad_norm_ results
};

struct RunSpec {
  std::int64_t steps = 20;
  std::vector<std::pair<int, int>> skip = {};                    // (param, step) without a gradient
  std::optional<std::pair<double, double>> clip = std::nullopt;  // (max_norm, norm_type)
};

// Runs `steps` steps of the optimizer made by `make` on copies of `init` with the given gradients.
OptimRun run_ours(const std::vector<Tensor>& init, const std::vector<Tensor>& grads, const MakeOptimizer& make,
                  const MakeScheduler& make_sched, const RunSpec& spec) {
  OptimRun r;
  r.init = init;
  r.grads = grads;
  std::vector<Tensor> params;
  for (const auto& p : init) params.push_back(p.clone_data().set_requires_grad());
  auto opt = make(params);
  std::shared_ptr<nn::LRScheduler> sched = make_sched ? make_sched(*opt) : nullptr;
  auto lrs = [&] {
    std::vector<double> v;
    for (std::size_t g = 0; g < opt->param_groups().size(); ++g) v.push_back(opt->lr(g));
    return v;
  };
  r.lrs.push_back(lrs());
  for (const auto& p : params) r.outs.push_back(Tensor::empty(stacked_shape(spec.steps, p.shape()), p.dtype()));
  for (std::int64_t k = 0; k < spec.steps; ++k) {
    for (std::size_t j = 0; j < params.size(); ++j) {
      bool skip = false;
      for (auto [pj, pk] : spec.skip) skip = skip || (pj == static_cast<int>(j) && pk == k);
      params[j].set_grad(skip ? Tensor() : slice(grads[j], k, params[j].shape()));
    }
    if (spec.clip) r.norms.push_back(nn::clip_grad_norm_(params, spec.clip->first, spec.clip->second));
    opt->step();
    for (std::size_t j = 0; j < params.size(); ++j) put_slice(r.outs[j], k, params[j]);
    if (sched) sched->step();
    r.lrs.push_back(lrs());
  }
  return r;
}

// Random parameters and gradients: shapes (3, 4), (5) and a 0-d scalar; gradient scales vary by step
// so that clipping is active at some steps and not at others.
void make_data(std::uint64_t seed, std::int64_t steps, std::vector<Tensor>& init, std::vector<Tensor>& grads,
               Dtype dtype = kFloat64) {
  Generator gen(seed);
  for (const Shape& s : {Shape{3, 4}, Shape{5}, Shape{}}) {
    init.push_back(Tensor::randn(s, gen, kFloat64).to(dtype));
    Tensor g = Tensor::randn(stacked_shape(steps, s), gen, kFloat64);
    const std::int64_t per = shape_numel(s);
    double* gp = g.data<double>();
    for (std::int64_t k = 0; k < steps; ++k)
      for (std::int64_t i = 0; i < per; ++i) gp[k * per + i] *= 0.3 + 0.1 * static_cast<double>(k % 7);
    grads.push_back(g.to(dtype));
  }
}

// Batch of optimizer cases replayed with torch in one Python process.
class OptimParity {
 public:
  OptimParity() {
    const auto base = std::filesystem::temp_directory_path() / ("xgrad_optim_parity_" + std::to_string(::getpid()));
    std::filesystem::remove_all(base);
    std::filesystem::create_directories(base);
    dir_ = base.string();
  }

  // torch_spec: {"optimizer", "defaults", "groups" (indices into the 3 parameters), "scheduler"}.
  void add(const std::string& name, json torch_spec, const MakeOptimizer& make, const MakeScheduler& make_sched = {},
           RunSpec spec = {}) {
    std::vector<Tensor> init, grads;
    make_data(1000 + cases_.size(), spec.steps, init, grads);
    OptimRun r = run_ours(init, grads, make, make_sched, spec);
    torch_spec["name"] = name;
    torch_spec["num_params"] = init.size();
    torch_spec["steps"] = spec.steps;
    json skip = json::array();
    for (auto [j, k] : spec.skip) skip.push_back({j, k});
    torch_spec["skip"] = skip;
    if (spec.clip)
      torch_spec["clip"] = {{"max_norm", spec.clip->first},
                            {"norm_type", std::isinf(spec.clip->second) ? json("inf") : json(spec.clip->second)}};
    if (!torch_spec.contains("groups"))
      torch_spec["groups"] = json::array({{{"params", {0, 1, 2}}, {"options", json::object()}}});
    if (!torch_spec.contains("scheduler")) torch_spec["scheduler"] = nullptr;
    for (std::size_t j = 0; j < init.size(); ++j) {
      save_npy(fmt::format("{}/{}__p{}.npy", dir_, name, j), init[j]);
      save_npy(fmt::format("{}/{}__g{}.npy", dir_, name, j), grads[j]);
    }
    manifest_.push_back(torch_spec);
    cases_.emplace_back(name, std::move(r));
  }

  void run() {
    {
      std::ofstream f(dir_ + "/manifest.json");
      f << manifest_.dump(1);
    }
    const std::string script = std::string(XGRAD_SOURCE_DIR) + "/tests/nn/optim_parity.py";
    const std::string cmd = "/usr/bin/python3 " + script + " " + dir_ + " > " + dir_ + "/python.log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(dir_ + "/python.log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      FAIL("torch optimizer script failed (" << cmd << "):\n" << text);
    }
    for (const auto& [name, r] : cases_) {
      INFO("optimizer parity case '" << name << "'");
      for (std::size_t j = 0; j < r.outs.size(); ++j) {
        const Tensor ref = load_npy(fmt::format("{}/{}__out_p{}.npy", dir_, name, j));
        REQUIRE(ref.shape() == r.outs[j].shape());
        const auto ours = r.outs[j].to_vector(), theirs = ref.to_vector();
        const std::int64_t steps = ref.size(0), per = ref.numel() / steps;
        for (std::int64_t k = 0; k < steps; ++k) {
          // Compare after every step so that a failure names the first step that differs.
          Tensor a = Tensor::from_vector({ours.begin() + k * per, ours.begin() + (k + 1) * per}, {per}, kFloat64);
          Tensor b = Tensor::from_vector({theirs.begin() + k * per, theirs.begin() + (k + 1) * per}, {per}, kFloat64);
          INFO("parameter " << j << " after step " << k + 1 << "\n ours  " << a << "\n torch " << b);
          REQUIRE(allclose(a, b, 1e-12, 1e-14));
        }
      }
      const Tensor lrs = load_npy(fmt::format("{}/{}__lrs.npy", dir_, name));
      const auto lv = lrs.to_vector();
      REQUIRE(lrs.numel() == static_cast<std::int64_t>(r.lrs.size() * r.lrs[0].size()));
      for (std::size_t k = 0; k < r.lrs.size(); ++k)
        for (std::size_t g = 0; g < r.lrs[k].size(); ++g) {
          INFO("lr of group " << g << " after " << k << " scheduler steps");
          // Same doubles as torch, not merely close (Note [Scheduler parity]).
          CHECK(r.lrs[k][g] == lv[k * r.lrs[k].size() + g]);
        }
      if (!r.norms.empty()) {
        const auto nv = load_npy(fmt::format("{}/{}__norms.npy", dir_, name)).to_vector();
        REQUIRE(nv.size() == r.norms.size());
        for (std::size_t k = 0; k < nv.size(); ++k) {
          INFO("clip_grad_norm_ at step " << k + 1 << ": ours " << r.norms[k] << ", torch " << nv[k]);
          CHECK(std::abs(r.norms[k] - nv[k]) <= 1e-12 * std::abs(nv[k]));
        }
      }
    }
    std::filesystem::remove_all(dir_);
  }

 private:
  std::string dir_;
  json manifest_ = json::array();
  std::vector<std::pair<std::string, OptimRun>> cases_;
};

json spec(const std::string& optimizer, json defaults) {
  return {{"optimizer", optimizer}, {"defaults", std::move(defaults)}};
}

template <class Opt, class Options>
MakeOptimizer maker(Options options) {
  return [options](const std::vector<Tensor>& params) { return std::make_unique<Opt>(params, options); };
}

}  // namespace

TEST_CASE("optimizers, schedulers and clip_grad_norm_ match PyTorch step by step", "[optim][nn][parity]") {
  OptimParity batch;
  // SGD
  batch.add("sgd_plain", spec("sgd", {{"lr", 0.1}}), maker<nn::SGD>(nn::SGDOptions(0.1)));
  batch.add("sgd_momentum", spec("sgd", {{"lr", 0.05}, {"momentum", 0.9}}),
            maker<nn::SGD>(nn::SGDOptions(0.05).momentum(0.9)));
  batch.add("sgd_nesterov", spec("sgd", {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}}),
            maker<nn::SGD>(nn::SGDOptions(0.05).momentum(0.9).nesterov(true)));
  batch.add("sgd_wd_dampening",
            spec("sgd", {{"lr", 0.05}, {"momentum", 0.8}, {"dampening", 0.3}, {"weight_decay", 0.01}}),
            maker<nn::SGD>(nn::SGDOptions(0.05).momentum(0.8).dampening(0.3).weight_decay(0.01)));
  batch.add("sgd_weight_decay", spec("sgd", {{"lr", 0.1}, {"weight_decay", 0.2}}),
            maker<nn::SGD>(nn::SGDOptions(0.1).weight_decay(0.2)));
  // Adam / AdamW
  batch.add("adam", spec("adam", {{"lr", 0.01}}), maker<nn::Adam>(nn::AdamOptions(0.01)));
  batch.add("adam_wd_skip", spec("adam", {{"lr", 0.02}, {"weight_decay", 0.1}}),
            maker<nn::Adam>(nn::AdamOptions(0.02).weight_decay(0.1)), {},
            RunSpec{.skip = {{2, 3}, {2, 4}, {0, 7}, {1, 0}}});
  batch.add("adam_amsgrad", spec("adam", {{"lr", 0.01}, {"betas", {0.8, 0.99}}, {"amsgrad", true}, {"eps", 1e-6}}),
            maker<nn::Adam>(nn::AdamOptions(0.01).betas({0.8, 0.99}).amsgrad(true).eps(1e-6)));
  batch.add("adamw", spec("adamw", {{"lr", 0.01}}), maker<nn::AdamW>(nn::AdamWOptions(0.01)));
  batch.add("adamw_amsgrad", spec("adamw", {{"lr", 0.01}, {"weight_decay", 0.3}, {"amsgrad", true}}),
            maker<nn::AdamW>(nn::AdamWOptions(0.01).weight_decay(0.3).amsgrad(true)));
  // Adagrad
  batch.add("adagrad", spec("adagrad", {{"lr", 0.05}}), maker<nn::Adagrad>(nn::AdagradOptions(0.05)));
  batch.add(
      "adagrad_all_options",
      spec(
          "adagrad",
          {{"lr", 0.05}, {"lr_decay", 0.1}, {"weight_decay", 0.02}, {"initial_accumulator_value", 0.3}, {"eps", 1e-6}}),
      maker<nn::Adagrad>(
          nn::AdagradOptions(0.05).lr_decay(0.1).weight_decay(0.02).initial_accumulator_value(0.3).eps(1e-6)),
      {}, RunSpec{.skip = {{1, 2}, {0, 5}}});
  // RMSprop
  batch.add("rmsprop", spec("rmsprop", {{"lr", 0.01}}), maker<nn::RMSprop>(nn::RMSpropOptions(0.01)));
  batch.add("rmsprop_centered", spec("rmsprop", {{"lr", 0.01}, {"centered", true}, {"weight_decay", 0.05}}),
            maker<nn::RMSprop>(nn::RMSpropOptions(0.01).centered(true).weight_decay(0.05)));
  batch.add("rmsprop_momentum", spec("rmsprop", {{"lr", 0.01}, {"momentum", 0.9}, {"alpha", 0.9}}),
            maker<nn::RMSprop>(nn::RMSpropOptions(0.01).momentum(0.9).alpha(0.9)));
  batch.add("rmsprop_centered_momentum",
            spec("rmsprop", {{"lr", 0.005}, {"momentum", 0.5}, {"centered", true}, {"eps", 1e-4}}),
            maker<nn::RMSprop>(nn::RMSpropOptions(0.005).momentum(0.5).centered(true).eps(1e-4)));

  // Two parameter groups with their own options.
  {
    json s = spec("sgd", {{"lr", 0.1}, {"momentum", 0.9}});
    s["groups"] = json::array({{{"params", {0, 1}}, {"options", json::object()}},
                               {{"params", {2}}, {"options", {{"lr", 0.01}, {"momentum", 0.5}}}}});
    batch.add("sgd_two_groups", s, [](const std::vector<Tensor>& p) {
      return std::make_unique<nn::SGD>(
          std::vector<nn::ParamGroup>{{{p[0], p[1]}}, {.params = {p[2]}, .lr = 0.01, .momentum = 0.5}},
          nn::SGDOptions(0.1).momentum(0.9));
    });
  }
  {
    json s = spec("adam", {{"lr", 0.01}});
    s["groups"] = json::array({{{"params", {1}}, {"options", {{"lr", 0.03}, {"betas", {0.5, 0.9}}}}},
                               {{"params", {0, 2}}, {"options", {{"weight_decay", 0.2}}}}});
    batch.add("adam_two_groups", s, [](const std::vector<Tensor>& p) {
      return std::make_unique<nn::Adam>(
          std::vector<nn::ParamGroup>{{.params = {p[1]}, .lr = 0.03, .betas = std::pair{0.5, 0.9}},
                                      {.params = {p[0], p[2]}, .weight_decay = 0.2}},
          nn::AdamOptions(0.01));
    });
  }

  // Schedulers (the lr sequence must be the same doubles as torch's).
  {
    json s = spec("sgd", {{"lr", 0.1}, {"momentum", 0.9}});
    s["scheduler"] = {{"type", "step"}, {"step_size", 3}, {"gamma", 0.5}};
    batch.add("sgd_steplr", s, maker<nn::SGD>(nn::SGDOptions(0.1).momentum(0.9)),
              [](nn::Optimizer& o) { return std::make_unique<nn::StepLR>(o, 3, 0.5); });
  }
  {
    json s = spec("adam", {{"lr", 0.05}});
    s["scheduler"] = {{"type", "cosine"}, {"T_max", 7}, {"eta_min", 0.001}};
    batch.add("adam_cosine", s, maker<nn::Adam>(nn::AdamOptions(0.05)),
              [](nn::Optimizer& o) { return std::make_unique<nn::CosineAnnealingLR>(o, 7, 0.001); });
  }
  {
    json s = spec("adamw", {{"lr", 0.02}});
    s["scheduler"] = {{"type", "linear"}, {"start_factor", 0.25}, {"end_factor", 1.0}, {"total_iters", 4}};
    batch.add("adamw_linear_warmup", s, maker<nn::AdamW>(nn::AdamWOptions(0.02)),
              [](nn::Optimizer& o) { return std::make_unique<nn::LinearLR>(o, 0.25, 1.0, 4); });
  }
  {
    json s = spec("sgd", {{"lr", 0.1}, {"momentum", 0.9}});
    s["groups"] = json::array(
        {{{"params", {0, 1}}, {"options", json::object()}}, {{"params", {2}}, {"options", {{"lr", 0.03}}}}});
    s["scheduler"] = {{"type", "sequential"},
                      {"schedulers",
                       {{{"type", "linear"}, {"start_factor", 0.1}, {"end_factor", 1.0}, {"total_iters", 5}},
                        {{"type", "cosine"}, {"T_max", 15}, {"eta_min", 0.0}}}},
                      {"milestones", {5}}};
    batch.add(
        "sgd_warmup_cosine", s,
        [](const std::vector<Tensor>& p) {
          return std::make_unique<nn::SGD>(std::vector<nn::ParamGroup>{{{p[0], p[1]}}, {.params = {p[2]}, .lr = 0.03}},
                                           nn::SGDOptions(0.1).momentum(0.9));
        },
        [](nn::Optimizer& o) -> std::unique_ptr<nn::LRScheduler> {
          auto warm = std::make_shared<nn::LinearLR>(o, 0.1, 1.0, 5);
          auto cos = std::make_shared<nn::CosineAnnealingLR>(o, 15, 0.0);
          return std::make_unique<nn::SequentialLR>(o, std::vector<std::shared_ptr<nn::LRScheduler>>{warm, cos},
                                                    std::vector<std::int64_t>{5});
        });
  }
  {
    json s = spec("rmsprop", {{"lr", 0.01}});
    s["scheduler"] = {{"type", "sequential"},
                      {"schedulers",
                       {{{"type", "linear"}, {"start_factor", 0.2}, {"end_factor", 1.0}, {"total_iters", 3}},
                        {{"type", "step"}, {"step_size", 4}, {"gamma", 0.3}},
                        {{"type", "cosine"}, {"T_max", 5}, {"eta_min", 0.002}}}},
                      {"milestones", {3, 11}}};
    batch.add("rmsprop_three_schedulers", s, maker<nn::RMSprop>(nn::RMSpropOptions(0.01)),
              [](nn::Optimizer& o) -> std::unique_ptr<nn::LRScheduler> {
                auto a = std::make_shared<nn::LinearLR>(o, 0.2, 1.0, 3);
                auto b = std::make_shared<nn::StepLR>(o, 4, 0.3);
                auto c = std::make_shared<nn::CosineAnnealingLR>(o, 5, 0.002);
                return std::make_unique<nn::SequentialLR>(o, std::vector<std::shared_ptr<nn::LRScheduler>>{a, b, c},
                                                          std::vector<std::int64_t>{3, 11});
              });
  }
  {
    json s = spec("adam", {{"lr", 0.01}});
    s["scheduler"] = {{"type", "sequential"},
                      {"schedulers",
                       {{{"type", "linear"}, {"start_factor", 0.1}, {"end_factor", 1.0}, {"total_iters", 4}},
                        {{"type", "cosine"}, {"T_max", 16}, {"eta_min", 1e-4}}}},
                      {"milestones", {4}}};
    batch.add("adam_make_warmup_cosine", s, maker<nn::Adam>(nn::AdamOptions(0.01)),
              [](nn::Optimizer& o) { return nn::make_warmup_cosine(o, 4, 20, 0.1, 1e-4); });
  }

  // clip_grad_norm_ before each step (2-norm, inf-norm, 1.5-norm).
  batch.add("sgd_momentum_clip2", spec("sgd", {{"lr", 0.05}, {"momentum", 0.9}}),
            maker<nn::SGD>(nn::SGDOptions(0.05).momentum(0.9)), {}, RunSpec{.clip = std::pair{2.0, 2.0}});
  batch.add("adam_clip_inf", spec("adam", {{"lr", 0.01}}), maker<nn::Adam>(nn::AdamOptions(0.01)), {},
            RunSpec{.skip = {{1, 2}}, .clip = std::pair{0.7, INFINITY}});
  batch.add("rmsprop_clip_1_5", spec("rmsprop", {{"lr", 0.01}}), maker<nn::RMSprop>(nn::RMSpropOptions(0.01)), {},
            RunSpec{.clip = std::pair{2.5, 1.5}});
  batch.add("sgd_clip1", spec("sgd", {{"lr", 0.05}}), maker<nn::SGD>(nn::SGDOptions(0.05)), {},
            RunSpec{.clip = std::pair{3.0, 1.0}});
  batch.run();
}

namespace {
struct RoundTripCase {
  const char* name;
  MakeOptimizer make;
};

std::vector<RoundTripCase> round_trip_cases() {
  return {
      {"SGD momentum", maker<nn::SGD>(nn::SGDOptions(0.05).momentum(0.9).weight_decay(0.01))},
      {"Adam amsgrad", maker<nn::Adam>(nn::AdamOptions(0.01).amsgrad(true).weight_decay(0.1))},
      {"AdamW", maker<nn::AdamW>(nn::AdamWOptions(0.01))},
      {"RMSprop centered momentum", maker<nn::RMSprop>(nn::RMSpropOptions(0.01).centered(true).momentum(0.5))},
      {"Adagrad", maker<nn::Adagrad>(nn::AdagradOptions(0.05).lr_decay(0.01).initial_accumulator_value(0.1))},
  };
}

void set_step_grads(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::int64_t k) {
  for (std::size_t j = 0; j < params.size(); ++j) params[j].set_grad(slice(grads[j], k, params[j].shape()));
}
}  // namespace

TEST_CASE("optimizer state_dict round trip continues bit-identically", "[optim][nn]") {
  for (const auto& c : round_trip_cases()) {
    INFO(c.name);
    std::vector<Tensor> init, grads;
    make_data(77, 10, init, grads);
    // Uninterrupted 10 steps; the last parameter gets no gradient at step 2 so its step count lags.
    std::vector<Tensor> a;
    for (const auto& p : init) a.push_back(p.clone_data().set_requires_grad());
    auto opt_a = c.make(a);
    for (std::int64_t k = 0; k < 10; ++k) {
      set_step_grads(a, grads, k);
      if (k == 2) a[2].set_grad(Tensor());
      opt_a->step();
    }
    // 5 steps, save, load into a fresh optimizer (other lr: the saved options win), 5 more steps.
    std::vector<Tensor> b;
    for (const auto& p : init) b.push_back(p.clone_data().set_requires_grad());
    std::vector<std::pair<std::string, Tensor>> saved;
    {
      auto opt_b = c.make(b);
      for (std::int64_t k = 0; k < 5; ++k) {
        set_step_grads(b, grads, k);
        if (k == 2) b[2].set_grad(Tensor());
        opt_b->step();
      }
      saved = opt_b->state_dict();
    }
    std::vector<Tensor> b2;
    for (const auto& p : b) b2.push_back(p.detach().clone_data().set_requires_grad());
    auto opt_c = c.make(b2);
    opt_c->set_lr(123.0);
    opt_c->load_state_dict(saved);
    CHECK(opt_c->lr() == opt_a->lr());
    for (std::int64_t k = 5; k < 10; ++k) {
      set_step_grads(b2, grads, k);
      opt_c->step();
    }
    for (std::size_t j = 0; j < a.size(); ++j) {
      INFO("parameter " << j);
      CHECK(bit_equal(a[j].detach(), b2[j].detach()));
    }
    // The state itself matches too, name by name.
    const auto sa = opt_a->state_dict(), sc = opt_c->state_dict();
    REQUIRE(sa.size() == sc.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
      INFO(sa[i].first);
      CHECK(sa[i].first == sc[i].first);
      CHECK(bit_equal(sa[i].second, sc[i].second));
    }
  }
}

TEST_CASE("optimizer state_dict names", "[optim][nn]") {
  Generator gen(3);
  Tensor w = test::randn_leaf({2, 3}, gen), b = test::randn_leaf({3}, gen);
  nn::Adam opt({nn::ParamGroup{{w}}, nn::ParamGroup{.params = {b}, .lr = 0.5}}, nn::AdamOptions(0.1).amsgrad(true));
  w.set_grad(Tensor::ones({2, 3}, kFloat64));
  opt.step();  // b has no gradient: no state for it
  std::vector<std::string> names;
  for (const auto& [n, t] : opt.state_dict()) names.push_back(n);
  const std::vector<std::string> expected = {
      "param_groups.0.num_params",   "param_groups.0.lr",         "param_groups.0.beta1",
      "param_groups.0.beta2",        "param_groups.0.eps",        "param_groups.0.weight_decay",
      "param_groups.0.amsgrad",      "param_groups.1.num_params", "param_groups.1.lr",
      "param_groups.1.beta1",        "param_groups.1.beta2",      "param_groups.1.eps",
      "param_groups.1.weight_decay", "param_groups.1.amsgrad",    "state.0.0.step",
      "state.0.0.exp_avg",           "state.0.0.exp_avg_sq",      "state.0.0.max_exp_avg_sq"};
  CHECK(names == expected);
  CHECK(opt.lr(1) == 0.5);
}

TEST_CASE("optimizer load_state_dict validates before changing anything", "[optim][nn]") {
  Generator gen(4);
  Tensor w = test::randn_leaf({2, 3}, gen), b = test::randn_leaf({3}, gen);
  nn::Adam opt({w, b}, nn::AdamOptions(0.1));
  w.set_grad(Tensor::ones({2, 3}, kFloat64));
  b.set_grad(Tensor::ones({3}, kFloat64));
  opt.step();
  const auto good = opt.state_dict();
  auto with = [&](const std::string& name, const Tensor& value) {
    auto s = good;
    for (auto& [n, t] : s)
      if (n == name) t = value;
    return s;
  };
  auto without = [&](const std::string& name) {
    auto s = good;
    std::erase_if(s, [&](const auto& e) { return e.first == name; });
    return s;
  };
  const auto before = opt.state_dict();
  test::require_error(
      [&] {
        opt.load_state_dict(with("state.0.0.exp_avg", Tensor::zeros({3, 2}, kFloat64)));
      },
      {"Adam", "state.0.0.exp_avg", "(3, 2)", "(2, 3)"});
  test::require_error([&] { opt.load_state_dict(with("state.0.1.exp_avg", Tensor::zeros({3}, kFloat32))); },
                      {"Adam", "state.0.1.exp_avg", "float32"});
  test::require_error([&] { opt.load_state_dict(without("state.0.1.exp_avg_sq")); },
                      {"Adam", "missing", "state.0.1.exp_avg_sq"});
  test::require_error([&] { opt.load_state_dict(without("param_groups.0.eps")); },
                      {"Adam", "missing", "param_groups.0.eps"});
  test::require_error([&] { opt.load_state_dict(with("state.0.0.step", Tensor::scalar(1.5, kFloat64))); },
                      {"Adam", "state.0.0.step", "integer"});
  test::require_error([&] { opt.load_state_dict(with("param_groups.0.lr", Tensor::scalar(-1, kFloat64))); },
                      {"Adam", "learning rate", "-1"});
  test::require_error([&] { opt.load_state_dict(with("param_groups.0.num_params", Tensor::scalar(3, kFloat64))); },
                      {"Adam", "3 parameters", "2"});
  {
    auto s = good;
    s.emplace_back("state.0.5.exp_avg", Tensor::zeros({3}, kFloat64));
    test::require_error([&] { opt.load_state_dict(s); }, {"Adam", "state.0.5.exp_avg", "parameter 5"});
    s = good;
    s.emplace_back("state.0.0.momentum_buffer", Tensor::zeros({2, 3}, kFloat64));
    test::require_error([&] { opt.load_state_dict(s); }, {"Adam", "unknown entry", "momentum_buffer"});
    s = good;
    s.emplace_back("param_groups.1.lr", Tensor::scalar(0.1, kFloat64));
    test::require_error([&] { opt.load_state_dict(s); }, {"Adam", "param_groups.1.lr", "1 groups"});
    s = good;
    s.push_back(good[1]);
    test::require_error([&] { opt.load_state_dict(s); }, {"Adam", "twice"});
    s = good;
    s.emplace_back("bogus", Tensor::scalar(0, kFloat64));
    test::require_error([&] { opt.load_state_dict(s); }, {"Adam", "unknown entry 'bogus'"});
  }
  // An SGD state does not load into Adam.
  nn::SGD sgd({w.detach().clone_data().set_requires_grad(), b.detach().clone_data().set_requires_grad()},
              nn::SGDOptions(0.1).momentum(0.9));
  test::require_error([&] { opt.load_state_dict(sgd.state_dict()); }, {"Adam", "unknown entry", "momentum"});
  // Nothing changed.
  const auto after = opt.state_dict();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) CHECK(bit_equal(after[i].second, before[i].second));
}

TEST_CASE("optimizers reject bad arguments", "[optim][nn]") {
  Generator gen(5);
  Tensor w = test::randn_leaf({2, 2}, gen), b = test::randn_leaf({2}, gen);
  test::require_error([] { nn::SGD(std::vector<Tensor>{}, nn::SGDOptions(0.1)); }, {"SGD", "empty parameter list"});
  test::require_error([] { nn::Adam(std::vector<Tensor>{}); }, {"Adam", "empty parameter list"});
  test::require_error([&] { nn::SGD({w, b, w}, nn::SGDOptions(0.1)); }, {"SGD", "parameter 2", "appears twice"});
  test::require_error(
      [&] {
        nn::AdamW({nn::ParamGroup{{w}}, nn::ParamGroup{{b, w}}});
      },
      {"AdamW", "parameter 1 of group 1", "already in parameter group 0"});
  test::require_error([&] { nn::RMSprop({w, Tensor()}); }, {"RMSprop", "undefined"});
  test::require_error([&] { nn::Adagrad({w}, nn::AdagradOptions(0.1).lr_decay(-1)); }, {"Adagrad", "lr_decay", "-1"});
  test::require_error([&] { nn::Adagrad({w}, nn::AdagradOptions(0.1).initial_accumulator_value(-0.5)); },
                      {"Adagrad", "initial_accumulator_value", "-0.5"});
  test::require_error([&] { nn::Adagrad({nn::ParamGroup{.params = {w}, .momentum = 0.9}}); },
                      {"Adagrad", "momentum", "does not have"});
  test::require_error([&] { nn::SGD({nn::ParamGroup{.params = {w}, .lr_decay = 0.1}}, nn::SGDOptions(0.1)); },
                      {"SGD", "lr_decay", "does not have"});
  test::require_error([&] { nn::SGD({w.to(kFloat32)}, nn::SGDOptions(0.1)); }, {"SGD", "not a leaf"});
  test::require_error([&] { nn::SGD({w}, nn::SGDOptions(-0.1)); }, {"SGD", "learning rate", "-0.1"});
  test::require_error([&] { nn::SGD({w}, nn::SGDOptions(0.1).momentum(-1)); }, {"SGD", "momentum", "-1"});
  test::require_error([&] { nn::SGD({w}, nn::SGDOptions(0.1).nesterov(true)); }, {"SGD", "nesterov", "momentum 0"});
  test::require_error([&] { nn::SGD({w}, nn::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)); },
                      {"SGD", "nesterov", "dampening 0.1"});
  test::require_error([&] { nn::SGD({w}, nn::SGDOptions(0.1).weight_decay(-1)); }, {"SGD", "weight_decay"});
  test::require_error(
      [&] {
        nn::Adam({w}, nn::AdamOptions().betas({1.0, 0.999}));
      },
      {"Adam", "beta parameter at index 0", "1"});
  test::require_error(
      [&] {
        nn::Adam({w}, nn::AdamOptions().betas({0.9, -0.5}));
      },
      {"Adam", "beta parameter at index 1", "-0.5"});
  test::require_error([&] { nn::AdamW({w}, nn::AdamWOptions().eps(-1e-8)); }, {"AdamW", "epsilon"});
  test::require_error([&] { nn::Adam({w}, nn::AdamOptions(-1)); }, {"Adam", "learning rate"});
  test::require_error([&] { nn::RMSprop({w}, nn::RMSpropOptions().alpha(-0.5)); }, {"RMSprop", "alpha", "-0.5"});
  test::require_error([&] { nn::RMSprop({w}, nn::RMSpropOptions().eps(-1)); }, {"RMSprop", "epsilon"});
  test::require_error([&] { nn::RMSprop({w}, nn::RMSpropOptions().momentum(-1)); }, {"RMSprop", "momentum"});
  // Per-group overrides are validated too, and options an optimizer lacks are refused.
  test::require_error([&] { nn::SGD({nn::ParamGroup{.params = {w}, .lr = -2.0}}, nn::SGDOptions(0.1)); },
                      {"SGD", "learning rate", "group 0"});
  test::require_error(
      [&] {
        nn::SGD({nn::ParamGroup{.params = {w}, .betas = std::pair{0.9, 0.9}}}, nn::SGDOptions(0.1));
      },
      {"SGD", "betas"});
  test::require_error([&] { nn::Adam({nn::ParamGroup{.params = {w}, .momentum = 0.9}}); }, {"Adam", "momentum"});
  nn::SGD opt({w}, nn::SGDOptions(0.1));
  test::require_error([&] { opt.add_param_group(nn::ParamGroup{{w}}); }, {"SGD", "already in parameter group 0"});
  test::require_error([&] { opt.set_lr(-1); }, {"SGD", "set_lr", "-1"});
  test::require_error([&] { opt.set_lr(3, 0.1); }, {"SGD", "group index 3"});
  test::require_error([&] { (void)opt.lr(1); }, {"SGD", "group index 1"});
  // A negative lr written directly into a group is caught at the next step.
  opt.param_groups()[0].lr = -1.0;
  w.set_grad(Tensor::ones({2, 2}, kFloat64));
  test::require_error([&] { opt.step(); }, {"SGD", "learning rate", "-1"});
}

TEST_CASE("optimizers refuse integer and bool parameters when built, naming the parameter and its dtype",
          "[optim][nn]") {
  // Only float tensors have gradients: an integer parameter would never move (torch 1.13 takes one
  // silently). Every optimizer's constructor and add_param_group refuse it.
  Generator gen(5);
  const Tensor w = test::randn_leaf({2, 2}, gen), ids = Tensor::zeros({3}, kInt64);
  const std::vector<std::string> want = {"parameter 1 of group 0", "int64", "(3,)", "float32 and float64"};
  const auto with = [&want](const std::string& name) {
    std::vector<std::string> f{name};
    f.insert(f.end(), want.begin(), want.end());
    return f;
  };
  test::require_error([&] { nn::SGD({w, ids}, nn::SGDOptions(0.1)); }, with("SGD"));
  test::require_error([&] { nn::Adam({w, ids}); }, with("Adam"));
  test::require_error([&] { nn::AdamW({w, ids}); }, with("AdamW"));
  test::require_error([&] { nn::RMSprop({w, ids}); }, with("RMSprop"));
  test::require_error([&] { nn::Adagrad({w, ids}); }, with("Adagrad"));
  test::require_error([&] { nn::LBFGS({w, ids}); }, with("LBFGS"));
  nn::SGD opt({w}, nn::SGDOptions(0.1));
  test::require_error([&] { opt.add_param_group(nn::ParamGroup{{Tensor::zeros({2}, kBool)}}); },
                      {"SGD", "parameter 0 of group 1", "bool", "(2,)"});
  test::require_error([&] { opt.add_param_group(nn::ParamGroup{{Tensor::zeros({2}, kInt32)}}); },
                      {"SGD", "parameter 0 of group 1", "int32"});
  CHECK(opt.param_groups().size() == 1);  // nothing was added
}

TEST_CASE("clip_grad_norm_ and schedulers reject bad arguments", "[optim][nn]") {
  Generator gen(6);
  Tensor w = test::randn_leaf({2, 2}, gen);
  w.set_grad(Tensor::ones({2, 2}, kFloat64));
  test::require_error([&] { nn::clip_grad_norm_({w}, -1.0); }, {"clip_grad_norm_", "max_norm", "-1"});
  test::require_error([&] { nn::clip_grad_norm_({w}, 1.0, 0.0); }, {"clip_grad_norm_", "norm_type", "0"});
  test::require_error([&] { nn::clip_grad_norm_({w}, NAN); }, {"clip_grad_norm_", "max_norm"});
  test::require_error([&] { nn::clip_grad_value_({w}, -1.0); }, {"clip_grad_value_", "clip_value"});
  nn::SGD opt({w}, nn::SGDOptions(0.1));
  test::require_error([&] { nn::StepLR(opt, 0); }, {"StepLR", "step_size", "0"});
  test::require_error([&] { nn::CosineAnnealingLR(opt, 0); }, {"CosineAnnealingLR", "T_max"});
  test::require_error([&] { nn::LinearLR(opt, 0.0); }, {"LinearLR", "start_factor"});
  test::require_error([&] { nn::LinearLR(opt, 0.5, 2.0); }, {"LinearLR", "end_factor", "2"});
  test::require_error([&] { nn::make_warmup_cosine(opt, 10, 5); }, {"make_warmup_cosine", "warmup_iters 10"});
  auto s1 = std::make_shared<nn::StepLR>(opt, 2);
  auto s2 = std::make_shared<nn::StepLR>(opt, 3);
  test::require_error([&] { nn::SequentialLR(opt, {s1, s2}, {}); }, {"SequentialLR", "2 schedulers", "0 milestones"});
  test::require_error([&] { nn::SequentialLR(opt, {}, {}); }, {"SequentialLR", "empty"});
  Tensor v = test::randn_leaf({2}, gen);
  nn::SGD other({v}, nn::SGDOptions(0.1));
  auto s3 = std::make_shared<nn::StepLR>(other, 2);
  test::require_error(
      [&] {
        nn::SequentialLR(opt, {s1, s3}, {2});
      },
      {"SequentialLR", "scheduler 1", "different optimizer"});
  // A scheduler notices when groups were added after it was made.
  nn::StepLR sched(opt, 2);
  opt.add_param_group(nn::ParamGroup{{v.detach().clone_data().set_requires_grad()}});
  test::require_error([&] { sched.step(); }, {"StepLR", "2 parameter groups", "had 1"});
}

TEST_CASE("optimizer steps skip missing gradients, zero_grad zeroes or clears", "[optim][nn]") {
  Generator gen(7);
  Tensor w = test::randn_leaf({3}, gen), b = test::randn_leaf({2}, gen);
  const Tensor w0 = w.detach().clone_data(), b0 = b.detach().clone_data();
  nn::Adam opt({w, b}, nn::AdamOptions(0.1));
  w.set_grad(Tensor::ones({3}, kFloat64));
  opt.step();
  CHECK(!bit_equal(w.detach(), w0));
  CHECK(bit_equal(b.detach(), b0));  // no gradient: untouched
  opt.zero_grad();                   // torch 1.13 default: zeros in place
  REQUIRE(w.grad().defined());
  CHECK(bit_equal(w.grad(), Tensor::zeros({3}, kFloat64)));
  CHECK(!b.grad().defined());
  opt.zero_grad(/*set_to_none=*/true);
  CHECK(!w.grad().defined());
  const Tensor w1 = w.detach().clone_data();
  opt.step();
  CHECK(bit_equal(w.detach(), w1));
}

TEST_CASE("optimizer steps are bit-identical with 1 and 2 threads", "[optim][nn]") {
  // 70000 elements: above kParallelGrain, so the update loops and clip norm run in parallel.
  Generator gen(8);
  const Tensor init = Tensor::randn({70000}, gen, kFloat64);
  const Tensor grad = Tensor::randn({70000}, gen, kFloat64);
  for (const auto& c : round_trip_cases()) {
    INFO(c.name);
    test::require_thread_deterministic([&] {
      Tensor p = init.clone_data().set_requires_grad();
      auto opt = c.make({p});
      for (int k = 0; k < 3; ++k) {
        p.set_grad(grad.clone_data());
        nn::clip_grad_norm_({p}, 10.0);
        opt->step();
      }
      return Tensors{p.detach(), p.grad()};
    });
  }
}

TEST_CASE("optimizers update float32 parameters like float64 ones", "[optim][nn]") {
  for (const auto& c : round_trip_cases()) {
    INFO(c.name);
    std::vector<Tensor> init64, grads64;
    make_data(99, 20, init64, grads64);
    std::vector<Tensor> init32, grads32;
    for (const auto& t : init64) init32.push_back(t.to(kFloat32));
    for (const auto& t : grads64) grads32.push_back(t.to(kFloat32));
    const RunSpec spec{.clip = std::pair{3.0, 2.0}};
    const OptimRun r64 = run_ours(init64, grads64, c.make, {}, spec);
    const OptimRun r32 = run_ours(init32, grads32, c.make, {}, spec);
    for (std::size_t j = 0; j < r64.outs.size(); ++j) {
      REQUIRE(r32.outs[j].dtype() == kFloat32);
      INFO("parameter " << j);
      CHECK(allclose(r32.outs[j].to(kFloat64), r64.outs[j], 1e-4, 1e-5));
    }
  }
}

TEST_CASE("scheduler state_dict round trip resumes the same lr sequence", "[optim][nn]") {
  std::vector<Tensor> init, grads;
  make_data(55, 12, init, grads);
  auto fresh = [&](const std::vector<Tensor>& from) {
    std::vector<Tensor> p;
    for (const auto& t : from) p.push_back(t.detach().clone_data().set_requires_grad());
    return p;
  };
  auto make_opt = [](const std::vector<Tensor>& p) {
    return std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{{{p[0], p[1]}}, {.params = {p[2]}, .lr = 0.003}},
                                      nn::AdamOptions(0.01));
  };
  std::vector<Tensor> a = fresh(init);
  auto opt_a = make_opt(a);
  auto sched_a = nn::make_warmup_cosine(*opt_a, 4, 12, 0.1, 1e-4);
  std::vector<std::vector<double>> lrs_a;
  for (std::int64_t k = 0; k < 12; ++k) {
    set_step_grads(a, grads, k);
    opt_a->step();
    sched_a->step();
    lrs_a.push_back(sched_a->get_last_lrs());
  }
  std::vector<Tensor> b = fresh(init);
  std::vector<std::pair<std::string, Tensor>> opt_state, sched_state;
  {
    auto opt_b = make_opt(b);
    auto sched_b = nn::make_warmup_cosine(*opt_b, 4, 12, 0.1, 1e-4);
    for (std::int64_t k = 0; k < 6; ++k) {
      set_step_grads(b, grads, k);
      opt_b->step();
      sched_b->step();
    }
    opt_state = opt_b->state_dict();
    sched_state = sched_b->state_dict();
  }
  std::vector<Tensor> c = fresh(b);
  auto opt_c = make_opt(c);
  auto sched_c = nn::make_warmup_cosine(*opt_c, 4, 12, 0.1, 1e-4);
  opt_c->load_state_dict(opt_state);
  sched_c->load_state_dict(sched_state);
  for (std::int64_t k = 6; k < 12; ++k) {
    set_step_grads(c, grads, k);
    opt_c->step();
    sched_c->step();
    INFO("step " << k);
    CHECK(sched_c->get_last_lrs() == lrs_a[static_cast<std::size_t>(k)]);
  }
  for (std::size_t j = 0; j < a.size(); ++j) CHECK(bit_equal(a[j].detach(), c[j].detach()));

  // Bad scheduler states change nothing.
  const auto before = sched_c->state_dict();
  auto broken = sched_state;
  broken.pop_back();
  test::require_error([&] { sched_c->load_state_dict(broken); }, {"CosineAnnealingLR", "missing"});
  broken = sched_state;
  broken.emplace_back("schedulers.7.last_epoch", Tensor::scalar(0, kFloat64));
  test::require_error([&] { sched_c->load_state_dict(broken); }, {"SequentialLR", "schedulers.7.last_epoch"});
  broken = sched_state;
  broken[2].second = Tensor::zeros({3}, kFloat64);  // base_lrs for 3 groups
  test::require_error([&] { sched_c->load_state_dict(broken); }, {"SequentialLR", "base_lrs", "(2)"});
  const auto after = sched_c->state_dict();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) CHECK(bit_equal(after[i].second, before[i].second));
}

TEST_CASE("optimizer and scheduler state survive save_state / load_state", "[optim][nn]") {
  Generator gen(12);
  Tensor w = test::randn_leaf({3, 2}, gen), b = test::randn_leaf({2}, gen);
  nn::AdamW opt({w, b}, nn::AdamWOptions(0.01).amsgrad(true));
  nn::CosineAnnealingLR sched(opt, 10, 1e-4);
  for (int k = 0; k < 3; ++k) {
    w.set_grad(Tensor::randn({3, 2}, gen, kFloat64));
    b.set_grad(Tensor::randn({2}, gen, kFloat64));
    opt.step();
    sched.step();
  }
  const auto path =
      (std::filesystem::temp_directory_path() / ("xgrad_optim_state_" + std::to_string(::getpid()))).string();
  const auto state = opt.state_dict();
  nn::save_state(path + "_opt.safetensors", state);
  nn::save_state(path + "_sched.safetensors", sched.state_dict());
  const auto loaded = nn::load_state(path + "_opt.safetensors");
  REQUIRE(loaded.size() == state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    INFO(state[i].first);
    CHECK(loaded[i].first == state[i].first);
    CHECK(bit_equal(loaded[i].second, state[i].second));
  }
  Tensor w2 = w.detach().clone_data().set_requires_grad(), b2 = b.detach().clone_data().set_requires_grad();
  nn::AdamW opt2({w2, b2}, nn::AdamWOptions(0.5));
  nn::CosineAnnealingLR sched2(opt2, 10, 1e-4);
  opt2.load_state_dict(loaded);
  sched2.load_state_dict(nn::load_state(path + "_sched.safetensors"));
  std::filesystem::remove(path + "_opt.safetensors");
  std::filesystem::remove(path + "_sched.safetensors");
  const Tensor gw = Tensor::randn({3, 2}, gen, kFloat64), gb = Tensor::randn({2}, gen, kFloat64);
  for (auto* o : {static_cast<nn::Optimizer*>(&opt), static_cast<nn::Optimizer*>(&opt2)}) {
    o->param_groups()[0].params[0].set_grad(gw.clone_data());
    o->param_groups()[0].params[1].set_grad(gb.clone_data());
    o->step();
  }
  sched.step();
  sched2.step();
  CHECK(sched.get_last_lr() == sched2.get_last_lr());
  CHECK(bit_equal(w.detach(), w2.detach()));
  CHECK(bit_equal(b.detach(), b2.detach()));
}

TEST_CASE("ReduceLROnPlateau matches PyTorch epoch by epoch", "[optim][nn][parity][scheduler]") {
  using Opts = nn::ReduceLROnPlateauOptions;
  struct PlateauCase {
    std::string name;
    std::vector<double> lrs;
    json torch_options;
    Opts options;
    std::vector<double> metrics;
  };
  // A loss that falls, stalls, wiggles within the threshold and falls again; an accuracy that rises.
  const std::vector<double> loss = {1.0, 0.8, 0.7, 0.7,  0.69995, 0.71, 0.7,  0.7, 0.5, 0.5, 0.5,
                                    0.5, 0.5, 0.5, 0.49, 0.49,    0.49, 0.49, 0.3, 0.3, 0.3, 0.3};
  std::vector<double> acc;
  for (double l : loss) acc.push_back(1.0 - l);
  std::vector<PlateauCase> cases;
  cases.push_back({"defaults_patience2", {0.1}, {{"patience", 2}}, Opts{.patience = 2}, loss});
  cases.push_back({"abs_cooldown_minlr",
                   {0.1, 0.05},
                   {{"patience", 1},
                    {"threshold", 0.005},
                    {"threshold_mode", "abs"},
                    {"cooldown", 2},
                    {"factor", 0.5},
                    {"min_lr", {0.02, 0.01}}},
                   Opts{.factor = 0.5,
                        .patience = 1,
                        .threshold = 0.005,
                        .threshold_mode = Opts::ThresholdMode::abs,
                        .cooldown = 2,
                        .min_lr = {0.02, 0.01}},
                   loss});
  cases.push_back({"max_rel_eps",
                   {1e-3},
                   {{"mode", "max"}, {"patience", 0}, {"factor", 0.3}, {"eps", 1e-4}},
                   Opts{.mode = Opts::Mode::max, .factor = 0.3, .patience = 0, .eps = 1e-4},
                   acc});
  test::TempDir dir("plateau");
  json manifest = json::array();
  std::vector<std::pair<std::vector<std::vector<double>>, std::vector<std::vector<double>>>> ours;
  for (const auto& c : cases) {
    manifest.push_back({{"name", c.name}, {"lrs", c.lrs}, {"options", c.torch_options}, {"metrics", c.metrics}});
    std::vector<Tensor> params;
    std::vector<nn::ParamGroup> groups;
    for (double lr : c.lrs) {
      params.push_back(Tensor::zeros({1}, kFloat64).set_requires_grad());
      groups.push_back(nn::ParamGroup{.params = {params.back()}, .lr = lr});
    }
    nn::SGD opt(groups, nn::SGDOptions(c.lrs[0]));
    nn::ReduceLROnPlateau sched(opt, c.options);
    std::vector<std::vector<double>> lrs, state;
    for (double m : c.metrics) {
      sched.step(m);
      lrs.push_back(sched.get_last_lrs());
      state.push_back({sched.best(), static_cast<double>(sched.num_bad_epochs()), sched.in_cooldown() ? 1.0 : 0.0});
    }
    ours.emplace_back(lrs, state);
  }
  std::ofstream(dir.file("plateau.json")) << manifest.dump();
  test::run_python_script("tests/nn/plateau_parity.py", dir.path.string());
  bool some_reduction = false;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto lv = load_npy(dir.file(cases[k].name + "__lrs.npy")).to_vector();
    const auto sv = load_npy(dir.file(cases[k].name + "__state.npy")).to_vector();
    const auto& [lrs, state] = ours[k];
    const std::size_t G = cases[k].lrs.size();
    REQUIRE(lv.size() == lrs.size() * G);
    for (std::size_t e = 0; e < lrs.size(); ++e) {
      INFO(cases[k].name << " epoch " << e + 1);
      for (std::size_t g = 0; g < G; ++g) CHECK(lrs[e][g] == lv[e * G + g]);  // the same doubles
      CHECK(state[e][0] == sv[e * 3]);
      CHECK(state[e][1] == sv[e * 3 + 1]);
      CHECK(state[e][2] == (sv[e * 3 + 2] > 0 ? 1.0 : 0.0));
      some_reduction = some_reduction || lrs[e][0] != cases[k].lrs[0];
    }
  }
  CHECK(some_reduction);  // the cases exercise reductions, not only waiting
}

TEST_CASE("ReduceLROnPlateau: state_dict round trip and bad arguments", "[optim][nn][scheduler]") {
  Tensor w = Tensor::zeros({2}, kFloat64).set_requires_grad();
  nn::SGD opt({w}, nn::SGDOptions(0.1));
  nn::ReduceLROnPlateau a(opt, {.patience = 1, .cooldown = 1});
  for (double m : {1.0, 0.9, 0.95, 0.97}) a.step(m);
  const auto saved = a.state_dict();
  nn::SGD opt2({Tensor::zeros({2}, kFloat64).set_requires_grad()}, nn::SGDOptions(opt.lr()));
  nn::ReduceLROnPlateau b(opt2, {.patience = 1, .cooldown = 1});
  b.load_state_dict(saved);
  for (double m : {0.99, 0.98, 0.97, 0.96, 0.5}) {
    a.step(m);
    b.step(m);
    CHECK(a.get_last_lr() == b.get_last_lr());
    CHECK(a.best() == b.best());
    CHECK(a.num_bad_epochs() == b.num_bad_epochs());
  }
  test::require_error([&] { nn::ReduceLROnPlateau(opt, {.factor = 1.0}); }, {"ReduceLROnPlateau", "factor", "1"});
  test::require_error([&] { nn::ReduceLROnPlateau(opt, {.patience = -1}); }, {"ReduceLROnPlateau", "patience"});
  test::require_error(
      [&] {
        nn::ReduceLROnPlateau(opt, {.min_lr = {0.1, 0.2}});
      },
      {"ReduceLROnPlateau", "min_lr", "2 values", "(1)"});
  test::require_error([&] { nn::ReduceLROnPlateau(opt, {.min_lr = {-1}}); }, {"ReduceLROnPlateau", "min_lr", "-1"});
  test::require_error([&] { a.step(std::nan("")); }, {"ReduceLROnPlateau", "NaN"});
  auto bad = saved;
  bad.emplace_back("bogus", Tensor::scalar(0, kFloat64));
  test::require_error([&] { b.load_state_dict(bad); }, {"ReduceLROnPlateau", "unknown", "bogus"});
  test::require_error([&] { b.load_state_dict({}); }, {"ReduceLROnPlateau", "missing entry"});
}

namespace {
// Objectives shared with tests/nn/lbfgs_parity.py (the same elementary operations, float64).
Tensor lbfgs_objective(const std::string& name, const Tensor& x, const Tensor& t_data, const Tensor& y_data) {
  auto at = [&](std::int64_t i) { return slice(x, 0, i, i + 1); };
  auto rosen = [&](std::int64_t i) {
    Tensor a = 1.0 - at(i), b = at(i + 1) - at(i) * at(i);
    return a * a + 100.0 * (b * b);
  };
  if (name == "rosenbrock") return sum(rosen(0));
  if (name == "rosenbrock4") return sum(rosen(0) + rosen(1) + rosen(2));
  Tensor r = at(0) * exp(at(1) * t_data) - y_data;  // exp_fit
  return sum(r * r);
}
}  // namespace

TEST_CASE("LBFGS matches torch.optim.LBFGS step by step", "[optim][nn][parity][lbfgs]") {
  struct LbfgsCase {
    std::string name, problem;
    std::vector<double> x0;
    json torch_options;
    nn::LBFGSOptions options;
    int steps;
  };
  std::vector<double> ts, ys;
  for (int i = 0; i < 9; ++i) {
    const double t = 0.25 * i;
    ts.push_back(t);
    ys.push_back(2.5 * std::exp(-1.3 * t) + 0.1 * std::sin(5.0 * t));
  }
  const Tensor t_data = Tensor::from_vector(ts, {9}, kFloat64), y_data = Tensor::from_vector(ys, {9}, kFloat64);
  const std::vector<LbfgsCase> cases = {
      {"rosen_wolfe",
       "rosenbrock",
       {-1.2, 1.0},
       {{"line_search_fn", "strong_wolfe"}, {"max_iter", 5}},
       nn::LBFGSOptions(1).line_search_fn("strong_wolfe").max_iter(5),
       10},
      {"rosen_fixed", "rosenbrock", {-0.5, 0.8}, {{"lr", 0.1}, {"max_iter", 4}}, nn::LBFGSOptions(0.1).max_iter(4), 5},
      {"rosen4_history2",
       "rosenbrock4",
       {-1.0, 1.5, 0.5, -0.3},
       {{"line_search_fn", "strong_wolfe"}, {"history_size", 2}, {"max_iter", 7}, {"max_eval", 9}},
       nn::LBFGSOptions(1).line_search_fn("strong_wolfe").history_size(2).max_iter(7).max_eval(9),
       5},
      {"exp_fit",
       "exp_fit",
       {1.0, -0.5},
       {{"line_search_fn", "strong_wolfe"}, {"max_iter", 10}},
       nn::LBFGSOptions(1).line_search_fn("strong_wolfe").max_iter(10),
       4},
  };
  test::TempDir dir("lbfgs");
  json manifest = json::array();
  struct Run {
    std::vector<std::vector<double>> xs;
    std::vector<double> losses;
    std::vector<std::pair<std::int64_t, std::int64_t>> state;
  };
  std::vector<Run> runs;
  for (const auto& c : cases) {
    manifest.push_back({{"name", c.name},
                        {"problem", c.problem},
                        {"x0", c.x0},
                        {"options", c.torch_options},
                        {"steps", c.steps},
                        {"t", ts},
                        {"y", ys}});
    Tensor x = Tensor::from_vector(c.x0, {static_cast<std::int64_t>(c.x0.size())}, kFloat64).set_requires_grad();
    nn::LBFGS opt({x}, c.options);
    auto closure = [&] {
      opt.zero_grad();
      Tensor loss = lbfgs_objective(c.problem, x, t_data, y_data);
      loss.backward();
      return loss;
    };
    Run r;
    for (int k = 0; k < c.steps; ++k) {
      r.losses.push_back(opt.step(closure).item());
      r.xs.push_back(x.to_vector());
      r.state.emplace_back(opt.func_evals(), opt.n_iter());
    }
    runs.push_back(std::move(r));
  }
  std::ofstream(dir.file("lbfgs.json")) << manifest.dump();
  test::run_python_script("tests/nn/lbfgs_parity.py", dir.path.string());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto xv = load_npy(dir.file(cases[k].name + "__x.npy")).to_vector();
    const auto lv = load_npy(dir.file(cases[k].name + "__loss.npy")).to_vector();
    const auto sv = load_npy(dir.file(cases[k].name + "__state.npy")).to_vector();
    const Run& r = runs[k];
    const std::size_t n = cases[k].x0.size();
    REQUIRE(xv.size() == r.xs.size() * n);
    for (std::size_t s = 0; s < r.xs.size(); ++s) {
      INFO(cases[k].name << " step " << s + 1);
      // Same iterates, evaluations and iterations; values to rounding (torch's dot products sum
      // in another order).
      CHECK(r.state[s].first == static_cast<std::int64_t>(sv[s * 2]));
      CHECK(r.state[s].second == static_cast<std::int64_t>(sv[s * 2 + 1]));
      CHECK(std::abs(r.losses[s] - lv[s]) <= 1e-9 * (1 + std::abs(lv[s])));
      for (std::size_t i = 0; i < n; ++i)
        CHECK(std::abs(r.xs[s][i] - xv[s * n + i]) <= 1e-8 * (1 + std::abs(xv[s * n + i])));
    }
  }
  // The Rosenbrock runs reach the minimum (1, 1): L-BFGS really optimises.
  CHECK(std::abs(runs[0].xs.back()[0] - 1.0) < 1e-4);
  CHECK(std::abs(runs[0].xs.back()[1] - 1.0) < 1e-4);
}

TEST_CASE("LBFGS: state_dict round trip continues identically, bad arguments", "[optim][nn][lbfgs]") {
  auto make = [] { return Tensor::from_vector({-1.2, 1.0}, {2}, kFloat64).set_requires_grad(); };
  Tensor x = make(), y = make();
  const auto opts = nn::LBFGSOptions(1).line_search_fn("strong_wolfe").max_iter(3).history_size(3);
  nn::LBFGS a({x}, opts), b({y}, opts);
  auto closure_for = [](nn::LBFGS& opt, Tensor& p) {
    return [&opt, &p] {
      opt.zero_grad();
      Tensor l = lbfgs_objective("rosenbrock", p, Tensor(), Tensor());
      l.backward();
      return l;
    };
  };
  for (int k = 0; k < 3; ++k) a.step(closure_for(a, x));
  b.load_state_dict(a.state_dict());
  {
    NoGradGuard ng;
    y.copy_(x);
  }
  for (int k = 0; k < 3; ++k) {
    a.step(closure_for(a, x));
    b.step(closure_for(b, y));
    CHECK(bit_equal(x, y));
  }
  CHECK(a.func_evals() == b.func_evals());
  test::require_error([&] { a.step(); }, {"LBFGS", "closure"});
  test::require_error([&] { nn::LBFGS({make()}, nn::LBFGSOptions(0)); }, {"LBFGS", "learning rate", "0"});
  test::require_error([&] { nn::LBFGS({make()}, nn::LBFGSOptions().line_search_fn("backtracking")); },
                      {"LBFGS", "line_search_fn", "backtracking"});
  test::require_error([&] { nn::LBFGS({make()}, nn::LBFGSOptions().history_size(0)); }, {"LBFGS", "history_size"});
  test::require_error([&] { a.add_param_group(nn::ParamGroup{{make()}}); }, {"LBFGS", "parameter groups"});
  test::require_error([&] { a.step([] { return Tensor::zeros({2}, kFloat64); }); }, {"LBFGS", "one-element"});
  auto bad = a.state_dict();
  bad.emplace_back("state.bogus", Tensor::scalar(0, kFloat64));
  test::require_error([&] { b.load_state_dict(bad); }, {"LBFGS", "unknown entry", "state.bogus"});
}

TEST_CASE("LBFGSOptions: max_eval defaults to max_iter * 5 / 4 without overflowing int64", "[optim][lbfgs]") {
  CHECK(nn::LBFGSOptions().max_eval() == 25);
  CHECK(nn::LBFGSOptions().max_iter(7).max_eval() == 8);
  CHECK(nn::LBFGSOptions().max_iter(9).max_eval() == 11);
  const std::int64_t big = std::int64_t{1} << 60;  // 5/4 of it still fits
  CHECK(nn::LBFGSOptions().max_iter(big + 3).max_eval() == big / 4 * 5 + 3);
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();  // 5/4 of it does not: saturates
  CHECK(nn::LBFGSOptions().max_iter(top).max_eval() == top);
  const std::int64_t most = top / 4 * 3;  // 5/4 of it fits: floor(most * 5 / 4) exactly
  CHECK(nn::LBFGSOptions().max_iter(most).max_eval() == static_cast<std::int64_t>(static_cast<__int128>(most) * 5 / 4));
  CHECK(nn::LBFGSOptions().max_iter(top).max_eval(5).max_eval() == 5);
}
