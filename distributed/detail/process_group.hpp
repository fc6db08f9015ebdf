#pragma once
// Internal to the xgrad::distributed target: what its files share to enter and complete collectives.
// The waiting is process_group.cpp's (Note [Waiting in collectives]), the progress threads are
// data_parallel.cpp's (Note [Progress thread]). Includes <mpi.h>: never include it from a public
// header (detail/ is not installed).
#include <mpi.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "xgrad/core/dtype.hpp"

namespace xgrad::distributed::detail {

/// Every public function that communicates starts here: throws xgrad::Error naming `fn` when MPI is
/// not initialised, then stops the progress threads (quiesce).
void require_mpi(const char* fn);
/// Stops every DistributedDataParallel progress thread (Note [Progress thread] in data_parallel.cpp):
/// call before communicating from this thread.
void quiesce();
/// Note [One thread in MPI]: MPI is initialised with MPI_THREAD_SERIALIZED, so no two threads may be
/// inside MPI at once; yet two of ours call it: the one that runs the training loop (collectives,
/// SyncBatchNorm's all-reduces in the middle of backward) and DistributedDataParallel's progress
/// thread (Note [Progress thread] in data_parallel.cpp), which moves the rings on while backward runs.
/// Every MPI call of xgrad::distributed except MPI_Abort (and the thread-safe MPI_Initialized,
/// MPI_Finalized, MPI_Query_thread, MPI_Is_thread_main) goes through mpi(), which holds this mutex for
/// the call: the two threads take turns, call by call, and both make progress. MPI_Abort takes no
/// lock: it must end the job whatever another thread does. tests/distributed/concurrent_mpi.cpp counts
/// overlapping calls through the profiling interface.
std::mutex& mpi_mutex();
template <class Fn, class... Args>
int mpi(Fn fn, Args... args) {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  return fn(args...);
}

using Clock = std::chrono::steady_clock;
/// Completes the non-blocking request `req` of a collective that started at `start` (the collective
/// timeout counts from there), aborting the job on the timeout or when a rank that left main strands
/// it; `what` names the rank's collective, its call and the MPI call in the message.
void wait_collective(MPI_Request& req, const std::string& what, Clock::time_point start = Clock::now());
/// The same for several requests (MPI_Testall).
void wait_collective(std::vector<MPI_Request>& reqs, const std::string& what, Clock::time_point start = Clock::now());
/// Waits, napping, until every rank has reached the collective `what` (an MPI_Ibarrier), before its
/// bulk transfers (Note [Waiting in collectives]).
void arrive_collective(const std::string& what, Clock::time_point start = Clock::now());
/// wait_collective for bulk transfers, after arrive_collective: tests in a sched_yield loop to the
/// end (no naps, which throttle a transfer), with the same timeout and stranded-rank rules.
void wait_transfer(MPI_Request& req, const std::string& what, Clock::time_point start);
void wait_transfer(std::vector<MPI_Request>& reqs, const std::string& what, Clock::time_point start);
/// Calls `done` (which makes progress and returns true when the collective is complete) until it
/// returns true, with wait_collective's timeout, stranded-rank and sleeping rules.
void wait_until(const std::function<bool()>& done, const std::string& what, Clock::time_point start = Clock::now());

/// MPI_COMM_WORLD's size and this rank, read once: no MPI call, so any thread may ask.
int world_size_raw();
int rank_raw();
/// The thread level MPI granted at init (MPI_THREAD_SERIALIZED asked).
int thread_level();

/// The MPI type of a float32 or float64 element.
inline MPI_Datatype mpi_type(Dtype d) { return d == kFloat32 ? MPI_FLOAT : MPI_DOUBLE; }

}  // namespace xgrad::distributed::detail
