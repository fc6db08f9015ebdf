// Overlap of gradient averaging with backward (DistributedDataParallel with DdpOptions::overlap),
// on however many ranks mpirun starts (run_ddp_netns.sh runs it across two network namespaces joined
// by a rate-limited veth pair):
//
//   mpirun -np 2 build/<preset>/bench/ddp_overlap [reps] [batch]
//
// Model: an MLP 784-1024-...-1024-10 with ten hidden layers of 1024 (9.2M float32 parameters, 37 MB of
// gradients), a batch of `batch` rows per rank (default 128), 1 thread per rank. Per rep, after a barrier, each case
// times one training step without the optimizer (the slowest rank's time, median over reps):
//   compute     forward + backward, no averaging (DDP not involved)
//   allreduce   average_gradients() alone, the gradients already computed (overlap off)
//   serial      forward + backward, then average_gradients() (overlap off: today's path)
//   overlap     forward + backward with the overlapping DDP, then average_gradients()
//   overlap_compute_part  the forward + backward part of `overlap` (until backward returns)
//   iallreduce  that DDP's average_gradients() alone (no hook fired: its non-blocking all-reduces,
//               started and waited there)
// and prints hidden = (compute + allreduce - overlap) / allreduce (the share of the all-reduce that
// backward hid) and overlap / max(compute, allreduce). Rows `case,impl,threads,metric,value`
// (threads = ranks). Rank 0 prints.
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

namespace {
std::vector<Tensor> make_mlp(Generator& gen) {
  // 784-1024, eight 1024-1024 layers, 1024-10: the gradients become ready layer by layer, evenly
  // through backward, as in any deep network
  std::vector<std::int64_t> sizes{784};
  for (int l = 0; l < 9; ++l) sizes.push_back(1024);
  sizes.push_back(10);
  std::vector<Tensor> p;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    p.push_back(mul(Tensor::randn({sizes[l], sizes[l + 1]}, gen), 0.02).detach().set_requires_grad());
    p.push_back(Tensor::zeros({sizes[l + 1]}).set_requires_grad());
  }
  return p;
}

Tensor loss(const std::vector<Tensor>& p, const Tensor& x) {
  Tensor h = x;
  for (std::size_t l = 0; l + 2 < p.size(); l += 2) h = relu(add(matmul(h, p[l]), p[l + 1]));
  return mean(add(matmul(h, p[p.size() - 2]), p.back()));
}
}  // namespace

int main(int argc, char** argv) {
  dist::MpiContext mpi(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::int64_t batch = argc > 2 ? std::max(1, std::atoi(argv[2])) : 128;
  set_num_threads(1);
  const int ranks = dist::world_size();
  Generator gen(1 + static_cast<std::uint64_t>(dist::rank()));
  std::vector<Tensor> p = make_mlp(gen);
  const Tensor x = Tensor::randn({batch, 784}, gen);
  dist::DdpOptions serial_opts;
  serial_opts.overlap = false;
  serial_opts.broadcast_buffers = false;
  dist::DdpOptions overlap_opts = serial_opts;
  overlap_opts.overlap = true;
  std::vector<double> t_compute, t_allreduce, t_serial, t_overlap, t_iallreduce, t_overlap_compute;
  const auto timed = [](auto&& fn) {
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return dist::all_reduce_max(ms);
  };
  const auto zero = [&] {  // as Optimizer::zero_grad() does by default: in place, .grad kept
    for (Tensor& t : p)
      if (t.grad().defined()) t.grad().zero_();
  };
  {
    dist::DistributedDataParallel serial(p, serial_opts);
    for (int rep = 0; rep < reps + 1; ++rep) {
      zero();
      const double c = timed([&] { loss(p, x).backward(); });
      const double a = timed([&] { serial.average_gradients(); });
      zero();
      const double s = timed([&] {
        loss(p, x).backward();
        serial.average_gradients();
      });
      if (rep > 0) {
        t_compute.push_back(c);
        t_allreduce.push_back(a);
        t_serial.push_back(s);
      }
    }
  }
  {
    dist::DistributedDataParallel overlap(p, overlap_opts);
    for (int rep = 0; rep < reps + 2; ++rep) {  // the first round also rebuilds the buckets
      zero();
      double bwd_part = 0;
      const double o = timed([&] {
        const auto t0 = std::chrono::steady_clock::now();
        loss(p, x).backward();
        bwd_part = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        overlap.average_gradients();
      });
      bwd_part = dist::all_reduce_max(bwd_part);
      if (rep > 1) {
        t_overlap.push_back(o);
        t_overlap_compute.push_back(bwd_part);
      }
      // the non-blocking all-reduce alone (no hook fired: average_gradients starts and waits for all)
      loss(p, x).backward();
      overlap.average_gradients();  // (a round with backward, so the next is hook-free)
      const double ia = timed([&] { overlap.average_gradients(); });
      if (rep > 1) t_iallreduce.push_back(ia);
    }
  }
  const auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double c = med(t_compute), a = med(t_allreduce), s = med(t_serial), o = med(t_overlap);
  if (dist::rank() == 0) {
    const std::string tag = "ddp_step/mlp9M/batch=" + std::to_string(batch) + "/ranks=" + std::to_string(ranks);
    std::printf("case,impl,threads,metric,value\n");
    std::printf("%s,compute,%d,ms,%.3f\n", tag.c_str(), ranks, c);
    std::printf("%s,allreduce,%d,ms,%.3f\n", tag.c_str(), ranks, a);
    std::printf("%s,serial,%d,ms,%.3f\n", tag.c_str(), ranks, s);
    std::printf("%s,overlap,%d,ms,%.3f\n", tag.c_str(), ranks, o);
    std::printf("%s,iallreduce,%d,ms,%.3f\n", tag.c_str(), ranks, med(t_iallreduce));
    std::printf("%s,overlap_compute_part,%d,ms,%.3f\n", tag.c_str(), ranks, med(t_overlap_compute));
    std::printf("%s,overlap,%d,hidden_fraction,%.3f\n", tag.c_str(), ranks, (c + a - o) / a);
    std::printf("%s,overlap,%d,over_max,%.3f\n", tag.c_str(), ranks, o / std::max(c, a));
  }
  return 0;
}
