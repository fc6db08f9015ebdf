// Tests for ops/attention_layout.*: every builder against its definition written as a predicate over
// (query block, key block), on grids of every small shape (empty, square, wide, tall); the random
// layout's draws; union and intersection; bad arguments.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>

#include "support.hpp"
#include "xgrad/ops/attention_layout.hpp"
#include "xgrad/ops/elementwise.hpp"

using namespace xgrad;

namespace {

// True when `p` stores exactly the cells (i, j) for which `in` holds, each row sorted and unique.
bool matches(const CsrPattern& p, std::int64_t q, std::int64_t k,
             const std::function<bool(std::int64_t, std::int64_t)>& in) {
  if (p.rows() != q || p.cols() != k) return false;
  for (std::int64_t i = 0; i < q; ++i) {
    std::vector<std::int64_t> want;
    for (std::int64_t j = 0; j < k; ++j)
      if (in(i, j)) want.push_back(j);
    const auto b = p.crow()[static_cast<std::size_t>(i)], e = p.crow()[static_cast<std::size_t>(i + 1)];
    const std::vector<std::int64_t> got(p.col().begin() + b, p.col().begin() + e);
    if (got != want) return false;
  }
  return true;
}

std::int64_t iabs(std::int64_t x) { return x < 0 ? -x : x; }

}  // namespace

TEST_CASE("attention layouts: each builder stores exactly the blocks of its definition", "[attention_layout]") {
  for (std::int64_t q : {0, 1, 2, 5, 8, 13})
    for (std::int64_t k : {0, 1, 3, 8, 11}) {
      INFO("grid " << q << " x " << k);
      for (std::int64_t w : {0, 1, 2, 7})
        CHECK(matches(sliding_window_layout(q, k, w), q, k,
                      [w](std::int64_t i, std::int64_t j) { return iabs(i - j) <= w; }));
      for (std::int64_t s : {1, 2, 3, 4, 20})
        CHECK(matches(strided_layout(q, k, s), q, k,
                      [s](std::int64_t i, std::int64_t j) { return iabs(i - j) < s || (i - j) % s == 0; }));
      CHECK(matches(causal_layout(q, k), q, k, [](std::int64_t i, std::int64_t j) { return j <= i; }));
      if (std::min(q, k) >= 1) {
        const std::vector<std::int64_t> g{std::min(q, k) - 1, 0, 0};  // any order, repeats allowed
        const std::set<std::int64_t> gs(g.begin(), g.end());
        CHECK(matches(global_layout(q, k, g), q, k,
                      [&](std::int64_t i, std::int64_t j) { return gs.count(i) > 0 || gs.count(j) > 0; }));
      }
      CHECK(matches(global_layout(q, k, {}), q, k, [](std::int64_t, std::int64_t) { return false; }));
    }
  // A stride beyond every index does not overflow: the band only.
  CHECK(matches(strided_layout(4, 4, INT64_MAX), 4, 4, [](std::int64_t, std::int64_t) { return true; }));
}

TEST_CASE("attention layouts: random blocks are per_row distinct draws, the same for the same seed",
          "[attention_layout]") {
  Generator g1(5), g2(5), g3(6);
  const CsrPattern a = random_layout(40, 16, 5, g1);
  const CsrPattern b = random_layout(40, 16, 5, g2);
  CHECK(a == b);
  CHECK_FALSE(a == random_layout(40, 16, 5, g3));
  // Every row holds 5 distinct blocks (CsrPattern checks sorted and unique), and over the rows every
  // key block is drawn: a uniform draw leaves none of 16 out in 40 rows of 5 except with tiny odds.
  std::vector<int> seen(16, 0);
  for (std::int64_t i = 0; i < 40; ++i)
    CHECK(a.crow()[static_cast<std::size_t>(i + 1)] - a.crow()[static_cast<std::size_t>(i)] == 5);
  for (const auto j : a.col()) ++seen[static_cast<std::size_t>(j)];
  CHECK(*std::min_element(seen.begin(), seen.end()) > 0);
  // per_row = key_blocks takes every block; 0 none.
  Generator g4(1);
  CHECK(matches(random_layout(3, 7, 7, g4), 3, 7, [](std::int64_t, std::int64_t) { return true; }));
  CHECK(random_layout(3, 7, 0, g4).nnz() == 0);
}

TEST_CASE("attention layouts: union and intersection (BigBird, and a causal window)", "[attention_layout]") {
  Generator gen(3);
  const std::int64_t n = 12;
  const CsrPattern win = sliding_window_layout(n, n, 1), glob = global_layout(n, n, {0}),
                   rnd = random_layout(n, n, 2, gen);
  const CsrPattern bigbird = layout_union({win, glob, rnd});
  const CsrPattern dense_r = to_sparse_csr(SparseCsr(rnd, Tensor::ones({rnd.nnz()})).to_dense()).pattern();
  CHECK(dense_r == rnd);
  const Tensor want = SparseCsr(win, Tensor::ones({win.nnz()})).to_dense();
  const Tensor dense = add(add(want, SparseCsr(glob, Tensor::ones({glob.nnz()})).to_dense()),
                           SparseCsr(rnd, Tensor::ones({rnd.nnz()})).to_dense());
  CHECK(bigbird == to_sparse_csr(dense).pattern());
  CHECK(matches(layout_intersection(win, causal_layout(n, n)), n, n,
                [](std::int64_t i, std::int64_t j) { return j <= i && i - j <= 1; }));
  CHECK(layout_union({win}) == win);
  CHECK(layout_intersection(win, win) == win);
}

TEST_CASE("attention layouts: bad arguments name the builder, the argument and the value", "[attention_layout]") {
  Generator gen(0);
  CHECK_THROWS_WITH(sliding_window_layout(4, 4, -1),
                    Catch::Contains("sliding_window_layout") && Catch::Contains("'window'") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(sliding_window_layout(-2, 4, 1), Catch::Contains("sliding_window_layout") &&
                                                         Catch::Contains("'query_blocks'") && Catch::Contains("-2"));
  CHECK_THROWS_WITH(global_layout(4, 3, {3}),
                    Catch::Contains("global_layout") && Catch::Contains("'blocks'") && Catch::Contains("block 3"));
  CHECK_THROWS_WITH(random_layout(4, 3, 4, gen),
                    Catch::Contains("random_layout") && Catch::Contains("'per_row'") && Catch::Contains("4"));
  CHECK_THROWS_WITH(strided_layout(4, 4, 0),
                    Catch::Contains("strided_layout") && Catch::Contains("'stride'") && Catch::Contains("0"));
  CHECK_THROWS_WITH(layout_union({}), Catch::Contains("layout_union") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(layout_union({causal_layout(3, 3), causal_layout(3, 4)}),
                    Catch::Contains("layout_union") && Catch::Contains("(3, 4)") && Catch::Contains("(3, 3)"));
  CHECK_THROWS_WITH(layout_intersection(causal_layout(3, 3), causal_layout(2, 3)),
                    Catch::Contains("layout_intersection") && Catch::Contains("'b'") && Catch::Contains("(2, 3)"));
  // A layout too large for memory is refused before anything is allocated.
  CHECK_THROWS_WITH(sliding_window_layout(std::int64_t{1} << 40, std::int64_t{1} << 40, 1 << 20),
                    Catch::Contains("sliding_window_layout") && Catch::Contains("memory"));
}
