#pragma once
// Internal: xgrad's one BLAS entry point (in the spirit of ATen's native/CPUBlas.h). Every dense GEMM
// in xgrad goes through blas::gemm (ops/matmul.cpp's tiled detail::gemm, the block-sparse kernels),
// and the OpenBLAS threading policy lives with it in blas.cpp: OpenBLAS runs single-threaded, and
// parallelism comes from xgrad's TBB tasks over blocks fixed by the shapes (Note [Deterministic GEMM]
// in ops/matmul.cpp). It runs either OpenBLAS or xgrad's own packed GEMM (Note [GEMM backend] in
// blas.cpp; XGRAD_GEMM=openblas|xgrad|auto). Only blas.cpp includes <cblas.h>.
#include <cstdint>
#include <string>
#include <string_view>

#include "xgrad/core/cpu_info.hpp"

namespace xgrad::detail::blas {

/// Row-major C = alpha op(A) op(B) + beta C, one single-threaded BLAS call: op(X) = X, or X^T when
/// trans_x; op(A) is m x k, op(B) is k x n, C is m x n, with leading dimensions lda, ldb, ldc.
/// k == 0 gives C = beta C (beta == 0 writes zeros, whatever C held). T is float or double.
/// alpha == 0 gives C = beta C without reading A and B. Negative sizes, a leading dimension shorter
/// than its matrix's stored rows, and sizes above the 32-bit BLAS interface throw xgrad::Error naming
/// the argument (with either backend). Runs backend(). Instantiated for float and double in blas.cpp.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

/// The CPU kernel set OpenBLAS chose at load time (by CPU, or OPENBLAS_CORETYPE), e.g. "Haswell".
const char* core_name();

/// The instruction set an OpenBLAS core name implies: Prescott, Core2, Penryn, Dunnington, Nehalem,
/// Atom: sse3; Sandybridge: avx; Haswell, Zen: avx2; SkylakeX, Cooperlake, SapphireRapids: avx512
/// (case-insensitive). For other names known is false.
struct CoreIsa {
  Isa isa = Isa::scalar;
  bool known = false;
};
CoreIsa core_isa(std::string_view core);

/// Who computes blas::gemm: OpenBLAS, or xgrad's own packed GEMM (ops/kernels/gemm_kernels.hpp).
enum class Backend { openblas, xgrad };
const char* backend_name(Backend b);

/// The backend choice and why it was made.
struct Choice {
  Backend backend = Backend::openblas;
  std::string reason;
};
/// Note [GEMM backend]: the choice for XGRAD_GEMM = env (null: unset), OpenBLAS's core name and the
/// instruction set of xgrad's own GEMM kernels. "openblas" or "xgrad" force one; unset, "" or "auto"
/// take xgrad's when OpenBLAS's core implies an instruction set below own_isa, else OpenBLAS, where
/// avx2 counts as avx512 when avx512_half_rate (the CPU runs a 512-bit FMA at the rate of two 256-bit
/// ones: AMD Zen 4). Any other value throws xgrad::Error naming XGRAD_GEMM.
Choice choose_backend(const char* env, std::string_view core, Isa own_isa, bool avx512_half_rate = false);
/// True on CPUs whose 512-bit FMAs run at the 256-bit FMA rate (AMD family 0x19, Zen 3 / Zen 4: only
/// Zen 4 has AVX-512), so AVX2 kernels reach the same peak as AVX-512 ones.
bool avx512_half_rate(const CpuInfo& cpu);

/// The backend blas::gemm runs: choose_backend for this process's XGRAD_GEMM, OpenBLAS core and
/// xgrad's kernel family (decided at the first call), unless set_backend overrides it.
Choice backend();
/// backend().backend, without the reason (no allocation: for callers that ask per call).
Backend active_backend();
/// Test hook: forces blas::gemm onto backend b (process-wide) until reset_backend().
void set_backend(Backend b);
void reset_backend();
/// The instruction set xgrad's own GEMM kernels run ("avx512" or the library's baseline, "avx2").
Isa own_gemm_isa();

}  // namespace xgrad::detail::blas
