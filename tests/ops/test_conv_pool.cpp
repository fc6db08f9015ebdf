// Semantics of ops/conv.* and ops/pool.* that the op table does not express: the adjoint relation
// between conv2d and conv_transpose2d, the unbatched forms, max pooling's tie rule, and the target
// workload (batch 64 of 28 x 28 images, 1 -> 32 -> 32 channels) bit-identical with 1 and 2 threads.
// Gradcheck, torch parity, sizes and bad inputs: the op table (tests/ops/op_table.cpp).
#include <limits>

#include "support.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;
using V = std::vector<std::int64_t>;

namespace {
double dot(const Tensor& a, const Tensor& b) { return sum(mul(a, b)).item(); }
}  // namespace

TEST_CASE("conv_transpose2d is the adjoint of conv2d in x", "[conv]") {
  Generator gen(3);
  for (std::int64_t groups : {1, 2}) {
    const Tensor x = Tensor::randn({2, 4, 9, 8}, gen, kFloat64);
    const Tensor w = Tensor::randn({6, 4 / groups, 3, 2}, gen, kFloat64);
    const Tensor y = conv2d(x, w, Tensor(), {2, 1}, V{1, 0}, {1, 2}, groups);
    const Tensor z = Tensor::randn(y.shape(), gen, kFloat64);
    // output_padding recovers the rows that the stride-2 convolution dropped
    const Tensor xt = conv_transpose2d(z, w, Tensor(), {2, 1}, {1, 0}, {(9 + 2 - 3) % 2, 0}, groups, {1, 2});
    REQUIRE(xt.shape() == x.shape());
    CHECK(std::abs(dot(y, z) - dot(x, xt)) < 1e-10 * (1 + std::abs(dot(y, z))));
  }
}

TEST_CASE("conv and pooling take unbatched inputs as torch does", "[conv][pool]") {
  Generator gen(4);
  const Tensor x = Tensor::randn({3, 7, 6}, gen, kFloat32), w = Tensor::randn({5, 3, 3, 3}, gen, kFloat32);
  const Tensor y = conv2d(x, w, Tensor(), {1}, "same");
  CHECK(y.shape() == Shape{5, 7, 6});
  const Tensor yb = conv2d(Tensor::from_vector(x.to_vector(), {1, 3, 7, 6}), w, Tensor(), {1}, "same");
  CHECK(y.to_vector() == yb.to_vector());
  CHECK(conv1d(Tensor::randn({3, 10}, gen), Tensor::randn({2, 3, 4}, gen)).shape() == Shape{2, 7});
  CHECK(max_pool2d(x, {2}).shape() == Shape{3, 3, 3});
  CHECK(avg_pool1d(Tensor::randn({3, 10}, gen), {3}).shape() == Shape{3, 3});
}

TEST_CASE("max pooling sends the gradient to the first maximum, as torch", "[pool]") {
  Tensor x = Tensor::of({{1, 3, 3, 0}, {3, 2, 1, 3}}, kFloat64);
  x = Tensor::from_vector(x.to_vector(), {1, 1, 2, 4}, kFloat64).set_requires_grad();
  const Tensor y = max_pool2d(x, {2});
  CHECK(y.to_vector() == std::vector<double>{3, 3});
  sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 1, 0, 0, 0, 0, 0});
}

TEST_CASE("conv2d, max_pool2d at the target workload: bit-identical with 1 and 2 threads", "[conv][threads]") {
  Generator gen(5);
  const Tensor x = Tensor::randn({64, 1, 28, 28}, gen).set_requires_grad();
  const Tensor w1 = Tensor::randn({32, 1, 3, 3}, gen).set_requires_grad(),
               b1 = Tensor::randn({32}, gen).set_requires_grad();
  const Tensor w2 = Tensor::randn({32, 32, 3, 3}, gen).set_requires_grad(),
               b2 = Tensor::randn({32}, gen).set_requires_grad();
  const Tensor seed = Tensor::randn({64, 32, 7, 7}, gen);
  test::require_thread_deterministic([&] {
    for (const Tensor& t : {x, w1, b1, w2, b2}) const_cast<Tensor&>(t).zero_grad();
    const Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {1}, 1)), {2});
    const Tensor y = max_pool2d(relu(conv2d(h, w2, b2, {1}, 1)), {2});
    y.backward(seed);
    return Tensors{y, x.grad(), w1.grad(), b1.grad(), w2.grad(), b2.grad()};
  });
}

TEST_CASE("depthwise and grouped direct convolutions: bit-identical with 1 and 2 threads", "[conv][threads]") {
  // Depthwise (single-row tiles, the depthwise weight gradient) and 2 groups of 16 -> 32 channels (the
  // co-vectorised weight gradient on AVX-512), 24 samples: three per weight-gradient slot.
  Generator gen(8);
  const Tensor x = Tensor::randn({24, 32, 14, 14}, gen).set_requires_grad();
  const Tensor wd = Tensor::randn({32, 1, 3, 3}, gen).set_requires_grad();
  const Tensor wg = Tensor::randn({64, 16, 3, 3}, gen).set_requires_grad();
  const Tensor seed = Tensor::randn({24, 64, 14, 14}, gen);
  test::require_thread_deterministic([&] {
    for (const Tensor& t : {x, wd, wg}) const_cast<Tensor&>(t).zero_grad();
    const Tensor y = conv2d(relu(conv2d(x, wd, Tensor(), {1}, "same", {1}, 32)), wg, Tensor(), {1}, "same", {1}, 2);
    y.backward(seed);
    return Tensors{y, x.grad(), wd.grad(), wg.grad()};
  });
}

TEST_CASE("conv2d's weight gradient over many chunks (more than the 8 partial slots) is the sum over samples",
          "[conv]") {
  // 16 x 3 x 3 rows and 64 x 64 columns per sample: more than 2^19 im2col elements, so one sample per
  // chunk, 20 chunks dealt to 7 slots of 3.
  Generator gen(6);
  const std::int64_t n = 20;
  const Tensor x = Tensor::randn({n, 16, 64, 64}, gen, kFloat64);
  const Tensor w = Tensor::randn({8, 16, 3, 3}, gen, kFloat64).set_requires_grad();
  const Tensor g = Tensor::randn({n, 8, 64, 64}, gen, kFloat64);
  conv2d(x, w, Tensor(), {1}, "same").backward(g);
  const std::vector<double> got = w.grad().to_vector();
  std::vector<double> want(got.size(), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const Tensor wi = w.detach().clone_data().set_requires_grad();
    const Tensor xi = Tensor::from_vector(
        std::vector<double>(x.data<double>() + i * 16 * 4096, x.data<double>() + (i + 1) * 16 * 4096), {16, 64, 64},
        kFloat64);
    const Tensor gi =
        Tensor::from_vector(std::vector<double>(g.data<double>() + i * 8 * 4096, g.data<double>() + (i + 1) * 8 * 4096),
                            {8, 64, 64}, kFloat64);
    conv2d(xi, wi, Tensor(), {1}, "same").backward(gi);
    const std::vector<double> gw = wi.grad().to_vector();
    for (std::size_t j = 0; j < want.size(); ++j) want[j] += gw[j];
  }
  const auto [err, scale] = test::max_error(got, want);
  CHECK(err <= 1e-12 * scale);
  test::require_thread_deterministic([&] {
    const Tensor w2 = w.detach().clone_data().set_requires_grad();
    conv2d(x, w2, Tensor(), {1}, "same").backward(g);
    return Tensors{w2.grad()};
  });
}

TEST_CASE("max_pool2d_with_indices: int64 flat indices in the plane, and a window with nothing in range", "[pool]") {
  const Tensor x = Tensor::from_vector({1, 3, 3, 0, 3, 2, 1, 3}, {1, 1, 2, 4}, kFloat64);
  const Tensors r = max_pool2d_with_indices(x, {2});
  CHECK(r[1].dtype() == kInt64);
  CHECK(r[1].shape() == Shape{1, 1, 1, 2});
  CHECK(r[1].to_vector() == std::vector<double>{1, 2});  // the first maximum of each window
  // height 1, kernel 2 with dilation 2 and padding 1: rows -1 and 1, neither in range
  const Tensor y = Tensor::from_vector({1, 2, 3}, {1, 1, 1, 3}, kFloat64).set_requires_grad();
  const Tensors e = max_pool2d_with_indices(y, {2, 1}, {1}, {1, 0}, {2, 1});
  CHECK(e[0].to_vector() == std::vector<double>(3, -std::numeric_limits<double>::infinity()));
  CHECK(e[1].to_vector() == std::vector<double>(3, -1));
  e[0].backward(Tensor::ones({1, 1, 1, 3}, kFloat64));
  CHECK(y.grad().to_vector() == std::vector<double>(3, 0));
}

TEST_CASE("conv and pooling: sizes near 2^63 are an Error naming the op and the argument, never a wrapped shape",
          "[conv][pool][sizes][errors]") {
  // Before the checks, conv2d with dilation 2^63 - 1 returned a (1, 1, 6, 6) output for a 4 x 4 input
  // (the dilated kernel's span wrapped), conv1d with padding 2^63 - 1 a length-4 output, and
  // adaptive_avg_pool1d to 2^63 - 1 positions ran until memory ran out.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max(), big = std::int64_t{1} << 62;
  const Tensor x = Tensor::ones({1, 1, 4, 4}), w = Tensor::ones({1, 1, 3, 3});
  const Tensor x1 = Tensor::ones({1, 1, 8}), w1 = Tensor::ones({1, 1, 3});
  test::require_error([&] { conv2d(x, w, Tensor(), {1}, 0, {max}); }, {"conv2d", "'dilation'", "overflows"});
  test::require_error([&] { conv2d(x, w, Tensor(), {1}, 0, {big}); }, {"conv2d", "'dilation'", "overflows"});
  test::require_error([&] { conv2d(x, w, Tensor(), {1}, "same", {max}); }, {"conv2d", "'dilation'", "overflows"});
  test::require_error([&] { conv1d(x1, w1, Tensor(), {1}, V{max}); }, {"conv1d", "'padding'", "overflows"});
  test::require_error([&] { conv1d(x1, w1, Tensor(), {1}, V{big}); }, {"conv1d", "'padding'", "overflows"});
  test::require_error([&] { conv_transpose1d(x1, w1, Tensor(), {1}, {0}, {0}, 1, {max}); },
                      {"conv_transpose1d", "'dilation'", "overflows"});
  test::require_error([&] { conv_transpose1d(x1, w1, Tensor(), {1}, {max}); },
                      {"conv_transpose1d", "'padding'", "overflows"});
  test::require_error([&] { conv_transpose2d(x, w, Tensor(), {max}); }, {"conv_transpose2d", "'stride'", "overflows"});
  // Large but representable sizes still reach the size checks of the output.
  test::require_error([&] { conv_transpose2d(x, w, Tensor(), {std::int64_t{1} << 33}); },
                      {"conv_transpose2d", "'output'", "too large"});
  test::require_error([&] { max_pool1d(x1, {max}, {1}, {max / 2}); }, {"max_pool1d", "'padding'", "overflows"});
  test::require_error([&] { avg_pool1d(x1, {max}, {max}, {max / 2}, true); }, {"avg_pool1d", "'padding'", "overflows"});
  test::require_error([&] { max_pool2d(x, {3}, {1}, {0}, {max}); }, {"max_pool2d", "'dilation'", "overflows"});
  test::require_error([&] { max_pool2d(x, {2}, {1}, {0}, {max}); }, {"max_pool2d", "output size", "too small"});
  test::require_error([&] { adaptive_avg_pool1d(x1, {max}); }, {"adaptive_avg_pool1d", "'output_size'", "overflows"});
  test::require_error([&] { adaptive_avg_pool2d(x, {max, max}); }, {"adaptive_avg_pool2d", "'output_size'"});
  test::require_error(
      [&] {
        adaptive_max_pool2d(x, {std::int64_t{1} << 31, std::int64_t{1} << 31});
      },
      {"adaptive_max_pool2d", "'output_size'"});
  // An empty batch has no output elements, but its windows would still be built: refused with the bytes.
  test::require_error(
      [&] {
        adaptive_avg_pool1d(Tensor::ones({0, 1, 8}), {std::int64_t{1} << 40});
      },
      {"adaptive_avg_pool1d", "'output_size'", "bytes"});
  // Sizes that fit still work.
  CHECK(conv2d(x, w, Tensor(), {max}).shape() == Shape{1, 1, 1, 1});
  CHECK(max_pool2d(x, {2}, {max}).shape() == Shape{1, 1, 1, 1});
  CHECK(adaptive_avg_pool1d(x1, {3}).shape() == Shape{1, 1, 3});
}

namespace {
// conv2d in float64 by its definition (torch's "same": the odd padding element at the end), with the
// gradients to x and w of sum(y * g).
struct DirectConv {
  std::vector<double> y, dx, dw;
};
DirectConv direct_conv2d(const Tensor& x, const Tensor& w, const Tensor& g, std::int64_t s, std::int64_t ph,
                         std::int64_t pw, std::int64_t d) {
  const std::int64_t n = x.size(0), ci = x.size(1), ih = x.size(2), iw = x.size(3);
  const std::int64_t co = w.size(0), kh = w.size(2), kw = w.size(3), gh = g.size(2), gw = g.size(3);
  const double *xv = x.data<double>(), *wv = w.data<double>(), *gv = g.data<double>();
  DirectConv r{std::vector<double>(static_cast<std::size_t>(g.numel())),
               std::vector<double>(static_cast<std::size_t>(x.numel())),
               std::vector<double>(static_cast<std::size_t>(w.numel()))};
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t o = 0; o < co; ++o)
      for (std::int64_t oh = 0; oh < gh; ++oh)
        for (std::int64_t ow = 0; ow < gw; ++ow) {
          const std::int64_t yi = ((i * co + o) * gh + oh) * gw + ow;
          for (std::int64_t c = 0; c < ci; ++c)
            for (std::int64_t a = 0; a < kh; ++a)
              for (std::int64_t b = 0; b < kw; ++b) {
                const std::int64_t yy = oh * s - ph + a * d, xx = ow * s - pw + b * d;
                if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
                const std::int64_t xi = ((i * ci + c) * ih + yy) * iw + xx, wi = ((o * ci + c) * kh + a) * kw + b;
                r.y[static_cast<std::size_t>(yi)] += wv[wi] * xv[xi];
                r.dx[static_cast<std::size_t>(xi)] += wv[wi] * gv[yi];
                r.dw[static_cast<std::size_t>(wi)] += xv[xi] * gv[yi];
              }
        }
  return r;
}
}  // namespace

TEST_CASE("conv2d with unit strides and a grid as wide as the image (contiguous im2col rows) equals the direct sum",
          "[conv]") {
  // Note [Contiguous im2col]: "same" padding copies whole planes and zeroes the wrapped elements; the
  // cases cover odd and even kernels (the odd padding element at the end), dilation, kernels taller
  // than the image (rows entirely outside), one-column images, and a stride-2 control on the
  // row-by-row path. Forward, and the gradients to x (col2im) and w.
  // The cases with grids of 64 positions or more and 4 or more channels on both sides also take Note
  // [Direct convolution] for the forward and the x gradient; their last tiles of a row (AVX-512: 3
  // vectors of 8 doubles) compute 3, 2 or 1 vectors (grids of 90, 88 and 98 positions).
  struct Case {
    Shape x;
    std::int64_t out, kh, kw, stride, dilation;
  };
  const Case cases[] = {
      {{2, 3, 5, 7}, 4, 3, 3, 1, 1},  {{1, 2, 6, 6}, 4, 4, 2, 1, 1},    {{2, 2, 7, 5}, 4, 3, 3, 1, 2},
      {{1, 3, 2, 9}, 4, 5, 3, 1, 1},  {{2, 2, 4, 1}, 4, 3, 3, 1, 1},    {{1, 2, 1, 8}, 4, 1, 5, 1, 2},
      {{3, 1, 9, 9}, 4, 1, 1, 1, 1},  {{2, 3, 11, 11}, 4, 5, 5, 1, 3},  {{2, 2, 9, 8}, 4, 3, 3, 2, 1},
      {{2, 8, 9, 10}, 8, 3, 3, 1, 1}, {{1, 6, 12, 8}, 13, 4, 2, 1, 1},  {{2, 9, 3, 40}, 9, 5, 3, 1, 2},
      {{2, 8, 1, 70}, 5, 1, 5, 1, 1}, {{1, 16, 2, 33}, 17, 7, 3, 1, 1}, {{1, 5, 7, 14}, 6, 3, 3, 1, 1},
      {{1, 4, 8, 11}, 4, 3, 3, 1, 1}};
  Generator gen(7);
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x), c.out, c.kh, c.kw, c.stride, c.dilation);
    const Tensor x = Tensor::randn(c.x, gen, kFloat64).set_requires_grad();
    const Tensor w = Tensor::randn({c.out, c.x[1], c.kh, c.kw}, gen, kFloat64).set_requires_grad();
    const std::int64_t th = c.dilation * (c.kh - 1), tw = c.dilation * (c.kw - 1);
    const Tensor y = c.stride == 1 ? conv2d(x, w, Tensor(), {1}, "same", {c.dilation})
                                   : conv2d(x, w, Tensor(), {c.stride}, V{th / 2, tw / 2}, {c.dilation});
    if (c.stride == 1) REQUIRE(y.shape() == Shape{c.x[0], c.out, c.x[2], c.x[3]});
    const Tensor g = Tensor::randn(y.shape(), gen, kFloat64);
    y.backward(g);
    const DirectConv want = direct_conv2d(x, w, g, c.stride, th / 2, tw / 2, c.dilation);
    for (const auto& [got, ref] : {std::pair{y.to_vector(), want.y}, std::pair{x.grad().to_vector(), want.dx},
                                   std::pair{w.grad().to_vector(), want.dw}}) {
      const auto [err, scale] = test::max_error(got, ref);
      CHECK(err <= 1e-12 * scale);
    }
  }
}

TEST_CASE("conv2d's direct kernels, grouped and depthwise, in float32 and float64 equal the direct sum", "[conv]") {
  // Note [Co-vectorised weight gradient] runs where a group's output channels fill whole vectors and
  // its input channels come in multiples of 8: with AVX-512, 16 / 24 / 8 input channels (tiles of 16,
  // 24 and 8), 16 and 32 output channels, grids of 90 and 88 positions (16 x 16 transposed blocks and
  // a remainder), 2 groups; the last case (12 output channels) takes the position tiles.
  // Then a 5 x 5 kernel, dilation 2, a 1 x 5 kernel on one-row images, and a kernel taller than
  // the image (taps with no valid position); then depthwise convolutions (one input and one output
  // channel per group: single-row tiles and the depthwise weight gradient) and two outputs per input;
  // last, one output channel from several inputs (single-row tiles with several channels, and the
  // weight gradient's single-row position tiles).
  struct Case {
    Shape x;
    std::int64_t out, groups, kh = 3, kw = 3, dilation = 1;
  };
  const Case cases[] = {{{2, 16, 9, 10}, 16, 1},
                        {{1, 24, 8, 11}, 32, 1},
                        {{2, 8, 7, 12}, 16, 1},
                        {{2, 32, 9, 10}, 32, 2},
                        {{1, 16, 9, 10}, 12, 1},
                        {{2, 16, 9, 10}, 16, 1, 5, 5, 1},
                        {{1, 16, 8, 12}, 16, 1, 3, 3, 2},
                        {{2, 16, 1, 70}, 16, 1, 1, 5, 1},
                        {{1, 16, 2, 40}, 16, 1, 7, 3, 1},
                        {{2, 8, 9, 10}, 8, 8},
                        {{2, 4, 9, 10}, 8, 4},
                        {{1, 4, 9, 10}, 4, 4, 5, 5, 1},
                        {{2, 4, 1, 70}, 4, 4, 1, 5, 1},
                        {{2, 8, 9, 10}, 1, 1},
                        {{2, 6, 9, 10}, 2, 2},
                        {{2, 3, 1, 70}, 1, 1, 1, 5, 1}};
  Generator gen(11);
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x), c.out, c.groups, c.kh, c.kw, c.dilation);
    const Tensor x = Tensor::randn(c.x, gen, kFloat64);
    const Tensor w = Tensor::randn({c.out, c.x[1] / c.groups, c.kh, c.kw}, gen, kFloat64);
    const Tensor g = Tensor::randn({c.x[0], c.out, c.x[2], c.x[3]}, gen, kFloat64);
    // the float64 reference, group by group
    const std::int64_t cig = c.x[1] / c.groups, cog = c.out / c.groups;
    DirectConv want{std::vector<double>(static_cast<std::size_t>(g.numel())),
                    std::vector<double>(static_cast<std::size_t>(x.numel())),
                    std::vector<double>(static_cast<std::size_t>(w.numel()))};
    for (std::int64_t q = 0; q < c.groups; ++q) {
      const Tensor xq = slice(x, 1, q * cig, (q + 1) * cig);
      const Tensor gq = slice(g, 1, q * cog, (q + 1) * cog);
      const Tensor wq = slice(w, 0, q * cog, (q + 1) * cog);
      const DirectConv r =
          direct_conv2d(xq, wq, gq, 1, c.dilation * (c.kh - 1) / 2, c.dilation * (c.kw - 1) / 2, c.dilation);
      const std::int64_t plane = c.x[2] * c.x[3];
      for (std::int64_t i = 0; i < c.x[0]; ++i) {
        std::copy_n(r.y.begin() + i * cog * plane, cog * plane, want.y.begin() + (i * c.out + q * cog) * plane);
        std::copy_n(r.dx.begin() + i * cig * plane, cig * plane, want.dx.begin() + (i * c.x[1] + q * cig) * plane);
      }
      std::copy(r.dw.begin(), r.dw.end(), want.dw.begin() + q * cog * cig * c.kh * c.kw);
    }
    // float32 to float precision; float64 (the same kernels with vectors of half as many lanes: other
    // remainders, e.g. 4 vectors left after the depthwise gradient's 4-vector steps) to 1e-12
    for (const auto& [dt, tol] : {std::pair{kFloat32, 1e-5}, std::pair{kFloat64, 1e-12}}) {
      CAPTURE(dt);
      const Tensor xf = x.to(dt).set_requires_grad(), wf = w.to(dt).set_requires_grad();
      const Tensor y = conv2d(xf, wf, Tensor(), {1}, "same", {c.dilation}, c.groups);
      y.backward(g.to(dt));
      for (const auto& [got, ref] : {std::pair{y.to_vector(), want.y}, std::pair{xf.grad().to_vector(), want.dx},
                                     std::pair{wf.grad().to_vector(), want.dw}}) {
        const auto [err, scale] = test::max_error(got, ref);
        CHECK(err <= tol * scale);
      }
    }
  }
}
