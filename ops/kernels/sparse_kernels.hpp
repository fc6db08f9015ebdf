#pragma once
// Internal: the CSR kernels behind ops/sparse.cpp (Note [CSR kernels] in sparse_kernels.cpp).
// Instantiated for float and double.
#include <cstdint>
#include <vector>

namespace xgrad::detail {

/// out (rows x f) = A·x: row i of out = Σ_k vals[k]·x[col[k], :] over k in [crow[i], crow[i + 1]),
/// summed in k order. x is (any rows x f), row-major.
template <class T>
void csr_spmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* vals, const T* x,
              std::int64_t f, T* out);

/// The row of each entry of a CSR pattern: row_of[k] = i for k in [crow[i], crow[i + 1]) (nnz = crow[rows]
/// entries), in parallel over chunks of rows.
void csr_row_indices(std::int64_t rows, const std::int64_t* crow, std::int64_t* row_of);

/// The transpose of a CSR pattern (rows x cols, nnz = crow[rows] entries; row_of: csr_row_indices):
/// t_crow (cols + 1), t_col and perm (nnz each) such that entry j of Aᵀ (row c = a column of A) is A's
/// entry perm[j], in row t_col[j]; each row of Aᵀ in increasing A-row order. A stable counting sort of
/// the entries by column, invert_rows (scatter_rows.hpp), then one gather of the rows; the result does
/// not depend on the thread count.
void csr_transpose(std::int64_t rows, std::int64_t cols, const std::int64_t* crow, const std::int64_t* col,
                   const std::int64_t* row_of, std::int64_t* t_crow, std::int64_t* t_col, std::int64_t* perm);

/// COO entries (r[e], c[e]), e < n, all in range, to a CSR pattern of `rows` rows with duplicates
/// merged: crow (rows + 1) and col (appended to) in row-major order, columns sorted within a row,
/// and dest[e] = the CSR entry that entry e adds into. Stable (a counting sort by row, then a stable
/// sort of each row's columns). Returns whether dest is the identity (already sorted, no duplicate).
bool coo_to_csr(std::int64_t n, std::int64_t rows, const std::int64_t* r, const std::int64_t* c, std::int64_t* crow,
                std::vector<std::int64_t>& col, std::int64_t* dest);

/// out[k] = src[perm[k]] for k < n, in parallel: A's values in the order of its transposed pattern
/// (Note [Cached transpose]), gathered once before a kernel walks Aᵀ.
template <class T>
void permute_values(std::int64_t n, const std::int64_t* perm, const T* src, T* out);

/// out[k] = ⟨x[i, :], y[col[k], :]⟩ for every entry k of row i (x: rows x f, y: any rows x f).
template <class T>
void csr_sddmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* x, const T* y,
               std::int64_t f, T* out);

/// y (rows x out) = A·Wᵀ (+ b): y[i, o] = Σ_k vals[k]·w[o, col[k]] over row i's entries (in k order),
/// plus b[o] when b is not null; w (out x in) is read in place (no transpose).
template <class T>
void csr_linear(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* vals, const T* w,
                std::int64_t in, std::int64_t out, const T* b, T* y);

/// dv[k] = Σ_o g[i, o]·w[o, col[k]] for entry k of row i (in o order): sddmm(A, g, Wᵀ) with W in place.
template <class T>
void csr_linear_backward_values(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* g,
                                const T* w, std::int64_t in, std::int64_t out, T* dv);

/// dw (out x in) = gᵀ·A, written in W's layout: dw[o, c] = Σ tvals[k]·g[trow[k], o] over the entries k of
/// column c (tcrow, trow: A's transposed pattern; tvals: A's values in that order, permute_values), in
/// increasing row order. Parallel over o.
template <class T>
void csr_linear_backward_weight(std::int64_t in, const std::int64_t* tcrow, const std::int64_t* trow, const T* tvals,
                                const T* g, std::int64_t out, T* dw);

/// out[i, :] = scale_i · Σ_e data[e, :] over e in [off[i], off[i + 1]), summed in e order; scale_i =
/// 1 / (off[i + 1] - off[i]) when `mean` (an empty segment's mean is `empty`), else 1.
template <class T>
void segment_sum(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool mean, T empty,
                 T* out);

/// out[i, :] = Σ data[src[e], :] over e in [off[i], off[i + 1]) (data[e, :] when src is null), added
/// into zeros in increasing e: the backward of a gather by a pattern's indices (Note [Pattern gathers]
/// in ops/sparse.cpp).
template <class T>
void segment_gather_sum(std::int64_t segments, const std::int64_t* off, const std::int64_t* src, const T* data,
                        std::int64_t f, T* out);

/// out[idx[k], :] += data[k, :] for k < n in increasing k, out (rows x f) zeroed first: the serial
/// form of segment_gather_sum over the inverse of idx, with the same sums bit for bit (each row adds its
/// entries in increasing k from zero).
template <class T>
void scatter_sum_rows(std::int64_t n, const std::int64_t* idx, const T* data, std::int64_t f, std::int64_t rows,
                      T* out);

/// out[e, :] = scale_i · g[i, :] for every e of segment i (the transpose of segment_sum).
template <class T>
void segment_expand(std::int64_t segments, const std::int64_t* off, const T* g, std::int64_t f, bool mean, T* out);

/// out[e, :] = softmax (or, with `log`, log_softmax) over the entries e of segment i of data[e, :] (per
/// column, max-subtracted).
template <class T>
void segment_softmax(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool log, T* out);

/// Their backward from the result y: dx[e, :] = y[e, :]·(g[e, :] − Σ_{e' in segment i} g[e', :]·y[e', :])
/// (softmax), or g[e, :] − exp(y[e, :])·Σ_{e' in segment i} g[e', :] (log_softmax).
template <class T>
void segment_softmax_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* y, std::int64_t f,
                              bool log, T* dx);

/// out[i, :] = the maximum (is_max) or minimum of data[e, :] over segment i, per column: NaN when
/// any is NaN; `empty` for an empty segment.
template <class T>
void segment_max(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool is_max, T empty,
                 T* out);

/// out[i, :] = log Σ_{e in segment i} exp(data[e, :]), per column: m + log Σ exp(data[e, :] − m) with m the
/// column's maximum over the segment (0 where that is ±inf, as torch.logsumexp); −inf for an empty
/// segment, NaN when an entry is NaN. Summed in entry order.
template <class T>
void segment_logsumexp(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, T* out);

/// Its backward: dx[e, :] = g[i, :]·exp(data[e, :] − out[i, :]) for every e of segment i.
template <class T>
void segment_logsumexp_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* data, const T* out,
                                std::int64_t f, T* dx);

/// segment_max's backward: dx[e, :] = g[i, :] / c where data[e, :] equals out[i, :] or is NaN (one of the
/// c ties of its column), else 0. When `divisor` is not null, the kernel writes c (segments x f)
/// there and the 0/1 tie mask into dx instead (the constants of the create_graph formula).
template <class T>
void segment_max_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* data, const T* out,
                          std::int64_t f, T* dx, T* divisor);

}  // namespace xgrad::detail
