#pragma once
// Block layouts of block-sparse attention: which (query block, key block) tiles of the (L x S) score
// matrix are computed. A layout is a CsrPattern over the grid of ceil(L / b) x ceil(S / b) blocks of b
// queries by b keys (the pattern family of ops/sparse.hpp): row i lists, in increasing order, the key
// blocks that query block i attends to; everything outside them is masked. The builders below are
// the layouts of the long-sequence models (Longformer's sliding window and global tokens, BigBird's
// window + global + random blocks, the Sparse Transformer's strided pattern), and they combine with
// layout_union and layout_intersection (e.g. BigBird = the union of the three, a causal model = the
// intersection with causal_layout). Any other layout is a CsrPattern made by hand, e.g. from a
// (query block, key block) list with sparse_coo_tensor(...).pattern(). Each builder costs O(stored
// blocks + query blocks) and gives the same layout on every machine and thread count; bad sizes are
// an xgrad::Error naming the builder, the argument and its value.
#include <cstdint>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad {

/// Longformer's sliding window in blocks: query block i attends to key blocks j with |i - j| <=
/// window (clipped to the grid). window >= 0 (0: the diagonal blocks only).
CsrPattern sliding_window_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t window);

/// Global blocks (Longformer's global tokens, BigBird's ITC): every query block attends to the key
/// blocks listed in `blocks`, and the query blocks listed attend to every key block. Each listed block
/// must lie in both grids' ranges (a block index < min(query_blocks, key_blocks)); order and
/// repetitions do not matter.
CsrPattern global_layout(std::int64_t query_blocks, std::int64_t key_blocks, const std::vector<std::int64_t>& blocks);

/// BigBird's random blocks: each query block attends to `per_row` key blocks drawn uniformly without
/// replacement from `gen` (Floyd's algorithm: per_row draws per row, rows in order). 0 <= per_row <=
/// key_blocks.
CsrPattern random_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t per_row, Generator& gen);

/// The Sparse Transformer's strided pattern (Child et al. 2019) in blocks, both directions: query block
/// i attends to key block j when |i - j| < stride (the local band) or (i - j) is a multiple of stride
/// (the strided heads' columns). stride >= 1. Intersect with causal_layout for the causal model.
CsrPattern strided_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t stride);

/// Causal in blocks: query block i attends to key blocks j <= i (the blocks that hold at least one
/// (l, s) with s <= l when queries and keys share their positions and block size).
CsrPattern causal_layout(std::int64_t query_blocks, std::int64_t key_blocks);

/// The blocks stored in any of the layouts (one grid shape for all; an empty list is an error).
CsrPattern layout_union(const std::vector<CsrPattern>& layouts);
/// The blocks stored in both layouts (one grid shape).
CsrPattern layout_intersection(const CsrPattern& a, const CsrPattern& b);

}  // namespace xgrad
