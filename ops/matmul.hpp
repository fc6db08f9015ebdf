#pragma once
// Matrix products through CBLAS (OpenBLAS), with torch.matmul's shape rules:
//   1-d x 1-d -> scalar (dot); 2-d x 2-d -> matrix; 1-d x n-d prepends a 1 to a (removed after);
//   n-d x 1-d appends a 1 to b (removed after); batched (..., n, k) x (..., k, m) broadcasts the
//   batch dimensions.
// Gradients: for C = A B, dA = G B^T and dB = A^T G, each summed over broadcast batch dimensions.
#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace xgrad
