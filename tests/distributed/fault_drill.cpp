// The fault drill (issue 53): a 2-rank job in which rank 1 fails on purpose in the second step, while
// rank 0 enters a collective. Run by expect_job_failure.sh, which requires mpirun to exit non-zero
// within the collective timeout (2 s) + 5 s of the failure, with a message naming rank 0 (or both
// ranks) and the collective.
//
//   fault_drill SETUP [FAULT]
//
// SETUP is what the ranks run: ddp_overlap, ddp_no_overlap, ddp_reduce_broadcast
// (DistributedDataParallel::average_gradients with those options), zero (ZeroRedundancyOptimizer::
// step), sync_batch_norm (a SyncBatchNorm layer's forward and backward), all_reduce_sum, broadcast
// (from rank 1). FAULT (default stall) is how rank 1 fails:
//   stall             stops its own process (SIGSTOP), as a frozen host or a debugger would: with the
//                     tensor setups in the middle of the collective's transfer (a 64 MB tensor, stopped
//                     after 20 ms, counted from when both ranks left a barrier; the broadcast's root
//                     after 2 ms, since a receiver may otherwise hold all of the data before the stall), with
//                     sync_batch_norm (whose transfers are a few numbers) just before it
//   sigkill           kills itself (SIGKILL) before the collective
//   throw             throws an exception that escapes main (std::terminate)
//   catch_and_return  throws; main catches it, prints it and returns 1 (the MpiContext finalises)
//   return0           returns 0 from main early (the MpiContext finalises)
//   options           builds its DistributedDataParallel (bucket_bytes), ZeRO optimizer (learning rate) or
//                     SyncBatchNorm (eps) with other options than rank 0: every rank throws at
//                     construction (the first forward for SyncBatchNorm)
// Rank 1 prints "rank 1: failing on purpose (...)" first, the marker expect_job_failure.sh times from.
// Both ranks set the collective timeout to 2 s for the second step (a generous timeout before it: on a
// loaded host the first step's transfers may take longer than 2 s).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/sync_batch_norm.hpp"
#include "xgrad/distributed/zero.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/ops/ops.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

namespace {
void announce(const std::string& fault) {
  std::fprintf(stderr, "rank 1: failing on purpose (%s)\n", fault.c_str());
  std::fflush(stderr);
}

// On rank 1: stop this process after `ms` milliseconds.
std::thread stall_soon(int ms) {
  return std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    announce("SIGSTOP in the collective");
    kill(getpid(), SIGSTOP);
  });
}

bool known(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Runs the drill on this rank; the value main returns.
int drill(const std::string& setup, const std::string& fault) {
  const bool fails = dist::rank() == 1;
  const bool tensor_stall = fault == "stall" && setup != "sync_batch_norm";
  dist::set_timeout(std::chrono::seconds(120));
  Tensor w = Tensor::ones({tensor_stall ? std::int64_t{8} << 20 : 1000}, kFloat64);  // float64: 64 MB to stall in
  w.set_requires_grad();
  const bool differ = fault == "options" && fails;
  if (differ) announce("options differ");
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
  std::shared_ptr<dist::SyncBatchNorm> bn;
  if (setup.rfind("ddp_", 0) == 0) {
    dist::DdpOptions o;
    o.overlap = setup == "ddp_overlap";
    if (setup == "ddp_reduce_broadcast") o.mode = dist::ReduceMode::reduce_broadcast;
    if (differ) o.bucket_bytes = 1024;
    ddp = std::make_unique<dist::DistributedDataParallel>(std::vector<Tensor>{w}, o);
  } else if (setup == "zero") {
    const double lr = differ ? 2e-3 : 1e-3;
    zero = std::make_unique<dist::ZeroRedundancyOptimizer>(std::vector<Tensor>{w}, [lr](std::vector<Tensor> s) {
      return std::make_unique<nn::Adam>(s, nn::AdamOptions(lr));
    });
  } else if (setup == "sync_batch_norm") {
    bn = std::make_shared<dist::SyncBatchNorm>(4, differ ? 1e-3 : 1e-5, 0.1, true, true, kFloat64);
  }
  const Tensor x = bn ? reshape(w, {250, 4}) : Tensor();
  const auto backward = [&] {
    if (bn)
      sum(mul(bn->forward(x), x)).backward();  // forward and backward are both collective
    else
      sum(mul(w, w)).backward();
  };
  // One complete step first, so that the failing step is not the first of anything. With overlap the
  // ring runs during backward, and with SyncBatchNorm forward and backward communicate, so the
  // barrier comes before them there.
  const bool sync_in_backward = setup == "ddp_overlap" || bn;
  for (int step = 0; step < 2; ++step) {
    if ((ddp || zero) && !sync_in_backward) backward();
    dist::barrier();
    std::thread stall;
    if (step == 1) {
      dist::set_timeout(std::chrono::seconds(2));
      if (fails) {
        if (tensor_stall) {
          stall = stall_soon(setup == "broadcast" ? 2 : 20);
        } else if (fault == "stall") {
          announce("SIGSTOP before the collective");
          kill(getpid(), SIGSTOP);
        } else if (fault != "options") {
          announce(fault);
          if (fault == "sigkill") std::raise(SIGKILL);
          if (fault == "return0") return 0;
          throw std::runtime_error("rank 1 failed on purpose");  // throw, catch_and_return
        }
      }
    }
    if (sync_in_backward) backward();
    if (ddp)
      ddp->average_gradients();
    else if (zero)
      zero->step();
    else if (setup == "all_reduce_sum")
      (void)dist::all_reduce_sum(w.detach());
    else if (setup == "broadcast")
      dist::broadcast_({w.detach()}, 1);
    if (stall.joinable()) stall.join();
    w.zero_grad();
  }
  std::fprintf(stderr, "rank %d: the failing step completed\n", dist::rank());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  const std::string setup = argc > 1 ? argv[1] : "ddp_no_overlap", fault = argc > 2 ? argv[2] : "stall";
  const bool tensors_only = setup == "all_reduce_sum" || setup == "broadcast";
  if (!known(setup, {"ddp_overlap", "ddp_no_overlap", "ddp_reduce_broadcast", "zero", "sync_batch_norm",
                     "all_reduce_sum", "broadcast"}) ||
      !known(fault, {"stall", "sigkill", "throw", "catch_and_return", "return0", "options"}) ||
      (tensors_only && fault == "options")) {
    std::fprintf(stderr, "fault_drill: unknown setup '%s' or fault '%s'\n", setup.c_str(), fault.c_str());
    return 2;
  }
  if (fault == "catch_and_return") {
    try {
      return drill(setup, fault);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d caught: %s\n", dist::rank(), e.what());
      return 1;  // the MpiContext finalises normally
    }
  }
  return drill(setup, fault);
}
