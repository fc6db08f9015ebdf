#include "xgrad/ops/kernels/tiled_gemm.hpp"

#include <algorithm>
#include <climits>

#include "xgrad/core/error.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/ceil_div.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad {

// Note [Deterministic GEMM]: OpenBLAS 0.3.21 splits one GEMM among its threads at boundaries that
// depend on the thread count, and the edge tiles of each part take other micro-kernel paths, so
// the same sgemm (and dgemm, for sizes that are not multiples of the unroll) rounds differently
// with 1 and 2 threads (measured on this machine: 256x512 @ 512x384 float32 differs in the last
// bits). xgrad therefore keeps OpenBLAS single-threaded (Note [OpenBLAS threading],
// ops/kernels/blas.cpp) and parallelises a large GEMM itself: the output is cut into a grid of tiles
// whose sizes depend on the shapes only, each tile is one single-threaded BLAS call, and the tiles
// run as TBB tasks. Every output element is then computed by the same call with the same operands
// whatever the thread count (with either backend of blas::gemm: xgrad's own GEMM also fixes each
// element's order by k alone, Note [Packed GEMM] in ops/kernels/gemm_loops.hpp). Batched products run
// whole small GEMMs as tasks in the same way, and
// gradients summed over broadcast batch dimensions accumulate the batches in increasing order per
// output.
namespace detail {
namespace {

// A GEMM of fewer than 2 * kMinBlockWork multiply-adds is one call (a task would cost more than it
// saves). A larger one is cut into a grid of about work / kMinBlockWork tiles of C (at most
// kMaxTiles), each at least kMinTileWidth rows and columns unless the matrix is narrower: every
// tile packs its rows of op(A) and its columns of op(B) again, and packing is memory-bound, so
// narrow tiles lose more than they gain (measured: 64-wide blocks cost more over one call than
// 128-wide ones; bench/results/tuning_notes.md, "matmul's tiles").
constexpr std::int64_t kMinBlockWork = std::int64_t{1} << 20;
constexpr std::int64_t kMaxTiles = 16;
constexpr std::int64_t kMinTileWidth = 128;
constexpr std::int64_t kTileAlign = 16;  // tile sizes are multiples of this (micro-kernel friendly)

// One single-threaded BLAS call (ops/kernels/blas.hpp) with alpha = 1.
template <class T>
void call_blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
               const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  blas::gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // cblas rejects lda = 0; the product is empty, so C = beta * C
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  XGRAD_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
              "matmul: dimensions ({}, {}, {}) exceed the 32-bit BLAS interface", m, k, n);
  const std::int64_t work = m * n * k;
  if (work < 2 * kMinBlockWork) {
    call_blas(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Grid: repeatedly halve-ish the dimension whose tiles are currently larger, while tiles stay
  // at least kMinTileWidth wide. Depends on the shapes only (Note [Deterministic GEMM]).
  const std::int64_t target = std::min(work / kMinBlockWork, kMaxTiles);
  std::int64_t gm = 1, gn = 1;
  while (gm * gn < target) {
    const bool m_ok = ceil_div(m, gm + 1) >= kMinTileWidth, n_ok = ceil_div(n, gn + 1) >= kMinTileWidth;
    if (m_ok && (!n_ok || ceil_div(m, gm) >= ceil_div(n, gn)))
      ++gm;
    else if (n_ok)
      ++gn;
    else
      break;
  }
  const std::int64_t bm = ceil_div(ceil_div(m, gm), kTileAlign) * kTileAlign;
  const std::int64_t bn = ceil_div(ceil_div(n, gn), kTileAlign) * kTileAlign;
  gm = ceil_div(m, bm);
  gn = ceil_div(n, bn);
  if (gm * gn <= 1) {
    call_blas(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  parallel_for(0, gm * gn, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t i0 = (t / gn) * bm, j0 = (t % gn) * bn;
      const std::int64_t mm = std::min(m, i0 + bm) - i0, nn = std::min(n, j0 + bn) - j0;
      // Rows i0.. of op(A): row i0 of A, or column i0 of the stored A^T; columns j0.. of op(B) likewise.
      const T* aa = trans_a ? a + i0 : a + i0 * lda;
      const T* bb = trans_b ? b + j0 * ldb : b + j0;
      call_blas(trans_a, trans_b, mm, nn, k, aa, lda, bb, ldb, beta, c + i0 * ldc + j0, ldc);
    }
  });
}

XGRAD_INSTANTIATE_FLOATING(gemm);

}  // namespace detail

}  // namespace xgrad
