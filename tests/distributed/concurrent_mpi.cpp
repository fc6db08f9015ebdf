// Is MPI ever entered by two threads at once? xgrad initialises MPI with MPI_THREAD_SERIALIZED, so
// it must not be (issue 53 item 2: SyncBatchNorm's all-reduces in backward ran while DDP's progress
// thread was inside MPI). This program interposes, through the MPI profiling interface (PMPI), every
// MPI function xgrad calls after init: each definition below counts the calls and the calls that
// began while another thread was inside MPI, then calls the real PMPI_ function. The library is a
// static archive, so its calls bind to these definitions when this program is linked.
//
//   concurrent_mpi STEPS
//
// trains STEPS steps of a model with a SyncBatchNorm between two linear layers under
// DistributedDataParallel with overlap (one bucket per parameter, so the progress thread runs rings
// while backward reaches SyncBatchNorm's all-reduces), and prints each rank's counts; it exits
// non-zero when any call overlapped another, or when no call was counted (an interposer that did not
// bind).
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include "xgrad/core/core.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/sync_batch_norm.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/ops/ops.hpp"

namespace {
std::atomic<int> g_inside{0};
std::atomic<long> g_calls{0}, g_overlaps{0};
struct Inside {
  Inside() {
    if (g_inside.fetch_add(1) > 0) g_overlaps.fetch_add(1);
    g_calls.fetch_add(1);
  }
  ~Inside() { g_inside.fetch_sub(1); }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;
};
}  // namespace

extern "C" {
int MPI_Test(MPI_Request* r, int* flag, MPI_Status* s) {
  Inside in;
  return PMPI_Test(r, flag, s);
}
int MPI_Testall(int n, MPI_Request r[], int* flag, MPI_Status s[]) {
  Inside in;
  return PMPI_Testall(n, r, flag, s);
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Isend(b, n, t, dest, tag, c, r);
}
int MPI_Irecv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Irecv(b, n, t, src, tag, c, r);
}
int MPI_Iallreduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Iallreduce(sb, rb, n, t, op, c, r);
}
int MPI_Ireduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Ireduce(sb, rb, n, t, op, root, c, r);
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Ibcast(b, n, t, root, c, r);
}
int MPI_Iallgather(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* r) {
  Inside in;
  return PMPI_Iallgather(sb, sn, st, rb, rn, rt, c, r);
}
int MPI_Iallgatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int rn[], const int displs[],
                    MPI_Datatype rt, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Iallgatherv(sb, sn, st, rb, rn, displs, rt, c, r);
}
int MPI_Igatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int rn[], const int displs[], MPI_Datatype rt,
                 int root, MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Igatherv(sb, sn, st, rb, rn, displs, rt, root, c, r);
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request* r) {
  Inside in;
  return PMPI_Ibarrier(c, r);
}
int MPI_Comm_idup(MPI_Comm c, MPI_Comm* out, MPI_Request* r) {
  Inside in;
  return PMPI_Comm_idup(c, out, r);
}
int MPI_Comm_free(MPI_Comm* c) {
  Inside in;
  return PMPI_Comm_free(c);
}
int MPI_Comm_rank(MPI_Comm c, int* r) {
  Inside in;
  return PMPI_Comm_rank(c, r);
}
int MPI_Comm_size(MPI_Comm c, int* n) {
  Inside in;
  return PMPI_Comm_size(c, n);
}
}

using namespace xgrad;
namespace dist = xgrad::distributed;

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  Generator gen(4);
  const std::int64_t in = 16, hidden = 64, out = 256, batch = 32;
  Tensor w1 = mul(Tensor::randn({in, hidden}, gen, kFloat64), 0.25).set_requires_grad();
  Tensor w2 = mul(Tensor::randn({hidden, out}, gen, kFloat64), 0.1).set_requires_grad();
  Tensor w3 = mul(Tensor::randn({out, out}, gen, kFloat64), 0.05).set_requires_grad();
  dist::SyncBatchNorm bn(hidden, 1e-5, 0.1, true, true, kFloat64);
  std::vector<Tensor> params{w1, bn.weight(), bn.bias(), w2, w3};
  dist::DdpOptions options;
  options.bucket_bytes = 1;  // a bucket per parameter: rings run while backward goes on
  dist::DistributedDataParallel ddp(params, options);
  nn::SGD opt(params, nn::SGDOptions(1e-3));
  Generator data(100 + static_cast<std::uint64_t>(dist::rank()));
  for (int step = 0; step < steps; ++step) {
    const Tensor x = Tensor::randn({batch, in}, data, kFloat64);
    opt.zero_grad();
    const Tensor h = tanh(bn.forward(matmul(x, w1)));
    mean(pow(matmul(tanh(matmul(h, w2)), w3), 2.0)).backward();
    ddp.average_gradients();
    opt.step();
  }
  const long calls = g_calls.load(), overlaps = g_overlaps.load();
  std::printf("rank %d: %ld MPI calls, %ld began while another thread was inside MPI\n", dist::rank(), calls, overlaps);
  std::fflush(stdout);
  return calls > 0 && overlaps == 0 ? 0 : 1;
}
