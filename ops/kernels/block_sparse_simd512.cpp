// AVX-512 versions of block_sparse_linear's float32 lane and tile kernels (block_sparse_simd512.hpp): the
// loops of block_sparse_tiles.hpp, which block_sparse_kernels.cpp instantiates for its own architecture,
// instantiated here for xsimd::avx512bw with tiles for 32 registers, and the weight gradient's sweep that
// reads g and x in place. This file alone is compiled with -march=x86-64-v4; block_sparse_kernels.cpp
// calls it through kernels() only when the CPU has AVX-512 (F, BW, DQ, VL).
//
// Everything here has internal linkage, and the only library templates it instantiates are xsimd's,
// ops/kernels/simd.hpp's with the architecture xsimd::avx512bw as a template argument (Note [Kernel
// architectures] in simd.hpp) and block_sparse_tiles.hpp's, which are in an unnamed namespace: an inline
// or template function that another file also instantiates would be merged by the linker with that file's
// copy, and whichever copy it kept (possibly this one, with AVX-512 instructions) would then run on every
// CPU. The test ops_simd_odr checks this file's object.
#include "xgrad/ops/kernels/block_sparse_simd512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/kernels/block_sparse_tiles.hpp"
#endif

namespace xgrad::detail::bsl512 {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
constexpr int L = 16;
static_assert(simd::lanes<float, A> == L);
// Accumulator registers per tile (of 32): the rest hold the loaded operand vectors and a broadcast.
constexpr int kAcc = 24;
using bsl::imin;

// ---- Lane kernels (batch in the lanes; Note [Lane kernels] in block_sparse_kernels.cpp) ----

// Tiles of up to 8 outputs x 3 vectors (24 accumulators): an 8x8 block row group is one tile.
constexpr int kLaneOuts = 8, kLaneVecs = 3;

// ---- Tile kernels (outputs in the lanes; Note [Tile kernels] in block_sparse_kernels.cpp) ----

// Vectors per tile column for a width (a multiple of 32): 4 (64 floats) when it divides, else 3, else 2;
// the tile then has kAcc / NV rows.
inline int tile_vecs(std::int64_t width) { return width % 64 == 0 ? 4 : width % 48 == 0 ? 3 : 2; }

constexpr int kMaxRows = kAcc / 2;  // NV = 2
using OuterTileFn = void (*)(const float*, std::int64_t, const float*, std::int64_t, std::int64_t, float*, std::int64_t,
                             bool);
// [NV - 2][R - 1] for R <= kAcc / NV (null beyond).
#define XGRAD_TILES(F)                                                                    \
  {                                                                                       \
    {&F<float, A, 1, 2>, &F<float, A, 2, 2>,  &F<float, A, 3, 2>,  &F<float, A, 4, 2>,    \
     &F<float, A, 5, 2>, &F<float, A, 6, 2>,  &F<float, A, 7, 2>,  &F<float, A, 8, 2>,    \
     &F<float, A, 9, 2>, &F<float, A, 10, 2>, &F<float, A, 11, 2>, &F<float, A, 12, 2>},  \
        {&F<float, A, 1, 3>, &F<float, A, 2, 3>, &F<float, A, 3, 3>, &F<float, A, 4, 3>,  \
         &F<float, A, 5, 3>, &F<float, A, 6, 3>, &F<float, A, 7, 3>, &F<float, A, 8, 3>}, \
        {&F<float, A, 1, 4>, &F<float, A, 2, 4>, &F<float, A, 3, 4>,                      \
         &F<float, A, 4, 4>, &F<float, A, 5, 4>, &F<float, A, 6, 4>},                     \
  }
constexpr bsl::RowTileFn<float> kRowTiles[3][kMaxRows] = XGRAD_TILES(bsl::row_tile);
constexpr OuterTileFn kOuterTiles[3][kMaxRows] = XGRAD_TILES(bsl::outer_tile);
#undef XGRAD_TILES

// Batch rows per forward / input-gradient tile: at most 7. The tile broadcasts from rows of x or G
// that are a multiple of 4 KB apart when the layer has 1024 * n features (4096 here), so their lines
// share one L1 set (8 ways on Zen 4, 12 on Intel); 12 rows x 2 vectors (32-wide groups) evicted each
// line before its next use; tiles of at most 7 rows measured faster on 32x32 blocks at density 1/16,
// forward and input gradient (bench/results/tuning_notes.md, "Block-sparse linear"). Rows are
// independent: the tiling does not change any sum.
constexpr std::int64_t kRowTileMaxRows = 7;

void tile_group(const float* a, std::int64_t lda, std::int64_t mt, const TileSeg<float>* segs, std::int64_t nseg,
                std::int64_t width, float* d, std::int64_t ldd, const float* bias, std::int64_t chunk_k) {
  const int nv = tile_vecs(width);
  bsl::tile_sweep(a, lda, mt, segs, nseg, width, d, ldd, bias, chunk_k, nv * L,
                  imin<std::int64_t>(kAcc / nv, kRowTileMaxRows), kRowTiles[nv - 2]);
}

void outer_block(const float* gb, std::int64_t ldg, const float* xb, std::int64_t ldx, std::int64_t m,
                 std::int64_t rows, std::int64_t cols, std::int64_t chunk, float* d) {
  const int nv = tile_vecs(cols);
  const std::int64_t tw = nv * L, rmax = kAcc / nv;
  // Batch chunk: at least 8192 / (tw + 16) rows (wide blocks: a caller's chunk sized for whole block
  // rows would be a few batch rows). Between chunks the partial sums go through d: the same additions
  // in the same order as one sweep down the batch, so the chunk never changes the result.
  chunk = chunk > 8192 / (tw + L) ? chunk : 8192 / (tw + L);
  for (std::int64_t m0 = 0; m0 < m; m0 += chunk) {
    const std::int64_t mc = imin(chunk, m - m0);
    for (std::int64_t c = 0; c < cols; c += tw)
      for (std::int64_t o = 0, nr = 0; o < rows; o += nr) {
        // Full tiles; a remainder a little over one tile is split in two halves rather than leaving a
        // tile of 1-3 rows (too few accumulators to hide the FMA latency).
        const std::int64_t rem = rows - o;
        nr = rem <= rmax ? rem : rem < rmax + 4 ? (rem + 1) / 2 : rmax;
        kOuterTiles[nv - 2][nr - 1](gb + m0 * ldg + o, ldg, xb + m0 * ldx + c, ldx, mc, d + o * cols + c, cols, m0 > 0);
      }
  }
}

constexpr Kernels kKernels = {&bsl::lane_group<float, A, kLaneOuts, kLaneVecs>, &bsl::lane_weight<float, A>,
                              &tile_group, &outer_block};

}  // namespace

const Kernels* table() { return &kKernels; }
#else
const Kernels* table() { return nullptr; }
#endif

}  // namespace xgrad::detail::bsl512
