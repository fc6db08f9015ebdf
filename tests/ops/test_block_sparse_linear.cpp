// Tests for ops/block_sparse_linear.*: the pattern constructors, float64 gradcheck of all three
// gradients, PyTorch parity against a masked dense linear, empty block rows/columns, 1-vs-2-thread
// bit equality, the AVX-512 kernels against the AVX2 ones, every bad input, and create_graph
// (second derivatives against torch, third by gradgradcheck, no dense weight for a 2^16 layer).
#include <algorithm>
#include <limits>
#include <type_traits>

#include "dense_index.hpp"
#include "support.hpp"
#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/kernels/block_sparse_simd512.hpp"

using namespace xgrad;
using xgrad::test::dense_index;
using xgrad::test::ParityBatch;
using Pattern = BlockSparsePattern;

namespace {

// Random (out/bo, in/bi) block mask with the given density; block row `empty_row` and block column
// `empty_col` are forced empty (-1: none) so that empty rows and columns are always exercised.
Tensor random_block_mask(std::int64_t nr, std::int64_t nc, double density, Generator& gen, std::int64_t empty_row = 0,
                         std::int64_t empty_col = -1) {
  std::vector<double> m(static_cast<std::size_t>(nr * nc));
  for (std::int64_t r = 0; r < nr; ++r)
    for (std::int64_t c = 0; c < nc; ++c)
      m[static_cast<std::size_t>(r * nc + c)] = (r != empty_row && c != empty_col && gen.uniform() < density) ? 1 : 0;
  return Tensor::from_vector(m, {nr, nc});
}

struct PatternCase {
  std::string name;
  Pattern pattern;
};

// Small patterns for gradcheck and parity: square and rectangular blocks, sizes that are not powers of
// two, empty block rows and columns, the user's block-diagonal examples, an empty pattern.
std::vector<PatternCase> small_patterns(Generator& gen) {
  std::vector<PatternCase> v;
  v.push_back(
      {"grid_2x3_blocks", Pattern::from_block_mask(InFeatures{9}, OutFeatures{6}, {InFeatures{3}, OutFeatures{2}},
                                                   random_block_mask(3, 3, 0.6, gen, 0, 2))});
  v.push_back(
      {"grid_3x2_blocks", Pattern::from_block_mask(InFeatures{4}, OutFeatures{9}, {InFeatures{2}, OutFeatures{3}},
                                                   Tensor::of({{1, 0}, {0, 0}, {1, 1}}))});
  v.push_back(
      {"grid_coords_5x1", Pattern::from_block_coords(InFeatures{3}, OutFeatures{10}, {InFeatures{1}, OutFeatures{5}},
                                                     {{1, 2}, {0, 0}, {1, 0}})});
  v.push_back(
      {"diag_user_2to3", Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}})});
  v.push_back(
      {"diag_5to7_3to1", Pattern::block_diagonal({{InFeatures{5}, OutFeatures{7}}, {InFeatures{3}, OutFeatures{1}}})});
  v.push_back({"empty", Pattern::from_block_mask(InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}},
                                                 Tensor::zeros({2, 2}))});
  return v;
}

Tensor packed_leaf(const Pattern& p, Generator& gen, Dtype dt) { return test::randn_leaf(p.weight_shape(), gen, dt); }

}  // namespace

TEST_CASE("BlockSparsePattern: constructors agree and describe the storage", "[block_sparse_linear]") {
  Generator gen(10);
  const Tensor bm = random_block_mask(4, 6, 0.4, gen, 1, 3);
  const Pattern a = Pattern::from_block_mask(InFeatures{30}, OutFeatures{12}, {InFeatures{5}, OutFeatures{3}}, bm);
  std::vector<std::pair<std::int64_t, std::int64_t>> coords;
  const auto bv = bm.to_vector();
  for (std::int64_t r = 3; r >= 0; --r)  // reverse order: the constructor sorts
    for (std::int64_t c = 0; c < 6; ++c)
      if (bv[static_cast<std::size_t>(r * 6 + c)] != 0) coords.emplace_back(r, c);
  const Pattern b =
      Pattern::from_block_coords(InFeatures{30}, OutFeatures{12}, {InFeatures{5}, OutFeatures{3}}, coords);
  const Pattern c = Pattern::from_element_mask(a.element_mask(), {InFeatures{5}, OutFeatures{3}});
  CHECK(a == b);
  CHECK(a == c);
  CHECK(a.num_blocks() == static_cast<std::int64_t>(coords.size()));
  CHECK(a.is_uniform());
  CHECK(a.weight_shape() == Shape{a.num_blocks(), 3, 5});
  CHECK(a.stored_elements() == a.num_blocks() * 15);
  // Row-major block order, contiguous offsets, and the column index visits every block once.
  std::vector<int> seen(static_cast<std::size_t>(a.num_blocks()), 0);
  for (std::int64_t k = 0; k < a.num_blocks(); ++k) {
    const auto& blk = a.blocks()[static_cast<std::size_t>(k)];
    CHECK(blk.offset == k * 15);
    if (k > 0) CHECK(std::make_pair(a.blocks()[k - 1].row, a.blocks()[k - 1].col) < std::make_pair(blk.row, blk.col));
    ++seen[static_cast<std::size_t>(a.block_pattern().transposed().perm()[static_cast<std::size_t>(k)])];
  }
  for (int s : seen) CHECK(s == 1);
  // Fan-in counts the connected inputs of each row; block row 1 is empty.
  const auto fan = a.row_fan_in();
  for (std::int64_t i = 3; i < 6; ++i) CHECK(fan[static_cast<std::size_t>(i)] == 0);

  const Pattern d = Pattern::block_diagonal({{InFeatures{5}, OutFeatures{7}}, {InFeatures{3}, OutFeatures{1}}});
  CHECK(d.in_features() == 8);
  CHECK(d.out_features() == 8);
  CHECK_FALSE(d.is_uniform());
  CHECK(d.weight_shape() == Shape{38});
  CHECK(d.blocks()[1].offset == 35);
  CHECK(d.blocks()[1].row == 7);
  CHECK(d.blocks()[1].col == 5);
  const Pattern u = Pattern::block_diagonal(InFeatures{4}, OutFeatures{6},
                                            {{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}});
  CHECK(u.is_uniform());
  CHECK(u.weight_shape() == Shape{2, 3, 2});
}

// Issue 20 item 4: every factory takes in_features before out_features (PyTorch's order) as strong
// types, so that sizes in the wrong order, or plain integers as in the out-before-in API before, do
// not compile: code that was right before either compiles with the same meaning or not at all.
template <class... A>
concept MaskFactory = requires(A... a) {
  Pattern::from_block_mask(a...);
};
template <class... A>
concept CoordsFactory = requires(A... a) {
  Pattern::from_block_coords(a...);
};
template <class... A>
concept ElementFactory = requires(A... a) {
  Pattern::from_element_mask(a...);
};
template <class... A>
concept DiagonalFactory = requires(A... a) {
  Pattern::block_diagonal(a...);
};
using Coords = std::vector<std::pair<std::int64_t, std::int64_t>>;
using Groups = std::vector<Pattern::DiagonalGroup>;
static_assert(MaskFactory<InFeatures, OutFeatures, BlockSize, Tensor>);
static_assert(!MaskFactory<OutFeatures, InFeatures, BlockSize, Tensor>);
static_assert(!MaskFactory<std::int64_t, std::int64_t, std::int64_t, std::int64_t, Tensor>);
static_assert(!MaskFactory<int, int, BlockSize, Tensor>);
static_assert(CoordsFactory<InFeatures, OutFeatures, BlockSize, Coords>);
static_assert(!CoordsFactory<OutFeatures, InFeatures, BlockSize, Coords>);
static_assert(!CoordsFactory<std::int64_t, std::int64_t, std::int64_t, std::int64_t, Coords>);
static_assert(ElementFactory<Tensor, BlockSize>);
static_assert(!ElementFactory<Tensor, std::int64_t, std::int64_t>);
static_assert(DiagonalFactory<InFeatures, OutFeatures, Groups>);
static_assert(!DiagonalFactory<OutFeatures, InFeatures, Groups>);
static_assert(!DiagonalFactory<std::int64_t, std::int64_t, Groups>);
static_assert(!std::is_constructible_v<BlockSize, OutFeatures, InFeatures>);
static_assert(!std::is_constructible_v<BlockSize, std::int64_t, std::int64_t>);
static_assert(!std::is_constructible_v<Pattern::DiagonalGroup, OutFeatures, InFeatures>);
static_assert(!std::is_constructible_v<Pattern::DiagonalGroup, std::int64_t, std::int64_t>);
static_assert(!std::is_convertible_v<std::int64_t, InFeatures> && !std::is_convertible_v<std::int64_t, OutFeatures>);
static_assert(!std::is_convertible_v<InFeatures, OutFeatures> && !std::is_convertible_v<OutFeatures, InFeatures>);

TEST_CASE("BlockSparsePattern: a block CSR on the pattern family (block_pattern, from_csr, element_pattern)",
          "[block_sparse_linear][sparse]") {
  Generator gen(11);
  const BlockSize block{InFeatures{3}, OutFeatures{2}};
  const Pattern a = Pattern::random(InFeatures{15}, OutFeatures{8}, block, 0.45, gen);
  // The block pattern is the grid CSR: entry k is block k.
  const CsrPattern& g = a.block_pattern();
  REQUIRE(g.rows() == 4);
  REQUIRE(g.cols() == 5);
  REQUIRE(g.nnz() == a.num_blocks());
  const auto coords = a.block_coords();
  for (std::int64_t r = 0; r < g.rows(); ++r)
    for (auto k = g.crow()[static_cast<std::size_t>(r)]; k < g.crow()[static_cast<std::size_t>(r + 1)]; ++k) {
      CHECK(coords[static_cast<std::size_t>(k)].first == r);
      CHECK(coords[static_cast<std::size_t>(k)].second == g.col()[static_cast<std::size_t>(k)]);
    }
  // The column-major view the input gradient walks is the grid's cached transpose: built with the
  // pattern, and the same object for every copy.
  CHECK(g.has_transposed());
  const Pattern copy = a;
  CHECK(copy.block_pattern().same_object(g));
  // from_csr shares the given pattern (a COO list of cells through sparse_coo_tensor, in any order).
  std::vector<double> rc;
  for (auto it = coords.rbegin(); it != coords.rend(); ++it) rc.push_back(double(it->first));
  for (auto it = coords.rbegin(); it != coords.rend(); ++it) rc.push_back(double(it->second));
  const auto n = static_cast<std::int64_t>(coords.size());
  const SparseCsr cells = sparse_coo_tensor(Tensor::from_vector(rc, {2, n}, kInt64), Tensor::ones({n}), {4, 5});
  const Pattern b = Pattern::from_csr(InFeatures{15}, OutFeatures{8}, block, cells.pattern());
  CHECK(b == a);
  CHECK(b.block_pattern().same_object(cells.pattern()));
  CHECK_THROWS_WITH(
      Pattern::from_csr(InFeatures{15}, OutFeatures{8}, {InFeatures{5}, OutFeatures{2}}, g),
      Catch::Contains("BlockSparsePattern::from_csr") && Catch::Contains("(4, 5)") && Catch::Contains("(4, 3)"));
  // The element pattern is the dense mask's non-zeros, and the conversions go through it both ways.
  const CsrPattern& e = a.element_pattern();
  CHECK(e.nnz() == a.stored_elements());
  CHECK(copy.element_pattern().same_object(e));
  const Tensor mask = a.element_mask(kFloat64);
  CHECK(e == to_sparse_csr(mask).pattern());
  Tensor w = Tensor::randn(a.weight_shape(), gen, kFloat64);
  w.set_requires_grad();
  const SparseCsr s = block_sparse_to_csr(w, a);
  CHECK(s.pattern().same_object(e));
  CHECK(allclose(s.to_dense(), block_sparse_to_dense(w.detach(), a), 0.0, 0.0));
  const Tensor back = block_sparse_from_csr(s, a);
  CHECK(back.shape() == a.weight_shape());
  CHECK(allclose(back, w.detach(), 0.0, 0.0));
  // An equal pattern made elsewhere is accepted; another one is refused with both named.
  CHECK(allclose(block_sparse_from_csr(to_sparse_csr(block_sparse_to_dense(w.detach(), a)), a), w.detach(), 0.0, 0.0));
  const Pattern other = Pattern::random(InFeatures{15}, OutFeatures{8}, block, 0.45, gen);
  if (!(other == a))
    CHECK_THROWS_WITH(block_sparse_from_csr(s, other), Catch::Contains("block_sparse_from_csr") &&
                                                           Catch::Contains("'a'") &&
                                                           Catch::Contains("element pattern"));
  // Block-diagonal groups of different sizes convert as well.
  const Pattern d = Pattern::block_diagonal(
      {{InFeatures{2}, OutFeatures{3}}, {InFeatures{0}, OutFeatures{2}}, {InFeatures{4}, OutFeatures{1}}});
  const Tensor wd = Tensor::randn(d.weight_shape(), gen, kFloat64);
  CHECK(allclose(block_sparse_to_csr(wd, d).to_dense(), block_sparse_to_dense(wd, d), 0.0, 0.0));
  CHECK(allclose(block_sparse_from_csr(block_sparse_to_csr(wd, d), d), wd, 0.0, 0.0));
}

TEST_CASE("BlockSparsePattern: every factory reads in before out", "[block_sparse_linear]") {
  // A 9-in, 6-out layer of 3-in x 2-out blocks, built four ways; W's block layout is (out, in).
  const Pattern a = Pattern::from_block_mask(InFeatures{9}, OutFeatures{6}, {InFeatures{3}, OutFeatures{2}},
                                             Tensor::of({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}));
  const Pattern b = Pattern::from_block_coords(InFeatures{9}, OutFeatures{6}, {InFeatures{3}, OutFeatures{2}},
                                               {{0, 0}, {1, 1}, {2, 2}});
  const Pattern c = Pattern::from_element_mask(a.element_mask(), {InFeatures{3}, OutFeatures{2}});
  const Pattern d = Pattern::block_diagonal(InFeatures{9}, OutFeatures{6}, Groups(3, {InFeatures{3}, OutFeatures{2}}));
  for (const Pattern* p : {&a, &b, &c, &d}) {
    CHECK(p->in_features() == 9);
    CHECK(p->out_features() == 6);
    CHECK(p->weight_shape() == Shape{3, 2, 3});  // (blocks, out rows, in columns)
    CHECK(*p == a);
  }
  CHECK(a.element_mask().shape() == Shape{6, 9});
  // The designated form names the sizes; reordering the designators does not compile either.
  const BlockSize block{.in = InFeatures{3}, .out = OutFeatures{2}};
  CHECK(Pattern::from_block_coords(InFeatures{9}, OutFeatures{6}, block, {{2, 2}}).blocks()[0].col == 6);
}

TEST_CASE("block_sparse_linear: to_dense / from_dense round trip and agree with the element mask",
          "[block_sparse_linear]") {
  Generator gen(11);
  for (const auto& pc : small_patterns(gen)) {
    INFO(pc.name);
    const Pattern& p = pc.pattern;
    Tensor dense = Tensor::randn({p.out_features(), p.in_features()}, gen, kFloat64);
    Tensor w = block_sparse_from_dense(dense, p);
    CHECK(w.shape() == p.weight_shape());
    Tensor back = block_sparse_to_dense(w, p);
    // back == dense * mask exactly.
    const auto bv = back.to_vector(), dv = dense.to_vector(), mv = p.element_mask(kFloat64).to_vector();
    for (std::size_t i = 0; i < bv.size(); ++i) REQUIRE(bv[i] == dv[i] * mv[i]);
    CHECK(bit_equal(block_sparse_from_dense(back, p), w));
  }
}

TEST_CASE("block_sparse_linear: gradcheck of x, the stored blocks and the bias", "[block_sparse_linear]") {
  Generator gen(12);
  std::vector<PatternCase> cases = small_patterns(gen);
  // Groups 17-32 wide take the tile kernels (Note [Tile kernels] in block_sparse_kernels.cpp); in float64
  // a tile is 8 wide, so 24x24 blocks are on that path, with an empty block row and column.
  cases.push_back(
      {"rand_24x24_tile", Pattern::from_block_mask(InFeatures{48}, OutFeatures{72}, {InFeatures{24}, OutFeatures{24}},
                                                   Tensor::of({{1, 0}, {0, 0}, {1, 1}}))});
  for (const auto& pc : cases)
    for (const Shape& lead : {Shape{}, Shape{1}, Shape{3}, Shape{2, 2}}) {
      const Pattern& p = pc.pattern;
      INFO(pc.name << " x lead dims " << shape_str(lead));
      Shape xs = lead;
      xs.push_back(p.in_features());
      Tensor x = test::randn_leaf(xs, gen);
      Tensor w = packed_leaf(p, gen, kFloat64);
      Tensor b = test::randn_leaf({p.out_features()}, gen);
      test::require_gradcheck([&](const Tensors& in) { return block_sparse_linear(in[0], in[1], in[2], p); },
                              {x, w, b});
      test::require_gradcheck([&](const Tensors& in) { return block_sparse_linear(in[0], in[1], Tensor(), p); },
                              {x, w});
    }
}

TEST_CASE("block_sparse_linear: empty block rows give y = b, empty block columns get zero gradient",
          "[block_sparse_linear]") {
  Generator gen(13);
  // Block row 0 and block column 2 are empty.
  const Pattern p = Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}},
                                             Tensor::of({{0, 0, 0}, {1, 1, 0}}));
  Tensor x = test::randn_leaf({5, 12}, gen, kFloat32);
  Tensor w = packed_leaf(p, gen, kFloat32);
  Tensor b = test::randn_leaf({8}, gen, kFloat32);
  Tensor y = block_sparse_linear(x, w, b, p);
  y.backward(Tensor::randn(y.shape(), gen, kFloat32));
  const auto yv = y.to_vector(), bv = b.to_vector(), gx = x.grad().to_vector();
  for (std::int64_t m = 0; m < 5; ++m) {
    for (std::int64_t i = 0; i < 4; ++i)
      REQUIRE(yv[static_cast<std::size_t>(m * 8 + i)] == bv[static_cast<std::size_t>(i)]);
    for (std::int64_t j = 8; j < 12; ++j) REQUIRE(gx[static_cast<std::size_t>(m * 12 + j)] == 0.0);
  }
  // And some gradient does reach the connected columns.
  bool any = false;
  for (std::int64_t j = 0; j < 8; ++j) any = any || gx[static_cast<std::size_t>(j)] != 0.0;
  CHECK(any);
}

TEST_CASE("block_sparse_linear: values and all three gradients match PyTorch's masked dense linear",
          "[block_sparse_linear][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("block_sparse_linear_") + std::string(dtype_name(dt)));
    Generator gen(14);
    std::vector<PatternCase> cases = small_patterns(gen);
    // Larger random patterns: rectangular blocks, densities 1/4 and 1/16, forced empty rows/columns.
    cases.push_back(
        {"rand_8x16_d4", Pattern::from_block_mask(InFeatures{128}, OutFeatures{64}, {InFeatures{16}, OutFeatures{8}},
                                                  random_block_mask(8, 8, 0.25, gen, 3, 5))});
    cases.push_back(
        {"rand_6x10_d16", Pattern::from_block_mask(InFeatures{120}, OutFeatures{96}, {InFeatures{10}, OutFeatures{6}},
                                                   random_block_mask(16, 12, 1.0 / 16, gen, 0, 0))});
    cases.push_back(
        {"rand_32x32_d2", Pattern::from_block_mask(InFeatures{64}, OutFeatures{96}, {InFeatures{32}, OutFeatures{32}},
                                                   random_block_mask(3, 2, 0.5, gen, 2, -1))});
    cases.push_back(
        {"rand_16x8_d4", Pattern::from_block_mask(InFeatures{64}, OutFeatures{48}, {InFeatures{8}, OutFeatures{16}},
                                                  random_block_mask(3, 8, 0.3, gen, 1, 2))});
    cases.push_back({"diag_mixed", Pattern::block_diagonal({{InFeatures{5}, OutFeatures{7}},
                                                            {InFeatures{3}, OutFeatures{1}},
                                                            {InFeatures{16}, OutFeatures{9}},
                                                            {InFeatures{1}, OutFeatures{4}}})});
    // Narrow groups (<= 16) take the lane kernels (Note [Lane kernels] in block_sparse_kernels.cpp): odd
    // 3x5 blocks (row/column tails, transposes of widths that are not multiples of 8), rows longer than
    // one segment chunk (partial sums continued), and patterns where only the forward or only the input
    // gradient is narrow (the other passes on the GEMM path). Batch shapes {} .. {300} hit every batch tail.
    cases.push_back(
        {"rand_3x5_d2", Pattern::from_block_mask(InFeatures{55}, OutFeatures{30}, {InFeatures{5}, OutFeatures{3}},
                                                 random_block_mask(10, 11, 0.4, gen, 4, 6))});
    cases.push_back({"rand_8x4_long_rows",
                     Pattern::from_block_mask(InFeatures{640}, OutFeatures{16}, {InFeatures{4}, OutFeatures{8}},
                                              random_block_mask(2, 160, 0.7, gen, -1, 9))});
    cases.push_back({"rand_16x32_fwd_lane",
                     Pattern::from_block_mask(InFeatures{128}, OutFeatures{64}, {InFeatures{32}, OutFeatures{16}},
                                              random_block_mask(4, 4, 0.5, gen, 1, 2))});
    cases.push_back({"rand_32x8_bwd_lane",
                     Pattern::from_block_mask(InFeatures{96}, OutFeatures{64}, {InFeatures{8}, OutFeatures{32}},
                                              random_block_mask(2, 12, 0.5, gen, -1, 3))});
    // Groups 17-32 wide take the tile kernels: 32x32 blocks with rows of more than one 128-wide inner
    // chunk (partial sums continued), an empty block row and column, and batch 300 (a partial row tile and
    // weight-gradient batch chunks); mixed widths where only some passes are on the tile path (24 is a
    // whole tile in float64 only; 16 wide groups take the lane kernels).
    cases.push_back({"rand_32x32_long_rows",
                     Pattern::from_block_mask(InFeatures{512}, OutFeatures{96}, {InFeatures{32}, OutFeatures{32}},
                                              random_block_mask(3, 16, 0.7, gen, 1, 4))});
    cases.push_back({"diag_32_mixed", Pattern::block_diagonal({{InFeatures{32}, OutFeatures{32}},
                                                               {InFeatures{16}, OutFeatures{32}},
                                                               {InFeatures{32}, OutFeatures{24}},
                                                               {InFeatures{48}, OutFeatures{32}}})});
    // 64 wide: forward and input gradient on the tiles; the weight gradient too with >= 4 blocks per
    // used column group (here), an empty block row and column.
    cases.push_back({"grid_64x64_tile",
                     Pattern::from_block_mask(InFeatures{192}, OutFeatures{320}, {InFeatures{64}, OutFeatures{64}},
                                              Tensor::of({{1, 0, 1}, {1, 0, 1}, {1, 0, 1}, {1, 0, 1}, {0, 0, 0}}))});
    // With AVX-512 (float32): groups and blocks up to 128 wide in multiples of 32 take the 16-lane
    // tiles, 2, 3 or 4 vectors wide (32, 96 and 64/128 here), one block per used column group.
    cases.push_back({"grid_128x128",
                     Pattern::from_block_mask(InFeatures{384}, OutFeatures{256}, {InFeatures{128}, OutFeatures{128}},
                                              Tensor::of({{1, 0, 1}, {0, 0, 1}}))});
    cases.push_back({"diag_96_mixed", Pattern::block_diagonal({{InFeatures{96}, OutFeatures{64}},
                                                               {InFeatures{64}, OutFeatures{96}},
                                                               {InFeatures{32}, OutFeatures{128}}})});
    const std::string code =
        "Wd = torch.zeros(O * I, dtype=w.dtype).index_put((idx.long(),), w.reshape(-1)).reshape(O, I)\n"
        "out = torch.nn.functional.linear(x, Wd * mask, {})";
    int k = 0;
    for (const auto& pc : cases)
      for (const Shape& lead : {Shape{}, Shape{1}, Shape{7}, Shape{2, 3}, Shape{300}}) {
        const Pattern& p = pc.pattern;
        Shape xs = lead;
        xs.push_back(p.in_features());
        const std::string prefix = fmt::format("O = {}\nI = {}\n", p.out_features(), p.in_features());
        Tensor x = test::randn_leaf(xs, gen, dt);
        Tensor w = packed_leaf(p, gen, dt);
        Tensor b = test::randn_leaf({p.out_features()}, gen, dt);
        Tensor idx = dense_index(p);
        Tensor mask = p.element_mask(dt);
        const double rtol = dt == kFloat32 ? 1e-4 : -1, atol = dt == kFloat32 ? 1e-4 : -1;
        batch.add(
            fmt::format("{}_{}", pc.name, k++), prefix + fmt::format(fmt::runtime(code), "b"),
            {{"x", x}, {"w", w}, {"b", b}, {"idx", idx, false}, {"mask", mask, false}},
            [&](const Tensors& in) { return block_sparse_linear(in[0], in[1], in[2], p); }, rtol, atol);
        if (lead == Shape{7})
          batch.add(
              fmt::format("{}_nobias_{}", pc.name, k++), prefix + fmt::format(fmt::runtime(code), "None"),
              {{"x", x}, {"w", w}, {"idx", idx, false}, {"mask", mask, false}},
              [&](const Tensors& in) { return block_sparse_linear(in[0], in[1], Tensor(), p); }, rtol, atol);
      }
    batch.run();
  }
}

TEST_CASE("block_sparse_linear: bit-identical with 1 and 2 threads", "[block_sparse_linear][threads]") {
  Generator gen(15);
  const std::vector<PatternCase> cases = {
      {"rand_16x32", Pattern::from_block_mask(InFeatures{384}, OutFeatures{256}, {InFeatures{32}, OutFeatures{16}},
                                              random_block_mask(16, 12, 0.3, gen, 2, 7))},
      {"rand_8x8_dense_rows",
       Pattern::from_block_mask(InFeatures{2048}, OutFeatures{128}, {InFeatures{8}, OutFeatures{8}},
                                random_block_mask(16, 256, 0.5, gen, 1, 3))},
      {"rand_3x5", Pattern::from_block_mask(InFeatures{320}, OutFeatures{96}, {InFeatures{5}, OutFeatures{3}},
                                            random_block_mask(32, 64, 0.3, gen, 2, 5))},
      {"rand_32x32", Pattern::from_block_mask(InFeatures{512}, OutFeatures{128}, {InFeatures{32}, OutFeatures{32}},
                                              random_block_mask(4, 16, 0.5, gen, 2, 7))},
      {"grid_64x64", Pattern::from_block_mask(InFeatures{128}, OutFeatures{256}, {InFeatures{64}, OutFeatures{64}},
                                              Tensor::of({{1, 1}, {1, 1}, {1, 1}, {1, 0}}))},
      {"diag_mixed", Pattern::block_diagonal({{InFeatures{64}, OutFeatures{96}},
                                              {InFeatures{100}, OutFeatures{30}},
                                              {InFeatures{7}, OutFeatures{70}},
                                              {InFeatures{200}, OutFeatures{120}}})},
      {"grid_128x128", Pattern::from_block_mask(InFeatures{384}, OutFeatures{256}, {InFeatures{128}, OutFeatures{128}},
                                                Tensor::of({{1, 0, 1}, {1, 1, 1}}))}};
  for (const auto& pc : cases)
    for (Dtype dt : {kFloat32, kFloat64}) {
      INFO(pc.name << " " << dtype_name(dt));
      const Pattern& p = pc.pattern;
      // 1100 rows: several batch tiles (and weight-gradient batch chunks), the last one partial.
      Tensor x0 = Tensor::randn({2, 550, p.in_features()}, gen, dt);
      Tensor w0 = Tensor::randn(p.weight_shape(), gen, dt);
      Tensor b0 = Tensor::randn({p.out_features()}, gen, dt);
      Tensor g0 = Tensor::randn({2, 550, p.out_features()}, gen, dt);
      test::require_thread_deterministic([&] {
        Tensor x = x0.clone_data().set_requires_grad();
        Tensor w = w0.clone_data().set_requires_grad();
        Tensor b = b0.clone_data().set_requires_grad();
        Tensor y = block_sparse_linear(x, w, b, p);
        y.backward(g0);
        return Tensors{y, x.grad(), w.grad(), b.grad()};
      });
    }
}

TEST_CASE("block_sparse_linear: the AVX-512 and the AVX2 float32 kernels agree", "[block_sparse_linear][simd]") {
  // Note [AVX-512 kernels] in ops/kernels/block_sparse_simd512.hpp: where both widths run the same kernel family
  // (lane or tile), every element is summed in the same order: identical, except the lane weight
  // gradient (its 16-lane reduction tree). 128-wide groups, and the 64-wide weight gradient with few
  // blocks per column group, take OpenBLAS's GEMM under AVX2: equal to float32 rounding only.
  if (!detail::bsl512::kernels()) WARN("no AVX-512 on this CPU (or XGRAD_CPU_CAPABILITY=avx2): both runs use AVX2");
  Generator gen(17);
  struct WidthCase {
    std::string name;
    Pattern pattern;
    bool same_y_dx, same_dw;
  };
  const std::vector<WidthCase> cases = {
      {"rand_32x32",
       Pattern::from_block_mask(InFeatures{512}, OutFeatures{128}, {InFeatures{32}, OutFeatures{32}},
                                random_block_mask(4, 16, 0.5, gen, 2, 7)),
       true, true},
      {"grid_64x64_reuse",
       Pattern::from_block_mask(InFeatures{128}, OutFeatures{320}, {InFeatures{64}, OutFeatures{64}},
                                Tensor::of({{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}})),
       true, true},
      {"grid_64x64_sparse",
       Pattern::from_block_mask(InFeatures{192}, OutFeatures{192}, {InFeatures{64}, OutFeatures{64}},
                                Tensor::of({{1, 0, 0}, {0, 0, 1}, {0, 0, 0}})),
       true, false},
      {"diag_96_mixed",
       Pattern::block_diagonal(
           {{InFeatures{96}, OutFeatures{64}}, {InFeatures{64}, OutFeatures{96}}, {InFeatures{32}, OutFeatures{128}}}),
       false, false},
      {"grid_128x128",
       Pattern::from_block_mask(InFeatures{384}, OutFeatures{256}, {InFeatures{128}, OutFeatures{128}},
                                Tensor::of({{1, 0, 1}, {0, 1, 1}})),
       false, false},
      {"rand_8x8",
       Pattern::from_block_mask(InFeatures{256}, OutFeatures{64}, {InFeatures{8}, OutFeatures{8}},
                                random_block_mask(8, 32, 0.3, gen, 1, 2)),
       true, false},
      {"rand_3x5",
       Pattern::from_block_mask(InFeatures{320}, OutFeatures{96}, {InFeatures{5}, OutFeatures{3}},
                                random_block_mask(32, 64, 0.3, gen, 2, 5)),
       true, false}};
  // 1100 rows: the AVX-512 weight gradient, reading x and g in place, sums in batch chunks of 1024.
  for (const auto& wc : cases)
    for (std::int64_t rows : {1, 37, 300, 1100}) {
      INFO(wc.name << " rows " << rows);
      const Pattern& p = wc.pattern;
      const Tensor x0 = Tensor::randn({rows, p.in_features()}, gen, kFloat32);
      const Tensor w0 = Tensor::randn(p.weight_shape(), gen, kFloat32);
      const Tensor b0 = Tensor::randn({p.out_features()}, gen, kFloat32);
      const Tensor g0 = Tensor::randn({rows, p.out_features()}, gen, kFloat32);
      auto run = [&](bool wide) {
        detail::set_avx512_enabled(wide);
        Tensor x = x0.clone_data().set_requires_grad();
        Tensor w = w0.clone_data().set_requires_grad();
        Tensor y = block_sparse_linear(x, w, b0, p);
        y.backward(g0);
        detail::set_avx512_enabled(true);
        return Tensors{y, x.grad(), w.grad()};
      };
      const Tensors wide = run(true), narrow = run(false);
      for (std::size_t i = 0; i < wide.size(); ++i) {
        INFO("output " << i << " (y, dx, dw)");
        const std::vector<double> a = wide[i].to_vector(), b = narrow[i].to_vector();
        REQUIRE(a.size() == b.size());
        // The asan preset builds at -O1, where GCC contracts the AVX2 kernels' multiply-adds differently
        // from the AVX-512 kernels' explicit FMAs (seen since the embedded-broadcast tiles): the two
        // widths then agree to float32 rounding only, so bit equality is checked in optimized builds.
#if defined(__SANITIZE_ADDRESS__)
        constexpr bool kBitEqualWidths = false;
#else
        constexpr bool kBitEqualWidths = true;
#endif
        if (kBitEqualWidths && (i < 2 ? wc.same_y_dx : wc.same_dw)) {
          // Report the first differing element, not both vectors (printing 10^5 doubles takes minutes
          // under the sanitizers).
          std::size_t first = 0;
          while (first < a.size() && a[first] == b[first]) ++first;
          INFO("first differing element " << first << " of " << a.size()
                                          << (first < a.size() ? fmt::format(": {} vs {}", a[first], b[first]) : ""));
          CHECK(first == a.size());
        } else {
          const auto [err, scale] = test::max_error(a, b);
          CHECK(err <= 1e-5 * std::max(1.0, scale));
        }
      }
    }
}

TEST_CASE("block_sparse_linear: x and weight gradients alone equal the ones computed together",
          "[block_sparse_linear]") {
  // Each gradient is computed only when needed (the saved tensors too); whichever are requested, the
  // sums and their order are the same: bit-identical (tile, lane and GEMM-shaped patterns).
  Generator gen(16);
  const std::vector<PatternCase> cases = {
      {"rand_32x32", Pattern::from_block_mask(InFeatures{512}, OutFeatures{128}, {InFeatures{32}, OutFeatures{32}},
                                              random_block_mask(4, 16, 0.5, gen, 2, 7))},
      {"grid_64x64", Pattern::from_block_mask(InFeatures{192}, OutFeatures{320}, {InFeatures{64}, OutFeatures{64}},
                                              Tensor::of({{1, 0, 1}, {1, 0, 1}, {1, 0, 1}, {1, 0, 1}, {0, 0, 0}}))},
      {"rand_8x8", Pattern::from_block_mask(InFeatures{128}, OutFeatures{64}, {InFeatures{8}, OutFeatures{8}},
                                            random_block_mask(8, 16, 0.3, gen, 1, 2))}};
  for (const auto& pc : cases)
    for (Dtype dt : {kFloat32, kFloat64})
      for (std::int64_t rows : {1, 3, 300}) {
        INFO(pc.name << " " << dtype_name(dt) << " rows " << rows);
        const Pattern& p = pc.pattern;
        Tensor x0 = Tensor::randn({rows, p.in_features()}, gen, dt);
        Tensor w0 = Tensor::randn(p.weight_shape(), gen, dt);
        Tensor g0 = Tensor::randn({rows, p.out_features()}, gen, dt);
        auto grads = [&](bool gx, bool gw) {
          Tensor x = x0.clone_data().set_requires_grad(gx);
          Tensor w = w0.clone_data().set_requires_grad(gw);
          block_sparse_linear(x, w, Tensor(), p).backward(g0);
          return std::pair<Tensor, Tensor>{x.grad(), w.grad()};
        };
        const auto both = grads(true, true);
        const Tensor dx = grads(true, false).first, dw = grads(false, true).second;
        REQUIRE(dx.to_vector() == both.first.to_vector());
        REQUIRE(dw.to_vector() == both.second.to_vector());
      }
}

TEST_CASE("block_sparse_linear: bad inputs raise xgrad::Error naming the argument and shapes",
          "[block_sparse_linear][errors]") {
  // Mask shape not matching the block grid.
  test::require_error(
      [] {
        Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}},
                                 Tensor::zeros({3, 2}));
      },
      {"from_block_mask", "'mask'", "(3, 2)", "(2, 3)"});
  // Block sizes not dividing the dims.
  test::require_error(
      [] {
        Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{3}},
                                 Tensor::zeros({2, 3}));
      },
      {"from_block_mask", "bo=3", "out=8"});
  test::require_error(
      [] {
        Pattern::from_block_coords(InFeatures{12}, OutFeatures{8}, {InFeatures{5}, OutFeatures{4}}, {{0, 0}});
      },
      {"from_block_coords", "bi=5", "in=12"});
  test::require_error(
      [] {
        Pattern::from_element_mask(Tensor::ones({8, 12}), {InFeatures{5}, OutFeatures{4}});
      },
      {"from_element_mask", "bi=5"});
  test::require_error(
      [] {
        Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{0}},
                                 Tensor::zeros({2, 3}));
      },
      {"from_block_mask", "bo=0"});
  // Coordinates outside the grid, duplicated.
  test::require_error(
      [] {
        Pattern::from_block_coords(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}}, {{2, 0}});
      },
      {"from_block_coords", "(2, 0)", "(2, 3)"});
  test::require_error(
      [] {
        Pattern::from_block_coords(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}},
                                   {{1, 1}, {0, 0}, {1, 1}});
      },
      {"from_block_coords", "(1, 1)", "more than once"});
  // Dense mask that is not block aligned.
  Tensor bad = Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}},
                                        Tensor::of({{1, 0, 0}, {0, 1, 0}}))
                   .element_mask();
  bad.data<float>()[5 * 12 + 9] = 1;  // a lone element in block (1, 2)
  test::require_error(
      [&] {
        Pattern::from_element_mask(bad, {InFeatures{4}, OutFeatures{4}});
      },
      {"from_element_mask", "'mask'", "(8, 12)", "not aligned", "block (1, 2)"});
  test::require_error(
      [] {
        Pattern::from_element_mask(Tensor::ones({8}), {InFeatures{4}, OutFeatures{4}});
      },
      {"from_element_mask", "(8,)"});
  // Groups summing to the wrong size, and negative group sizes (size 0 is allowed: see the zero-size test).
  test::require_error(
      [] {
        Pattern::block_diagonal(InFeatures{4}, OutFeatures{6},
                                {{InFeatures{2}, OutFeatures{3}}, {InFeatures{3}, OutFeatures{3}}});
      },
      {"block_diagonal", "'groups'", "in=5", "out=6", "in=4"});
  test::require_error(
      [] {
        Pattern::block_diagonal({{InFeatures{2}, OutFeatures{-1}}});
      },
      {"block_diagonal", "'groups'", "out=-1"});
  test::require_error(
      [] {
        Pattern::block_diagonal({{InFeatures{-3}, OutFeatures{2}}});
      },
      {"block_diagonal", "'groups'", "in=-3"});

  const Pattern p = Pattern::from_block_mask(InFeatures{12}, OutFeatures{8}, {InFeatures{4}, OutFeatures{4}},
                                             Tensor::of({{1, 0, 1}, {0, 1, 0}}));
  Tensor w = Tensor::zeros(p.weight_shape());
  Tensor b = Tensor::zeros({8});
  // x with the wrong last dimension.
  test::require_error(
      [&] {
        block_sparse_linear(Tensor::zeros({5, 11}), w, b, p);
      },
      {"block_sparse_linear", "'x'", "(5, 11)", "in_features=12"});
  test::require_error([&] { block_sparse_linear(Tensor::scalar(1.0), w, b, p); }, {"block_sparse_linear", "'x'", "()"});
  // Weight not matching the pattern's storage, wrong dtypes, wrong bias.
  test::require_error(
      [&] {
        block_sparse_linear(Tensor::zeros({5, 12}), Tensor::zeros({4, 4, 4}), b, p);
      },
      {"block_sparse_linear", "'weight'", "(4, 4, 4)", "(3, 4, 4)"});
  test::require_error(
      [&] {
        block_sparse_linear(Tensor::zeros({5, 12}, kFloat64), w, b, p);
      },
      {"block_sparse_linear", "dtype", "float64", "float32"});
  test::require_error(
      [&] {
        block_sparse_linear(Tensor::zeros({5, 12}), w, Tensor::zeros({12}), p);
      },
      {"block_sparse_linear", "'bias'", "(12,)", "(8,)"});
  test::require_error([&] { block_sparse_linear(Tensor(), w, b, p); }, {"block_sparse_linear", "'x'", "undefined"});
  test::require_error(
      [&] {
        block_sparse_to_dense(Tensor::zeros({2, 4, 4}), p);
      },
      {"block_sparse_to_dense", "'weight'", "(2, 4, 4)"});
  test::require_error(
      [&] {
        block_sparse_from_dense(Tensor::zeros({12, 8}), p);
      },
      {"block_sparse_from_dense", "'dense'", "(12, 8)", "out=8"});
}

// ---- sizes: overflow (Note [Checked sizes]) and zero-length dimensions ---------------------------------

TEST_CASE("block_sparse_linear: sizes that overflow int64 are an Error, never a negative count",
          "[block_sparse_linear][errors][sizes]") {
  const std::int64_t half = std::numeric_limits<std::int64_t>::max() / 2 + 1;
  // The sums of huge groups overflow: in_features would wrap to a negative number.
  test::require_error(
      [&] {
        Pattern::block_diagonal({{InFeatures{half}, OutFeatures{1}}, {InFeatures{half}, OutFeatures{1}}});
      },
      {"block_diagonal", "'groups (sum of in)'", "overflows"});
  test::require_error(
      [&] {
        Pattern::block_diagonal({{InFeatures{1}, OutFeatures{half}}, {InFeatures{1}, OutFeatures{half}}});
      },
      {"block_diagonal", "'groups (sum of out)'", "overflows"});
  // One block whose element count overflows, and stored elements summing past int64.
  test::require_error(
      [&] {
        Pattern::block_diagonal({{InFeatures{std::int64_t{1} << 32}, OutFeatures{std::int64_t{1} << 32}}});
      },
      {"block_diagonal", "'block size'", "overflows"});
  test::require_error(
      [&] {
        Pattern::block_diagonal({{InFeatures{std::int64_t{1} << 31}, OutFeatures{std::int64_t{1} << 31}},
                                 {InFeatures{2}, OutFeatures{2}},
                                 {InFeatures{std::int64_t{1} << 31}, OutFeatures{std::int64_t{1} << 31}},
                                 {InFeatures{std::int64_t{1} << 31}, OutFeatures{std::int64_t{1} << 31}},
                                 {InFeatures{std::int64_t{1} << 31}, OutFeatures{std::int64_t{1} << 31}}});
      },
      {"block_diagonal", "'stored elements'", "overflows"});
  const std::int64_t big = std::int64_t{1} << 40;
  test::require_error(
      [&] {
        Pattern::from_block_mask(InFeatures{big}, OutFeatures{big}, {InFeatures{big}, OutFeatures{big}},
                                 Tensor::ones({1, 1}));
      },
      {"from_block_mask", "'block size'", "overflows"});
  // A representable but unallocatable pattern: the dense mask states its size instead of bad_alloc.
  const Pattern wide = Pattern::from_block_mask(InFeatures{big}, OutFeatures{big}, {InFeatures{big}, OutFeatures{big}},
                                                Tensor::zeros({1, 1}));
  CHECK(wide.num_blocks() == 0);
  CHECK(wide.weight_shape() == Shape{0, big, big});
  test::require_error([&] { (void)wide.element_mask(); }, {"element_mask", "overflows"});
  // Patterns whose bookkeeping cannot fit in memory: an Error stating the bytes, never bad_alloc.
  const std::int64_t huge_n = std::int64_t{1} << 44;
  for (const auto& build : std::vector<std::function<void()>>{
           [&] {
             Pattern::from_block_coords(InFeatures{huge_n}, OutFeatures{huge_n}, {InFeatures{1}, OutFeatures{1}},
                                        {{0, 0}});
           },
           [&] {
             Pattern::from_block_coords(InFeatures{4}, OutFeatures{huge_n}, {InFeatures{4}, OutFeatures{1}}, {{3, 0}});
           },
       }) {
    try {
      build();
      FAIL("a pattern with 2^44 groups was built");
    } catch (const std::bad_alloc&) {
      FAIL("std::bad_alloc escaped");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("from_block_coords") && Catch::Contains("bytes"));
    }
  }
  // The weight tensor itself: too large to exist.
  const Pattern huge =
      Pattern::block_diagonal({{InFeatures{std::int64_t{1} << 31}, OutFeatures{std::int64_t{1} << 31}}});
  test::require_error([&] { (void)Tensor::empty(huge.weight_shape()); }, {"too large", "bytes"});
}

TEST_CASE("block_sparse_linear: zero-length sizes in the forward and every gradient", "[block_sparse_linear][sizes]") {
  struct Case {
    std::string name;
    Pattern pattern;
    Shape x_shape;
  };
  Generator gen(77);
  const std::vector<Case> cases = {
      {"batch_0", Pattern::block_diagonal({{InFeatures{2}, OutFeatures{3}}, {InFeatures{2}, OutFeatures{3}}}), {0, 4}},
      {"batch_0x3",
       Pattern::from_block_mask(InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}},
                                Tensor::of({{1, 0}, {1, 1}})),
       {3, 0, 6}},
      {"no_blocks",
       Pattern::from_block_mask(InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({2, 2})),
       {5, 6}},
      {"no_groups", Pattern::block_diagonal({}), {3, 0}},
      {"size0_groups",
       Pattern::block_diagonal({{InFeatures{0}, OutFeatures{0}},
                                {InFeatures{2}, OutFeatures{3}},
                                {InFeatures{0}, OutFeatures{2}},
                                {InFeatures{3}, OutFeatures{0}},
                                {InFeatures{2}, OutFeatures{3}}}),
       {4, 7}},
      {"in_0",
       Pattern::from_block_mask(InFeatures{0}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({2, 0})),
       {5, 0}},
      {"out_0",
       Pattern::from_block_mask(InFeatures{6}, OutFeatures{0}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({0, 2})),
       {5, 6}},
      {"in_0_groups",
       Pattern::block_diagonal({{InFeatures{0}, OutFeatures{3}}, {InFeatures{0}, OutFeatures{2}}}),
       {2, 0}},
  };
  for (const Dtype dt : {kFloat32, kFloat64})
    for (const auto& c : cases) {
      DYNAMIC_SECTION(c.name << " " << dtype_name(dt)) {
        const Pattern& p = c.pattern;
        Tensor x = test::randn_leaf(c.x_shape, gen, dt);
        Tensor w = test::randn_leaf(p.weight_shape(), gen, dt);
        Tensor b = test::randn_leaf({p.out_features()}, gen, dt);
        Tensor y = block_sparse_linear(x, w, b, p);
        Shape y_shape = c.x_shape;
        y_shape.back() = p.out_features();
        REQUIRE(y.shape() == y_shape);
        // Reference: the dense product y = x W^T + b in double.
        const std::vector<double> xv = x.to_vector(), bv = b.to_vector(), dw = block_sparse_to_dense(w, p).to_vector();
        const std::int64_t in = p.in_features(), out = p.out_features(), m = y.numel() / std::max<std::int64_t>(out, 1);
        std::vector<double> want(static_cast<std::size_t>(y.numel()));
        for (std::int64_t r = 0; r < m; ++r)
          for (std::int64_t i = 0; i < out; ++i) {
            double acc = bv[static_cast<std::size_t>(i)];
            for (std::int64_t j = 0; j < in; ++j)
              acc += xv[static_cast<std::size_t>(r * in + j)] * dw[static_cast<std::size_t>(i * in + j)];
            want[static_cast<std::size_t>(r * out + i)] = acc;
          }
        const auto [err, scale] = test::max_error(y.to_vector(), want);
        CHECK(err <= (dt == kFloat32 ? 1e-5 : 1e-12) * std::max(1.0, scale));
        // Backward to x, weight and bias: shapes, and the bias gradient is the column sum of g.
        Tensor g = Tensor::ones(y.shape(), dt);
        y.backward(g);
        REQUIRE(x.grad().shape() == x.shape());
        REQUIRE(w.grad().shape() == w.shape());
        REQUIRE(b.grad().shape() == b.shape());
        for (double v : b.grad().to_vector()) CHECK(v == static_cast<double>(m));
        if (m == 0 || p.num_blocks() == 0) {
          for (double v : x.grad().to_vector()) CHECK(v == 0.0);
          for (double v : w.grad().to_vector()) CHECK(v == 0.0);
        }
        // Without a bias too.
        Tensor y2 = block_sparse_linear(x.detach(), w.detach(), Tensor(), p);
        for (std::size_t k = 0; k < want.size(); ++k)
          want[k] -= bv[k % static_cast<std::size_t>(std::max<std::int64_t>(out, 1))];
        const auto [err2, scale2] = test::max_error(y2.to_vector(), want);
        CHECK(err2 <= (dt == kFloat32 ? 1e-5 : 1e-12) * std::max(1.0, scale2));
      }
    }
  // A size-0 group stores no block: the others keep their layout.
  const Pattern p = Pattern::block_diagonal({{InFeatures{0}, OutFeatures{0}},
                                             {InFeatures{2}, OutFeatures{3}},
                                             {InFeatures{0}, OutFeatures{2}},
                                             {InFeatures{3}, OutFeatures{0}},
                                             {InFeatures{2}, OutFeatures{3}}});
  CHECK(p.in_features() == 7);
  CHECK(p.out_features() == 8);
  CHECK(p.num_blocks() == 2);
  CHECK(p.weight_shape() == Shape{2, 3, 2});
  CHECK(Pattern::block_diagonal({}).weight_shape() == Shape{0, 0, 0});
  CHECK(Pattern::from_block_mask(InFeatures{6}, OutFeatures{0}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({0, 2}))
            .weight_shape() == Shape{0, 2, 3});
}

TEST_CASE("block_sparse_linear: results do not depend on what ran before (kept scratch buffers)",
          "[block_sparse_linear][history]") {
  // The kernels keep per-thread scratch panels between calls: a call must give the same bits after
  // other calls filled them with other patterns, dtypes, batch sizes and thread counts.
  Generator gen(5);
  auto run = [](const Pattern& p, const Tensor& x0, const Tensor& w0, const Tensor& b0) {
    Tensor x = x0.detach().clone_data().set_requires_grad();
    Tensor w = w0.detach().clone_data().set_requires_grad();
    Tensor b = b0.detach().clone_data().set_requires_grad();
    Tensor y = block_sparse_linear(x, w, b, p);
    y.backward(Tensor::ones(y.shape(), y.dtype()));
    return Tensors{y, x.grad(), w.grad(), b.grad()};
  };
  const Pattern small = Pattern::block_diagonal(
      {{InFeatures{8}, OutFeatures{8}}, {InFeatures{8}, OutFeatures{8}}, {InFeatures{5}, OutFeatures{3}}});
  const Pattern grid16 = Pattern::from_block_mask(InFeatures{64}, OutFeatures{64}, {InFeatures{16}, OutFeatures{16}},
                                                  random_block_mask(4, 4, 0.5, gen, -1, -1));
  const Pattern wide =
      Pattern::block_diagonal({{InFeatures{128}, OutFeatures{128}}, {InFeatures{128}, OutFeatures{128}}});
  for (const Pattern* pp : {&small, &grid16}) {
    const Pattern& p = *pp;
    const Tensor x = Tensor::randn({37, p.in_features()}, gen), w = Tensor::randn(p.weight_shape(), gen),
                 b = Tensor::randn({p.out_features()}, gen);
    const Tensors first = run(p, x, w, b);
    // Disturb: other patterns (wider groups fill larger panels with other values), float64, another
    // batch size, one and two threads.
    for (const Pattern* other : {&wide, &grid16, &small})
      for (const Dtype dt : {kFloat64, kFloat32})
        for (const int threads : {1, 2})
          with_num_threads(threads, [&] {
            run(*other, Tensor::randn({53, other->in_features()}, gen, dt).mul_(3.0),
                Tensor::randn(other->weight_shape(), gen, dt), Tensor::randn({other->out_features()}, gen, dt));
          });
    for (const int threads : {2, 1}) {
      const Tensors again = with_num_threads(threads, [&] { return run(p, x, w, b); });
      for (std::size_t k = 0; k < first.size(); ++k) CHECK(bit_equal(first[k], again[k]));
    }
  }
}

// ---- create_graph: the backward recorded through the block-sparse family ------------------------
// (Note [Create graph] (block-sparse) in block_sparse_linear.cpp: F, I = g W and Wg = stored blocks of g^T x.)

namespace {

// The first gradients of tanh(block_sparse_linear(x, w, b)) seeded by v, recorded (create_graph), flattened
// and concatenated: every second-order path of F, I and Wg is in their Jacobian, and every third-order
// path in the Jacobian of their gradient.
Tensor first_gradients(const Tensors& in, const Pattern& p) {
  AutoGradMode grad_mode(true);  // gradcheck evaluates fn under NoGradGuard too
  const Tensor y = tanh(block_sparse_linear(in[0], in[1], in[2], p));
  const Tensors g = xgrad::grad({y}, {in[0], in[1], in[2]}, {in[3]}, std::nullopt, /*create_graph=*/true);
  return concat({reshape(g[0], {-1}), reshape(g[1], {-1}), reshape(g[2], {-1})}, 0);
}

}  // namespace

TEST_CASE("block_sparse_linear: third derivatives (gradgradcheck of the recorded first gradient)",
          "[block_sparse_linear][create_graph]") {
  Generator gen(31);
  std::vector<PatternCase> cases = small_patterns(gen);
  for (const auto& pc : cases)
    for (const Shape& lead : {Shape{}, Shape{3}}) {
      const Pattern& p = pc.pattern;
      INFO(pc.name << " x lead dims " << shape_str(lead));
      Shape xs = lead;
      xs.push_back(p.in_features());
      Shape ys = lead;
      ys.push_back(p.out_features());
      const Tensor x = test::randn_leaf(xs, gen), w = packed_leaf(p, gen, kFloat64),
                   b = test::randn_leaf({p.out_features()}, gen), v = test::randn_leaf(ys, gen);
      const auto f = [&](const Tensors& in) { return first_gradients(in, p); };
      test::require_gradcheck(f, {x, w, b, v});                  // second derivatives
      const GradcheckReport r = gradgradcheck(f, {x, w, b, v});  // third derivatives
      INFO(r.message);
      REQUIRE(r.ok);
    }
}

TEST_CASE("block_sparse_linear: second derivatives match torch.autograd.grad(..., create_graph=True)",
          "[block_sparse_linear][create_graph][parity]") {
  ParityBatch batch("block_sparse_linear_create_graph");
  Generator gen(32);
  std::vector<PatternCase> cases = small_patterns(gen);
  cases.push_back(
      {"rand_8x16_d4", Pattern::from_block_mask(InFeatures{128}, OutFeatures{64}, {InFeatures{16}, OutFeatures{8}},
                                                random_block_mask(8, 8, 0.25, gen, 3, 5))});
  cases.push_back(
      {"grid_32x32", Pattern::from_block_mask(InFeatures{96}, OutFeatures{64}, {InFeatures{32}, OutFeatures{32}},
                                              random_block_mask(2, 3, 0.5, gen, 1, -1))});
  const std::string code =
      "Wd = torch.zeros(O * I, dtype=w.dtype).index_put((idx.long(),), w.reshape(-1)).reshape(O, I)\n"
      "y = torch.tanh(torch.nn.functional.linear(x, Wd * mask, b))\n"
      "out = torch.autograd.grad(y, {}, v, create_graph=True)[0]";
  int k = 0;
  for (const auto& pc : cases)
    for (const Shape& lead : {Shape{}, Shape{5}, Shape{2, 3}}) {
      const Pattern& p = pc.pattern;
      Shape xs = lead;
      xs.push_back(p.in_features());
      Shape ys = lead;
      ys.push_back(p.out_features());
      const std::string prefix = fmt::format("O = {}\nI = {}\n", p.out_features(), p.in_features());
      const Tensor x = test::randn_leaf(xs, gen), w = packed_leaf(p, gen, kFloat64),
                   b = test::randn_leaf({p.out_features()}, gen), v = test::randn_leaf(ys, gen);
      const Tensor idx = dense_index(p), mask = p.element_mask(kFloat64);
      // The harness backpropagates into the recorded first gradient: second derivatives w.r.t. x, w, b, v.
      for (int wrt = 0; wrt < 3; ++wrt)
        batch.add(fmt::format("{}_{}", pc.name, k++),
                  prefix + fmt::format(fmt::runtime(code), std::array{"x", "w", "b"}[static_cast<std::size_t>(wrt)]),
                  {{"x", x}, {"w", w}, {"b", b}, {"v", v}, {"idx", idx, false}, {"mask", mask, false}},
                  [&p, wrt](const Tensors& in) {
                    const Tensor y = tanh(block_sparse_linear(in[0], in[1], in[2], p));
                    return xgrad::grad({y}, {in[static_cast<std::size_t>(wrt)]}, {in[3]}, std::nullopt,
                                       /*create_graph=*/true)[0];
                  });
    }
  batch.run();
}

TEST_CASE("block_sparse_linear: create_graph second derivatives are bit-identical with 1 and 2 threads",
          "[block_sparse_linear][create_graph][threads]") {
  Generator gen(33);
  const Pattern p = Pattern::from_block_mask(InFeatures{256}, OutFeatures{192}, {InFeatures{32}, OutFeatures{16}},
                                             random_block_mask(12, 8, 0.4, gen, 2, 3));
  const Tensor x = test::randn_leaf({300, 256}, gen, kFloat32), w = packed_leaf(p, gen, kFloat32),
               b = test::randn_leaf({192}, gen, kFloat32), v = test::randn_leaf({300, 192}, gen, kFloat32);
  const Tensor u = Tensor::randn({256 * 300 + p.stored_elements() + 192}, gen, kFloat32);
  test::require_thread_deterministic([&] {
    const Tensor g1 = first_gradients({x, w, b, v}, p);
    Tensors r = xgrad::grad({g1}, {x, w, b, v}, {u});
    r.push_back(g1.detach());
    return r;
  });
}

TEST_CASE("block_sparse_linear: the create_graph backward never forms the dense weight",
          "[block_sparse_linear][create_graph]") {
  // in = out = 2^16, 4096 diagonal 16x16 blocks: the dense float32 weight would be 16 GiB (and its int64
  // index maps 32 GiB each); the packed weight is 4 MiB.
  constexpr std::int64_t kGroups = 4096, kSize = 16, kN = kGroups * kSize, kM = 3;
  const Pattern p =
      Pattern::block_diagonal(std::vector<Pattern::DiagonalGroup>(kGroups, {InFeatures{kSize}, OutFeatures{kSize}}));
  REQUIRE(p.in_features() == kN);
  Generator gen(34);
  const Tensor x = test::randn_leaf({kM, kN}, gen, kFloat32), w = packed_leaf(p, gen, kFloat32),
               v = test::randn_leaf({kM, kN}, gen, kFloat32);
  const Tensor u = Tensor::randn({kM, kN}, gen, kFloat32);
  const std::size_t before = memory_stats().allocated_bytes;
  reset_peak_memory_stats();
  const Tensor y = block_sparse_linear(x, w, Tensor(), p);
  const Tensor gx = xgrad::grad({y}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];  // I(v, w), recorded
  const Tensors gg = xgrad::grad({gx}, {w, v}, {u});                                     // Wg(v, u), F(u, w)
  const std::size_t peak = memory_stats().peak_allocated_bytes - before;
  const std::size_t dense = static_cast<std::size_t>(kN) * kN * sizeof(float);
  INFO("peak " << peak << " bytes, dense weight " << dense << " bytes");
  CHECK(peak < std::size_t{64} << 20);
  // The values: d<u, v W>/dv = u W^T = F(u, w) and d/dw = the stored blocks of v^T u (a first-order
  // weight gradient of F(u, w) seeded by v), the same kernels bit for bit.
  CHECK(gg[1].to_vector() == block_sparse_linear(u, w, Tensor(), p).to_vector());
  const Tensor w2 = w.detach().set_requires_grad(true);
  const Tensor u2 = u.detach();
  const Tensor dw = xgrad::grad({block_sparse_linear(u2, w2, Tensor(), p)}, {w2}, {v.detach()})[0];
  CHECK(gg[0].to_vector() == dw.to_vector());
  // And the recorded first gradient is the first-order one (same kernel, same bits).
  const Tensor x2 = x.detach().set_requires_grad(true);
  CHECK(gx.to_vector() == xgrad::grad({block_sparse_linear(x2, w2, Tensor(), p)}, {x2}, {v.detach()})[0].to_vector());
}
