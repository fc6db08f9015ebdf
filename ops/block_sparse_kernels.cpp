// Kernels of block_sparse_linear: per-task single-threaded CBLAS GEMMs over strided views or gathered
// panels. See Note [Block-sparse parallelism] in block_sparse_linear.hpp.
#include "xgrad/ops/block_sparse_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

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

// Per-thread scratch panels, grown on demand and kept: a fresh multi-megabyte allocation per task
// would page-fault its way in every call (glibc serves it with mmap), which costs more than the copy.
template <class T>
T* scratch(int slot, std::int64_t n) {
  thread_local std::vector<T> panels[2];
  auto& v = panels[slot];
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// Short strided copies (a block's row, often 8-64 elements): an inline vectorised loop, because a
// memcpy call per segment costs more than the copy itself. GCC would turn the loop back into a
// memcpy call, hence the attribute.
template <class T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void copy_segment(const T* __restrict src,
                                                                                       std::int64_t n,
                                                                                       T* __restrict dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
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

// Note [Narrow block kernel]: for float blocks 8 or 16 outputs wide, a GEMM call per row (column) group
// spends more on packing than on arithmetic, so a register-blocked kernel reads x (or g) in place:
//   out[m, 0:W] (+)= sum over segments s, k < len_s of a[m, off_s + k] * b_s[k, 0:W]
// with W = 8 R, each b_s a (len_s x W) row-major panel: for the forward the transposed weight blocks,
// for the input gradient the weight blocks themselves. Each output is summed in a fixed order
// (segments in order, k ascending), so the result does not depend on the thread count.
struct Segment {
  std::int64_t off, len;
  const float* b;
};
typedef float v8f __attribute__((vector_size(32), aligned(4)));

template <int R, int MR>
inline void narrow_tile(const float* a, std::int64_t lda, const Segment* segs, std::int64_t nseg, float* c,
                        std::int64_t ldc, bool accumulate) {
  v8f acc[MR][R];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int q = 0; q < R; ++q) acc[r][q] = v8f{};
  for (std::int64_t s = 0; s < nseg; ++s) {
    const float* ap = a + segs[s].off;
    const float* bp = segs[s].b;
    for (std::int64_t k = 0; k < segs[s].len; ++k) {
      v8f bv[R];
#pragma GCC unroll 2
      for (int q = 0; q < R; ++q) std::memcpy(&bv[q], bp + k * 8 * R + 8 * q, sizeof(v8f));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const float av = ap[r * lda + k];
#pragma GCC unroll 2
        for (int q = 0; q < R; ++q) acc[r][q] += av * bv[q];
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int q = 0; q < R; ++q) {
      v8f old{};
      if (accumulate) std::memcpy(&old, c + r * ldc + 8 * q, sizeof(v8f));
      const v8f v = old + acc[r][q];
      std::memcpy(c + r * ldc + 8 * q, &v, sizeof(v8f));
    }
}

template <int R>
void narrow_kernel(const float* a, std::int64_t lda, std::int64_t m, const Segment* segs, std::int64_t nseg, float* c,
                   std::int64_t ldc, bool accumulate) {
  constexpr int kMR = R == 1 ? 6 : 4;
  std::int64_t i = 0;
  for (; i + kMR <= m; i += kMR) narrow_tile<R, kMR>(a + i * lda, lda, segs, nseg, c + i * ldc, ldc, accumulate);
  for (; i < m; ++i) narrow_tile<R, 1>(a + i * lda, lda, segs, nseg, c + i * ldc, ldc, accumulate);
}

void narrow(int width, const float* a, std::int64_t lda, std::int64_t m, const Segment* segs, std::int64_t nseg,
            float* c, std::int64_t ldc, bool accumulate) {
  if (width == 8)
    narrow_kernel<1>(a, lda, m, segs, nseg, c, ldc, accumulate);
  else
    narrow_kernel<2>(a, lda, m, segs, nseg, c, ldc, accumulate);
}

template <class T>
bool use_narrow(std::int64_t width) {
  return std::is_same_v<T, float> && (width == 8 || width == 16);
}

// Batch rows per narrow task: the task sweeps every group over its x (or g) rows, which stay in L2
// (24 x 4096 floats = 384 KiB), instead of streaming all of x once per group.
constexpr std::int64_t kNarrowTile = 24;

// True when every group of `groups` has the same narrow width (8 or 16).
bool narrow_groups(const std::vector<BlockSparsePattern::Group>& groups) {
  for (const auto& g : groups)
    if (g.size != groups.front().size || !(g.size == 8 || g.size == 16)) return false;
  return true;
}

// out[:, group] (+)= a[:, segments of group] . panels, for every group, tasks over batch tiles.
void narrow_sweep(const std::vector<BlockSparsePattern::Group>& groups, const std::vector<std::int64_t>& seg_ptr,
                  const std::vector<Segment>& segs, const float* a, std::int64_t lda, std::int64_t m, float* c,
                  std::int64_t ldc, bool accumulate, double work) {
  const std::int64_t tiles = (m + kNarrowTile - 1) / kNarrowTile;
  const int width = static_cast<int>(groups.front().size);
  run_tasks(tiles, work, [&](std::int64_t t) {
    const std::int64_t m0 = t * kNarrowTile, mt = std::min(kNarrowTile, m - m0);
    // Copy the tile with a padded row stride: rows 4096 floats apart all map to the same L1 sets.
    const std::int64_t ldp = lda + 16;
    float* at = scratch<float>(0, mt * ldp);
    for (std::int64_t i = 0; i < mt; ++i) std::memcpy(at + i * ldp, a + (m0 + i) * lda, sizeof(float) * lda);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      float* ct = c + m0 * ldc + groups[g].begin;
      const std::int64_t s0 = seg_ptr[g], s1 = seg_ptr[g + 1];
      if (s0 == s1) {
        if (!accumulate)
          for (std::int64_t i = 0; i < mt; ++i) std::fill(ct + i * ldc, ct + i * ldc + width, 0.0f);
        continue;
      }
      narrow(width, at, ldp, mt, segs.data() + s0, s1 - s0, ct, ldc, accumulate);
    }
  });
}

// Forward through the narrow kernel (bo = 8 or 16, float): y already holds the bias.
void narrow_forward(const BlockSparsePattern& p, const float* x, std::int64_t m, const float* w, float* y) {
  const auto& blocks = p.blocks();
  const auto& groups = p.row_groups();
  const std::int64_t rows = groups.front().size;
  // Transposed blocks (cols x rows), in storage order, built once per call (O(stored) work).
  std::vector<float> wt(static_cast<std::size_t>(p.stored_elements()));
  std::vector<Segment> segs(blocks.size());
  run_tasks(static_cast<std::int64_t>(blocks.size()), double(p.stored_elements()), [&](std::int64_t k) {
    const auto& bl = blocks[static_cast<std::size_t>(k)];
    float* dst = wt.data() + bl.offset;
    for (std::int64_t j = 0; j < bl.cols; ++j)
      for (std::int64_t i = 0; i < rows; ++i) dst[j * rows + i] = w[bl.offset + i * bl.cols + j];
    segs[static_cast<std::size_t>(k)] = {bl.col, bl.cols, dst};
  });
  narrow_sweep(groups, p.row_ptr(), segs, x, p.in_features(), m, y, p.out_features(), true,
               double(m) * double(p.stored_elements()));
}

// Input gradient through the narrow kernel (bi = 8 or 16, float): dx fully written.
void narrow_input_grad(const BlockSparsePattern& p, const float* g, std::int64_t m, const float* w, float* dx) {
  const auto& blocks = p.blocks();
  std::vector<Segment> segs;
  segs.reserve(blocks.size());
  for (std::int64_t k : p.col_index()) {
    const auto& bl = blocks[static_cast<std::size_t>(k)];
    segs.push_back({bl.row, bl.rows, w + bl.offset});
  }
  narrow_sweep(p.col_groups(), p.col_ptr(), segs, g, p.out_features(), m, dx, p.in_features(), false,
               double(m) * double(p.stored_elements()));
}

}  // namespace

template <class T>
void bsl_forward(const BlockSparsePattern& p, const T* x, std::int64_t m, const T* w, const T* b, T* y) {
  const std::int64_t in = p.in_features(), out = p.out_features();
  const auto& blocks = p.blocks();
  const auto& groups = p.row_groups();
  const auto& ptr = p.row_ptr();
  const std::int64_t tiles = num_tiles(m), ngroups = static_cast<std::int64_t>(groups.size());
  if constexpr (std::is_same_v<T, float>) {
    if (narrow_groups(groups)) {
      run_tasks(m, double(m) * double(out) / 8, [&](std::int64_t i) {
        if (b)
          std::memcpy(y + i * out, b, sizeof(T) * out);
        else
          std::fill(y + i * out, y + (i + 1) * out, T(0));
      });
      narrow_forward(p, x, m, w, y);
      return;
    }
  }
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
    T* xg = scratch<T>(0, mt * kk);
    T* wg = scratch<T>(1, rows * kk);
    for (std::int64_t i = 0; i < mt; ++i) {
      T* dst = xg + i * kk;
      const T* src = xt + i * in;
      for (std::int64_t k = k0; k < k1; ++k) {
        copy_segment(src + blocks[k].col, blocks[k].cols, dst);
        dst += blocks[k].cols;
      }
    }
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < rows; ++i) copy_segment(w + bl.offset + i * bl.cols, bl.cols, wg + i * kk + c);
      c += bl.cols;
    }
    gemm(false, true, mt, rows, kk, xg, kk, wg, kk, T(1), yt, out);
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
  if constexpr (std::is_same_v<T, float>) {
    if (narrow_groups(groups)) {
      narrow_input_grad(p, g, m, w, dx);
      return;
    }
  }
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
    T* gg = scratch<T>(0, mt * kk);
    T* wg = scratch<T>(1, kk * cols);
    for (std::int64_t i = 0; i < mt; ++i) {
      T* dst = gg + i * kk;
      const T* src = gt + i * out;
      for (std::int64_t k = k0; k < k1; ++k) {
        const auto& bl = blocks[index[k]];
        copy_segment(src + bl.row, bl.rows, dst);
        dst += bl.rows;
      }
    }
    std::int64_t r = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[index[k]];
      std::memcpy(wg + r * cols, w + bl.offset, sizeof(T) * bl.rows * cols);
      r += bl.rows;
    }
    gemm(false, false, mt, cols, kk, gg, kk, wg, cols, T(0), dxt, in);
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
    T* xg = scratch<T>(0, mc_max * kk);
    T* acc = scratch<T>(1, rows * kk);
    for (std::int64_t m0 = 0; m0 < m; m0 += kWeightBatchChunk) {
      const std::int64_t mc = std::min(kWeightBatchChunk, m - m0);
      for (std::int64_t i = 0; i < mc; ++i) {
        T* dst = xg + i * kk;
        const T* src = x + (m0 + i) * in;
        for (std::int64_t k = k0; k < k1; ++k) {
          copy_segment(src + blocks[k].col, blocks[k].cols, dst);
          dst += blocks[k].cols;
        }
      }
      gemm(true, false, rows, kk, mc, g + m0 * out + row, out, xg, kk, m0 == 0 ? T(0) : T(1), acc, kk);
    }
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < rows; ++i) copy_segment(acc + i * kk + c, bl.cols, dw + bl.offset + i * bl.cols);
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
