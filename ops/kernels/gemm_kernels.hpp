#pragma once
// Internal: xgrad's own dense GEMM (Note [Packed GEMM] in gemm_loops.hpp), the backend blas::gemm
// (ops/kernels/blas.hpp) uses when OpenBLAS would run kernels below the CPU's instruction set
// (Note [GEMM backend] in blas.cpp). The loops are written once, over the architecture
// (gemm_loops.hpp); gemm_kernels.cpp instantiates them for the library's baseline (XGRAD_ARCH,
// AVX2 + FMA by default) and gemm_simd512.cpp for AVX-512, reached through gemm512::table() only when
// detail::avx512_enabled() (Note [Kernel architectures] in simd.hpp).
//
// This header includes nothing but <cstdint>: the AVX-512 file includes it, and every inline or
// template function it pulled in would be a symbol the linker could merge across instruction sets.
#include <cstdint>

namespace xgrad::detail::gemmk {

/// One row-major GEMM, C = alpha op(A) op(B) + beta C, as blas::gemm takes it (m, n, k > 0).
template <class T>
struct Args {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  T alpha;
  const T* a;
  std::int64_t lda;
  const T* b;
  std::int64_t ldb;
  T beta;
  T* c;
  std::int64_t ldc;
};

/// Note [Direct convolution]: one sample (and group) of a convolution with unit strides whose grid is
/// as wide as its image (Note [Contiguous im2col] in ops/conv.cpp), computed without an im2col matrix:
///   out[o * ldo + l] = sum over t < taps, c < k / taps (in that order, one accumulator) of
///                      w(o, c * taps + t) * (mask[t * mask_ld + l] ? img[c * plane + shift[t] + l] : 0)
/// for o < m, l < len. The mask holds T values whose bits are all ones (take) or all zeros (skip: a
/// padding position or a wrapped one, whatever the image holds there, NaN included). w is packed:
/// for each panel of mr (the family's Blocking::mr) output rows, k x mr values, row o of panel r at
/// w[r * mr * k + kk * mr + (o - r * mr)], zero past m. Reads of img reach c * plane + shift[t] + l for
/// l < len rounded up to the family's nr, all of which must be in bounds; the mask covers as many.
/// ones[2 t], ones[2 t + 1]: a range of positions [lo, hi) where tap t's mask is all ones (the
/// kernel skips the mask there).
template <class T>
struct ConvArgs {
  std::int64_t m, len, k, taps;
  const T* w;
  const T* img;
  std::int64_t plane;
  const std::int64_t* shift;
  const T* mask;
  std::int64_t mask_ld;
  const std::int64_t* ones;
  T* out;
  std::int64_t ldo;
};

/// Note [Direct weight gradient]: the weight gradient of Note [Direct convolution]'s product over a
/// run of blocks (samples), without an im2col matrix:
///   dw[o * ldw + c * taps + t] (+)= sum over blocks s in order, l < len of
///                                   grid[s][o * len + l] * (mask[t * mask_ld + l] ? img[s][c * plane + shift[t] + l] :
///                                   0)
/// for o < m, c * taps + t < k; "+=" when accumulate. Each element is summed lane-wise (lane l % L of
/// the family's vectors, over the blocks in order and l ascending) and its lanes then by a fixed tree;
/// or, where the family runs Note [Co-vectorised weight gradient] (gemm_loops.hpp: work given, m a
/// multiple of L or 2 L, k / taps a multiple of 8), in one accumulator over the blocks in order and tap t's
/// valid positions ascending. Either way the order depends on the shapes and the family only.
/// The reads of img and of each grid row reach l < len rounded up to the vector length (in bounds:
/// the last block's grid needs that many values after its end; the lanes past len are not used).
/// ones[2 t], ones[2 t + 1]: a range of positions [lo, hi) where tap t's mask is all ones (the kernel
/// skips the mask there).
template <class T>
struct ConvWeightArgs {
  std::int64_t m, len, k, taps, blocks;
  const T* const* grid;
  const T* const* img;
  std::int64_t plane;
  const std::int64_t* shift;
  const T* mask;
  std::int64_t mask_ld;
  const std::int64_t* ones;
  T* dw;
  std::int64_t ldw;
  bool accumulate;
  /// Tap t's valid positions (its mask's ones) as runs [runs[2 r], runs[2 r + 1]) for
  /// run_start[t] <= r < run_start[t + 1], in increasing order.
  const std::int64_t* runs;
  const std::int64_t* run_start;
  /// Workspace of blocks x (len x m + plane x k / taps) elements, or null: Note [Co-vectorised weight
  /// gradient] (gemm_loops.hpp), which a family may use when it is given.
  T* work;
};

/// The blocking of one kernel family for one element type: micro-tiles of mr x nr elements of C,
/// panels of kc inner indices, blocks of mc rows of A and nc columns of B.
struct Blocking {
  std::int64_t mr, nr, kc, mc, nc;
};

/// Elements of workspace a kernel with blocking bl needs for an m x n x k product (the packed panels).
constexpr std::int64_t workspace_elements(const Blocking& bl, std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::int64_t kc = k < bl.kc ? k : bl.kc;
  const std::int64_t mc = (m < bl.mc ? (m + bl.mr - 1) / bl.mr * bl.mr : bl.mc);
  const std::int64_t nc = (n < bl.nc ? (n + bl.nr - 1) / bl.nr * bl.nr : bl.nc);
  return kc * (mc + nc);
}

/// One kernel family: the single-threaded GEMM for float and double, each with its blocking, given
/// workspace_elements(blocking, m, n, k) elements of 64-byte aligned workspace.
struct Kernels {
  const char* isa;  ///< "avx2", "avx512", ...
  void (*sgemm)(const Args<float>& g, float* workspace);
  void (*dgemm)(const Args<double>& g, double* workspace);
  Blocking sblock, dblock;
  void (*sconv)(const ConvArgs<float>& g);  ///< Note [Direct convolution]
  void (*dconv)(const ConvArgs<double>& g);
  void (*sconv_weight)(const ConvWeightArgs<float>& g);  ///< Note [Direct weight gradient]
  void (*dconv_weight)(const ConvWeightArgs<double>& g);
};

/// The baseline family (gemm_kernels.cpp).
const Kernels& baseline();
/// table() when detail::avx512_enabled() (gemm_kernels.cpp), else the baseline.
const Kernels& active();

/// xgrad's GEMM with the active family (m, n, k > 0; sizes checked by the caller). Single-threaded;
/// each element of C is summed in an order fixed by k and the family's blocking only (Note [Packed GEMM]).
template <class T>
void gemm(const Args<T>& g);

/// Note [Direct convolution] with the active family (its Blocking gives the packing of w and the
/// rounding of len). Single-threaded; each element's sum has the order the note gives.
template <class T>
void direct_conv(const ConvArgs<T>& g);

/// Note [Direct weight gradient] with the active family. Single-threaded.
template <class T>
void direct_conv_weight(const ConvWeightArgs<T>& g);

}  // namespace xgrad::detail::gemmk

namespace xgrad::detail::gemm512 {
/// The AVX-512 family, or null when the library was built without it. Defined in gemm_simd512.cpp;
/// does not itself check the CPU.
const gemmk::Kernels* table();
}  // namespace xgrad::detail::gemm512
