// The op table's entries for ops/softmax.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of softmax.hpp.
void add_softmax_entries(std::vector<OpInfo>& t) {
  for (auto [opname, fn] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, std::int64_t)>>{
           {"softmax", &softmax}, {"log_softmax", &log_softmax}}) {
    for (std::int64_t axis : {-1, 0}) {
      OpInfo op;
      op.name = opname + (axis == -1 ? "_last" : "_first");
      op.signature = opname + "(Tensor,int64_t)";
      op.torch = fmt::format("out = torch.{}(a, {})", opname, axis);
      op.call = [fn, axis](const Tensors& in) { return fn(in[0], axis); };
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{
            {{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "m"};
      op.small = {3, 4};
      op.threads = {200, 200};
      op.supports_batch = axis == -1;
      op.supports_scalar = true;  // one row of length 1, axis 0 or -1
      op.errors = {{"axis out of range",
                    [fn] {
                      fn(Tensor::zeros({2, 3}, kFloat64), 2);
                    },
                    {opname, "axis 2", "(2, 3)"}}};
      t.push_back(op);
    }
  }

  // along the middle axis (strided rows)
  for (auto [opname, fn] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, std::int64_t)>>{
           {"softmax", &softmax}, {"log_softmax", &log_softmax}}) {
    OpInfo op;
    op.name = opname + "_middle";
    op.signature = opname + "(Tensor,int64_t)";
    op.torch = fmt::format("out = torch.{}(a, 1)", opname);
    op.call = [fn](const Tensors& in) { return fn(in[0], 1); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_softmax_entries);

}  // namespace xgrad::test::table
