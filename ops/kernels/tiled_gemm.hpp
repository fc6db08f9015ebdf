#pragma once
// Internal: the dense GEMM the ops call inside their own kernels, parallel over single-threaded BLAS
// calls (Note [Deterministic GEMM] in tiled_gemm.cpp).
#include <cstdint>

namespace xgrad {

namespace detail {
/// Row-major C = op(A) op(B) + beta * C with op(X) = X or X^T (no transpose is materialised):
/// op(A) is m x k, op(B) is k x n, C is m x n with leading dimensions lda, ldb, ldc. Large
/// products are cut into blocks fixed by the shapes and run in parallel with TBB over
/// single-threaded OpenBLAS calls, so results do not depend on the thread count. For ops that
/// need a dense GEMM inside their own kernels (T = float or double).
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
}  // namespace detail

}  // namespace xgrad
