// The op table's entries for reductions, softmax, losses, matmul and linear (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of reduction.hpp, softmax.hpp, loss.hpp.
void add_reduction_softmax_loss_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  // reduction.hpp
  for (auto [opname, fn] :
       std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool)>>{
           {"sum", &sum}, {"mean", &mean}, {"max", &max}, {"logsumexp", &logsumexp}}) {
    const bool refuses = opname == "max";
    const std::string all_dims = "tuple(range(a.dim()))";
    const std::string tfn = opname == "max" ? "torch.amax" : "torch." + opname;
    t.push_back(reduction(opname + "_all", fmt::format("out = {}(a, {})", tfn, all_dims), fn, {}, false, refuses));
    t.push_back(reduction(opname + "_last", fmt::format("out = {}(a, -1)", tfn), fn, {-1}, false, refuses));
    t.push_back(reduction(opname + "_rows_keepdim", fmt::format("out = {}(a, -2, keepdim=True)", tfn), fn, {-2}, true,
                          refuses));
  }
  // torch.sum/mean(a, ()) reduce everything in 1.13 as well, but spell it out for clarity
  for (auto& op : t)
    if (op.name == "sum_all")
      op.torch = "out = a.sum()";
    else if (op.name == "mean_all")
      op.torch = "out = a.mean()";

  // softmax.hpp
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

  // reductions over non-adjacent axes {0, 2} of (n, m, k), and softmax along the middle axis (strided rows)
  for (auto [opname, fn] :
       std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, bool)>>{
           {"sum", &sum}, {"mean", &mean}, {"max", &max}, {"logsumexp", &logsumexp}}) {
    OpInfo op = reduction(opname + "_outer_axes", "", fn, {0, 2}, false, false);
    op.torch = fmt::format("out = {}(a, (0, 2))", opname == "max" ? "torch.amax" : "torch." + opname);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.supports_batch = false;
    op.supports_scalar = false;
    if (opname == "max")
      op.refuses = [](const SampleSpec& s) -> std::string {
        return s.sizes[0] == 0 || s.sizes[2] == 0 ? "size 0" : "";
      };
    t.push_back(op);
  }
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

  // loss.hpp: pointwise losses x reductions
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    t.push_back(pointwise_loss(
        "mse_loss", "mse_loss", "", [](auto& a, auto& b, Reduction rr) { return mse_loss(a, b, rr); }, r,
        "mse_loss(Tensor,Tensor,Reduction)"));
    t.push_back(pointwise_loss(
        "l1_loss", "l1_loss", "", [](auto& a, auto& b, Reduction rr) { return l1_loss(a, b, rr); }, r,
        "l1_loss(Tensor,Tensor,Reduction)"));
    OpInfo hub = pointwise_loss(
        "huber_loss", "huber_loss", ", delta=0.7",
        [](auto& a, auto& b, Reduction rr) { return huber_loss(a, b, rr, 0.7); }, r,
        "huber_loss(Tensor,Tensor,Reduction,double)");
    hub.errors.push_back(
        {"delta = 0",
         [] { huber_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, 0.0); },
         {"huber_loss", "'delta'"}});
    t.push_back(hub);
    OpInfo sl1 = pointwise_loss(
        "smooth_l1_loss", "smooth_l1_loss", ", beta=0.7",
        [](auto& a, auto& b, Reduction rr) { return smooth_l1_loss(a, b, rr, 0.7); }, r,
        "smooth_l1_loss(Tensor,Tensor,Reduction,double)");
    sl1.errors.push_back(
        {"beta < 0",
         [] { smooth_l1_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, -1.0); },
         {"smooth_l1_loss", "'beta'"}});
    t.push_back(sl1);
  }
  // class-index losses: scores (N, C) with a std::vector target, (N, C, d) with a Tensor target
  for (const std::string opname : {"cross_entropy", "nll_loss"}) {
    const bool ce = opname == "cross_entropy";
    {
      OpInfo op;
      op.name = opname + "_vector_mean";
      op.signature = ce ? "cross_entropy(Tensor,vector<int64_t>,Reduction,double,int64_t)"
                        : "nll_loss(Tensor,vector<int64_t>,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='mean')", opname);
      op.call = [ce](const Tensors& in) {
        return ce ? cross_entropy(in[0], to_index(in[1])) : nll_loss(in[0], to_index(in[1]));
      };
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{
            {{"z", values({s.sizes[0], s.sizes[1]}, g, dt)}, {"y", class_targets({s.sizes[0]}, s.sizes[1], g), false}},
            {},
            {}};
      };
      op.size_names = {"N", "C"};
      op.small = {5, 4};
      op.threads = {400, 100};
      op.check_undefined = false;  // the target is a std::vector here; the scores are checked by the Tensor form
      op.int64_inputs = {"y"};     // converted to the vector by the call
      op.refuses = [](const SampleSpec& s) -> std::string {
        // Mean over no counted sample: none at all, or all ignored (no class to aim at, C = 0)
        return (s.sizes[0] == 0 || s.sizes[1] == 0) ? "mean reduction over no samples" : "";
      };
      op.errors = {
          {"target length != N",
           [ce] {
             const Tensor z = Tensor::zeros({3, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 1}) : nll_loss(z, std::vector<std::int64_t>{0, 1});
           },
           {opname, "(3, 4)"}},
          {"class index out of range",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 4}) : nll_loss(z, std::vector<std::int64_t>{0, 4});
           },
           {opname, "4"}},
          {"0-d scores",
           [ce] {
             const Tensor z = Tensor::scalar(1.0, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0}) : nll_loss(z, std::vector<std::int64_t>{0});
           },
           {opname, "()"}},
      };
      if (ce)
        op.errors.push_back(
            {"label_smoothing > 1",
             [] {
               cross_entropy(Tensor::zeros({2, 3}, kFloat64), std::vector<std::int64_t>{0, 1}, Reduction::Mean, 1.5);
             },
             {"cross_entropy", "'label_smoothing'"}});
      t.push_back(op);
    }
    {
      OpInfo op;
      op.name = opname + "_tensor_sum_spatial";
      op.signature =
          ce ? "cross_entropy(Tensor,Tensor,Reduction,double,int64_t)" : "nll_loss(Tensor,Tensor,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='sum'{})", opname,
                             ce ? ", label_smoothing=0.1" : "");
      // The sample's targets are float for the parity batch; ours takes them as int64.
      op.call = [ce](const Tensors& in) {
        const Tensor y = in[1].defined() ? in[1].to(kInt64) : in[1];
        return ce ? cross_entropy(in[0], y, Reduction::Sum, 0.1) : nll_loss(in[0], y, Reduction::Sum);
      };
      op.int64_inputs = {"y"};
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"z", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)},
                            {"y", class_targets({s.sizes[0], s.sizes[2]}, s.sizes[1], g).to(dt), false}},
                           {},
                           {}};
      };
      op.size_names = {"N", "C", "d"};
      op.torch_skip = [](const SampleSpec& s) -> std::string {
        // torch 1.13 views (N, 0, d) scores as (N, 0, 0, 0): "size mismatch"; ours gives 0 as for (N, 0)
        return s.sizes[1] == 0 ? "torch fails on C = 0 with spatial dimensions" : "";
      };
      op.small = {3, 4, 2};
      op.threads = {20, 100, 20};
      op.errors = {
          {"target of the wrong shape",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4, 3}, kFloat64), y = Tensor::zeros({2, 2}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "(2, 2)", "(2, 4, 3)"}},
          {"float target",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64), y = Tensor::of({0.0, 1.0}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "'target'", "float64", "target.to(xgrad::kInt64)"}},
          {"target requiring grad",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             Tensor y = Tensor::of({0.0, 1.0}, kFloat64);
             y.set_requires_grad();
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "target"}},
      };
      t.push_back(op);
    }
  }
  {
    for (bool pw : {false, true}) {
      OpInfo op;
      op.name = pw ? "bce_with_logits_pos_weight_sum" : "bce_with_logits_mean";
      op.signature = "binary_cross_entropy_with_logits(Tensor,Tensor,Reduction,Tensor)";
      op.torch = pw ? "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='sum', pos_weight=w)"
                    : "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='mean')";
      op.call = [pw](const Tensors& in) {
        return pw ? binary_cross_entropy_with_logits(in[0], in[1], Reduction::Sum, in[2])
                  : binary_cross_entropy_with_logits(in[0], in[1]);
      };
      op.sample = [pw](Dtype dt, const SampleSpec& s, Generator& g) {
        const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
        SampleInput si{{{"a", values(sh, g, dt)}, {"t", values(sh, g, dt, D::unit)}}, {}, {}};
        // torch 1.13 does not differentiate pos_weight; its gradient is gradchecked in test_loss.cpp
        if (pw) si.inputs.push_back({"w", values({s.sizes[1]}, g, dt, D::positive), false});
        return si;
      };
      op.size_names = {"n", "c"};
      op.small = {3, 4};
      op.threads = {200, 200};
      op.supports_batch = true;
      op.check_undefined = !pw;  // an undefined pos_weight means "none"
      if (!pw)
        op.refuses = [](const SampleSpec& s) -> std::string {
          return s.sizes[0] * s.sizes[1] * numel_of(s.batch) == 0 ? "mean reduction of an empty input" : "";
        };
      op.errors = {{"shape mismatch",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({3, 1}, kFloat64), Tensor::zeros({3}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "(3, 1)", "(3,)"}},
                   {"pos_weight not a suffix",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({2, 3}, kFloat64),
                                                       Reduction::Mean, Tensor::ones({2}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "'pos_weight'", "(2,)"}}};
      t.push_back(op);
    }
  }
}

// The entries of matmul.hpp, linear.hpp.
void add_matmul_linear_entries(std::vector<OpInfo>& t) {
  // matmul.hpp
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

  // linear.hpp: y = x W^T + b, with and without bias, any leading batch dims.
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

}  // namespace xgrad::test::table
