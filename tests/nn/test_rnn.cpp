// nn::LSTMCell, GRUCell, LSTM and GRU against torch.nn's (tests/nn/rnn_parity.py): the same weights
// (copied by torch's parameter names), the same input and initial states; outputs, final states and
// the gradients of the input, the states and every parameter must agree. Also: reprs as torch's,
// dropout between layers switched by train()/eval(), bit-identical training steps with 1 and 2
// threads, the same values from a forward without a graph, and the bad-input messages.
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/nn/rnn.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/rnn.hpp"
#include "xgrad/ops/shape_ops.hpp"

using namespace xgrad;

namespace {

struct Case {
  std::string kind;  // lstm, gru, lstm_cell, gru_cell
  std::int64_t input_size = 3, hidden = 4, num_layers = 1;
  bool bias = true, batch_first = false, bidirectional = false;
  std::int64_t seq = 5, batch = 2;
  bool states = false;     // give h0 (and c0)
  bool unbatched = false;  // no batch dimension
  Dtype dtype = kFloat64;
};

std::string printed(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

// Runs one case with xgrad, writes what rnn_parity.py needs into dir; returns the case's JSON and our repr.
std::pair<std::string, std::string> run_case(const Case& c, int index, const test::TempDir& dir) {
  const std::string name = fmt::format("case{}", index);
  auto path = [&](const std::string& what) { return dir.file(name + "__" + what + ".npy"); };
  Generator gen(100 + index);
  const bool cell = c.kind.ends_with("_cell"), lstm = c.kind.starts_with("lstm");
  std::shared_ptr<nn::Module> module;
  if (c.kind == "lstm")
    module = std::make_shared<nn::LSTM>(c.input_size, c.hidden, c.num_layers, c.bias, c.batch_first, 0.0,
                                        c.bidirectional, c.dtype, index);
  else if (c.kind == "gru")
    module = std::make_shared<nn::GRU>(c.input_size, c.hidden, c.num_layers, c.bias, c.batch_first, 0.0,
                                       c.bidirectional, c.dtype, index);
  else if (c.kind == "lstm_cell")
    module = std::make_shared<nn::LSTMCell>(c.input_size, c.hidden, c.bias, c.dtype, index);
  else
    module = std::make_shared<nn::GRUCell>(c.input_size, c.hidden, c.bias, c.dtype, index);
  for (const auto& [pn, p] : module->named_parameters()) save_npy(path(pn), p);

  Shape xs = cell ? Shape{c.batch, c.input_size}
                  : (c.batch_first ? Shape{c.batch, c.seq, c.input_size} : Shape{c.seq, c.batch, c.input_size});
  if (c.unbatched) xs = cell ? Shape{c.input_size} : Shape{c.seq, c.input_size};
  const std::int64_t ld = cell ? 1 : c.num_layers * (c.bidirectional ? 2 : 1);
  Shape hs = cell ? Shape{c.batch, c.hidden} : Shape{ld, c.batch, c.hidden};
  if (c.unbatched) hs = cell ? Shape{c.hidden} : Shape{ld, c.hidden};
  Tensor x = Tensor::randn(xs, gen, c.dtype), h0, c0;
  x.set_requires_grad();
  save_npy(path("x"), x);
  if (c.states) {
    h0 = Tensor::randn(hs, gen, c.dtype);
    h0.set_requires_grad();
    save_npy(path("h0"), h0);
    if (lstm) {
      c0 = Tensor::randn(hs, gen, c.dtype);
      c0.set_requires_grad();
      save_npy(path("c0"), c0);
    }
  }
  Tensor out, hn, cn;
  if (c.kind == "lstm") {
    const auto r = static_cast<nn::LSTM&>(*module).forward(x, h0, c0);
    out = r.output, hn = r.h_n, cn = r.c_n;
  } else if (c.kind == "gru") {
    const auto r = static_cast<nn::GRU&>(*module).forward(x, h0);
    out = r.output, hn = r.h_n;
  } else if (c.kind == "lstm_cell") {
    const Tensors r = static_cast<nn::LSTMCell&>(*module).forward(x, h0, c0);
    out = hn = r[0], cn = r[1];
  } else {
    out = hn = static_cast<nn::GRUCell&>(*module).forward(x, h0);
  }
  const Tensor r_out = Tensor::randn(out.shape(), gen, c.dtype), r_h = Tensor::randn(hn.shape(), gen, c.dtype);
  save_npy(path("r_out"), r_out);
  save_npy(path("r_h"), r_h);
  Tensor loss = add(sum(mul(out, r_out)), sum(mul(hn, r_h)));
  save_npy(path("ours_out"), out.detach());
  save_npy(path("ours_hn"), hn.detach());
  if (lstm) {
    const Tensor r_c = Tensor::randn(cn.shape(), gen, c.dtype);
    save_npy(path("r_c"), r_c);
    loss = add(loss, sum(mul(cn, r_c)));
    save_npy(path("ours_cn"), cn.detach());
  }
  loss.backward();
  auto grad_of = [](const Tensor& t) { return t.grad().defined() ? t.grad() : Tensor::zeros(t.shape(), t.dtype()); };
  save_npy(path("ours_grad_x"), grad_of(x));
  if (c.states) save_npy(path("ours_grad_h0"), grad_of(h0));
  if (c.states && lstm) save_npy(path("ours_grad_c0"), grad_of(c0));
  for (const auto& [pn, p] : module->named_parameters()) save_npy(path("ours_grad_" + pn), grad_of(p));
  const auto b = [](bool v) { return v ? "true" : "false"; };
  const std::string json =
      fmt::format(R"({{"name": "{}", "kind": "{}", "input_size": {}, "hidden": {}, "num_layers": {}, "bias": {}, )"
                  R"("batch_first": {}, "bidirectional": {}, "states": {}, "dtype": "{}"}})",
                  name, c.kind, c.input_size, c.hidden, c.num_layers, b(c.bias), b(c.batch_first), b(c.bidirectional),
                  b(c.states), dtype_name(c.dtype));
  return {json, printed(*module)};
}

}  // namespace

TEST_CASE("LSTM, GRU and their cells match torch.nn: outputs, states, every gradient, reprs", "[rnn][parity]") {
  std::vector<Case> cases;
  for (const char* kind : {"lstm", "gru"}) {
    Case c;
    c.kind = kind;
    cases.push_back(c);  // one layer, zero states
    Case deep = c;
    deep.num_layers = 3, deep.states = true, deep.hidden = 5;
    cases.push_back(deep);
    Case bf = c;
    bf.batch_first = true, bf.num_layers = 2, bf.states = true;
    cases.push_back(bf);
    Case bi = c;
    bi.bidirectional = true, bi.num_layers = 2, bi.states = true, bi.batch_first = true;
    cases.push_back(bi);
    Case nobias = c;
    nobias.bias = false, nobias.num_layers = 2;
    cases.push_back(nobias);
    Case one = c;
    one.seq = 1, one.states = true;
    cases.push_back(one);
    Case empty = c;
    empty.batch = 0, empty.num_layers = 2, empty.bidirectional = true;
    cases.push_back(empty);
    Case unb = c;
    unb.unbatched = true, unb.states = true, unb.num_layers = 2;
    cases.push_back(unb);
    Case f32 = deep;
    f32.dtype = kFloat32, f32.input_size = 16, f32.hidden = 32, f32.batch = 8, f32.seq = 12;
    cases.push_back(f32);
  }
  for (const char* kind : {"lstm_cell", "gru_cell"}) {
    Case c;
    c.kind = kind;
    cases.push_back(c);
    Case st = c;
    st.states = true, st.bias = false;
    cases.push_back(st);
    Case unb = c;
    unb.unbatched = true, unb.states = true;
    cases.push_back(unb);
    Case empty = c;
    empty.batch = 0;
    cases.push_back(empty);
  }
  test::TempDir dir("rnn_parity");
  std::string json = "[\n";
  std::vector<std::string> reprs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto [js, repr] = run_case(cases[i], static_cast<int>(i), dir);
    json += js + (i + 1 < cases.size() ? ",\n" : "\n]\n");
    reprs.push_back(repr);
  }
  {
    std::ofstream f(dir.file("cases.json"));
    f << json;
  }
  test::run_python_script("tests/nn/rnn_parity.py", dir.path.string());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case" << i << " (" << cases[i].kind << ")");
    CHECK(reprs[i] == test::read_bytes(dir.file(fmt::format("case{}__repr.txt", i))));
  }
}

TEST_CASE("LSTM and GRU reprs show the settings off their defaults, as torch", "[rnn][repr]") {
  CHECK(printed(nn::LSTM(3, 4, 2, false, true, 0.5, true)) ==
        "LSTM(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5, bidirectional=True)");
  CHECK(printed(nn::GRU(10, 20)) == "GRU(10, 20)");
  CHECK(printed(nn::GRUCell(3, 4, false)) == "GRUCell(3, 4, bias=False)");
  CHECK(printed(nn::LSTMCell(3, 4)) == "LSTMCell(3, 4)");
}

TEST_CASE("LSTM and GRU: torch's parameter names, shapes and init bounds", "[rnn]") {
  nn::LSTM lstm(3, 4, 2, true, false, 0.0, true);
  std::vector<std::string> names;
  for (const auto& [n, p] : lstm.named_parameters()) {
    names.push_back(n);
    for (double v : p.to_vector()) CHECK(std::abs(v) <= 0.5);  // U(-1/sqrt(4), 1/sqrt(4))
  }
  const std::vector<std::string> want = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  CHECK(names == want);
  CHECK(lstm.named_parameters()[8].second.shape() == Shape{16, 8});  // layer 1 reads both directions
  nn::GRU gru(3, 4, 1, false);
  REQUIRE(gru.named_parameters().size() == 2);
  CHECK(gru.named_parameters()[1].second.shape() == Shape{12, 4});
}

TEST_CASE("LSTM and GRU: dropout between layers in training mode only", "[rnn][dropout]") {
  Generator gen(5);
  const Tensor x = Tensor::randn({6, 3, 4}, gen, kFloat64);
  nn::GRU plain(4, 8, 3, true, false, 0.0, false, kFloat64, 1);
  nn::GRU dropped(4, 8, 3, true, false, 0.5, false, kFloat64, 1);  // same seed: the same weights
  const auto a = plain.forward(x).output.to_vector();
  const auto b = dropped.forward(x).output.to_vector();
  CHECK(a != b);  // training: masks between the layers
  dropped.eval();
  CHECK(dropped.forward(x).output.to_vector() == a);  // eval: no dropout
  nn::LSTM lstm(4, 8, 1, true, false, 0.5, false, kFloat64, 1);
  nn::LSTM lstm0(4, 8, 1, true, false, 0.0, false, kFloat64, 1);
  CHECK(lstm.forward(x).output.to_vector() == lstm0.forward(x).output.to_vector());  // no layer above: no dropout
}

TEST_CASE("LSTM and GRU: a training step is bit-identical with 1 and 2 threads", "[rnn][threads]") {
  for (const bool is_lstm : {true, false}) {
    test::require_thread_deterministic([&] {
      manual_seed(3);  // the layers draw from the default generator: the same weights in both runs
      Generator gen(3);
      const Tensor x = Tensor::randn({8, 64, 32}, gen, kFloat32);
      Tensors result;
      Tensor loss;
      std::shared_ptr<nn::Module> m;
      if (is_lstm) {
        auto l = std::make_shared<nn::LSTM>(32, 64, 2, true, true, 0.0, true);
        const auto r = l->forward(x);
        loss = add(sum(mul(r.output, r.output)), sum(r.c_n));
        result = {r.output, r.h_n, r.c_n};
        m = l;
      } else {
        auto g = std::make_shared<nn::GRU>(32, 64, 2);
        const auto r = g->forward(x);
        loss = sum(mul(r.output, r.output));
        result = {r.output, r.h_n};
        m = g;
      }
      loss.backward();
      for (const auto& p : m->parameters()) result.push_back(p.grad());
      return result;
    });
  }
}

TEST_CASE("LSTM and GRU: a forward without a graph gives the recording forward's values", "[rnn][nograd]") {
  // Without a graph the layer ops keep nothing and read the states in place (Note [Fused
  // recurrence]); the values must be the same bits. Hidden 13: vector lanes and a scalar tail.
  for (const Dtype dt : {kFloat32, kFloat64}) {
    Generator gen(11);
    const Tensor x = Tensor::randn({7, 5, 6}, gen, dt);
    const Tensor h0 = Tensor::randn({4, 5, 13}, gen, dt), c0 = Tensor::randn({4, 5, 13}, gen, dt);
    nn::LSTM lstm(6, 13, 2, true, false, 0.0, true, dt, 2);
    nn::GRU gru(6, 13, 2, true, false, 0.0, true, dt, 2);
    const auto lr = lstm.forward(x, h0, c0);
    const auto gr = gru.forward(x, h0);
    REQUIRE(lr.output.requires_grad());
    NoGradGuard guard;
    const auto ln = lstm.forward(x, h0, c0);
    const auto gn = gru.forward(x, h0);
    CHECK_FALSE(ln.output.requires_grad());
    CHECK(ln.output.to_vector() == lr.output.to_vector());
    CHECK(ln.h_n.to_vector() == lr.h_n.to_vector());
    CHECK(ln.c_n.to_vector() == lr.c_n.to_vector());
    CHECK(gn.output.to_vector() == gr.output.to_vector());
    CHECK(gn.h_n.to_vector() == gr.h_n.to_vector());
    // one step (the cells' path) and an empty sequence
    const Tensor x1 = slice(x, 0, 0, 1), x0 = slice(x, 0, 0, 0);
    CHECK(lstm.forward(x1, h0, c0).c_n.to_vector() == [&] {
      AutoGradMode on(true);
      return lstm.forward(x1, h0, c0).c_n.to_vector();
    }());
    CHECK(gru.forward(x0, h0).h_n.to_vector() == h0.to_vector());
    CHECK(lstm.forward(x0, h0, c0).c_n.to_vector() == c0.to_vector());
  }
}

TEST_CASE("LSTM, GRU and the cells refuse bad inputs naming the module, the argument and the shapes", "[rnn][errors]") {
  nn::LSTM lstm(3, 4, 2);
  nn::GRU gru(3, 4, 1, true, true);
  const Tensor x = Tensor::zeros({5, 2, 3});
  test::require_error(
      [&] {
        lstm.forward(Tensor::zeros({5, 2, 6}));
      },
      {"LSTM", "'input'", "(5, 2, 6)", "input_size = 3"});
  test::require_error([&] { lstm.forward(Tensor::zeros({3})); }, {"LSTM", "'input'", "(3,)"});
  test::require_error(
      [&] {
        lstm.forward(x, Tensor::zeros({1, 2, 4}), Tensor::zeros({2, 2, 4}));
      },
      {"LSTM", "'h0'", "(1, 2, 4)", "(2, 2, 4)"});
  test::require_error([&] { lstm.forward(x, Tensor::zeros({2, 2, 4})); }, {"LSTM", "h0", "c0"});
  test::require_error(
      [&] {
        gru.forward(Tensor::zeros({2, 5, 4}));
      },
      {"GRU", "'input'", "(2, 5, 4)", "(batch, seq_len, 3)"});
  test::require_error(
      [&] {
        gru.forward(Tensor::zeros({2, 5, 3}), Tensor::zeros({1, 5, 4}));
      },
      {"GRU", "'h0'", "(1, 5, 4)", "(1, 2, 4)"});
  test::require_error([&] { gru.forward(Tensor::zeros({2, 5, 3}, kFloat64)); }, {"gru_layer", "float64", "float32"});
  nn::LSTMCell cell(3, 4);
  test::require_error([&] { cell.forward(Tensor::zeros({2, 4})); }, {"LSTMCell", "'input'", "(2, 4)"});
  test::require_error([&] { cell.forward(Tensor::zeros({2, 3}), Tensor::zeros({2, 4})); }, {"LSTMCell", "h", "c"});
  test::require_error(
      [&] {
        cell.forward(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}), Tensor::zeros({3, 4}));
      },
      {"LSTMCell", "'h'", "(3, 4)", "(2, 4)"});
  nn::GRUCell gcell(3, 4);
  test::require_error(
      [&] {
        gcell.forward(Tensor::zeros({3}), Tensor::zeros({2, 4}));
      },
      {"GRUCell", "'h'", "(2, 4)", "(4,)"});
  test::require_error([] { nn::GRU(3, 4, 0); }, {"GRU", "num_layers", "0"});
  test::require_error([] { nn::LSTM(3, 4, 2, true, false, 1.5); }, {"LSTM", "dropout", "1.5"});
  test::require_error([] { nn::LSTMCell(-1, 4); }, {"LSTMCell", "input_size", "-1"});
}

TEST_CASE("lstm_layer and gru_layer: second derivatives (create_graph) match torch.autograd.grad",
          "[rnn][create_graph][parity]") {
  // The output is the first gradient with respect to every input (recorded, seeded by w); the
  // harness backpropagates into it, so the compared gradients are second derivatives.
  test::ParityBatch batch("rnn_create_graph");
  Generator gen(59);
  const std::int64_t T = 3, B = 2, I = 3, H = 4;
  for (const bool lstm : {true, false}) {
    const std::int64_t G = (lstm ? 4 : 3) * H;
    std::vector<test::ParityBatch::Input> in = {{"x", test::randn_leaf({T, B, I}, gen)},
                                                {"h", test::randn_leaf({B, H}, gen)}};
    if (lstm) in.push_back({"c", test::randn_leaf({B, H}, gen)});
    for (const char* name : {"w_ih", "w_hh", "b_ih", "b_hh"}) {
      const Shape shape = name[0] == 'w' ? Shape{G, name[2] == 'i' ? I : H} : Shape{G};
      in.push_back({name, test::randn_leaf(shape, gen) * 0.5});
    }
    in.push_back({"w", test::randn_leaf({T * B * H + (lstm ? 2 : 1) * B * H}, gen)});
    const std::string inputs = lstm ? "(x, h, c, w_ih, w_hh, b_ih, b_hh)" : "(x, h, w_ih, w_hh, b_ih, b_hh)";
    const std::string code = fmt::format(
        "hh = h\n{}outs = []\n"
        "for t in range(x.shape[0] - 1, -1, -1):\n"
        "    {}\n"
        "    outs.insert(0, hh)\n"
        "y = torch.cat([torch.stack(outs).flatten(), hh.flatten(){}])\n"
        "out = torch.cat([g.flatten() for g in torch.autograd.grad(y, {}, w, create_graph=True)])",
        lstm ? "cc = c\n" : "",
        lstm ? "hh, cc = torch.lstm_cell(x[t], (hh, cc), w_ih, w_hh, b_ih, b_hh)"
             : "hh = torch.gru_cell(x[t], hh, w_ih, w_hh, b_ih, b_hh)",
        lstm ? ", cc.flatten()" : "", inputs);
    const std::size_t n = in.size() - 1;
    batch.add(lstm ? "lstm_layer_reverse" : "gru_layer_reverse", code, in, [lstm, n](const Tensors& t) {
      const Tensors xs(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n));
      Tensors r = lstm ? lstm_layer(t[0], t[1], t[2], t[3], t[4], t[5], t[6], /*reverse=*/true)
                       : gru_layer(t[0], t[1], t[2], t[3], t[4], t[5], /*reverse=*/true);
      for (auto& ri : r) ri = flatten(ri);
      Tensors g = xgrad::grad({concat(r)}, xs, {t[n]}, std::nullopt, /*create_graph=*/true);
      for (auto& gi : g) gi = flatten(gi);
      return concat(g);
    });
  }
  batch.run();
}

TEST_CASE("LSTM: a gradient penalty (create_graph through nn::LSTM) has the finite-difference gradient",
          "[rnn][create_graph]") {
  // total(theta) = loss + |d loss / d x|^2, as in WGAN-GP or a Jacobian regulariser. Its gradient
  // with respect to the parameters (one backward through the recorded first backward) must match
  // central differences of total, computed with first-order gradients only.
  nn::LSTM lstm(3, 4, /*num_layers=*/2, true, false, 0.0, /*bidirectional=*/true, kFloat64, 7);
  Generator gen(13);
  Tensor x = test::randn_leaf({4, 2, 3}, gen);
  const auto total = [&](bool create_graph) {
    const nn::LSTMOutput r = lstm.forward(x);
    const Tensor loss = sum(tanh(r.output) * r.output) + sum(r.c_n * r.h_n);
    const Tensor gx = xgrad::grad({loss}, {x}, {}, std::nullopt, create_graph)[0];
    return loss + sum(gx * gx);
  };
  const Tensor t = total(true);
  t.backward();
  const double h = 1e-6;
  int checked = 0;
  for (auto [name, p] : lstm.named_parameters()) {
    REQUIRE(p.grad().defined());
    double* data = p.data<double>();
    const std::vector<double> g = p.grad().to_vector();
    for (std::int64_t i = 0; i < p.numel(); i += 7) {  // a spread of entries of every parameter
      const double keep = data[i];
      data[i] = keep + h;
      const double up = total(false).item<double>();
      data[i] = keep - h;
      const double down = total(false).item<double>();
      data[i] = keep;
      const double fd = (up - down) / (2 * h);
      INFO(name << "[" << i << "]: backward " << g[static_cast<std::size_t>(i)] << ", finite differences " << fd);
      CHECK(std::abs(g[static_cast<std::size_t>(i)] - fd) < 1e-6 * (1 + std::abs(fd)));
      ++checked;
    }
  }
  CHECK(checked > 20);
  // and the input's own gradient of total (second derivatives with respect to x)
  const std::vector<double> gx = x.grad().to_vector();
  double* xd = x.data<double>();
  for (std::int64_t i = 0; i < x.numel(); i += 5) {
    const double keep = xd[i];
    xd[i] = keep + h;
    const double up = total(false).item<double>();
    xd[i] = keep - h;
    const double down = total(false).item<double>();
    xd[i] = keep;
    CHECK(std::abs(gx[static_cast<std::size_t>(i)] - (up - down) / (2 * h)) <
          1e-6 * (1 + std::abs(gx[static_cast<std::size_t>(i)])));
  }
}

TEST_CASE("lstm_layer and gru_layer: create_graph at degenerate sizes gives the first-order gradients",
          "[rnn][create_graph]") {
  // (seq, batch): no step, no batch row, one of each; the recorded backward must give the first-order
  // kernel's values (the states passing through when there is no step), and a second backward must run.
  const std::int64_t I = 3, H = 2;
  for (const auto& [T, B] : std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {3, 0}, {1, 1}})
    for (const bool lstm : {true, false}) {
      INFO((lstm ? "lstm" : "gru") << " seq=" << T << " batch=" << B);
      Generator gen(4);
      const std::int64_t G = (lstm ? 4 : 3) * H;
      Tensors in = {test::randn_leaf({T, B, I}, gen), test::randn_leaf({B, H}, gen)};
      if (lstm) in.push_back(test::randn_leaf({B, H}, gen));
      for (const Shape& s : {Shape{G, I}, Shape{G, H}, Shape{G}, Shape{G}}) in.push_back(test::randn_leaf(s, gen));
      const Tensors r = lstm ? lstm_layer(in[0], in[1], in[2], in[3], in[4], in[5], in[6])
                             : gru_layer(in[0], in[1], in[2], in[3], in[4], in[5]);
      Tensors seeds;
      for (const auto& t : r) seeds.push_back(Tensor::randn(t.shape(), gen, kFloat64));
      const Tensors first = xgrad::grad(r, in, seeds, true);
      const Tensors graph = xgrad::grad(r, in, seeds, true, /*create_graph=*/true);
      Tensor total = Tensor::zeros({}, kFloat64);
      for (std::size_t i = 0; i < in.size(); ++i) {
        REQUIRE(graph[i].shape() == in[i].shape());
        const auto [abs_err, ref] = test::max_error(graph[i].to_vector(), first[i].to_vector());
        CHECK(abs_err <= 1e-12 * (1 + ref));
        total = total + sum(graph[i] * graph[i] * graph[i]);
      }
      if (total.requires_grad()) {
        const Tensors second =
            xgrad::grad({total}, in, {}, std::nullopt, /*create_graph=*/false, /*allow_unused=*/true);
        for (std::size_t i = 0; i < in.size(); ++i) CHECK((!second[i].defined() || second[i].shape() == in[i].shape()));
      }
    }
}
