// The op table's entries for ops/normalization.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of normalization.hpp.
void add_normalization_entries(std::vector<OpInfo>& t) {
  // x (n, c, s); batch_norm in training (batch statistics) and eval (running statistics) mode, the
  // running statistics after one training step, and group_norm (c = g * k).
  {
    const SampleFn bn_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], c = s.sizes[1], sp = s.sizes[2];
      return SampleInput{{{"x", values({n, c, sp}, g, dt)},
                          {"w", values({c}, g, dt)},
                          {"b", values({c}, g, dt)},
                          {"rm", values({c}, g, dt), false},
                          {"rv", values({c}, g, dt, Domain::positive), false}},
                         {},
                         {}};
    };
    const auto bn_refuses = [](const SampleSpec& s) -> std::string { return s.sizes[1] == 0 ? "0 channels" : ""; };
    const Tensor x23 = Tensor::zeros({2, 3}, kFloat64), c3 = Tensor::ones({3}, kFloat64);
    const std::vector<ErrorCase> bn_errors = {
        {"x 1-d", [c3] { batch_norm(c3, c3, c3); }, {"batch_norm", "'x'", "(3,)"}},
        {"weight of the wrong size",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor::ones({2}, kFloat64)); },
         {"batch_norm", "'weight'", "(2,)", "(2, 3)"}},
        {"bias dtype mix",
         [x23, c3] { batch_norm(x23, c3, c3, c3, Tensor::ones({3}, kFloat32)); },
         {"batch_norm", "'bias'", "float32"}},
        {"running_var of the wrong size",
         [x23, c3] { batch_norm(x23, c3, Tensor::ones({4}, kFloat64)); },
         {"batch_norm", "'running_var'", "(4,)"}},
        {"eval without running stats", [x23] { batch_norm(x23, Tensor(), Tensor()); }, {"batch_norm", "evaluation"}},
        {"only running_mean",
         [x23, c3] { batch_norm(x23, c3, Tensor(), Tensor(), Tensor(), true); },
         {"batch_norm", "both"}},
        {"running stats that require grad",
         [x23] {
           Tensor rm = Tensor::zeros({3}, kFloat64);
           rm.set_requires_grad();
           batch_norm(x23, rm, Tensor::ones({3}, kFloat64), Tensor(), Tensor(), true);
         },
         {"batch_norm", "require grad"}},
        {"one value per channel when training",
         [c3] {
           batch_norm(Tensor::zeros({1, 3}, kFloat64), Tensor(), Tensor(), Tensor(), Tensor(), true);
         },
         {"batch_norm", "more than 1 value", "(1, 3)"}},
        {"negative eps",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor(), Tensor(), false, 0.1, -1.0); },
         {"batch_norm", "'eps'", "-1"}},
        {"momentum nan",
         [x23, c3] { batch_norm(x23, c3, c3, Tensor(), Tensor(), true, std::nan(""), 1e-5); },
         {"batch_norm", "'momentum'"}},
        {"undefined x", [c3] { batch_norm(Tensor(), c3, c3); }, {"batch_norm", "'x'"}},
    };
    const std::string bn_sig = "batch_norm(Tensor,Tensor,Tensor,Tensor,Tensor,bool,double,double)";
    for (const bool training : {true, false}) {
      OpInfo op;
      op.name = training ? "batch_norm_train" : "batch_norm_eval";
      op.signature = bn_sig;
      op.torch = fmt::format("out = torch.nn.functional.batch_norm(x, rm.clone(), rv.clone(), w, b, {}, 0.3, 1e-3)",
                             training ? "True" : "False");
      op.call = [training](const Tensors& in) {
        return batch_norm(in[0], in[3].clone_data(), in[4].clone_data(), in[1], in[2], training, 0.3, 1e-3);
      };
      op.sample = bn_sample;
      op.size_names = {"n", "c", "s"};
      op.small = {3, 4, 5};
      op.threads = {64, 8, 512};
      op.check_undefined = false;  // running stats, weight and bias may be undefined; x: in errors
      op.refuses = bn_refuses;
      op.errors = bn_errors;
      t.push_back(op);
    }
    {
      // Running stats after one step, momentum 0.3 (unbiased variance); and the module's cumulative
      // average (momentum = 1 / num_batches_tracked, here the 3rd batch).
      for (const double momentum : {0.3, 1.0 / 3.0}) {
        OpInfo op;
        op.name = momentum == 0.3 ? "batch_norm_running_stats" : "batch_norm_running_stats_cumulative";
        op.signature = bn_sig;
        op.torch = fmt::format(
            "rm2 = rm.clone(); rv2 = rv.clone()\n"
            "torch.nn.functional.batch_norm(x, rm2, rv2, w, b, True, {:.17g}, 1e-5)\n"
            "out = torch.stack([rm2, rv2])",
            momentum);
        op.call = [momentum](const Tensors& in) {
          Tensor rm = in[3].clone_data(), rv = in[4].clone_data();
          batch_norm(in[0], rm, rv, in[1], in[2], true, momentum, 1e-5);
          return stack({rm, rv});
        };
        op.sample = bn_sample;
        op.size_names = {"n", "c", "s"};
        op.small = {3, 4, 5};
        op.threads = {64, 8, 512};
        op.differentiable = false;
        op.check_undefined = false;
        op.refuses = bn_refuses;
        op.errors = bn_errors;
        t.push_back(op);
      }
    }
    OpInfo gn;
    gn.name = "group_norm";
    gn.signature = "group_norm(Tensor,int64_t,Tensor,Tensor,double)";
    gn.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], groups = s.sizes[1], c = groups * s.sizes[2], sp = s.sizes[3];
      SampleInput si{{{"x", values({n, c, sp}, g, dt)}, {"w", values({c}, g, dt)}, {"b", values({c}, g, dt)}}, {}, {}};
      si.call = [groups](const Tensors& in) { return group_norm(in[0], groups, in[1], in[2], 1e-3); };
      si.torch_prelude = fmt::format("groups = {}\n", groups);
      return si;
    };
    gn.torch = "out = torch.nn.functional.group_norm(x, groups, w, b, 1e-3)";
    gn.size_names = {"n", "g", "k", "s"};
    gn.small = {3, 2, 3, 4};
    gn.threads = {8, 4, 2, 1024};
    gn.large = {300, 300, 300, 300};
    gn.check_undefined = false;
    gn.refuses = [](const SampleSpec& s) -> std::string { return s.sizes[1] == 0 ? "'num_groups' = 0" : ""; };
    gn.torch_skip = [](const SampleSpec& s) -> std::string {
      // torch 1.13's weight gradient is NaN when the groups are empty (s = 0); ours is 0, the empty sum
      return s.sizes[3] == 0 ? "torch's weight gradient is NaN for s = 0" : "";
    };
    gn.errors = {
        {"num_groups not dividing C",
         [x23] { group_norm(x23, 2); },
         {"group_norm", "'num_groups' = 2", "3 channels", "(2, 3)"}},
        {"x 1-d", [c3] { group_norm(c3, 1); }, {"group_norm", "'x'", "(3,)"}},
        {"weight of the wrong size",
         [x23] { group_norm(x23, 3, Tensor::ones({2}, kFloat64)); },
         {"group_norm", "'weight'", "(2,)"}},
        {"bias dtype mix",
         [x23, c3] { group_norm(x23, 3, c3, Tensor::ones({3}, kFloat32)); },
         {"group_norm", "'bias'", "float32"}},
        {"one value",
         [] {
           group_norm(Tensor::zeros({1, 1}, kFloat64), 1);
         },
         {"group_norm", "more than 1 value", "(1, 1)"}},
        {"negative eps", [x23] { group_norm(x23, 3, Tensor(), Tensor(), -1e-3); }, {"group_norm", "'eps'"}},
        {"undefined x", [] { group_norm(Tensor(), 1); }, {"group_norm", "'x'"}},
    };
    t.push_back(gn);
  }
}

const bool registered = register_entries(__FILE__, add_normalization_entries);

}  // namespace xgrad::test::table
