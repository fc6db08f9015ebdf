#pragma once
// Matrix products through CBLAS (OpenBLAS), with torch.matmul's shape rules:
//   1-d x 1-d -> scalar (dot); 2-d x 2-d -> matrix; 1-d x n-d prepends a 1 to a (removed after);
//   n-d x 1-d appends a 1 to b (removed after); batched (..., n, k) x (..., k, m) broadcasts the
//   batch dimensions.
// Both inputs must have the same dtype and at least one dimension. Results are bit-identical
// whatever the thread count (see Note [Deterministic GEMM] in ops/kernels/tiled_gemm.cpp).
#include <cstdint>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `matmul(a, b)` | a·b, with torch.matmul's rules (dot, matrix, batched, broadcast batch)
///   | da = g·bᵀ, db = aᵀ·g, summed over broadcast batches | torch.matmul
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace xgrad
