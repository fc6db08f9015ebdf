#pragma once
// Internal kernels of ops/block_sparse_linear.cpp (see Note [Block-sparse parallelism] there).
// Pointers are contiguous row-major: x (M, in), y and g (M, out), w the packed blocks.
#include <cstdint>

#include "xgrad/ops/block_sparse_linear.hpp"

namespace xgrad::detail {

/// y = x W^T + b (b may be null: zero).
template <class T>
void bsl_forward(const BlockSparsePattern& p, const T* x, std::int64_t m, const T* w, const T* b, T* y);
/// dx = g W (dx fully written; zero on columns with no block).
template <class T>
void bsl_input_grad(const BlockSparsePattern& p, const T* g, std::int64_t m, const T* w, T* dx);
/// dw_B = g[:, rows(B)]^T x[:, cols(B)] for every stored block B (dw fully written).
template <class T>
void bsl_weight_grad(const BlockSparsePattern& p, const T* g, const T* x, std::int64_t m, T* dw);
/// db = column sums of g (M, n).
template <class T>
void bsl_bias_grad(const T* g, std::int64_t m, std::int64_t n, T* db);

}  // namespace xgrad::detail
