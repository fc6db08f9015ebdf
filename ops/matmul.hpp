#pragma once
// Matrix products through CBLAS (OpenBLAS), with torch.matmul's shape rules:
//   1-d x 1-d -> scalar (dot); 2-d x 2-d -> matrix; 1-d x n-d prepends a 1 to a (removed after);
//   n-d x 1-d appends a 1 to b (removed after); batched (..., n, k) x (..., k, m) broadcasts the
//   batch dimensions.
// Both inputs must have the same dtype and at least one dimension. Results are bit-identical
// whatever the thread count (see Note [Deterministic GEMM] in matmul.cpp).
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `matmul(a, b)` | a·b, with torch.matmul's rules (dot, matrix, batched, broadcast batch)
///   | da = g·bᵀ, db = aᵀ·g, summed over broadcast batches | torch.matmul
Tensor matmul(const Tensor& a, const Tensor& b);

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
