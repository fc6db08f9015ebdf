// Data-parallel training with MPI: a 2-64-1 tanh MLP fits y = sin(x0) cos(x1) on 2048 samples. Every
// rank holds the whole model, trains on its share of each batch (DistributedSampler), and averages
// gradients after backward (DistributedDataParallel), so all ranks take identical steps.
//
//   mpirun -np 2 build/<preset>/examples/ddp_train --epochs 20
//   (as root, or more ranks than cores: add --allow-run-as-root --oversubscribe)
//
// Exits non-zero unless the loss fell tenfold, so it doubles as a test.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#if __has_include(<CLI/CLI.hpp>)
#include <CLI/CLI.hpp>
#define XGRAD_EXAMPLE_HAVE_CLI11 1
#endif

#include "xgrad/distributed/distributed.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

namespace {

struct Options {
  int epochs = 30;
  std::size_t batch = 64;  // global batch: each rank takes batch / world_size of it
  double lr = 0.01;
  std::int64_t hidden = 64;
  std::uint64_t seed = 0;
  std::string save;  // checkpoint path (safetensors), written by rank 0
};

// in -> hidden -> 1, tanh; parameters registered so named_parameters() and nn::save see them.
class Mlp : public nn::Module {
 public:
  Mlp(std::int64_t in, std::int64_t hidden, Generator& gen) : nn::Module("Mlp") {
    const double s1 = 1.0 / std::sqrt(static_cast<double>(in)), s2 = 1.0 / std::sqrt(static_cast<double>(hidden));
    w1_ = register_parameter("w1", Tensor::randn({in, hidden}, gen) * s1);
    b1_ = register_parameter("b1", Tensor::zeros({hidden}));
    w2_ = register_parameter("w2", Tensor::randn({hidden, 1}, gen) * s2);
    b2_ = register_parameter("b2", Tensor::zeros({1}));
  }
  Tensor forward(const Tensor& x) const { return matmul(tanh(matmul(x, w1_) + b1_), w2_) + b2_; }

 private:
  Tensor w1_, b1_, w2_, b2_;
};

bool parse(int argc, char** argv, Options& o, int& exit_code) {
#ifdef XGRAD_EXAMPLE_HAVE_CLI11
  CLI::App app{"Data-parallel MLP regression with MPI (run under mpirun)"};
  app.add_option("--epochs", o.epochs, "passes over the data")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch-size", o.batch, "global batch size (split across ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Adam learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--hidden", o.hidden, "hidden units")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the data, the initialisation and the shuffling")->capture_default_str();
  app.add_option("--save", o.save, "write the trained model here (safetensors, rank 0 only)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = dist::rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
    return false;
  }
#else
  (void)argc;
  (void)argv;
  (void)exit_code;
#endif
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);  // aborts the whole job if an exception escapes main's body
  Options opt;
  int exit_code = 0;
  if (!parse(argc, argv, opt, exit_code)) return exit_code;  // --help or a bad option: every rank stops
  const auto ranks = static_cast<std::size_t>(dist::world_size()), me = static_cast<std::size_t>(dist::rank());
  if (opt.batch % ranks != 0) {
    if (me == 0) std::fprintf(stderr, "--batch-size %zu is not divisible by %zu ranks\n", opt.batch, ranks);
    return 2;
  }

  // The same data on every rank (same seed); each rank reads only its share of it.
  Generator data_gen(opt.seed);
  const std::int64_t n = 2048;
  const Tensor x = Tensor::rand({n, 2}, data_gen) * 6.0 - 3.0;
  std::vector<double> yv(static_cast<std::size_t>(n));
  const auto xv = x.to_vector();
  for (std::size_t i = 0; i < yv.size(); ++i) yv[i] = std::sin(xv[2 * i]) * std::cos(xv[2 * i + 1]);
  auto dataset = std::make_shared<nn::TensorDataset>(x, Tensor::from_vector(yv, {n, 1}));

  // Ranks may initialise differently: DistributedDataParallel checks that the models match and
  // copies rank 0's values to the others.
  Generator init_gen(opt.seed + 1 + me);
  auto model = std::make_shared<Mlp>(2, opt.hidden, init_gen);
  dist::DistributedDataParallel ddp(model);
  nn::Adam optimizer(model->parameters(), nn::AdamOptions(opt.lr));

  auto sampler = std::make_shared<nn::DistributedSampler>(static_cast<std::size_t>(n), ranks, me,
                                                          /*shuffle=*/true, opt.seed);
  nn::DataLoader loader(dataset, nn::DataLoaderOptions(opt.batch / ranks), sampler);
  if (me == 0)
    std::printf("%zu ranks, %zu samples per rank, %zu steps per epoch\n", ranks, sampler->size(), loader.size());

  double first = 0, last = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    sampler->set_epoch(static_cast<std::uint64_t>(epoch));  // same epoch on every rank: a new split
    double sum = 0;
    for (auto& batch : loader) {
      optimizer.zero_grad();
      Tensor loss = mean(pow(model->forward(batch.data) - batch.target, 2.0));
      loss.backward();
      ddp.average_gradients();  // gradient of the mean loss over the global batch, on every rank
      optimizer.step();
      sum += loss.item();
    }
    const double epoch_loss = dist::all_reduce_mean(sum / static_cast<double>(loader.size()));
    if (epoch == 0) first = epoch_loss;
    last = epoch_loss;
    if (me == 0 && (epoch % 5 == 0 || epoch == opt.epochs - 1))
      std::printf("epoch %3d  loss %.6f\n", epoch, epoch_loss);
  }
  if (!opt.save.empty()) {
    dist::save_on_rank0(*model, opt.save);
    if (me == 0) std::printf("saved %s\n", opt.save.c_str());
  }
  if (!(last < first / 10)) {
    if (me == 0)
      std::fprintf(stderr, "ddp_train: FAILED: the loss fell from %.6f to %.6f, not tenfold (try more --epochs)\n",
                   first, last);
    return 1;
  }
  return 0;
}
