// The op table's entries for ops/elementwise.hpp: binary, scalar, unary and comparison ops, and the
// logical ops and masked_fill on integer and bool dtypes (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

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

  // ---- integer and bool dtypes (elementwise.hpp) ---------------------------------------------
  {
    OpInfo op;
    op.name = "masked_fill";
    op.signature = "masked_fill(Tensor,Tensor,double)";
    op.torch = "out = x.masked_fill(m != 0, 0.5)";
    op.call = [](const Tensors& in) {  // the sample's 0/1 mask as bool (a float mask is refused)
      return masked_fill(in[0], in[1].defined() && is_floating_point(in[1].dtype()) ? in[1].to(kBool) : in[1], 0.5);
    };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      if (s.scalar) return SampleInput{{{"x", values({}, g, dt)}, {"m", values({}, g, dt, D::mask), false}}, {}, {}};
      return SampleInput{{{"x", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                          {"m", values({s.sizes[1]}, g, dt, D::mask), false}},
                         {},
                         {}};
    };
    op.size_names = {"n", "m"};
    op.small = {3, 4};
    op.threads = {200, 200};
    op.supports_batch = true;
    op.supports_scalar = true;
    op.int64_inputs = {"*"};
    op.errors = {{"mask broadcasting beyond x",
                  [] {
                    masked_fill(Tensor::zeros({3}), Tensor::zeros({2, 3}, kBool), 1.0);
                  },
                  {"masked_fill", "(2, 3)", "(3,)"}},
                 {"float mask",
                  [] { masked_fill(Tensor::zeros({3}), Tensor::ones({3}, kFloat64), 1.0); },
                  {"masked_fill", "argument 'mask'", "float64", "(3,)"}}};
    t.push_back(op);
  }
  for (auto [name, py, fn] :
       std::vector<std::tuple<std::string, std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"logical_and", "torch.logical_and", &logical_and},
           {"logical_or", "torch.logical_or", &logical_or},
           {"logical_xor", "torch.logical_xor", &logical_xor}}) {
    OpInfo op = binary(
        name, name + "(" + TT + ")", fmt::format("out = {}(a, b).to(a.dtype)", py),
        [fn](auto& a, auto& b) { return fn(a, b).to(a.dtype()); }, D::mask, D::mask);
    op.op = name;
    op.differentiable = false;
    std::erase_if(op.errors, [](const ErrorCase& e) { return e.what == "dtype mix"; });  // any dtypes
    for (auto& e : op.errors) e.fragments[0] = name;
    t.push_back(op);
  }
  {
    OpInfo op = unary(
        "logical_not", "logical_not(Tensor)", "out = torch.logical_not(a).to(a.dtype)",
        [](auto& x) { return logical_not(x).to(x.dtype()); }, D::mask);
    op.differentiable = false;
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_elementwise_entries);

}  // namespace xgrad::test::table
