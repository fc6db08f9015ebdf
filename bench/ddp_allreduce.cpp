// Gradient averaging time per training step (DistributedDataParallel::average_gradients) against the
// parameter count, on however many ranks mpirun starts:
//
//   mpirun -np 2 build/<preset>/bench/ddp_allreduce [reps]
//
// The model is 100 float32 parameters of equal size (total 1e3 .. 1e7 elements) with random gradients.
// impl: bucketed MPI_Allreduce with 4 MiB and 25 MiB buckets, reduce + broadcast (bit-identical by
// construction), and one call per parameter (bucket_bytes 1: no packing benefit) for contrast.
// Prints CSV rows `case,impl,threads,metric,value` (threads = ranks; metric ms = median over reps of
// the slowest rank's time, each rep starting after a barrier). Rank 0 prints. Last, ZeRO stage 1
// (ZeroRedundancyOptimizer) against DDP + the unsharded Adam: state bytes per rank and step time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xgrad/distributed/distributed.hpp"
#include "xgrad/distributed/zero.hpp"
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

  // ZeRO stage 1 against DDP + the unsharded optimizer: an MLP 784-2048-2048-10 (5.8M parameters)
  // trained by Adam; per rank, the optimizer-state bytes (the largest rank's) and the time of the
  // gradient sync + step (median over reps of the slowest rank).
  {
    Generator gen(2);
    const std::vector<std::int64_t> sizes{784, 2048, 2048, 10};
    const auto make_params = [&] {
      std::vector<Tensor> p;
      for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
        p.push_back(Tensor::randn({sizes[l], sizes[l + 1]}, gen).set_requires_grad());
        p.push_back(Tensor::zeros({sizes[l + 1]}).set_requires_grad());
      }
      return p;
    };
    const auto adam = [](std::vector<Tensor> p) { return std::make_unique<nn::Adam>(p, nn::AdamOptions(1e-3)); };
    std::vector<Tensor> pa = make_params(), pb = make_params();
    dist::DistributedDataParallel ddp(pa);
    const auto plain = adam(pa);
    dist::ZeroRedundancyOptimizer zero(pb, adam);
    std::vector<double> t_plain, t_zero;
    for (int rep = 0; rep < reps + 1; ++rep) {
      for (Tensor& p : pa) p.set_grad(Tensor::randn(p.shape(), gen));
      for (Tensor& p : pb) p.set_grad(Tensor::randn(p.shape(), gen));
      dist::barrier();
      auto t0 = std::chrono::steady_clock::now();
      ddp.average_gradients();
      plain->step();
      const double a = dist::all_reduce_max(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      dist::barrier();
      t0 = std::chrono::steady_clock::now();
      zero.step();
      const double b = dist::all_reduce_max(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (rep > 0) {
        t_plain.push_back(a);
        t_zero.push_back(b);
      }
    }
    std::sort(t_plain.begin(), t_plain.end());
    std::sort(t_zero.begin(), t_zero.end());
    std::size_t full = 0;
    for (const auto& entry : plain->state_dict())
      if (entry.first.rfind("state.", 0) == 0) full += entry.second.nbytes();
    const double largest = dist::all_reduce_max(static_cast<double>(zero.local_state_bytes()));
    if (dist::rank() == 0) {
      std::printf("adam_state_bytes/mlp5.8M/ranks=%d,unsharded,%d,bytes,%zu\n", ranks, ranks, full);
      std::printf("adam_state_bytes/mlp5.8M/ranks=%d,zero1_largest_rank,%d,bytes,%.0f\n", ranks, ranks, largest);
      std::printf("adam_sync_step/mlp5.8M/ranks=%d,ddp_plus_adam,%d,ms,%.4f\n", ranks, ranks,
                  t_plain[t_plain.size() / 2]);
      std::printf("adam_sync_step/mlp5.8M/ranks=%d,zero1_adam,%d,ms,%.4f\n", ranks, ranks, t_zero[t_zero.size() / 2]);
    }
  }
  return 0;
}
