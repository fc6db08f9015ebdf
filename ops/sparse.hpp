#pragma once
// Sparse matrices in CSR form (compressed sparse rows) and the two products on them that graph
// networks and sparse features are made of: spmm (sparse x dense) and sddmm (a dense x dense product
// sampled on a sparse pattern). Each is the other's gradient, so the family is closed under
// differentiation (Note [Sparse gradients] in sparse.cpp) and every order of derivative stays sparse.
// The user guide is docs/sparse.md.
//
// Note [CSR storage]: a SparseCsr is a CsrPattern (the index structure, immutable and shared by
// every copy) and a values tensor of shape (nnz,) in row-major entry order: the entries of row i are
// k in [crow[i], crow[i + 1]), at columns col[k], strictly increasing within a row (sorted, no
// duplicates). Indices are int64 inside; int32 index tensors are accepted and widened. The values
// are an ordinary Tensor, so a leaf that requires grad is trained by any optimizer, and its gradient
// has the same pattern (a (nnz,) tensor in the same order).
//
// Note [Cached transpose]: the transposed pattern (Aᵀ in CSR form, plus the permutation `perm` with
// transposed entry k = entry perm[k] of A) is built on first use by one counting sort over the
// columns (O(nnz + cols)), under a std::once_flag inside the shared pattern, so every copy of the
// pattern and every later backward reuses it. Aᵀ·G is then a gather per output row, like A·X: no
// scatter, no atomics, the same bits at any thread count. The row of each entry (row_indices) is
// cached the same way: the graph layers gather by it, and the transpose is built from it.
//
// Note [Pattern tensors]: a pattern's indices are int64 tensors (crow_indices, col_indices, and the
// cached row_indices and transpose), validated once when the pattern is made and never written
// again; every copy of the pattern and every matrix on it shares them, and the accessors return them
// without a copy. They must not be written (an in-place op or a write through data<T>() would break
// the pattern every holder relies on): clone_data() first. Ops that take a pattern read them
// through crow() / col() / row() spans at no cost and trust them (the segment ops' detail entry points
// below take a pattern's row offsets unchecked); the public segment ops check user-given offsets.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

struct CsrTransposed;

/// The index structure of a CSR matrix (rows x cols), without values. Cheap to copy (shared);
/// immutable, except for the transposed pattern and the row indices cached on first use (Note
/// [Cached transpose]); its indices are int64 tensors shared by every copy (Note [Pattern tensors]).
class CsrPattern {
 public:
  using Transposed = CsrTransposed;

  /// An empty (0 x 0) pattern.
  CsrPattern();
  /// From row offsets (rows + 1) and column indices (nnz): checks that crow starts at 0, never
  /// decreases and ends at nnz, and that each row's columns are in [0, cols) and strictly increasing.
  /// `op` names the caller in the messages. The vectors are copied into the pattern's tensors.
  static CsrPattern from_indices(const std::vector<std::int64_t>& crow, const std::vector<std::int64_t>& col,
                                 std::int64_t rows, std::int64_t cols, const char* op);
  /// The same from 1-d int64 or int32 tensors, copied (int32 widened) into the pattern's own tensors,
  /// so that later writes to them cannot reach the pattern.
  static CsrPattern from_indices(const Tensor& crow, const Tensor& col, std::int64_t rows, std::int64_t cols,
                                 const char* op);

  std::int64_t rows() const;
  std::int64_t cols() const;
  std::int64_t nnz() const;
  /// The row offsets (rows + 1,) and column indices (nnz,): the pattern's int64 tensors themselves,
  /// not copies (Note [Pattern tensors]: not to be written).
  const Tensor& crow_indices() const;
  const Tensor& col_indices() const;
  /// The same as spans, for kernels.
  std::span<const std::int64_t> crow() const;
  std::span<const std::int64_t> col() const;
  /// The row of each stored entry (nnz,) int64: row_indices()[k] = i for k in [crow[i], crow[i + 1])
  /// (the target node of each edge of an adjacency). Built on first use in O(nnz + rows), once,
  /// thread-safe, and shared by every copy of the pattern.
  const Tensor& row_indices() const;
  std::span<const std::int64_t> row() const;
  /// The cached transposed pattern (built once, thread-safe; Note [Cached transpose]). Its cols + 1
  /// row offsets are checked against this machine's memory before they are allocated.
  const Transposed& transposed() const;
  /// True when the transposed pattern (or the row indices) has been built (for tests of the caches).
  bool has_transposed() const;
  bool has_row_indices() const;
  /// True when both refer to the same shared pattern object (copies of one pattern).
  bool same_object(const CsrPattern& other) const { return impl_ == other.impl_; }
  /// True when the patterns have the same size and indices.
  bool operator==(const CsrPattern& other) const;

  struct Impl;

 private:
  explicit CsrPattern(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// A pattern's transpose (Note [Cached transpose]): Aᵀ (cols x rows) as a pattern of its own, whose
/// column indices are A's rows, and perm (nnz,) int64: entry k of Aᵀ is entry perm[k] of A.
struct CsrTransposed {
  CsrPattern pattern;
  Tensor perm_indices;
  std::span<const std::int64_t> crow() const { return pattern.crow(); }
  std::span<const std::int64_t> col() const { return pattern.col(); }
  std::span<const std::int64_t> perm() const { return {perm_data, static_cast<std::size_t>(pattern.nnz())}; }
  const std::int64_t* perm_data = nullptr;
};

/// A sparse (rows x cols) matrix in CSR form: a shared CsrPattern and a (nnz,) values tensor
/// (Note [CSR storage]). Made by sparse_csr_tensor, sparse_coo_tensor or to_sparse_csr.
class SparseCsr {
 public:
  /// An undefined sparse matrix (defined() is false).
  SparseCsr() = default;
  /// The matrix with this pattern and these values: shape (pattern.nnz(),), any dtype (the ops take
  /// float32 and float64).
  SparseCsr(CsrPattern pattern, Tensor values);

  bool defined() const { return values_.defined(); }
  std::int64_t rows() const { return pattern_.rows(); }
  std::int64_t cols() const { return pattern_.cols(); }
  std::int64_t nnz() const { return pattern_.nnz(); }
  /// (rows, cols).
  Shape shape() const { return {rows(), cols()}; }
  Dtype dtype() const { return values_.dtype(); }
  const CsrPattern& pattern() const { return pattern_; }
  const Tensor& values() const { return values_; }
  /// Row offsets (rows + 1,) and column indices (nnz,), int64 (torch's names): the pattern's own
  /// tensors, not copies (Note [Pattern tensors]: not to be written; clone_data() first).
  const Tensor& crow_indices() const { return pattern_.crow_indices(); }
  const Tensor& col_indices() const { return pattern_.col_indices(); }
  /// The same pattern with other values (shape (nnz,)): e.g. the result of sddmm, or a detached copy.
  SparseCsr with_values(const Tensor& values) const;
  /// Aᵀ in CSR form: the cached transposed pattern (Note [Cached transpose]) and the values gathered
  /// by its permutation (differentiable: the gradient flows back to this matrix's values). A width
  /// whose transpose cannot be held in memory is an xgrad::Error naming SparseCsr::t.
  SparseCsr t() const;
  /// The dense (rows, cols) matrix, zeros outside the pattern, in the values' dtype. Differentiable
  /// with respect to float values (the gradient is the dense gradient read at the stored entries).
  Tensor to_dense() const;
  /// "SparseCsr(rows=.., cols=.., nnz=.., dtype=..)".
  std::string str() const;

 private:
  CsrPattern pattern_;
  Tensor values_;
};

/// torch.sparse_csr_tensor: row offsets (rows + 1,), column indices (nnz,) (int64 or int32, sorted
/// and unique within each row), values (nnz,), size (rows, cols). The values tensor is kept as is
/// (no copy), so a leaf that requires grad stays that leaf. Bad indices are an xgrad::Error naming
/// the argument and the offending value.
/// @op `sparse_csr_tensor(crow, col, values, size)` | the (rows x cols) matrix with values[k] at (i, col[k]) for k
///   in [crow[i], crow[i + 1]) (its values are `values` itself) | dvalues = g's values | torch.sparse_csr_tensor
///   (compared through torch.sparse_coo_tensor(...).to_dense: torch 1.13 has no autograd on CSR values)
SparseCsr sparse_csr_tensor(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                            const Shape& size);
/// torch.sparse_coo_tensor(...).to_sparse_csr(): indices (2, nnz) as (row, col) pairs in any order,
/// int64 or int32; values (nnz,); size (rows, cols). Entries are sorted by row, then column, and
/// duplicates are summed (in their input order): float values through a differentiable index_add,
/// integer and bool values exactly in their own dtype (as torch's coalesce). The result's values are
/// `values` itself when the entries are already sorted and unique. A size whose row offsets (rows + 1
/// int64) cannot be held in memory is an xgrad::Error before anything is allocated.
/// @op `sparse_coo_tensor(indices, values, size)` | entries sorted by (row, col), out.values[k] = Σ values[e] over the
///   input entries e at k's position | dvalues[e] = g.values[k] for the k that e adds into
///   | torch.sparse_coo_tensor (with coalesce)
SparseCsr sparse_coo_tensor(const Tensor& indices, const Tensor& values, const Shape& size);
/// torch's Tensor.to_sparse_csr: the non-zero entries of a dense 2-D float tensor. The values are
/// differentiable (a gather of the dense entries).
/// @op `to_sparse_csr(dense)` | out.values = dense's non-zero entries in row-major order | ddense = g.values placed at
///   the entries, 0 elsewhere | torch.Tensor.to_sparse_csr (compared through torch.Tensor.to_sparse, the same
///   entries in COO form)
SparseCsr to_sparse_csr(const Tensor& dense);

/// Sparse (M x K) times dense (K x F) -> dense (M x F). A: float32 or float64 values; X: same dtype.
/// Differentiable with respect to A's values and X, to any order (Note [Sparse gradients]).
/// @op `spmm(A, X)` | Y[i, :] = Σ_k A.values[k]·X[col[k], :] over row i's entries k (Y = A·X)
///   | dX = Aᵀ·g (the cached transposed pattern: a gather per row of dX); dA.values[k] = ⟨g[i, :], X[j, :]⟩ for
///     entry k at (i, j), i.e. sddmm(A, g, X)
///   | torch.sparse.mm
Tensor spmm(const SparseCsr& a, const Tensor& x);
/// torch.matmul for a sparse left operand: spmm under torch's name (2-d x only; errors name matmul).
/// @op `matmul(A, X)` (A sparse) | spmm(A, X) | as spmm | torch.matmul (compared through torch.sparse.mm, as spmm:
///   torch 1.13 has no backward for a sparse left operand of matmul)
Tensor matmul(const SparseCsr& a, const Tensor& x);

/// Sampled dense-dense product: for each stored entry k = (i, j) of A's pattern, out[k] =
/// ⟨X[i, :], Y[j, :]⟩; X (M x F), Y (K x F) for A (M x K); A's values are not read. Returns the
/// (nnz,) values in A's entry order, so `a.with_values(sddmm(a, x, y))` is the sparse matrix
/// (X·Yᵀ) ⊙ mask(A) and an edge score feeds spmm directly. Differentiable with respect to X and Y,
/// to any order.
/// @op `sddmm(A, X, Y)` | out[k] = ⟨X[i, :], Y[j, :]⟩ for entry k of A at (i, j) (A's values unused)
///   | dX = G·Y, dY = Gᵀ·X with G = A's pattern holding g (spmm with the pattern and its cached transpose)
///   | — (compared through (X[row]·Y[col]).sum(-1))
Tensor sddmm(const SparseCsr& a, const Tensor& x, const Tensor& y);
/// torch.sparse.sampled_addmm: β·input + α·(mat1·mat2) sampled at input's stored entries, a matrix on
/// input's pattern. input (M x N) sparse, mat1 (M x K), mat2 (K x N), one float dtype. A composition:
/// input.with_values(β·input.values() + α·sddmm(input, mat1, mat2ᵀ)), so it is differentiable with
/// respect to input's values, mat1 and mat2 to any order, and, as torch 1.13, β = 0 or α = 0 still
/// multiplies (a NaN there propagates).
/// @op `sampled_addmm(input, mat1, mat2, beta, alpha)` | out.values[k] = β·input.values[k] + α·⟨mat1[i, :], mat2[:, j]⟩
///   for entry k at (i, j) | dinput.values = β·g.values; dmat1 = α·G·mat2ᵀ, dmat2 = α·(Gᵀ·mat1)ᵀ with G = input's
///   pattern holding g.values (sddmm's gradient) | torch.sparse.sampled_addmm
SparseCsr sampled_addmm(const SparseCsr& input, const Tensor& mat1, const Tensor& mat2, double beta = 1.0,
                        double alpha = 1.0);

/// torch.nn.functional.linear on a sparse input (bag-of-words rows): x (rows, in) sparse, weight
/// (out, in), bias (out,) or undefined; y (rows, out) dense = spmm(x, weightᵀ) + bias, no dense x:
/// with at least as many stored entries as input features through spmm on one transposed copy of W,
/// with fewer (a minibatch) with W read in place (Note [Sparse linear] in sparse.cpp). Differentiable with respect to
/// x's values, weight and bias, to any order. nn::Linear::forward takes a SparseCsr too.
/// @op `linear(A, W, b)` (A sparse) | Y[i, o] = Σ_k A.values[k]·W[o, col[k]] over row i's entries, + b[o]
///   (Y = A·Wᵀ + b) | dA.values[k] = ⟨g[i, :], W[:, j]⟩ for entry k at (i, j); dW = gᵀ·A (over the cached
///   transposed pattern, in W's layout); db = Σ_i g[i, :] | torch.nn.functional.linear (on x.to_dense())
Tensor linear(const SparseCsr& x, const Tensor& weight, const Tensor& bias = Tensor());

/// Segment reductions along dim 0 (torch.segment_reduce with offsets): data (E, ...) float32 or
/// float64 is cut into S segments by offsets (S + 1,) int64 or int32, starting at 0, non-decreasing,
/// ending at E; segment i is data[offsets[i] : offsets[i + 1]]. The result is (S, ...). Over a CSR
/// matrix's rows: segment_sum(a.values(), a.crow_indices()). Summed in entry order; differentiable to
/// any order (the backward is a broadcast of g to the entries, whose own backward is segment_sum).
/// @op `segment_sum(data, offsets)` | out[i] = Σ data[e] over e in [offsets[i], offsets[i + 1]) (0 for an empty
///   segment) | ddata[e] = g[i] for e in segment i | torch.segment_reduce
Tensor segment_sum(const Tensor& data, const Tensor& offsets);
/// As segment_sum, divided by the segment's length. An empty segment's result is `empty_value`: NaN
/// by default, as torch; 0 is message passing's value for a node without neighbours (PyG's).
/// @op `segment_mean(data, offsets, empty_value)` | out[i] = segment_sum(data)[i] / n_i with n_i = offsets[i + 1] -
///   offsets[i] (empty_value, default NaN, when n_i = 0) | ddata[e] = g[i]/n_i for e in segment i |
///   torch.segment_reduce
Tensor segment_mean(const Tensor& data, const Tensor& offsets,
                    double empty_value = std::numeric_limits<double>::quiet_NaN());
/// The maximum (minimum) of each segment along dim 0, per column (offsets as for segment_sum): as
/// torch.segment_reduce(data, "max" / "min", offsets=offsets, axis=0). A NaN in a segment makes its
/// result NaN. An empty segment's result is `empty_value`: −inf (max) or +inf (min) by default,
/// torch's value without `initial`; 0 is message passing's value for a node without neighbours
/// (PyG's). Unlike torch's `initial`, it takes no part in a non-empty segment's reduction.
/// The gradient g[i] is split evenly among the c_i ties (the entries equal to the result, or NaN),
/// as torch's amax and scatter_reduce (torch 1.13's segment_reduce splits a positive g only and gives
/// any other g whole to each tie, so that the gradient sums to c_i·g). Differentiable to any order
/// (the gradient is linear in g; its derivative in data is 0).
/// @op `segment_max(data, offsets, empty_value)` | out[i] = max data[e] over e in segment i, per column (NaN if one is
///   NaN; empty_value, default −inf, for an empty segment) | ddata[e] = g[i]/c_i at the c_i ties e (data[e] = out[i]
///   or NaN), 0 elsewhere | torch.segment_reduce (compared through torch.Tensor.scatter_reduce with amax, whose
///   gradient splits evenly at ties)
Tensor segment_max(const Tensor& data, const Tensor& offsets,
                   double empty_value = -std::numeric_limits<double>::infinity());
/// As segment_max, with the minimum (+inf for an empty segment by default).
/// @op `segment_min(data, offsets, empty_value)` | out[i] = min data[e] over e in segment i, per column (NaN if one is
///   NaN; empty_value, default +inf, for an empty segment) | as segment_max, at the entries equal to the minimum
///   | torch.segment_reduce (compared through torch.Tensor.scatter_reduce with amin)
Tensor segment_min(const Tensor& data, const Tensor& offsets,
                   double empty_value = std::numeric_limits<double>::infinity());
/// The log of the sum of the exponentials of each segment along dim 0, per column (offsets as for
/// segment_sum), as torch.logsumexp over the segment: shifted by the segment's maximum (by 0 where that
/// is ±inf), so large entries do not overflow; −inf for an empty segment, NaN when an entry is NaN.
/// Differentiable to any order (the backward is recorded with segment and pointwise ops).
/// @op `segment_logsumexp(data, offsets)` | out[i] = log Σ_{e∈ segment i} exp(data[e]), per column (−inf for an
///   empty segment) | ddata[e] = g[i]·exp(data[e] − out[i]) for e in segment i | torch.logsumexp (per segment)
Tensor segment_logsumexp(const Tensor& data, const Tensor& offsets);
/// Softmax over each segment's entries along dim 0, per column (offsets as for segment_sum): with a
/// CSR matrix's row offsets, the edge softmax of an attention layer, over each row's stored entries
/// as torch.sparse.softmax(A, 1) (unstored entries take no part). Differentiable to any order.
/// @op `segment_softmax(data, offsets)` | out[e] = exp(data[e] − m_i) / Σ_{e'∈ segment i} exp(data[e'] − m_i),
///   m_i = the segment's max (per column) | ddata[e] = out[e]·(g[e] − Σ_{e'∈ segment i} g[e']·out[e'])
///   | — (compared through torch.softmax on each segment)
Tensor segment_softmax(const Tensor& data, const Tensor& offsets);
/// Log-softmax over each segment's entries along dim 0, per column (offsets as for segment_sum): the
/// log of segment_softmax, computed as data − (m_i + log Σ exp(data − m_i)) without forming the
/// softmax. Its backward is a kernel of its own (and, under create_graph, the same formula written
/// with segment_sum), as torch's log_softmax. Differentiable to any order.
/// @op `segment_log_softmax(data, offsets)` | out[e] = data[e] − m_i − log Σ_{e'∈ segment i} exp(data[e'] − m_i), m_i =
///   the segment's max (per column) | ddata[e] = g[e] − exp(out[e])·Σ_{e'∈ segment i} g[e']
///   | — (compared through torch.log_softmax on each segment)
Tensor segment_log_softmax(const Tensor& data, const Tensor& offsets);
/// torch.sparse.softmax(A, 1) for a CSR matrix: the softmax over each row's stored entries
/// (unstored entries take no part; an empty row stays empty), as a matrix on the same pattern:
/// a.with_values(segment_softmax(a.values(), a.crow_indices())). Float values only. Differentiable
/// to any order.
/// @op `sparse_softmax(A)` | out.values = segment_softmax(A.values, A's row offsets) | as segment_softmax
///   | torch.sparse.softmax (on A's COO form, dim 1)
SparseCsr sparse_softmax(const SparseCsr& a);
/// torch.sparse.log_softmax(A, 1) for a CSR matrix: the log-softmax over each row's stored entries, on
/// the same pattern: a.with_values(segment_log_softmax(a.values(), a.crow_indices())). Float values
/// only. Differentiable to any order.
/// @op `sparse_log_softmax(A)` | out.values = segment_log_softmax(A.values, A's row offsets) | as segment_log_softmax
///   | torch.sparse.log_softmax (on A's COO form, dim 1)
SparseCsr sparse_log_softmax(const SparseCsr& a);

namespace detail {
/// The segment ops over the rows of a pattern: segment i is row i's entries, the offsets its
/// crow_indices, validated when the pattern was made and neither checked nor copied again (Note
/// [Pattern tensors]). data (nnz, ...) floating point; the results and gradients are the public ops'
/// with offsets = rows.crow_indices(), bit for bit.
Tensor segment_sum_rows(const Tensor& data, const CsrPattern& rows);
Tensor segment_mean_rows(const Tensor& data, const CsrPattern& rows, double empty_value);
Tensor segment_max_rows(const Tensor& data, const CsrPattern& rows, double empty_value);
Tensor segment_softmax_rows(const Tensor& data, const CsrPattern& rows);
Tensor segment_log_softmax_rows(const Tensor& data, const CsrPattern& rows);
/// index_select(x, 0, p.col_indices()) (x (cols, ...): out[k] = x[col[k]]) and index_select(x, 0,
/// p.row_indices()) (x (rows, ...): out[k] = x[row[k]]) without the index check, the gathers of a
/// message-passing layer. Their backward sums each column's (row's) entries in entry order, index_select's
/// sums bit for bit, as a gather over the cached transpose (the row offsets): no inverse of the
/// indices is built on each call.
Tensor index_select_cols(const Tensor& x, const CsrPattern& p);
Tensor index_select_rows(const Tensor& x, const CsrPattern& p);
}  // namespace detail

}  // namespace xgrad
