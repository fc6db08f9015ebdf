// AVX-512 versions of block_sparse_linear's float32 lane and tile kernels (block_sparse_simd512.hpp).
// This file alone is compiled with -march=x86-64-v4; block_sparse_kernels.cpp calls it through
// kernels() only when the CPU has AVX-512 (F, BW, DQ, VL).
//
// Everything here has internal linkage, and the only library templates it instantiates are xsimd's and
// ops/detail/simd.hpp's with the architecture xsimd::avx512bw as a template argument (Note [Kernel
// architectures] in simd.hpp): an inline or template function that another file also instantiates
// would be merged by the linker with that file's copy, and whichever copy it kept (possibly this one,
// with AVX-512 instructions) would then run on every CPU. The test ops_simd_odr checks this file's object.
#include "xgrad/ops/detail/block_sparse_simd512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/detail/simd.hpp"
#endif

namespace xgrad::detail::bsl512 {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
using v16f = simd::batch<float, A>;
constexpr int L = 16;
static_assert(simd::lanes<float, A> == L);
// Accumulator registers per tile (of 32): the rest hold the loaded operand vectors and a broadcast.
constexpr int kAcc = 24;

inline v16f load16(const float* p) { return simd::load<float, A>(p); }
inline void store16(float* p, const v16f& v) { simd::store<float, A>(p, v); }
inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// acc += broadcast(*p) * w as one vfmadd231ps with an embedded broadcast ({1to16}) memory operand. The
// tiles' broadcasts written as `acc += x * w` compile to a separate vbroadcastss per row (one register,
// reused by the row's NV FMAs), which on Zen 4 took a floating-point pipe slot: 6 per 24 FMAs, the
// ~15-20% the tiles trailed libxsmm's JIT kernels by (Note [Tile kernels] in block_sparse_kernels.cpp).
// The same fused multiply-add in the same order, so the results are unchanged.
// The tiles hold raw __m512 registers (an asm operand bound to a member of an xsimd batch kept the
// accumulators in memory).
inline void fma_bcast(__m512& acc, __m512 w, const float* p) {
  asm("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
}

// ---- Lane kernels (batch in the lanes; Note [Lane kernels] in block_sparse_kernels.cpp) ----

// out[o * ldo + v * 16 + l] (+)= sum_s sum_k coef_s(o0 + o, k) a_s[k * lda + m0 + v * 16 + l], o < O, v < NV.
template <int O, int NV>
void lane_tile(const LaneSeg* segs, std::int64_t nseg, std::int64_t lda, std::int64_t m0, std::int64_t o0, float* out,
               std::int64_t ldo, bool accumulate) {
  v16f acc[O][NV];
  for (int o = 0; o < O; ++o)
    for (int v = 0; v < NV; ++v) acc[o][v] = accumulate ? load16(out + o * ldo + v * L) : v16f(0.0f);
  for (std::int64_t s = 0; s < nseg; ++s) {
    const LaneSeg& sg = segs[s];
    const float* c[O];
    for (int o = 0; o < O; ++o) c[o] = sg.coef + (o0 + o) * sg.stride_out;
    const float* ap = sg.a + m0;
    const std::int64_t sk = sg.stride_k;
    for (std::int64_t k = 0; k < sg.len; ++k) {
      v16f a[NV];
      for (int v = 0; v < NV; ++v) a[v] = load16(ap + k * lda + v * L);
      for (int o = 0; o < O; ++o) {
        const float w = c[o][k * sk];
        for (int v = 0; v < NV; ++v) acc[o][v] += w * a[v];
      }
    }
  }
  for (int o = 0; o < O; ++o)
    for (int v = 0; v < NV; ++v) store16(out + o * ldo + v * L, acc[o][v]);
}

constexpr int kLaneOuts = 8, kLaneVecs = 3;  // 8 x 3 = kAcc accumulators
using LaneTileFn = void (*)(const LaneSeg*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*,
                            std::int64_t, bool);
#define XGRAD_LANE_ROW(O) \
  { &lane_tile<O, 1>, &lane_tile<O, 2>, &lane_tile<O, 3> }
constexpr LaneTileFn kLaneTiles[kLaneOuts][kLaneVecs] = {XGRAD_LANE_ROW(1), XGRAD_LANE_ROW(2), XGRAD_LANE_ROW(3),
                                                         XGRAD_LANE_ROW(4), XGRAD_LANE_ROW(5), XGRAD_LANE_ROW(6),
                                                         XGRAD_LANE_ROW(7), XGRAD_LANE_ROW(8)};
#undef XGRAD_LANE_ROW

void lane_group(const LaneSeg* segs, std::int64_t nseg, std::int64_t lda, std::int64_t m0, std::int64_t nrows,
                std::int64_t nout, float* out, std::int64_t ldo, std::int64_t chunk_k) {
  const std::int64_t nvec = nrows / L;
  for (std::int64_t v = 0; v < nvec;) {
    const std::int64_t nv = imin(kLaneVecs, nvec - v);
    for (std::int64_t c0 = 0; c0 < nseg;) {
      std::int64_t c1 = c0, kk = 0;
      while (c1 < nseg && (c1 == c0 || kk + segs[c1].len <= chunk_k)) kk += segs[c1++].len;
      for (std::int64_t o0 = 0; o0 < nout; o0 += kLaneOuts) {
        const std::int64_t no = imin(kLaneOuts, nout - o0);
        kLaneTiles[no - 1][nv - 1](segs + c0, c1 - c0, lda, m0 + v * L, o0, out + o0 * ldo + v * L, ldo, c0 > 0);
      }
      c0 = c1;
    }
    v += nv;
  }
}

// Pairwise lane sums: lane i of the result is a[2i] + a[2i + 1] for i < 8, b[2i - 16] + b[2i - 15] after.
inline v16f pair_sum(const v16f& a, const v16f& b) {
  return simd::shuffle<0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30>(a, b) +
         simd::shuffle<1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31>(a, b);
}

// dw = gt xt^T over mp batch columns, as tiles of 4 x 4 dot products (one per accumulator), each
// reduced across its 16 lanes by a fixed tree of pairwise sums.
void lane_weight(const float* gt, const float* xt, std::int64_t mp, std::int64_t rows, std::int64_t cols, float* dw) {
  constexpr int TO = 4, TC = 4;
  const std::int64_t nvec = mp / L;
  for (std::int64_t o0 = 0; o0 < rows; o0 += TO)
    for (std::int64_t c0 = 0; c0 < cols; c0 += TC) {
      const float* gr[TO];
      const float* xr[TC];
      for (int o = 0; o < TO; ++o) gr[o] = gt + imin(o0 + o, rows - 1) * mp;
      for (int c = 0; c < TC; ++c) xr[c] = xt + imin(c0 + c, cols - 1) * mp;
      v16f acc[TO * TC];
      for (int i = 0; i < TO * TC; ++i) acc[i] = v16f(0.0f);
      for (std::int64_t v = 0; v < nvec; ++v) {
        v16f xv[TC];
        for (int c = 0; c < TC; ++c) xv[c] = load16(xr[c] + v * L);
        for (int o = 0; o < TO; ++o) {
          const v16f gv = load16(gr[o] + v * L);
          for (int c = 0; c < TC; ++c) acc[o * TC + c] += gv * xv[c];
        }
      }
      for (int n = TO * TC; n > 1; n /= 2)
        for (int i = 0; i < n / 2; ++i) acc[i] = pair_sum(acc[2 * i], acc[2 * i + 1]);
      // After the tree, lane i holds the sum of accumulator i.
      for (int o = 0; o < TO && o0 + o < rows; ++o)
        for (int c = 0; c < TC && c0 + c < cols; ++c) dw[(o0 + o) * cols + c0 + c] = simd::lane(acc[0], o * TC + c);
    }
}

// ---- Tile kernels (outputs in the lanes; Note [Tile kernels] in block_sparse_kernels.cpp) ----

// Vectors per tile column for a width (a multiple of 32): 4 (64 floats) when it divides, else 3, else 2;
// the tile then has kAcc / NV rows.
inline int tile_vecs(std::int64_t width) { return width % 64 == 0 ? 4 : width % 48 == 0 ? 3 : 2; }

// out[r * ldo + c] (+)= sum_s sum_k a[r * lda + s.off + k] * s.coef[k * s.ldc + cj + c], r < R, c < 16 NV;
// bias (last chunk) added to the finished sums.
template <int R, int NV>
void row_tile(const float* a, std::int64_t lda, const TileSeg* segs, std::int64_t nseg, std::int64_t cj, float* out,
              std::int64_t ldo, bool accumulate, const float* bias) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(out + r * ldo + v * L) : _mm512_setzero_ps();
  for (std::int64_t s = 0; s < nseg; ++s) {
    const TileSeg& sg = segs[s];
    const float* c = sg.coef + cj;
    const float* ap = a + sg.off;
    const std::int64_t ldc = sg.ldc, len = sg.len;
    for (std::int64_t k = 0; k < len; ++k) {
      __m512 w[NV];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(c + v * L);
      c += ldc;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) fma_bcast(acc[r][v], w[v], ap + r * lda);
      ++ap;
    }
  }
  __m512 bv[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) bv[v] = bias ? _mm512_loadu_ps(bias + v * L) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + r * ldo + v * L, _mm512_add_ps(acc[r][v], bv[v]));
}

// out[r * ldo + c] (+)= sum_{i < mc} gp[i * ldg + r] * xp[i * ldx + c], r < R, c < 16 NV. Here each
// broadcast g value is kept in a register for the row's NV FMAs (embedded broadcasts, one memory
// operand per FMA, made this kernel slower: 2.2 instead of 1.5-1.9 ms for 64 groups of 64).
template <int R, int NV>
void outer_tile(const float* gp, std::int64_t ldg, const float* xp, std::int64_t ldx, std::int64_t mc, float* out,
                std::int64_t ldo, bool accumulate) {
  v16f acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load16(out + r * ldo + v * L) : v16f(0.0f);
  for (std::int64_t i = 0; i < mc; ++i) {
    v16f xv[NV];
    for (int v = 0; v < NV; ++v) xv[v] = load16(xp + v * L);
    for (int r = 0; r < R; ++r) {
      const float gv = gp[r];
      for (int v = 0; v < NV; ++v) acc[r][v] += gv * xv[v];
    }
    gp += ldg;
    xp += ldx;
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store16(out + r * ldo + v * L, acc[r][v]);
}

constexpr int kMaxRows = kAcc / 2;  // NV = 2
using RowTileFn = void (*)(const float*, std::int64_t, const TileSeg*, std::int64_t, std::int64_t, float*, std::int64_t,
                           bool, const float*);
using OuterTileFn = void (*)(const float*, std::int64_t, const float*, std::int64_t, std::int64_t, float*, std::int64_t,
                             bool);
// [NV - 2][R - 1] for R <= kAcc / NV (null beyond).
#define XGRAD_TILES(F)                                                                    \
  {                                                                                       \
    {&F<1, 2>, &F<2, 2>, &F<3, 2>, &F<4, 2>,  &F<5, 2>,  &F<6, 2>,                        \
     &F<7, 2>, &F<8, 2>, &F<9, 2>, &F<10, 2>, &F<11, 2>, &F<12, 2>},                      \
        {&F<1, 3>, &F<2, 3>, &F<3, 3>, &F<4, 3>, &F<5, 3>, &F<6, 3>, &F<7, 3>, &F<8, 3>}, \
        {&F<1, 4>, &F<2, 4>, &F<3, 4>, &F<4, 4>, &F<5, 4>, &F<6, 4>},                     \
  }
constexpr RowTileFn kRowTiles[3][kMaxRows] = XGRAD_TILES(row_tile);
constexpr OuterTileFn kOuterTiles[3][kMaxRows] = XGRAD_TILES(outer_tile);
#undef XGRAD_TILES

// Batch rows per forward / input-gradient tile: at most 7. The tile broadcasts from rows of x or G
// that are a multiple of 4 KB apart when the layer has 1024 * n features (4096 here), so their lines
// share one L1 set (8 ways on Zen 4, 12 on Intel); 12 rows x 2 vectors (32-wide groups) evicted each
// line before its next use. Measured, 32x32 blocks at density 1/16, 1 thread: forward 8.5-9.8 instead
// of 13-15 ms, input gradient 9.4-10.4 instead of 10.5-12.6 ms. Rows are independent: the tiling does
// not change any sum.
constexpr std::int64_t kRowTileMaxRows = 7;

void tile_group(const float* a, std::int64_t lda, std::int64_t mt, const TileSeg* segs, std::int64_t nseg,
                std::int64_t width, float* d, std::int64_t ldd, const float* bias, std::int64_t chunk_k) {
  const int nv = tile_vecs(width);
  const std::int64_t tw = nv * L, rmax = imin(kAcc / nv, kRowTileMaxRows);
  for (std::int64_t c0 = 0; c0 < nseg;) {
    std::int64_t c1 = c0, kk = 0;
    while (c1 < nseg && (c1 == c0 || kk + segs[c1].len <= chunk_k)) kk += segs[c1++].len;
    const bool last = c1 == nseg;
    for (std::int64_t i = 0; i < mt; i += rmax) {
      const std::int64_t nr = imin(rmax, mt - i);
      for (std::int64_t j = 0; j < width; j += tw)
        kRowTiles[nv - 2][nr - 1](a + i * lda, lda, segs + c0, c1 - c0, j, d + i * ldd + j, ldd, c0 > 0,
                                  last && bias ? bias + j : nullptr);
    }
    c0 = c1;
  }
  if (nseg == 0)
    for (std::int64_t i = 0; i < mt; ++i)
      for (std::int64_t c = 0; c < width; ++c) d[i * ldd + c] = bias ? bias[c] : 0.0f;
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

constexpr Kernels kKernels = {&lane_group, &lane_weight, &tile_group, &outer_block};

}  // namespace

const Kernels* table() { return &kKernels; }
#else
const Kernels* table() { return nullptr; }
#endif

}  // namespace xgrad::detail::bsl512
