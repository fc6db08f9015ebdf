// Tests for ops/sparse.*: the CSR type (construction from CSR, COO and dense, validation, the cached
// transpose, to_dense and t() with their gradients) and what the op table cannot express for spmm,
// sddmm, linear on a sparse input and the segment reductions (composition, a large skewed graph with
// 1 and 2 threads, the parallel transpose, empty segments, NaN, the tie rule, sizes beyond memory,
// integer values). Gradcheck,
// gradgradcheck, PyTorch parity, thread equality, degenerate sizes and bad inputs of every op are in
// the op table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/gradcheck.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/sparse.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {
using V = std::vector<double>;
Tensor longs(const std::vector<std::int64_t>& v) {
  return Tensor::from_data<std::int64_t>(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
}
std::vector<std::int64_t> vec(std::span<const std::int64_t> s) { return {s.begin(), s.end()}; }
std::vector<std::int64_t> vec(const Tensor& t) { return vec(std::span(t.data<std::int64_t>(), t.numel())); }
Tensor ints(const std::vector<std::int32_t>& v) {
  return Tensor::from_data<std::int32_t>(std::span<const std::int32_t>(v), {static_cast<std::int64_t>(v.size())});
}
// [[0, 1, 2], [0, 0, 0], [3, 0, 4]] as CSR (float64)
SparseCsr example(bool requires_grad = false) {
  Tensor v = Tensor::from_vector({1, 2, 3, 4}, {4}, kFloat64);
  if (requires_grad) v.set_requires_grad();
  return sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 2, 0, 2}), v, {3, 3});
}
}  // namespace

TEST_CASE("sparse_csr_tensor keeps its values leaf and gives the dense matrix", "[sparse]") {
  const SparseCsr a = example(true);
  CHECK(a.shape() == Shape{3, 3});
  CHECK(a.nnz() == 4);
  CHECK(a.values().is_leaf());
  CHECK(a.values().requires_grad());
  CHECK(a.crow_indices().to_vector() == V{0, 2, 2, 4});
  CHECK(a.col_indices().to_vector() == V{1, 2, 0, 2});
  CHECK(a.to_dense().to_vector() == V{0, 1, 2, 0, 0, 0, 3, 0, 4});
  CHECK(a.str() == "SparseCsr(rows=3, cols=3, nnz=4, dtype=float64)");
  // int32 indices are widened
  const SparseCsr b = sparse_csr_tensor(ints({0, 2, 2, 4}), ints({1, 2, 0, 2}), a.values(), {3, 3});
  CHECK(b.pattern() == a.pattern());
  // to_dense is differentiable in the values
  sum(mul(a.to_dense(), Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, kFloat64))).backward();
  CHECK(a.values().grad().to_vector() == V{2, 3, 7, 9});
  // no entries, no rows, no columns
  const SparseCsr empty = sparse_csr_tensor(longs({0, 0}), longs({}), Tensor::zeros({0}), {1, 3});
  CHECK(empty.to_dense().to_vector() == V{0, 0, 0});
  CHECK(empty.t().shape() == Shape{3, 1});
  CHECK(spmm(empty, Tensor::ones({3, 2})).to_vector() == V{0, 0});
  const SparseCsr none = sparse_csr_tensor(longs({0}), longs({}), Tensor::zeros({0}), {0, 0});
  CHECK(none.to_dense().shape() == Shape{0, 0});
  CHECK(to_sparse_csr(Tensor::zeros({0, 4})).shape() == Shape{0, 4});
}

TEST_CASE("sparse_csr_tensor refuses bad indices with a message naming the argument", "[sparse][errors]") {
  const Tensor v4 = Tensor::zeros({4}, kFloat64);
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 3, 2, 4}), longs({1, 2, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'crow_indices'", "non-decreasing", "crow_indices[1] = 3"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({1, 2, 2, 4}), longs({1, 2, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'crow_indices'", "start at 0"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 3}), longs({1, 2, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'crow_indices'", "end at nnz = 4"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 4}), longs({1, 2, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'crow_indices'", "rows + 1 = 4", "(3, 3)"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 3, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'col_indices'", "col_indices[1] = 3", "out of range for 3 columns"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, -1, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'col_indices'", "-1"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({2, 1, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'col_indices'", "strictly increasing", "row 0"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 1, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "strictly increasing"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 2, 0, 2}), Tensor::zeros({3}), {3, 3});
      },
      {"sparse_csr_tensor", "'values'", "(4,)", "(3,)"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 2, 0, 2}), v4, {3, 3, 1});
      },
      {"sparse_csr_tensor", "'size'", "(3, 3, 1)"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0, 2, 2, 4}), longs({1, 2, 0, 2}), v4, {-3, 3});
      },
      {"sparse_csr_tensor", "'size'", "non-negative"});
  require_error(
      [&] {
        sparse_csr_tensor(Tensor::from_vector({0, 2, 2, 4}, {4}, kFloat64), longs({1, 2, 0, 2}), v4, {3, 3});
      },
      {"sparse_csr_tensor", "'crow_indices'", "int64 or int32", "float64"});
  require_error(
      [&] {
        sparse_csr_tensor(longs({0}), longs({}), Tensor::zeros({0}), {INT64_MAX, 3});
      },
      {"sparse_csr_tensor", "'size'", "overflows"});
  require_error([&] { SparseCsr(CsrPattern(), Tensor()); }, {"SparseCsr", "'values'"});
}

TEST_CASE("sparse_coo_tensor sorts the entries and sums duplicates, differentiably", "[sparse]") {
  // (2, 0) = 3, (0, 2) = 2, (0, 1) = 1, (2, 2) = 4 + 5 (a duplicate)
  Tensor idx = Tensor::from_vector({2, 0, 0, 2, 2, 0, 2, 1, 2, 2}, {2, 5}, kInt64);
  Tensor v = Tensor::from_vector({3, 2, 1, 4, 5}, {5}, kFloat64);
  v.set_requires_grad();
  const SparseCsr a = sparse_coo_tensor(idx, v, {3, 3});
  CHECK(a.crow_indices().to_vector() == V{0, 2, 2, 4});
  CHECK(a.col_indices().to_vector() == V{1, 2, 0, 2});
  CHECK(a.values().to_vector() == V{1, 2, 3, 9});
  sum(mul(a.values(), Tensor::from_vector({10, 20, 30, 40}, {4}, kFloat64))).backward();
  CHECK(v.grad().to_vector() == V{30, 20, 10, 40, 40});
  // already sorted and unique: the values tensor itself
  Tensor w = Tensor::from_vector({1, 2}, {2}, kFloat64);
  const SparseCsr b = sparse_coo_tensor(Tensor::from_vector({0, 1, 1, 0}, {2, 2}, kInt64), w, {2, 2});
  CHECK(b.values().is_same(w));
  require_error(
      [] {
        sparse_coo_tensor(Tensor::from_vector({0, 3}, {2, 1}, kInt64), Tensor::zeros({1}), {2, 2});
      },
      {"sparse_coo_tensor", "'indices'", "column index 3", "2 columns"});
  require_error(
      [] {
        sparse_coo_tensor(Tensor::from_vector({0, 1, 2}, {3, 1}, kInt64), Tensor::zeros({1}), {2, 2});
      },
      {"sparse_coo_tensor", "'indices'", "(2, nnz)", "(3, 1)"});
}

TEST_CASE("to_sparse_csr takes the non-zero entries, differentiably", "[sparse]") {
  Tensor d = Tensor::from_vector({0, 1, 2, 0, 0, 0, 3, 0, 4}, {3, 3}, kFloat64);
  d.set_requires_grad();
  const SparseCsr a = to_sparse_csr(d);
  CHECK(a.pattern() == example().pattern());
  CHECK(a.values().to_vector() == V{1, 2, 3, 4});
  sum(mul(a.values(), a.values())).backward();
  CHECK(d.grad().to_vector() == V{0, 2, 4, 0, 0, 0, 6, 0, 8});
  require_error([] { to_sparse_csr(Tensor::zeros({3})); }, {"to_sparse_csr", "'dense'", "(3,)"});
}

TEST_CASE("the transposed pattern is built once and shared by copies", "[sparse]") {
  const SparseCsr a = example(true);
  const SparseCsr copy = a.with_values(a.values().detach());
  CHECK(copy.pattern().same_object(a.pattern()));
  CHECK_FALSE(a.pattern().has_transposed());
  const auto& t = copy.pattern().transposed();
  CHECK(a.pattern().has_transposed());
  CHECK(&a.pattern().transposed() == &t);
  CHECK(vec(t.crow()) == std::vector<std::int64_t>{0, 1, 2, 4});
  CHECK(vec(t.col()) == std::vector<std::int64_t>{2, 0, 0, 2});
  CHECK(vec(t.perm()) == std::vector<std::int64_t>{2, 0, 1, 3});
  CHECK(vec(t.perm_indices) == std::vector<std::int64_t>{2, 0, 1, 3});
  CHECK(t.pattern.rows() == 3);
  CHECK(t.pattern.cols() == 3);
  // the row indices, built on the way, are cached too; Aᵀ is one pattern object, shared by every t()
  CHECK(a.pattern().has_row_indices());
  CHECK(a.t().pattern().same_object(copy.t().pattern()));
  CHECK(a.t().pattern().same_object(t.pattern));
  CHECK(a.t().crow_indices().is_same(t.pattern.crow_indices()));
  // concurrent first use: one build
  const SparseCsr b = example();
  std::vector<const CsrPattern::Transposed*> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &b.pattern().transposed(); });
  for (auto& th : threads) th.join();
  for (auto* p : seen) CHECK(p == seen[0]);
  // t(): the transposed matrix, its gradient back on the original values
  const SparseCsr at = a.t();
  CHECK(at.to_dense().to_vector() == V{0, 0, 3, 1, 0, 0, 2, 0, 4});
  sum(mul(at.values(), Tensor::from_vector({1, 2, 3, 4}, {4}, kFloat64))).backward();
  CHECK(a.values().grad().to_vector() == V{2, 3, 1, 4});
}

TEST_CASE("the pattern's indices are int64 tensors shared without copies, and its row indices are cached", "[sparse]") {
  const SparseCsr a = example(true);
  const SparseCsr copy = a.with_values(a.values().detach());
  // crow_indices() and col_indices() are the pattern's own tensors, shared by every matrix on it
  CHECK(a.crow_indices().is_same(copy.crow_indices()));
  CHECK(a.col_indices().is_same(a.pattern().col_indices()));
  CHECK(a.crow_indices().dtype() == kInt64);
  CHECK(a.crow_indices().data<std::int64_t>() == a.pattern().crow().data());
  CHECK(a.col_indices().data<std::int64_t>() == a.pattern().col().data());
  CHECK(sparse_softmax(a).crow_indices().is_same(a.crow_indices()));
  // the constructor copies the caller's indices: a later write to them cannot reach the pattern
  Tensor crow = longs({0, 2, 2, 4}), col = longs({1, 2, 0, 2});
  const SparseCsr b = sparse_csr_tensor(crow, col, Tensor::ones({4}), {3, 3});
  CHECK_FALSE(b.crow_indices().is_same(crow));
  col.fill_(0);
  CHECK(vec(b.col_indices()) == std::vector<std::int64_t>{1, 2, 0, 2});
  // int32 indices are widened once
  const SparseCsr c = sparse_csr_tensor(ints({0, 2, 2, 4}), ints({1, 2, 0, 2}), Tensor::ones({4}), {3, 3});
  CHECK(c.crow_indices().dtype() == kInt64);
  CHECK(c.pattern() == b.pattern());
  // row_indices: built once, on first use, shared by copies; empty rows take no entry
  CHECK_FALSE(a.pattern().has_row_indices());
  const Tensor& rows = copy.pattern().row_indices();
  CHECK(a.pattern().has_row_indices());
  CHECK(&a.pattern().row_indices() == &rows);
  CHECK(rows.shape() == Shape{4});
  CHECK(vec(rows) == std::vector<std::int64_t>{0, 0, 2, 2});
  CHECK(vec(a.pattern().row()) == std::vector<std::int64_t>{0, 0, 2, 2});
  // concurrent first use: one build
  const SparseCsr d = example();
  std::vector<const Tensor*> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &d.pattern().row_indices(); });
  for (auto& th : threads) th.join();
  for (auto* p : seen) CHECK(p == seen[0]);
  // leading, trailing and all-empty rows; 0 x 0; no entries; empty columns in the transpose
  const CsrPattern p = CsrPattern::from_indices(std::vector<std::int64_t>{0, 0, 1, 1, 3, 3},
                                                std::vector<std::int64_t>{4, 0, 4}, 5, 6, "test");
  CHECK(vec(p.row_indices()) == std::vector<std::int64_t>{1, 3, 3});
  CHECK(vec(p.transposed().crow()) == std::vector<std::int64_t>{0, 1, 1, 1, 1, 3, 3});
  CHECK(vec(p.transposed().col()) == std::vector<std::int64_t>{3, 1, 3});
  CHECK(vec(p.transposed().perm()) == std::vector<std::int64_t>{1, 0, 2});
  for (const CsrPattern& e : {CsrPattern(), CsrPattern::from_indices(std::vector<std::int64_t>{0, 0, 0},
                                                                     std::vector<std::int64_t>{}, 2, 3, "test")}) {
    CHECK(e.row_indices().shape() == Shape{0});
    CHECK(e.row_indices().dtype() == kInt64);
    CHECK(e.transposed().perm_indices.shape() == Shape{0});
    CHECK(e.transposed().pattern.rows() == e.cols());
    CHECK(vec(e.transposed().crow()) == std::vector<std::int64_t>(static_cast<std::size_t>(e.cols()) + 1, 0));
  }
  // a pattern made from tensors is checked as sparse_csr_tensor's
  require_error(
      [] {
        (void)CsrPattern::from_indices(longs({0, 2}), longs({1, 1}), 1, 3, "op");
      },
      {"op", "'col_indices'", "strictly increasing"});
  require_error([] { (void)CsrPattern::from_indices(Tensor::zeros({2}), longs({}), 1, 3, "op"); },
                {"op", "'crow_indices'", "int64 or int32"});
}

TEST_CASE("the segment ops and gathers over a pattern's rows equal the public ops, bit for bit, at 1 and 2 threads",
          "[sparse][segment][threads]") {
  // a skewed pattern: 3000 rows, one hub with many entries, empty rows; F = 5
  Generator g(9);
  std::vector<std::int64_t> crow{0}, col;
  for (std::int64_t i = 0; i < 3000; ++i) {
    const std::int64_t n = i == 5 ? 2000 : static_cast<std::int64_t>(g.uniform() * 9);
    std::int64_t c = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      c += 1 + static_cast<std::int64_t>(g.uniform() * (i == 5 ? 1.2 : 300));
      if (c >= 2500) break;
      col.push_back(c);
    }
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto nnz = static_cast<std::int64_t>(col.size());
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor data = Tensor::randn({nnz, 5}, g, dt), gy = Tensor::randn({nnz, 5}, g, dt);
    const Tensor xc = Tensor::randn({2500, 5}, g, dt), xr = Tensor::randn({3000, 5}, g, dt);
    const auto run = [&](bool pattern_path) {
      Tensor d = data.clone_data().set_requires_grad(), c = xc.clone_data().set_requires_grad(),
             r = xr.clone_data().set_requires_grad();
      const SparseCsr a = sparse_csr_tensor(longs(crow), longs(col), Tensor::zeros({nnz}, dt), {3000, 2500});
      const Tensor off = a.crow_indices();
      Tensors outs;
      if (pattern_path) {
        outs = {detail::segment_sum_rows(d, a.pattern()),         detail::segment_mean_rows(d, a.pattern(), 0.0),
                detail::segment_max_rows(d, a.pattern(), 0.0),    detail::segment_softmax_rows(d, a.pattern()),
                detail::segment_log_softmax_rows(d, a.pattern()), detail::index_select_cols(c, a.pattern()),
                detail::index_select_rows(r, a.pattern())};
      } else {
        outs = {segment_sum(d, off),
                segment_mean(d, off, 0.0),
                segment_max(d, off, 0.0),
                segment_softmax(d, off),
                segment_log_softmax(d, off),
                index_select(c, 0, a.col_indices()),
                index_select(r, 0, a.pattern().row_indices())};
      }
      Tensor loss = Tensor::zeros({}, dt);
      for (std::size_t i = 0; i < outs.size(); ++i)
        loss = add(loss, sum(mul(outs[i], i < 5 && outs[i].size(0) == nnz ? gy : outs[i])));
      const Tensors grads = grad({loss}, {d, c, r});
      outs.insert(outs.end(), grads.begin(), grads.end());
      return outs;
    };
    require_thread_deterministic([&] { return run(true); });
    const Tensors want = run(false), got = run(true);
    REQUIRE(want.size() == got.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("output " << i);
      CHECK(want[i].shape() == got[i].shape());
      CHECK(want[i].to_vector() == got[i].to_vector());
    }
  }
  // data must have one row per entry; the gathers' x one row per column (row)
  const SparseCsr a = example();
  require_error([&] { (void)detail::segment_softmax_rows(Tensor::zeros({3}), a.pattern()); },
                {"segment_softmax", "'data'", "(3,)"});
  require_error(
      [&] {
        (void)detail::index_select_cols(Tensor::zeros({2, 2}), a.pattern());
      },
      {"index_select", "'x'", "(2, 2)"});
  // create_graph through the gathers: their backward records itself (a gather of g again)
  for (const bool by_col : {true, false}) {
    const auto fn = [by_col](const Tensors& in) {
      const Tensor y = by_col ? detail::index_select_cols(in[0], example().pattern())
                              : detail::index_select_rows(in[0], example().pattern());
      return mul(y, y);
    };
    const auto leaves = [] {
      return Tensors{Tensor::from_vector({0.3, -1.0, 2.0, 0.5, 1.5, -0.25}, {3, 2}, kFloat64).set_requires_grad()};
    };
    require_gradcheck(fn, leaves());
    const GradcheckReport report = gradgradcheck(fn, leaves());
    INFO(report.message);
    CHECK(report.ok);
  }
}

TEST_CASE("spmm and sddmm agree with dense products and compose (sddmm -> edge softmax -> spmm) to any order",
          "[sparse]") {
  Generator g(3);
  Tensor d = Tensor::randn({6, 5}, g, kFloat64);
  Tensor mask = Tensor::rand({6, 5}, g, kFloat64);
  std::vector<double> dv = d.to_vector(), mv = mask.to_vector();
  for (std::size_t i = 0; i < dv.size(); ++i)
    if (mv[i] < 0.5 || i / 5 == 2) dv[i] = 0;  // row 2 empty
  std::vector<double> nz(dv.size());
  for (std::size_t i = 0; i < dv.size(); ++i) nz[i] = dv[i] != 0 ? 1 : 0;
  const Tensor dense = Tensor::from_vector(dv, {6, 5}, kFloat64),
               nonzero_mask = Tensor::from_vector(nz, {6, 5}, kFloat64);
  const SparseCsr a = to_sparse_csr(dense);
  const Tensor x = Tensor::randn({5, 7}, g, kFloat64);
  const Tensor y = Tensor::randn({6, 7}, g, kFloat64);
  CHECK(allclose(spmm(a, x), matmul(dense, x), 1e-12, 1e-12));
  CHECK(allclose(spmm(a.t(), y), matmul(transpose(dense, 0, 1), y), 1e-12, 1e-12));
  // sddmm = (y·xᵀ) read at the stored entries
  const Tensor full = matmul(y, transpose(x, 0, 1));
  const Tensor s = sddmm(a, y, x);
  CHECK(allclose(a.with_values(s).to_dense(), mul(full, nonzero_mask), 1e-12, 1e-12));
  // an attention-like layer: scores on the edges, then aggregation; first and second order
  const Tensor offsets = a.crow_indices();
  const auto layer = [&a, offsets](const Tensors& in) {
    const Tensor scores = segment_softmax(mul(sddmm(a, in[0], in[1]), in[2]), offsets);  // edge softmax
    return spmm(a.with_values(scores), in[1]);
  };
  const auto leaves = [&] {
    Tensors in{y.clone_data(), x.clone_data(), a.values().clone_data()};
    for (auto& t : in) t.set_requires_grad();
    return in;
  };
  require_gradcheck(layer, leaves());
  const GradcheckReport report = gradgradcheck(layer, leaves());
  INFO(report.message);
  CHECK(report.ok);
}

TEST_CASE("the transposed pattern of a large matrix, built in parallel, is the stable sort by column",
          "[sparse][threads]") {
  // 40000 x 5000 with 0-8 entries per row (about 160k: the parallel build) and an empty tail of columns
  Generator g(11);
  std::vector<std::int64_t> crow{0}, col;
  for (std::int64_t i = 0; i < 40000; ++i) {
    std::int64_t c = -1;
    for (auto n = static_cast<std::int64_t>(g.uniform() * 9); n > 0; --n) {
      c += 1 + static_cast<std::int64_t>(g.uniform() * 900);
      if (c >= 4990) break;
      col.push_back(c);
    }
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto nnz = static_cast<std::int64_t>(col.size());
  REQUIRE(nnz > (std::int64_t{1} << 16));
  // the reference: entries sorted by (column, row), i.e. by column stably in row-major order
  std::vector<std::int64_t> order(static_cast<std::size_t>(nnz));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return col[static_cast<std::size_t>(a)] < col[static_cast<std::size_t>(b)];
  });
  require_thread_deterministic([&] {
    const SparseCsr a = sparse_csr_tensor(longs(crow), longs(col), Tensor::zeros({nnz}), {40000, 5000});
    const CsrPattern::Transposed& t = a.pattern().transposed();
    CHECK(vec(t.perm()) == order);
    CHECK(t.crow().size() == 5001);
    CHECK(t.crow().back() == nnz);
    for (std::int64_t c = 0; c < 5000; ++c)
      for (std::int64_t k = t.crow()[static_cast<std::size_t>(c)]; k < t.crow()[static_cast<std::size_t>(c) + 1]; ++k) {
        REQUIRE(col[static_cast<std::size_t>(t.perm()[static_cast<std::size_t>(k)])] == c);
        REQUIRE(t.col()[static_cast<std::size_t>(k)] == a.pattern().row()[t.perm()[static_cast<std::size_t>(k)]]);
      }
    return Tensors{t.pattern.crow_indices(), t.pattern.col_indices(), t.perm_indices, a.pattern().row_indices()};
  });
}

TEST_CASE("spmm and its gradients are bit-identical with 1 and 2 threads on a skewed graph", "[sparse][threads]") {
  // 3000 rows, one hub row with 2000 entries, the rest 0-8 entries; F = 37 (odd)
  Generator g(5);
  std::vector<std::int64_t> crow{0}, col;
  for (std::int64_t i = 0; i < 3000; ++i) {
    const std::int64_t n = i == 17 ? 2000 : static_cast<std::int64_t>(g.uniform() * 9);
    std::int64_t c = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      c += 1 + static_cast<std::int64_t>(g.uniform() * (i == 17 ? 1.4 : 300));
      if (c >= 2500) break;
      col.push_back(c);
    }
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto nnz = static_cast<std::int64_t>(col.size());
  for (Dtype dt : {kFloat32, kFloat64}) {
    const Tensor v = Tensor::randn({nnz}, g, dt), x = Tensor::randn({2500, 37}, g, dt);
    const Tensor gy = Tensor::randn({3000, 37}, g, dt);
    require_thread_deterministic([&] {
      Tensor vl = v.clone_data(), xl = x.clone_data();
      vl.set_requires_grad();
      xl.set_requires_grad();
      const SparseCsr a = sparse_csr_tensor(longs(crow), longs(col), vl, {3000, 2500});
      const Tensor out = spmm(a, xl);
      const Tensors grads = grad({out}, {vl, xl}, {gy});
      return Tensors{out, grads[0], grads[1], sddmm(a, gy, xl)};
    });
  }
}

TEST_CASE("sparse_softmax is segment_softmax over each row's entries, on the same pattern", "[sparse][segment]") {
  const SparseCsr a = example(true);  // rows {1, 2}, {}, {3, 4}
  const SparseCsr s = sparse_softmax(a);
  CHECK(s.pattern().same_object(a.pattern()));
  const double e = std::exp(1.0);
  CHECK(allclose(s.values(), Tensor::from_vector({1 / (1 + e), e / (1 + e), 1 / (1 + e), e / (1 + e)}, {4}, kFloat64),
                 1e-15, 1e-15));
  require_gradcheck([](const Tensors& in) { return sparse_softmax(example().with_values(in[0])).values(); },
                    {Tensor::from_vector({0.3, -1.0, 2.0, 0.5}, {4}, kFloat64).set_requires_grad()});
  require_error([] { (void)sparse_softmax(SparseCsr()); }, {"sparse_softmax", "'a'", "undefined"});
}

TEST_CASE("segment reductions over a CSR matrix's rows", "[sparse][segment]") {
  const SparseCsr a = example(true);  // rows [1, 2], [], [3, 4]
  const Tensor s = segment_sum(a.values(), a.crow_indices());
  CHECK(s.to_vector() == V{3, 0, 7});
  const Tensor m = segment_mean(a.values(), a.crow_indices());
  const V mv = m.to_vector();
  CHECK(mv[0] == 1.5);
  CHECK(std::isnan(mv[1]));  // an empty segment, as torch.segment_reduce
  CHECK(mv[2] == 3.5);
  sum(mul(s, Tensor::from_vector({1, 2, 3}, {3}, kFloat64))).backward();
  CHECK(a.values().grad().to_vector() == V{1, 1, 3, 3});
  // trailing dimensions are kept: (nnz, 2, 1) -> (rows, 2, 1)
  const Tensor d = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2, 1}, kFloat64);
  CHECK(segment_sum(d, a.crow_indices()).to_vector() == V{4, 6, 0, 0, 12, 14});
  CHECK(segment_sum(d, a.crow_indices()).shape() == Shape{3, 2, 1});
}

TEST_CASE("segment_max and segment_min: empty segments, NaN, infinities and ties match torch.segment_reduce",
          "[sparse][segment][parity]") {
  // values (the gradient at ties is the even split, which torch.segment_reduce gives a positive g only:
  // the next test)
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  // 5 segments: [0, 3) ties in both columns, [3, 3) empty, [3, 6) a NaN in column 0, [6, 8) -inf
  // twice in column 0 and +inf in column 1, [8, 9) one entry
  const V d{1, 2, 1, 2, 0, 2, 5, -1, nan, 4, 5, -1, -inf, inf, -inf, 3, 7, 7};
  const std::string off = "torch.tensor([0, 3, 3, 6, 8, 9])";
  test::ParityBatch batch("segment_max_min");
  batch.set_equal_nonfinite();
  for (Dtype dt : {kFloat32, kFloat64})
    for (bool is_max : {true, false}) {
      const Tensor offsets = longs({0, 3, 3, 6, 8, 9});
      batch.add(fmt::format("{}_{}", is_max ? "max" : "min", dtype_name(dt)),
                fmt::format("out = torch.segment_reduce(data, '{}', offsets={}, axis=0)", is_max ? "max" : "min", off),
                {{"data", Tensor::from_vector(d, {9, 2}, dt), false}}, [is_max, offsets](const Tensors& in) {
                  return is_max ? segment_max(in[0], offsets) : segment_min(in[0], offsets);
                });
    }
  batch.run();
}

TEST_CASE("segment_max and segment_min split g evenly among the ties, whatever its sign", "[sparse][segment]") {
  // one segment of three equal entries, two columns: g = (3, -3); torch 1.13's segment_reduce gives
  // the -3 whole to each tie (a gradient summing to -9)
  Tensor d = Tensor::from_vector({2, 5, 2, 5, 2, 5}, {3, 2}, kFloat64);
  d.set_requires_grad();
  const Tensor out = segment_max(d, longs({0, 3}));
  CHECK(out.to_vector() == V{2, 5});
  out.backward(Tensor::from_vector({3, -3}, {1, 2}, kFloat64));
  CHECK(d.grad().to_vector() == V{1, -1, 1, -1, 1, -1});
  // g = 0 and the ties NaN (a NaN wins) and −inf (the maximum of −inf entries)
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Tensor e = Tensor::from_vector({nan, -inf, 1, -inf, nan, 7}, {3, 2}, kFloat64);
  e.set_requires_grad();
  const Tensor m = segment_max(e, longs({0, 2, 3}));  // segments [nan, 1] x [-inf, -inf] and [nan] x [7]
  m.backward(Tensor::from_vector({-4, 0, -1, -6}, {2, 2}, kFloat64));
  CHECK(e.grad().to_vector() == V{-4, 0, 0, 0, -1, -6});
  Tensor f = Tensor::from_vector({nan, -inf, nan, -inf}, {2, 2}, kFloat64);
  f.set_requires_grad();
  segment_max(f, longs({0, 2})).backward(Tensor::from_vector({-4, -6}, {1, 2}, kFloat64));
  CHECK(f.grad().to_vector() == V{-2, -3, -2, -3});
  // int32 offsets, segment_min, and the gradient of the gradient (create_graph): linear in g
  Tensor x = Tensor::from_vector({1, 4, 1, 0}, {4, 1}, kFloat64);
  x.set_requires_grad();
  Tensor gy = Tensor::from_vector({-2, 5}, {2, 1}, kFloat64);
  gy.set_requires_grad();
  const Tensor mn = segment_min(x, ints({0, 3, 4}));
  CHECK(mn.to_vector() == V{1, 0});
  const Tensors gx = grad({mn}, {x}, {gy}, true, true);
  CHECK(gx[0].to_vector() == V{-1, 0, -1, 5});
  const Tensors gg = grad({sum(mul(gx[0], Tensor::from_vector({1, 10, 100, 1000}, {4, 1}, kFloat64)))}, {gy});
  CHECK(gg[0].to_vector() == V{50.5, 1000});
}

TEST_CASE("segment_mean, segment_max and segment_min give an empty segment empty_value (0 for message passing)",
          "[sparse][segment]") {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor d = Tensor::from_vector({-3, -1, 2, -5}, {4, 1}, kFloat64);
  d.set_requires_grad();
  const Tensor off = longs({0, 2, 2, 4});                    // segments [-3, -1], [], [2, -5]
  CHECK(segment_max(d, off).to_vector() == V{-1, -inf, 2});  // torch's values by default
  CHECK(segment_min(d, off).to_vector() == V{-3, inf, -5});
  CHECK(std::isnan(segment_mean(d, off).to_vector()[1]));
  // unlike torch's `initial`, the value takes no part in the other segments: max -1 stays -1
  const Tensor mx = segment_max(d, off, 0.0), mn = segment_min(d, off, 0.0), me = segment_mean(d, off, 0.0);
  CHECK(mx.to_vector() == V{-1, 0, 2});
  CHECK(mn.to_vector() == V{-3, 0, -5});
  CHECK(me.to_vector() == V{-2, 0, -1.5});
  sum(add(add(mx, mn), me)).backward();
  CHECK(d.grad().to_vector() == V{1.5, 1.5, 1.5, 1.5});
  // the gradient of segment_mean's gradient with respect to g is 0 for an empty segment (not NaN)
  Tensor gy = Tensor::from_vector({1, 2, 3}, {3, 1}, kFloat64);
  gy.set_requires_grad();
  const Tensors gx = grad({segment_mean(d, off)}, {d}, {gy}, true, true);
  const Tensors gg = grad({sum(gx[0])}, {gy});
  CHECK(gg[0].to_vector() == V{1, 0, 1});
}

TEST_CASE("sparse_log_softmax is segment_log_softmax over each row's entries, stable for large values",
          "[sparse][segment]") {
  const SparseCsr a = example(true);  // rows {1, 2}, {}, {3, 4}
  const SparseCsr s = sparse_log_softmax(a);
  CHECK(s.pattern().same_object(a.pattern()));
  CHECK(allclose(s.values(), log(sparse_softmax(a).values()), 1e-15, 1e-15));
  // no exp of 1000 formed: finite where the softmax's log would be log(0) = -inf
  const Tensor big = Tensor::from_vector({1000, 0, 1000, 1001}, {4}, kFloat64);
  const V lv = sparse_log_softmax(a.with_values(big)).values().to_vector();
  CHECK(lv[0] == 0);
  CHECK(lv[1] == -1000);
  CHECK(std::abs(lv[2] - (-1 - std::log1p(std::exp(-1.0)))) < 1e-12);
  require_gradcheck([](const Tensors& in) { return sparse_log_softmax(example().with_values(in[0])).values(); },
                    {Tensor::from_vector({0.3, -1.0, 2.0, 0.5}, {4}, kFloat64).set_requires_grad()});
}

TEST_CASE("sampled_addmm is beta * input + alpha * (mat1 @ mat2) on input's pattern", "[sparse]") {
  const SparseCsr a = example();  // entries (0, 1), (0, 2), (2, 0), (2, 2): values 1, 2, 3, 4
  Generator g(4);
  const Tensor x = Tensor::randn({3, 5}, g, kFloat64), y = Tensor::randn({5, 3}, g, kFloat64);
  const SparseCsr r = sampled_addmm(a, x, y, 0.5, -2.0);
  CHECK(r.pattern().same_object(a.pattern()));
  const Tensor nonzero = Tensor::from_vector({0, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 3}, kFloat64);
  CHECK(allclose(r.to_dense(), add(mul(a.to_dense(), 0.5), mul(mul(matmul(x, y), nonzero), -2.0)), 1e-12, 1e-12));
  // defaults beta = alpha = 1; matmul(SparseCsr, Tensor) is spmm
  CHECK(allclose(sampled_addmm(a, x, y).values(), add(a.values(), sddmm(a, x, transpose(y, 0, 1))), 1e-15, 1e-15));
  CHECK(matmul(a, x).to_vector() == spmm(a, x).to_vector());
}

TEST_CASE("sizes beyond memory are an xgrad::Error naming the call, before any allocation", "[sparse][errors]") {
  // torch.sparse_coo_tensor's shapes: std::bad_alloc and std::length_error before the check
  const Tensor one = Tensor::from_vector({0, 0}, {2, 1}, kInt64), v = Tensor::ones({1});
  require_error(
      [&] {
        sparse_coo_tensor(one, v, {std::int64_t{1} << 40, 4});
      },
      {"sparse_coo_tensor", "'size'", "bytes", "memory"});
  require_error([&] { sparse_coo_tensor(one, v, {INT64_MAX, 1}); }, {"sparse_coo_tensor", "'size'", "overflows"});
  // a 1 x 2^62 matrix without entries: its transpose would have 2^62 + 1 row offsets
  const SparseCsr wide = sparse_csr_tensor(longs({0, 0}), longs({}), Tensor::zeros({0}), {1, std::int64_t{1} << 62});
  require_error([&] { (void)wide.t(); }, {"SparseCsr::t", "'cols'", "bytes"});
  require_error([&] { (void)wide.pattern().transposed(); }, {"CsrPattern::transposed", "'cols'", "bytes"});
  CHECK_FALSE(wide.pattern().has_transposed());
  require_error([&] { (void)wide.to_dense(); }, {"to_dense", "'size'", "bytes"});
  const SparseCsr huge = sparse_csr_tensor(longs({0, 0}), longs({}), Tensor::zeros({0}), {1, INT64_MAX});
  require_error([&] { (void)huge.t(); }, {"SparseCsr::t", "'cols'", "overflows"});
}

TEST_CASE("integer values: duplicates summed and to_dense exact, softmaxes refused naming the call",
          "[sparse][errors]") {
  // (0, 1) three times and (1, 0) once, int64 values beyond float32's exact integers (2^24)
  const Tensor idx = Tensor::from_vector({0, 1, 0, 0, 1, 0, 1, 1}, {2, 4}, kInt64);
  const std::int64_t big = (std::int64_t{1} << 40) + 1;
  const Tensor v = Tensor::from_data<std::int64_t>(std::vector<std::int64_t>{big, 7, 1, -2}, {4});
  const SparseCsr a = sparse_coo_tensor(idx, v, {2, 2});
  CHECK(a.dtype() == kInt64);
  CHECK(a.col_indices().to_vector() == V{1, 0});
  const Tensor dense = a.to_dense();
  REQUIRE(dense.dtype() == kInt64);
  const std::int64_t* p = dense.data<std::int64_t>();
  CHECK(std::vector<std::int64_t>(p, p + 4) == std::vector<std::int64_t>{0, big - 1, 7, 0});
  // bool values: the sum of duplicates is their logical or
  const Tensor bools = Tensor::from_vector({1, 0, 1, 0}, {4}, kBool);
  CHECK(sparse_coo_tensor(idx, bools, {2, 2}).to_dense().to_vector() == V{0, 1, 0, 0});
  CHECK(a.t().to_dense().dtype() == kInt64);
  require_error([&] { (void)sparse_softmax(a); }, {"sparse_softmax", "'a.values'", "int64"});
  require_error([&] { (void)sparse_log_softmax(a); }, {"sparse_log_softmax", "'a.values'", "int64"});
  require_error([&] { (void)spmm(a, Tensor::ones({2, 2})); }, {"spmm", "'a.values'", "int64"});
}

TEST_CASE("linear on a sparse input equals the dense linear on to_dense(x), values and gradients", "[sparse][linear]") {
  // bag-of-words rows: 7 documents over a vocabulary of 50, a few words each (one empty document)
  Generator g(9);
  std::vector<std::int64_t> crow{0}, col;
  for (std::int64_t i = 0; i < 7; ++i) {
    if (i != 3)
      for (std::int64_t j = 0; j < 50; ++j)
        if (g.uniform() < 0.1) col.push_back(j);
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto nnz = static_cast<std::int64_t>(col.size());
  for (Dtype dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    Tensor v = Tensor::rand({nnz}, g, dt), w = Tensor::randn({6, 50}, g, dt), b = Tensor::randn({6}, g, dt);
    for (Tensor* t : {&v, &w, &b}) t->set_requires_grad();
    const SparseCsr x = sparse_csr_tensor(longs(crow), longs(col), v, {7, 50});
    const Tensor gy = Tensor::randn({7, 6}, g, dt);
    const Tensor y = linear(x, w, b);
    const Tensor y_dense = linear(x.to_dense(), w, b);
    CHECK(allclose(y, y_dense, tol, tol));
    const Tensors ours = grad({y}, {v, w, b}, {gy});
    const Tensors dense = grad({y_dense}, {v, w, b}, {gy});
    for (std::size_t i = 0; i < 3; ++i) CHECK(allclose(ours[i], dense[i], tol, tol));
    CHECK(allclose(linear(x, w), matmul(x.to_dense(), transpose(w, 0, 1)), tol, tol));  // no bias
  }
}

TEST_CASE("to_dense, t() and the COO constructor's values support create_graph", "[sparse][create_graph]") {
  const Tensor idx = Tensor::from_vector({2, 0, 0, 2, 0, 2, 1, 0}, {2, 4}, kInt64);  // (0, 1) twice
  const auto fn = [&idx](const Tensors& in) {
    const SparseCsr a = sparse_coo_tensor(idx, in[0], {3, 3});
    return mul(a.to_dense(), transpose(a.t().to_dense(), 0, 1));
  };
  Tensor v = Tensor::from_vector({0.5, -1.0, 2.0, 0.25}, {4}, kFloat64);
  v.set_requires_grad();
  require_gradcheck(fn, {v});
  const GradcheckReport report = gradgradcheck(fn, {v});
  INFO(report.message);
  CHECK(report.ok);
}
