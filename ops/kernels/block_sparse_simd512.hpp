#pragma once
// Internal to ops/kernels/block_sparse_kernels.cpp. Note [AVX-512 kernels] (core/detail/cpu.hpp): on CPUs with AVX-512
// the float32 lane and tile kernels of block_sparse_linear (Notes [Lane kernels] and [Tile kernels]
// there) run 16 lanes wide with up to 24 accumulators (AVX-512 has 32 vector registers, AVX2 16).
// They are the loops of the 8-lane kernels (block_sparse_tiles.hpp) instantiated with wider tiles in
// block_sparse_simd512.cpp, compiled for x86-64-v4, and are reached only through kernels(), which
// returns null unless detail::avx512_enabled().
//
// Each output element is summed with the same operations in the same order as by the 8-lane kernels
// (fused multiply-adds over the blocks in order, the inner index ascending; the weight gradient's
// tiles down the batch), so forward, input gradient and the tile weight gradient give results
// identical to the AVX2 kernels. The one exception is the lane weight gradient (groups up to 16 wide),
// whose dot products run along the batch in the vector lanes and end in a 16-lane instead of an 8-lane
// reduction tree: its float32 results differ from the AVX2 ones in the last bits. The identity holds
// in optimized builds: at -O1 (the asan preset) GCC contracts the AVX2 kernels' multiply-adds
// differently, and the widths agree to float32 rounding only. Either width is deterministic and
// independent of the thread count.
//
// This header includes nothing but <cstdint>: see block_sparse_simd512.cpp for why.
#include <cstdint>

namespace xgrad::detail::bsl512 {

/// One segment of a lane sweep: rows a, a + lda, ... (len of them) of a transposed operand, with the
/// coefficient of output o at inner index k at coef[k * stride_k + o * stride_out]. (A template: the
/// 8-lane kernels take the same segments in float64 too.)
template <class T>
struct LaneSeg {
  const T* a;
  std::int64_t len;
  const T* coef;
  std::int64_t stride_k, stride_out;
};

/// One segment of a tile sweep: inner indices a[i * lda + off + k], k < len, with the output
/// coefficients at coef[k * ldc + c].
template <class T>
struct TileSeg {
  std::int64_t off, len;
  const T* coef;
  std::int64_t ldc;
};

struct Kernels {
  /// out[o * ldo + i] = sum_s sum_k coef_s(o, k) * segs[s].a[k * lda + m0 + i] for o < nout, i < nrows
  /// (nrows a multiple of 16). The segments are taken in chunks of about chunk_k inner indices.
  void (*lane_group)(const LaneSeg<float>* segs, std::int64_t nseg, std::int64_t lda, std::int64_t m0,
                     std::int64_t nrows, std::int64_t nout, float* out, std::int64_t ldo, std::int64_t chunk_k);
  /// dw[o * cols + c] = sum_{m < mp} gt[o * mp + m] * xt[c * mp + m] (mp a multiple of 16).
  void (*lane_weight)(const float* gt, const float* xt, std::int64_t mp, std::int64_t rows, std::int64_t cols,
                      float* dw);
  /// d[i * ldd + c] = bias[c] + sum_s sum_k a[i * lda + segs[s].off + k] * segs[s].coef[k * ldc + c] for
  /// i < mt, c < width (width a multiple of 32; bias may be null: zero); chunks of about chunk_k.
  void (*tile_group)(const float* a, std::int64_t lda, std::int64_t mt, const TileSeg<float>* segs, std::int64_t nseg,
                     std::int64_t width, float* d, std::int64_t ldd, const float* bias, std::int64_t chunk_k);
  /// d[o * cols + c] = sum_{i < m} gb[i * ldg + o] * xb[i * ldx + c] (cols a multiple of 32), summed
  /// down the batch in chunks of `chunk` rows.
  void (*outer_block)(const float* gb, std::int64_t ldg, const float* xb, std::int64_t ldx, std::int64_t m,
                      std::int64_t rows, std::int64_t cols, std::int64_t chunk, float* d);
};

/// The AVX-512 kernels, or null when the library was built without them (non-x86 compilers).
/// Defined in block_sparse_simd512.cpp; does not itself check the CPU.
const Kernels* table();
/// table() when detail::avx512_enabled(), else null (defined in block_sparse_kernels.cpp).
const Kernels* kernels();

/// Widths (in floats) the tile kernels take: multiples of 32.
constexpr bool tile_width_ok(std::int64_t width) { return width > 0 && width % 32 == 0; }

}  // namespace xgrad::detail::bsl512
