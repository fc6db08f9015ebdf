#pragma once
// Internal: xgrad's one BLAS entry point (in the spirit of ATen's native/CPUBlas.h). Every dense GEMM
// in xgrad goes through blas::gemm (ops/matmul.cpp's tiled detail::gemm, the block-sparse kernels),
// and the OpenBLAS threading policy lives with it in blas.cpp: OpenBLAS runs single-threaded, and
// parallelism comes from xgrad's TBB tasks over blocks fixed by the shapes (Note [Deterministic GEMM]
// in ops/matmul.cpp). Only blas.cpp includes <cblas.h>.
#include <cstdint>

namespace xgrad::detail::blas {

/// Row-major C = alpha op(A) op(B) + beta C, one single-threaded BLAS call: op(X) = X, or X^T when
/// trans_x; op(A) is m x k, op(B) is k x n, C is m x n, with leading dimensions lda, ldb, ldc.
/// k == 0 gives C = beta C (beta == 0 writes zeros, whatever C held). T is float or double.
/// Sizes above the 32-bit BLAS interface throw xgrad::Error. Instantiated for float and double in blas.cpp.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

/// The CPU kernel set OpenBLAS chose at load time (by CPU, or OPENBLAS_CORETYPE), e.g. "Haswell".
const char* core_name();

}  // namespace xgrad::detail::blas
