// Block-sparse linear: the pattern type, the op (forward and hand-written backward) and dense
// conversions. Kernels live in block_sparse_kernels.cpp. See the notes in block_sparse_linear.hpp.
#include "xgrad/ops/block_sparse_linear.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <numeric>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/ops/kernels/block_sparse_kernels.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

struct BlockSparsePattern::Impl {
  // The kernels' block CSR: sizes, blocks and groups, and index spans into `grid` (Note [Block CSR]).
  detail::BlockCsr csr;
  CsrPattern grid;
  bool uniform = true;
  std::int64_t bo = 0, bi = 0;  // block size of a uniform grid (weight_shape of a pattern with no block)
  // element_pattern() and, per entry, the weight element it holds (positions) and its inverse
  // (entries), built together on first use.
  mutable std::once_flag element_once;
  mutable CsrPattern element;
  mutable Tensor positions, entries;
};

namespace {

using Impl = BlockSparsePattern::Impl;
using Group = BlockSparsePattern::Group;
using Cells = std::vector<std::pair<std::int64_t, std::int64_t>>;

// The grid CsrPattern of sorted, unique (row group, col group) cells.
CsrPattern grid_of_cells(const char* fn, std::int64_t nr, std::int64_t nc, const Cells& cells) {
  std::vector<std::int64_t> crow(static_cast<std::size_t>(nr + 1), 0), col;
  col.reserve(cells.size());
  for (const auto& [r, c] : cells) {
    ++crow[static_cast<std::size_t>(r + 1)];
    col.push_back(c);
  }
  std::partial_sum(crow.begin(), crow.end(), crow.begin());
  return CsrPattern::from_indices(crow, col, nr, nc, fn);
}

// Builds the pattern from the row and column partitions and the grid pattern of stored cells (block k =
// entry k). Sizes are checked (Note [Checked sizes]): the stored element count is a sum of block products.
std::shared_ptr<const Impl> build_impl(const char* fn, std::int64_t out, std::int64_t in, std::vector<Group> rows,
                                       std::vector<Group> cols, CsrPattern grid, std::int64_t bo, std::int64_t bi) {
  auto p = std::make_shared<Impl>();
  p->bo = bo;
  p->bi = bi;
  p->csr.out = out;
  p->csr.in = in;
  p->csr.row_groups = std::move(rows);
  p->csr.col_groups = std::move(cols);
  p->grid = std::move(grid);
  const auto crow = p->grid.crow();
  const auto col = p->grid.col();
  p->csr.blocks.reserve(col.size());
  std::int64_t offset = 0;
  for (std::size_t r = 0; r + 1 < crow.size(); ++r)
    for (auto k = crow[r]; k < crow[r + 1]; ++k) {
      const auto c = col[static_cast<std::size_t>(k)];
      const Group& rg = p->csr.row_groups[r];
      const Group& cg = p->csr.col_groups[static_cast<std::size_t>(c)];
      p->csr.blocks.push_back({rg.begin, rg.size, cg.begin, cg.size, offset, static_cast<std::int64_t>(r), c});
      offset = checked_add(offset, checked_mul(rg.size, cg.size, fn, "block size"), fn, "stored elements");
    }
  p->csr.stored = offset;
  const auto& t = p->grid.transposed();
  p->csr.row_ptr = crow;
  p->csr.col_ptr = t.crow();
  p->csr.col_index = t.perm();
  for (const auto& b : p->csr.blocks)
    if (b.rows != p->csr.blocks.front().rows || b.cols != p->csr.blocks.front().cols) p->uniform = false;
  // An empty pattern of a block-diagonal layer with unequal groups is still "uniform" (no blocks).
  return p;
}

std::shared_ptr<const Impl> build(const char* fn, std::int64_t out, std::int64_t in, std::vector<Group> rows,
                                  std::vector<Group> cols, const Cells& cells, std::int64_t bo, std::int64_t bi) {
  // A pattern too large for memory is an error stating the bytes, not a bare std::bad_alloc.
  const std::size_t nrg = rows.size(), ncg = cols.size(), nb = cells.size();  // before the moves below
  const double bytes = (static_cast<double>(nrg) + static_cast<double>(ncg)) *
                           static_cast<double>(sizeof(Group) + 2 * sizeof(std::int64_t)) +
                       static_cast<double>(nb) * static_cast<double>(sizeof(BlockSparsePattern::Block) + 32);
  try {
    CsrPattern grid = grid_of_cells(fn, static_cast<std::int64_t>(nrg), static_cast<std::int64_t>(ncg), cells);
    return build_impl(fn, out, in, std::move(rows), std::move(cols), std::move(grid), bo, bi);
  } catch (const std::bad_alloc&) {
    detail::throw_error(
        fmt::format("{}: out of memory: a pattern of {} row groups, {} column groups and {} blocks "
                    "needs about {:.6g} bytes",
                    fn, nrg, ncg, nb, bytes));
  }
}

bool same_groups(const std::vector<Group>& a, const std::vector<Group>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Group& x, const Group& y) { return x.begin == y.begin && x.size == y.size; });
}

std::vector<Group> uniform_groups(const char* fn, std::int64_t n, std::int64_t b) {
  const std::size_t bytes = checked_nbytes(n / b, sizeof(Group), fn, "block grid");
  check_host_memory(bytes, fn, "block grid");
  std::vector<Group> g;
  try {
    g.resize(static_cast<std::size_t>(n / b));
  } catch (const std::bad_alloc&) {
    detail::throw_error(fmt::format("{}: out of memory: {} groups of {} need {} bytes", fn, n / b, b, bytes));
  }
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = {static_cast<std::int64_t>(i) * b, b};
  return g;
}

void check_grid(const char* fn, std::int64_t out, std::int64_t in, std::int64_t bo, std::int64_t bi) {
  XGRAD_CHECK(out >= 0 && in >= 0, "{}: out={} and in={} must be >= 0", fn, out, in);
  XGRAD_CHECK(bo > 0 && bi > 0, "{}: block size (bo={}, bi={}) must be positive", fn, bo, bi);
  XGRAD_CHECK(out % bo == 0 && in % bi == 0,
              "{}: block size (bo={}, bi={}) must divide the weight shape (out={}, in={}): {} % {} = {}, {} % {} = {}",
              fn, bo, bi, out, in, out, bo, out % bo, in, bi, in % bi);
}

}  // namespace

BlockSparsePattern BlockSparsePattern::from_block_mask(InFeatures in_features, OutFeatures out_features,
                                                       BlockSize block, const Tensor& mask) {
  constexpr const char* fn = "BlockSparsePattern::from_block_mask";
  const std::int64_t in = in_features.value, out = out_features.value, bi = block.in.value, bo = block.out.value;
  check_grid(fn, out, in, bo, bi);
  XGRAD_CHECK(mask.defined(), "{}: argument 'mask' is an undefined tensor", fn);
  const Shape grid{out / bo, in / bi};
  XGRAD_CHECK(mask.shape() == grid,
              "{}: argument 'mask' has shape {} but the block grid of an (out={}, in={}) weight with ({}, {}) "
              "blocks is {}",
              fn, shape_str(mask.shape()), out, in, bo, bi, shape_str(grid));
  const std::vector<double> v = mask.to_vector();
  Cells cells;
  for (std::int64_t r = 0; r < grid[0]; ++r)
    for (std::int64_t c = 0; c < grid[1]; ++c)
      if (v[static_cast<std::size_t>(r * grid[1] + c)] != 0.0) cells.emplace_back(r, c);
  return BlockSparsePattern(build(fn, out, in, uniform_groups(fn, out, bo), uniform_groups(fn, in, bi), cells, bo, bi));
}

BlockSparsePattern BlockSparsePattern::from_block_coords(
    InFeatures in_features, OutFeatures out_features, BlockSize block,
    const std::vector<std::pair<std::int64_t, std::int64_t>>& coords) {
  constexpr const char* fn = "BlockSparsePattern::from_block_coords";
  const std::int64_t in = in_features.value, out = out_features.value, bi = block.in.value, bo = block.out.value;
  check_grid(fn, out, in, bo, bi);
  const std::int64_t nr = out / bo, nc = in / bi;
  for (const auto& [r, c] : coords)
    XGRAD_CHECK(r >= 0 && r < nr && c >= 0 && c < nc,
                "{}: argument 'coords' has block ({}, {}) outside the block grid ({}, {}) of an (out={}, in={}) "
                "weight with ({}, {}) blocks",
                fn, r, c, nr, nc, out, in, bo, bi);
  auto cells = coords;
  // Sorted input (a sparsifier's merged lists) is taken in linear time.
  if (!std::is_sorted(cells.begin(), cells.end())) std::sort(cells.begin(), cells.end());
  const auto dup = std::adjacent_find(cells.begin(), cells.end());
  XGRAD_CHECK(dup == cells.end(), "{}: argument 'coords' lists block ({}, {}) more than once", fn,
              dup == cells.end() ? 0 : dup->first, dup == cells.end() ? 0 : dup->second);
  return BlockSparsePattern(build(fn, out, in, uniform_groups(fn, out, bo), uniform_groups(fn, in, bi), cells, bo, bi));
}

BlockSparsePattern BlockSparsePattern::random(InFeatures in_features, OutFeatures out_features, BlockSize block,
                                              double density, Generator& gen) {
  constexpr const char* fn = "BlockSparsePattern::random";
  const std::int64_t in = in_features.value, out = out_features.value, bi = block.in.value, bo = block.out.value;
  check_grid(fn, out, in, bo, bi);
  XGRAD_CHECK(density >= 0.0 && density <= 1.0, "{}: argument 'density' is {} but must be in [0, 1]", fn, density);
  const std::int64_t nr = out / bo, nc = in / bi;
  const std::int64_t cells_n = checked_mul(nr, nc, fn, "block grid");
  check_host_memory(checked_nbytes(cells_n, sizeof(std::int64_t), fn, "block grid"), fn, "block grid");
  const auto k = static_cast<std::int64_t>(std::llround(density * double(cells_n)));
  std::vector<std::int64_t> cell(static_cast<std::size_t>(cells_n));
  std::iota(cell.begin(), cell.end(), std::int64_t{0});
  partial_shuffle(cell, static_cast<std::size_t>(k), gen);
  Cells cells;
  cells.reserve(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i)
    cells.emplace_back(cell[static_cast<std::size_t>(i)] / nc, cell[static_cast<std::size_t>(i)] % nc);
  std::sort(cells.begin(), cells.end());
  return BlockSparsePattern(build(fn, out, in, uniform_groups(fn, out, bo), uniform_groups(fn, in, bi), cells, bo, bi));
}

BlockSparsePattern BlockSparsePattern::from_csr(InFeatures in_features, OutFeatures out_features, BlockSize block,
                                                const CsrPattern& grid) {
  constexpr const char* fn = "BlockSparsePattern::from_csr";
  const std::int64_t in = in_features.value, out = out_features.value, bi = block.in.value, bo = block.out.value;
  check_grid(fn, out, in, bo, bi);
  XGRAD_CHECK(grid.rows() == out / bo && grid.cols() == in / bi,
              "{}: argument 'grid' is a ({}, {}) pattern but the block grid of an (out={}, in={}) weight with ({}, {}) "
              "blocks is ({}, {})",
              fn, grid.rows(), grid.cols(), out, in, bo, bi, out / bo, in / bi);
  return BlockSparsePattern(
      build_impl(fn, out, in, uniform_groups(fn, out, bo), uniform_groups(fn, in, bi), grid, bo, bi));
}

BlockSparsePattern BlockSparsePattern::from_element_mask(const Tensor& mask, BlockSize block) {
  constexpr const char* fn = "BlockSparsePattern::from_element_mask";
  const std::int64_t bi = block.in.value, bo = block.out.value;
  XGRAD_CHECK(mask.defined(), "{}: argument 'mask' is an undefined tensor", fn);
  XGRAD_CHECK(mask.dim() == 2, "{}: argument 'mask' must be an (out, in) matrix, got shape {}", fn,
              shape_str(mask.shape()));
  const std::int64_t out = mask.size(0), in = mask.size(1);
  check_grid(fn, out, in, bo, bi);
  const std::vector<double> v = mask.to_vector();
  Cells cells;
  for (std::int64_t r = 0; r < out / bo; ++r)
    for (std::int64_t c = 0; c < in / bi; ++c) {
      const bool first = v[static_cast<std::size_t>(r * bo * in + c * bi)] != 0.0;
      for (std::int64_t i = r * bo; i < (r + 1) * bo; ++i)
        for (std::int64_t j = c * bi; j < (c + 1) * bi; ++j)
          XGRAD_CHECK((v[static_cast<std::size_t>(i * in + j)] != 0.0) == first,
                      "{}: argument 'mask' of shape {} is not aligned to ({}, {}) blocks: block ({}, {}) mixes zero "
                      "and non-zero entries (element ({}, {}) is {}, element ({}, {}) is {})",
                      fn, shape_str(mask.shape()), bo, bi, r, c, r * bo, c * bi, first ? "non-zero" : "zero", i, j,
                      first ? "zero" : "non-zero");
      if (first) cells.emplace_back(r, c);
    }
  return BlockSparsePattern(build(fn, out, in, uniform_groups(fn, out, bo), uniform_groups(fn, in, bi), cells, bo, bi));
}

BlockSparsePattern BlockSparsePattern::block_diagonal(const std::vector<DiagonalGroup>& groups) {
  constexpr const char* fn = "BlockSparsePattern::block_diagonal";
  // Groups of size 0 (and an empty list) are allowed: a group with in = 0 or out = 0 stores no block
  // (its outputs are the bias, its inputs get a zero gradient); size-0 groups take no rows or columns.
  std::vector<Group> rows, cols;
  Cells cells;
  std::int64_t in = 0, out = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    XGRAD_CHECK(groups[g].in >= 0 && groups[g].out >= 0,
                "{}: argument 'groups': group {} has in={} and out={}; both must be >= 0", fn, g, groups[g].in,
                groups[g].out);
    if (groups[g].out > 0) rows.push_back({out, groups[g].out});
    if (groups[g].in > 0) cols.push_back({in, groups[g].in});
    if (groups[g].in > 0 && groups[g].out > 0)
      cells.emplace_back(static_cast<std::int64_t>(rows.size()) - 1, static_cast<std::int64_t>(cols.size()) - 1);
    in = checked_add(in, groups[g].in, fn, "groups (sum of in)");
    out = checked_add(out, groups[g].out, fn, "groups (sum of out)");
  }
  return BlockSparsePattern(build(fn, out, in, std::move(rows), std::move(cols), cells, 0, 0));
}

BlockSparsePattern BlockSparsePattern::block_diagonal(InFeatures in_features, OutFeatures out_features,
                                                      const std::vector<DiagonalGroup>& groups) {
  const std::int64_t in = in_features.value, out = out_features.value;
  BlockSparsePattern p = block_diagonal(groups);
  XGRAD_CHECK(p.in_features() == in && p.out_features() == out,
              "BlockSparsePattern::block_diagonal: argument 'groups' adds up to in={}, out={} but the layer is in={}, "
              "out={}",
              p.in_features(), p.out_features(), in, out);
  return p;
}

std::int64_t BlockSparsePattern::in_features() const { return impl_->csr.in; }
std::int64_t BlockSparsePattern::out_features() const { return impl_->csr.out; }
std::int64_t BlockSparsePattern::num_blocks() const { return static_cast<std::int64_t>(impl_->csr.blocks.size()); }
const std::vector<BlockSparsePattern::Block>& BlockSparsePattern::blocks() const { return impl_->csr.blocks; }
const std::vector<Group>& BlockSparsePattern::row_groups() const { return impl_->csr.row_groups; }
const std::vector<Group>& BlockSparsePattern::col_groups() const { return impl_->csr.col_groups; }
const CsrPattern& BlockSparsePattern::block_pattern() const { return impl_->grid; }
const detail::BlockCsr& BlockSparsePattern::csr() const { return impl_->csr; }

const CsrPattern& BlockSparsePattern::element_pattern() const {
  // The row groups partition the rows (a grid, or a block-diagonal layer's groups), so every row's
  // offset is written below. Row i's entries are the columns of the blocks of its row group, in block
  // (= column) order; the weight element of entry (i, j) in block b is b.offset + (i - b.row) * b.cols
  // + (j - b.col), written with its inverse straight into the two index tensors.
  std::call_once(impl_->element_once, [this] {
    constexpr const char* fn = "BlockSparsePattern::element_pattern";
    const auto& p = impl_->csr;
    check_host_memory(
        checked_nbytes(checked_mul(p.stored, 4, fn, "stored elements"), sizeof(std::int64_t), fn, "stored elements"),
        fn, "stored elements");
    std::vector<std::int64_t> crow(static_cast<std::size_t>(p.out + 1), 0), col;
    col.reserve(static_cast<std::size_t>(p.stored));
    impl_->positions = Tensor::empty({p.stored}, kInt64);
    impl_->entries = Tensor::empty({p.stored}, kInt64);
    std::int64_t* pos = impl_->positions.data<std::int64_t>();
    std::int64_t* inv = impl_->entries.data<std::int64_t>();
    for (std::size_t r = 0; r < p.row_groups.size(); ++r) {
      const Group& g = p.row_groups[r];
      for (std::int64_t i = g.begin; i < g.begin + g.size; ++i) {
        for (auto k = p.row_ptr[r]; k < p.row_ptr[r + 1]; ++k) {
          const auto& b = p.blocks[static_cast<std::size_t>(k)];
          for (std::int64_t j = 0; j < b.cols; ++j) {
            const auto e = static_cast<std::int64_t>(col.size());
            pos[e] = b.offset + (i - b.row) * b.cols + j;
            inv[pos[e]] = e;
            col.push_back(b.col + j);
          }
        }
        crow[static_cast<std::size_t>(i + 1)] = static_cast<std::int64_t>(col.size());
      }
    }
    impl_->element = CsrPattern::from_indices(crow, col, p.out, p.in, fn);
  });
  return impl_->element;
}

bool BlockSparsePattern::is_uniform() const { return impl_->uniform; }
std::int64_t BlockSparsePattern::stored_elements() const { return impl_->csr.stored; }

Shape BlockSparsePattern::weight_shape() const {
  if (!impl_->uniform) return {impl_->csr.stored};
  // Uniform: (nnz, bo, bi); with no block at all, the grid's block size keeps the rank ((0, 0, 0) for
  // a block-diagonal pattern without blocks).
  const std::int64_t bo = impl_->csr.blocks.empty() ? impl_->bo : impl_->csr.blocks.front().rows;
  const std::int64_t bi = impl_->csr.blocks.empty() ? impl_->bi : impl_->csr.blocks.front().cols;
  return {num_blocks(), bo, bi};
}

Shape BlockSparsePattern::grid_shape() const {
  return {static_cast<std::int64_t>(impl_->csr.row_groups.size()),
          static_cast<std::int64_t>(impl_->csr.col_groups.size())};
}

std::pair<std::int64_t, std::int64_t> BlockSparsePattern::block_shape() const {
  const auto equal = [](const std::vector<Group>& g) {
    return std::all_of(g.begin(), g.end(), [&](const Group& x) { return x.size == g.front().size; });
  };
  if (!equal(impl_->csr.row_groups) || !equal(impl_->csr.col_groups)) return {0, 0};
  return {impl_->csr.row_groups.empty() ? impl_->bo : impl_->csr.row_groups.front().size,
          impl_->csr.col_groups.empty() ? impl_->bi : impl_->csr.col_groups.front().size};
}

std::vector<std::pair<std::int64_t, std::int64_t>> BlockSparsePattern::block_coords() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> c;
  c.reserve(impl_->csr.blocks.size());
  for (const auto& b : impl_->csr.blocks) c.emplace_back(b.row_group, b.col_group);
  return c;
}

std::vector<std::int64_t> BlockSparsePattern::row_fan_in() const {
  std::vector<std::int64_t> fan(static_cast<std::size_t>(impl_->csr.out), 0);
  for (const auto& b : impl_->csr.blocks)
    for (std::int64_t i = b.row; i < b.row + b.rows; ++i) fan[static_cast<std::size_t>(i)] += b.cols;
  return fan;
}

Tensor BlockSparsePattern::element_mask(Dtype dtype) const {
  const std::int64_t n = checked_mul(impl_->csr.out, impl_->csr.in, "BlockSparsePattern::element_mask", "out * in");
  check_host_memory(checked_nbytes(n, sizeof(double), "BlockSparsePattern::element_mask", "out * in"),
                    "BlockSparsePattern::element_mask", "out * in");
  std::vector<double> m(static_cast<std::size_t>(n), 0.0);
  for (const auto& b : impl_->csr.blocks)
    for (std::int64_t i = b.row; i < b.row + b.rows; ++i)
      std::fill_n(m.begin() + i * impl_->csr.in + b.col, b.cols, 1.0);
  return Tensor::from_vector(m, {impl_->csr.out, impl_->csr.in}, dtype);
}

std::string BlockSparsePattern::str() const {
  return fmt::format("BlockSparsePattern(out={}, in={}, blocks={}, stored={} of {} ({:.4g}), weight {})",
                     impl_->csr.out, impl_->csr.in, num_blocks(), impl_->csr.stored,
                     double(impl_->csr.out) * double(impl_->csr.in),
                     impl_->csr.out > 0 && impl_->csr.in > 0
                         ? double(impl_->csr.stored) / (double(impl_->csr.out) * double(impl_->csr.in))
                         : 0.0,
                     shape_str(weight_shape()));
}

bool BlockSparsePattern::operator==(const BlockSparsePattern& o) const {
  return impl_ == o.impl_ ||
         (impl_->csr.out == o.impl_->csr.out && impl_->csr.in == o.impl_->csr.in &&
          same_groups(impl_->csr.row_groups, o.impl_->csr.row_groups) &&
          same_groups(impl_->csr.col_groups, o.impl_->csr.col_groups) && impl_->grid == o.impl_->grid);
}

// ---- the op -------------------------------------------------------------------------------------
namespace {

constexpr const char* kOp = "block_sparse_linear";

void check_weight(const char* fn, const Tensor& weight, const BlockSparsePattern& p) {
  XGRAD_CHECK(weight.defined(), "{}: argument 'weight' is an undefined tensor", fn);
  XGRAD_CHECK(weight.shape() == p.weight_shape(),
              "{}: argument 'weight' has shape {} but the pattern stores {} (packed blocks of {})", fn,
              shape_str(weight.shape()), shape_str(p.weight_shape()), p.str());
}

// M: the rows of x flattened to (M, in) (not numel / in: in may be 0).
std::int64_t batch_rows(const Shape& x_shape) { return checked_prod(x_shape, 0, x_shape.size() - 1, kOp, "x"); }

void check_inputs(const Tensor& x, const Tensor& weight, const Tensor& bias, const BlockSparsePattern& p) {
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", kOp);
  XGRAD_CHECK(x.dim() >= 1 && x.size(-1) == p.in_features(),
              "{}: argument 'x' has shape {} but its last dimension must be in_features={} (weight is out={} x in={})",
              kOp, shape_str(x.shape()), p.in_features(), p.out_features(), p.in_features());
  check_weight(kOp, weight, p);
  XGRAD_CHECK(weight.dtype() == x.dtype(), "{}: dtype mismatch: x is {} {}, weight is {} {}", kOp, x.dtype(),
              shape_str(x.shape()), weight.dtype(), shape_str(weight.shape()));
  if (bias.defined()) {
    XGRAD_CHECK(bias.shape() == Shape{p.out_features()}, "{}: argument 'bias' has shape {} but must be ({},)", kOp,
                shape_str(bias.shape()), p.out_features());
    XGRAD_CHECK(bias.dtype() == x.dtype(), "{}: dtype mismatch: x is {} {}, bias is {} {}", kOp, x.dtype(),
                shape_str(x.shape()), bias.dtype(), shape_str(bias.shape()));
  }
  XGRAD_CHECK(batch_rows(x.shape()) < INT_MAX && p.in_features() < INT_MAX && p.out_features() < INT_MAX,
              "{}: argument 'x' of shape {} is too large for 32-bit BLAS indices", kOp, shape_str(x.shape()));
}

// Note [Create graph] (block-sparse): the backward of block_sparse_linear is made of block-sparse
// products only, three ops that are each other's gradients (a closed family, like conv's):
//   F(x, w)  = x W^T (+ b)                 block_sparse_linear                   (M, in)  -> (M, out)
//   I(g, w)  = g W                         block_sparse_linear_backward_input    (M, out) -> (M, in)
//   Wg(g, x) = the stored blocks of g^T x  block_sparse_linear_backward_weight   (M, out), (M, in) -> packed
// with, for an upstream gradient u of the op's output,
//   F:  dx = I(u, w),  dw = Wg(u, x),  db = sum over rows of u (block_sparse_linear_backward_bias)
//   I:  dg = F(u, w) (no bias),  dw = Wg(g, u)     (d<u, g W>/dW = g^T u, restricted to the blocks)
//   Wg: dg = F(x, u) (no bias),  dx = I(g, u)      (<U, g^T x> = tr(x U^T g^T): d/dg = x U^T, d/dx = g U)
// where U is the block-sparse matrix whose stored blocks are u. Memory stays O(stored + M (in + out))
// to any order: the dense (out x in) weight is never formed. Every backward, first-order or recorded,
// calls these ops, whose forwards are the kernels of block_sparse_kernels.cpp (with grad mode off
// they record nothing).
struct BlockSparseLinearFn;
struct BlockSparseLinearBackwardInput;
struct BlockSparseLinearBackwardWeight;

// The pattern an op holds until its forward sets it (BlockSparsePattern has no default): one shared
// placeholder, so that constructing an op (apply does, for every backward call too) costs a
// reference count instead of building a pattern.
const BlockSparsePattern& placeholder_pattern() {
  static const BlockSparsePattern p = BlockSparsePattern::block_diagonal({{InFeatures{1}, OutFeatures{1}}});
  return p;
}

// Shape of a (batch..., n) tensor with its last dimension replaced by n.
Shape with_last(Shape s, std::int64_t n) {
  s.back() = n;
  return s;
}

Tensor apply_forward(const Tensor& x, const Tensor& w, const BlockSparsePattern& p);
Tensor apply_input_grad(const Tensor& g, const Tensor& w, const BlockSparsePattern& p);
Tensor apply_weight_grad(const Tensor& g, const Tensor& x, const BlockSparsePattern& p);

// I(g, w) = g W: (batch..., out) -> (batch..., in); zero columns with no block.
struct BlockSparseLinearBackwardInput : Function<BlockSparseLinearBackwardInput> {
  static constexpr const char* kName = "block_sparse_linear_backward_input";
  static constexpr bool kDifferentiableBackward = true;  // through F and Wg (Note [Create graph] (block-sparse))
  BlockSparsePattern pattern = placeholder_pattern();

  Tensor forward(const Tensor& g, const Tensor& weight, const BlockSparsePattern& p) {
    pattern = p;
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? g : Tensor(), needs_input_grad(0) ? weight : Tensor()});
    const std::int64_t m = batch_rows(g.shape());
    if (m == 0 || p.num_blocks() == 0) return Tensor::zeros(with_last(g.shape(), p.in_features()), g.dtype());
    Tensor dx = Tensor::empty(with_last(g.shape(), p.in_features()), g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::bsl_input_grad<T>(p.csr(), g.data<T>(), m, weight.data<T>(), dx.data<T>());
    });
    return dx;
  }

  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    Tensors res(2);
    if (needs_input_grad(0)) res[0] = apply_forward(grads[0], s[1], pattern);
    if (needs_input_grad(1)) res[1] = apply_weight_grad(s[0], grads[0], pattern);
    return res;
  }
};

// Wg(g, x) = the stored blocks of g^T x (packed, pattern.weight_shape()).
struct BlockSparseLinearBackwardWeight : Function<BlockSparseLinearBackwardWeight> {
  static constexpr const char* kName = "block_sparse_linear_backward_weight";
  static constexpr bool kDifferentiableBackward = true;  // through F and I (Note [Create graph] (block-sparse))
  BlockSparsePattern pattern = placeholder_pattern();

  Tensor forward(const Tensor& g, const Tensor& x, const BlockSparsePattern& p) {
    pattern = p;
    if (needs_input_grad(0) || needs_input_grad(1))
      save_for_backward({needs_input_grad(1) ? g : Tensor(), needs_input_grad(0) ? x : Tensor()});
    const std::int64_t m = batch_rows(g.shape());
    if (m == 0 || p.num_blocks() == 0) return Tensor::zeros(p.weight_shape(), g.dtype());
    Tensor dw = Tensor::empty(p.weight_shape(), g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::bsl_weight_grad<T>(p.csr(), g.data<T>(), x.data<T>(), m, dw.data<T>());
    });
    return dw;
  }

  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    Tensors res(2);
    if (needs_input_grad(0)) res[0] = apply_forward(s[1], grads[0], pattern);
    if (needs_input_grad(1)) res[1] = apply_input_grad(s[0], grads[0], pattern);
    return res;
  }
};

// db = the column sums of g (M, out) (Note [Fused ops]): bsl_bias_grad, or the recorded sum.
struct BlockSparseLinearBackwardBias {
  static constexpr const char* kName = "block_sparse_linear_backward_bias";
  static Tensor kernel(const Tensor& g) {
    const std::int64_t m = batch_rows(g.shape()), n = g.shape().back();
    if (m == 0 || n == 0) return Tensor::zeros({n}, g.dtype());
    Tensor db = Tensor::empty({n}, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::bsl_bias_grad<T>(g.data<T>(), m, n, db.data<T>());
    });
    return db;
  }
  static Tensor formula(const Tensor& g) { return sum(reshape(g, {batch_rows(g.shape()), g.shape().back()}), {0}); }
};

struct BlockSparseLinearFn : Function<BlockSparseLinearFn> {
  static constexpr const char* kName = kOp;
  BlockSparsePattern pattern = placeholder_pattern();

  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const BlockSparsePattern& p) {
    check_inputs(x, weight, bias, p);
    pattern = p;
    const Shape& x_shape = x.shape();
    // Save only what backward reads: x for the weight gradient, the weight for the input gradient.
    save_for_backward({needs_input_grad(1) ? x : Tensor(), needs_input_grad(0) ? weight : Tensor()});
    const std::int64_t m = batch_rows(x_shape);
    Shape y_shape = x.shape();
    y_shape.back() = p.out_features();
    if (m == 0 || p.num_blocks() == 0) {
      // Zero-length sizes (batch 0, no block, in = 0 or out = 0): y is the bias on every row.
      Tensor y = Tensor::zeros(y_shape, x.dtype());
      if (bias.defined() && p.out_features() > 0) {
        const std::size_t row = bias.nbytes();
        for (std::int64_t r = 0; r < m; ++r)
          std::memcpy(static_cast<char*>(y.raw_data()) + static_cast<std::size_t>(r) * row, bias.raw_data(), row);
      }
      return y;
    }
    Tensor y = Tensor::empty(y_shape, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::bsl_forward<T>(p.csr(), x.data<T>(), m, weight.data<T>(), bias.defined() ? bias.data<T>() : nullptr,
                             y.data<T>());
    });
    return y;
  }

  static constexpr bool kDifferentiableBackward = true;  // through I and Wg (Note [Create graph] (block-sparse))

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Tensors s = saved();
    Tensors res(3);
    if (needs_input_grad(0)) res[0] = apply_input_grad(g, s[1], pattern);
    if (needs_input_grad(1)) res[1] = apply_weight_grad(g, s[0], pattern);
    if (needs_input_grad(2)) res[2] = apply_fused<BlockSparseLinearBackwardBias>(g);
    return res;
  }
};

Tensor apply_forward(const Tensor& x, const Tensor& w, const BlockSparsePattern& p) {
  return apply<BlockSparseLinearFn>(x, w, Tensor(), p);
}
Tensor apply_input_grad(const Tensor& g, const Tensor& w, const BlockSparsePattern& p) {
  return apply<BlockSparseLinearBackwardInput>(g, w, p);
}
Tensor apply_weight_grad(const Tensor& g, const Tensor& x, const BlockSparsePattern& p) {
  return apply<BlockSparseLinearBackwardWeight>(g, x, p);
}

}  // namespace

Tensor block_sparse_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const BlockSparsePattern& pattern) {
  return apply<BlockSparseLinearFn>(x, weight, bias, pattern);
}

Tensor block_sparse_to_dense(const Tensor& weight, const BlockSparsePattern& p) {
  check_weight("block_sparse_to_dense", weight, p);
  check_floating("block_sparse_to_dense", "weight", weight);
  Tensor dense = Tensor::zeros({p.out_features(), p.in_features()}, weight.dtype());
  dispatch(weight.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* w = weight.data<T>();
    T* d = dense.data<T>();
    for (const auto& b : p.blocks())
      for (std::int64_t i = 0; i < b.rows; ++i)
        std::memcpy(d + (b.row + i) * p.in_features() + b.col, w + b.offset + i * b.cols, sizeof(T) * b.cols);
  });
  return dense;
}

Tensor block_sparse_from_dense(const Tensor& dense, const BlockSparsePattern& p) {
  constexpr const char* fn = "block_sparse_from_dense";
  XGRAD_CHECK(dense.defined(), "{}: argument 'dense' is an undefined tensor", fn);
  check_floating(fn, "dense", dense);
  XGRAD_CHECK(dense.shape() == (Shape{p.out_features(), p.in_features()}),
              "{}: argument 'dense' has shape {} but the pattern is (out={}, in={})", fn, shape_str(dense.shape()),
              p.out_features(), p.in_features());
  Tensor w = Tensor::empty(p.weight_shape(), dense.dtype());
  dispatch(dense.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = dense.data<T>();
    T* o = w.data<T>();
    for (const auto& b : p.blocks())
      for (std::int64_t i = 0; i < b.rows; ++i)
        std::memcpy(o + b.offset + i * b.cols, d + (b.row + i) * p.in_features() + b.col, sizeof(T) * b.cols);
  });
  return w;
}

SparseCsr block_sparse_to_csr(const Tensor& weight, const BlockSparsePattern& pattern) {
  constexpr const char* fn = "block_sparse_to_csr";
  check_weight(fn, weight, pattern);
  const CsrPattern& e = pattern.element_pattern();
  const Tensor& pos = pattern.impl_->positions;
  return SparseCsr(e, detail::index_select_checked(reshape(weight, {pattern.stored_elements()}), 0,
                                                   {pos.data<std::int64_t>(), static_cast<std::size_t>(pos.numel())}));
}

Tensor block_sparse_from_csr(const SparseCsr& a, const BlockSparsePattern& pattern) {
  constexpr const char* fn = "block_sparse_from_csr";
  XGRAD_CHECK(a.defined(), "{}: argument 'a' is an undefined sparse matrix", fn);
  const CsrPattern& e = pattern.element_pattern();
  XGRAD_CHECK(a.pattern().same_object(e) || a.pattern() == e,
              "{}: argument 'a' ({}) is not on the element pattern of {} ((out={}, in={}) with {} stored elements)", fn,
              a.str(), pattern.str(), pattern.out_features(), pattern.in_features(), pattern.stored_elements());
  const Tensor& inv = pattern.impl_->entries;
  return reshape(
      detail::index_select_checked(a.values(), 0, {inv.data<std::int64_t>(), static_cast<std::size_t>(inv.numel())}),
      pattern.weight_shape());
}

Tensor block_sparse_remap(const Tensor& weight, const BlockSparsePattern& from, const BlockSparsePattern& to) {
  constexpr const char* fn = "block_sparse_remap";
  check_weight(fn, weight, from);
  check_floating(fn, "weight", weight);
  XGRAD_CHECK(same_groups(from.row_groups(), to.row_groups()) && same_groups(from.col_groups(), to.col_groups()),
              "{}: argument 'to' ({}) is not on the block grid of argument 'from' ({})", fn, to.str(), from.str());
  // Both block lists are sorted by (row group, column group): one merge finds each kept block's source.
  const auto& fb = from.blocks();
  const auto& tb = to.blocks();
  std::vector<std::int64_t> src(tb.size(), -1);
  std::size_t i = 0;
  for (std::size_t k = 0; k < tb.size(); ++k) {
    const std::pair key{tb[k].row_group, tb[k].col_group};
    while (i < fb.size() && std::pair{fb[i].row_group, fb[i].col_group} < key) ++i;
    if (i < fb.size() && std::pair{fb[i].row_group, fb[i].col_group} == key) src[k] = static_cast<std::int64_t>(i);
  }
  const Tensor& w = weight;
  Tensor out = Tensor::empty(to.weight_shape(), weight.dtype());
  dispatch(weight.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::bsl_remap<T>(from.csr(), w.data<T>(), to.csr(), src.data(), out.data<T>());
  });
  return out;
}

Tensor block_grad_norms(const Tensor& x, const Tensor& grad_output, BlockSize block) {
  constexpr const char* fn = "block_grad_norms";
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is an undefined tensor", fn);
  XGRAD_CHECK(grad_output.defined(), "{}: argument 'grad_output' is an undefined tensor", fn);
  check_floating(fn, "x", x);
  XGRAD_CHECK(x.dtype() == grad_output.dtype(), "{}: arguments 'x' ({}) and 'grad_output' ({}) must have one dtype", fn,
              x.dtype(), grad_output.dtype());
  XGRAD_CHECK(x.dim() >= 1 && grad_output.dim() >= 1 &&
                  Shape(x.shape().begin(), x.shape().end() - 1) ==
                      Shape(grad_output.shape().begin(), grad_output.shape().end() - 1),
              "{}: arguments 'x' {} and 'grad_output' {} must be (batch..., in) and (batch..., out) with one batch "
              "shape",
              fn, shape_str(x.shape()), shape_str(grad_output.shape()));
  const std::int64_t in = x.shape().back(), out = grad_output.shape().back();
  const std::int64_t bi = block.in.value, bo = block.out.value;
  check_grid(fn, out, in, bo, bi);
  const std::int64_t m = checked_prod(x.shape(), 0, x.shape().size() - 1, fn, "x");
  const Tensor &xc = x, &gc = grad_output;
  Tensor norms = Tensor::empty({out / bo, in / bi}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::bsl_grad_block_norms<T>(xc.data<T>(), gc.data<T>(), m, in, out, bi, bo, norms.data<T>());
  });
  return norms;
}

}  // namespace xgrad
