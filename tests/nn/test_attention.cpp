// nn::MultiheadAttention, nn::TransformerEncoderLayer, nn::TransformerEncoder (nn/attention.*):
// parity with torch 1.13's modules (same parameters, copied over by name: values, attention weights
// and the gradients of every parameter and input, eval mode; tests/nn/attention_parity.py), torch's
// parameter names and init, train()/eval() and dropout, bad inputs. Reprs: tests/nn/test_module.cpp.
// torch 1.13 refuses a float key_padding_mask together with a float attn_mask ("Mask tensor can take 0
// and 1 values only"); xgrad adds both, as torch 2.x: no parity case combines them.
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/gradcheck.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/ops/attention.hpp"
#include "xgrad/ops/attention_layout.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;

namespace {
struct Input {
  std::string name;
  Tensor value;  // float64 0/1 for bool masks (converted by `run` and by the torch call)
  bool grad;
};

struct Case {
  std::string name, ctor, call;
  std::shared_ptr<nn::Module> module;
  std::vector<Input> inputs;
  std::function<std::pair<Tensor, Tensor>(const Tensors&)> run;
};

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::abs(v));
  return m;
}

void require_close(const Tensor& ours, const Tensor& theirs, double tol, const std::string& what) {
  INFO(what << ": ours " << shape_str(ours.shape()) << ", torch " << shape_str(theirs.shape()));
  REQUIRE(ours.shape() == theirs.shape());
  const auto [err, ref] = test::max_error(ours.to_vector(), theirs.to_vector());
  INFO("max error " << err << ", max |torch| " << ref);
  CHECK(std::isfinite(err));
  CHECK(err <= tol * std::max(1.0, ref));
}

Tensor mask01(const Shape& shape, Generator& gen, std::int64_t s, bool true_is_masked) {
  // Random, with key 0 never masked so that no row is fully masked.
  std::vector<double> m(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < m.size(); ++i) {
    const bool allowed = i % static_cast<std::size_t>(s) == 0 || gen.uniform() < 0.6;
    m[i] = allowed != true_is_masked ? 1 : 0;
  }
  return Tensor::from_vector(m, shape, kFloat64);
}

std::vector<Case> make_cases(Dtype dt) {
  Generator gen(dt == kFloat32 ? 51 : 52);
  const auto leaf = [&](const Shape& s) { return test::randn_leaf(s, gen, dt); };
  const auto boolmask = [](const Tensor& t) { return t.to(kBool); };
  std::vector<Case> cases;
  {
    auto m = std::make_shared<nn::MultiheadAttention>(nn::MultiheadAttentionOptions(8, 2).dtype(dt), 1);
    cases.push_back({"mha_basic",
                     "nn.MultiheadAttention(8, 2)",
                     "out, w = m(q, k, v)",
                     m,
                     {{"q", leaf({4, 3, 8}), true}, {"k", leaf({5, 3, 8}), true}, {"v", leaf({5, 3, 8}), true}},
                     [m](const Tensors& in) { return m->forward(in[0], in[1], in[2]); }});
  }
  {
    auto m = std::make_shared<nn::MultiheadAttention>(
        nn::MultiheadAttentionOptions(8, 4).batch_first(true).dropout(0.3).dtype(dt), 2);
    cases.push_back(
        {"mha_bool_masks",
         "nn.MultiheadAttention(8, 4, dropout=0.3, batch_first=True)",
         "out, w = m(q, k, v, key_padding_mask=kpm.bool(), attn_mask=am.bool(), average_attn_weights=False)",
         m,
         {{"q", leaf({3, 4, 8}), true},
          {"k", leaf({3, 6, 8}), true},
          {"v", leaf({3, 6, 8}), true},
          {"kpm", mask01({3, 6}, gen, 6, true), false},
          {"am", mask01({4, 6}, gen, 6, true), false}},
         [m, boolmask](const Tensors& in) {
           return m->forward(in[0], in[1], in[2], boolmask(in[3]), true, boolmask(in[4]), false);
         }});
  }
  {
    auto m = std::make_shared<nn::MultiheadAttention>(
        nn::MultiheadAttentionOptions(6, 3).kdim(5).vdim(3).bias(false).dtype(dt), 3);
    cases.push_back(
        {"mha_kdim_vdim_float_masks",
         "nn.MultiheadAttention(6, 3, bias=False, kdim=5, vdim=3)",
         "out, w = m(q, k, v, key_padding_mask=kpm.bool(), attn_mask=am)",
         m,
         {{"q", leaf({4, 2, 6}), true},
          {"k", leaf({5, 2, 5}), true},
          {"v", leaf({5, 2, 3}), true},
          {"kpm", mask01({2, 5}, gen, 5, true), false},
          {"am", leaf({6, 4, 5}), false}},
         [m, boolmask](const Tensors& in) { return m->forward(in[0], in[1], in[2], boolmask(in[3]), true, in[4]); }});
  }
  {
    auto m = std::make_shared<nn::MultiheadAttention>(nn::MultiheadAttentionOptions(4, 2).dtype(dt), 4);
    cases.push_back({"mha_unbatched_no_weights",
                     "nn.MultiheadAttention(4, 2)",
                     "out, w = m(q, q, q, key_padding_mask=kpm, need_weights=False)",
                     m,
                     {{"q", leaf({5, 4}), true}, {"kpm", leaf({5}), false}},
                     [m](const Tensors& in) { return m->forward(in[0], in[0], in[0], in[1], false); }});
  }
  {
    auto m = std::make_shared<nn::TransformerEncoderLayer>(
        nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dtype(dt), 5);
    cases.push_back(
        {"encoder_layer_relu",
         "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)",
         "out = m(x, src_mask=am, src_key_padding_mask=kpm.bool()); w = None",
         m,
         {{"x", leaf({5, 3, 8}), true}, {"am", leaf({5, 5}), false}, {"kpm", mask01({3, 5}, gen, 5, true), false}},
         [m, boolmask](const Tensors& in) {
           return std::pair<Tensor, Tensor>{m->forward(in[0], in[1], boolmask(in[2])), Tensor()};
         }});
  }
  {
    auto m = std::make_shared<nn::TransformerEncoderLayer>(nn::TransformerEncoderLayerOptions(6, 3)
                                                               .dim_feedforward(10)
                                                               .activation("gelu")
                                                               .norm_first(true)
                                                               .batch_first(true)
                                                               .layer_norm_eps(1e-3)
                                                               .dtype(dt),
                                                           6);
    cases.push_back({"encoder_layer_gelu_norm_first",
                     "nn.TransformerEncoderLayer(6, 3, dim_feedforward=10, activation='gelu', layer_norm_eps=1e-3, "
                     "batch_first=True, norm_first=True)",
                     "out = m(x, src_mask=am.bool()); w = None",
                     m,
                     {{"x", leaf({2, 4, 6}), true}, {"am", mask01({4, 4}, gen, 4, true), false}},
                     [m, boolmask](const Tensors& in) {
                       return std::pair<Tensor, Tensor>{m->forward(in[0], boolmask(in[1])), Tensor()};
                     }});
  }
  {
    nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(8).dtype(dt), 7);
    auto m =
        std::make_shared<nn::TransformerEncoder>(layer, 2, std::make_shared<nn::LayerNorm>(Shape{4}, 1e-5, true, dt));
    // Parameters that differ from the defaults, so the final norm is checked.
    {
      NoGradGuard guard;
      Generator g(8);
      for (auto& [name, p] : m->named_parameters()) p.copy_(Tensor::randn(p.shape(), g, dt).mul_(0.5));
    }
    cases.push_back({"encoder_two_layers_norm",
                     "nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, dim_feedforward=8), 2, "
                     "norm=nn.LayerNorm(4))",
                     "out = m(x); w = None",
                     m,
                     {{"x", leaf({3, 2, 4}), true}},
                     [m](const Tensors& in) {
                       return std::pair<Tensor, Tensor>{m->forward(in[0]), Tensor()};
                     }});
  }
  return cases;
}
}  // namespace

TEST_CASE("MultiheadAttention and TransformerEncoder(Layer) match torch 1.13: values, weights, gradients",
          "[nn][attention][parity][python]") {
  test::TempDir dir("attention_parity");
  nlohmann::json manifest = nlohmann::json::array();
  struct Ours {
    std::string name;
    Dtype dtype;
    Tensor out, w;
    std::vector<std::pair<std::string, Tensor>> param_grads, input_grads;
  };
  std::vector<Ours> ours;
  for (Dtype dt : {kFloat32, kFloat64}) {
    for (auto& c : make_cases(dt)) {
      const std::string name = c.name + "_" + std::string(dtype_name(dt));
      c.module->eval();
      nlohmann::json params = nlohmann::json::array(), inputs = nlohmann::json::array();
      for (const auto& [n, p] : c.module->named_parameters()) {
        params.push_back(n);
        save_npy(dir.file(name + "__p_" + n + ".npy"), p);
      }
      Tensors in;
      for (const auto& i : c.inputs) {
        inputs.push_back({{"name", i.name}, {"grad", i.grad}});
        save_npy(dir.file(name + "__in_" + i.name + ".npy"), i.value);
        in.push_back(i.value);
      }
      manifest.push_back({{"name", name},
                          {"dtype", std::string(dtype_name(dt))},
                          {"ctor", c.ctor},
                          {"call", c.call},
                          {"params", params},
                          {"inputs", inputs}});
      const auto [out, w] = c.run(in);
      Generator seeds(9);
      const Tensor seed_out = Tensor::randn(out.shape(), seeds, dt);
      save_npy(dir.file(name + "__seed_out.npy"), seed_out);
      Tensor loss = sum(mul(out, seed_out));
      if (w.defined()) {
        const Tensor seed_w = Tensor::randn(w.shape(), seeds, dt);
        save_npy(dir.file(name + "__seed_w.npy"), seed_w);
        loss = add(loss, sum(mul(w, seed_w)));
      }
      c.module->zero_grad();
      loss.backward();
      Ours o{name, dt, out.detach(), w.defined() ? w.detach() : Tensor(), {}, {}};
      for (const auto& [n, p] : c.module->named_parameters()) o.param_grads.emplace_back(n, p.grad());
      for (const auto& i : c.inputs)
        if (i.grad) o.input_grads.emplace_back(i.name, i.value.grad());
      ours.push_back(std::move(o));
    }
  }
  {
    std::ofstream f(dir.file("manifest.json"));
    f << manifest.dump(1);
  }
  test::run_python_script("tests/nn/attention_parity.py", dir.path.string());
  for (const auto& o : ours) {
    const double tol = o.dtype == kFloat32 ? 2e-4 : 1e-10;
    INFO("case " << o.name);
    require_close(o.out, load_npy(dir.file(o.name + "__torch_out.npy")), tol, "output");
    CHECK(std::filesystem::exists(dir.file(o.name + "__torch_w.npy")) == o.w.defined());
    if (o.w.defined()) require_close(o.w, load_npy(dir.file(o.name + "__torch_w.npy")), tol, "weights");
    for (const auto& [n, g] : o.param_grads) {
      REQUIRE(g.defined());
      CHECK(max_abs(g) > 0);
      require_close(g, load_npy(dir.file(o.name + "__torch_grad_p_" + n + ".npy")), tol, "grad of " + n);
    }
    for (const auto& [n, g] : o.input_grads)
      require_close(g, load_npy(dir.file(o.name + "__torch_grad_in_" + n + ".npy")), tol, "grad of input " + n);
  }
}

TEST_CASE("MultiheadAttention: torch's parameter names, shapes and init", "[nn][attention]") {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2), 3);
  const auto named = mha.named_parameters();
  REQUIRE(named.size() == 4);
  CHECK(named[0].first == "in_proj_weight");
  CHECK(named[1].first == "in_proj_bias");
  CHECK(named[2].first == "out_proj.weight");
  CHECK(named[3].first == "out_proj.bias");
  CHECK(mha.in_proj_weight().shape() == Shape{24, 8});
  // xavier_uniform_: U(-a, a), a = sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 32).
  const double a = std::sqrt(6.0 / 32);
  CHECK(max_abs(mha.in_proj_weight()) <= a);
  CHECK(max_abs(mha.in_proj_weight()) > 0.8 * a);
  CHECK(max_abs(mha.in_proj_bias()) == 0);
  CHECK(max_abs(mha.out_proj()->bias()) == 0);
  CHECK(max_abs(mha.out_proj()->weight()) <= 1 / std::sqrt(8.0));  // Linear's kaiming_uniform(a = sqrt 5)
  nn::MultiheadAttention sep(nn::MultiheadAttentionOptions(6, 3).kdim(4).vdim(5).bias(false));
  const auto names = sep.named_parameters();
  REQUIRE(names.size() == 4);
  CHECK(names[0].first == "q_proj_weight");
  CHECK(names[1].first == "k_proj_weight");
  CHECK(names[2].first == "v_proj_weight");
  CHECK(names[3].first == "out_proj.weight");
  CHECK(sep.k_proj_weight().shape() == Shape{6, 4});
  CHECK(sep.v_proj_weight().shape() == Shape{6, 5});
  CHECK(!sep.in_proj_bias().defined());
  nn::TransformerEncoderLayer layer(4, 2);
  std::vector<std::string> got;
  for (const auto& [n, p] : layer.named_parameters()) got.push_back(n);
  CHECK(got == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                        "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                                        "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
                                        "norm2.weight", "norm2.bias"});
  CHECK(layer.linear1->weight().shape() == Shape{2048, 4});
}

TEST_CASE("generate_square_subsequent_mask is torch's causal mask, and equals the bool form", "[nn][attention]") {
  const Tensor m = nn::generate_square_subsequent_mask(3, kFloat64);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(m.to_vector() == std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0});
  CHECK(nn::generate_square_subsequent_mask(0).shape() == Shape{0, 0});
  test::require_error([] { nn::generate_square_subsequent_mask(-1); }, {"generate_square_subsequent_mask", "-1"});
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(8).dtype(kFloat64), 3);
  layer.eval();
  Generator gen(5);
  const Tensor x = Tensor::randn({3, 2, 4}, gen, kFloat64);
  const Tensor upper = ne(m, Tensor::zeros({3, 3}, kFloat64));  // true above the diagonal
  CHECK(bit_equal(layer.forward(x, m), layer.forward(x, upper)));
  // Causal: the first position's output does not depend on the later ones.
  Tensor y = x.clone_data();
  y.data<double>()[2 * 2 * 4 - 1] += 1;  // last position, last sample, last feature
  const Tensor a = layer.forward(x, m), b = layer.forward(y, m);
  for (std::int64_t i = 0; i < 8; ++i)
    CHECK(a.to_vector()[static_cast<std::size_t>(i)] == b.to_vector()[static_cast<std::size_t>(i)]);
  CHECK(a.to_vector()[23] != b.to_vector()[23]);
}

TEST_CASE("TransformerEncoder: its layers start as copies of the given layer", "[nn][attention]") {
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(8), 3);
  nn::TransformerEncoder enc(layer, 3);
  REQUIRE(enc.layers().size() == 3);
  const auto src = layer.named_parameters();
  std::vector<std::string> names;
  for (const auto& [n, p] : enc.named_parameters()) names.push_back(n);
  CHECK(names.front() == "layers.0.self_attn.in_proj_weight");
  CHECK(names.back() == "layers.2.norm2.bias");
  for (const auto& l : enc.layers()) {
    const auto ps = l->named_parameters();
    for (std::size_t i = 0; i < ps.size(); ++i) CHECK(bit_equal(ps[i].second, src[i].second));
  }
  test::require_error([&] { nn::TransformerEncoder(layer, 0); }, {"TransformerEncoder", "num_layers", "0"});
}

TEST_CASE("MultiheadAttention and TransformerEncoderLayer: train() applies dropout, eval() does not",
          "[nn][attention][dropout]") {
  Generator gen(4);
  const Tensor x = Tensor::randn({5, 2, 8}, gen);
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.5));
  CHECK(layer.is_training());
  const Tensor a = layer(x), b = layer(x);
  CHECK(!bit_equal(a, b));  // fresh dropout masks
  layer.eval();
  CHECK(!layer.self_attn->is_training());
  CHECK(bit_equal(layer(x), layer(x)));
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).dropout(0.5));
  auto [y1, w1] = mha.forward(x, x, x);
  // Dropped weights are 0 and kept ones scaled by 2 (averaged over heads: some entries exactly 0 or
  // larger than any softmax weight would allow are not guaranteed, so count exact zeros per head).
  auto [y2, w2] = mha.forward(x, x, x, Tensor(), true, Tensor(), false);
  std::int64_t zeros = 0;
  for (double v : w2.to_vector()) zeros += v == 0;
  CHECK(zeros > w2.numel() / 4);
  CHECK(zeros < 3 * w2.numel() / 4);
  mha.eval();
  auto [y3, w3] = mha.forward(x, x, x, Tensor(), true, Tensor(), false);
  for (double v : w3.to_vector()) CHECK(v > 0);
}

TEST_CASE("MultiheadAttention and TransformerEncoderLayer: bad options and inputs name the module and the shapes",
          "[nn][attention][errors]") {
  using test::require_error;
  require_error([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(10, 3)); },
                {"MultiheadAttention", "'embed_dim' = 10", "'num_heads' = 3"});
  require_error([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true)); },
                {"MultiheadAttention", "add_bias_kv"});
  require_error([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(8, 2).dropout(2)); },
                {"MultiheadAttention", "dropout", "2"});
  require_error([] { nn::TransformerEncoderLayer(10, 4); }, {"TransformerEncoderLayer", "d_model = 10", "nhead = 4"});
  require_error([] { nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation("tanh")); },
                {"TransformerEncoderLayer", "activation", "tanh"});
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = Tensor::zeros({5, 3, 8});
  require_error([&] { mha.forward(Tensor::zeros({5, 3, 7}), x, x); }, {"MultiheadAttention", "'query'", "(5, 3, 7)"});
  require_error([&] { mha.forward(x, Tensor::zeros({5, 2, 8}), x); }, {"MultiheadAttention", "'key'", "(5, 2, 8)"});
  require_error([&] { mha.forward(x, x, Tensor::zeros({4, 3, 8})); }, {"MultiheadAttention", "'value'", "(4, 3, 8)"});
  require_error(
      [&] {
        mha.forward(x, x, x, Tensor(), true, Tensor::zeros({5, 4}));
      },
      {"MultiheadAttention", "'attn_mask'", "(5, 4)", "(5, 5)", "(6, 5, 5)"});
  require_error(
      [&] {
        mha.forward(x, x, x, Tensor::zeros({5, 3}, kBool));
      },
      {"MultiheadAttention", "'key_padding_mask'", "(5, 3)", "(3, 5)"});
  require_error(
      [&] {
        mha.forward(x, x, x, Tensor::zeros({3, 5}, kFloat64));
      },
      {"MultiheadAttention", "'key_padding_mask'", "float64"});
  require_error([&] { mha.forward(x, x.to(kFloat64), x); }, {"MultiheadAttention", "'key'", "float64"});
  require_error([&] { mha.forward(x, Tensor::zeros({5, 8}), x); }, {"MultiheadAttention", "(5, 8)", "3-d"});
  require_error([&] { mha.forward(Tensor::zeros({8}), x, x); }, {"MultiheadAttention", "'query'", "(8,)"});
}

TEST_CASE("TransformerEncoderLayer: forward and backward are bit-identical with 1 and 2 threads, dropout included",
          "[nn][attention][threads]") {
  Generator gen(6);
  const Tensor x = Tensor::randn({24, 16, 32}, gen);
  test::require_thread_deterministic([&] {
    nn::TransformerEncoderLayer layer(
        nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).dropout(0.2).batch_first(true), 7);
    Tensor in = x.clone_data().set_requires_grad();
    const Tensor y = layer.forward(in, nn::generate_square_subsequent_mask(16));
    sum(mul(y, y)).backward();
    Tensors out{y, in.grad()};
    for (const auto& p : layer.parameters()) out.push_back(p.grad());
    return out;
  });
}

TEST_CASE("MultiheadAttention: second derivatives (create_graph) pass gradgradcheck, causal mask and weights",
          "[nn][attention][create_graph]") {
  // The module's ops all record their backwards (scaled_dot_product_attention included), so the
  // gradient with respect to the input can be differentiated again: gradgradcheck in float64, with
  // torch's float causal mask (-inf above the diagonal) and the averaged weights in the output.
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(4, 2).batch_first(true).dtype(kFloat64), 3);
  mha.eval();
  Generator gen(8);
  const Tensor x = test::randn_leaf({2, 3, 4}, gen), mask = nn::generate_square_subsequent_mask(3, kFloat64);
  const GradcheckReport rep = gradgradcheck(
      [&](const Tensors& in) {
        const auto [y, w] = mha.forward(in[0], in[0], in[0], Tensor(), true, mask);
        return concat({flatten(y), flatten(w)});
      },
      {x});
  INFO(rep.message);
  CHECK(rep.ok);
}

TEST_CASE("MultiheadAttention: options out of range name the option, before any allocation",
          "[nn][attention][errors]") {
  using test::require_error;
  require_error([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(8, 0)); },
                {"MultiheadAttention", "'num_heads'", "positive", "got 0"});
  require_error([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(0, 1)); },
                {"MultiheadAttention", "'embed_dim'", "positive", "got 0"});
  // parameters no machine can hold: refused naming embed_dim (int64 overflow, then memory)
  for (const std::int64_t e : {std::int64_t{1} << 40, std::int64_t{1} << 62})
    require_error([e] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(e, 1)); },
                  {"MultiheadAttention", "'embed_dim'"});
}

TEST_CASE(
    "MultiheadAttention and TransformerEncoderLayer over a block-sparse layout equal the dense ones under "
    "the layout's mask",
    "[nn][attention][block_sparse]") {
  // 37 tokens in blocks of 8 (5 blocks): a window of one block each side plus global block 0.
  const std::int64_t L = 37, E = 16, H = 4, block = 8;
  const nn::AttentionLayoutFn fn = [](std::int64_t nq, std::int64_t nk) {
    return layout_union({sliding_window_layout(nq, nk, 1), global_layout(nq, nk, {0})});
  };
  const CsrPattern layout = fn(5, 5);
  // torch's attn_mask convention: true = not allowed.
  Tensor hidden = Tensor::empty({L, L}, kBool);
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t s = 0; s < L; ++s) {
      bool stored = false;
      for (auto k = layout.crow()[static_cast<std::size_t>(l / block)];
           k < layout.crow()[static_cast<std::size_t>(l / block + 1)]; ++k)
        stored |= layout.col()[static_cast<std::size_t>(k)] == s / block;
      hidden.data<bool>()[l * L + s] = !stored || s > l;  // the causal case below
    }
  Generator gen(3);
  const Tensor x = Tensor::randn({2, L, E}, gen, kFloat64);
  nn::MultiheadAttention dense(nn::MultiheadAttentionOptions(E, H).batch_first(true).dtype(kFloat64), 5);
  nn::MultiheadAttention sparse(
      nn::MultiheadAttentionOptions(E, H).batch_first(true).dtype(kFloat64).block_sparse({block, fn, true}), 5);
  const Tensor yd = dense.forward(x, x, x, Tensor(), false, hidden).first;
  const Tensor ys = sparse.forward(x, x, x, Tensor(), false).first;
  CHECK(allclose(ys, yd, 1e-12, 1e-12));
  CHECK_THROWS_WITH(sparse.forward(x, x, x), Catch::Contains("MultiheadAttention") && Catch::Contains("need_weights"));
  CHECK_THROWS_WITH(nn::MultiheadAttention(nn::MultiheadAttentionOptions(E, H).block_sparse({8, nullptr, false})),
                    Catch::Contains("MultiheadAttention") && Catch::Contains("'block_sparse'"));

  nn::TransformerEncoderLayer dense_layer(
      nn::TransformerEncoderLayerOptions(E, H).batch_first(true).dropout(0.0).dtype(kFloat64), 7);
  nn::TransformerEncoderLayer sparse_layer(
      nn::TransformerEncoderLayerOptions(E, H).batch_first(true).dropout(0.0).dtype(kFloat64).block_sparse(
          {block, fn, true}),
      7);
  CHECK(allclose(sparse_layer.forward(x), dense_layer.forward(x, hidden), 1e-12, 1e-12));
}
