// Gradient averaging time per training step (DistributedDataParallel::average_gradients) against the
// parameter count, on however many ranks mpirun starts:
//
//   mpirun -np 2 build/<preset>/bench/ddp_allreduce [reps]
//
// The model is 100 float32 parameters of equal size (total 1e3 .. 1e7 elements) with random gradients.
// impl: bucketed MPI_Allreduce with 4 MiB and 25 MiB buckets, reduce + broadcast (bit-identical by
// construction), and one call per parameter (bucket_bytes 1: no packing benefit) for contrast.
// Prints CSV rows `case,impl,threads,metric,value` (threads = ranks; metric ms = median over reps of
// the slowest rank's time, each rep starting after a barrier). Rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xgrad/distributed/distributed.hpp"
#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const int ranks = dist::world_size();
  if (dist::rank() == 0) std::printf("case,impl,threads,metric,value\n");
  struct Impl {
    const char* name;
    dist::DdpOptions options;
  };
  const std::vector<Impl> impls{{"allreduce_4MiB", {std::size_t{4} << 20, dist::ReduceMode::allreduce}},
                                {"allreduce_25MiB", {std::size_t{25} << 20, dist::ReduceMode::allreduce}},
                                {"reduce_bcast_4MiB", {std::size_t{4} << 20, dist::ReduceMode::reduce_broadcast}},
                                {"per_parameter", {1, dist::ReduceMode::allreduce}}};
  const int num_params = 100;
  for (std::int64_t total : {1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL}) {
    Generator gen(1);
    std::vector<Tensor> params;
    for (int i = 0; i < num_params; ++i) {
      Tensor p = Tensor::zeros({total / num_params});
      p.set_requires_grad();
      params.push_back(p);
    }
    for (const Impl& impl : impls) {
      dist::DistributedDataParallel ddp(params, impl.options);
      std::vector<double> times;
      for (int rep = 0; rep < reps + 1; ++rep) {
        for (Tensor& p : params) p.set_grad(Tensor::randn(p.shape(), gen));
        dist::barrier();
        const auto t0 = std::chrono::steady_clock::now();
        ddp.average_gradients();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const double slowest = dist::all_reduce_max(ms);  // a step is as slow as its slowest rank
        if (rep > 0) times.push_back(slowest);            // rep 0 warms up buffers and connections
      }
      std::sort(times.begin(), times.end());
      if (dist::rank() == 0)
        std::printf("ddp_average_gradients/params=%lld/ranks=%d,%s,%d,ms,%.4f\n", static_cast<long long>(total), ranks,
                    impl.name, ranks, times[times.size() / 2]);
      std::fflush(stdout);
    }
  }
  return 0;
}
