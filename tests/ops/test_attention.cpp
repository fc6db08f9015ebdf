// Tests for ops/attention.* beyond its op-table entries: masks of every kind and broadcast, causal,
// an explicit scale, batch dims, the attention weights output, a fully masked row, dropout (its
// statistics, and the same mask reused in backward), 1-vs-2 threads on a large case, bad inputs.
// PyTorch 1.13 has no scaled_dot_product_attention: parity is against the explicit formula
// softmax(q k^T * scale + mask) v written in torch.
#include <array>
#include <cmath>
#include <limits>

#include "support.hpp"
#include "xgrad/core/allocator.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/ops/attention.hpp"
#include "xgrad/ops/attention_layout.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/attention_kernels.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"

using namespace xgrad;
using xgrad::test::ParityBatch;

namespace {
// The reference in torch 1.13: `mask` is a float input; `kind` says how it is used.
std::string torch_sdpa(const std::string& kind, bool causal, const std::string& scale) {
  std::string code = "import math\n";
  code += "s = " + (scale.empty() ? std::string("1 / math.sqrt(q.shape[-1])") : scale) + "\n";
  code += "a = q @ k.transpose(-2, -1) * s\n";
  if (causal)
    code +=
        "a = a.masked_fill(torch.ones(a.shape[-2], a.shape[-1], dtype=torch.bool).tril().logical_not(), "
        "float('-inf'))\n";
  if (kind == "bool") code += "a = a.masked_fill(m == 0, float('-inf'))\n";
  if (kind == "float") code += "a = a + m\n";
  code += "out = torch.softmax(a, -1) @ v\n";
  return code;
}

Tensor bool_mask(const Shape& shape, Generator& gen, std::int64_t s) {
  // Random, with key 0 always allowed so that no row is fully masked.
  std::vector<double> m(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < m.size(); ++i)
    m[i] = (i % static_cast<std::size_t>(s) == 0 || gen.uniform() < 0.6) ? 1 : 0;
  return Tensor::from_vector(m, shape, kFloat64);
}
}  // namespace

TEST_CASE("scaled_dot_product_attention: values and gradients match the explicit formula in PyTorch",
          "[attention][parity]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    ParityBatch batch(std::string("attention_") + std::string(dtype_name(dt)));
    Generator gen(31);
    struct Case {
      std::string name;
      Shape batch;
      std::int64_t l, s, e, ev;
      std::string kind;  // "", "bool", "float"
      Shape mask;        // mask shape (may broadcast)
      bool causal;
      std::optional<double> scale;
    };
    const std::vector<Case> cases = {
        {"plain", {}, 4, 5, 3, 2, "", {}, false, {}},
        {"batch", {2, 3}, 4, 6, 5, 3, "", {}, false, {}},
        {"scale", {2}, 3, 3, 4, 4, "", {}, false, 0.7},
        {"causal", {2, 2}, 5, 5, 3, 3, "", {}, true, {}},
        {"causal_wide", {2}, 3, 6, 3, 2, "", {}, true, {}},
        {"bool_full", {2, 2}, 4, 5, 3, 3, "bool", {2, 2, 4, 5}, false, {}},
        {"bool_ls", {2, 2}, 4, 5, 3, 3, "bool", {4, 5}, false, {}},
        {"bool_keys", {3}, 4, 5, 3, 3, "bool", {3, 1, 5}, false, {}},
        {"float_full", {2, 2}, 4, 5, 3, 3, "float", {2, 2, 4, 5}, false, {}},
        {"float_ls", {2, 3}, 4, 5, 3, 3, "float", {4, 5}, false, {}},
        {"float_heads", {2, 3}, 4, 5, 3, 3, "float", {2, 1, 1, 5}, false, 0.5},
        {"empty_keys", {2}, 3, 0, 3, 2, "", {}, false, {}},
    };
    for (const auto& c : cases) {
      Shape qs = c.batch, ks = c.batch, vs = c.batch;
      qs.insert(qs.end(), {c.l, c.e});
      ks.insert(ks.end(), {c.s, c.e});
      vs.insert(vs.end(), {c.s, c.ev});
      std::vector<ParityBatch::Input> in = {{"q", test::randn_leaf(qs, gen, dt)},
                                            {"k", test::randn_leaf(ks, gen, dt)},
                                            {"v", test::randn_leaf(vs, gen, dt)}};
      if (c.kind == "bool") in.push_back({"m", bool_mask(c.mask, gen, c.s).to(dt), false});
      if (c.kind == "float") in.push_back({"m", test::randn_leaf(c.mask, gen, dt)});
      const std::string kind = c.kind;
      const bool causal = c.causal;
      const auto scale = c.scale;
      batch.add(c.name, torch_sdpa(kind, causal, scale ? fmt::format("{:.17g}", *scale) : ""), in,
                [kind, causal, scale](const Tensors& t) {
                  Tensor m = kind == "bool" ? t[3].to(kBool) : kind == "float" ? t[3] : Tensor();
                  return scaled_dot_product_attention(t[0], t[1], t[2], m, 0.0, causal, scale);
                });
    }
    batch.run();
  }
}

TEST_CASE("scaled_dot_product_attention: gradcheck with masks and causal", "[attention]") {
  Generator gen(32);
  const Tensor q = test::randn_leaf({2, 3, 4}, gen), k = test::randn_leaf({2, 5, 4}, gen),
               v = test::randn_leaf({2, 5, 3}, gen), m = test::randn_leaf({3, 5}, gen);
  test::require_gradcheck([](const Tensors& t) { return scaled_dot_product_attention(t[0], t[1], t[2]); }, {q, k, v});
  test::require_gradcheck([](const Tensors& t) { return scaled_dot_product_attention(t[0], t[1], t[2], t[3]); },
                          {q, k, v, m});
  test::require_gradcheck(
      [](const Tensors& t) { return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, true, 0.3); },
      {q, k, v});
  // The weights output (detail), both outputs used.
  test::require_gradcheck(
      [](const Tensors& t) {
        const Tensors r = detail::scaled_dot_product_attention_with_weights(t[0], t[1], t[2], t[3]);
        return add(sum(r[0]), sum(mul(r[1], r[1])));
      },
      {q, k, v, m});
}

TEST_CASE("scaled_dot_product_attention: the weights output is softmax(q k^T * scale + mask)", "[attention]") {
  Generator gen(33);
  const Tensor q = Tensor::randn({2, 3, 4}, gen, kFloat64), k = Tensor::randn({2, 5, 4}, gen, kFloat64),
               v = Tensor::randn({2, 5, 2}, gen, kFloat64), m = Tensor::randn({3, 5}, gen, kFloat64);
  const Tensors r = detail::scaled_dot_product_attention_with_weights(q, k, v, m);
  const Tensor want = softmax(add(mul(matmul(q, transpose(k, 1, 2)), 0.5), m), -1);
  const auto [err, ref] = test::max_error(r[1].to_vector(), want.to_vector());
  CHECK(err <= 1e-14 * std::max(1.0, ref));
  // The output of the weights' (materialising) path and of the fused path: equal up to rounding.
  const auto [out_err, out_ref] =
      test::max_error(r[0].to_vector(), scaled_dot_product_attention(q, k, v, m).to_vector());
  CHECK(out_err <= 1e-14 * std::max(1.0, out_ref));
}

TEST_CASE("scaled_dot_product_attention: a row whose every key is masked is NaN, the others are not", "[attention]") {
  Generator gen(34);
  const Tensor q = test::randn_leaf({3, 2}, gen), k = test::randn_leaf({4, 2}, gen), v = test::randn_leaf({4, 2}, gen);
  const Tensor m = Tensor::from_vector({1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0}, {3, 4}, kFloat64).to(kBool);
  const Tensor out = scaled_dot_product_attention(q, k, v, m);
  const auto y = out.to_vector();
  CHECK(std::isnan(y[2]));
  CHECK(std::isnan(y[3]));
  CHECK(std::isfinite(y[0]));
  CHECK(std::isfinite(y[4]));
  // Row 2 sees key 1 only: its output is v's row 1 exactly.
  CHECK(y[4] == v.to_vector()[2]);
  CHECK(y[5] == v.to_vector()[3]);
}

TEST_CASE("scaled_dot_product_attention: dropout drops at rate p, scales by 1/(1-p) and reuses its mask in backward",
          "[attention][dropout]") {
  const std::int64_t L = 64, S = 64;
  // With v = identity (S x S), out = P' itself, so the dropped entries are visible.
  const Tensor q = Tensor::zeros({4, L, 8}, kFloat64), k = Tensor::zeros({4, S, 8}, kFloat64);
  Tensor v = Tensor::zeros({4, S, S}, kFloat64);
  for (std::int64_t b = 0; b < 4; ++b)
    for (std::int64_t i = 0; i < S; ++i) v.data<double>()[(b * S + i) * S + i] = 1;
  for (double p : {0.2, 0.5}) {
    Generator gen(35);
    Tensor vq = q.clone_data().set_requires_grad();
    Tensor vv = v.clone_data().set_requires_grad();
    const Tensor out = scaled_dot_product_attention(vq, k, vv, Tensor(), p, false, std::nullopt, &gen);
    const auto y = out.to_vector();
    const double kept_value = 1.0 / S / (1 - p);  // uniform attention (q = 0), scaled
    std::int64_t dropped = 0;
    for (double x : y) {
      if (x == 0)
        ++dropped;
      else
        REQUIRE(std::abs(x - kept_value) <= 1e-15);
    }
    const double rate = static_cast<double>(dropped) / static_cast<double>(y.size());
    // 16384 Bernoulli draws: the standard error of the rate is < 0.004.
    CHECK(std::abs(rate - p) < 0.02);
    // The same seed gives the same mask; dV = P'^T G with G = ones: dV[b, s, :] = sum over l of P'[b, l, s].
    Generator again(35);
    CHECK(bit_equal(out, scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &again)));
    sum(out).backward();
    const auto dv = vv.grad().to_vector();
    for (std::int64_t b = 0; b < 4; ++b)
      for (std::int64_t s = 0; s < S; ++s) {
        double col = 0;
        for (std::int64_t l = 0; l < L; ++l) col += y[static_cast<std::size_t>((b * L + l) * S + s)];
        for (std::int64_t j = 0; j < S; ++j)
          REQUIRE(std::abs(dv[static_cast<std::size_t>((b * S + s) * S + j)] - col) <= 1e-12);
      }
  }
  // p = 1 drops everything (zeros and zero gradients).
  Generator gen(36);
  const Tensor x = Tensor::ones({2, 3, 4}, kFloat64);
  CHECK(max(abs(scaled_dot_product_attention(x, x, x, Tensor(), 1.0, false, std::nullopt, &gen))).item() == 0);
  CHECK(scaled_dot_product_attention(x, x, x, Tensor(), 0.0).shape() == Shape{2, 3, 4});
  // Without a generator the mask comes from the default generator: manual_seed repeats it.
  manual_seed(5);
  const Tensor first = scaled_dot_product_attention(x, x, x, Tensor(), 0.5);
  manual_seed(5);
  CHECK(bit_equal(scaled_dot_product_attention(x, x, x, Tensor(), 0.5), first));
}

TEST_CASE("scaled_dot_product_attention: dropout gradients match the formula with the same mask",
          "[attention][dropout]") {
  // out = (P * D / (1 - p)) V: with the weights output we can recompute the op from P' and check dq, dk, dv
  // against the same expression built from differentiable ops on the same mask.
  Generator data(37);
  const Tensor q = test::randn_leaf({2, 4, 3}, data), k = test::randn_leaf({2, 5, 3}, data),
               v = test::randn_leaf({2, 5, 2}, data);
  Generator g1(38), g2(38);
  const Tensors r = detail::scaled_dot_product_attention_with_weights(q, k, v, Tensor(), 0.3, false, std::nullopt, &g1);
  const Tensors grads = grad({sum(mul(r[0], r[0]))}, {q, k, v});
  // The keep mask D: where P' is non-zero (P > 0 everywhere here).
  const Tensor kept = ne(r[1].detach(), Tensor::zeros(r[1].shape(), kFloat64)).to(kFloat64);
  const Tensor p = softmax(mul(matmul(q, transpose(k, 1, 2)), 1 / std::sqrt(3.0)), -1);
  const Tensor out = matmul(div(mul(p, kept), 0.7), v);
  const Tensors want = grad({sum(mul(out, out))}, {q, k, v});
  for (std::size_t i = 0; i < 3; ++i) {
    const auto [err, ref] = test::max_error(grads[i].to_vector(), want[i].to_vector());
    CHECK(err <= 1e-12 * std::max(1.0, ref));
  }
  // The fused path redraws the same keep decisions (Note [Attention dropout]): equal up to rounding.
  const auto [out_err, out_ref] = test::max_error(
      r[0].to_vector(), scaled_dot_product_attention(q, k, v, Tensor(), 0.3, false, std::nullopt, &g2).to_vector());
  CHECK(out_err <= 1e-14 * std::max(1.0, out_ref));
}

TEST_CASE("scaled_dot_product_attention: bit-identical with 1 and 2 threads", "[attention][threads]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(39);
    const Tensor q = test::randn_leaf({4, 8, 40, 16}, gen, dt), k = test::randn_leaf({4, 8, 48, 16}, gen, dt),
                 v = test::randn_leaf({4, 8, 48, 12}, gen, dt), m = test::randn_leaf({8, 1, 48}, gen, dt);
    test::require_thread_deterministic([&] {
      Generator drop(40);
      const Tensor out = scaled_dot_product_attention(q, k, v, m, 0.1, false, std::nullopt, &drop);
      Tensors g = grad({sum(mul(out, out))}, {q, k, v, m});
      g.push_back(out);
      return g;
    });
  }
}

TEST_CASE("scaled_dot_product_attention: bad inputs name the op, the argument and the shapes", "[attention][errors]") {
  const Tensor q = Tensor::zeros({2, 3, 4}), k = Tensor::zeros({2, 5, 4}), v = Tensor::zeros({2, 5, 6});
  using test::require_error;
  require_error(
      [&] {
        scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}), v);
      },
      {"scaled_dot_product_attention", "'key'", "(2, 5, 3)", "(2, 3, 4)"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, Tensor::zeros({3, 5, 4}), v);
      },
      {"scaled_dot_product_attention", "'key'", "(3, 5, 4)"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 6}));
      },
      {"scaled_dot_product_attention", "'value'", "(2, 4, 6)", "(2, 5, 4)"});
  require_error([&] { scaled_dot_product_attention(Tensor::zeros({4}), k, v); },
                {"scaled_dot_product_attention", "'query'", "(4,)"});
  require_error([&] { scaled_dot_product_attention(q, k, v.to(kFloat64)); },
                {"scaled_dot_product_attention", "float64", "(2, 5, 6)"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 4}));
      },
      {"scaled_dot_product_attention", "'attn_mask'", "(3, 4)", "(2, 3, 5)"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}, kFloat64));
      },
      {"scaled_dot_product_attention", "'attn_mask'", "float64"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}, kInt64));
      },
      {"scaled_dot_product_attention", "'attn_mask'", "int64"});
  require_error(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}), 0.0, true);
      },
      {"scaled_dot_product_attention", "'attn_mask'", "is_causal"});
  Generator gen(1);
  require_error([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.5, false, std::nullopt, &gen); },
                {"scaled_dot_product_attention", "'dropout_p'", "1.5"});
  require_error(
      [&] { scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, std::numeric_limits<double>::infinity()); },
      {"scaled_dot_product_attention", "'scale'", "inf"});
  require_error([&] { scaled_dot_product_attention(q.to(kInt64), k, v); },
                {"scaled_dot_product_attention", "'query'", "int64"});
}

TEST_CASE("scaled_dot_product_attention: second derivatives (create_graph, causal) match torch.autograd.grad",
          "[attention][create_graph][parity]") {
  // The output is the first gradient with respect to q, k and v (recorded, seeded by w); the
  // harness backpropagates into it, so the compared gradients are second derivatives.
  ParityBatch batch("attention_create_graph");
  Generator gen(47);
  const Tensor q = test::randn_leaf({2, 4, 3}, gen), k = test::randn_leaf({2, 5, 3}, gen),
               v = test::randn_leaf({2, 5, 2}, gen), w = test::randn_leaf({2, 4, 2}, gen);
  batch.add("causal",
            torch_sdpa("", true, "") +
                "out = torch.cat([g.flatten() for g in torch.autograd.grad(out, (q, k, v), w, create_graph=True)])",
            {{"q", q}, {"k", k}, {"v", v}, {"w", w}}, [](const Tensors& t) {
              const Tensors qkv(t.begin(), t.begin() + 3);
              const Tensor y = scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, /*is_causal=*/true);
              Tensors g = xgrad::grad({y}, qkv, {t[3]}, std::nullopt, /*create_graph=*/true);
              for (auto& gi : g) gi = flatten(gi);
              return concat(g);
            });
  batch.run();
}

TEST_CASE("scaled_dot_product_attention: create_graph with dropout reuses the forward's mask",
          "[attention][create_graph]") {
  // With dropout the op is not a fixed function of its inputs, so gradgradcheck cannot run it; the
  // first gradient computed with create_graph must equal the first-order one (same mask), and its
  // own gradient must match the explicit formula built from the weights output's mask.
  Generator gen(5);
  const Tensor q = test::randn_leaf({2, 3, 4}, gen), k = test::randn_leaf({2, 5, 4}, gen),
               v = test::randn_leaf({2, 5, 3}, gen), w = Tensor::randn({2, 3, 3}, gen, kFloat64);
  Generator drop(11);
  const Tensors yw = detail::scaled_dot_product_attention_with_weights(q, k, v, Tensor(), 0.4, false, {}, &drop);
  const Tensors first = xgrad::grad({yw[0]}, {q, k, v}, {w}, true, false, false);
  const Tensors graph = xgrad::grad({yw[0]}, {q, k, v}, {w}, true, /*create_graph=*/true);
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(graph[i].requires_grad());
    const auto [abs_err, rel_err] = test::max_error(graph[i].to_vector(), first[i].to_vector());
    CHECK(abs_err < 1e-12);
  }
  // The same computation written with the kept mask D (from the weights output, P' = 0 exactly where
  // dropped) as a composite: its second derivatives are the reference.
  const Tensor keep = ne(yw[1].detach(), Tensor::zeros({}, kFloat64));
  const auto composite = [&](const Tensors& in) {
    const Tensor p = softmax(mul(matmul(in[0], transpose(in[1], -2, -1)), 0.5), -1);
    return matmul(div(where(keep, p, Tensor::zeros({}, kFloat64)), 0.6), in[2]);
  };
  const Tensors ref = xgrad::grad({composite({q, k, v})}, {q, k, v}, {w}, true, /*create_graph=*/true);
  const Tensor s_ours = sum(mul(concat({flatten(graph[0]), flatten(graph[1]), flatten(graph[2])}),
                                concat({flatten(graph[0]), flatten(graph[1]), flatten(graph[2])})));
  const Tensor s_ref = sum(mul(concat({flatten(ref[0]), flatten(ref[1]), flatten(ref[2])}),
                               concat({flatten(ref[0]), flatten(ref[1]), flatten(ref[2])})));
  const Tensors g_ours = xgrad::grad({s_ours}, {q, k, v}), g_ref = xgrad::grad({s_ref}, {q, k, v});
  for (std::size_t i = 0; i < 3; ++i) {
    const auto [abs_err, rel_err] = test::max_error(g_ours[i].to_vector(), g_ref[i].to_vector());
    INFO("input " << i);
    CHECK(abs_err < 1e-10);
  }
}

TEST_CASE("scaled_dot_product_attention: create_graph at degenerate sizes gives the first-order gradients",
          "[attention][create_graph]") {
  // (l, s, e, ev): no queries, no keys, empty features, one of each; the recorded backward must give
  // the first-order kernel's values, and a second backward through them must run.
  for (const auto& [l, s, e, ev] :
       std::vector<std::array<std::int64_t, 4>>{{0, 3, 2, 2}, {3, 0, 2, 2}, {3, 4, 0, 2}, {3, 4, 2, 0}, {1, 1, 1, 1}}) {
    INFO("l=" << l << " s=" << s << " e=" << e << " ev=" << ev);
    Generator gen(3);
    const Tensor q = test::randn_leaf({2, l, e}, gen), k = test::randn_leaf({2, s, e}, gen),
                 v = test::randn_leaf({2, s, ev}, gen), w = Tensor::randn({2, l, ev}, gen, kFloat64);
    const Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/l > 0 && s > 0);
    const Tensors first = xgrad::grad({y}, {q, k, v}, {w}, true);
    const Tensors graph = xgrad::grad({y}, {q, k, v}, {w}, true, /*create_graph=*/true);
    Tensor total = Tensor::zeros({}, kFloat64);
    for (std::size_t i = 0; i < 3; ++i) {
      REQUIRE(graph[i].shape() == first[i].shape());
      const auto [abs_err, ref] = test::max_error(graph[i].to_vector(), first[i].to_vector());
      CHECK(abs_err <= 1e-12 * (1 + ref));
      total = total + sum(graph[i] * graph[i]);
    }
    if (total.requires_grad()) {
      const Tensors second =
          xgrad::grad({total}, {q, k, v}, {}, std::nullopt, /*create_graph=*/false, /*allow_unused=*/true);
      for (std::size_t i = 0; i < 3; ++i)
        CHECK((!second[i].defined() || second[i].shape() == std::vector<Tensor>{q, k, v}[i].shape()));
    }
  }
}

namespace {
// Outputs and gradients (for the seed w) of the fused path and of the materialising one (the weights
// output's path), for one case.
struct FusedCase {
  std::string name;
  Shape batch;
  std::int64_t l, s, e, ev;
  std::string kind;  // "", "bool", "float"
  Shape mask;
  bool causal;
  double dropout;
  bool mask_grad = false;  // the float mask requires grad (its gradient is compared too)
};

Tensors attention_run(const FusedCase& c, Dtype dt, bool fused) {
  Generator gen(61);
  Shape qs = c.batch, ks = c.batch, vs = c.batch, os = c.batch;
  qs.insert(qs.end(), {c.l, c.e});
  ks.insert(ks.end(), {c.s, c.e});
  vs.insert(vs.end(), {c.s, c.ev});
  os.insert(os.end(), {c.l, c.ev});
  const Tensor q = test::randn_leaf(qs, gen, dt), k = test::randn_leaf(ks, gen, dt), v = test::randn_leaf(vs, gen, dt);
  const Tensor w = Tensor::randn(os, gen, dt);
  Tensor m;
  if (c.kind == "bool") m = bool_mask(c.mask, gen, c.s).to(kBool);
  if (c.kind == "float") m = c.mask_grad ? test::randn_leaf(c.mask, gen, dt) : Tensor::randn(c.mask, gen, dt);
  Generator drop(62);
  const Tensor y = fused ? scaled_dot_product_attention(q, k, v, m, c.dropout, c.causal, std::nullopt, &drop)
                         : detail::scaled_dot_product_attention_with_weights(q, k, v, m, c.dropout, c.causal,
                                                                             std::nullopt, &drop)[0];
  Tensors r = xgrad::grad({y}, c.mask_grad ? Tensors{q, k, v, m} : Tensors{q, k, v}, {w});
  r.push_back(y.detach());
  return r;
}

const std::vector<FusedCase>& fused_cases() {
  // L and S span several tiles and are not multiples of the tile.
  const std::int64_t t = detail::kAttentionTile;
  static const std::vector<FusedCase> cases = {
      {"plain", {2}, 2 * t + 22, 2 * t + 5, 16, 12, "", {}, false, 0.0},
      {"causal", {2}, 2 * t + 22, 2 * t + 5, 16, 12, "", {}, true, 0.0},
      {"causal_long_keys", {1}, t + 3, 3 * t + 1, 8, 8, "", {}, true, 0.0},
      {"causal_long_queries", {1}, 3 * t + 1, t + 3, 8, 8, "", {}, true, 0.0},
      {"bool", {2, 2}, 2 * t + 22, 2 * t + 5, 16, 12, "bool", {2, 1, 2 * t + 22, 2 * t + 5}, false, 0.0},
      {"float", {2, 2}, 2 * t + 22, 2 * t + 5, 16, 12, "float", {2 * t + 22, 2 * t + 5}, false, 0.0},
      {"float_keys", {2, 2}, t + 9, 2 * t + 5, 16, 12, "float", {2, 1, 1, 2 * t + 5}, false, 0.0},
      {"dropout", {2}, 2 * t + 22, 2 * t + 5, 16, 12, "", {}, false, 0.3},
      {"dropout_bool", {2}, 2 * t + 22, 2 * t + 5, 16, 12, "bool", {2 * t + 22, 2 * t + 5}, false, 0.2},
      {"float_grad", {2, 2}, 2 * t + 22, 2 * t + 5, 16, 12, "float", {2 * t + 22, 2 * t + 5}, false, 0.0, true},
      {"float_grad_heads", {2, 2}, t + 9, 2 * t + 5, 8, 4, "float", {2, 1, 1, 2 * t + 5}, false, 0.0, true},
      {"float_grad_full_dropout", {2}, t + 9, 2 * t + 5, 8, 4, "float", {2, t + 9, 2 * t + 5}, false, 0.25, true},
  };
  return cases;
}
}  // namespace

TEST_CASE("scaled_dot_product_attention: the fused path equals the materialising one across several tiles",
          "[attention][fused]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    for (const FusedCase& c : fused_cases()) {
      INFO(c.name << " " << dtype_name(dt));
      const Tensors fused = attention_run(c, dt, true), ref = attention_run(c, dt, false);
      for (std::size_t i = 0; i < fused.size(); ++i) {
        INFO("tensor " << i << " (dq, dk, dv, [dm,] out)");
        const auto [err, scale] = test::max_error(fused[i].to_vector(), ref[i].to_vector());
        CHECK(err <= tol * std::max(1.0, scale));
      }
    }
  }
}

TEST_CASE("scaled_dot_product_attention: the fused path is bit-identical with 1 and 2 threads",
          "[attention][threads]") {
  for (Dtype dt : {kFloat32, kFloat64})
    for (const FusedCase& c : fused_cases()) {
      INFO(c.name);
      test::require_thread_deterministic([&] { return attention_run(c, dt, true); });
    }
}

TEST_CASE("scaled_dot_product_attention: a fully masked row is NaN on the fused path across tiles",
          "[attention][fused]") {
  const std::int64_t t = detail::kAttentionTile, L = t + 5, S = 2 * t + 3;
  Generator gen(63);
  const Tensor q = test::randn_leaf({L, 4}, gen), k = test::randn_leaf({S, 4}, gen), v = test::randn_leaf({S, 3}, gen);
  Tensor m = Tensor::ones({L, S}, kBool);
  for (std::int64_t s = 0; s < S; ++s) m.data<bool>()[(t + 1) * S + s] = false;  // row t + 1 sees nothing
  const auto y = scaled_dot_product_attention(q, k, v, m).to_vector();
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t c = 0; c < 3; ++c) CHECK(std::isnan(y[static_cast<std::size_t>(l * 3 + c)]) == (l == t + 1));
}

TEST_CASE("scaled_dot_product_attention: the fused path holds no L x S buffer", "[attention][fused][memory]") {
  // One head of 2048 queries and keys: the (L x S) float32 scores alone would be 16 MiB. The forward
  // allocates the output and the row logsumexp; the backward the three gradients.
  const std::int64_t L = 2048, S = 2048, E = 64;
  Generator gen(64);
  const Tensor q = test::randn_leaf({1, L, E}, gen, kFloat32), k = test::randn_leaf({1, S, E}, gen, kFloat32),
               v = test::randn_leaf({1, S, E}, gen, kFloat32);
  const auto scores_bytes = static_cast<std::size_t>(L * S * 4);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const std::size_t before = memory_stats().allocated_bytes;
    reset_peak_memory_stats();
    const Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
    const std::size_t forward_peak = memory_stats().peak_allocated_bytes - before;
    CHECK(forward_peak < scores_bytes / 8);
    CHECK(forward_peak >= static_cast<std::size_t>(L * E * 4));  // the output itself is counted
    const Tensors g = xgrad::grad({sum(y)}, {q, k, v});
    const std::size_t backward_peak = memory_stats().peak_allocated_bytes - before;
    CHECK(backward_peak < scores_bytes / 4);
    CHECK(std::isfinite(sum(g[0]).item()));
  }
}

TEST_CASE("scaled_dot_product_attention: dropout keeps entry i by word i % 4 of Philox block first + i / 4",
          "[attention][dropout]") {
  // q = 0 makes P uniform (1 / S) and v = identity makes out = P' itself, so out != 0 is the keep mask.
  // S is odd and L, S cross tiles, so rows start mid-block and tiles mid-row.
  const std::int64_t B = 3, L = detail::kAttentionTile + 6, S = detail::kAttentionTile + 27;
  const double p = 0.3;
  const Tensor q = Tensor::zeros({B, L, 4}, kFloat64), k = Tensor::zeros({B, S, 4}, kFloat64);
  Tensor v = Tensor::zeros({B, S, S}, kFloat64);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < S; ++i) v.data<double>()[(b * S + i) * S + i] = 1;
  Generator gen(71);
  gen.next_u64();  // the reservation starts past block 0
  const std::uint64_t first = gen.offset();
  const auto y = scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &gen).to_vector();
  const auto threshold = static_cast<std::uint64_t>(std::ceil(std::ldexp(p, 32)));
  std::int64_t kept = 0, both = 0, mismatches = 0;
  std::array<std::int64_t, 4> kept_by_word{};
  for (std::int64_t i = 0; i < B * L * S; ++i) {
    const auto w =
        detail::philox4x32({static_cast<std::uint32_t>(first + static_cast<std::uint64_t>(i) / 4),
                            static_cast<std::uint32_t>((first + static_cast<std::uint64_t>(i) / 4) >> 32), 0, 0},
                           {71, 0});
    const bool want = w[static_cast<std::size_t>(i % 4)] >= threshold, got = y[static_cast<std::size_t>(i)] != 0;
    mismatches += want != got ? 1 : 0;
    kept += got ? 1 : 0;
    kept_by_word[static_cast<std::size_t>(i % 4)] += got ? 1 : 0;
    if (i + 1 < B * L * S && got && y[static_cast<std::size_t>(i + 1)] != 0) ++both;
  }
  CHECK(mismatches == 0);
  // The rate, per word of a block, and of adjacent pairs kept, within 5 standard errors.
  const auto n = static_cast<double>(B * L * S);
  CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
  for (std::int64_t c : kept_by_word)
    CHECK(std::abs(static_cast<double>(c) / (n / 4) - (1 - p)) < 5 * std::sqrt(p * (1 - p) / (n / 4)));
  const double pair = (1 - p) * (1 - p);
  CHECK(std::abs(static_cast<double>(both) / (n - 1) - pair) < 5 * std::sqrt(pair * (1 - pair) / (n - 1)) * 2);
  // The call reserved whole groups of blocks, one block per 4 entries.
  CHECK(gen.offset() - first >= static_cast<std::uint64_t>((B * L * S + 3) / 4));
  CHECK((gen.offset() - first) % detail::kPhiloxLanes == 0);
}

namespace {
// The (L, S) bool mask that is true on the layout's blocks of `block` x `block` entries.
Tensor layout_bool_mask(const CsrPattern& layout, std::int64_t l, std::int64_t s, std::int64_t block) {
  Tensor m = Tensor::empty({l, s}, kBool);
  detail::attention_layout_mask(l, s, block, layout.crow().data(), layout.col().data(), m.data<bool>());
  return m;
}
}  // namespace

TEST_CASE("block_sparse_attention: equals dense attention masked to the layout, values and gradients",
          "[attention][block_sparse]") {
  // BigBird's layout (window 1, global block 0, 2 random blocks per row) over lengths that are not
  // multiples of the block, with heads, causal and dropout; float32 and float64.
  for (const Dtype dt : {kFloat32, kFloat64})
    for (const bool causal : {false, true})
      for (const double p : {0.0, 0.2}) {
        const std::int64_t block = 24, L = 7 * block + 5, S = 6 * block + 11, E = 16, Ev = 12;
        const std::int64_t rows = (L + block - 1) / block, cols = (S + block - 1) / block;
        Generator lay(4);
        const CsrPattern layout = layout_union(
            {sliding_window_layout(rows, cols, 1), global_layout(rows, cols, {0}), random_layout(rows, cols, 2, lay)});
        Generator gen(8);
        const Tensor q = test::randn_leaf({2, 3, L, E}, gen, dt), k = test::randn_leaf({2, 3, S, E}, gen, dt),
                     v = test::randn_leaf({2, 3, S, Ev}, gen, dt);
        const Tensor w = Tensor::randn({2, 3, L, Ev}, gen, dt);
        Generator d1(5), d2(5);
        const Tensor ys = block_sparse_attention(q, k, v, layout, block, p, causal, std::nullopt, &d1);
        const Tensor mask = layout_bool_mask(layout, L, S, block);
        // Dense with the same mask (and, for causal, the causal part as a bool mask too).
        Tensor dense_mask = mask;
        if (causal) {
          Tensor upper = Tensor::empty({L, S}, kBool);
          detail::attention_causal_mask(L, S, upper.data<bool>());
          dense_mask = logical_and(mask, logical_not(upper));
        }
        const Tensor yd = scaled_dot_product_attention(q, k, v, dense_mask, p, false, std::nullopt, &d2);
        const Tensors gs = xgrad::grad({ys}, {q, k, v}, {w});
        const Tensors gd = xgrad::grad({yd}, {q, k, v}, {w});
        const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
        INFO(dtype_name(dt) << " causal " << causal << " dropout " << p);
        const Tensors a{gs[0], gs[1], gs[2], ys.detach()}, b{gd[0], gd[1], gd[2], yd.detach()};
        for (std::size_t i = 0; i < a.size(); ++i) {
          INFO("tensor " << i << " (dq, dk, dv, out)");
          const auto [err, scale] = test::max_error(a[i].to_vector(), b[i].to_vector());
          CHECK(err <= tol * std::max(1.0, scale));
        }
      }
}

TEST_CASE("block_sparse_attention: a query block with no stored key block gives NaN rows, the others do not",
          "[attention][block_sparse]") {
  // Query block 1 of 3 has no key block.
  const CsrPattern layout = CsrPattern::from_indices({0, 2, 2, 3}, {0, 1, 2}, 3, 3, "test");
  Generator gen(2);
  const Tensor q = Tensor::randn({12, 4}, gen, kFloat64), k = Tensor::randn({12, 4}, gen, kFloat64),
               v = Tensor::randn({12, 3}, gen, kFloat64);
  const Tensor y = block_sparse_attention(q, k, v, layout, 4);
  for (std::int64_t l = 0; l < 12; ++l) CHECK(std::isnan(y.data<double>()[l * 3]) == (l >= 4 && l < 8));
}
