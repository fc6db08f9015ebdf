#pragma once
// The records of a matrix cut into blocks, shared by the block-sparse layer's pattern
// (BlockSparsePattern::Block and ::Group, ops/block_sparse_linear.hpp) and its kernels
// (ops/kernels/block_sparse_kernels.hpp). They live in core because both rooms may include core while a
// kernel may not include an op header and an installed header may not include a kernel's: one
// definition for both, so the pattern hands its block list to the kernels without a copy.
#include <cstdint>

namespace xgrad {

/// One stored block of an (out x in) matrix: rows [row, row + rows) by columns [col, col + cols),
/// stored from element `offset` of the packed weight, in grid cell (row_group, col_group).
struct StoredBlock {
  std::int64_t row = 0, rows = 0, col = 0, cols = 0, offset = 0;
  std::int64_t row_group = 0, col_group = 0;
};

/// A group of consecutive rows or columns: [begin, begin + size).
struct BlockGroup {
  std::int64_t begin = 0, size = 0;
};

}  // namespace xgrad
