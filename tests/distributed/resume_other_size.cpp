// Checkpoint at one world size, resume at another (issue 38 item 7). run_resume_other_size.sh runs
// this program under mpirun at 1 and 2 ranks and compares the parameters it writes:
//
//   resume_other_size FROM TO CKPT_IN CKPT_OUT
//
// trains steps [FROM, TO) of SGD with momentum on a fixed synthetic regression task with a global
// batch of kGlobal samples (kGlobal / world_size per rank, DistributedSampler: the global batch k of
// an epoch is positions [k kGlobal, (k + 1) kGlobal) of the epoch's permutation, whatever the number of
// ranks, because rank r takes positions r, r + W, r + 2 W, ...), averaging gradients with
// DistributedDataParallel. It starts from CKPT_IN (parameters, optimizer state and the step; "-"
// for a fresh start from seed 1) and writes CKPT_OUT on rank 0.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

namespace {
constexpr std::size_t kSamples = 48, kGlobal = 8;  // 6 steps per epoch
constexpr std::uint64_t kSamplerSeed = 5;
}  // namespace

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  if (argc != 5) {
    std::fprintf(stderr, "usage: resume_other_size FROM TO CKPT_IN CKPT_OUT\n");
    return 2;
  }
  const long from = std::atol(argv[1]), to = std::atol(argv[2]);
  const std::string in = argv[3], out = argv[4];
  const int w = dist::world_size(), r = dist::rank();
  XGRAD_CHECK(kGlobal % static_cast<std::size_t>(w) == 0, "the global batch {} is not divisible by {} ranks", kGlobal,
              w);

  Generator data_gen(3);
  const Tensor xs = Tensor::randn({static_cast<std::int64_t>(kSamples), 4}, data_gen, kFloat64);
  const Tensor ys = Tensor::randn({static_cast<std::int64_t>(kSamples), 1}, data_gen, kFloat64);
  Generator gen(1);
  std::vector<Tensor> p{Tensor::randn({4, 8}, gen, kFloat64), Tensor::randn({8}, gen, kFloat64),
                        Tensor::randn({8, 1}, gen, kFloat64), Tensor::randn({1}, gen, kFloat64)};
  for (Tensor& t : p) t.set_requires_grad();
  nn::SGD opt(p, nn::SGDOptions(0.05).momentum(0.9));

  if (in != "-") {  // every rank reads the checkpoint (a shared file system, or the same host)
    const nn::NamedTensors state = nn::load_state(in);
    nn::NamedTensors opt_state;
    for (const auto& [name, t] : state) {
      if (name.rfind("param.", 0) == 0) {
        NoGradGuard g;
        p[static_cast<std::size_t>(std::stol(name.substr(6)))].copy_(t);
      } else if (name.rfind("optim.", 0) == 0) {
        opt_state.emplace_back(name.substr(6), t);
      } else if (name == "step") {
        XGRAD_CHECK(t.item<std::int64_t>() == from, "checkpoint {} is at step {}, not {}", in, t.item<std::int64_t>(),
                    from);
      }
    }
    opt.load_state_dict(opt_state);
  }
  dist::DistributedDataParallel ddp(p);
  nn::DistributedSampler sampler(kSamples, static_cast<std::size_t>(w), static_cast<std::size_t>(r), true,
                                 kSamplerSeed);
  const std::size_t per_rank = kGlobal / static_cast<std::size_t>(w), steps_per_epoch = kSamples / kGlobal;
  for (long step = from; step < to; ++step) {
    sampler.set_epoch(static_cast<std::uint64_t>(step) / steps_per_epoch);
    const std::vector<std::size_t> mine = sampler.indices();
    const std::size_t k = static_cast<std::size_t>(step) % steps_per_epoch;
    std::vector<std::int64_t> idx(mine.begin() + static_cast<std::ptrdiff_t>(k * per_rank),
                                  mine.begin() + static_cast<std::ptrdiff_t>((k + 1) * per_rank));
    const Tensor rows = Tensor::from_vector(idx, {static_cast<std::int64_t>(per_rank)});
    const Tensor x = index_select(xs, 0, rows), y = index_select(ys, 0, rows);
    opt.zero_grad();
    const Tensor h = tanh(add(matmul(x, p[0]), p[1]));
    const Tensor d = sub(add(matmul(h, p[2]), p[3]), y);
    mean(mul(d, d)).backward();  // the mean over this rank's share: the average over ranks is the global mean
    ddp.average_gradients();
    opt.step();
  }
  dist::save_on_rank0([&] {
    nn::NamedTensors state;
    for (std::size_t i = 0; i < p.size(); ++i) state.emplace_back("param." + std::to_string(i), p[i].detach());
    for (const auto& [name, t] : opt.state_dict()) state.emplace_back("optim." + name, t);
    state.emplace_back("step", Tensor::full({}, static_cast<double>(to), kInt64));
    nn::save_state(out, state, {{"world_size", std::to_string(w)}});
  });
  return 0;
}
