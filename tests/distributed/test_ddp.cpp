// Tests for distributed/distributed.*, run by CTest as `mpirun -np 2` (and -np 1): every rank runs
// every test case in the same order, since the cases call collectives. Covers data-parallel SGD on a
// split batch against single-process training on the whole batch, the bucketed gradient average
// (bucket sizes, modes, dtypes, undefined gradients), the cross-rank parameter check, checkpoints
// written by rank 0, and local argument errors.
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>

#include "../catch_impl.hpp"
#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/sync_batch_norm.hpp"
#include "xgrad/distributed/zero.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

namespace {

// A 4 -> 8 -> 1 tanh MLP as a parameter list, initialised from `seed`.
std::vector<std::pair<std::string, Tensor>> make_mlp(std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::pair<std::string, Tensor>> p{{"w1", Tensor::randn({4, 8}, gen, kFloat64)},
                                                {"b1", Tensor::randn({8}, gen, kFloat64)},
                                                {"w2", Tensor::randn({8, 1}, gen, kFloat64)},
                                                {"b2", Tensor::randn({1}, gen, kFloat64)}};
  for (auto& [name, t] : p) t.set_requires_grad();
  return p;
}

Tensor mlp_loss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& y) {
  const Tensor h = tanh(add(matmul(x, p[0]), p[1]));
  const Tensor d = sub(add(matmul(h, p[2]), p[3]), y);
  return mean(mul(d, d));  // mean over this rank's rows
}

std::vector<Tensor> values(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<Tensor> out;
  for (const auto& [n, t] : named) out.push_back(t);
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

// True when every rank holds the same bits as rank 0.
bool same_on_all_ranks(const Tensor& t) {
  Tensor mine = t.clone_data(), root = t.clone_data();
  dist::broadcast_({root}, 0);
  int ok = bit_equal(mine, root) ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace

TEST_CASE("rank and world_size", "[distributed]") {
  const int n = dist::world_size(), r = dist::rank();
  CHECK(n >= 1);
  CHECK(r >= 0);
  CHECK(r < n);
  CHECK(dist::is_initialized());
  CHECK(dist::all_reduce_mean(static_cast<double>(r)) == (n - 1) / 2.0);
  CHECK(dist::all_reduce_max(static_cast<double>(r)) == n - 1);
}

TEST_CASE("DDP on a split batch equals single-process training on the whole batch", "[distributed]") {
  const int n = dist::world_size(), r = dist::rank();
  const std::int64_t batch = 24;  // divisible by 1, 2, 3 and 4 ranks
  REQUIRE(batch % n == 0);        // equal shares: the mean of the ranks' means is the batch mean
  Generator data_gen(7);
  const Tensor x = Tensor::randn({batch, 4}, data_gen, kFloat64);
  const Tensor y = Tensor::randn({batch, 1}, data_gen, kFloat64);
  const int steps = 5;
  const double lr = 0.1;

  // Reference: one process, whole batch, rank 0's initialisation (seed 100).
  auto ref_named = make_mlp(100);
  const auto ref = values(ref_named);
  nn::SGD ref_opt(ref, nn::SGDOptions(lr));
  for (int s = 0; s < steps; ++s) {
    ref_opt.zero_grad(true);
    mlp_loss(ref, x, y).backward();
    ref_opt.step();
  }

  // Data parallel: each rank starts from its own initialisation (rank 0's is broadcast), takes its
  // shuffled share of the batch from a DistributedSampler, and averages gradients.
  auto named = make_mlp(100 + static_cast<std::uint64_t>(r));
  dist::DistributedDataParallel ddp(named);
  const auto params = values(named);
  for (const auto& p : params) CHECK(same_on_all_ranks(p));
  auto ds = std::make_shared<nn::TensorDataset>(x, y);
  auto sampler = std::make_shared<nn::DistributedSampler>(batch, n, r, /*shuffle=*/true, /*seed=*/3);
  nn::DataLoader loader(ds, nn::DataLoaderOptions(static_cast<std::size_t>(batch / n)), sampler);
  REQUIRE(loader.size() == 1);
  nn::SGD opt(params, nn::SGDOptions(lr));
  for (int s = 0; s < steps; ++s) {
    sampler->set_epoch(static_cast<std::uint64_t>(s));  // a different split each step
    for (auto& b : loader) {
      REQUIRE(b.data.shape() == Shape{batch / n, 4});
      opt.zero_grad(true);
      mlp_loss(params, b.data, b.target).backward();
      ddp.average_gradients();
      opt.step();
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    CAPTURE(named[i].first);
    CHECK(max_abs_diff(params[i], ref[i]) <= 1e-12);
    CHECK(max_abs_diff(params[i], ref[i]) >= 0.0);
    CHECK(same_on_all_ranks(params[i]));  // replicas stay bit-identical
  }
  // Training moved the parameters (the comparison is not between two untouched initialisations).
  CHECK(max_abs_diff(params[0], make_mlp(100)[0].second) > 1e-3);
}

TEST_CASE("average_gradients: mean over ranks, buckets, modes, dtypes, undefined grads", "[distributed]") {
  const int n = dist::world_size(), r = dist::rank();
  // Gradient of rank q for parameter i, element k: a value every rank can recompute.
  const auto grad_value = [](int q, std::size_t i, std::int64_t k) {
    return std::sin(1.0 + static_cast<double>(q) * 0.7 + static_cast<double>(i) * 1.3 + static_cast<double>(k) * 0.11);
  };
  const std::vector<std::pair<Shape, Dtype>> specs{
      {{3, 5}, kFloat64}, {{7}, kFloat32}, {{2, 2, 2}, kFloat64}, {{1}, kFloat32}, {{40}, kFloat64}};
  const auto make_params = [&] {
    std::vector<Tensor> ps;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      Tensor p = Tensor::zeros(specs[i].first, specs[i].second);
      p.set_requires_grad();
      // Parameter 2 has no gradient on rank 1 (as if unused there): counts as zeros.
      if (!(i == 2 && r == 1)) {
        std::vector<double> g(static_cast<std::size_t>(p.numel()));
        for (std::size_t k = 0; k < g.size(); ++k) g[k] = grad_value(r, i, static_cast<std::int64_t>(k));
        p.set_grad(Tensor::from_vector(g, p.shape(), p.dtype()));
      }
      ps.push_back(p);
    }
    return ps;
  };
  // Expected: sum over ranks in rank order, then / n, in each parameter's dtype.
  const auto expected = [&](std::size_t i, const Tensor& p) {
    std::vector<double> e(static_cast<std::size_t>(p.numel()));
    for (std::size_t k = 0; k < e.size(); ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      if (p.dtype() == kFloat32) {
        float s = 0;
        for (int q = 0; q < n; ++q)
          if (!(i == 2 && q == 1)) s += static_cast<float>(grad_value(q, i, kk));
        e[k] = static_cast<double>(s / static_cast<float>(n));
      } else {
        double s = 0;
        for (int q = 0; q < n; ++q)
          if (!(i == 2 && q == 1)) s += grad_value(q, i, kk);
        e[k] = s / n;
      }
    }
    return Tensor::from_vector(e, p.shape(), p.dtype());
  };

  std::vector<std::vector<Tensor>> results;
  for (dist::DdpOptions opts : {dist::DdpOptions{}, dist::DdpOptions{8, dist::ReduceMode::allreduce},
                                dist::DdpOptions{100, dist::ReduceMode::allreduce},
                                dist::DdpOptions{std::size_t{4} << 20, dist::ReduceMode::reduce_broadcast}}) {
    CAPTURE(opts.bucket_bytes, static_cast<int>(opts.mode));
    auto ps = make_params();
    dist::DistributedDataParallel ddp(ps, opts);
    if (opts.bucket_bytes == 8) CHECK(ddp.num_buckets() == specs.size());            // every parameter alone
    if (opts.bucket_bytes == (std::size_t{4} << 20)) CHECK(ddp.num_buckets() == 2);  // one per dtype
    ddp.average_gradients();
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      CAPTURE(i);
      const Tensor g = ps[i].grad();
      REQUIRE(g.defined());
      CHECK(g.dtype() == specs[i].second);
      CHECK(g.shape() == specs[i].first);
      // n <= 2: a + b is the same in any order, so the bits match; more ranks may sum in another order.
      if (n <= 2)
        CHECK(bit_equal(g, expected(i, ps[i])));
      else
        CHECK(allclose(g, expected(i, ps[i]), 1e-6, 1e-7));
      CHECK(same_on_all_ranks(g));
      grads.push_back(g.clone_data());
    }
    results.push_back(grads);
  }
  // With 2 ranks, bucketing and mode do not change a single bit. With more, they may: Open MPI picks
  // its reduction algorithm (and so the summation order) by message size (docs/distributed.md).
  for (std::size_t k = 1; k < results.size(); ++k)
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (n <= 2)
        CHECK(bit_equal(results[k][i], results[0][i]));
      else
        CHECK(allclose(results[k][i], results[0][i], 1e-6, 1e-7));
    }
}

TEST_CASE("DDP: ranks with different parameters all throw, naming the difference", "[distributed]") {
  const int n = dist::world_size(), r = dist::rank();
  const auto param = [](const Shape& s, Dtype d) {
    Tensor t = Tensor::zeros(s, d);
    t.set_requires_grad();
    return t;
  };
  if (n == 1) {
    // Alone, any model is consistent.
    dist::DistributedDataParallel ddp({{"w", param({2, 2}, kFloat64)}});
    CHECK(ddp.parameters().size() == 1);
    return;
  }
  using Named = std::vector<std::pair<std::string, Tensor>>;
  const auto build = [](const Named& named) { return [named] { dist::DistributedDataParallel ddp(named); }; };
  // Shape differs on rank 1.
  const Shape wshape = r == 1 ? Shape{3, 2} : Shape{2, 2};
  CHECK_THROWS_WITH(build({{"b", param({2}, kFloat64)}, {"w", param(wshape, kFloat64)}})(),
                    Catch::Contains("parameters differ") && Catch::Contains("rank 0 has 2 parameters, rank 1 has 2") &&
                        Catch::Contains("parameter 1: rank 0 'w' (2, 2) float64 vs rank 1 'w' (3, 2) float64"));
  // An extra parameter on rank 1.
  Named extra{{"a", param({4}, kFloat32)}};
  if (r == 1) extra.emplace_back("extra", param({1}, kFloat32));
  CHECK_THROWS_WITH(build(extra)(), Catch::Contains("rank 0 has 1 parameters, rank 1 has 2") &&
                                        Catch::Contains("rank 0 (none) vs rank 1 'extra' (1,) float32"));
  // dtype differs.
  CHECK_THROWS_WITH(build({{"a", param({4}, r == 1 ? kFloat64 : kFloat32)}})(),
                    Catch::Contains("'a' (4,) float32 vs rank 1 'a' (4,) float64"));
  // The communicator is still usable after the collective error.
  dist::barrier();
  dist::DistributedDataParallel ok({{"a", param({4}, kFloat32)}});
  CHECK(ok.num_buckets() == 1);
}

TEST_CASE("DDP: ranks with different options all throw, naming the option and both values", "[distributed]") {
  // Issue 53 item 3: other bucket sizes, overlap or modes would run mismatched collectives.
  const int n = dist::world_size(), r = dist::rank();
  Tensor w = Tensor::zeros({5}, kFloat64);
  w.set_requires_grad();
  const auto build = [&](dist::DdpOptions o) { dist::DistributedDataParallel ddp(std::vector<Tensor>{w}, o); };
  if (n == 1) {
    build(dist::DdpOptions{1024});
    return;
  }
  dist::DdpOptions o;
  if (r == 1) o.bucket_bytes = 1024;
  CHECK_THROWS_WITH(build(o), Catch::Contains("options differ") &&
                                  Catch::Contains("option 'bucket_bytes' is 4194304 on rank 0 and 1024 on rank 1"));
  o = dist::DdpOptions{};
  o.overlap = r != 1;
  CHECK_THROWS_WITH(build(o), Catch::Contains("option 'overlap' is true on rank 0 and false on rank 1"));
  o = dist::DdpOptions{};
  if (r == 1) o.mode = dist::ReduceMode::reduce_broadcast;
  CHECK_THROWS_WITH(build(o), Catch::Contains("option 'mode' is ReduceMode::allreduce on rank 0 and "
                                              "ReduceMode::reduce_broadcast on rank 1"));
  o = dist::DdpOptions{};
  o.broadcast_buffers = r != 1;
  CHECK_THROWS_WITH(build(o), Catch::Contains("option 'broadcast_buffers' is true on rank 0 and false on rank 1"));
  // The same options everywhere: accepted, and the communicator still works.
  build(dist::DdpOptions{1024});
  dist::barrier();
}

TEST_CASE("Join: ranks with fewer batches shadow the others, as one process on the training ranks' data",
          "[distributed]") {
  // Issue 53 item 4. Rank r trains max(1, 4 - 2r) steps (4 and 2 on 2 ranks); step s of the one-process
  // reference minimises (sum over the ranks still training at s of their mean losses) / W.
  const bool overlap = GENERATE(false, true);
  const int n = dist::world_size(), r = dist::rank();
  const auto steps_of = [](int rank) { return std::max(1, 4 - 2 * rank); };
  const auto batch = [](int step, int rank) {
    Generator g(1000 + 10 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(rank));
    return std::pair<Tensor, Tensor>{Tensor::randn({4, 4}, g, kFloat64), Tensor::randn({4, 1}, g, kFloat64)};
  };
  const auto named = make_mlp(7);
  const std::vector<Tensor> p = values(named);
  dist::DdpOptions o;
  o.overlap = overlap;
  o.bucket_bytes = 64;  // several buckets
  dist::DistributedDataParallel ddp(named, o);
  nn::SGD opt(p, nn::SGDOptions(0.1).momentum(0.9));
  {
    dist::Join join(ddp);
    for (int s = 0; s < steps_of(r); ++s) {
      opt.zero_grad();
      const auto [x, y] = batch(s, r);
      mlp_loss(p, x, y).backward();
      ddp.average_gradients();
      opt.step();
    }
    join.finish();
  }
  const std::vector<Tensor> q = values(make_mlp(7));
  nn::SGD ref(q, nn::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < steps_of(0); ++s) {
    ref.zero_grad();
    Tensor loss = Tensor::zeros({}, kFloat64);
    for (int k = 0; k < n; ++k)
      if (s < steps_of(k)) {
        const auto [x, y] = batch(s, k);
        loss = add(loss, mul(mlp_loss(q, x, y), 1.0 / n));
      }
    loss.backward();
    ref.step();
  }
  INFO("rank " << r << ", overlap " << overlap);
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(max_abs_diff(p[i], q[i]) < 1e-12);
  // Without a Join, the same DDP object goes on as before.
  opt.zero_grad();
  const auto [x, y] = batch(9, r);
  mlp_loss(p, x, y).backward();
  ddp.average_gradients();
}

TEST_CASE("DDP and collectives: local argument errors", "[distributed]") {
  CHECK_THROWS_WITH(dist::DistributedDataParallel(std::shared_ptr<nn::Module>()),
                    Catch::Contains("DistributedDataParallel") && Catch::Contains("module") && Catch::Contains("null"));
  using Named = std::vector<std::pair<std::string, Tensor>>;
  CHECK_THROWS_WITH(
      dist::DistributedDataParallel(Named(1, {"w", Tensor()})),
      Catch::Contains("DistributedDataParallel") && Catch::Contains("'w'") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(dist::DistributedDataParallel(Named(1, {"w", Tensor::zeros({1})}), dist::DdpOptions{0}),
                    Catch::Contains("bucket_bytes"));
  CHECK_THROWS_WITH(dist::broadcast_(std::vector<Tensor>(1, Tensor::zeros({1})), dist::world_size()),
                    Catch::Contains("broadcast_") && Catch::Contains("root"));
  CHECK_THROWS_WITH(dist::save_on_rank0(std::function<void()>()), Catch::Contains("save_on_rank0"));
}

namespace {
class Tiny : public nn::Module {
 public:
  explicit Tiny(double v) : nn::Module("Tiny") { register_parameter("w", Tensor::full({3}, v, kFloat64)); }
};
}  // namespace

TEST_CASE("save_on_rank0 writes once, and the file is there when every rank returns", "[distributed]") {
  const int r = dist::rank();
  // A folder name every rank agrees on: rank 0's pid, broadcast.
  Tensor pid = Tensor::scalar(static_cast<double>(::getpid()), kFloat64);
  dist::broadcast_({pid}, 0);
  const auto dir =
      std::filesystem::temp_directory_path() / ("xgrad_test_ddp_" + std::to_string(static_cast<long long>(pid.item())));
  if (r == 0) std::filesystem::create_directories(dir);
  dist::barrier();

  int calls = 0;
  dist::save_on_rank0([&] {
    ++calls;
    std::ofstream(dir / "marker.txt") << "written by rank " << dist::rank();
  });
  CHECK(calls == (r == 0 ? 1 : 0));
  CHECK(std::filesystem::exists(dir / "marker.txt"));

  auto model = std::make_shared<Tiny>(1.0 + r);  // rank-dependent values; rank 0's are saved
  const std::string path = (dir / "tiny.safetensors").string();
  dist::save_on_rank0(*model, path);
  // Wrapping the module broadcasts rank 0's values into every rank's parameters.
  auto replica = std::make_shared<Tiny>(5.0 + r);
  dist::DistributedDataParallel ddp(replica);
  CHECK(ddp.module() == replica);
  CHECK(replica->named_parameters()[0].second.to_vector() == std::vector<double>{5.0, 5.0, 5.0});
  Tiny loaded(0.0);
  nn::load(loaded, path);
  CHECK(loaded.named_parameters()[0].second.to_vector() == std::vector<double>{1.0, 1.0, 1.0});
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

namespace {
void check_close(const Tensor& a, const Tensor& b, double tol) {
  const auto va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  INFO("largest difference " << worst);
  CHECK(worst <= tol);
}
}  // namespace

TEST_CASE("SyncBatchNorm: the ranks' shares of a batch equal one process with the whole batch", "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  const std::int64_t batch = 8, c = 3;
  Generator gen(11);
  const Tensor full = add(mul(Tensor::randn({batch, c, 2, 3}, gen, kFloat64), 2.0), 1.0);
  const Tensor seed = Tensor::randn({batch, c, 2, 3}, gen, kFloat64);
  const Tensor w = Tensor::randn({c}, gen, kFloat64), b = Tensor::randn({c}, gen, kFloat64);
  nn::BatchNorm2d ref(c, 1e-5, 0.1, true, true, kFloat64);
  dist::SyncBatchNorm sync(c, 1e-5, 0.1, true, true, kFloat64);
  for (nn::BatchNormBase* m : std::initializer_list<nn::BatchNormBase*>{&ref, &sync}) {
    Tensor mw = m->weight(), mb = m->bias();
    mw.detach().copy_(w);
    mb.detach().copy_(b);
  }
  const std::int64_t lo = batch * r / n, hi = batch * (r + 1) / n;  // this rank's rows
  for (int step = 0; step < 2; ++step) {
    Tensor xf = full.detach().set_requires_grad();
    const Tensor yf = ref.forward(xf);
    sum(mul(yf, seed)).backward();
    Tensor xl = slice(full, 0, lo, hi).detach().set_requires_grad();
    const Tensor yl = sync.forward(xl);
    sum(mul(yl, slice(seed, 0, lo, hi))).backward();
    check_close(yl, slice(yf, 0, lo, hi), 1e-12);
    check_close(xl.grad(), slice(xf.grad(), 0, lo, hi), 1e-12);
    // each rank's parameter gradients are its share's; their sum is the whole batch's
    check_close(dist::all_reduce_sum(sync.weight().grad()), ref.weight().grad(), 1e-12);
    check_close(dist::all_reduce_sum(sync.bias().grad()), ref.bias().grad(), 1e-12);
    check_close(sync.running_mean(), ref.running_mean(), 1e-12);
    check_close(sync.running_var(), ref.running_var(), 1e-12);
    CHECK(sync.num_batches_tracked().item<std::int64_t>() == step + 1);
    ref.zero_grad();
    sync.zero_grad();
  }
  // eval mode: the running statistics, no communication
  ref.eval();
  sync.eval();
  check_close(sync.forward(slice(full, 0, lo, hi)), slice(ref.forward(full), 0, lo, hi), 1e-12);
  sync.train();
  // a batch of one value per channel over all ranks is refused on every rank
  const Tensor one = Tensor::ones({r == 0 ? 1 : 0, c}, kFloat64);
  dist::SyncBatchNorm sync1(c, 1e-5, 0.1, true, true, kFloat64);
  CHECK_THROWS_WITH(sync1.forward(one), Catch::Contains("SyncBatchNorm") && Catch::Contains("more than 1 value"));
  CHECK_THROWS_WITH(sync1.forward(Tensor::ones({4}, kFloat64)), Catch::Contains("at least 2D"));
}

TEST_CASE("DDP broadcasts rank 0's buffers at construction and after each gradient average", "[distributed]") {
  const int r = dist::rank();
  auto model = std::make_shared<nn::BatchNorm1d>(2, 1e-5, 0.1, true, true, kFloat64);
  {
    NoGradGuard g;
    Tensor rm = model->running_mean();
    rm.fill_(10.0 + r);
  }
  dist::DistributedDataParallel ddp(model);
  CHECK(model->running_mean().to_vector() == std::vector<double>{10.0, 10.0});
  // each rank normalises its own batch: the running statistics drift apart, then rank 0's win
  Generator gen(static_cast<std::uint64_t>(100 + r));
  const Tensor x = Tensor::randn({4, 2}, gen, kFloat64);
  sum(model->forward(x)).backward();
  const auto mine = model->running_mean().to_vector();
  ddp.average_gradients();
  const auto now = model->running_mean().to_vector();
  const double first = dist::all_reduce_max(now[0]), neg_first = -dist::all_reduce_max(-now[0]);
  CHECK(first == neg_first);  // equal on every rank
  if (r == 0) CHECK(now == mine);
  // off: each rank keeps its own
  auto other = std::make_shared<nn::BatchNorm1d>(2, 1e-5, 0.1, true, true, kFloat64);
  {
    NoGradGuard g;
    Tensor rm = other->running_mean();
    rm.fill_(20.0 + r);
  }
  dist::DdpOptions off;
  off.broadcast_buffers = false;
  dist::DistributedDataParallel ddp_off(other, off);
  CHECK(other->running_mean().to_vector() == std::vector<double>{20.0 + r, 20.0 + r});
}

TEST_CASE("all_reduce_sum sums over ranks and its gradient is the sum of the ranks' gradients", "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  Tensor x = Tensor::full({3}, 1.0 + r, kFloat64).set_requires_grad();
  const Tensor y = dist::all_reduce_sum(x);
  double expect = 0;
  for (int k = 0; k < n; ++k) expect += 1.0 + k;
  CHECK(y.to_vector() == std::vector<double>(3, expect));
  sum(mul(y, static_cast<double>(r + 1))).backward();  // rank k's loss weights y by k + 1
  double g = 0;
  for (int k = 0; k < n; ++k) g += k + 1;
  CHECK(x.grad().to_vector() == std::vector<double>(3, g));
  CHECK_THROWS_WITH(dist::all_reduce_sum(Tensor()), Catch::Contains("all_reduce_sum") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(dist::all_reduce_sum(Tensor::zeros({2}, kInt64)),
                    Catch::Contains("all_reduce_sum") && Catch::Contains("float32 or float64"));
}

TEST_CASE(
    "DDP overlap: buckets reduced during backward, in ready order, the same bits as without, gradients added into the "
    "buckets; no_sync",
    "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  dist::DdpOptions small;
  small.bucket_bytes = 64;  // several buckets: w1 (32 doubles), b1 + w2, b2
  dist::DdpOptions plain_opts = small;
  plain_opts.overlap = false;
  std::vector<Tensor> a = values(make_mlp(1 + static_cast<std::uint64_t>(r)));
  std::vector<Tensor> b;
  for (const Tensor& t : a) b.push_back(t.clone_data().set_requires_grad());
  dist::DistributedDataParallel over(a, small), plain(b, plain_opts);
  CHECK(over.bucket_parameters().front().front() == 0);  // parameter order before the first round
  Generator gen(static_cast<std::uint64_t>(70 + r));
  std::size_t copies_after_first = 0;
  for (int step = 0; step < 4; ++step) {
    const Tensor x = Tensor::randn({5, 4}, gen, kFloat64), y = Tensor::randn({5, 1}, gen, kFloat64);
    // steps 1 and 2 zero .grad in place (Optimizer::zero_grad()'s default), so backward adds into the
    // bucket slots; steps 0 and 3 set it to none, so the hooks copy the new gradients in
    for (Tensor& t : a)
      if (step == 1 || step == 2)
        t.grad().zero_();
      else
        t.zero_grad();
    for (Tensor& t : b) t.zero_grad();
    mlp_loss(a, x, y).backward();
    mlp_loss(b, x, y).backward();
    over.average_gradients();
    plain.average_gradients();
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("step " << step << " parameter " << i);
      if (n <= 2) CHECK(a[i].grad().to_vector() == b[i].grad().to_vector());
      CHECK(max_abs_diff(a[i].grad(), b[i].grad()) < 1e-14);
      CHECK(same_on_all_ranks(a[i].grad()));
    }
    if (step >= 1) {
      // rebuilt in rank 0's ready order: the output layer's gradients come first; every bucket is
      // complete before average_gradients (so each could start during backward)
      CHECK(over.bucket_parameters().front().front() >= 2);
      CHECK(over.buckets_ready_in_backward() == over.num_buckets());
    }
    // no copy in while .grad is zeroed in place: backward added each gradient into its slot
    if (step == 0) copies_after_first = over.gradient_copies();
    if (step == 1 || step == 2) CHECK(over.gradient_copies() == copies_after_first);
    if (step == 3) CHECK(over.gradient_copies() == copies_after_first + a.size());
  }
  // gradient accumulation: two backwards inside no_sync, one outside, one average
  const Tensor x = Tensor::randn({5, 4}, gen, kFloat64), y = Tensor::randn({5, 1}, gen, kFloat64);
  for (Tensor& t : a) t.zero_grad();
  for (Tensor& t : b) t.zero_grad();
  {
    auto guard = over.no_sync();
    mlp_loss(a, x, y).backward();
    mlp_loss(a, x, y).backward();
    CHECK_THROWS_WITH(over.average_gradients(), Catch::Contains("no_sync"));
  }
  mlp_loss(a, x, y).backward();
  for (int k = 0; k < 3; ++k) mlp_loss(b, x, y).backward();
  over.average_gradients();
  plain.average_gradients();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i].grad(), b[i].grad()) < 1e-14);
  // two backwards without averaging, outside no_sync: refused by the hook
  mlp_loss(a, x, y).backward();
  CHECK_THROWS_WITH(mlp_loss(a, x, y).backward(), Catch::Contains("second gradient") && Catch::Contains("no_sync"));
  over.average_gradients();
}

TEST_CASE(
    "ZeroRedundancyOptimizer: DDP's trajectory with the unsharded optimizer, bit for bit, with a share of its state",
    "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  using Make = std::function<std::unique_ptr<nn::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Make>> kinds{
      {"SGD momentum",
       [](std::vector<Tensor> p) { return std::make_unique<nn::SGD>(p, nn::SGDOptions(0.1).momentum(0.9)); }},
      {"Adam", [](std::vector<Tensor> p) { return std::make_unique<nn::Adam>(p, nn::AdamOptions(0.05)); }}};
  for (const auto& [kind, make] : kinds) {
    SECTION(kind) {
      const std::vector<Tensor> a = values(make_mlp(1 + static_cast<std::uint64_t>(r)));  // rank 0's win
      std::vector<Tensor> b;
      for (const Tensor& t : a) b.push_back(t.clone_data().set_requires_grad());
      dist::DistributedDataParallel ddp(a);
      const std::unique_ptr<nn::Optimizer> plain = make(a);
      dist::ZeroRedundancyOptimizer zero(b, make);
      Generator gen(static_cast<std::uint64_t>(40 + r));  // each rank its own data
      for (int step = 0; step < 5; ++step) {
        const Tensor x = Tensor::randn({6, 4}, gen, kFloat64), y = Tensor::randn({6, 1}, gen, kFloat64);
        plain->zero_grad();
        zero.zero_grad();
        mlp_loss(a, x, y).backward();
        mlp_loss(b, x, y).backward();
        ddp.average_gradients();
        plain->step();
        zero.step();
        for (std::size_t i = 0; i < a.size(); ++i) {
          INFO(kind << " step " << step << " parameter " << i);
          if (n <= 2)
            CHECK(b[i].to_vector() == a[i].to_vector());  // a + b either way
          else
            CHECK(max_abs_diff(b[i], a[i]) < 1e-12);  // the ring sums in another order than MPI_Allreduce
          CHECK(same_on_all_ranks(b[i]));
        }
      }
      // the state: each rank holds its share's; together, exactly the unsharded optimizer's
      // (the buffers; the 0-d step counts are one per piece, so a parameter split across ranks has two)
      const auto buffer_bytes = [](const nn::Optimizer* o) {
        std::size_t bytes = 0;
        if (o != nullptr)
          for (const auto& entry : o->state_dict())
            if (entry.first.rfind("state.", 0) == 0 && entry.second.dim() > 0) bytes += entry.second.nbytes();
        return bytes;
      };
      const std::size_t full = buffer_bytes(plain.get()), mine = buffer_bytes(zero.local_optimizer());
      CHECK(zero.local_state_bytes() >= mine);
      const double total = dist::all_reduce_mean(static_cast<double>(mine)) * n;
      CHECK(total == static_cast<double>(full));
      std::size_t shard_bytes = 0;
      for (const Tensor& t : zero.shard()) shard_bytes += t.nbytes();
      // a share of T / W elements, to one element
      if (n > 1) CHECK(static_cast<double>(mine) <= static_cast<double>(full) / n + 16.0);
      INFO("rank " << r << " holds " << mine << " of " << full << " state bytes for " << shard_bytes
                   << " parameter bytes");
      CHECK(mine > 0);
    }
  }
  CHECK_THROWS_WITH(
      dist::ZeroRedundancyOptimizer({}, [](std::vector<Tensor>) { return std::unique_ptr<nn::Optimizer>(); }),
      Catch::Contains("ZeroRedundancyOptimizer") && Catch::Contains("empty"));
}

namespace {
// A folder every rank agrees on (rank 0's pid, broadcast), created empty.
std::filesystem::path shared_temp_dir(const std::string& stem) {
  Tensor pid = Tensor::scalar(static_cast<double>(::getpid()), kFloat64);
  dist::broadcast_({pid}, 0);
  const auto dir =
      std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(static_cast<long long>(pid.item())));
  if (dist::rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  dist::barrier();
  return dir;
}

using Named = std::vector<std::pair<std::string, Tensor>>;
using Make = std::function<std::unique_ptr<nn::Optimizer>(std::vector<Tensor>)>;

const std::vector<std::pair<std::string, Make>>& zero_kinds() {
  static const std::vector<std::pair<std::string, Make>> kinds{
      {"SGD momentum",
       [](std::vector<Tensor> p) { return std::make_unique<nn::SGD>(p, nn::SGDOptions(0.1).momentum(0.9)); }},
      {"Adam", [](std::vector<Tensor> p) { return std::make_unique<nn::Adam>(p, nn::AdamOptions(0.05)); }}};
  return kinds;
}

// Same names, shapes, dtypes and values (to `tol`; 0: the same bits).
void check_same_state(const Named& a, const Named& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("entry " << i << ": " << a[i].first << " against " << b[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.shape() == b[i].second.shape());
    CHECK(a[i].second.dtype() == b[i].second.dtype());
    if (tol == 0)
      CHECK(bit_equal(a[i].second, b[i].second));
    else
      CHECK(max_abs_diff(a[i].second, b[i].second) <= tol);
  }
}

std::vector<Tensor> clones(const std::vector<Tensor>& p) {
  std::vector<Tensor> out;
  for (const Tensor& t : p) out.push_back(t.clone_data().set_requires_grad());
  return out;
}

// The MLP's parameters with a float32 vector at position 1 (so the pieces, float32 first, are not in
// parameter order) and its loss on this rank's data.
std::vector<Tensor> mixed_params(int rank) {
  const auto mlp = values(make_mlp(1 + static_cast<std::uint64_t>(rank)));
  Generator g(9);
  return {mlp[0], Tensor::randn({5}, g, kFloat32).set_requires_grad(), mlp[1], mlp[2], mlp[3]};
}
void mixed_backward(const std::vector<Tensor>& p, Generator& gen) {
  const Tensor x = Tensor::randn({6, 4}, gen, kFloat64), y = Tensor::randn({6, 1}, gen, kFloat64);
  const Tensor t = Tensor::randn({5}, gen, kFloat32);
  mlp_loss({p[0], p[2], p[3], p[4]}, x, y).backward();
  const Tensor e = sub(p[1], t);
  mean(mul(e, e)).backward();
}
}  // namespace

TEST_CASE(
    "ZeroRedundancyOptimizer checkpoints: the consolidated state is the unsharded optimizer's, and loads back as every "
    "rank's share",
    "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  const auto dir = shared_temp_dir("xgrad_test_zero_ckpt");
  // with 2 ranks ZeRO is bit for bit DDP + the unsharded optimizer; with more, their sums differ in order
  // (to float32 rounding in the float32 parameter)
  const double tol = n <= 2 ? 0.0 : 1e-5;
  for (const auto& [kind, make] : zero_kinds()) {
    SECTION(kind) {
      const std::vector<Tensor> a = mixed_params(r), b = clones(a);
      dist::DistributedDataParallel ddp(a);
      const std::unique_ptr<nn::Optimizer> plain = make(a);
      dist::ZeroRedundancyOptimizer zero(b, make);
      CHECK_THROWS_WITH(zero.state_dict(), Catch::Contains("ZeroRedundancyOptimizer::state_dict") &&
                                               Catch::Contains("consolidate_state_dict"));
      Generator gen(static_cast<std::uint64_t>(40 + r)), gen_b(static_cast<std::uint64_t>(40 + r));
      for (int step = 0; step < 4; ++step) {
        plain->zero_grad();
        zero.zero_grad();
        mixed_backward(a, gen);
        mixed_backward(b, gen_b);
        ddp.average_gradients();
        plain->step();
        zero.step();
      }
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i], b[i]) <= tol);
      // consolidated on the last rank: the unsharded optimizer's state_dict
      zero.consolidate_state_dict(n - 1);
      if (r == n - 1)
        check_same_state(zero.state_dict(), plain->state_dict(), tol);
      else
        CHECK_THROWS_WITH(zero.state_dict(),
                          Catch::Contains("rank " + std::to_string(r)) && Catch::Contains("no consolidated state"));
      // the unsharded optimizer's state into a new ZeRO optimizer: each rank's share, the same bits
      const std::vector<Tensor> c = clones(a);
      dist::ZeroRedundancyOptimizer from_full(c, make);
      from_full.load_state_dict(plain->state_dict());
      from_full.consolidate_state_dict(0);
      if (r == 0) check_same_state(from_full.state_dict(), plain->state_dict(), 0.0);
      // sharded, at the same world size (other sizes: run_zero_checkpoint.sh)
      const std::string shards = (dir / kind).string();
      zero.save_sharded(shards);
      CHECK(std::filesystem::exists(dir / kind / ("zero-shard-" + std::to_string(r) + ".safetensors")));
      const std::vector<Tensor> d = clones(b);
      dist::ZeroRedundancyOptimizer from_shards(d, make);
      from_shards.load_sharded(shards);
      zero.consolidate_state_dict(0);
      from_shards.consolidate_state_dict(0);
      if (r == 0) check_same_state(from_shards.state_dict(), zero.state_dict(), 0.0);
      // one more step: every copy continues as the original
      Generator g1(static_cast<std::uint64_t>(90 + r)), g2 = g1, g3 = g1, g4 = g1;
      plain->zero_grad();
      mixed_backward(a, g1);
      ddp.average_gradients();
      plain->step();
      for (auto [z, p, g] :
           {std::tuple{&zero, &b, &g2}, std::tuple{&from_full, &c, &g3}, std::tuple{&from_shards, &d, &g4}}) {
        z->zero_grad();
        mixed_backward(*p, *g);
        z->step();
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i], (*p)[i]) <= tol);
      }
      // step() discards the consolidated state (it would be stale)
      CHECK_THROWS_WITH(zero.state_dict(), Catch::Contains("no consolidated state"));
    }
  }
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("ZeroRedundancyOptimizer checkpoints with ranks that own no element", "[distributed]") {
  // One parameter of one element: with W ranks, ranks 0 .. W-2 own nothing and wrap no optimizer.
  const int r = dist::rank();
  const auto dir = shared_temp_dir("xgrad_test_zero_empty");
  const Make adam = zero_kinds()[1].second;
  Tensor w = Tensor::full({1}, 2.0, kFloat64).set_requires_grad();
  Tensor v = Tensor::full({1}, 2.0, kFloat64).set_requires_grad();
  dist::ZeroRedundancyOptimizer zero({w}, adam);
  CHECK((zero.local_optimizer() != nullptr) == (r == dist::world_size() - 1));
  const std::unique_ptr<nn::Optimizer> plain = adam({v});
  for (int step = 0; step < 3; ++step) {
    zero.zero_grad();
    plain->zero_grad();
    sum(mul(w, w)).backward();  // the same gradient on every rank: the average is exact
    sum(mul(v, v)).backward();
    zero.step();
    plain->step();
  }
  CHECK(bit_equal(w, v));
  zero.consolidate_state_dict(0);
  if (r == 0) check_same_state(zero.state_dict(), plain->state_dict(), 0.0);
  zero.save_sharded(dir.string());
  Tensor u = w.clone_data().set_requires_grad();
  dist::ZeroRedundancyOptimizer from_shards({u}, adam), from_full({u.clone_data().set_requires_grad()}, adam);
  from_shards.load_sharded(dir.string());
  from_full.load_state_dict(plain->state_dict());
  for (auto* z : {&from_shards, &from_full}) {
    z->consolidate_state_dict(0);
    if (r == 0) check_same_state(z->state_dict(), plain->state_dict(), 0.0);
  }
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

TEST_CASE(
    "ZeroRedundancyOptimizer checkpoints: bad, missing and mismatched states and files are refused, naming "
    "what differs",
    "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  const auto dir = shared_temp_dir("xgrad_test_zero_bad");
  const Make adam = zero_kinds()[1].second, sgd = zero_kinds()[0].second;
  const std::vector<Tensor> p = values(make_mlp(3));
  dist::ZeroRedundancyOptimizer zero(p, adam);
  Generator gen(static_cast<std::uint64_t>(60 + r));
  for (int step = 0; step < 2; ++step) {
    zero.zero_grad();
    mlp_loss(p, Tensor::randn({6, 4}, gen, kFloat64), Tensor::randn({6, 1}, gen, kFloat64)).backward();
    zero.step();
  }
  CHECK_THROWS_WITH(zero.consolidate_state_dict(n), Catch::Contains("consolidate_state_dict") &&
                                                        Catch::Contains("'to'") && Catch::Contains("not a rank"));
  zero.consolidate_state_dict(0);
  const Named before = r == 0 ? zero.state_dict() : Named{};

  // load_state_dict: a full state of a plain Adam over the same shapes, altered
  const std::vector<Tensor> q = clones(p);
  nn::Adam ref(q, nn::AdamOptions(0.05));
  for (Tensor t : q) t.set_grad(Tensor::ones(t.shape(), t.dtype()));
  ref.step();
  const Named good = ref.state_dict();
  const auto altered = [&](const std::string& name, const Tensor& value) {
    Named out;
    for (const auto& [k, v] : good)
      if (k != name) out.emplace_back(k, v);
    if (value.defined()) out.emplace_back(name, value);
    return out;
  };
  CHECK_THROWS_WITH(zero.load_state_dict(altered("param_groups.0.num_params", Tensor::scalar(3.0, kFloat64))),
                    Catch::Contains("ZeroRedundancyOptimizer::load_state_dict") &&
                        Catch::Contains("saved for 3 parameters") && Catch::Contains("has 4"));
  CHECK_THROWS_WITH(zero.load_state_dict(altered("param_groups.0.num_params", Tensor())),
                    Catch::Contains("missing entry 'param_groups.0.num_params'"));
  CHECK_THROWS_WITH(zero.load_state_dict(altered("state.0.1.exp_avg", Tensor::zeros({3}, kFloat64))),
                    Catch::Contains("'state.0.1.exp_avg'") && Catch::Contains("parameter 1 is float64(8,)"));
  CHECK_THROWS_WITH(zero.load_state_dict(altered("param_groups.1.lr", Tensor::scalar(0.1, kFloat64))),
                    Catch::Contains("'param_groups.1.lr'") && Catch::Contains("group 1"));
  CHECK_THROWS_WITH(zero.load_state_dict(altered("state.0.7.step", Tensor::scalar(1.0, kFloat64))),
                    Catch::Contains("'state.0.7.step'") && Catch::Contains("names parameter 7"));
  {
    const std::vector<Tensor> s = clones(p);
    nn::SGD other(s, nn::SGDOptions(0.1).momentum(0.9));
    CHECK_THROWS_WITH(zero.load_state_dict(other.state_dict()),
                      Catch::Contains("ZeroRedundancyOptimizer::load_state_dict") &&
                          Catch::Contains("unknown entry 'param_groups.0.momentum' for Adam"));
  }

  // load_sharded: missing, foreign, mismatched, corrupted files; every rank throws
  const std::string good_dir = (dir / "good").string(), other_dir = (dir / "other").string();
  zero.save_sharded(good_dir);
  zero.save_sharded(other_dir);
  CHECK_THROWS_WITH(
      zero.load_sharded((dir / "none").string()),
      Catch::Contains("ZeroRedundancyOptimizer::load_sharded") && Catch::Contains("zero-shard-0.safetensors"));
  {
    const std::vector<Tensor> s = clones(p);
    dist::ZeroRedundancyOptimizer wrong_kind(s, sgd);
    CHECK_THROWS_WITH(wrong_kind.load_sharded(good_dir), Catch::Contains("load_sharded") &&
                                                             Catch::Contains("holds the state of Adam") &&
                                                             Catch::Contains("wraps SGD"));
    std::vector<Tensor> t = values(make_mlp(3));
    t[2] = Tensor::zeros({8, 2}, kFloat64).set_requires_grad();
    dist::ZeroRedundancyOptimizer wrong_shapes(t, adam);
    CHECK_THROWS_WITH(wrong_shapes.load_sharded(good_dir),
                      Catch::Contains("load_sharded") &&
                          Catch::Contains("the first difference is parameter 2: float64(8, 1) in the file, "
                                          "float64(8, 2) here"));
  }
  const auto shard = [&](const std::string& d, int k) {
    return (std::filesystem::path(d) / ("zero-shard-" + std::to_string(k) + ".safetensors")).string();
  };
  if (n == 2) {  // a shard of another save: rank 1 finds it, rank 0 learns that rank 1 failed
    if (r == 0)
      std::filesystem::copy_file(shard(other_dir, 1), shard(good_dir, 1),
                                 std::filesystem::copy_options::overwrite_existing);
    dist::barrier();
    CHECK_THROWS_WITH(zero.load_sharded(good_dir),
                      Catch::Contains("load_sharded") &&
                          (r == 1 ? Catch::Contains("belongs to another save") : Catch::Contains("rank 1 failed")));
    zero.save_sharded(good_dir);
  }
  if (r == 0) std::ofstream(shard(other_dir, n - 1), std::ios::trunc) << "not a safetensors file";
  dist::barrier();
  CHECK_THROWS_WITH(zero.load_sharded(other_dir),
                    Catch::Contains("load_sharded") &&
                        (r == n - 1 ? Catch::Contains(shard(other_dir, n - 1)) : Catch::Contains("failed")));
  if (r == 0) nn::save_state(shard(other_dir, 0), good);
  dist::barrier();
  CHECK_THROWS_WITH(zero.load_sharded(other_dir),
                    Catch::Contains("load_sharded") && Catch::Contains("is not a ZeroRedundancyOptimizer shard"));
  // nothing changed: the state is the one before the failed loads, and the good shards still load
  zero.load_sharded(good_dir);
  zero.consolidate_state_dict(0);
  if (r == 0) check_same_state(zero.state_dict(), before, 0.0);
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

TEST_CASE(
    "Join with ZeroRedundancyOptimizer: ranks with fewer batches shadow ZeRO's steps, as one process on the "
    "training ranks' data",
    "[distributed]") {
  // Issue 53: rank r trains max(1, 4 - 2r) steps (4 and 2 on 2 ranks); step s of the one-process
  // reference minimises (sum over the ranks still training at s of their mean losses) / W.
  const int n = dist::world_size(), r = dist::rank();
  const auto steps_of = [](int rank) { return std::max(1, 4 - 2 * rank); };
  const auto batch = [](int step, int rank) {
    Generator g(2000 + 10 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(rank));
    return std::pair<Tensor, Tensor>{Tensor::randn({4, 4}, g, kFloat64), Tensor::randn({4, 1}, g, kFloat64)};
  };
  for (const auto& [kind, make] : zero_kinds()) {
    SECTION(kind) {
      const std::vector<Tensor> p = values(make_mlp(7));
      dist::ZeroRedundancyOptimizer zero(p, make);
      {
        dist::Join join(zero);
        CHECK_THROWS_WITH(dist::Join(zero), Catch::Contains("already has a Join"));
        for (int s = 0; s < steps_of(r); ++s) {
          zero.zero_grad();
          const auto [x, y] = batch(s, r);
          mlp_loss(p, x, y).backward();
          zero.step();
        }
        join.finish();
      }
      const std::vector<Tensor> q = values(make_mlp(7));
      const std::unique_ptr<nn::Optimizer> ref = make(q);
      for (int s = 0; s < steps_of(0); ++s) {
        ref->zero_grad();
        Tensor loss = Tensor::zeros({}, kFloat64);
        for (int k = 0; k < n; ++k)
          if (s < steps_of(k)) {
            const auto [x, y] = batch(s, k);
            loss = add(loss, mul(mlp_loss(q, x, y), 1.0 / n));
          }
        loss.backward();
        ref->step();
      }
      INFO(kind << ", rank " << r);
      for (std::size_t i = 0; i < p.size(); ++i) {
        CHECK(max_abs_diff(p[i], q[i]) < 1e-12);
        CHECK(same_on_all_ranks(p[i]));
      }
      // every share's state went through every step: the consolidated state is the reference's
      zero.consolidate_state_dict(0);
      if (r == 0) check_same_state(zero.state_dict(), ref->state_dict(), 1e-12);
      // without a Join, the optimizer goes on as before
      zero.zero_grad();
      const auto [x, y] = batch(9, r);
      mlp_loss(p, x, y).backward();
      zero.step();
    }
  }
}

TEST_CASE(
    "SyncBatchNorm and ZeroRedundancyOptimizer: ranks built with other options all throw, naming the option "
    "and both values",
    "[distributed]") {
  const int r = dist::rank(), n = dist::world_size();
  if (n < 2) return;
  const Tensor x = Tensor::randn({4, 3}, kFloat64);
  dist::SyncBatchNorm bn(3, r == 1 ? 1e-3 : 1e-5, 0.1, true, true, kFloat64);
  CHECK_THROWS_WITH(bn.forward(x), Catch::Contains("SyncBatchNorm::forward: the ranks' layers differ in eps: rank 0 "
                                                   "has 1e-05, rank 1 has 0.001"));
  dist::SyncBatchNorm cumulative(3, 1e-5, r == 1 ? std::optional<double>() : 0.1, true, true, kFloat64);
  CHECK_THROWS_WITH(cumulative.forward(x),
                    Catch::Contains("differ in momentum: rank 0 has 0.1, rank 1 has unset (cumulative average)"));
  dist::SyncBatchNorm same(3, 1e-5, 0.1, true, true, kFloat64);
  CHECK(same.forward(x).shape() == x.shape());
  const std::vector<Tensor> p = values(make_mlp(5));
  CHECK_THROWS_WITH(
      dist::ZeroRedundancyOptimizer(
          p,
          [r](std::vector<Tensor> s) {
            return std::make_unique<nn::Adam>(s, nn::AdamOptions(0.05).betas({r == 1 ? 0.8 : 0.9, 0.999}));
          }),
      Catch::Contains("ZeroRedundancyOptimizer: the ranks' wrapped optimizers differ") &&
          Catch::Contains("rank 0 has '0.beta1=0.9', rank 1 has '0.beta1=0.8'"));
}

TEST_CASE("a rank waiting for a slow peer sleeps instead of polling, and the timeout is configurable",
          "[distributed]") {
  // Note [Waiting in collectives]: after 20 ms a waiting rank sleeps between progress tests.
  const int r = dist::rank();
  CHECK(std::string(std::getenv("OMPI_MCA_mpi_yield_when_idle") ? std::getenv("OMPI_MCA_mpi_yield_when_idle") : "") ==
        "1");
  const auto before = dist::timeout();
  CHECK(before.count() > 0);
  dist::set_timeout(std::chrono::seconds(42));
  CHECK(dist::timeout() == std::chrono::milliseconds(42000));
  dist::set_timeout(before);
  CHECK_THROWS_WITH(dist::set_timeout(std::chrono::milliseconds(0)),
                    Catch::Contains("set_timeout") && Catch::Contains("must be positive"));
  if (dist::world_size() < 2) return;
  dist::barrier();
  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  rusage u0{}, u1{};
  getrusage(RUSAGE_THREAD, &u0);
  const auto t0 = std::chrono::steady_clock::now();
  dist::barrier();  // rank 0 waits about 1.5 s here
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_THREAD, &u1);
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  const double cpu = secs(u1.ru_utime) - secs(u0.ru_utime) + secs(u1.ru_stime) - secs(u0.ru_stime);
  if (r == 0) {
    INFO("rank 0 waited " << wall << " s using " << cpu << " s of CPU");
    CHECK(wall > 1.0);
    CHECK(cpu < 0.5 * wall);  // polling would use about the whole wait
  }
}

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  // Ranks other than 0 report failures only, so the log is readable.
  const int failed = xgrad::test::run_catch_session(argc, argv, dist::rank() != 0 ? "compact" : nullptr);
  // Every rank's verdict: mpirun exits non-zero if any rank returns non-zero.
  return failed == 0 ? 0 : 1;
}
