// The op table's entries for ops/matmul.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of matmul.hpp.
void add_matmul_entries(std::vector<OpInfo>& t) {
  {
    auto mm = [](std::string name, std::vector<std::string> sizes, bool batch,
                 std::function<std::pair<Shape, Shape>(const SampleSpec&)> shapes) {
      OpInfo op;
      op.name = std::move(name);
      op.signature = "matmul(Tensor,Tensor)";
      op.torch = "out = torch.matmul(a, b)";
      op.call = [](const Tensors& in) { return matmul(in[0], in[1]); };
      op.sample = [shapes](Dtype dt, const SampleSpec& s, Generator& g) {
        const auto [sa, sb] = shapes(s);
        return SampleInput{{{"a", values(sa, g, dt)}, {"b", values(sb, g, dt)}}, {}, {}};
      };
      op.size_names = std::move(sizes);
      op.supports_batch = batch;
      return op;
    };
    OpInfo op = mm("matmul_mm", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), Shape{s.sizes[1], s.sizes[2]}};
    });
    op.small = {3, 4, 5};
    op.threads = {256, 256, 256};
    op.errors = {
        {"inner sizes differ",
         [] {
           matmul(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4, 5}, kFloat64));
         },
         {"matmul", "(2, 3)", "(4, 5)"}},
        {"0-d operand", [] { matmul(Tensor::scalar(1, kFloat64), Tensor::zeros({1}, kFloat64)); }, {"matmul", "()"}},
        {"dtype mix",
         [] {
           matmul(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3, 2}, kFloat32));
         },
         {"matmul", "dtype"}},
        {"batch dims that do not broadcast",
         [] {
           matmul(Tensor::zeros({2, 2, 3}, kFloat64), Tensor::zeros({3, 3, 4}, kFloat64));
         },
         {"matmul", "(2, 2, 3)", "(3, 3, 4)"}}};
    t.push_back(op);
    op = mm("matmul_broadcast_a", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0], s.sizes[1]}, bshape(s.batch, {s.sizes[1], s.sizes[2]})};
    });
    op.small = {3, 4, 5};
    op.threads = {128, 64, 128};
    op.threads_batch = {4};
    t.push_back(op);
    op = mm("matmul_bmm", {"n", "k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), bshape(s.batch, {s.sizes[1], s.sizes[2]})};
    });
    op.small = {3, 4, 5};
    op.threads = {128, 64, 128};
    op.threads_batch = {4};
    t.push_back(op);
    op = mm("matmul_dot", {"k"}, false, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0]}, Shape{s.sizes[0]}};
    });
    op.small = {6};
    op.threads = {70000};
    t.push_back(op);
    op = mm("matmul_mv", {"n", "k"}, true, [](const SampleSpec& s) {
      return std::pair{bshape(s.batch, {s.sizes[0], s.sizes[1]}), Shape{s.sizes[1]}};
    });
    op.small = {3, 4};
    op.threads = {300, 300};
    t.push_back(op);
    op = mm("matmul_vm", {"k", "m"}, true, [](const SampleSpec& s) {
      return std::pair{Shape{s.sizes[0]}, bshape(s.batch, {s.sizes[0], s.sizes[1]})};
    });
    op.small = {4, 3};
    op.threads = {300, 300};
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_matmul_entries);

}  // namespace xgrad::test::table
