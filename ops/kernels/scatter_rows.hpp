#pragma once
// Internal: the scatter-add of whole rows along a dim, shared by index_add, the backward of
// index_select (and so of nn::Embedding) and the 1-d scatter_add. Note [Row scatter] in
// scatter_rows.cpp: one int64 per row (never one per element), the inverse built in parallel.
#include <cstdint>
#include <vector>

namespace xgrad::detail {

/// The inverse of `e` row indices idx[j] in [0, n) as CSR, written to start (n + 1) and src (e): the
/// sources of destination row r are src[start[r]] .. src[start[r + 1] - 1], in increasing j (a stable
/// counting sort by destination, built in parallel; the result does not depend on how it was split).
/// Also the transpose of a CSR pattern (csr_transpose in sparse_kernels.hpp): idx = its columns.
void invert_rows(const std::int64_t* idx, std::int64_t e, std::int64_t n, std::int64_t* start, std::int64_t* src);

/// dst viewed as (outer, n, inner) and src as (outer, idx.size(), inner), both contiguous:
/// dst[o, idx[j], :] += src[o, j, :] for every j, keeping dst's values. Every destination row
/// receives its contributions in increasing j, whatever the thread count (the serial loop and the
/// parallel path over the inverse add in that same order). The indices must be in [0, n).
/// Instantiated for float and double.
template <class T>
void add_rows_at(const T* src, T* dst, std::int64_t outer, std::int64_t n, std::int64_t inner,
                 const std::vector<std::int64_t>& idx);

}  // namespace xgrad::detail
