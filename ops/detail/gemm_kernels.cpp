// xgrad's own GEMM (Note [Packed GEMM] in gemm_loops.hpp): the baseline kernel family, instantiated for
// the library's architecture (xsimd::default_arch: AVX2 + FMA with the default XGRAD_ARCH), the choice
// between it and the AVX-512 family of gemm_simd512.cpp, and the per-thread packing workspace.
#include "xgrad/ops/detail/gemm_kernels.hpp"

#include <cstddef>
#include <new>

#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/ops/detail/gemm_loops.hpp"

namespace xgrad::detail {

namespace gemmk {
namespace {

using Arch = xsimd::default_arch;
constexpr int kLf = simd::lanes<float, Arch>, kLd = simd::lanes<double, Arch>;

// Note [GEMM blocking]: the micro-tile fills the vector registers with accumulators, leaving the B
// vectors of one inner index and a broadcast (the rest of Note [Packed GEMM] is in gemm_loops.hpp);
// kc x NR (the B panel) is read once per tile of the block from L1 or L2; the mc x kc block of A stays in
// L2; nc bounds the packed B block (kc x nc) to a few MB. Edge tiles take half the rows or one vector
// (micro_tile). With 16 registers (AVX2): 6 rows x 2 vectors (6 x 16 floats, 6 x 8 doubles), 12
// accumulators; kc = 256 (B panel 16 KB of floats), mc = 96 (A block 96 KB of floats). Measured
// (docs/performance.md, forced with XGRAD_CPU_CAPABILITY=avx2): kc = 384 was not faster (1024^3 float32
// 95 against 100-102 GFLOP/s). The AVX-512 blocking is in gemm_simd512.cpp.
constexpr int kMR = 6, kNV = 2;
constexpr std::int64_t kKC = 256, kMCf = 96, kMCd = 96, kNC = 1024;

void sgemm(const Args<float>& g, float* ws) { packed_gemm<float, Arch, kMR, kNV, kKC, kMCf, kNC>(g, ws); }
void dgemm(const Args<double>& g, double* ws) { packed_gemm<double, Arch, kMR, kNV, kKC, kMCd, kNC>(g, ws); }

constexpr const char* baseline_isa() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE3__)
  return "sse3";
#else
  return "scalar";
#endif
}

constexpr Kernels kBaseline = {
    baseline_isa(), &sgemm, &dgemm, {kMR, kNV* kLf, kKC, kMCf, kNC}, {kMR, kNV* kLd, kKC, kMCd, kNC}};

// The packing workspace of the calling thread: grown on demand, 64-byte aligned, freed at thread exit.
// Each thread packs into its own, so callers may run GEMMs from any number of tasks at once.
struct Workspace {
  void* p = nullptr;
  std::size_t bytes = 0;
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { ::operator delete (p, std::align_val_t{64}); }
  void* get(std::size_t want) {
    if (want > bytes) {
      ::operator delete (p, std::align_val_t{64});
      p = nullptr;
      bytes = 0;
      p = ::operator new (want, std::align_val_t{64});
      bytes = want;
    }
    return p;
  }
};
thread_local Workspace t_workspace;

}  // namespace

const Kernels& baseline() { return kBaseline; }

const Kernels& active() {
  if (avx512_enabled())
    if (const Kernels* k = gemm512::table()) return *k;
  return kBaseline;
}

template <class T>
void gemm(const Args<T>& g) {
  if (g.alpha == T(0)) {  // as BLAS: C = beta C, A and B not read
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        T& c = g.c[i * g.ldc + j];
        c = g.beta == T(0) ? T(0) : g.beta * c;
      }
    return;
  }
  const Kernels& k = active();
  const bool is_float = sizeof(T) == sizeof(float);
  const Blocking& bl = is_float ? k.sblock : k.dblock;
  // Bounded by the blocking (kc * (mc + nc) elements), whatever the sizes.
  const auto elems = static_cast<std::size_t>(workspace_elements(bl, g.m, g.n, g.k));
  T* ws = static_cast<T*>(t_workspace.get(elems * sizeof(T)));
  if constexpr (sizeof(T) == sizeof(float))
    k.sgemm(g, ws);
  else
    k.dgemm(g, ws);
}

template void gemm<float>(const Args<float>&);
template void gemm<double>(const Args<double>&);

}  // namespace gemmk

}  // namespace xgrad::detail
