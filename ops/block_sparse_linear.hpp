#pragma once
// Block-sparse linear layer: y = x W^T + b, where the weight W (out x in) is non-zero only on a fixed
// set of rectangular blocks and only those blocks are stored. The op's formulas are its `/// @op`
// row (op | forward | gradient | torch) on block_sparse_linear below, from which docs/ops.md's table
// is generated. Rows of W with no block give y = b there; columns with no block get a zero input
// gradient.
// Under create_graph these are recorded as ops of one closed family (Note [Create graph] (block-sparse)
// in block_sparse_linear.cpp): I(G, w) = G W and Wg(G, x) = the stored blocks of G^T x, whose own
// gradients are again F (this op without bias), I and Wg; the dense W is never formed, at any order.
//
// Note [Block-sparse storage]: the pattern is a partition of the output rows into row groups and of the
// input columns into column groups (a uniform grid of bo x bi blocks, or the groups of a block-diagonal
// layer), plus the set of (row group, column group) cells that are stored. Blocks are stored in row-major
// block order (by row group, then column group), each block row-major (rows x cols), one after another in
// one parameter tensor:
//   - every block the same size (uniform grid, or equal block-diagonal groups): weight shape (nnz, bo, bi),
//     weight[k] == W[row_k : row_k + bo, col_k : col_k + bi];
//   - blocks of different sizes (block-diagonal groups of different sizes): a flat (total,) tensor; block k
//     starts at blocks()[k].offset.
// The weight is an ordinary tensor, so optimizers and checkpoints treat it like any other parameter.
//
// Note [Block-sparse parallelism]: forward tasks are (batch tile x row group): each owns its slice of y.
// Input-gradient tasks are (batch tile x column group), summing that column's blocks in a fixed order.
// Weight-gradient tasks own a run of stored blocks of one row group (full batch, fixed batch chunks).
// The partition depends only on the pattern and the batch size, never on the thread count, and there
// are no float atomics, so results are bit-identical with any number of threads. Groups at most 16
// wide use register-tiled lane kernels on transposed x / G instead of BLAS (Note [Lane kernels] in
// block_sparse_kernels.cpp; their tasks are groups x fixed batch chunks). Wider groups: each task calls
// single-threaded CBLAS GEMM on strided views (one block) or on gathered panels (several blocks of one
// row/column group concatenated, so that one GEMM has a long inner dimension); OpenBLAS is held at one
// thread while the kernels run so TBB tasks do not oversubscribe the cores.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/blocks.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad {

namespace detail {
struct BlockCsr;  // ops/kernels/block_sparse_kernels.hpp
}

/// A number of input features (columns of W). A strong type: with OutFeatures it makes the
/// in-before-out order of every BlockSparsePattern factory checked by the compiler, so that sizes
/// given in the wrong order (or plain integers, as in the out-before-in API before) fail to compile
/// instead of silently describing another layer. `InFeatures{784}`.
struct InFeatures {
  explicit constexpr InFeatures(std::int64_t v) : value(v) {}
  std::int64_t value;
};
/// A number of output features (rows of W). `OutFeatures{256}`.
struct OutFeatures {
  explicit constexpr OutFeatures(std::int64_t v) : value(v) {}
  std::int64_t value;
};
/// The size of one block of a uniform grid: `in` input columns by `out` output rows, in that order
/// (`{InFeatures{8}, OutFeatures{4}}`; the block is an out x in sub-matrix of W).
struct BlockSize {
  InFeatures in;
  OutFeatures out;
};

/// Immutable description of which blocks of an (out x in) weight are stored. Cheap to copy (shared).
/// Every factory takes sizes in PyTorch's order, in_features before out_features, as strong types
/// (InFeatures, OutFeatures, BlockSize): a swap does not compile. Masks and block coordinates follow
/// W's own (out, in) layout, like torch.nn.Linear's weight: (block row, block column).
///
/// Note [Block CSR]: a block pattern is a CsrPattern over its grid (block_pattern(): rows = row groups,
/// columns = column groups, entry k = stored block k), plus the groups' sizes. Its indices are that
/// pattern's int64 tensors, and the column-major view the input gradient walks is the CsrPattern's
/// cached transpose (its row offsets and permutation), so a block pattern and a CSR matrix share one
/// vocabulary and one set of index machinery (ops/sparse.hpp). from_csr makes a block pattern that
/// shares a given CsrPattern; element_pattern() is the (out x in) CSR of its stored elements, built
/// on first use and shared by every copy, which block_sparse_to_csr / block_sparse_from_csr convert
/// through.
class BlockSparsePattern {
 public:
  /// One stored block: W[row : row + rows, col : col + cols], stored at weight element `offset`, in
  /// grid cell (row_group, col_group) (core/blocks.hpp: the kernels' type too, one definition).
  using Block = StoredBlock;
  /// A row or column group: [begin, begin + size).
  using Group = BlockGroup;
  /// One group of a block-diagonal layer: `in` inputs connected to `out` outputs,
  /// `{InFeatures{5}, OutFeatures{7}}`.
  struct DiagonalGroup {
    constexpr DiagonalGroup(InFeatures in_features, OutFeatures out_features)
        : in(in_features.value), out(out_features.value) {}
    std::int64_t in = 0, out = 0;
  };

  /// Uniform grid of blocks of `block` size over an (out x in) weight; `mask` has W's block layout,
  /// shape (out/block.out, in/block.in), non-zero = stored. The block sizes must divide the layer's
  /// (any positive sizes, not only powers of two).
  static BlockSparsePattern from_block_mask(InFeatures in, OutFeatures out, BlockSize block, const Tensor& mask);
  /// Uniform grid as above; the stored blocks are the given (block row, block column) coordinates of
  /// W, i.e. (output block, input block) (any order; duplicates and out-of-range coordinates are errors).
  static BlockSparsePattern from_block_coords(InFeatures in, OutFeatures out, BlockSize block,
                                              const std::vector<std::pair<std::int64_t, std::int64_t>>& coords);
  /// Uniform grid whose stored blocks are the entries of `grid`, a CsrPattern of shape (out/block.out,
  /// in/block.in) over the block grid (block k = entry k: a block CSR). The pattern is shared, not
  /// copied, so its cached transpose serves both. Made from COO block coordinates by
  /// sparse_coo_tensor(indices, values, grid shape).pattern(), or from a CSR matrix by its pattern().
  static BlockSparsePattern from_csr(InFeatures in, OutFeatures out, BlockSize block, const CsrPattern& grid);
  /// Uniform grid of blocks of `block` size read from a dense (out, in) element mask (W's layout),
  /// which must be block aligned: each block entirely zero or entirely non-zero.
  static BlockSparsePattern from_element_mask(const Tensor& mask, BlockSize block);
  /// Uniform grid of blocks of `block` size with round(density x grid blocks) blocks stored, chosen
  /// uniformly at random from `gen` (a partial Fisher-Yates shuffle of the grid cells): the static random
  /// pattern that sparse-training baselines start from. density in [0, 1].
  static BlockSparsePattern random(InFeatures in, OutFeatures out, BlockSize block, double density, Generator& gen);
  /// Block-diagonal layer: group g maps its `in` inputs to its `out` outputs, groups laid out in order
  /// along both axes; in_features = sum of in, out_features = sum of out.
  static BlockSparsePattern block_diagonal(const std::vector<DiagonalGroup>& groups);
  /// Same, checking that the groups add up to the given layer size.
  static BlockSparsePattern block_diagonal(InFeatures in, OutFeatures out, const std::vector<DiagonalGroup>& groups);

  std::int64_t in_features() const;
  std::int64_t out_features() const;
  std::int64_t num_blocks() const;
  const std::vector<Block>& blocks() const;
  const std::vector<Group>& row_groups() const;
  const std::vector<Group>& col_groups() const;
  /// The stored blocks as a CSR pattern over the grid (grid_shape(); Note [Block CSR]): the blocks of
  /// row group r are blocks()[crow[r] : crow[r + 1]] at column groups col[k]; those of column group c
  /// are blocks()[perm[k]] for k in [tcrow[c], tcrow[c + 1]) of block_pattern().transposed(), ordered
  /// by row group.
  const CsrPattern& block_pattern() const;
  /// The (out x in) CSR pattern of the stored elements, rows in order, columns increasing. Built on
  /// first use in O(stored elements), once, thread-safe, and shared by every copy of this pattern
  /// (with the weight position of each of its entries: three int64 arrays of stored() elements).
  const CsrPattern& element_pattern() const;
  /// The (block rows, block columns) of the uniform grid, i.e. the shape of a block mask; for a
  /// block-diagonal layer (row groups, column groups).
  Shape grid_shape() const;
  /// The block size (out rows, in columns) of a uniform grid; (0, 0) when the blocks differ in size.
  std::pair<std::int64_t, std::int64_t> block_shape() const;
  /// The (block row, block column) of every stored block, in storage order.
  std::vector<std::pair<std::int64_t, std::int64_t>> block_coords() const;
  /// True when every block has the same size (weight shape (nnz, bo, bi)).
  bool is_uniform() const;
  /// Shape of the packed weight tensor: (nnz, bo, bi) when uniform, else (stored_elements,).
  Shape weight_shape() const;
  /// Number of stored weight elements.
  std::int64_t stored_elements() const;
  /// Number of input columns connected to output row i (the fan-in used for initialisation).
  std::vector<std::int64_t> row_fan_in() const;
  /// Dense (out, in) 0/1 mask of the stored elements.
  Tensor element_mask(Dtype dtype = kFloat32) const;
  /// "BlockSparsePattern(out=.., in=.., blocks=.., ...)" for messages.
  std::string str() const;

  bool operator==(const BlockSparsePattern& other) const;
  /// The kernels' view of this pattern (internal; built with the pattern).
  const detail::BlockCsr& csr() const;
  // The conversions read the element pattern's positions cached beside it.
  friend SparseCsr block_sparse_to_csr(const Tensor& weight, const BlockSparsePattern& pattern);
  friend Tensor block_sparse_from_csr(const SparseCsr& a, const BlockSparsePattern& pattern);

  struct Impl;

 private:
  explicit BlockSparsePattern(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// y = x W^T + b with W block-sparse (see the notes above). x: (in) or (batch..., in), float32 or float64;
/// weight: the packed blocks, shape pattern.weight_shape(), same dtype; bias: (out) or undefined (no bias).
/// Returns (out) or (batch..., out). Differentiable with respect to x, weight and bias, to any order:
/// under create_graph the backward is recorded with block-sparse ops (O(stored + batch x (in + out))
/// memory, never the dense weight).
/// @op `block_sparse_linear(x, W, b, pattern)`
///   | y = x·Wᵀ + b, W stored by blocks: y[m, i] = b[i] + Σ over the stored blocks B covering row i of
///     Σ_{j∈cols(B)} x[m, j]·W_B[i, j], x and y flattened to rows m
///   | with g flattened likewise: dx[:, cols] = Σ over the blocks B of that block column of g[:, rows(B)]·W_B (the
///     transposed pattern), dW_B = g[:, rows(B)]ᵀ·x[:, cols(B)] (stored blocks only), db = Σ_m g[m, :] — see
///     [block_sparse_linear.md](block_sparse_linear.md)
///   | — (compared through torch.nn.functional.linear with the dense W)
Tensor block_sparse_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const BlockSparsePattern& pattern);

/// @op `block_sparse_to_dense(W, pattern)` | the dense (out, in) matrix with zeros outside the stored blocks
///   | none (no autograd history: a converter for inspection) | —
Tensor block_sparse_to_dense(const Tensor& weight, const BlockSparsePattern& pattern);
/// @op `block_sparse_from_dense(D, pattern)` | the stored blocks of a dense (out, in) matrix (entries outside
///   the pattern ignored) | none (no autograd history: a converter for initialisation) | —
Tensor block_sparse_from_dense(const Tensor& dense, const BlockSparsePattern& pattern);

/// The stored elements as a CSR matrix on pattern.element_pattern() (its values are W's stored
/// elements in row-major element order). Differentiable with respect to W: a gather, linear in the
/// stored elements.
/// @op `block_sparse_to_csr(W, pattern)` | out.values[e] = W[pos[e]], pos[e] = the weight element of entry e of the
///   element pattern | dW[pos[e]] = g.values[e] | torch.Tensor.to_sparse_csr (of the dense W; compared through its
///   values)
SparseCsr block_sparse_to_csr(const Tensor& weight, const BlockSparsePattern& pattern);
/// The packed blocks (pattern.weight_shape()) of a CSR matrix on pattern.element_pattern() (the same
/// pattern object or an equal one; anything else is an error naming the op and both patterns): the
/// inverse of block_sparse_to_csr. Differentiable with respect to a's values.
/// @op `block_sparse_from_csr(A, pattern)` | W[k] = A.values[entry[k]], entry[k] = the element-pattern entry of weight
///   element k | dA.values[entry[k]] = g[k] | — (compared through the permutation that sorts the dense positions)
Tensor block_sparse_from_csr(const SparseCsr& a, const BlockSparsePattern& pattern);

/// Moves packed blocks from one pattern to another on the same grid (same features and groups): a block
/// stored in both keeps its values, a block only in `to` is zero, a block only in `from` is dropped. What
/// a sparsifier does to a weight, its gradient and its optimizer state when the structure changes. One
/// merge of the two sorted block lists and one copy: O(stored blocks + stored elements).
/// @op `block_sparse_remap(W, from, to)` | out_B = W_B for every block B of `to` stored in `from`, 0 for the
///   others | none (no autograd history: a converter for structure changes) | —
Tensor block_sparse_remap(const Tensor& weight, const BlockSparsePattern& from, const BlockSparsePattern& to);

/// The Frobenius norm of every block of the dense weight gradient of a linear layer, without forming
/// that gradient: for y = x Wᵀ with W (out x in) cut into a uniform grid of `block`-sized blocks, and g
/// = dL/dy, out[r, c] = ‖(gᵀ x)[r·bo : (r+1)·bo, c·bi : (c+1)·bi]‖_F over the grid (out/bo, in/bi). The
/// growth criterion of RigL (nn::Sparsifier). x (batch..., in), grad_output (batch..., out), one float
/// dtype. Computed one block row at a time (tasks of one block row, the batch in fixed chunks), so the
/// memory beyond the result is one (bo x in) panel per running task and the bits do not depend on the
/// thread count. O(batch x in x out) multiply-adds: a dense weight-gradient's worth, for update steps.
/// @op `block_grad_norms(x, g, block)` | out[r, c] = ‖Σ_m g[m, rows(r)]ᵀ x[m, cols(c)]‖_F | none (no autograd
///   history: a statistic) | —
Tensor block_grad_norms(const Tensor& x, const Tensor& grad_output, BlockSize block);

}  // namespace xgrad
