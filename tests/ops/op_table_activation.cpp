// The op table's entries for ops/activation.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of activation.hpp.
void add_activation_entries(std::vector<OpInfo>& t) {
  const std::size_t first = t.size();
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
    t.push_back(unary("elu_alpha", "elu(Tensor,double)", F + "elu(a, alpha=0.5)", [](auto& x) { return elu(x, 0.5); }));
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
  add_integer_input_errors(t, first);
}

const bool registered = register_entries(__FILE__, add_activation_entries);

}  // namespace xgrad::test::table
