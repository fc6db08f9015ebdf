#pragma once
// Internal to the xgrad::distributed target: the waiting of distributed.cpp (Note [Waiting in
// collectives]) for its other files. Includes <mpi.h>; never include it from a public header.
#include <mpi.h>

#include <string>

namespace xgrad::distributed::detail {

/// Stops every DistributedDataParallel progress thread (Note [Progress thread] in distributed.cpp):
/// call before communicating from this thread.
void quiesce();
/// Completes the non-blocking collective `req`, aborting the job on the collective timeout or when
/// a rank that left main strands it; `what` names the collective in the message.
void wait_collective(MPI_Request& req, const std::string& what);
/// An MPI_Ibarrier completed by wait_collective: every rank has reached the collective `what`, so
/// the blocking transfers that follow cannot hang.
void arrive_collective(const std::string& what);

}  // namespace xgrad::distributed::detail
