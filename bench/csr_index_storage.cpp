// Does where a CSR pattern's indices live change spmm's speed? The pattern keeps them in int64
// tensors (xgrad's storage allocator, Note [Pattern tensors] in ops/sparse.hpp); before issue 50
// they were std::vectors. This runs the same spmm kernel on the R-MAT graph of bench/sparse_ops.cpp
// over the pattern's tensors and over std::vector copies of them, and the public spmm, interleaved
// in one process on the same X and Y, and prints each path's median.
//   csr_index_storage_bench [threads=1] [F=256] [scale=17] [reps=21]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "gcn_graph.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/kernels/sparse_kernels.hpp"
#include "xgrad/ops/sparse.hpp"

int main(int argc, char** argv) {
  using namespace xgrad;  // NOLINT(google-build-using-namespace)
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const std::int64_t f = argc > 2 ? std::atoll(argv[2]) : 256;
  const int scale = argc > 3 ? std::atoi(argv[3]) : 17;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 21;
  set_num_threads(threads);
  const auto g = bench::rmat_edges(scale);
  const std::int64_t n = std::int64_t{1} << scale;
  const auto e = static_cast<std::int64_t>(g.dst.size());
  std::vector<std::int64_t> idx(g.dst);
  idx.insert(idx.end(), g.src.begin(), g.src.end());
  const SparseCsr a = sparse_coo_tensor(Tensor::from_data(std::span<const std::int64_t>(idx), {2, e}),
                                        Tensor::from_data(std::span<const float>(g.weight), {e}), {n, n});
  Generator gen(1);
  const Tensor x = Tensor::randn({n, f}, gen);
  Tensor y = Tensor::empty({n, f});
  const std::vector<std::int64_t> crow(a.pattern().crow().begin(), a.pattern().crow().end());
  const std::vector<std::int64_t> col(a.pattern().col().begin(), a.pattern().col().end());
  const auto ms = [](auto fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> tensors, vectors, public_spmm;
  NoGradGuard no_grad;
  for (int r = 0; r < reps; ++r) {
    tensors.push_back(ms([&] {
      detail::csr_spmm<float>(n, a.pattern().crow().data(), a.pattern().col().data(), a.values().data<float>(),
                              x.data<float>(), f, y.data<float>());
    }));
    vectors.push_back(ms([&] {
      detail::csr_spmm<float>(n, crow.data(), col.data(), a.values().data<float>(), x.data<float>(), f,
                              y.data<float>());
    }));
    public_spmm.push_back(ms([&] { (void)spmm(a, x); }));
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("threads,F,nnz,tensors_ms,vectors_ms,public_spmm_ms,tensors/vectors\n%d,%lld,%lld,%.3f,%.3f,%.3f,%.3f\n",
              threads, static_cast<long long>(f), static_cast<long long>(a.nnz()), median(tensors), median(vectors),
              median(public_spmm), median(tensors) / median(vectors));
}
