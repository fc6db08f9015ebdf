// Tests for ops/shape_ops.*: gradcheck, views, torch parity, thread determinism, bad inputs.
#include <algorithm>
#include <limits>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
// One unary shape op on a given input shape, with its torch equivalent.
struct UnaryCase {
  const char* name;
  Shape shape;
  std::function<Tensor(const Tensor&)> fn;
  const char* torch;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"reshape",
       {2, 3, 4},
       [](const Tensor& x) {
         return reshape(x, {4, -1});
       },
       "out = x.reshape(4, -1)"},
      {"reshape_vec",
       {6},
       [](const Tensor& x) {
         return reshape(x, {3, 2});
       },
       "out = x.reshape(3, 2)"},
      {"reshape_to_scalar", {1, 1}, [](const Tensor& x) { return reshape(x, {}); }, "out = x.reshape(())"},
      {"reshape_from_scalar",
       {},
       [](const Tensor& x) {
         return reshape(x, {1, -1});
       },
       "out = x.reshape(1, -1)"},
      {"flatten", {2, 3, 4}, [](const Tensor& x) { return flatten(x); }, "out = torch.flatten(x)"},
      {"flatten_mid", {2, 3, 4, 5}, [](const Tensor& x) { return flatten(x, 1, -2); }, "out = torch.flatten(x, 1, -2)"},
      {"flatten_scalar", {}, [](const Tensor& x) { return flatten(x); }, "out = torch.flatten(x)"},
      {"squeeze_axis", {2, 1, 3}, [](const Tensor& x) { return squeeze(x, -2); }, "out = x.squeeze(-2)"},
      {"squeeze_all", {1, 2, 1, 3, 1}, [](const Tensor& x) { return squeeze(x); }, "out = x.squeeze()"},
      {"squeeze_not_one", {2, 3}, [](const Tensor& x) { return squeeze(x, 1); }, "out = x.squeeze(1)"},
      {"unsqueeze_front", {3}, [](const Tensor& x) { return unsqueeze(x, 0); }, "out = x.unsqueeze(0)"},
      {"unsqueeze_back", {2, 3}, [](const Tensor& x) { return unsqueeze(x, -1); }, "out = x.unsqueeze(-1)"},
      {"unsqueeze_scalar", {}, [](const Tensor& x) { return unsqueeze(x, 0); }, "out = x.unsqueeze(0)"},
      {"permute",
       {2, 3, 4},
       [](const Tensor& x) {
         return permute(x, {2, 0, 1});
       },
       "out = x.permute(2, 0, 1).contiguous()"},
      {"permute_neg",
       {2, 3, 4, 5},
       [](const Tensor& x) {
         return permute(x, {-1, 1, 0, -2});
       },
       "out = x.permute(3, 1, 0, 2).contiguous()"},
      {"permute_size1",
       {3, 1, 4},
       [](const Tensor& x) {
         return permute(x, {1, 2, 0});
       },
       "out = x.permute(1, 2, 0).contiguous()"},
      {"permute_scalar", {}, [](const Tensor& x) { return permute(x, {}); }, "out = x.permute([])"},
      {"permute_ones",
       {1, 1},
       [](const Tensor& x) {
         return permute(x, {1, 0});
       },
       "out = x.permute(1, 0)"},
      {"transpose", {3, 5}, [](const Tensor& x) { return transpose(x, 0, 1); }, "out = x.transpose(0, 1).contiguous()"},
      {"transpose_neg",
       {2, 3, 4},
       [](const Tensor& x) { return transpose(x, -1, 0); },
       "out = x.transpose(-1, 0).contiguous()"},
      {"transpose_same",
       {2, 3},
       [](const Tensor& x) { return transpose(x, 1, -1); },
       "out = x.transpose(1, -1).contiguous()"},
      {"slice", {4, 7}, [](const Tensor& x) { return slice(x, 1, 1, -1, 2); }, "out = x[:, 1:-1:2]"},
      {"slice_clip", {9, 2}, [](const Tensor& x) { return slice(x, 0, -100, 100, 3); }, "out = x[-100:100:3]"},
      {"slice_neg_axis", {2, 3, 6}, [](const Tensor& x) { return slice(x, -1, -4, 5); }, "out = x[..., -4:5]"},
      {"slice_empty", {5, 3}, [](const Tensor& x) { return slice(x, 0, 4, 2); }, "out = x[4:2]"},
      {"slice_vec", {8}, [](const Tensor& x) { return slice(x, 0, 0, 8, 3); }, "out = x[0:8:3]"},
      {"index_select",
       {5, 3},
       [](const Tensor& x) {
         return index_select(x, 0, {4, 0, 2});
       },
       "out = torch.index_select(x, 0, torch.tensor([4, 0, 2]))"},
      {"index_select_repeat",
       {3, 4, 2},
       [](const Tensor& x) {
         return index_select(x, 1, {1, 3, 1, 1, 3});
       },
       "out = torch.index_select(x, 1, torch.tensor([1, 3, 1, 1, 3]))"},
      {"index_select_vec",
       {6},
       [](const Tensor& x) {
         return index_select(x, -1, {5, 5, 0});
       },
       "out = torch.index_select(x, 0, torch.tensor([5, 5, 0]))"},
      {"expand",
       {3, 1},
       [](const Tensor& x) {
         return expand(x, {2, 3, 4});
       },
       "out = x.expand(2, 3, 4).contiguous()"},
      {"expand_keep",
       {1, 4},
       [](const Tensor& x) {
         return expand(x, {3, -1});
       },
       "out = x.expand(3, -1).contiguous()"},
      {"expand_scalar",
       {},
       [](const Tensor& x) {
         return broadcast_to(x, {2, 2});
       },
       "out = x.expand(2, 2).contiguous()"},
      {"expand_same",
       {2, 3},
       [](const Tensor& x) {
         return expand(x, {2, 3});
       },
       "out = x.expand(2, 3).contiguous()"},
  };
}

// List ops: shapes of the inputs, the op and the torch code (inputs bound as a, b, c).
struct ListCase {
  const char* name;
  std::vector<Shape> shapes;
  std::function<Tensor(const Tensors&)> fn;
  const char* torch;
};

std::vector<ListCase> list_cases() {
  return {
      {"concat0",
       {{2, 3}, {1, 3}, {4, 3}},
       [](const Tensors& xs) { return concat(xs, 0); },
       "out = torch.cat([a, b, c], 0)"},
      {"concat_neg",
       {{2, 1, 4}, {2, 3, 4}},
       [](const Tensors& xs) { return concat(xs, -2); },
       "out = torch.cat([a, b], -2)"},
      {"concat_last",
       {{3, 2}, {3, 5}, {3, 1}},
       [](const Tensors& xs) { return concat(xs, 1); },
       "out = torch.cat([a, b, c], 1)"},
      {"concat_vec", {{3}, {4}}, [](const Tensors& xs) { return concat(xs); }, "out = torch.cat([a, b])"},
      {"concat_one", {{2, 3}}, [](const Tensors& xs) { return concat(xs, 1); }, "out = torch.cat([a], 1)"},
      {"stack0", {{2, 3}, {2, 3}, {2, 3}}, [](const Tensors& xs) { return stack(xs); }, "out = torch.stack([a, b, c])"},
      {"stack_mid", {{2, 3}, {2, 3}}, [](const Tensors& xs) { return stack(xs, 1); }, "out = torch.stack([a, b], 1)"},
      {"stack_neg", {{2, 3}, {2, 3}}, [](const Tensors& xs) { return stack(xs, -1); }, "out = torch.stack([a, b], -1)"},
      {"stack_scalars", {{}, {}, {}}, [](const Tensors& xs) { return stack(xs); }, "out = torch.stack([a, b, c])"},
  };
}

const char* kNames[] = {"a", "b", "c"};
}  // namespace

TEST_CASE("shape ops: gradcheck", "[shape_ops]") {
  Generator gen(21);
  for (const auto& c : unary_cases()) {
    INFO(c.name << " on " << shape_str(c.shape));
    Tensor x = test::randn_leaf(c.shape, gen);
    test::require_gradcheck([&](const Tensors& in) { return c.fn(in[0]); }, {x});
  }
  for (const auto& c : list_cases()) {
    INFO(c.name);
    Tensors xs;
    for (const auto& s : c.shapes) xs.push_back(test::randn_leaf(s, gen));
    test::require_gradcheck(c.fn, xs);
  }
  // Composition: gradients flow through a view into a copy op and back.
  Tensor x = test::randn_leaf({2, 3, 4}, gen);
  test::require_gradcheck(
      [](const Tensors& in) {
        Tensor t = transpose(reshape(in[0], {6, 4}), 0, 1);
        return concat({slice(t, 0, 1, 4), index_select(t, 0, {0, 0})}, 0);
      },
      {x});
}

TEST_CASE("shape ops: views share storage, copies do not", "[shape_ops]") {
  Generator gen(22);
  Tensor x = Tensor::randn({2, 3, 1}, gen);
  CHECK(reshape(x, {3, 2}).raw_data() == x.raw_data());
  CHECK(flatten(x).raw_data() == x.raw_data());
  CHECK(squeeze(x).raw_data() == x.raw_data());
  CHECK(squeeze(x, 2).raw_data() == x.raw_data());
  CHECK(unsqueeze(x, 0).raw_data() == x.raw_data());
  CHECK(reshape(x, {6}).shape() == Shape{6});
  CHECK(permute(x, {0, 1, 2}).raw_data() != x.raw_data());
  CHECK(slice(x, 0, 0, 2).raw_data() != x.raw_data());
  CHECK(expand(x, {2, 3, 1}).raw_data() != x.raw_data());
  // A view with history: backward into the original leaf.
  Tensor y = Tensor::randn({2, 3}, gen).set_requires_grad();
  Tensor v = reshape(y, {3, 2});
  CHECK(v.grad_fn() != nullptr);
  v.backward(Tensor::ones({3, 2}));
  CHECK(bit_equal(y.grad(), Tensor::ones({2, 3})));
}

TEST_CASE("shape ops: values and gradients match PyTorch", "[shape_ops][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("shape_ops_") + std::string(dtype_name(dt)));
    Generator gen(23);
    for (const auto& c : unary_cases()) {
      Tensor x = test::randn_leaf(c.shape, gen, dt);
      batch.add(c.name, c.torch, {{"x", x}}, [&](const Tensors& in) { return c.fn(in[0]); });
    }
    for (const auto& c : list_cases()) {
      std::vector<ParityBatch::Input> inputs;
      for (std::size_t i = 0; i < c.shapes.size(); ++i)
        inputs.push_back({kNames[i], test::randn_leaf(c.shapes[i], gen, dt)});
      batch.add(c.name, c.torch, inputs, c.fn);
    }
    // Larger inputs: the tiled permute and parallel copies.
    Tensor big = test::randn_leaf({40, 70, 33}, gen, dt);
    batch.add("permute_big", "out = x.permute(2, 0, 1).contiguous()", {{"x", big}}, [](const Tensors& in) {
      return permute(in[0], {2, 0, 1});
    });
    batch.add("transpose_big", "out = x.transpose(0, 2).contiguous()", {{"x", big}},
              [](const Tensors& in) { return transpose(in[0], 0, 2); });
    batch.add("index_select_big", "out = torch.index_select(x, 0, torch.tensor([3, 3, 39, 0, 3]))", {{"x", big}},
              [](const Tensors& in) {
                return index_select(in[0], 0, {3, 3, 39, 0, 3});
              });
    // Only one list input requires grad.
    Tensor a = test::randn_leaf({2, 3}, gen, dt);
    Tensor b = test::randn_leaf({2, 3}, gen, dt);
    batch.add("concat_partial", "out = torch.cat([a, b], 1)", {{"a", a, false}, {"b", b}},
              [](const Tensors& in) { return concat(in, 1); });
    batch.add("stack_partial", "out = torch.stack([a, b], 2)", {{"a", a}, {"b", b, false}},
              [](const Tensors& in) { return stack(in, 2); });
    batch.run();
  }
}

TEST_CASE("shape ops: bit-identical with 1 and 2 threads", "[shape_ops][threads]") {
  Generator gen(24);
  Tensor x0 = Tensor::randn({96, 130, 70}, gen, kFloat32);
  Tensor y0 = Tensor::randn({96, 40, 70}, gen, kFloat32);
  Tensor r0 = Tensor::randn({1, 130, 70}, gen, kFloat32);
  std::vector<std::int64_t> idx;
  for (int i = 0; i < 300; ++i) idx.push_back((i * 37) % 96);  // every row several times
  test::require_thread_deterministic([&] {
    Tensor x = x0.clone_data().set_requires_grad();
    Tensor y = y0.clone_data().set_requires_grad();
    Tensor r = r0.clone_data().set_requires_grad();
    Tensor p = permute(x, {2, 0, 1});
    Tensor t = transpose(x, 0, 1);
    Tensor s = slice(x, 1, 3, -2, 2);
    Tensor sel = index_select(x, 0, idx);
    Tensor sel_inner = index_select(x, 2, {5, 5, 1, 69});
    Tensor cat = concat({x, y}, 1);
    Tensor st = stack({x, x}, 1);
    Tensor ex = expand(r, {96, 130, 70});
    Generator sg(25);
    auto seed = [&](const Tensor& v) { return Tensor::randn(v.shape(), sg, kFloat32); };
    run_backward({p, t, s, sel, sel_inner, cat, st, ex},
                 {seed(p), seed(t), seed(s), seed(sel), seed(sel_inner), seed(cat), seed(st), seed(ex)});
    return Tensors{p, t, s, sel, cat, st, ex, x.grad(), y.grad(), r.grad()};
  });
}

// Row copies (ops/shape_ops.cpp): short rows of whole 32-byte vectors take an inlined copy with a
// prefetch 8 rows ahead at 2 threads, streaming stores at 1, memcpy otherwise; each must give the rows.
TEST_CASE("index_select: every row-copy path gives the selected rows, at 1 and 2 threads", "[shape_ops][threads]") {
  Generator gen(26);
  const int default_threads = get_num_threads();
  for (const auto& [cols, dtype] : std::vector<std::pair<std::int64_t, Dtype>>{
           {24, kFloat32}, {8, kFloat64}, {256, kFloat32}, {5, kFloat32}, {300, kFloat32}}) {
    INFO(cols << " columns of " << dtype_name(dtype));
    const std::int64_t n = 97;
    const Tensor x = Tensor::randn({n, cols}, gen, dtype);
    std::vector<std::int64_t> idx;
    for (std::int64_t i = 0; i < 40000; ++i) idx.push_back((i * 7919 + i / 3) % n);
    const std::vector<double> xv = x.to_vector();
    std::vector<double> want;
    for (const std::int64_t r : idx) want.insert(want.end(), xv.begin() + r * cols, xv.begin() + (r + 1) * cols);
    for (const int threads : {1, 2}) {
      INFO(threads << " threads");
      set_num_threads(threads);
      const std::vector<double> got = index_select(x, 0, idx).to_vector();
      REQUIRE(got.size() == want.size());
      const auto bad = std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
      CHECK(bad == static_cast<std::ptrdiff_t>(got.size()));  // the first wrong element, if any
    }
    set_num_threads(default_threads);
  }
}

TEST_CASE("shape ops: bad inputs raise xgrad::Error naming op and shapes", "[shape_ops][errors]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  test::require_error([&] { reshape(x, {5, 5}); }, {"reshape", "(2, 3, 4)", "(5, 5)"});
  test::require_error([&] { reshape(x, {-1, -1}); }, {"reshape", "more than one -1", "(2, 3, 4)"});
  test::require_error([&] { reshape(x, {5, -1}); }, {"reshape", "(2, 3, 4)", "(5, -1)"});
  test::require_error([&] { reshape(x, {-2, -12}); }, {"reshape", "negative"});
  test::require_error([&] { flatten(x, 2, 1); }, {"flatten", "(2, 3, 4)"});
  test::require_error([&] { flatten(x, 0, 3); }, {"flatten", "axis 3", "(2, 3, 4)"});
  test::require_error([&] { squeeze(x, 3); }, {"squeeze", "axis 3", "(2, 3, 4)"});
  test::require_error([&] { unsqueeze(x, 4); }, {"unsqueeze", "axis 4", "(2, 3, 4)"});
  test::require_error([&] { unsqueeze(x, -5); }, {"unsqueeze", "axis -5", "(2, 3, 4)"});
  test::require_error([&] { permute(x, {0, 1}); }, {"permute", "[0, 1]", "(2, 3, 4)"});
  test::require_error([&] { permute(x, {0, 1, 1}); }, {"permute", "[0, 1, 1]", "not a permutation", "(2, 3, 4)"});
  test::require_error([&] { permute(x, {0, 1, 3}); }, {"permute", "[0, 1, 3]", "not a permutation"});
  test::require_error([&] { permute(x, {0, -1, 2}); }, {"permute", "[0, -1, 2]", "repeats"});
  test::require_error([&] { transpose(x, 0, 3); }, {"transpose", "axis 3", "(2, 3, 4)"});
  test::require_error([&] { slice(x, 3, 0, 1); }, {"slice", "axis 3", "(2, 3, 4)"});
  test::require_error([&] { slice(x, 0, 0, 1, 0); }, {"slice", "step", "(2, 3, 4)"});
  test::require_error([&] { index_select(x, 1, {0, 3}); }, {"index_select", "index 3", "size 3", "(2, 3, 4)"});
  test::require_error([&] { index_select(x, 1, {-1}); }, {"index_select", "index -1", "(2, 3, 4)"});
  test::require_error([&] { index_select(x, -4, {0}); }, {"index_select", "axis -4", "(2, 3, 4)"});
  test::require_error([&] { concat({}, 0); }, {"concat", "empty"});
  test::require_error(
      [&] {
        concat({x, Tensor::zeros({2, 5, 4})}, 0);
      },
      {"concat", "(2, 5, 4)", "(2, 3, 4)", "axis 0"});
  test::require_error([&] { concat({x, Tensor::zeros({2, 3})}, 0); }, {"concat", "(2, 3)", "(2, 3, 4)"});
  test::require_error([&] { concat({x, x}, 3); }, {"concat", "axis 3", "(2, 3, 4)"});
  test::require_error(
      [&] {
        concat({x, Tensor::zeros({2, 3, 4}, kFloat64)}, 0);
      },
      {"concat", "dtype", "float32", "float64"});
  test::require_error([&] { concat({Tensor::scalar(1.0), Tensor::scalar(2.0)}); }, {"concat", "0-d"});
  test::require_error([&] { stack({}); }, {"stack", "empty"});
  test::require_error([&] { stack({x, Tensor::zeros({2, 3, 5})}); }, {"stack", "(2, 3, 5)", "(2, 3, 4)"});
  test::require_error([&] { stack({x, x}, 4); }, {"stack", "axis 4", "(2, 3, 4)"});
  test::require_error([&] { stack({x, Tensor::zeros({2, 3, 4}, kFloat64)}); }, {"stack", "dtype", "float64"});
  test::require_error([&] { expand(x, {2, 5, 4}); }, {"expand", "(2, 3, 4)", "(2, 5, 4)", "dimension 1"});
  test::require_error([&] { expand(x, {3, 4}); }, {"expand", "(2, 3, 4)", "(3, 4)"});
  test::require_error([&] { expand(x, {-1, 2, 3, 4}); }, {"expand", "(-1, 2, 3, 4)"});
  test::require_error([&] { permute(Tensor(), {}); }, {"permute", "undefined"});
}

// ---- sizes: overflow and zero-length dimensions (Note [Checked sizes]) -----------------------------

TEST_CASE("shape ops: slice with huge steps and bounds stays in range", "[shape_ops][sizes]") {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max(), min = std::numeric_limits<std::int64_t>::min();
  Tensor x = Tensor::arange(0, 10, 1, kFloat64).set_requires_grad();
  // A step past the end: one element, never an index that wrapped negative.
  CHECK(slice(x, 0, 0, 10, max).to_vector() == std::vector<double>{0});
  CHECK(slice(x, 0, 3, max, max).to_vector() == std::vector<double>{3});
  CHECK(slice(x, 0, 9, max, max - 1).to_vector() == std::vector<double>{9});
  CHECK(slice(x, 0, min, max, 4).to_vector() == std::vector<double>{0, 4, 8});
  CHECK(slice(x, 0, max, min, 1).numel() == 0);
  CHECK(slice(x, 0, -3, max, 2).to_vector() == std::vector<double>{7, 9});
  Tensor y = slice(x, 0, 1, max, max);
  y.backward(Tensor::ones({1}, kFloat64));
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  test::require_error([&] { slice(x, 0, 0, 10, 0); }, {"slice", "step"});
  test::require_error([&] { slice(x, 0, 0, 10, min); }, {"slice", "step"});
}

TEST_CASE("shape ops: shapes whose size overflows are an Error naming the op", "[shape_ops][sizes][errors]") {
  const std::int64_t big = std::int64_t{1} << 62, max = std::numeric_limits<std::int64_t>::max();
  const Tensor e = Tensor::zeros({0});
  const Tensor four = Tensor::zeros({4});
  // reshape: an empty tensor into a shape whose strides overflow, products that wrap to the count.
  test::require_error([&] { reshape(e, {0, big, big}); }, {"reshape", "'shape'", "too large"});
  test::require_error([&] { reshape(four, {std::int64_t{1} << 32, std::int64_t{1} << 32, 4, 1}); }, {"reshape"});
  test::require_error([&] { reshape(four, {-1, std::int64_t{1} << 32, std::int64_t{1} << 32}); }, {"reshape"});
  test::require_error([&] { reshape(e, {-1, big, big}); }, {"reshape"});
  // flatten, permute and transpose of an empty tensor whose result's size or strides overflow.
  const Tensor wide = Tensor::zeros({big, big, 0});
  test::require_error([&] { flatten(wide, 0, 1); }, {"flatten", "overflows"});
  test::require_error([&] { permute(wide, {2, 0, 1}); }, {"permute", "'dims'", "too large"});
  test::require_error([&] { transpose(wide, 0, 2); }, {"transpose", "'dims'", "too large"});
  CHECK(permute(wide, {1, 0, 2}).shape() == Shape{big, big, 0});
  // expand, concat and stack outputs that cannot exist.
  test::require_error([&] { expand(Tensor::zeros({0, 1, 1}), {0, big, big}); }, {"expand", "too large"});
  test::require_error([&] { expand(Tensor::zeros({1}), {big, 4}); }, {"expand", "too large"});
  const Tensor tall = Tensor::zeros({max, 0});
  test::require_error([&] { concat({tall, tall}, 0); }, {"concat", "'xs'", "overflows"});
  // Empty inputs whose joined shape has a stride that overflows: (0, 4, 2^61).
  const Tensor e2 = Tensor::zeros({0, 2, std::int64_t{1} << 61}), e1 = Tensor::zeros({0, std::int64_t{1} << 61});
  test::require_error([&] { concat({e2, e2}, 1); }, {"concat", "'xs'", "too large"});
  test::require_error([&] { stack({e1, e1, e1, e1}, 1); }, {"stack", "'xs'", "too large"});
  // index_select output whose strides overflow: (0, 3, 2^62) from (0, 1, 2^62).
  test::require_error(
      [&] {
        index_select(Tensor::zeros({0, 1, big}), 1, {0, 0, 0});
      },
      {"index_select", "'index'", "too large"});
}

TEST_CASE("pad: outputs larger than memory are an Error stating the bytes, never std::bad_alloc",
          "[shape_ops][sizes][errors]") {
  const Tensor x = Tensor::ones({3, 4});
  // Before the check, pad built an index map of 8 bytes per output element first: std::bad_alloc.
  test::require_error([&] { pad(x, {std::int64_t{1} << 40, std::int64_t{1} << 40}); }, {"pad", "'pads'", "bytes"});
  test::require_error([&] { pad(x, {std::int64_t{1} << 31, 0, std::int64_t{1} << 31, 0}); }, {"pad", "'pads'"});
  test::require_error([&] { pad(x, {std::numeric_limits<std::int64_t>::max(), 0}); }, {"pad", "'pads'", "overflows"});
  CHECK(pad(x, {1, 1}).shape() == Shape{3, 6});
}

TEST_CASE("shape ops: zero-length dimensions in the forward and the backward", "[shape_ops][sizes]") {
  Generator gen(3);
  for (const Dtype dt : {kFloat32, kFloat64}) {
    Tensor a = test::randn_leaf({2, 0, 3}, gen, dt);
    Tensor b = test::randn_leaf({2, 4, 3}, gen, dt);
    // concat with an empty input equals the other input; the empty input gets an empty gradient.
    Tensor c = concat({a, b}, 1);
    CHECK(bit_equal(c.detach(), b.detach()));
    Tensor g = Tensor::randn(c.shape(), gen, dt);
    c.backward(g);
    CHECK(a.grad().shape() == a.shape());
    CHECK(bit_equal(b.grad(), g));
    // Views, permutes, slices and gathers of empty tensors, and their gradients.
    Tensor z = test::randn_leaf({3, 0, 5}, gen, dt);
    const std::vector<std::function<Tensor(const Tensor&)>> fns = {
        [](const Tensor& t) {
          return reshape(t, {-1, 5});
        },
        [](const Tensor& t) {
          return reshape(t, {5, 0, 3});
        },
        [](const Tensor& t) { return flatten(t); },
        [](const Tensor& t) {
          return permute(t, {2, 0, 1});
        },
        [](const Tensor& t) { return transpose(t, 0, 1); },
        [](const Tensor& t) { return slice(t, 1, 0, 10); },
        [](const Tensor& t) { return slice(t, 0, 1, 3, 2); },
        [](const Tensor& t) {
          return index_select(t, 0, {2, 0, 2});
        },
        [](const Tensor& t) { return index_select(t, 1, {}); },
        [](const Tensor& t) {
          return stack({t, t}, 1);
        },
        [](const Tensor& t) {
          return concat({t, t}, 2);
        },
        [](const Tensor& t) {
          return expand(t, {4, 3, 0, 5});
        },
        [](const Tensor& t) { return squeeze(unsqueeze(t, 0), 0); },
    };
    for (std::size_t i = 0; i < fns.size(); ++i) {
      z.zero_grad();
      Tensor y = fns[i](z);
      CHECK(y.numel() == 0);
      y.backward(Tensor::zeros(y.shape(), dt));
      CHECK(z.grad().shape() == z.shape());
    }
    // Expanding along a size-0 dimension of x's shape (size 1 -> 0) and back: sum over nothing is 0.
    Tensor one = test::randn_leaf({1, 3}, gen, dt);
    Tensor ex = expand(one, {0, 3});
    CHECK(ex.shape() == Shape{0, 3});
    ex.backward(Tensor::zeros({0, 3}, dt));
    CHECK(one.grad().to_vector() == std::vector<double>{0, 0, 0});
    // A huge but empty tensor (valid: its strides fit) moves through the ops without touching memory.
    const std::int64_t big = std::int64_t{1} << 62;
    Tensor huge = Tensor::zeros({big, 0, big}, dt);
    CHECK(slice(huge, 0, 0, big, 3).shape() == Shape{(big - 1) / 3 + 1, 0, big});
    CHECK(index_select(huge, 2, {5, 1}).shape() == Shape{big, 0, 2});
    CHECK(stack({huge, huge}, 0).shape() == Shape{2, big, 0, big});
    CHECK(concat({huge, huge}, 1).shape() == Shape{big, 0, big});
  }
}

// ---- split, chunk, flip, roll, repeat, pad (the op table checks parity and gradients) -----------
TEST_CASE("pad, roll, repeat and flip move the elements torch moves", "[shape_ops][pad]") {
  const Tensor r = Tensor::from_vector({0, 1, 2, 3, 4}, {1, 5}, kFloat64);
  using V = std::vector<double>;
  CHECK(pad(r, {2, 1}, "reflect").to_vector() == V{2, 1, 0, 1, 2, 3, 4, 3});
  CHECK(pad(r, {-1, 2}, "reflect").to_vector() == V{1, 2, 3, 4, 3, 2});  // torch gives the same
  CHECK(pad(r, {1, 3}, "replicate").to_vector() == V{0, 0, 1, 2, 3, 4, 4, 4, 4});
  CHECK(pad(r, {-2, 1}, "constant", 7).to_vector() == V{2, 3, 4, 7});
  CHECK(pad(r, {0, 0, 1, 0}).shape() == Shape{2, 5});
  CHECK(roll(r, {2}).to_vector() == V{3, 4, 0, 1, 2});
  CHECK(roll(r, {-7}, {1}).to_vector() == V{2, 3, 4, 0, 1});
  CHECK(flip(r, {1}).to_vector() == V{4, 3, 2, 1, 0});
  CHECK(repeat(Tensor::from_vector({1, 2}, {2}, kFloat64), {2, 2}).to_vector() == V{1, 2, 1, 2, 1, 2, 1, 2});

  // Gradients of the non-injective maps add up every copy (replicate's edge takes 1 + 3 outputs).
  Tensor x = Tensor::from_vector({0, 1, 2, 3, 4}, {1, 5}, kFloat64);
  x.set_requires_grad();
  sum(pad(x, {1, 3}, "replicate")).backward();
  CHECK(x.grad().to_vector() == V{2, 1, 1, 1, 4});
  x.zero_grad();
  sum(pad(x, {2, 1}, "reflect")).backward();
  CHECK(x.grad().to_vector() == V{1, 2, 2, 2, 1});
  x.zero_grad();
  sum(repeat(x, {3, 2})).backward();
  CHECK(x.grad().to_vector() == V{6, 6, 6, 6, 6});
}

TEST_CASE("split and chunk follow torch's piece sizes, and unused pieces get zero gradients", "[shape_ops][split]") {
  Generator gen(5);
  Tensor x = test::randn_leaf({7, 3}, gen);
  auto sizes = [](const Tensors& ps) {
    std::vector<std::int64_t> s;
    for (const auto& p : ps) s.push_back(p.shape()[0]);
    return s;
  };
  using I = std::vector<std::int64_t>;
  CHECK(sizes(split(x, 3)) == I{3, 3, 1});
  CHECK(sizes(split(x, I{2, 0, 5})) == I{2, 0, 5});
  CHECK(sizes(chunk(x, 3)) == I{3, 3, 1});
  CHECK(sizes(chunk(Tensor::zeros({6, 2}), 4)) == I{2, 2, 2});  // fewer pieces than asked, as torch
  CHECK(sizes(chunk(Tensor::zeros({0, 2}), 3)) == I{0, 0, 0});  // an empty dim: `chunks` empty pieces
  CHECK(sizes(split(Tensor::zeros({0, 2}), 0)) == I{0});
  const Tensors ps = split(x, 3);
  sum(ps[1]).backward();
  const auto g = x.grad().to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == (i >= 9 && i < 18 ? 1.0 : 0.0));
}

TEST_CASE("the copy-type shape ops take huge empty tensors without touching memory", "[shape_ops][empty]") {
  const std::int64_t big = std::int64_t{1} << 62;
  const Tensor huge = Tensor::zeros({big, 0, big}, kFloat64);
  CHECK(flip(huge, {0, 2}).shape() == huge.shape());
  CHECK(roll(huge, {3}, {0}).shape() == huge.shape());
  CHECK(roll(huge, {3}).shape() == huge.shape());
  CHECK(repeat(huge, {1, 1, 1}).shape() == huge.shape());
  CHECK(pad(huge, {1, 1}).shape() == Shape{big, 0, big + 2});
  CHECK(split(huge, big / 2, 0).size() == 2);
  test::require_error([&] { repeat(huge, {4, 1, 1}); }, {"repeat"});  // 2^64 does not fit
}

TEST_CASE("expand, permute and transpose move int64 and bool elements, as torch's", "[shape_ops][dtype]") {
  const Tensor a = Tensor::from_vector(std::vector<std::int64_t>{(std::int64_t{1} << 60) + 1, -7, 3}, {3, 1});
  const Tensor e = expand(a, {2, -1, 2});
  CHECK(e.dtype() == kInt64);
  CHECK(e.shape() == Shape{2, 3, 2});
  CHECK(e.data<std::int64_t>()[0] == (std::int64_t{1} << 60) + 1);  // bits moved, not rounded via double
  CHECK(e.data<std::int64_t>()[1] == (std::int64_t{1} << 60) + 1);
  CHECK(e.data<std::int64_t>()[11] == 3);
  const Tensor m = Tensor::from_vector(std::vector<bool>{true, false}, {2});
  CHECK(broadcast_to(m, {2, 2}).to_vector() == std::vector<double>{1, 0, 1, 0});
  CHECK(broadcast_to(m, {2, 2}).dtype() == kBool);

  const Tensor i = Tensor::from_vector(std::vector<int>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(transpose(i, 0, 1).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(transpose(i, 0, 1).dtype() == kInt64);
  CHECK(permute(i.to(kInt32), {1, 0}).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(permute(i.to(kUInt8), {1, 0}).dtype() == kUInt8);
  CHECK(permute(i.to(kBool), {1, 0}).dtype() == kBool);

  // Integer tensors cannot require grad; in a graph they are constants beside float inputs.
  const Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  const Tensor k = expand(Tensor::from_vector(std::vector<std::int64_t>{3}, {1}), {2});
  CHECK_FALSE(k.requires_grad());
  Tensor y = sum(x * k);
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<double>{3, 3});
}
