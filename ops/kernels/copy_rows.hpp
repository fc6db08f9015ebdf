#pragma once
// Internal: the row copies of the gather and slice ops (index_select, embeddings, a graph's gathered
// rows, the backward of a slice): whole rows moved between two contiguous
// buffers (rows of `row_len` elements of `elem_size` bytes), each destination row written by one task
// (Note [Streaming row copies] in copy_rows.cpp).
#include <cstddef>
#include <cstdint>

namespace xgrad::detail {

/// Rows are numbered r = o * len + j for o in [0, outer), j in [0, len); `pos[j]` is a row in [0, n)
/// of the (outer, n) side. Gather (scatter = false): dst row r = src row o * n + pos[j]. Scatter
/// (scatter = true, the positions distinct): dst row o * n + pos[j] = src row r. The positions are not
/// checked.
void copy_rows(const void* src, void* dst, std::int64_t row_len, std::size_t elem_size, std::int64_t outer,
               std::int64_t len, std::int64_t n, const std::int64_t* pos, bool scatter);

}  // namespace xgrad::detail
