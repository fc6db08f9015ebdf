// Tests for nn/normalization.* (BatchNorm1d, BatchNorm2d, GroupNorm): a few training steps and an
// eval pass against the same torch.nn modules (outputs, input gradients, running statistics and the
// batch count), train()/eval() switching, state names, and bad inputs. The ops themselves
// (batch_norm, group_norm) are in the op table (tests/ops/op_table.cpp).
#include <cmath>
#include <memory>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/normalization.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
Tensor flat(const Tensor& t) { return reshape(t, {t.numel()}); }

// Ours: sets weight and bias (when affine) to w and b, runs two training steps on x1 and x2 and an
// eval pass on x1; returns the three outputs, then the running stats and the batch count (when
// tracked), flattened into one vector.
Tensor run_steps(nn::BatchNormBase& m, const Tensors& in) {
  if (m.affine()) {
    NoGradGuard guard;
    Tensor w = m.weight(), b = m.bias();
    w.copy_(in[2]);
    b.copy_(in[3]);
  }
  m.train();
  Tensors parts{flat(m(in[0])), flat(m(in[1]))};
  m.eval();
  parts.push_back(flat(m(in[0])));
  if (m.track_running_stats()) {
    parts.push_back(m.running_mean());
    parts.push_back(m.running_var());
    CHECK(m.num_batches_tracked().dtype() == kInt64);
    parts.push_back(flat(m.num_batches_tracked().to(m.running_mean().dtype())));
  }
  return concat(parts);
}

// The same with torch: the module built by `ctor` (as `m`), weight and bias passed through
// functional_call so that the buffers are the module's own.
std::string torch_steps(const std::string& ctor, bool affine, bool tracked) {
  std::string py = "from torch.nn.utils.stateless import functional_call\nm = " + ctor + "\n";
  py += affine ? "p = {'weight': w, 'bias': b}\n" : "p = {}\n";
  py += "m.train()\ny1 = functional_call(m, p, (x1,))\ny2 = functional_call(m, p, (x2,))\n";
  py += "m.eval()\ny3 = functional_call(m, p, (x1,))\n";
  py += "parts = [y1.flatten(), y2.flatten(), y3.flatten()]\n";
  if (tracked) py += "parts += [m.running_mean, m.running_var, m.num_batches_tracked.to(x1.dtype).reshape(1)]\n";
  py += "out = torch.cat(parts)\n";
  return py;
}

std::string py_momentum(std::optional<double> m) { return m ? fmt::format("{}", *m) : "None"; }
}  // namespace

TEST_CASE("BatchNorm1d/2d: training steps and eval match torch.nn, running stats included", "[batch_norm][parity]") {
  ParityBatch batch("batch_norm_module");
  struct C {
    int dims;  // 1: BatchNorm1d, 2: BatchNorm2d
    Shape x;
    std::optional<double> momentum;
    bool affine, tracked;
  };
  const std::vector<C> cases = {
      {1, {8, 5}, 0.1, true, true},        {1, {4, 3, 7}, std::nullopt, true, true},
      {2, {2, 3, 4, 5}, 0.3, true, true},  {2, {3, 2, 3, 3}, 0.1, false, true},
      {2, {2, 3, 2, 2}, 0.1, true, false}, {2, {2, 4, 16, 16}, std::nullopt, false, true},
  };
  int k = 0;
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(41);
    const std::string py_dt = dt == kFloat32 ? "torch.float32" : "torch.float64";
    for (const auto& c : cases) {
      const std::int64_t ch = c.x[1];
      // An offset keeps the variance honest (two-pass statistics).
      Tensor x1 = (Tensor::randn(c.x, gen, dt) * 2.0 + 5.0).detach().set_requires_grad();
      Tensor x2 = (Tensor::randn(c.x, gen, dt) * 0.5 - 1.0).detach().set_requires_grad();
      Tensor w = Tensor::randn({ch}, gen, dt), b = Tensor::randn({ch}, gen, dt);
      const std::string type = c.dims == 1 ? "BatchNorm1d" : "BatchNorm2d";
      const std::string ctor =
          fmt::format("torch.nn.{}({}, eps=1e-3, momentum={}, affine={}, track_running_stats={}, dtype={})", type, ch,
                      py_momentum(c.momentum), c.affine ? "True" : "False", c.tracked ? "True" : "False", py_dt);
      batch.add(fmt::format("{}_{}_{}", type, dtype_name(dt), k++), torch_steps(ctor, c.affine, c.tracked),
                {{"x1", x1}, {"x2", x2}, {"w", w, false}, {"b", b, false}}, [c, ch, dt](const Tensors& in) {
                  std::unique_ptr<nn::BatchNormBase> m;
                  if (c.dims == 1)
                    m = std::make_unique<nn::BatchNorm1d>(ch, 1e-3, c.momentum, c.affine, c.tracked, dt);
                  else
                    m = std::make_unique<nn::BatchNorm2d>(ch, 1e-3, c.momentum, c.affine, c.tracked, dt);
                  return run_steps(*m, in);
                });
    }
  }
  batch.run();
}

TEST_CASE("GroupNorm: values and gradients match torch.nn.GroupNorm", "[group_norm][parity]") {
  ParityBatch batch("group_norm_module");
  int k = 0;
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(42);
    const std::string py_dt = dt == kFloat32 ? "torch.float32" : "torch.float64";
    for (const auto& [x, groups] : std::vector<std::pair<Shape, std::int64_t>>{
             {{2, 6}, 3}, {{2, 6, 5}, 2}, {{3, 4, 3, 3}, 4}, {{2, 8, 6, 6}, 1}}) {
      // Groups of 2 values in float32: the input gradient is a difference of nearly equal terms that
      // torch computes in float32 (errors ~1e-5 against ours, accumulated in double). float64 only.
      if (dt == kFloat32 && shape_numel(x) / (x[0] * groups) == 2) continue;
      Tensor xt = (Tensor::randn(x, gen, dt) * 3.0 + 4.0).detach().set_requires_grad();
      Tensor w = Tensor::randn({x[1]}, gen, dt), b = Tensor::randn({x[1]}, gen, dt);
      const std::int64_t ch = x[1], g = groups;
      batch.add(fmt::format("group_norm_{}_{}", dtype_name(dt), k++),
                fmt::format("m = torch.nn.GroupNorm({}, {}, eps=1e-4, dtype={})\n"
                            "with torch.no_grad():\n  m.weight.copy_(w)\n  m.bias.copy_(b)\nout = m(x)",
                            g, ch, py_dt),
                {{"x", xt}, {"w", w, false}, {"b", b, false}}, [g, ch, dt](const Tensors& in) {
                  nn::GroupNorm m(g, ch, 1e-4, true, dt);
                  {
                    NoGradGuard guard;
                    Tensor mw = m.weight(), mb = m.bias();
                    mw.copy_(in[1]);
                    mb.copy_(in[2]);
                  }
                  return m(in[0]);
                });
      batch.add(fmt::format("group_norm_plain_{}_{}", dtype_name(dt), k++),
                fmt::format("out = torch.nn.GroupNorm({}, {}, affine=False, dtype={})(x)", g, ch, py_dt), {{"x", xt}},
                [g, ch, dt](const Tensors& in) {
                  nn::GroupNorm m(g, ch, 1e-5, false, dt);
                  return m(in[0]);
                });
    }
  }
  batch.run();
}

TEST_CASE("BatchNorm: train() and eval() switch between batch and running statistics", "[batch_norm]") {
  Generator gen(43);
  nn::BatchNorm1d bn(3, 1e-5, 0.5);
  const Tensor x = Tensor::randn({6, 3}, gen) * 2.0 + 1.0;
  CHECK(bn.is_training());
  const Tensor y_train = bn(x);
  CHECK(bn.num_batches_tracked().item() == 1.0);
  // Training output: each channel has mean 0 and biased variance 1 (up to eps).
  const auto yv = y_train.to_vector();
  for (int c = 0; c < 3; ++c) {
    double m = 0, v = 0;
    for (int i = 0; i < 6; ++i) m += yv[static_cast<std::size_t>(i * 3 + c)] / 6;
    for (int i = 0; i < 6; ++i) v += std::pow(yv[static_cast<std::size_t>(i * 3 + c)] - m, 2) / 6;
    CHECK(std::abs(m) < 1e-6);
    CHECK(std::abs(v - 1) < 1e-4);
  }
  bn.eval();
  const Tensor rm = bn.running_mean().clone_data(), rv = bn.running_var().clone_data();
  const Tensor y_eval = bn(x);
  // Eval mode leaves the running stats and the count alone and uses them.
  CHECK(bit_equal(bn.running_mean(), rm));
  CHECK(bit_equal(bn.running_var(), rv));
  CHECK(bn.num_batches_tracked().item() == 1.0);
  const auto xv = x.to_vector(), ev = y_eval.to_vector(), rmv = rm.to_vector(), rvv = rv.to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i)
    CHECK(ev[i] == Approx((xv[i] - rmv[i % 3]) / std::sqrt(rvv[i % 3] + 1e-5)).epsilon(1e-5));
  bn.train();
  bn(x);
  CHECK(bn.num_batches_tracked().item() == 2.0);
  bn.reset_running_stats();
  CHECK(bn.num_batches_tracked().item() == 0.0);
  CHECK(bn.running_var().to_vector() == std::vector<double>{1, 1, 1});
  // A refused batch changes nothing.
  test::require_error([&] { bn(Tensor::zeros({1, 3})); }, {"batch_norm", "more than 1 value"});
  CHECK(bn.num_batches_tracked().item() == 0.0);
}

TEST_CASE("BatchNorm, GroupNorm: state names, buffers and defaults as torch's", "[batch_norm][group_norm]") {
  auto names = [](const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, t] : nn::state_dict(m)) out.push_back(name);
    return out;
  };
  // torch 1.13: list(torch.nn.BatchNorm2d(3).state_dict()) and with track_running_stats=False
  CHECK(names(nn::BatchNorm2d(3)) ==
        std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(names(nn::BatchNorm2d(3, 1e-5, 0.1, true, false)) == std::vector<std::string>{"weight", "bias"});
  CHECK(names(nn::BatchNorm1d(3, 1e-5, 0.1, false, true)) ==
        std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  CHECK(names(nn::GroupNorm(2, 4)) == std::vector<std::string>{"weight", "bias"});
  nn::BatchNorm1d bn(4);
  CHECK(bn.parameters().size() == 2);
  CHECK(bn.buffers().size() == 3);
  CHECK(bn.running_mean().to_vector() == std::vector<double>(4, 0.0));
  CHECK(bn.running_var().to_vector() == std::vector<double>(4, 1.0));
  CHECK(bn.num_batches_tracked().dim() == 0);
  CHECK(bn.weight().requires_grad());
  CHECK(!bn.running_mean().requires_grad());
}

TEST_CASE("BatchNorm, GroupNorm: bad inputs raise xgrad::Error", "[batch_norm][group_norm][errors]") {
  test::require_error([] { nn::BatchNorm1d bad(0); }, {"BatchNorm1d", "num_features", "0"});
  test::require_error([] { nn::BatchNorm2d bad(3, -1.0); }, {"BatchNorm2d", "eps", "-1"});
  test::require_error([] { nn::BatchNorm2d bad(3, 1e-5, std::nan("")); }, {"BatchNorm2d", "momentum"});
  nn::BatchNorm1d bn1(3);
  nn::BatchNorm2d bn2(3);
  test::require_error([&] { bn1(Tensor::zeros({2, 3, 4, 5})); }, {"BatchNorm1d", "2D or 3D", "(2, 3, 4, 5)"});
  test::require_error([&] { bn1(Tensor::zeros({3})); }, {"BatchNorm1d", "2D or 3D", "(3,)"});
  test::require_error([&] { bn2(Tensor::zeros({2, 3, 4})); }, {"BatchNorm2d", "4D", "(2, 3, 4)"});
  test::require_error([&] { bn2(Tensor::zeros({2, 4, 2, 2})); }, {"BatchNorm2d", "num_features = 3", "(2, 4, 2, 2)"});
  test::require_error([&] { bn1(Tensor()); }, {"BatchNorm1d", "undefined"});
  test::require_error([&] { bn1(Tensor::zeros({2, 3}, kFloat64)); }, {"batch_norm", "float64"});
  test::require_error([] { nn::GroupNorm bad(3, 4); }, {"GroupNorm", "divisible", "4", "3"});
  test::require_error([] { nn::GroupNorm bad(0, 4); }, {"GroupNorm", "'num_groups'", "got 0"});
  test::require_error([] { nn::GroupNorm bad(2, 4, -1.0); }, {"GroupNorm", "eps"});
  test::require_error([] { nn::GroupNorm bad(2, -4); }, {"GroupNorm", "'num_channels'", "got -4"});
  nn::GroupNorm gn(2, 4);
  test::require_error([&] { gn(Tensor::zeros({2, 6, 3})); }, {"GroupNorm", "num_channels = 4", "(2, 6, 3)"});
}

TEST_CASE("BatchNorm: num_batches_tracked is int64 through to(), checkpoints and loading", "[batch_norm][serialize]") {
  Generator gen(44);
  nn::BatchNorm2d bn(2);
  CHECK(bn.num_batches_tracked().dtype() == kInt64);
  for (int i = 0; i < 3; ++i) bn(Tensor::randn({2, 2, 3, 3}, gen));
  CHECK(bn.num_batches_tracked().item<std::int64_t>() == 3);
  // to(float64) converts the floating-point state only, as torch's Module.to
  bn.to(kFloat64);
  CHECK(bn.weight().dtype() == kFloat64);
  CHECK(bn.running_var().dtype() == kFloat64);
  CHECK(bn.num_batches_tracked().dtype() == kInt64);
  CHECK(bn.dtype() == kFloat64);
  test::require_error([&] { bn.to(kInt64); }, {"BatchNorm2d::to", "int64"});
  // a checkpoint round trip keeps the count (safetensors I64)
  test::TempDir dir("batch_norm_ckpt");
  nn::save(bn, dir.file("bn.safetensors"));
  nn::BatchNorm2d other(2, 1e-5, 0.1, true, true, kFloat64);
  nn::load(other, dir.file("bn.safetensors"));
  CHECK(other.num_batches_tracked().dtype() == kInt64);
  CHECK(other.num_batches_tracked().item<std::int64_t>() == 3);
  CHECK(bit_equal(other.running_mean(), bn.running_mean()));
  CHECK(bit_equal(other.running_var(), bn.running_var()));
  // the cumulative average continues from the loaded count: factor 1/4 on the next batch
  nn::BatchNorm2d cumulative(2, 1e-5, std::nullopt, false, true, kFloat64);
  nn::load(cumulative, dir.file("bn.safetensors"), /*strict=*/false);
  const Tensor x = Tensor::randn({4, 2, 2, 2}, gen, kFloat64);
  const std::vector<double> before = cumulative.running_mean().to_vector();
  cumulative(x);
  const std::vector<double> after = cumulative.running_mean().to_vector(), xv = x.to_vector();
  for (int c = 0; c < 2; ++c) {
    double mean = 0;
    for (int n = 0; n < 4; ++n)
      for (int s = 0; s < 4; ++s) mean += xv[static_cast<std::size_t>((n * 2 + c) * 4 + s)] / 16;
    CHECK(after[static_cast<std::size_t>(c)] ==
          Approx(0.75 * before[static_cast<std::size_t>(c)] + 0.25 * mean).epsilon(1e-12));
  }
  CHECK(cumulative.num_batches_tracked().item<std::int64_t>() == 4);
}
