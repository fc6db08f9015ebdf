// The AVX-512 family of xgrad's own GEMM (gemm_kernels.hpp): the loops of gemm_loops.hpp instantiated for
// xsimd::avx512bw with micro-tiles of 8 x 2 vectors and kc = 512. This file alone is compiled with
// -march=x86-64-v4; gemm_kernels.cpp reaches it through table() only when detail::avx512_enabled().
//
// Everything here has internal linkage except table(), and the only library templates it instantiates
// take the architecture as an argument or live in gemm_loops.hpp's unnamed namespace (Note [Kernel
// architectures] in simd.hpp); the test ops_simd_odr checks this file's object.
#include "xgrad/ops/kernels/gemm_kernels.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/kernels/conv_loops.hpp"
#endif

namespace xgrad::detail::gemm512 {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
using gemmk::Args;
using gemmk::Kernels;
constexpr int kLf = simd::lanes<float, A>, kLd = simd::lanes<double, A>;
static_assert(kLf == 16 && kLd == 8);

// Note [GEMM blocking] (gemm_kernels.cpp) for 32 registers: micro-tiles of 8 rows x 2 vectors (8 x 32
// floats, 8 x 16 doubles), 16 accumulators: enough FMAs in flight for two 512-bit FMA ports of latency 4,
// and on the m = 64 / 32 / 784 shapes of xgrad's layers no padded rows (12 x 32 computed 72 rows for 64).
// kc = 512: the C tile is loaded and stored once per 512 inner indices; the B panel (512 x 32 floats,
// 64 KB) streams from L2 with the hardware prefetcher. Measured on the AMD EPYC (Zen 4) of
// docs/performance.md, 1 thread, GFLOP/s float32 1024^3 / 64x256x784 / 32x784x9 / 64x196x576:
// 12x32 kc 256: 96 / 95 / 71 / 88; 12x32 kc 512: 103 / 95 / 72 / 87; 14x32 kc 512: 103 / 90 / 71 / 83;
// 8x32 kc 512: 99-100 / 98 / 79 / 91 (the differences at 1024^3 are within the run-to-run noise).
constexpr int kMR = 8, kNV = 2;
constexpr std::int64_t kKCf = 512, kKCd = 512, kMCf = 96, kMCd = 96, kNC = 1024;

void sgemm(const Args<float>& g, float* ws) { gemmk::packed_gemm<float, A, kMR, kNV, kKCf, kMCf, kNC>(g, ws); }
void dgemm(const Args<double>& g, double* ws) { gemmk::packed_gemm<double, A, kMR, kNV, kKCd, kMCd, kNC>(g, ws); }
// Note [Direct convolution]'s tiles are 8 rows x 3 vectors (24 accumulators; 3 image and 8 weight
// loads per 24 FMAs, against 2 and 8 per 16 with the GEMM's 8 x 2). Measured (a harness timing
// conv2d alone, alternating builds, 1 thread, forward / input gradient): grouped4 2.19-2.22 against
// 2.26-2.42 ms, the conv block's 32->32 at 14x14 2.15-2.18 / 2.19 against 2.22 / 2.29-2.37 ms,
// 32->32 at 28x28 8.35-8.50 / 8.98 against 8.56-8.76 / 9.9-10.1 ms.
constexpr int kConvNV = 3;
void sconv(const gemmk::ConvArgs<float>& g) { gemmk::direct_conv_loops<float, A, kMR, kConvNV>(g); }
void dconv(const gemmk::ConvArgs<double>& g) { gemmk::direct_conv_loops<double, A, kMR, kConvNV>(g); }
// Note [Direct weight gradient]: 4 x 6 tiles, 24 accumulators of the 32 registers (11 image, mask and
// grid loads per 24 FMAs where the tile's columns share a tap, 16 where they straddle two). Measured
// (bench/conv_step, 1 thread, ms, conv block / grouped4 / conv1d): 4 x 4 7.6 / 10.4 / 12.5; 6 x 4 7.6 /
// 8.8 / 11.6; 4 x 6 7.7 / 8.1 / 12.0 (conv1d then on 256 KB runs), with a mask per column; the shared
// mask of tap-major tiles then took the conv block from 6.6 to 6.25 ms and grouped4 from 8.5 to 8.1
// (alternating runs). Where the channels allow it, Note [Co-vectorised weight gradient] instead
// (tiles of 16 output x 24, 16 or 8 input channels, 16 x 16 transposes by shuffles): the weight
// gradient alone (a harness timing conv2d, alternating builds, 1 thread) 2.19-2.21 against 2.72-2.82 ms
// on the conv block's 32->32 at 14x14, 2.59-2.67 against 2.89-3.31 ms on grouped4.
void sconv_weight(const gemmk::ConvWeightArgs<float>& g) { gemmk::conv_weight<float, A, 4, 6, 24>(g); }
void dconv_weight(const gemmk::ConvWeightArgs<double>& g) { gemmk::conv_weight<double, A, 4, 6, 24>(g); }

constexpr Kernels kKernels = {
    "avx512", &sgemm,        &dgemm,       {kMR, kNV* kLf, kKCf, kMCf, kNC}, {kMR, kNV* kLd, kKCd, kMCd, kNC}, &sconv,
    &dconv,   &sconv_weight, &dconv_weight};

}  // namespace

const gemmk::Kernels* table() { return &kKernels; }
#else
const gemmk::Kernels* table() { return nullptr; }
#endif

}  // namespace xgrad::detail::gemm512
