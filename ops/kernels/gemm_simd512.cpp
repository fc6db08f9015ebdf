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
// 64 KB) streams from L2 with the hardware prefetcher. Of the tiles and kc tried on the AMD EPYC (Zen 4)
// of docs/performance.md (12x32 and 14x32, kc 256 and 512), 8x32 with kc 512 was as fast on 1024^3 and
// fastest on the small-m shapes of the layers (bench/results/tuning_notes.md, "GEMM blocking").
constexpr int kMR = 8, kNV = 2;
constexpr std::int64_t kKCf = 512, kKCd = 512, kMCf = 96, kMCd = 96, kNC = 1024;

void sgemm(const Args<float>& g, float* ws) { gemmk::packed_gemm<float, A, kMR, kNV, kKCf, kMCf, kNC>(g, ws); }
void dgemm(const Args<double>& g, double* ws) { gemmk::packed_gemm<double, A, kMR, kNV, kKCd, kMCd, kNC>(g, ws); }
// Note [Direct convolution]'s tiles are 8 rows x 3 vectors (24 accumulators; 3 image and 8 weight
// loads per 24 FMAs, against 2 and 8 per 16 with the GEMM's 8 x 2): faster than 8 x 2 tiles, forward
// and input gradient, on each convolution timed (grouped4 and the conv block's 32->32 at 14x14 and
// 28x28; bench/results/tuning_notes.md, "Direct convolution tiles").
constexpr int kConvNV = 3;
void sconv(const gemmk::ConvArgs<float>& g) { gemmk::direct_conv_loops<float, A, kMR, kConvNV>(g); }
void dconv(const gemmk::ConvArgs<double>& g) { gemmk::direct_conv_loops<double, A, kMR, kConvNV>(g); }
// Note [Direct weight gradient]: 4 x 6 tiles, 24 accumulators of the 32 registers (11 image, mask and
// grid loads per 24 FMAs where the tile's columns share a tap, 16 where they straddle two). Of 4 x 4,
// 6 x 4 and 4 x 6 on bench/conv_step's conv block, grouped4 and conv1d, 4 x 6 was clearly fastest on
// grouped4 and within a few percent of the best on the other two; sharing one mask vector per step
// among tap-major columns made it faster again. Where the channels allow it, Note [Co-vectorised
// weight gradient] instead (tiles of 16 output x 24, 16 or 8 input channels, 16 x 16 transposes by
// shuffles), faster than these tiles on the conv block and grouped4 (bench/results/tuning_notes.md,
// "Direct weight gradient tiles" and "Co-vectorised weight gradient").
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
