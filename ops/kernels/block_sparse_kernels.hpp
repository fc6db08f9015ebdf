#pragma once
// Internal kernels of ops/block_sparse_linear.cpp (see Note [Block-sparse parallelism] there).
// Pointers are contiguous row-major: x (M, in), y and g (M, out), w the packed blocks.
#include <cstdint>
#include <span>
#include <vector>

#include "xgrad/core/blocks.hpp"

namespace xgrad::detail {

/// The kernels' block CSR (BlockSparsePattern of ops/block_sparse_linear.hpp builds one and keeps it):
/// the weight's rows and columns cut into groups, the stored blocks by row group (blocks[row_ptr[r] :
/// row_ptr[r + 1]]) and, through col_index, by column group (ordered by row group inside). The three
/// index spans view the pattern's block-grid CsrPattern (its crow, its cached transpose's crow and
/// permutation), which the pattern owns beside this struct: one set of indices, not a copy.
struct BlockCsr {
  using Block = StoredBlock;
  using Group = BlockGroup;
  std::int64_t in = 0, out = 0, stored = 0;  // features and stored weight elements
  std::vector<Block> blocks;
  std::vector<Group> row_groups, col_groups;
  std::span<const std::int64_t> row_ptr, col_ptr, col_index;
};

/// y = x W^T + b (b may be null: zero).
template <class T>
void bsl_forward(const BlockCsr& p, const T* x, std::int64_t m, const T* w, const T* b, T* y);
/// dx = g W (dx fully written; zero on columns with no block).
template <class T>
void bsl_input_grad(const BlockCsr& p, const T* g, std::int64_t m, const T* w, T* dx);
/// dw_B = g[:, rows(B)]^T x[:, cols(B)] for every stored block B (dw fully written).
template <class T>
void bsl_weight_grad(const BlockCsr& p, const T* g, const T* x, std::int64_t m, T* dw);
/// db = column sums of g (M, n).
template <class T>
void bsl_bias_grad(const T* g, std::int64_t m, std::int64_t n, T* db);

/// norms[r * (in / bi) + c] = ‖(gᵀ x)[r·bo : (r+1)·bo, c·bi : (c+1)·bi]‖_F for x (m, in), g (m, out): one task
/// per block row, its (bo x in) panel summed over fixed batch chunks, so no dense (out x in) gradient.
template <class T>
void bsl_grad_block_norms(const T* x, const T* g, std::int64_t m, std::int64_t in, std::int64_t out, std::int64_t bi,
                          std::int64_t bo, T* norms);
/// Block k of `to` = block src_block[k] of `from` (the same size), or zeros when src_block[k] < 0.
template <class T>
void bsl_remap(const BlockCsr& from, const T* w, const BlockCsr& to, const std::int64_t* src_block, T* dst);

}  // namespace xgrad::detail
