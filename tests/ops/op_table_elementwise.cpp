// The op table's entries for elementwise arithmetic and comparisons, unary math and activations (op_table_common.hpp,
// op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// ---- the table ----------------------------------------------------------------------------------

// The entries of elementwise.hpp: binary, scalar, unary, comparison ops.
void add_elementwise_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  const std::string TT = "Tensor,Tensor";
  // elementwise.hpp: binary ops (a (batch..., n, m) op b (m))
  t.push_back(binary("add", "add(" + TT + ")", "out = a + b", [](auto& a, auto& b) { return add(a, b); }));
  t.push_back(binary("sub", "sub(" + TT + ")", "out = a - b", [](auto& a, auto& b) { return sub(a, b); }));
  t.push_back(binary("mul", "mul(" + TT + ")", "out = a * b", [](auto& a, auto& b) { return mul(a, b); }));
  t.push_back(binary(
      "div", "div(" + TT + ")", "out = a / b", [](auto& a, auto& b) { return div(a, b); }, D::normal, D::nonzero));
  t.push_back(binary(
      "pow", "pow(" + TT + ")", "out = torch.pow(a, b)", [](auto& a, auto& b) { return pow(a, b); }, D::positive));
  t.push_back(binary("maximum", "maximum(" + TT + ")", "out = torch.maximum(a, b)",
                     [](auto& a, auto& b) { return maximum(a, b); }));
  t.push_back(binary("minimum", "minimum(" + TT + ")", "out = torch.minimum(a, b)",
                     [](auto& a, auto& b) { return minimum(a, b); }));
  // scalar forms and s / x
  t.push_back(scalar_form("add_scalar", "add(Tensor,double)", "out = a + 1.5", [](auto& a) { return add(a, 1.5); }));
  t.push_back(scalar_form("sub_scalar", "sub(Tensor,double)", "out = a - 1.5", [](auto& a) { return sub(a, 1.5); }));
  t.push_back(scalar_form("mul_scalar", "mul(Tensor,double)", "out = a * -2.5", [](auto& a) { return mul(a, -2.5); }));
  t.push_back(scalar_form("div_scalar", "div(Tensor,double)", "out = a / 3.0", [](auto& a) { return div(a, 3.0); }));
  t.push_back(scalar_form(
      "rdiv_scalar", "operator/(double,Tensor)", "out = 2.0 / a", [](auto& a) { return 2.0 / a; }, D::nonzero));
  t.back().op = "div";
  t.push_back(scalar_form(
      "pow_scalar", "pow(Tensor,double)", "out = torch.pow(a, 2.5)", [](auto& a) { return pow(a, 2.5); }, D::positive));
  t.push_back(scalar_form("pow_scalar_int", "pow(Tensor,double)", "out = torch.pow(a, 3.0)",
                          [](auto& a) { return pow(a, 3.0); }));
  // unary
  t.push_back(unary("neg", "neg(Tensor)", "out = -a", [](auto& x) { return neg(x); }));
  t.push_back(unary("exp", "exp(Tensor)", "out = torch.exp(a)", [](auto& x) { return exp(x); }));
  t.push_back(unary(
      "log", "log(Tensor)", "out = torch.log(a)", [](auto& x) { return log(x); }, D::positive));
  t.push_back(unary(
      "sqrt", "sqrt(Tensor)", "out = torch.sqrt(a)", [](auto& x) { return sqrt(x); }, D::positive));
  t.push_back(unary("abs", "abs(Tensor)", "out = torch.abs(a)", [](auto& x) { return abs(x); }));
  t.push_back(unary("tanh", "tanh(Tensor)", "out = torch.tanh(a)", [](auto& x) { return tanh(x); }));
  t.push_back(unary("sigmoid", "sigmoid(Tensor)", "out = torch.sigmoid(a)", [](auto& x) { return sigmoid(x); }));
  t.push_back(unary("relu", "relu(Tensor)", "out = torch.relu(a)", [](auto& x) { return relu(x); }));
  {
    OpInfo op = unary("clamp", "clamp(Tensor,double,double)", "out = torch.clamp(a, -0.5, 0.7)",
                      [](auto& x) { return clamp(x, -0.5, 0.7); });
    op.errors = {{"lo > hi",
                  [] {
                    clamp(Tensor::zeros({2, 3}, kFloat64), 1.0, 0.0);
                  },
                  {"clamp", "'lo'", "(2, 3)"}},
                 {"NaN bound", [] { clamp(Tensor::zeros({2}, kFloat64), NAN, 1.0); }, {"clamp", "NaN"}}};
    op.name = "clamp";
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "where";
    op.signature = "where(Tensor,Tensor,Tensor)";
    op.torch = "out = torch.where(c != 0, a, b)";
    op.call = [](const Tensors& in) { return where(in[0], in[1], in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
      return SampleInput{
          {{"c", values(sh, g, dt, D::mask), false}, {"a", values(sh, g, dt)}, {"b", values({s.sizes[1]}, g, dt)}},
          {},
          {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {
        {"cond that does not broadcast",
         [] {
           where(Tensor::zeros({4}, kFloat64), Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
         },
         {"where", "(4,)", "(2, 3)"}},
        {"dtype mix",
         [] { where(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat32)); },
         {"where", "dtype"}}};
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "masked_select";
    op.signature = "masked_select(Tensor,Tensor)";
    op.torch = "out = torch.masked_select(a, m != 0)";
    op.call = [](const Tensors& in) { return masked_select(in[0], in[1]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                          {"m", values({s.sizes[1]}, g, dt, D::mask), false}},
                         {},
                         {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.errors = {{"mask broadcasting beyond x",
                  [] {
                    masked_select(Tensor::zeros({3}, kFloat64), Tensor::zeros({2, 3}, kFloat64));
                  },
                  {"masked_select", "(2, 3)", "(3,)"}}};
    t.push_back(op);
  }
  // comparisons: 0/1 in the inputs' dtype, no gradient
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{{"gt", ">", &gt},
                                                                                                   {"lt", "<", &lt},
                                                                                                   {"ge", ">=", &ge},
                                                                                                   {"le", "<=", &le},
                                                                                                   {"eq", "==", &eq},
                                                                                                   {"ne", "!=", &ne}}) {
    // bool results, compared here as 0/1 in the inputs' dtype
    OpInfo op = binary(name, name + "(" + TT + ")", fmt::format("out = (a {} b).to(a.dtype)", py),
                       [fn](auto& a, auto& b) { return fn(a, b).to(a.dtype()); });
    op.differentiable = false;
    std::erase_if(op.errors, [](const ErrorCase& e) { return e.what == "dtype mix"; });  // promoted, not refused
    // equal values must occur for eq/ne/ge/le to mean anything: round the samples to halves
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      auto halves = [&](const Shape& sh) {
        Tensor v = values(sh, g, kFloat64);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = std::round(2 * p[i]) / 2;
        return v.to(dt);
      };
      if (s.scalar) return SampleInput{{{"a", halves({})}, {"b", halves({})}}, {}, {}};
      return SampleInput{
          {{"a", halves(bshape(s.batch, {s.sizes[0], s.sizes[1]}))}, {"b", halves({s.sizes[1]})}}, {}, {}};
    };
    t.push_back(op);
  }

  // both operands broadcast: a (batch..., n, 1) op b (m) -> (batch..., n, m); gradients summed on both sides
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"add", "a + b", &add}, {"mul", "a * b", &mul}, {"maximum", "torch.maximum(a, b)", &maximum}}) {
    OpInfo op =
        binary(name + "_outer", name + "(" + TT + ")", "out = " + py, [fn](auto& a, auto& b) { return fn(a, b); });
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{
          {{"a", values(bshape(s.batch, {s.sizes[0], 1}), g, dt)}, {"b", values({s.sizes[1]}, g, dt)}}, {}, {}};
    };
    op.supports_scalar = false;
    t.push_back(op);
  }
}

// The entries of unary_math.hpp and activation.hpp.
void add_unary_math_activation_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  const std::string TT = "Tensor,Tensor";
  // unary_math.hpp and activation.hpp (one block). Samples stay inside each op's domain and away from
  // its poles, kinks and jumps: uniform on [lo, hi) where the domain is bounded.
  {
    const std::size_t first = t.size();
    auto in_range = [](OpInfo op, double lo, double hi) {
      op.sample = [lo, hi](Dtype dt, const SampleSpec& s, Generator& g) {
        Tensor v = values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]}), g, kFloat64, D::unit);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = lo + (hi - lo) * p[i];
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
      return op;
    };
    using U = Tensor (*)(const Tensor&);
    struct Math {
      const char* name;
      U fn;
      Domain d;
      double lo = 0, hi = 0;  // a uniform range instead of d when lo < hi
    };
    for (const Math& m : std::vector<Math>{{"sin", &sin, D::normal},
                                           {"cos", &cos, D::normal},
                                           {"tan", &tan, D::normal, -1.2, 1.2},
                                           {"asin", &asin, D::normal, -0.9, 0.9},
                                           {"acos", &acos, D::normal, -0.9, 0.9},
                                           {"atan", &atan, D::normal},
                                           {"sinh", &sinh, D::normal},
                                           {"cosh", &cosh, D::normal},
                                           {"log1p", &log1p, D::normal, -0.7, 3.0},
                                           {"expm1", &expm1, D::normal},
                                           {"log2", &log2, D::positive},
                                           {"log10", &log10, D::positive},
                                           {"erf", &erf, D::normal},
                                           {"erfc", &erfc, D::normal},
                                           {"rsqrt", &rsqrt, D::positive},
                                           {"reciprocal", &reciprocal, D::nonzero},
                                           {"sign", &sign, D::normal},
                                           {"floor", &floor, D::normal},
                                           {"ceil", &ceil, D::normal},
                                           {"round", static_cast<U>(&round), D::normal},
                                           {"trunc", &trunc, D::normal}}) {
      OpInfo op = unary(
          m.name, std::string(m.name) + "(Tensor)", fmt::format("out = torch.{}(a)", m.name),
          [fn = m.fn](auto& x) { return fn(x); }, m.d);
      t.push_back(m.lo < m.hi ? in_range(op, m.lo, m.hi) : op);
    }
    t.push_back(unary("round_decimals", "round(Tensor,int64_t)", "out = torch.round(a, decimals=2)",
                      [](auto& x) { return round(x, 2); }));
    t.push_back(in_range(unary("round_decimals_negative", "round(Tensor,int64_t)", "out = torch.round(a, decimals=-2)",
                               [](auto& x) { return round(x, -2); }),
                         -300.0, 300.0));
    using B = Tensor (*)(const Tensor&, const Tensor&);
    for (auto [name, fn] : std::vector<std::pair<std::string, B>>{
             {"atan2", &atan2}, {"fmod", static_cast<B>(&fmod)}, {"remainder", static_cast<B>(&remainder)}})
      t.push_back(binary(
          name, name + "(" + TT + ")", fmt::format("out = torch.{}(a, b)", name),
          [fn](auto& a, auto& b) { return fn(a, b); }, D::normal, D::nonzero));
    t.push_back(scalar_form("fmod_scalar", "fmod(Tensor,double)", "out = torch.fmod(a, 0.75)",
                            [](auto& a) { return fmod(a, 0.75); }));
    t.push_back(scalar_form("remainder_scalar", "remainder(Tensor,double)", "out = torch.remainder(a, -0.75)",
                            [](auto& a) { return remainder(a, -0.75); }));
    {
      OpInfo op = unary("clamp_min", "clamp_min(Tensor,double)", "out = torch.clamp_min(a, 0.3)",
                        [](auto& x) { return clamp_min(x, 0.3); });
      op.errors = {{"NaN bound",
                    [] {
                      clamp_min(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"clamp_min", "'min'", "NaN", "(2, 3)"}}};
      t.push_back(op);
      op = unary("clamp_max", "clamp_max(Tensor,double)", "out = torch.clamp_max(a, -0.2)",
                 [](auto& x) { return clamp_max(x, -0.2); });
      op.errors = {{"NaN bound",
                    [] {
                      clamp_max(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"clamp_max", "'max'", "NaN", "(2, 3)"}}};
      t.push_back(op);
    }
    // activations
    const std::string F = "out = torch.nn.functional.";
    {
      OpInfo op = unary("gelu", "gelu(Tensor,string_view)", F + "gelu(a)", [](auto& x) { return gelu(x); });
      op.errors = {
          {"unknown approximate", [] { gelu(Tensor::zeros({2}, kFloat64), "erf"); }, {"gelu", "'approximate'", "erf"}}};
      t.push_back(op);
      t.push_back(unary("gelu_tanh", "gelu(Tensor,string_view)", F + "gelu(a, approximate='tanh')",
                        [](auto& x) { return gelu(x, "tanh"); }));
    }
    t.push_back(unary("silu", "silu(Tensor)", F + "silu(a)", [](auto& x) { return silu(x); }));
    {
      OpInfo op =
          unary("softplus", "softplus(Tensor,double,double)", F + "softplus(a)", [](auto& x) { return softplus(x); });
      op.errors = {{"beta 0", [] { softplus(Tensor::zeros({2}, kFloat64), 0.0); }, {"softplus", "'beta'", "0"}},
                   {"NaN threshold",
                    [] { softplus(Tensor::zeros({2}, kFloat64), 1.0, NAN); },
                    {"softplus", "'threshold'", "nan"}}};
      t.push_back(op);
      // both sides of the threshold: beta x > 1 for x > 0.5
      t.push_back(unary("softplus_beta_threshold", "softplus(Tensor,double,double)",
                        F + "softplus(a, beta=2.0, threshold=1.0)", [](auto& x) { return softplus(x, 2.0, 1.0); }));
    }
    t.push_back(unary("mish", "mish(Tensor)", F + "mish(a)", [](auto& x) { return mish(x); }));
    {
      // dropout (ops/dropout.hpp): every call draws from a generator seeded alike, so the mask is fixed
      // and the op is linear in x. The reference recomputes the mask from Philox4x32-10 in numpy with
      // the layout of Note [Counter-based random numbers]: element 64g + 16k + l is dropped when word
      // k of block 16g + l is below p * 2^32.
      const std::string philox_mask =
          "import numpy as np\n"
          "def philox_words(key, blocks):\n"
          "    M = np.uint64(0xffffffff)\n"
          "    c = np.arange(blocks, dtype=np.uint64)\n"
          "    c0, c1 = c & M, c >> np.uint64(32)\n"
          "    c2, c3 = np.zeros(blocks, np.uint64), np.zeros(blocks, np.uint64)\n"
          "    k0, k1 = np.uint64(key & 0xffffffff), np.uint64(key >> 32)\n"
          "    for _ in range(10):\n"
          "        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2\n"
          "        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & M, p1 & M, "
          "((p0 >> np.uint64(32)) ^ c3 ^ k1) & M, p0 & M\n"
          "        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & M, (k1 + np.uint64(0xBB67AE85)) & M\n"
          "    return np.stack([c0, c1, c2, c3])\n"
          "n = a.numel()\n"
          "w = philox_words(1234, (n + 63) // 64 * 16)\n"
          "i = np.arange(n)\n"
          "word = w[(i % 64) // 16, 16 * (i // 64) + i % 16]\n"
          "keep = torch.from_numpy((word >= np.uint64(int(np.ldexp(0.3, 32)))).reshape(tuple(a.shape)))\n"
          "out = a * torch.where(keep, torch.tensor(1 / 0.7, dtype=a.dtype), torch.tensor(0.0, dtype=a.dtype))\n";
      OpInfo op = unary("dropout", "dropout(Tensor,double,bool,Generator)", philox_mask, [](auto& x) {
        Generator g(1234);
        return dropout(x, 0.3, true, g);
      });
      op.errors = {{"p above 1",
                    [] {
                      dropout(Tensor::zeros({2, 3}, kFloat64), 1.5, true);
                    },
                    {"dropout", "'p'", "1.5"}},
                   {"NaN p",
                    [] {
                      dropout(Tensor::zeros({2, 3}, kFloat64), NAN, true);
                    },
                    {"dropout", "'p'", "nan"}}};
      t.push_back(op);
    }
    {
      OpInfo op =
          unary("leaky_relu", "leaky_relu(Tensor,double)", F + "leaky_relu(a)", [](auto& x) { return leaky_relu(x); });
      op.errors = {{"NaN slope",
                    [] {
                      leaky_relu(Tensor::zeros({2, 3}, kFloat64), NAN);
                    },
                    {"leaky_relu", "'negative_slope'", "(2, 3)"}}};
      t.push_back(op);
      t.push_back(unary("leaky_relu_slope", "leaky_relu(Tensor,double)", F + "leaky_relu(a, 0.2)",
                        [](auto& x) { return leaky_relu(x, 0.2); }));
    }
    {
      OpInfo op = unary("elu", "elu(Tensor,double)", F + "elu(a)", [](auto& x) { return elu(x); });
      op.errors = {{"NaN alpha", [] { elu(Tensor::zeros({2, 3}, kFloat64), NAN); }, {"elu", "'alpha'", "(2, 3)"}}};
      t.push_back(op);
      t.push_back(
          unary("elu_alpha", "elu(Tensor,double)", F + "elu(a, alpha=0.5)", [](auto& x) { return elu(x, 0.5); }));
    }
    t.push_back(unary("selu", "selu(Tensor)", F + "selu(a)", [](auto& x) { return selu(x); }));
    {
      OpInfo op =
          unary("hardtanh", "hardtanh(Tensor,double,double)", F + "hardtanh(a)", [](auto& x) { return hardtanh(x); });
      op.errors = {{"min_val > max_val",
                    [] {
                      hardtanh(Tensor::zeros({2, 3}, kFloat64), 1.0, -1.0);
                    },
                    {"hardtanh", "'min_val'", "(2, 3)"}},
                   {"NaN bound",
                    [] {
                      hardtanh(Tensor::zeros({2, 3}, kFloat64), -1.0, NAN);
                    },
                    {"hardtanh", "'max_val'", "NaN"}}};
      t.push_back(op);
      t.push_back(unary("hardtanh_bounds", "hardtanh(Tensor,double,double)", F + "hardtanh(a, -0.5, 0.8)",
                        [](auto& x) { return hardtanh(x, -0.5, 0.8); }));
    }
    t.push_back(unary("logsigmoid", "logsigmoid(Tensor)", F + "logsigmoid(a)", [](auto& x) { return logsigmoid(x); }));
    t.push_back(unary("hardswish", "hardswish(Tensor)", F + "hardswish(a)", [](auto& x) { return hardswish(x); }));
    t.push_back(
        unary("hardsigmoid", "hardsigmoid(Tensor)", F + "hardsigmoid(a)", [](auto& x) { return hardsigmoid(x); }));
    t.push_back(unary("softsign", "softsign(Tensor)", F + "softsign(a)", [](auto& x) { return softsign(x); }));
    // every input in turn as an integer tensor: refused, naming the op, the argument and the dtype
    for (std::size_t k = first; k < t.size(); ++k) {
      OpInfo& op = t[k];
      const std::string opname = op.signature.substr(0, op.signature.find('('));
      Generator g(1);
      const SampleInput si = op.sample(kFloat64, {op.small, {}}, g);
      for (std::size_t i = 0; i < si.inputs.size(); ++i) {
        Tensors args;
        for (const auto& in : si.inputs) args.push_back(in.value);
        args[i] = args[i].to(kInt64);
        op.errors.push_back(
            {"integer " + si.inputs[i].name, [call = op.call, args] { call(args); }, {opname, "int64"}});
      }
    }
  }
}

}  // namespace xgrad::test::table
