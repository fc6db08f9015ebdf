#pragma once
// Internal to ops/kernels/gemm_kernels.cpp and gemm_simd512.cpp: xgrad's packed GEMM as templates over
// the element type T, the architecture A (Note [Kernel architectures] in simd.hpp) and the blocking.
//
// Note [Packed GEMM]: the loops of Goto and van de Geijn (BLIS's five loops around a micro-kernel),
// row-major. For each block of nc columns of op(B) and each panel of kc inner indices, the kc x nc block
// of op(B) is copied ("packed") into panels of NR columns, each stored as kc rows of NR contiguous
// values; for each block of mc rows of op(A), that mc x kc block is packed into panels of MR rows, each
// stored as kc columns of MR values. The micro-kernel then computes an MR x NR tile of C as MR x NR/L
// vector accumulators (L lanes): per inner index it loads NR/L vectors of the B panel, broadcasts MR
// values of the A panel and does MR x NR/L fused multiply-adds, all operands streaming from the packed
// panels in order (the B panel, kc x NR, is reused from L1 or L2 by every tile of a column of tiles; the
// A block stays in L2). Packing also makes every transpose the same micro-kernel, and pads the edges
// with zeros, so a partial tile is computed by the same code (on fewer rows or vectors where it can) and
// only its valid part is written.
//
// Summation order (determinism): element (i, j) of C is, per panel of kc inner indices p0.., the sum
// acc = fma(a[i][p], b[p][j], acc) over p ascending from zero, and C takes the panels in order: the first
// c = alpha * acc (beta == 0, C not read) or c = fma(beta, c, alpha * acc), the next ones c = fma(alpha,
// acc, c). That order depends on k and the family's kc only: not on m, n, the tile the element falls in
// (edge tiles run the same code), where a caller cuts C into blocks, or the thread count.
//
// Everything here is in an unnamed namespace and calls no standard-library function template, so each
// including file compiles its own copy (see block_sparse_tiles.hpp; the test ops_simd_odr checks the
// AVX-512 object).
#include <cstdint>
#include <type_traits>

#include "xgrad/ops/kernels/gemm_kernels.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail::gemmk {
namespace {

template <class I>
constexpr I gmin(I a, I b) {
  return b < a ? b : a;
}

// How a tile's sums enter C (Note [Packed GEMM]): the first panel over C's old values scaled by beta or
// without reading C (beta == 0), the next ones added.
enum class Update { overwrite, scale, add };

// C[i * ldc + j] for i < mr <= MR, j < nr <= NV * L takes the tile op(A)[0..MR) x op(B)[.., 0..NV * L) of
// the packed panels ap (kc x MR) and bp (kc x NV * L), as Note [Packed GEMM] says. Only MU <= MR rows and
// NU <= NV vectors of the tile are computed (the panels keep their strides MR and NV * L): the last rows
// or columns of C take a narrower tile (micro_tile) instead of a full one on padding. A partial tile
// (mr < MU or nr < NU * L) computes on the zero padding of the panels and writes its valid part only:
// rows past mr are skipped, a vector that crosses nr goes through a scratch vector with the same vector
// operations as a full one. Each element is its own accumulator, so its bits do not depend on the tile
// it falls in.
template <class T, class A, int MR, int NV, int MU = MR, int NU = NV>
inline void micro_kernel(std::int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c,
                         std::int64_t ldc, std::int64_t mr, std::int64_t nr, T alpha, T beta, Update up) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>, NR = NV * L;
  static_assert(MU <= MR && NU <= NV);
  V acc[MU][NU];
#pragma GCC unroll 16
  for (int i = 0; i < MU; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NU; ++v) acc[i][v] = V(T(0));
  for (std::int64_t p = 0; p < kc; ++p) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NU; ++v) b[v] = simd::load<T, A>(bp + p * NR + v * L);
#pragma GCC unroll 16
    for (int i = 0; i < MU; ++i) {
      const V a(ap[p * MR + i]);
#pragma GCC unroll 4
      for (int v = 0; v < NU; ++v) acc[i][v] = xsimd::fma(a, b[v], acc[i][v]);
    }
  }
  const V va(alpha), vb(beta);
  // The new value of C's vector at ci (old: its current value; not read for Update::overwrite).
  const auto update = [&](const V& s, const T* old) {
    if (up == Update::overwrite) return V(va * s);
    if (up == Update::scale) return V(xsimd::fma(vb, simd::load<T, A>(old), va * s));
    return V(xsimd::fma(va, s, simd::load<T, A>(old)));
  };
  if (mr == MU && nr == NU * L) {
#pragma GCC unroll 16
    for (int i = 0; i < MU; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NU; ++v) {
        T* ci = c + i * ldc + v * L;
        simd::store<T, A>(ci, update(acc[i][v], ci));
      }
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MU; ++i) {
    if (i >= mr) break;
#pragma GCC unroll 4
    for (int v = 0; v < NU; ++v) {
      T* ci = c + i * ldc + v * L;
      const std::int64_t rem = nr - v * L;
      if (rem >= L) {
        simd::store<T, A>(ci, update(acc[i][v], ci));
      } else if (rem > 0) {
        alignas(64) T tmp[L];
        for (int l = 0; l < L; ++l) tmp[l] = up != Update::overwrite && l < rem ? ci[l] : T(0);
        simd::store<T, A>(tmp, update(acc[i][v], tmp));
        for (std::int64_t l = 0; l < rem; ++l) ci[l] = tmp[l];
      }
    }
  }
}

// The tile at c (mr <= MR rows, nr <= NV * L columns): the full micro-kernel, or for the last rows and
// columns of C one of MR / 2 rows and as many vectors as nr needs.
template <class T, class A, int MR, int NV>
inline void micro_tile(std::int64_t kc, const T* ap, const T* bp, T* c, std::int64_t ldc, std::int64_t mr,
                       std::int64_t nr, T alpha, T beta, Update up) {
  constexpr int L = simd::lanes<T, A>;
  static_assert(NV == 2, "micro_tile: tiles of 2 vectors");
  if (mr > MR / 2) {
    if (nr > L)
      micro_kernel<T, A, MR, NV>(kc, ap, bp, c, ldc, mr, nr, alpha, beta, up);
    else
      micro_kernel<T, A, MR, NV, MR, 1>(kc, ap, bp, c, ldc, mr, nr, alpha, beta, up);
  } else {
    if (nr > L)
      micro_kernel<T, A, MR, NV, MR / 2, NV>(kc, ap, bp, c, ldc, mr, nr, alpha, beta, up);
    else
      micro_kernel<T, A, MR, NV, MR / 2, 1>(kc, ap, bp, c, ldc, mr, nr, alpha, beta, up);
  }
}

// Packs rows [j0, j0 + nc) x inner indices [p0, p0 + kc) of op(B) (B stored k x n, or n x k when trans)
// into panels of NR columns: panel q holds kc rows of NR values, zero past column nc.
template <class T, int NR>
void pack_b(const T* b, std::int64_t ldb, bool trans, std::int64_t p0, std::int64_t kc, std::int64_t j0,
            std::int64_t nc, T* __restrict dst) {
  for (std::int64_t q = 0; q < nc; q += NR) {
    const std::int64_t w = gmin<std::int64_t>(NR, nc - q);
    T* d = dst + q * kc;
    if (!trans) {
      const T* s = b + p0 * ldb + j0 + q;
      if (w == NR) {
        for (std::int64_t p = 0; p < kc; ++p)
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) d[p * NR + j] = s[p * ldb + j];
      } else {
        for (std::int64_t p = 0; p < kc; ++p)
          for (int j = 0; j < NR; ++j) d[p * NR + j] = j < w ? s[p * ldb + j] : T(0);
      }
    } else {
      // op(B)[p][j] = b[j * ldb + p]: each stored row of B is one column of the panel.
      const T* s = b + (j0 + q) * ldb + p0;
      for (std::int64_t j = 0; j < NR; ++j) {
        if (j < w)
          for (std::int64_t p = 0; p < kc; ++p) d[p * NR + j] = s[j * ldb + p];
        else
          for (std::int64_t p = 0; p < kc; ++p) d[p * NR + j] = T(0);
      }
    }
  }
}

// Packs rows [i0, i0 + mc) x inner indices [p0, p0 + kc) of op(A) (A stored m x k, or k x m when trans)
// into panels of MR rows: panel r holds kc columns of MR values, zero past row mc.
template <class T, int MR>
void pack_a(const T* a, std::int64_t lda, bool trans, std::int64_t i0, std::int64_t mc, std::int64_t p0,
            std::int64_t kc, T* __restrict dst) {
  for (std::int64_t r = 0; r < mc; r += MR) {
    const std::int64_t h = gmin<std::int64_t>(MR, mc - r);
    T* d = dst + r * kc;
    if (trans) {
      // op(A)[i][p] = a[p * lda + i]: MR contiguous values per inner index.
      const T* s = a + p0 * lda + i0 + r;
      if (h == MR) {
        for (std::int64_t p = 0; p < kc; ++p)
#pragma GCC unroll 16
          for (int i = 0; i < MR; ++i) d[p * MR + i] = s[p * lda + i];
      } else {
        for (std::int64_t p = 0; p < kc; ++p)
          for (int i = 0; i < MR; ++i) d[p * MR + i] = i < h ? s[p * lda + i] : T(0);
      }
    } else {
      const T* s = a + (i0 + r) * lda + p0;
      for (std::int64_t i = 0; i < MR; ++i) {
        if (i < h)
          for (std::int64_t p = 0; p < kc; ++p) d[p * MR + i] = s[i * lda + p];
        else
          for (std::int64_t p = 0; p < kc; ++p) d[p * MR + i] = T(0);
      }
    }
  }
}

// The GEMM of Note [Packed GEMM] with micro-tiles of MR x NV vectors and panels of KC, blocks of MC rows
// (a multiple of MR) and NC columns (a multiple of NV * L). ws: workspace_elements(blocking) elements.
template <class T, class A, int MR, int NV, std::int64_t KC, std::int64_t MC, std::int64_t NC>
void packed_gemm(const Args<T>& g, T* ws) {
  constexpr int NR = NV * simd::lanes<T, A>;
  static_assert(MC % MR == 0 && NC % NR == 0, "gemm: blocks of whole micro-tiles");
  const std::int64_t m = g.m, n = g.n, k = g.k;
  const std::int64_t kcmax = gmin<std::int64_t>(KC, k);
  T* bpack = ws;
  T* apack = ws + kcmax * gmin<std::int64_t>(NC, (n + NR - 1) / NR * NR);
  for (std::int64_t jc = 0; jc < n; jc += NC) {
    const std::int64_t nc = gmin<std::int64_t>(NC, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += KC) {
      const std::int64_t kc = gmin<std::int64_t>(KC, k - pc);
      pack_b<T, NR>(g.b, g.ldb, g.trans_b, pc, kc, jc, nc, bpack);
      const Update up = pc > 0 ? Update::add : g.beta == T(0) ? Update::overwrite : Update::scale;
      for (std::int64_t ic = 0; ic < m; ic += MC) {
        const std::int64_t mc = gmin<std::int64_t>(MC, m - ic);
        pack_a<T, MR>(g.a, g.lda, g.trans_a, ic, mc, pc, kc, apack);
        for (std::int64_t jr = 0; jr < nc; jr += NR) {
          const std::int64_t nr = gmin<std::int64_t>(NR, nc - jr);
          const T* bp = bpack + jr * kc;
          for (std::int64_t ir = 0; ir < mc; ir += MR) {
            const std::int64_t mr = gmin<std::int64_t>(MR, mc - ir);
            T* c = g.c + (ic + ir) * g.ldc + jc + jr;
            micro_tile<T, A, MR, NV>(kc, apack + ir * kc, bp, c, g.ldc, mr, nr, g.alpha, g.beta, up);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace xgrad::detail::gemmk
