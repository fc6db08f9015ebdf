// The AVX-512 family of xgrad's own GEMM (gemm_kernels.hpp): the loops of gemm_loops.hpp instantiated for
// xsimd::avx512bw with micro-tiles for 32 vector registers. This file alone is compiled with
// -march=x86-64-v4; gemm_kernels.cpp reaches it through table() only when detail::avx512_enabled().
//
// Everything here has internal linkage except table(), and the only library templates it instantiates
// take the architecture as an argument or live in gemm_loops.hpp's unnamed namespace (Note [Kernel
// architectures] in simd.hpp); the test ops_simd_odr checks this file's object.
#include "xgrad/ops/detail/gemm_kernels.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/detail/gemm_loops.hpp"
#endif

namespace xgrad::detail::gemm512 {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
using gemmk::Args;
using gemmk::Kernels;
constexpr int kLf = simd::lanes<float, A>, kLd = simd::lanes<double, A>;
static_assert(kLf == 16 && kLd == 8);

// Note [GEMM blocking] (gemm_kernels.cpp) for 32 registers: micro-tiles of 12 rows x 2 vectors, 24
// accumulators, the two B vectors and a broadcast (12 x 32 floats, 12 x 16 doubles).
constexpr int kMR = 12, kNV = 2;
constexpr std::int64_t kKCf = 256, kKCd = 256, kMCf = 96, kMCd = 96, kNC = 1024;

void sgemm(const Args<float>& g, float* ws) { gemmk::packed_gemm<float, A, kMR, kNV, kKCf, kMCf, kNC>(g, ws); }
void dgemm(const Args<double>& g, double* ws) { gemmk::packed_gemm<double, A, kMR, kNV, kKCd, kMCd, kNC>(g, ws); }

constexpr Kernels kKernels = {"avx512", &sgemm, &dgemm, {kMR, kNV * kLf, kKCf, kMCf, kNC}, {kMR, kNV * kLd, kKCd, kMCd, kNC}};

}  // namespace

const gemmk::Kernels* table() { return &kKernels; }
#else
const gemmk::Kernels* table() { return nullptr; }
#endif

}  // namespace xgrad::detail::gemm512
