// A 2-rank job in which rank 1 stalls in the middle of a collective's transfer: after 20 ms, counted from when both
// ranks left a barrier and entered the collective, a thread of rank 1 stops its own process
// (SIGSTOP), as a frozen host or a debugger would. Run by expect_job_failure.sh, which requires mpirun
// to exit non-zero within a limit, with rank 0's message naming itself, the collective and the call.
//
//   fault_drill SETUP
//
// SETUP is the collective rank 1 stalls in: ddp_overlap, ddp_no_overlap, ddp_reduce_broadcast
// (DistributedDataParallel::average_gradients with those options), zero (ZeroRedundancyOptimizer::
// step), all_reduce_sum, broadcast (from rank 1, which stops after 2 ms). The tensor is large (64 MB),
// so that after 20 ms the transfer is still under way. Both ranks set the collective timeout to 2 s for the stalled
// step (a generous timeout before it: on a loaded host the first step's transfers may take longer than 2 s).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/zero.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

namespace {
constexpr std::int64_t kElements = std::int64_t{8} << 20;  // float64: 64 MB

// On rank 1: stop this process after `ms` milliseconds.
std::thread stall_soon(int ms) {
  return std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::fprintf(stderr, "rank 1: failing on purpose (SIGSTOP in the collective)\n");
    std::fflush(stderr);
    kill(getpid(), SIGSTOP);
  });
}
}  // namespace

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  const std::string setup = argc > 1 ? argv[1] : "ddp_no_overlap";
  dist::set_timeout(std::chrono::seconds(120));
  Tensor w = Tensor::ones({kElements}, kFloat64);
  w.set_requires_grad();
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
  if (setup.rfind("ddp_", 0) == 0) {
    dist::DdpOptions o;
    o.overlap = setup == "ddp_overlap";
    if (setup == "ddp_reduce_broadcast") o.mode = dist::ReduceMode::reduce_broadcast;
    ddp = std::make_unique<dist::DistributedDataParallel>(std::vector<Tensor>{w}, o);
  } else if (setup == "zero") {
    zero = std::make_unique<dist::ZeroRedundancyOptimizer>(std::vector<Tensor>{w}, [](std::vector<Tensor> s) {
      return std::make_unique<nn::Adam>(s, nn::AdamOptions(1e-3));
    });
  } else if (setup != "all_reduce_sum" && setup != "broadcast") {
    std::fprintf(stderr, "fault_drill: unknown setup '%s'\n", setup.c_str());
    return 2;
  }
  // One complete step first, so that the stalled step is not the first of anything.
  // With overlap the ring runs during backward, so the barrier comes before it there.
  const bool sync_in_backward = setup == "ddp_overlap";
  for (int step = 0; step < 2; ++step) {
    if ((ddp || zero) && !sync_in_backward) sum(mul(w, w)).backward();
    dist::barrier();
    if (step == 1) dist::set_timeout(std::chrono::seconds(2));
    std::thread stall;
    // A broadcast's receiver may hold all of the data before the stall and leave, so there the stalled
    // rank 1 is the root, whose receiver cannot finish without it, and it stops sooner.
    if (step == 1 && dist::rank() == 1) stall = stall_soon(setup == "broadcast" ? 2 : 20);
    if (sync_in_backward) sum(mul(w, w)).backward();
    if (ddp)
      ddp->average_gradients();
    else if (zero)
      zero->step();
    else if (setup == "all_reduce_sum")
      (void)dist::all_reduce_sum(w.detach());
    else
      dist::broadcast_({w.detach()}, 1);
    if (stall.joinable()) stall.join();
    if (zero) zero->zero_grad();
  }
  std::fprintf(stderr, "rank %d: the stalled collective completed\n", dist::rank());
  return 0;
}
