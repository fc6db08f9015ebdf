// Kernels of block_sparse_linear: per-task single-threaded CBLAS GEMMs over strided views or gathered
// panels. See Note [Block-sparse parallelism] in block_sparse_linear.hpp.
#include "xgrad/ops/block_sparse_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "xgrad/core/parallel.hpp"

namespace xgrad::detail {
namespace {

// Batch rows per forward / input-gradient task and per weight-gradient accumulation step. Fixed, so
// the partition (and the summation order) never depends on the thread count.
constexpr std::int64_t kBatchTile = 256;
constexpr std::int64_t kWeightBatchChunk = 1024;
// A weight-gradient task gathers at most this many input columns of one row group (or one block).
constexpr std::int64_t kWeightPanelCols = 512;
// Below this many multiply-adds a call runs serially (tasks would cost more than they save).
constexpr double kSerialWork = 1 << 16;

// Note [OpenBLAS inside TBB tasks]: our tasks already use every allowed thread, so each GEMM must be
// single threaded; otherwise OpenBLAS's pthread pool would be asked for threads from inside TBB
// workers (oversubscription, and serialised calls). openblas_set_num_threads is process-wide, so the
// first kernel in sets it to 1 and the last one out restores it (counted under a mutex).
class BlasSingleThread {
 public:
  BlasSingleThread() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (depth_++ == 0) {
      saved_ = openblas_get_num_threads();
      if (saved_ != 1) openblas_set_num_threads(1);
    }
  }
  ~BlasSingleThread() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--depth_ == 0 && saved_ != 1) openblas_set_num_threads(saved_);
  }
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  static inline std::mutex mutex_;
  static inline int depth_ = 0;
  static inline int saved_ = 1;
};

// Row-major C (m x n) = alpha op(A) op(B) + beta C.
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
          const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

template <class T>
std::unique_ptr<T[]> buffer(std::int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<std::size_t>(std::max<std::int64_t>(n, 1))]);
}

// Runs task(t) for t in [0, n): in parallel when the call has enough work.
template <class Fn>
void run_tasks(std::int64_t n, double work, Fn&& task) {
  const std::int64_t grain = work < kSerialWork ? std::max<std::int64_t>(n, 1) : 1;
  parallel_for(0, n, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) task(t);
  });
}

std::int64_t num_tiles(std::int64_t m) { return (m + kBatchTile - 1) / kBatchTile; }

}  // namespace

template <class T>
void bsl_forward(const BlockSparsePattern& p, const T* x, std::int64_t m, const T* w, const T* b, T* y) {
  const std::int64_t in = p.in_features(), out = p.out_features();
  const auto& blocks = p.blocks();
  const auto& groups = p.row_groups();
  const auto& ptr = p.row_ptr();
  const std::int64_t tiles = num_tiles(m), ngroups = static_cast<std::int64_t>(groups.size());
  BlasSingleThread blas_guard;
  run_tasks(tiles * ngroups, double(m) * double(p.stored_elements()), [&](std::int64_t t) {
    const std::int64_t r = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const std::int64_t row = groups[r].begin, rows = groups[r].size;
    T* yt = y + m0 * out + row;
    for (std::int64_t i = 0; i < mt; ++i) {
      T* yr = yt + i * out;
      if (b)
        std::memcpy(yr, b + row, sizeof(T) * rows);
      else
        std::fill(yr, yr + rows, T(0));
    }
    const std::int64_t k0 = ptr[r], k1 = ptr[r + 1];
    if (k1 == k0) return;
    const T* xt = x + m0 * in;
    if (k1 - k0 == 1) {
      const auto& bl = blocks[k0];
      gemm(false, true, mt, rows, bl.cols, xt + bl.col, in, w + bl.offset, bl.cols, T(1), yt, out);
      return;
    }
    // Several blocks: gather their input columns into one (mt x K) panel and their weights into one
    // (rows x K) panel, so a single GEMM runs with the long inner dimension K.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[k].cols;
    auto xg = buffer<T>(mt * kk);
    auto wg = buffer<T>(rows * kk);
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < mt; ++i) std::memcpy(&xg[i * kk + c], xt + i * in + bl.col, sizeof(T) * bl.cols);
      for (std::int64_t i = 0; i < rows; ++i)
        std::memcpy(&wg[i * kk + c], w + bl.offset + i * bl.cols, sizeof(T) * bl.cols);
      c += bl.cols;
    }
    gemm(false, true, mt, rows, kk, xg.get(), kk, wg.get(), kk, T(1), yt, out);
  });
}

template <class T>
void bsl_input_grad(const BlockSparsePattern& p, const T* g, std::int64_t m, const T* w, T* dx) {
  const std::int64_t in = p.in_features(), out = p.out_features();
  const auto& blocks = p.blocks();
  const auto& groups = p.col_groups();
  const auto& ptr = p.col_ptr();
  const auto& index = p.col_index();
  const std::int64_t tiles = num_tiles(m), ngroups = static_cast<std::int64_t>(groups.size());
  BlasSingleThread blas_guard;
  run_tasks(tiles * ngroups, double(m) * double(p.stored_elements()), [&](std::int64_t t) {
    const std::int64_t c = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const std::int64_t col = groups[c].begin, cols = groups[c].size;
    T* dxt = dx + m0 * in + col;
    const T* gt = g + m0 * out;
    const std::int64_t k0 = ptr[c], k1 = ptr[c + 1];
    if (k1 == k0) {
      for (std::int64_t i = 0; i < mt; ++i) std::fill(dxt + i * in, dxt + i * in + cols, T(0));
      return;
    }
    if (k1 - k0 == 1) {
      const auto& bl = blocks[index[k0]];
      gemm(false, false, mt, cols, bl.rows, gt + bl.row, out, w + bl.offset, cols, T(0), dxt, in);
      return;
    }
    // Gather G's columns of every block of this column group into (mt x K) and stack the blocks
    // (each rows x cols, contiguous) into (K x cols): one GEMM sums them in row-group order.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[index[k]].rows;
    auto gg = buffer<T>(mt * kk);
    auto wg = buffer<T>(kk * cols);
    std::int64_t r = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[index[k]];
      for (std::int64_t i = 0; i < mt; ++i) std::memcpy(&gg[i * kk + r], gt + i * out + bl.row, sizeof(T) * bl.rows);
      std::memcpy(&wg[r * cols], w + bl.offset, sizeof(T) * bl.rows * cols);
      r += bl.rows;
    }
    gemm(false, false, mt, cols, kk, gg.get(), kk, wg.get(), cols, T(0), dxt, in);
  });
}

template <class T>
void bsl_weight_grad(const BlockSparsePattern& p, const T* g, const T* x, std::int64_t m, T* dw) {
  const std::int64_t in = p.in_features(), out = p.out_features();
  const auto& blocks = p.blocks();
  const auto& ptr = p.row_ptr();
  // Tasks: runs of consecutive blocks of one row group, at most kWeightPanelCols gathered columns each.
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  for (std::size_t r = 0; r + 1 < ptr.size(); ++r) {
    std::int64_t start = ptr[r], cols = 0;
    for (std::int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
      if (k > start && cols + blocks[k].cols > kWeightPanelCols) {
        runs.emplace_back(start, k);
        start = k;
        cols = 0;
      }
      cols += blocks[k].cols;
    }
    if (ptr[r + 1] > start) runs.emplace_back(start, ptr[r + 1]);
  }
  BlasSingleThread blas_guard;
  run_tasks(static_cast<std::int64_t>(runs.size()), double(m) * double(p.stored_elements()), [&](std::int64_t t) {
    const auto [k0, k1] = runs[static_cast<std::size_t>(t)];
    const std::int64_t row = blocks[k0].row, rows = blocks[k0].rows;
    if (m == 0) {
      for (std::int64_t k = k0; k < k1; ++k)
        std::fill(dw + blocks[k].offset, dw + blocks[k].offset + rows * blocks[k].cols, T(0));
      return;
    }
    if (k1 - k0 == 1) {
      const auto& bl = blocks[k0];
      gemm(true, false, rows, bl.cols, m, g + row, out, x + bl.col, in, T(0), dw + bl.offset, bl.cols);
      return;
    }
    // Gather x's columns of the run into (mc x K), accumulate (rows x K) over fixed batch chunks,
    // then scatter the panel back into the blocks.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[k].cols;
    const std::int64_t mc_max = std::min(m, kWeightBatchChunk);
    auto xg = buffer<T>(mc_max * kk);
    auto acc = buffer<T>(rows * kk);
    for (std::int64_t m0 = 0; m0 < m; m0 += kWeightBatchChunk) {
      const std::int64_t mc = std::min(kWeightBatchChunk, m - m0);
      std::int64_t c = 0;
      for (std::int64_t k = k0; k < k1; ++k) {
        const auto& bl = blocks[k];
        for (std::int64_t i = 0; i < mc; ++i)
          std::memcpy(&xg[i * kk + c], x + (m0 + i) * in + bl.col, sizeof(T) * bl.cols);
        c += bl.cols;
      }
      gemm(true, false, rows, kk, mc, g + m0 * out + row, out, xg.get(), kk, m0 == 0 ? T(0) : T(1), acc.get(), kk);
    }
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < rows; ++i)
        std::memcpy(dw + bl.offset + i * bl.cols, &acc[i * kk + c], sizeof(T) * bl.cols);
      c += bl.cols;
    }
  });
}

template <class T>
void bsl_bias_grad(const T* g, std::int64_t m, std::int64_t n, T* db) {
  constexpr std::int64_t kCols = 256;
  const std::int64_t chunks = (n + kCols - 1) / kCols;
  run_tasks(chunks, double(m) * double(n) / 8, [&](std::int64_t t) {
    const std::int64_t j0 = t * kCols, j1 = std::min(n, j0 + kCols);
    std::fill(db + j0, db + j1, T(0));
    for (std::int64_t i = 0; i < m; ++i) {
      const T* gr = g + i * n;
      for (std::int64_t j = j0; j < j1; ++j) db[j] += gr[j];
    }
  });
}

#define XGRAD_BSL_INSTANTIATE(T)                                                                           \
  template void bsl_forward<T>(const BlockSparsePattern&, const T*, std::int64_t, const T*, const T*, T*); \
  template void bsl_input_grad<T>(const BlockSparsePattern&, const T*, std::int64_t, const T*, T*);        \
  template void bsl_weight_grad<T>(const BlockSparsePattern&, const T*, const T*, std::int64_t, T*);       \
  template void bsl_bias_grad<T>(const T*, std::int64_t, std::int64_t, T*);
XGRAD_BSL_INSTANTIATE(float)
XGRAD_BSL_INSTANTIATE(double)
#undef XGRAD_BSL_INSTANTIATE

}  // namespace xgrad::detail
