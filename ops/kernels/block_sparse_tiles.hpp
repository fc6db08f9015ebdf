#pragma once
// Internal to ops/kernels/block_sparse_kernels.cpp and block_sparse_simd512.cpp: the register-tiled loops
// of block_sparse_linear (Notes [Lane kernels] and [Tile kernels] in block_sparse_kernels.cpp), as
// templates over the element type T and the architecture A (Note [Kernel architectures] in simd.hpp).
// block_sparse_kernels.cpp instantiates them for xsimd::default_arch (float and double),
// block_sparse_simd512.cpp for xsimd::avx512bw (float, block_sparse_simd512.hpp): both widths run the same
// loops, each file choosing the tile shapes its registers hold.
//
// Everything here is in an unnamed namespace, so each including file compiles its own copy with its own
// flags and the linker never merges the AVX-512 one with the baseline one (the test ops_simd_odr checks
// the AVX-512 object). For the same reason the loops call no standard-library function template (such as
// std::min, one function for every file that instantiates it).
#include <cstddef>
#include <cstdint>
#include <utility>

#include "xgrad/ops/kernels/block_sparse_simd512.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail::bsl {
namespace {

using bsl512::LaneSeg;
using bsl512::TileSeg;

// std::min's body: the same code as the baseline loops had with std::min.
template <class I>
constexpr const I& imin(const I& a, const I& b) {
  if (b < a) return b;
  return a;
}

// A tile of R x NV accumulators: acc[r][v] = the L = lanes<T, A> values at out + r * ldo + v * L when
// accumulating, else zero; tile_store writes them there.
template <class T, class A, int R, int NV>
inline void tile_load(simd::batch<T, A> (&acc)[R][NV], const T* out, std::int64_t ldo, bool accumulate) {
  constexpr int L = simd::lanes<T, A>;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      acc[r][v] = accumulate ? simd::load<T, A>(out + r * ldo + v * L) : simd::batch<T, A>(T(0));
}
template <class T, class A, int R, int NV>
inline void tile_store(T* out, std::int64_t ldo, const simd::batch<T, A> (&acc)[R][NV]) {
  constexpr int L = simd::lanes<T, A>;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) simd::store<T, A>(out + r * ldo + v * L, acc[r][v]);
}

// ---- Lane kernels (batch in the lanes; Note [Lane kernels] in block_sparse_kernels.cpp) ----

// out[o * ldo + v * L + l] (+)= sum_s sum_k coef_s(o0 + o, k) a_s[k * lda + m0 + v * L + l] for o < O,
// v < NV (L = lanes<T, A>). With `accumulate`, the sums continue from out's values (the same additions
// in the same order as one call over all the segments, so splitting the segments into chunks does not
// change the result).
template <class T, class A, int O, int NV>
void lane_tile(const LaneSeg<T>* segs, std::int64_t nseg, std::int64_t lda, std::int64_t m0, std::int64_t o0, T* out,
               std::int64_t ldo, bool accumulate) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  V acc[O][NV];
  tile_load(acc, out, ldo, accumulate);
  for (std::int64_t s = 0; s < nseg; ++s) {
    const LaneSeg<T>& sg = segs[s];
    const T* c[O];
#pragma GCC unroll 8
    for (int o = 0; o < O; ++o) c[o] = sg.coef + (o0 + o) * sg.stride_out;
    const T* ap = sg.a + m0;
    const std::int64_t sk = sg.stride_k;
    for (std::int64_t k = 0; k < sg.len; ++k) {
      V a[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) a[v] = simd::load<T, A>(ap + k * lda + v * L);
#pragma GCC unroll 8
      for (int o = 0; o < O; ++o) {
        const T w = c[o][k * sk];
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[o][v] += w * a[v];
      }
    }
  }
  tile_store(out, ldo, acc);
}

// lane_tile<T, A, O, NV> for O <= Outs, NV <= Vecs, at fn[(O - 1) * Vecs + NV - 1].
template <class T, class A, int Outs, int Vecs>
struct LaneTiles {
  void (*fn[Outs * Vecs])(const LaneSeg<T>*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, T*, std::int64_t,
                          bool);
};
template <class T, class A, int Outs, int Vecs, std::size_t... I>
constexpr LaneTiles<T, A, Outs, Vecs> make_lane_tiles(std::index_sequence<I...>) {
  return {{&lane_tile<T, A, static_cast<int>(I) / Vecs + 1, static_cast<int>(I) % Vecs + 1>...}};
}
template <class T, class A, int Outs, int Vecs>
constexpr LaneTiles<T, A, Outs, Vecs> kLaneTiles =
    make_lane_tiles<T, A, Outs, Vecs>(std::make_index_sequence<static_cast<std::size_t>(Outs* Vecs)>{});

// out[o * ldo + i] = sum_s sum_k coef_s(o, k) segs[s].a[k * lda + m0 + i] for o < nout, i < nrows (a multiple
// of lanes<T, A>), in tiles of up to Outs outputs x Vecs vectors. Per tile of vectors, the segments are
// swept in chunks of about chunk_k inner indices, all outputs per chunk, so the chunk's slice of the
// operand is read from L1 by every output tile.
template <class T, class A, int Outs, int Vecs>
void lane_group(const LaneSeg<T>* segs, std::int64_t nseg, std::int64_t lda, std::int64_t m0, std::int64_t nrows,
                std::int64_t nout, T* out, std::int64_t ldo, std::int64_t chunk_k) {
  constexpr int L = simd::lanes<T, A>;
  const std::int64_t nvec = nrows / L;
  for (std::int64_t v = 0; v < nvec;) {
    const std::int64_t nv = imin<std::int64_t>(Vecs, nvec - v);
    for (std::int64_t c0 = 0; c0 < nseg;) {
      std::int64_t c1 = c0, kk = 0;
      while (c1 < nseg && (c1 == c0 || kk + segs[c1].len <= chunk_k)) kk += segs[c1++].len;
      for (std::int64_t o0 = 0; o0 < nout; o0 += Outs) {
        const std::int64_t no = imin<std::int64_t>(Outs, nout - o0);
        kLaneTiles<T, A, Outs, Vecs>.fn[(no - 1) * Vecs + nv - 1](segs + c0, c1 - c0, lda, m0 + v * L, o0,
                                                                  out + o0 * ldo + v * L, ldo, c0 > 0);
      }
      c0 = c1;
    }
    v += nv;
  }
}

// Pairwise lane sums: lane i of the result is a[2i] + a[2i + 1] for i < L / 2, b[2i - L] + b[2i - L + 1] after.
template <class V, std::size_t... I>
inline V pair_sum(const V& a, const V& b, std::index_sequence<I...>) {
  return simd::shuffle<(2 * I)...>(a, b) + simd::shuffle<(2 * I + 1)...>(a, b);
}
// Lane sums of L accumulators: lane i of the result is the sum of the lanes of acc[i], by a fixed tree of
// pairwise sums (each level adds even and odd lanes of two vectors).
template <class T, class A>
inline simd::batch<T, A> lane_reduce(simd::batch<T, A>* acc) {
  constexpr int L = simd::lanes<T, A>;
  using Seq = std::make_index_sequence<L>;
  for (int n = L; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i) acc[i] = pair_sum(acc[2 * i], acc[2 * i + 1], Seq{});
  return acc[0];
}

// dw[o * cols + c] = sum_{m < mp} gt[o * mp + m] * xt[c * mp + m] (mp a multiple of lanes<T, A>), as
// tiles of TO x TC dot products (one per accumulator, TO * TC = L), each reduced across its lanes by
// lane_reduce; a tile's rows and columns past the block read its last ones and are dropped.
template <class T, class A>
void lane_weight(const T* gt, const T* xt, std::int64_t mp, std::int64_t rows, std::int64_t cols, T* dw) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  constexpr int TO = L == 4 ? 2 : 4, TC = L / TO;
  const std::int64_t nvec = mp / L;
  for (std::int64_t o0 = 0; o0 < rows; o0 += TO)
    for (std::int64_t c0 = 0; c0 < cols; c0 += TC) {
      const T* gr[TO];
      const T* xr[TC];
      for (int o = 0; o < TO; ++o) gr[o] = gt + imin(o0 + o, rows - 1) * mp;
      for (int c = 0; c < TC; ++c) xr[c] = xt + imin(c0 + c, cols - 1) * mp;
      V acc[TO * TC];
#pragma GCC unroll 16
      for (int i = 0; i < TO * TC; ++i) acc[i] = V(T(0));
      for (std::int64_t v = 0; v < nvec; ++v) {
        V xv[TC];
#pragma GCC unroll 4
        for (int c = 0; c < TC; ++c) xv[c] = simd::load<T, A>(xr[c] + v * L);
#pragma GCC unroll 4
        for (int o = 0; o < TO; ++o) {
          const V gv = simd::load<T, A>(gr[o] + v * L);
#pragma GCC unroll 4
          for (int c = 0; c < TC; ++c) acc[o * TC + c] += gv * xv[c];
        }
      }
      const V r = lane_reduce<T, A>(acc);
      for (int o = 0; o < TO && o0 + o < rows; ++o)
        for (int c = 0; c < TC && c0 + c < cols; ++c) dw[(o0 + o) * cols + c0 + c] = simd::lane(r, o * TC + c);
    }
}

// ---- Tile kernels (outputs in the lanes; Note [Tile kernels] in block_sparse_kernels.cpp) ----

// acc += broadcast(*p) * w on the registers (GCC's vector arithmetic: the load of *p is shared by a tile
// row's multiply-adds).
template <class R, class T>
inline void fma_broadcast(R& acc, R w, const T* p) {
  acc += *p * w;
}
#if defined(__AVX512F__)
// The same as one vfmadd231ps with an embedded broadcast ({1to16}) memory operand. The tiles'
// broadcasts written as `acc += x * w` compile to a separate vbroadcastss per row (one register,
// reused by the row's NV FMAs), which on Zen 4 takes a floating-point pipe slot: 6 per 24 FMAs, what
// the tiles trailed libxsmm's JIT kernels by (Note [Tile kernels] in block_sparse_kernels.cpp; figures
// in bench/results/tuning_notes.md).
// The same fused multiply-add in the same order, so the results are unchanged. The tiles hold raw
// registers (an asm operand bound to a member of an xsimd batch kept the accumulators in memory).
inline void fma_broadcast(__m512& acc, __m512 w, const float* p) {
  asm("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
}
#endif

// out[r * ldo + c] (+)= sum_s sum_k a[r * lda + s.off + k] * s.coef[k * s.ldc + cj + c] for r < R,
// c < NV * lanes<T, A>. With accumulate the sums continue from out; with bias (last chunk), bias[c] is
// added to the finished sums. R is a template parameter so that the row offsets are constants (a
// runtime row count kept the row pointers on the stack, one extra load per broadcast).
template <class T, class A, int R, int NV>
void row_tile(const T* a, std::int64_t lda, const TileSeg<T>* segs, std::int64_t nseg, std::int64_t cj, T* out,
              std::int64_t ldo, bool accumulate, const T* bias) {
  using Reg = typename simd::batch<T, A>::register_type;
  constexpr int L = simd::lanes<T, A>;
  Reg acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? simd::load<T, A>(out + r * ldo + v * L).data : Reg{};
  for (std::int64_t s = 0; s < nseg; ++s) {
    const TileSeg<T>& sg = segs[s];
    const T* c = sg.coef + cj;
    const T* ap = a + sg.off;
    const std::int64_t ldc = sg.ldc, len = sg.len;
    for (std::int64_t k = 0; k < len; ++k) {
      Reg w[NV];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) w[v] = simd::load<T, A>(c + v * L).data;
      c += ldc;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) fma_broadcast(acc[r][v], w[v], ap + r * lda);
      ++ap;
    }
  }
  Reg bv[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) bv[v] = bias ? simd::load<T, A>(bias + v * L).data : Reg{};
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) simd::store<T, A>(out + r * ldo + v * L, simd::batch<T, A>(acc[r][v] + bv[v]));
}

template <class T>
using RowTileFn = void (*)(const T*, std::int64_t, const TileSeg<T>*, std::int64_t, std::int64_t, T*, std::int64_t,
                           bool, const T*);

// d[i * ldd + c] = bias[c] + sum_s sum_k a[i * lda + segs[s].off + k] * segs[s].coef[k * ldc + c] for i < mt,
// c < width (bias may be null: zero), by row tiles of up to rmax rows x tw columns (tiles[nr - 1] runs one
// of nr rows). The segments are taken in chunks of about chunk_k inner indices, each chunk swept by every
// row tile and column chunk.
template <class T>
void tile_sweep(const T* a, std::int64_t lda, std::int64_t mt, const TileSeg<T>* segs, std::int64_t nseg,
                std::int64_t width, T* d, std::int64_t ldd, const T* bias, std::int64_t chunk_k, std::int64_t tw,
                std::int64_t rmax, const RowTileFn<T>* tiles) {
  for (std::int64_t c0 = 0; c0 < nseg;) {
    std::int64_t c1 = c0, kk = 0;
    while (c1 < nseg && (c1 == c0 || kk + segs[c1].len <= chunk_k)) kk += segs[c1++].len;
    const bool last = c1 == nseg;
    for (std::int64_t i = 0; i < mt; i += rmax) {
      const std::int64_t nr = imin(rmax, mt - i);
      for (std::int64_t j = 0; j < width; j += tw)
        tiles[nr - 1](a + i * lda, lda, segs + c0, c1 - c0, j, d + i * ldd + j, ldd, c0 > 0,
                      last && bias ? bias + j : nullptr);
    }
    c0 = c1;
  }
  if (nseg == 0)
    for (std::int64_t i = 0; i < mt; ++i)
      for (std::int64_t c = 0; c < width; ++c) d[i * ldd + c] = bias ? bias[c] : T(0);
}

// out[r * ldo + c] (+)= sum_{i < mc} gp[i * ldg + r] * xp[i * ldx + c] for r < R, c < NV * lanes<T, A>: a
// tile of the weight gradient accumulated down the batch. Each broadcast g value stays in a register for
// the row's NV FMAs (on AVX-512, embedded broadcasts, one memory operand per FMA, made this kernel slower
// for 64 groups of 64; bench/results/tuning_notes.md, "Block-sparse linear").
template <class T, class A, int R, int NV>
void outer_tile(const T* gp, std::int64_t ldg, const T* xp, std::int64_t ldx, std::int64_t mc, T* out, std::int64_t ldo,
                bool accumulate) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  V acc[R][NV];
  tile_load(acc, out, ldo, accumulate);
  for (std::int64_t i = 0; i < mc; ++i) {
    V xv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) xv[v] = simd::load<T, A>(xp + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const T gv = gp[r];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] += gv * xv[v];
    }
    gp += ldg;
    xp += ldx;
  }
  tile_store(out, ldo, acc);
}

}  // namespace
}  // namespace xgrad::detail::bsl
