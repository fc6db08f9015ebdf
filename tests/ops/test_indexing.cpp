// Tests for ops/indexing.*: semantics the op table cannot express (ties, NaN, torch's spelling of
// max(x, dim), a src larger than its index, negative indices, masks, messages). Gradcheck, PyTorch
// parity, thread equality, degenerate sizes and bad inputs of every op are in the op table.
#include <cmath>
#include <cstring>
#include <limits>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/gradcheck.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;

namespace {
using V = std::vector<double>;
Tensor longs(const std::vector<double>& v, const Shape& shape) { return Tensor::from_vector(v, shape, kInt64); }
const double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("argmax, argmin, max(x, dim) and min(x, dim) take the first position on ties", "[indexing][argmax]") {
  const Tensor x = Tensor::from_vector({1, 3, 3, 0, 0, 2}, {2, 3}, kFloat64);
  CHECK(argmax(x, 1).dtype() == kInt64);
  CHECK(argmax(x, 1).to_vector() == V{1, 2});
  CHECK(argmin(x, 1).to_vector() == V{0, 0});
  CHECK(argmax(x).to_vector() == V{1});
  CHECK(argmax(x, std::nullopt, true).shape() == Shape{1, 1});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 3});
  // NaN counts as the maximum and as the minimum, as in torch
  const Tensor n = Tensor::from_vector({2, kNaN, 1}, {3}, kFloat64);
  CHECK(argmax(n).to_vector() == V{1});
  CHECK(argmin(n).to_vector() == V{1});
  // torch's spelling: an integer dim gives (values, indices); a braced list stays values-only
  Tensor leaf = x.clone_data();
  leaf.set_requires_grad();
  auto [v, i] = max(leaf, 1);
  CHECK(v.to_vector() == V{3, 2});
  CHECK(i.to_vector() == V{1, 2});
  CHECK(max(x, {1}).to_vector() == V{3, 2});
  sum(v).backward();
  CHECK(leaf.grad().to_vector() == V{0, 1, 0, 0, 0, 1});  // the first of the tied 3s
  auto [mv, mi] = min(x, 0, true);
  CHECK(mv.shape() == Shape{1, 3});
  CHECK(mi.to_vector() == V{1, 1, 1});
  test::require_error([] { argmax(Tensor::zeros({2, 0}), 1); }, {"argmax", "size 0", "(2, 0)"});
}

TEST_CASE("sort is stable, puts NaN last, and scatters the gradient back", "[indexing][sort]") {
  Tensor x = Tensor::from_vector({2, kNaN, 1, 2}, {4}, kFloat64);
  auto [d, di] = sort(x, -1, true);
  CHECK(di.to_vector() == V{1, 0, 3, 2});  // torch: NaN first when descending, ties in order
  auto [a, ai] = sort(x);
  CHECK(ai.to_vector() == V{2, 0, 3, 1});
  Tensor y = Tensor::from_vector({3, 1, 2, 1}, {4}, kFloat64);
  y.set_requires_grad();
  auto [v, i] = topk(y, 3, 0, false);
  CHECK(v.to_vector() == V{1, 1, 2});
  CHECK(i.to_vector() == V{1, 3, 2});
  v.backward(Tensor::from_vector({10, 20, 30}, {3}, kFloat64));
  CHECK(y.grad().to_vector() == V{0, 10, 30, 20});
  CHECK(std::get<0>(topk(y, 0)).shape() == Shape{0});
  test::require_error([&] { topk(y, 5); }, {"topk", "k = 5", "size 4"});
}

TEST_CASE("scatter_add and index_add add repeated indices in order and reach x and src", "[indexing][scatter]") {
  Tensor x = Tensor::zeros({2, 2}, kFloat64);
  Tensor src = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, kFloat64);  // larger than index
  x.set_requires_grad();
  src.set_requires_grad();
  const Tensor idx = longs({1, 0, 1, 1}, {2, 2});
  Tensor y = scatter_add(x, 0, idx, src);
  CHECK(y.to_vector() == V{0, 2, 5, 5});  // y[1][0] = 1 + 4 (a repeated index), y[1][1] = 5
  y.backward(Tensor::from_vector({1, 2, 3, 4}, {2, 2}, kFloat64));
  CHECK(x.grad().to_vector() == V{1, 2, 3, 4});
  CHECK(src.grad().to_vector() == V{3, 2, 0, 3, 4, 0, 0, 0, 0});  // the unused part of src gets 0
  Tensor z = index_add(Tensor::zeros({3}, kFloat64), 0, longs({2, 0, 2}, {3}), Tensor::of({1, 2, 4}, kFloat64));
  CHECK(z.to_vector() == V{2, 0, 5});
  test::require_error(
      [&] {
        scatter_add(x.detach(), 0, longs({2, 0}, {1, 2}), src);
      },
      {"scatter_add", "index 2", "element 0", "size 2"});
}

TEST_CASE("scatter_reduce matches torch along dim 1, with a 1-d index, and at infinities and NaN",
          "[indexing][scatter_reduce][parity]") {
  const double inf = std::numeric_limits<double>::infinity();
  test::ParityBatch batch("scatter_reduce");
  batch.set_equal_nonfinite();
  // along dim 1 (x (2, 4), index and src (2, 5)), ties, a zero, -inf and NaN in src
  const V x{1, 0, 2, -inf, 3, 3, 0, 1};
  const V src{3, 0, 2, 2, -1, 3, kNaN, 0, 4, 0};
  const V idx{1, 1, 0, 0, 3, 0, 2, 2, 2, 0};
  // a 1-d index (the row-scatter path of sum and mean): x (3,), src and index (5,)
  const V x1{2, -1, 0.5}, src1{1, 2, 3, 4, 5}, idx1{2, 0, 2, 2, 1};
  for (const char* r : {"sum", "prod", "mean", "amax", "amin"})
    for (bool self : {true, false})
      for (Dtype dt : {kFloat32, kFloat64}) {
        const std::string reduce = r, flag = self ? "True" : "False";
        const Tensor index = longs(idx, {2, 5}), index1 = longs(idx1, {5});
        batch.add(fmt::format("dim1_{}_{}_{}", r, flag, dtype_name(dt)),
                  fmt::format(
                      "out = a.scatter_reduce(1, torch.tensor([{}]).long().reshape(2, 5), src, '{}', include_self={})",
                      fmt::join(idx, ", "), r, flag),
                  {{"a", Tensor::from_vector(x, {2, 4}, dt)}, {"src", Tensor::from_vector(src, {2, 5}, dt)}},
                  [=](const Tensors& in) { return scatter_reduce(in[0], 1, index, in[1], reduce, self); });
        batch.add(fmt::format("flat_{}_{}_{}", r, flag, dtype_name(dt)),
                  fmt::format("out = a.scatter_reduce(0, torch.tensor([{}]).long(), src, '{}', include_self={})",
                              fmt::join(idx1, ", "), r, flag),
                  {{"a", Tensor::from_vector(x1, {3}, dt)}, {"src", Tensor::from_vector(src1, {5}, dt)}},
                  [=](const Tensors& in) { return scatter_reduce(in[0], 0, index1, in[1], reduce, self); });
      }
  batch.run();
}

TEST_CASE("scatter_reduce: a src larger than its index, 0-d tensors, and prod's second derivative at zeros",
          "[indexing][scatter_reduce]") {
  // src (3, 3) larger than the index (2, 2): the unused part of src gets 0 (torch 1.13's backward
  // fails there)
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, kFloat64),
         src = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, kFloat64);
  x.set_requires_grad();
  src.set_requires_grad();
  const Tensor idx = longs({1, 0, 1, 1}, {2, 2});
  Tensor y = scatter_reduce(x, 0, idx, src, "amax", false);
  CHECK(y.to_vector() == V{1, 2, 4, 5});  // y[0][0] = x (not reached); y[1][0] = max(1, 4); y[1][1] = 5
  y.backward(Tensor::from_vector({1, 2, 3, 4}, {2, 2}, kFloat64));
  CHECK(x.grad().to_vector() == V{1, 0, 0, 0});
  // src[0][1] = 2 shares its gradient with x[0][1] = 2, equal to the result although include_self is
  // false: torch 1.13 counts self wherever it equals the result
  CHECK(src.grad().to_vector() == V{0, 1, 0, 3, 4, 0, 0, 0, 0});
  // 0-d tensors
  const Tensor s0 = scatter_reduce(Tensor::scalar(2.0, kFloat64), 0, Tensor::scalar(0.0, kInt64),
                                   Tensor::scalar(3.0, kFloat64), "prod");
  CHECK(s0.shape() == Shape{});
  CHECK(s0.item() == 6.0);
  // prod at zeros: one zero of src per element (and zeros of x) is differentiable twice
  const Tensor pidx = longs({0, 1, 0, 1, 0, 1}, {3, 2});
  const auto prod_fn = [pidx](const Tensors& in) { return scatter_reduce(in[0], 0, pidx, in[1], "prod"); };
  Tensor px = Tensor::from_vector({0.5, 0, -1.5, 2}, {2, 2}, kFloat64),
         ps = Tensor::from_vector({0, 1.5, 2, 0.5, -0.75, 1.25}, {3, 2}, kFloat64);
  px.set_requires_grad();
  ps.set_requires_grad();
  test::require_gradcheck(prod_fn, {px, ps});
  const GradcheckReport report = gradgradcheck(prod_fn, {px, ps});
  INFO(report.message);
  CHECK(report.ok);
  // two zeros of src reaching one element: first order works, the second derivative is refused
  Tensor qs = Tensor::from_vector({0, 1.5, 0, 0.5, -0.75, 1.25}, {3, 2}, kFloat64);
  qs.set_requires_grad();
  const Tensor q = prod_fn({px, qs});
  const Tensors gq = grad({q}, {qs}, {Tensor::ones({2, 2}, kFloat64)}, true, true);
  CHECK(gq[0].to_vector() == V{0, 1.25, 0, 3.75, 0, 1.5});  // column 1: y[1][1] = 1.875 over each factor
  test::require_error([&] { grad({sum(gq[0])}, {qs}); }, {"scatter_reduce", "prod", "2 or more zeros"});
}

TEST_CASE("gather, take_along_dim and index follow torch's shapes and index rules", "[indexing][gather]") {
  const Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, kFloat64);
  CHECK(gather(x, 1, longs({2, 0, 1, 1}, {2, 2})).to_vector() == V{2, 0, 4, 4});
  CHECK(take_along_dim(x, longs({2, 0}, {1, 2}), 1).to_vector() == V{2, 0, 5, 3});  // broadcast over rows
  CHECK(take_along_dim(x, longs({5, 0}, {2})).to_vector() == V{5, 0});
  CHECK(index(x, longs({-1, 0}, {2})).to_vector() == V{3, 4, 5, 0, 1, 2});  // x[idx] wraps negatives
  CHECK(index(x, longs({1}, {1, 1})).shape() == Shape{1, 1, 3});
  const Tensor rows = Tensor::from_vector({0, 1}, {2}, kFloat64).to(kBool);
  CHECK(index(x, rows).to_vector() == V{3, 4, 5});
  CHECK(index(x, x.to(kBool)).to_vector() == V{1, 2, 3, 4, 5});
  CHECK(index(x, Tensor::scalar(1.0, kFloat64).to(kBool)).shape() == Shape{1, 2, 3});  // x[True]
  CHECK(index_select(x, 1, longs({2, 2}, {2})).to_vector() == V{2, 2, 5, 5});
  CHECK(index_select(x, 1, {0}).to_vector() == V{0, 3});  // a braced list still calls the vector overload
  test::require_error(
      [&] {
        gather(x, 1, longs({0, 3}, {1, 2}));
      },
      {"gather", "index 3", "element 1", "'index'", "dim 1 of size 3", "(2, 3)"});
  test::require_error([&] { index(x, longs({2}, {1})); }, {"index", "index 2", "size 2"});
  CHECK(masked_select(x, x.to(kBool)).to_vector() == V{1, 2, 3, 4, 5});  // a bool mask (no overload needed)
  // copy-type shape ops take integer tensors
  CHECK(flip(longs({1, 2, 3}, {3}), {0}).to_vector() == V{3, 2, 1});
  CHECK(pad(longs({1, 2}, {2}), {1, 0}, "constant", 7).to_vector() == V{7, 1, 2});
}

TEST_CASE("nonzero and one_hot", "[indexing][nonzero]") {
  const Tensor x = Tensor::from_vector({0, 1, 0, 2, 3, 0}, {2, 3}, kFloat64);
  const Tensor nz = nonzero(x);
  CHECK(nz.dtype() == kInt64);
  CHECK(nz.shape() == Shape{3, 2});
  CHECK(nz.to_vector() == V{0, 1, 1, 0, 1, 1});
  CHECK(nonzero(Tensor::scalar(0.0, kFloat64)).shape() == Shape{0, 0});
  const Tensor oh = one_hot(longs({2, 0}, {2}));
  CHECK(oh.dtype() == kInt64);
  CHECK(oh.to_vector() == V{0, 0, 1, 1, 0, 0});
  CHECK(one_hot(longs({}, {0}), 4).shape() == Shape{0, 4});
  // The inferred class count is the largest label + 1: checked (it wrapped to -2^63 for 2^63 - 1).
  const std::vector<std::int64_t> top = {std::numeric_limits<std::int64_t>::max()};
  test::require_error([&] { one_hot(Tensor::from_data<std::int64_t>(std::span<const std::int64_t>(top), {1})); },
                      {"one_hot", "'labels'", "overflows"});
  test::require_error([] { one_hot(longs({1099511627776.0}, {1})); }, {"bytes"});
}

TEST_CASE("scatter-type sums are bit-identical with 1 and 2 threads", "[indexing][threads]") {
  const std::int64_t n = 50000;
  Tensor idx = Tensor::zeros({n}, kInt64);
  for (std::int64_t i = 0; i < n; ++i) idx.data<std::int64_t>()[i] = (i * 7919) % 97;  // many repeats
  test::require_thread_deterministic([&] {
    Generator gen(7);
    Tensor x = test::randn_leaf({97}, gen);
    Tensor src = test::randn_leaf({n}, gen);
    const Tensor w = Tensor::randn({n}, gen, kFloat64);
    const Tensor y = scatter_add(x, 0, idx, src);
    add(sum(mul(y, y)), sum(mul(index(src, idx), w))).backward();
    return Tensors{y.detach(), x.grad(), src.grad()};
  });
}

// The row scatter (Note [Row scatter]) and the scatter along a dim (Note [Index along a dim]) sum
// each destination in increasing source order at any thread count: the same bits as the plain
// serial loop, on samples large enough for their parallel paths (wide rows: tasks own row ranges;
// narrow rows: the inverse; a scatter with many leading positions: tasks own them).
TEST_CASE("index ops add repeated rows in source order, bit for bit, on their parallel paths", "[indexing][threads]") {
  const std::int64_t n = 300, e = 40000;  // e * inner > kParallelGrain: parallel paths
  Generator gen(11);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(e));
  for (std::int64_t j = 0; j < e; ++j)  // skewed: row 0 takes about a tenth of them
    rows[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(n * std::pow(gen.uniform(), 3.0)) % n;
  const Tensor idx = Tensor::from_data(std::span<const std::int64_t>(rows), {e});
  std::vector<std::int32_t> rows32(rows.begin(), rows.end());
  const Tensor idx32 = Tensor::from_data(std::span<const std::int32_t>(rows32), {e});
  for (const std::int64_t inner : {1, 3, 64}) {
    CAPTURE(inner);
    Tensor bcast = Tensor::empty({e, inner}, kInt64);  // the row-broadcast index of scatter_add
    for (std::int64_t k = 0; k < e * inner; ++k)
      bcast.data<std::int64_t>()[k] = rows[static_cast<std::size_t>(k / inner)];
    const Tensor x = Tensor::randn({n, inner}, gen, kFloat32), src = Tensor::randn({e, inner}, gen, kFloat32);
    Tensor want = x.clone_data();  // the serial loop
    for (std::int64_t j = 0; j < e; ++j)
      for (std::int64_t i = 0; i < inner; ++i)
        want.data<float>()[rows[static_cast<std::size_t>(j)] * inner + i] += src.data<float>()[j * inner + i];
    for (const int threads : {1, 2}) {
      CAPTURE(threads);
      with_num_threads(threads, [&] {
        CHECK(index_add(x, 0, idx, src).to_vector() == want.to_vector());
        CHECK(index_add(x, 0, idx32, src).to_vector() == want.to_vector());
        // index_select's backward into zeros, and scatter_add with the row-broadcast index
        Tensor xs = x.detach().set_requires_grad();
        index_select(xs, 0, idx32).backward(src);
        const Tensor zeros = Tensor::zeros({n, inner}, kFloat32);
        const Tensor added = index_add(zeros, 0, idx, src);
        CHECK(xs.grad().to_vector() == added.to_vector());
        CHECK(scatter_add(zeros, 0, bcast, src).to_vector() == added.to_vector());
      });
    }
  }
  // dim 1 of a tall x: a scatter over many leading positions (parallel over them), and its gather
  const std::int64_t r = 4000, m = 40, c = 7;
  Tensor cols = Tensor::empty({r, m}, kInt64);
  for (std::int64_t k = 0; k < r * m; ++k) cols.data<std::int64_t>()[k] = (k * 31 + k / 13) % c;
  test::require_thread_deterministic([&] {
    Generator g(5);
    Tensor x = test::randn_leaf({r, c}, g), src = test::randn_leaf({r, m}, g);
    const Tensor y = scatter_add(x, 1, cols, src);
    const Tensor w = Tensor::randn({r, m}, g, kFloat64);
    add(sum(mul(y, y)), sum(mul(gather(y, 1, cols), w))).backward();
    return Tensors{y.detach(), x.grad(), src.grad()};
  });
}

TEST_CASE("gather and scatter_add check their indices in the kernel and name the first bad one", "[indexing][errors]") {
  const std::int64_t e = 30000, f = 8, n = 50;
  Tensor idx = Tensor::zeros({e, f}, kInt64);
  idx.data<std::int64_t>()[e * f - 3] = -1;  // two bad indices: the first in position order is named
  idx.data<std::int64_t>()[12345] = n;
  const Tensor x = Tensor::zeros({n, f}, kFloat64), src = Tensor::zeros({e, f}, kFloat64);
  for (const int threads : {1, 2}) {
    with_num_threads(threads, [&] {
      test::require_error([&] { gather(x, 0, idx); }, {"gather", "index 50", "element 12345", "size 50", "(50, 8)"});
      test::require_error([&] { scatter_add(x, 0, idx, src); },
                          {"scatter_add", "index 50", "element 12345", "size 50", "(50, 8)"});
    });
  }
}

TEST_CASE("index_select checks a long index list across threads and names the first bad index", "[indexing][errors]") {
  const Tensor x = Tensor::zeros({10, 2});
  std::vector<std::int64_t> idx(100000, 9);  // past kParallelRangeCheckMin: the check runs in chunks
  idx[99998] = 10;
  idx[70000] = -11;
  for (const int threads : {1, 2}) {
    with_num_threads(threads, [&] {
      test::require_error([&] { index_select(x, 0, idx); }, {"index_select", "index -11", "element 70000", "size 10"});
      test::require_error([&] { index_select(x, 0, Tensor::from_data(std::span<const std::int64_t>(idx), {100000})); },
                          {"index_select", "index -11", "element 70000", "size 10"});
    });
  }
}

TEST_CASE("index_select refuses a negative index alike from a list and from a tensor, as torch", "[indexing][errors]") {
  // torch.index_select refuses negative indices ("index out of range in self"); both overloads do,
  // with the same message (the list overload used to wrap them).
  const Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, kFloat64);
  const auto message = [](const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const std::int64_t dim : {1, -1}) {
    INFO("dim " << dim);
    const std::string from_list = message([&] { index_select(x, dim, {0, -1}); });
    CHECK(from_list ==
          "index_select: index -1 (element 1 of 'index') is out of range for dim 1 of size 3 (x has shape (2, 3))");
    CHECK(message([&] { index_select(x, dim, longs({0, -1}, {2})); }) == from_list);
    CHECK(message([&] { index_select(x, dim, longs({0, -1}, {2}).to(kInt32)); }) == from_list);
  }
  CHECK(index_select(x, 1, {2, 0}).to_vector() == V{2, 0, 5, 3});  // in range: both overloads take it
  CHECK(index_select(x, 1, longs({2, 0}, {2})).to_vector() == V{2, 0, 5, 3});
}

TEST_CASE("index_select copies the rows of an output larger than the caches (streaming stores)", "[indexing]") {
  const std::int64_t n = 1000, f = 36, e = 40000;  // 11.5 MB of float64 output, rows of 288 bytes
  Generator gen(3);
  const Tensor x = Tensor::randn({n, f}, gen, kFloat64);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(e));
  for (std::int64_t j = 0; j < e; ++j) rows[static_cast<std::size_t>(j)] = (j * 7919 + 13) % n;
  for (const int threads : {1, 2}) {
    with_num_threads(threads, [&] {
      const Tensor y = index_select(x, 0, rows);
      bool same = true;
      for (std::int64_t j = 0; j < e; ++j)
        same = same && std::memcmp(y.data<double>() + j * f, x.data<double>() + rows[static_cast<std::size_t>(j)] * f,
                                   static_cast<std::size_t>(f) * sizeof(double)) == 0;
      CHECK(same);
    });
  }
}

TEST_CASE("index_add, scatter_add and gather on 0-d tensors", "[indexing][scatter]") {
  Tensor x = Tensor::scalar(1.0, kFloat64).set_requires_grad();
  Tensor src = Tensor::of({2, 3}, kFloat64).set_requires_grad();
  Tensor y = index_add(x, 0, longs({0, 0}, {2}), src);
  CHECK(y.shape() == Shape{});
  CHECK(y.item<double>() == 6);
  y.backward();
  CHECK(x.grad().item<double>() == 1);
  CHECK(src.grad().to_vector() == V{1, 1});
  Tensor s0 = Tensor::scalar(4.0, kFloat64).set_requires_grad();
  Tensor z = scatter_add(Tensor::scalar(1.0, kFloat64), 0, Tensor::scalar(0.0, kFloat64).to(kInt64), s0);
  CHECK(z.shape() == Shape{});
  CHECK(z.item<double>() == 5);
  z.backward();
  CHECK(s0.grad().item<double>() == 1);
  CHECK(gather(x, 0, longs({0, 0, 0}, {3})).to_vector() == V{1, 1, 1});
}

TEST_CASE("one_hot: a num_classes too large for memory is refused naming it", "[indexing][errors]") {
  const Tensor labels = Tensor::zeros({3}, kInt64);
  for (const std::int64_t c : {std::int64_t{1} << 45, std::int64_t{1} << 62})
    test::require_error([&] { (void)one_hot(labels, c); }, {"one_hot", "'num_classes'"});
}
