#pragma once
// Internal: the copies behind ops/shape_ops.cpp that only move elements: permute (and transpose), the
// row blocks of concat, stack and split, and roll's flat index map. Moving elements needs only their
// size, so permute is instantiated for the unsigned integers of 1, 4 and 8 bytes (one per element size
// serves every dtype, bool and the integers included) and the block copies take the size in bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "xgrad/core/shape.hpp"

namespace xgrad::detail {

/// dst (contiguous) = src (contiguous, of shape in_shape) with dst's dim d = src's dim dims[d]. Dims
/// are coalesced first; when the innermost output dim is not the source's innermost, the copy goes in
/// square tiles so that both the reads and the writes stay in cache. T: std::uint8_t, std::uint32_t or
/// std::uint64_t, the unsigned type of the element size.
template <class T>
void permute_kernel(const T* src, T* dst, const Shape& in_shape, const std::vector<std::int64_t>& dims);

/// Concat and stack: dst viewed as (outer, sum_i lens[i]) rows of elements of elem_size bytes, input i
/// (srcs[i], contiguous, (outer, lens[i])) copied into its column block of every row; k inputs.
void join_rows(const void* const* srcs, std::size_t k, void* dst, std::size_t elem_size, std::int64_t outer,
               const std::int64_t* lens);

/// Split and the backward of concat and stack: dst (outer, len) = the columns [off, off + len) of src
/// viewed as (outer, row), elements of elem_size bytes. Nothing is read when len is 0.
void copy_column_block(const void* src, void* dst, std::size_t elem_size, std::int64_t outer, std::int64_t row,
                       std::int64_t off, std::int64_t len);

/// roll over the flattened tensor by k in [0, n): map[o] = the source of output element o, (o - k) mod n.
void roll_map(std::int64_t n, std::int64_t k, std::int64_t* map);

}  // namespace xgrad::detail
