// xgrad's own GEMM (Note [Packed GEMM] in gemm_loops.hpp): the baseline kernel family, instantiated for
// the library's architecture (xsimd::default_arch: AVX2 + FMA with the default XGRAD_ARCH), the choice
// between it and the AVX-512 family of gemm_simd512.cpp, and the per-thread packing workspace.
#include "xgrad/ops/kernels/gemm_kernels.hpp"

#include <cstddef>
#include <new>
#include <vector>

#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/ops/kernels/conv_loops.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

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
// accumulators; kc = 256 (B panel 16 KB of floats), mc = 96 (A block 96 KB of floats): kc = 384 was
// not faster (forced with XGRAD_CPU_CAPABILITY=avx2 on the machine of docs/performance.md;
// bench/results/tuning_notes.md, "GEMM blocking"). The AVX-512 blocking is in gemm_simd512.cpp.
constexpr int kMR = 6, kNV = 2;
constexpr std::int64_t kKC = 256, kMCf = 96, kMCd = 96, kNC = 1024;

void sgemm(const Args<float>& g, float* ws) { packed_gemm<float, Arch, kMR, kNV, kKC, kMCf, kNC>(g, ws); }
void dgemm(const Args<double>& g, double* ws) { packed_gemm<double, Arch, kMR, kNV, kKC, kMCd, kNC>(g, ws); }
void sconv(const ConvArgs<float>& g) { direct_conv_loops<float, Arch, kMR, kNV>(g); }
void dconv(const ConvArgs<double>& g) { direct_conv_loops<double, Arch, kMR, kNV>(g); }
// Note [Direct weight gradient]: 4 x 3 tiles, 12 accumulators, the 3 image vectors and a grid vector
// of one step fill the 16 registers; of 2 x 4, 3 x 3, 3 x 4 (which spills) and 4 x 3, 4 x 3 was the
// fastest on bench/conv_step's conv block with XGRAD_CPU_CAPABILITY=avx2.
// Note [Co-vectorised weight gradient] with tiles of 2 output vectors x 4 input channels (8
// accumulators) and element-by-element transposes: faster than the position tiles on the conv
// block's 32->32 at 14x14 and on grouped4 with AVX2 forced on the Zen 4; tiles of one vector x 8
// input channels had been slower than them on the conv block (bench/results/tuning_notes.md, "Direct
// weight gradient tiles" and "Co-vectorised weight gradient"). Float only: the double kernels serve
// gradchecks.
void sconv_weight(const ConvWeightArgs<float>& g) { conv_weight<float, Arch, 4, 3, 8>(g); }
void dconv_weight(const ConvWeightArgs<double>& g) { conv_weight<double, Arch, 4, 3, 0>(g); }

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

constexpr Kernels kBaseline = {baseline_isa(),
                               &sgemm,
                               &dgemm,
                               {kMR, kNV* kLf, kKC, kMCf, kNC},
                               {kMR, kNV* kLd, kKC, kMCd, kNC},
                               &sconv,
                               &dconv,
                               &sconv_weight,
                               &dconv_weight};

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

// Note [Small GEMMs]: below kSmallWork multiply-adds the packing costs more than the product (a
// depthwise convolution's per-sample GEMMs are 1 x 784 x 9: packing B each call made the whole
// depthwise step of bench/conv_step.cpp several times slower than with OpenBLAS;
// bench/results/tuning_notes.md, "Small GEMMs"), so such products run as plain
// loops: without trans_b, each row of C accumulates the rows of B scaled by A's entries (contiguous,
// vectorised); with trans_b, dot products of contiguous rows (in two vectors of lane-wise partial sums
// added by a fixed tree when A's rows are contiguous too). Each element's sum has an order fixed by
// the shape, and the choice depends on the shape only, so results stay the same at any thread count.
constexpr std::int64_t kSmallWork = 32768;

template <class T>
void small_gemm(const Args<T>& g) {
  const auto a_at = [&](std::int64_t i, std::int64_t kk) {
    return g.trans_a ? g.a[kk * g.lda + i] : g.a[i * g.lda + kk];
  };
  const auto store = [&](T* c, T v) { *c = g.beta == T(0) ? g.alpha * v : g.alpha * v + g.beta * *c; };
  if (!g.trans_b) {
    thread_local std::vector<T> acc;
    acc.resize(static_cast<std::size_t>(g.n));
    T* r = acc.data();
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) r[j] = T(0);
      for (std::int64_t kk = 0; kk < g.k; ++kk) {
        const T av = a_at(i, kk);
        const T* brow = g.b + kk * g.ldb;
        for (std::int64_t j = 0; j < g.n; ++j) r[j] += av * brow[j];
      }
      T* crow = g.c + i * g.ldc;
      for (std::int64_t j = 0; j < g.n; ++j) store(crow + j, r[j]);
    }
    return;
  }
  using B = simd::batch<T, Arch>;
  constexpr std::int64_t L = simd::lanes<T, Arch>;
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      const T* brow = g.b + j * g.ldb;
      T sum = T(0);
      std::int64_t kk = 0;
      if (!g.trans_a && g.k >= 2 * L) {  // both rows contiguous: L lanes of partial sums, then a fixed tree
        const T* arow = g.a + i * g.lda;
        B acc0(T(0)), acc1(T(0));
        for (; kk + 2 * L <= g.k; kk += 2 * L) {
          acc0 = xsimd::fma(simd::load<T, Arch>(arow + kk), simd::load<T, Arch>(brow + kk), acc0);
          acc1 = xsimd::fma(simd::load<T, Arch>(arow + kk + L), simd::load<T, Arch>(brow + kk + L), acc1);
        }
        sum = simd::tree_sum(acc0 + acc1);
      }
      for (; kk < g.k; ++kk) sum += a_at(i, kk) * brow[kk];
      store(g.c + i * g.ldc + j, sum);
    }
}

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
  if (g.m * g.n * g.k <= kSmallWork) {  // Note [Small GEMMs]
    small_gemm(g);
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

XGRAD_INSTANTIATE_FLOATING(gemm);

template <class T>
void direct_conv(const ConvArgs<T>& g) {
  if (g.m <= 0 || g.len <= 0) return;
  const Kernels& k = active();
  if constexpr (sizeof(T) == sizeof(float))
    k.sconv(g);
  else
    k.dconv(g);
}

XGRAD_INSTANTIATE_FLOATING(direct_conv);

template <class T>
void direct_conv_weight(const ConvWeightArgs<T>& g) {
  if (g.m <= 0 || g.k <= 0) return;
  const Kernels& k = active();
  if constexpr (sizeof(T) == sizeof(float))
    k.sconv_weight(g);
  else
    k.dconv_weight(g);
}

XGRAD_INSTANTIATE_FLOATING(direct_conv_weight);

}  // namespace gemmk

}  // namespace xgrad::detail
