// The flat dense position (row * in_features + col) of every stored weight element of a block-sparse
// pattern, from its block list alone (Note [Block-sparse storage]): shared by the op table and
// test_block_sparse_linear.cpp. Internal to the test suite.
#pragma once

#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"

namespace xgrad::test {

inline Tensor dense_index(const BlockSparsePattern& p) {
  std::vector<double> idx(static_cast<std::size_t>(p.stored_elements()));
  for (const auto& b : p.blocks())
    for (std::int64_t i = 0; i < b.rows; ++i)
      for (std::int64_t j = 0; j < b.cols; ++j)
        idx[static_cast<std::size_t>(b.offset + i * b.cols + j)] =
            static_cast<double>((b.row + i) * p.in_features() + b.col + j);
  return Tensor::from_vector(idx, {p.stored_elements()}, kFloat64);
}

}  // namespace xgrad::test
