// A 2-rank job where rank 1 fails while rank 0 waits in a collective (average_gradients). Run by
// expect_job_failure.sh, which requires mpirun to exit non-zero within a timeout (no hang).
// Modes: throw_uncaught (std::terminate), throw_through_context (the exception unwinds the
// MpiContext, which aborts the job), exit_without_finalize (std::exit(3) with MPI still initialised),
// catch_and_return (the MpiContext is declared above the try; rank 1 catches its error, prints it and
// returns 1: its context finalises normally and tells rank 0, which aborts), sigkill (rank 1 kills
// itself), stuck (rank 1 sleeps 60 s without leaving; rank 0's collective timeout of 2 s aborts),
// stuck_at_exit (the same, but rank 0 returns from main: its finalize, which waits for every rank to
// leave, aborts at the timeout).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "xgrad/distributed/distributed.hpp"

using namespace xgrad;

namespace {
void run(const std::string& mode) {
  Tensor w = Tensor::ones({1000}, kFloat64);
  w.set_requires_grad();
  distributed::DistributedDataParallel ddp(std::vector<Tensor>{w});
  if (distributed::rank() == 1) {
    std::fprintf(stderr, "rank 1: failing on purpose (%s)\n", mode.c_str());
    std::fflush(stderr);
    if (mode == "exit_without_finalize") std::exit(3);
    if (mode == "sigkill") std::raise(SIGKILL);
    if (mode == "stuck" || mode == "stuck_at_exit") {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return;
    }
    throw std::runtime_error("rank 1 failed on purpose");
  }
  if (mode == "stuck" || mode == "stuck_at_exit") distributed::set_timeout(std::chrono::seconds(2));
  if (mode == "stuck_at_exit") return;  // main returns: the MpiContext finalises
  ddp.average_gradients();              // rank 0 blocks here: rank 1 never joins
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "throw_uncaught";
  if (mode == "throw_through_context") {
    try {
      distributed::MpiContext mpi(argc, argv);
      run(mode);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "caught: %s\n", e.what());  // not reached on rank 1: the context aborted
      return 1;
    }
    return 0;
  }
  distributed::MpiContext mpi(argc, argv);
  if (mode == "catch_and_return") {
    try {
      run(mode);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d caught: %s\n", distributed::rank(), e.what());
      return 1;  // the MpiContext finalises normally
    }
    return 0;
  }
  run(mode);
  return 0;
}
