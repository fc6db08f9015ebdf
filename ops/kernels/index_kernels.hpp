#pragma once
// Internal: the element and row loops behind ops/indexing.cpp: gather and scatter along a dim with a
// full index (Note [Index along a dim] in ops/indexing.cpp) and the combines of scatter_reduce, the
// index maps of index, take_along_dim, sort and topk, the arg-reductions, nonzero and one_hot. The
// kernels that only move or compare elements (gather_along_kernel, arg_extreme, nonzero_flags) are
// instantiated for the six dtypes, the others for float and double.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "xgrad/core/shape.hpp"

namespace xgrad::detail {

/// out[i] = p[i] for i < n: int32 indices as int64.
void widen_indices(const std::int32_t* p, std::int64_t n, std::int64_t* out);

/// The first position k (in position order, whatever the split) with p[k] outside [0, n), or -1 when
/// there is none; searched in parallel chunks.
std::int64_t first_out_of_range(const std::int64_t* p, std::int64_t count, std::int64_t n);

/// The offsets, in a contiguous tensor of shape s, of the positions of an index of shape `is` along
/// dim a (is[d] <= s[d] for d != a): lead[o] for the dims before a, trail[i] for the dims after it.
struct DimOffsets {
  std::vector<std::int64_t> lead, trail;
  std::int64_t stride = 1;      // s's stride along a
  bool trail_identity = false;  // trail[i] == i (the trailing dims of s and is agree)
};
DimOffsets dim_offsets(const Shape& s, const Shape& is, std::size_t a);

/// y = x taken at the index ip (viewed as (lead, m, trail)) along a: y's position (o, k, i) =
/// x's (o, ip[(o, k, i)], i), offsets from xo and yo; parallel over (o, k) rows. Indices outside
/// [0, n) are skipped; returns false if there were any (the caller reports the first).
template <class T>
bool gather_along_kernel(const T* x, T* y, const std::int64_t* ip, std::int64_t lead, std::int64_t m,
                         std::int64_t trail, std::int64_t n, const DimOffsets& xo, const DimOffsets& yo);

/// How scatter_along_kernel combines the destination element d with the source value v: d + v, d * v,
/// the maximum or minimum with a NaN from v kept (torch's scatter_reduce), d + 1 (a count), or the
/// constant `fill` (the reduction's identity, or a mark).
enum class ScatterCombine { Sum, Prod, Max, Min, Count, Fill };

/// d[(o, ip[p], i)] = combine(d[(o, ip[p], i)], s[p]) for every position p = (o, k, i) of the index,
/// in increasing k per element (each element combined by one task: the same bits at any thread
/// count); parallel over (o, column range) pieces. Indices outside [0, n) are skipped and make it
/// return false (as gather_along_kernel).
template <class T>
bool scatter_along_kernel(const T* s, T* d, const std::int64_t* ip, std::int64_t lead, std::int64_t m,
                          std::int64_t trail, std::int64_t n, const DimOffsets& xo, const DimOffsets& so,
                          ScatterCombine combine, double fill);

/// scatter_reduce's mean: count's zeros become 1, then y[e] /= count[e], for e < numel.
template <class T>
void divide_by_count(T* y, T* count, std::int64_t numel);

/// map[r * inner + i] = rows[r] * inner + i for r < count, i < inner: whole rows of x (of `inner`
/// elements) in the given order.
void fill_row_map(std::int64_t* map, const std::int64_t* rows, std::int64_t count, std::int64_t inner);

/// The positions p < n where m[p] is true, in increasing order.
std::vector<std::int64_t> true_positions(const bool* m, std::int64_t n);

/// out (contiguous, of shape bshape) = the indices idx (contiguous, of shape is) broadcast to bshape
/// (is[d] is bshape[d] or 1, and is has bshape's rank).
void broadcast_indices(const std::int64_t* idx, const Shape& is, const Shape& bshape, std::int64_t* out);

/// x viewed as (outer, n, inner), n >= 1: y[o * inner + i] = the position along n of the maximum
/// (is_max) or minimum of line (o, i): a NaN beats every number and then stays, and the first of tied
/// values is kept (torch's argmax / argmin).
template <class T>
void arg_extreme(const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner, bool is_max, std::int64_t* y);

/// x viewed as (outer, n, inner): pos (outer, k, inner) = the first k positions of each line (o, i) in
/// the stable ascending (or descending) order, NaN above every number (torch's sort order).
template <class T>
void sort_lines(const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t k, bool descending,
                std::int64_t* pos);

/// map[q] = (o * n + pos[q]) * inner + i for every position q = (o, j, i) of pos (count entries, viewed
/// as (outer, k, inner)): x's flat element at the position pos[q] of its line.
void sorted_map(const std::int64_t* pos, std::int64_t count, std::int64_t n, std::int64_t inner, std::int64_t k,
                std::int64_t* map);

/// nonzero's first pass: nz[i] = (x[i] != 0) for i < total, counted per chunk; start[c] = the number of
/// nonzeros before chunk c (start has one entry per chunk and a last one, the total count).
struct NonzeroFlags {
  std::vector<std::uint8_t> nz;
  std::vector<std::int64_t> start;
};
template <class T>
NonzeroFlags nonzero_flags(const T* x, std::int64_t total);

/// nonzero's second pass: row r of y (start.back() rows of s.size() coordinates) = the coordinates in
/// shape s of the r-th nonzero, in increasing flat position.
void nonzero_coords(const NonzeroFlags& f, const Shape& s, std::int64_t total, std::int64_t* y);

/// y[i * classes + labels[i]] = 1 for i < count (y zeroed before; the labels in [0, classes)).
void one_hot_fill(const std::int64_t* labels, std::int64_t count, std::int64_t classes, std::int64_t* y);

}  // namespace xgrad::detail
