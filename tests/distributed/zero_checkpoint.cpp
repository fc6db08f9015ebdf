// ZeroRedundancyOptimizer checkpoints at one world size, resumed at another (issue 53).
// run_zero_checkpoint.sh runs this program under mpirun at 1 and 2 ranks and compares what it writes:
//
//   zero_checkpoint KIND FROM TO IN OUT
//
// trains steps [FROM, TO) of KIND (adam, sgd: SGD with momentum; adam-plain, sgd-plain: the plain
// nn optimizer on one process, no ZeRO, the reference) on a small regression model with a float32
// parameter between float64 ones (so the float32 and float64 flat vectors are both sharded, and a
// float64 matrix is split between 2 ranks). IN is "-" (a fresh start from seed 1), "full:DIR"
// (parameters and the consolidated state of DIR/full.safetensors, loaded with load_state_dict) or
// "sharded:DIR" (parameters from DIR/full.safetensors, state with load_sharded(DIR/shards)); with
// FROM = TO it only loads and saves again (the re-partitioning alone, e.g. at 3 ranks). The
// parameters are loaded after the optimizer is built (the ZeRO step starts from the parameters'
// values). OUT gets OUT/full.safetensors (rank 0: "param.<i>", "optim.<consolidated state>", "step",
// "loss", the last step's loss) and, for ZeRO, OUT/shards (save_sharded).
//
// Every rank trains on the same whole batch, so ZeRO's average of the ranks' gradients is exact
// ((g + g) / 2 = g): a run is bit for bit the plain optimizer's at any world size, and any difference
// after a resume comes from the checkpoint.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/zero.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/serialize.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  if (argc != 6) {
    std::fprintf(stderr, "usage: zero_checkpoint KIND FROM TO IN OUT\n");
    return 2;
  }
  const std::string kind = argv[1], in = argv[4], out = argv[5];
  const long from = std::atol(argv[2]), to = std::atol(argv[3]);
  const bool plain = kind.size() > 6 && kind.substr(kind.size() - 6) == "-plain";
  const bool adam = kind.rfind("adam", 0) == 0;
  XGRAD_CHECK(adam || kind.rfind("sgd", 0) == 0, "zero_checkpoint: unknown KIND '{}'", kind);
  XGRAD_CHECK(!plain || dist::world_size() == 1, "zero_checkpoint: {} runs on one rank", kind);

  Generator gen(1);
  std::vector<Tensor> p{Tensor::randn({5, 7}, gen, kFloat64), Tensor::randn({6}, gen, kFloat32),
                        Tensor::randn({7}, gen, kFloat64), Tensor::randn({7, 3}, gen, kFloat64),
                        Tensor::randn({3}, gen, kFloat64)};
  for (Tensor& t : p) t.set_requires_grad();
  const auto make = [adam](std::vector<Tensor> params) -> std::unique_ptr<nn::Optimizer> {
    if (adam) return std::make_unique<nn::Adam>(params, nn::AdamOptions(0.05));
    return std::make_unique<nn::SGD>(params, nn::SGDOptions(0.05).momentum(0.9));
  };
  std::unique_ptr<nn::Optimizer> single;
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
  if (plain)
    single = make(p);
  else
    zero = std::make_unique<dist::ZeroRedundancyOptimizer>(p, make);

  double last_loss = 0;
  if (in != "-") {
    const std::size_t colon = in.find(':');
    XGRAD_CHECK(colon != std::string::npos, "zero_checkpoint: IN must be -, full:DIR or sharded:DIR, got '{}'", in);
    const std::string mode = in.substr(0, colon), dir = in.substr(colon + 1);
    nn::NamedTensors opt_state;
    for (const auto& [name, t] : nn::load_state(dir + "/full.safetensors")) {
      if (name.rfind("param.", 0) == 0) {
        NoGradGuard g;
        p[static_cast<std::size_t>(std::stol(name.substr(6)))].copy_(t);
      } else if (name.rfind("optim.", 0) == 0) {
        opt_state.emplace_back(name.substr(6), t);
      } else if (name == "loss") {
        last_loss = t.item();  // what a run of no steps reports
      } else if (name == "step") {
        XGRAD_CHECK(t.item<std::int64_t>() == from, "checkpoint {} is at step {}, not {}", dir, t.item<std::int64_t>(),
                    from);
      }
    }
    if (mode == "full") {
      if (single)
        single->load_state_dict(opt_state);
      else
        zero->load_state_dict(opt_state);
    } else {
      XGRAD_CHECK(mode == "sharded" && zero, "zero_checkpoint: cannot load '{}' into {}", in, kind);
      zero->load_sharded(dir + "/shards");
    }
  }
  for (long step = from; step < to; ++step) {
    Generator data(100 + static_cast<std::uint64_t>(step));  // the same whole batch on every rank
    const Tensor x = Tensor::randn({8, 5}, data, kFloat64), y = Tensor::randn({8, 3}, data, kFloat64);
    const Tensor t32 = Tensor::randn({6}, data, kFloat32);
    if (single)
      single->zero_grad();
    else
      zero->zero_grad();
    const Tensor h = tanh(add(matmul(x, p[0]), p[2]));
    const Tensor d = sub(add(matmul(h, p[3]), p[4]), y);
    const Tensor loss = mean(mul(d, d));
    loss.backward();
    const Tensor e = sub(p[1], t32);
    mean(mul(e, e)).backward();
    last_loss = loss.item();
    if (single)
      single->step();
    else
      zero->step();
  }
  nn::NamedTensors opt_state;
  if (zero) {
    zero->save_sharded(out + "/shards");
    zero->consolidate_state_dict(0);
    if (dist::rank() == 0) opt_state = zero->state_dict();
  } else {
    opt_state = single->state_dict();
  }
  dist::save_on_rank0([&] {
    std::filesystem::create_directories(out);
    nn::NamedTensors state;
    for (std::size_t i = 0; i < p.size(); ++i) state.emplace_back("param." + std::to_string(i), p[i].detach());
    for (const auto& [name, t] : opt_state) state.emplace_back("optim." + name, t);
    state.emplace_back("step", Tensor::full({}, static_cast<double>(to), kInt64));
    state.emplace_back("loss", Tensor::scalar(last_loss, kFloat64));
    nn::save_state(out + "/full.safetensors", state);
  });
  return 0;
}
