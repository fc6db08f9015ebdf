// The op table's entries for ops/linear.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of linear.hpp.
void add_linear_entries(std::vector<OpInfo>& t) {
  // y = x W^T + b, with and without bias, any leading batch dims.
  for (const bool with_bias : {true, false}) {
    OpInfo op;
    op.name = with_bias ? "linear" : "linear_nobias";
    op.signature = "linear(Tensor,Tensor,Tensor)";
    op.torch = with_bias ? "out = torch.nn.functional.linear(x, w, b)" : "out = torch.nn.functional.linear(x, w)";
    op.call = [with_bias](const Tensors& in) { return linear(in[0], in[1], with_bias ? in[2] : Tensor()); };
    op.sample = [with_bias](Dtype dt, const SampleSpec& s, Generator& g) {
      SampleInput si{{{"x", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)},
                      {"w", values({s.sizes[2], s.sizes[1]}, g, dt)}},
                     {},
                     {}};
      if (with_bias) si.inputs.push_back({"b", values({s.sizes[2]}, g, dt)});
      return si;
    };
    op.size_names = {"rows", "in", "out"};
    op.small = {3, 4, 5};
    op.threads = {256, 256, 256};
    op.supports_batch = true;
    op.check_undefined = false;  // an undefined bias means no bias; undefined x or weight: errors below
    if (with_bias)
      op.errors = {
          {"x's last dim differs from in",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 5}, kFloat64));
           },
           {"linear", "(2, 3)", "in_features = 5"}},
          {"weight not 2-d",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
           },
           {"linear", "'weight'", "(3,)"}},
          {"bias of the wrong size",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 3}, kFloat64), Tensor::zeros({3}, kFloat64));
           },
           {"linear", "'bias'", "(3,)"}},
          {"dtype mix",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat32), Tensor::zeros({4, 3}, kFloat64));
           },
           {"linear", "float32", "float64"}},
          {"undefined x",
           [] {
             linear(Tensor(), Tensor::zeros({4, 3}, kFloat64));
           },
           {"linear", "'x'"}},
          {"undefined weight",
           [] {
             linear(Tensor::zeros({2, 3}, kFloat64), Tensor());
           },
           {"linear", "'weight'"}}};
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_linear_entries);

}  // namespace xgrad::test::table
