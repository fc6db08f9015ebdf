// The block layouts of block-sparse attention (see ops/attention_layout.hpp): each builder writes the
// row offsets and column indices of its CsrPattern row by row, in increasing column order.
#include "xgrad/ops/attention_layout.hpp"

#include <algorithm>
#include <functional>
#include <iterator>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {

namespace {

void check_grid(const char* fn, std::int64_t query_blocks, std::int64_t key_blocks) {
  XGRAD_CHECK(query_blocks >= 0 && key_blocks >= 0,
              "{}: arguments 'query_blocks' ({}) and 'key_blocks' ({}) must be >= 0", fn, query_blocks, key_blocks);
}

// Refuses a layout of `per_row` blocks in each of `rows` rows that this machine could not hold (the
// column indices and the transpose the kernels build: about three int64 per block).
void check_blocks(const char* fn, std::int64_t rows, std::int64_t per_row) {
  const std::int64_t n = checked_mul(rows, per_row, fn, "blocks of the layout");
  check_host_memory(
      checked_nbytes(checked_mul(n, 3, fn, "blocks of the layout"), sizeof(std::int64_t), fn, "blocks of the layout"),
      fn, "blocks of the layout");
}

// The pattern of rows whose sorted columns cols_of(i, out) appends.
CsrPattern build_rows(const char* fn, std::int64_t rows, std::int64_t cols,
                      const std::function<void(std::int64_t, std::vector<std::int64_t>&)>& cols_of) {
  std::vector<std::int64_t> crow{0}, col;
  crow.reserve(static_cast<std::size_t>(rows) + 1);
  for (std::int64_t i = 0; i < rows; ++i) {
    cols_of(i, col);
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  return CsrPattern::from_indices(crow, col, rows, cols, fn);
}

// Row i of a pattern as a span of its columns.
std::span<const std::int64_t> row(const CsrPattern& p, std::int64_t i) {
  const auto crow = p.crow();
  return p.col().subspan(
      static_cast<std::size_t>(crow[static_cast<std::size_t>(i)]),
      static_cast<std::size_t>(crow[static_cast<std::size_t>(i) + 1] - crow[static_cast<std::size_t>(i)]));
}

}  // namespace

CsrPattern sliding_window_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t window) {
  constexpr const char* fn = "sliding_window_layout";
  check_grid(fn, query_blocks, key_blocks);
  XGRAD_CHECK(window >= 0, "{}: argument 'window' is {} but must be >= 0", fn, window);
  const std::int64_t width = std::min(key_blocks, checked_add(checked_mul(window, 2, fn, "window"), 1, fn, "window"));
  check_blocks(fn, query_blocks, width);
  return build_rows(fn, query_blocks, key_blocks, [&](std::int64_t i, std::vector<std::int64_t>& out) {
    const std::int64_t lo = std::max<std::int64_t>(0, i - window);
    const std::int64_t hi = i > key_blocks - 1 - window ? key_blocks - 1 : i + window;  // no overflow
    for (std::int64_t j = lo; j <= hi; ++j) out.push_back(j);
  });
}

CsrPattern global_layout(std::int64_t query_blocks, std::int64_t key_blocks, const std::vector<std::int64_t>& blocks) {
  constexpr const char* fn = "global_layout";
  check_grid(fn, query_blocks, key_blocks);
  std::vector<std::int64_t> g(blocks);
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  for (const std::int64_t b : g)
    XGRAD_CHECK(b >= 0 && b < std::min(query_blocks, key_blocks),
                "{}: argument 'blocks' holds block {}, outside the grid of {} query and {} key blocks", fn, b,
                query_blocks, key_blocks);
  const auto ng = static_cast<std::int64_t>(g.size());
  check_blocks(fn, query_blocks, ng);
  check_blocks(fn, ng, key_blocks);
  return build_rows(fn, query_blocks, key_blocks, [&](std::int64_t i, std::vector<std::int64_t>& out) {
    if (std::binary_search(g.begin(), g.end(), i)) {
      for (std::int64_t j = 0; j < key_blocks; ++j) out.push_back(j);
    } else {
      out.insert(out.end(), g.begin(), g.end());
    }
  });
}

CsrPattern random_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t per_row, Generator& gen) {
  constexpr const char* fn = "random_layout";
  check_grid(fn, query_blocks, key_blocks);
  XGRAD_CHECK(per_row >= 0 && per_row <= key_blocks, "{}: argument 'per_row' is {} but must be in [0, {}] (key_blocks)",
              fn, per_row, key_blocks);
  check_blocks(fn, query_blocks, per_row);
  std::vector<std::int64_t> chosen;
  return build_rows(fn, query_blocks, key_blocks, [&](std::int64_t, std::vector<std::int64_t>& out) {
    // Floyd's algorithm: for j = n - k, ..., n - 1 draw t in [0, j]; take t unless taken, else j.
    chosen.clear();
    for (std::int64_t j = key_blocks - per_row; j < key_blocks; ++j) {
      const auto t = static_cast<std::int64_t>(gen.integer(static_cast<std::uint64_t>(j) + 1));
      chosen.push_back(std::find(chosen.begin(), chosen.end(), t) == chosen.end() ? t : j);
    }
    std::sort(chosen.begin(), chosen.end());
    out.insert(out.end(), chosen.begin(), chosen.end());
  });
}

CsrPattern strided_layout(std::int64_t query_blocks, std::int64_t key_blocks, std::int64_t stride) {
  constexpr const char* fn = "strided_layout";
  check_grid(fn, query_blocks, key_blocks);
  XGRAD_CHECK(stride >= 1, "{}: argument 'stride' is {} but must be >= 1", fn, stride);
  // At most 2 stride - 1 local blocks and key_blocks / stride + 1 strided ones per row.
  check_blocks(fn, query_blocks,
               stride >= key_blocks / 2 ? key_blocks : std::min(key_blocks, 2 * stride + key_blocks / stride));
  // Steps j by stride below `end` without overflowing.
  const auto next = [stride](std::int64_t j, std::int64_t end) { return end - j > stride ? j + stride : end; };
  return build_rows(fn, query_blocks, key_blocks, [&](std::int64_t i, std::vector<std::int64_t>& out) {
    // The band [lo, hi] and, before and after it, the key blocks j with j ≡ i (mod stride).
    const std::int64_t lo = std::max<std::int64_t>(0, i - stride + 1);
    const std::int64_t hi = i > key_blocks - stride ? key_blocks - 1 : i + stride - 1;
    const std::int64_t before = std::min(lo, key_blocks);
    for (std::int64_t j = i % stride; j < before; j = next(j, before)) out.push_back(j);
    for (std::int64_t j = lo; j <= hi; ++j) out.push_back(j);
    if (hi + 1 < key_blocks)
      for (std::int64_t j = hi + 1 + ((i - hi - 1) % stride + stride) % stride; j < key_blocks; j = next(j, key_blocks))
        out.push_back(j);
  });
}

CsrPattern causal_layout(std::int64_t query_blocks, std::int64_t key_blocks) {
  constexpr const char* fn = "causal_layout";
  check_grid(fn, query_blocks, key_blocks);
  check_blocks(fn, query_blocks, std::min(query_blocks, key_blocks));
  return build_rows(fn, query_blocks, key_blocks, [&](std::int64_t i, std::vector<std::int64_t>& out) {
    for (std::int64_t j = 0; j <= std::min(i, key_blocks - 1); ++j) out.push_back(j);
  });
}

CsrPattern layout_union(const std::vector<CsrPattern>& layouts) {
  constexpr const char* fn = "layout_union";
  XGRAD_CHECK(!layouts.empty(), "{}: argument 'layouts' is empty", fn);
  const std::int64_t rows = layouts.front().rows(), cols = layouts.front().cols();
  for (std::size_t k = 1; k < layouts.size(); ++k)
    XGRAD_CHECK(layouts[k].rows() == rows && layouts[k].cols() == cols,
                "{}: layout {} has a ({}, {}) grid but layout 0 has ({}, {})", fn, k, layouts[k].rows(),
                layouts[k].cols(), rows, cols);
  std::vector<std::int64_t> merged, next;
  return build_rows(fn, rows, cols, [&](std::int64_t i, std::vector<std::int64_t>& out) {
    merged.clear();
    for (const auto& l : layouts) {
      const auto r = row(l, i);
      next.clear();
      std::set_union(merged.begin(), merged.end(), r.begin(), r.end(), std::back_inserter(next));
      merged.swap(next);
    }
    out.insert(out.end(), merged.begin(), merged.end());
  });
}

CsrPattern layout_intersection(const CsrPattern& a, const CsrPattern& b) {
  constexpr const char* fn = "layout_intersection";
  XGRAD_CHECK(a.rows() == b.rows() && a.cols() == b.cols(),
              "{}: argument 'b' has a ({}, {}) grid but argument 'a' has ({}, {})", fn, b.rows(), b.cols(), a.rows(),
              a.cols());
  return build_rows(fn, a.rows(), a.cols(), [&](std::int64_t i, std::vector<std::int64_t>& out) {
    const auto ra = row(a, i), rb = row(b, i);
    std::set_intersection(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(out));
  });
}

}  // namespace xgrad
