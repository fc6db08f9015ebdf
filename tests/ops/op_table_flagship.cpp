// The op table's entries for the block-sparse family, resample_conv and normalization (op_table_common.hpp,
// op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of block_sparse_linear.hpp, resample_conv.hpp, normalization.hpp.
void add_block_sparse_resample_normalization_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  // block_sparse_linear.hpp: x (batch..., M, C*3) through a random pattern of 2x3 blocks (R x C grid)
  // 0: with bias, 1: no bias, 2: block-diagonal groups, 3: no stored block at all
  for (int variant : {0, 1, 2, 3}) {
    OpInfo op;
    op.name = variant == 0   ? "block_sparse_linear"
              : variant == 1 ? "block_sparse_linear_nobias"
              : variant == 2 ? "block_sparse_linear_diagonal"
                             : "block_sparse_linear_noblocks";
    op.signature = "block_sparse_linear(Tensor,Tensor,Tensor,BlockSparsePattern)";
    op.torch = std::string(kTorchDenseW) + (variant == 1 ? "out = torch.nn.functional.linear(x, Wd)"
                                                         : "out = torch.nn.functional.linear(x, Wd, b)");
    op.sample = [variant](Dtype dt, const SampleSpec& s, Generator& g) {
      BlockSparsePattern p =
          variant == 2 ? [&] {
            std::vector<BlockSparsePattern::DiagonalGroup> groups;
            for (std::int64_t i = 0; i < s.sizes[1]; ++i) groups.push_back({InFeatures{1 + i % 3}, OutFeatures{1 + (2 * i) % 5}});
            return BlockSparsePattern::block_diagonal(groups);
          }()
          : variant == 3 ? BlockSparsePattern::from_block_mask(InFeatures{s.sizes[2] * 3}, OutFeatures{s.sizes[1] * 2}, {InFeatures{3}, OutFeatures{2}}, Tensor::zeros({s.sizes[1], s.sizes[2]}))
                       : random_pattern(s.sizes[1], s.sizes[2], g);
      SampleInput si{{{"x", values(bshape(s.batch, {s.sizes[0], p.in_features()}), g, dt)},
                      {"w", values(p.weight_shape(), g, dt)}},
                     {},
                     dims_prelude(p)};
      if (variant != 1) si.inputs.push_back({"b", values({p.out_features()}, g, dt)});
      si.inputs.push_back({"idx", dense_index(p), false});
      si.call = [p, variant](const Tensors& in) {
        return block_sparse_linear(in[0], in[1], variant == 1 ? Tensor() : in[2], p);
      };
      return si;
    };
    op.size_names = variant == 2 ? std::vector<std::string>{"M", "groups"} : std::vector<std::string>{"M", "R", "C"};
    op.small = variant == 2 ? std::vector<std::int64_t>{3, 4} : std::vector<std::int64_t>{3, 4, 3};
    op.threads = variant == 2 ? std::vector<std::int64_t>{400, 40} : std::vector<std::int64_t>{300, 40, 40};
    op.supports_batch = true;
    op.check_undefined = false;  // idx is a helper input for torch only; undefined x/weight: errors below
    if (variant == 0) {
      op.errors = {
          {"x of the wrong width",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 5}), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'", "(5, 5)"}},
          {"weight of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}), Tensor::zeros({3, 2, 3}), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'weight'", "(3, 2, 3)"}},
          {"dtype mix",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}, kFloat64), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}),
                                 p);
           },
           {"block_sparse_linear", "dtype"}},
          {"undefined x",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor(), Tensor::zeros(p.weight_shape()), Tensor::zeros({4}), p);
           },
           {"block_sparse_linear", "'x'"}},
          {"bias of the wrong shape",
           [] {
             const auto p = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
             block_sparse_linear(Tensor::zeros({5, 6}), Tensor::zeros(p.weight_shape()), Tensor::zeros({5}), p);
           },
           {"block_sparse_linear", "'bias'", "(5,)"}}};
    }
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
  for (bool to_dense : {true, false}) {
    OpInfo op;
    op.name = to_dense ? "block_sparse_to_dense" : "block_sparse_from_dense";
    op.signature = to_dense ? "block_sparse_to_dense(Tensor,BlockSparsePattern)"
                            : "block_sparse_from_dense(Tensor,BlockSparsePattern)";
    op.torch = to_dense ? std::string(kTorchDenseW) + "out = Wd" : "out = d.reshape(-1)[idx.long()].reshape(wshape)";
    op.differentiable = false;  // no autograd history (documented)
    op.sample = [to_dense](Dtype dt, const SampleSpec& s, Generator& g) {
      const BlockSparsePattern p = random_pattern(s.sizes[0], s.sizes[1], g);
      SampleInput si{{}, {}, dims_prelude(p)};
      if (to_dense)
        si.inputs.push_back({"w", values(p.weight_shape(), g, dt), false});
      else
        si.inputs.push_back({"d", values({p.out_features(), p.in_features()}, g, dt), false});
      si.inputs.push_back({"idx", dense_index(p), false});
      si.call = [p, to_dense](const Tensors& in) {
        return to_dense ? block_sparse_to_dense(in[0], p) : block_sparse_from_dense(in[0], p);
      };
      return si;
    };
    op.size_names = {"R", "C"};
    op.small = {3, 4};
    op.threads = {150, 150};
    op.check_undefined = false;
    const std::string opname = op.name;
    op.errors = {{"argument of the wrong shape",
                  [to_dense] {
                    const auto p = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
                    to_dense ? block_sparse_to_dense(Tensor::zeros({3, 2, 3}), p)
                             : block_sparse_from_dense(Tensor::zeros({4, 5}), p);
                  },
                  {opname, to_dense ? "(3, 2, 3)" : "(4, 5)"}}};
    t.push_back(op);
  }

  // resample_conv.hpp: f (batch..., N, B), coarse (N, A)
  for (bool sampled : {false, true}) {
    OpInfo op;
    op.name = sampled ? "resample_conv_sampled_points" : "resample_conv_cos2_uniform";
    op.signature = "resample_conv(Tensor,Tensor,FineGrid,Response,ResampleConvOptions)";
    op.torch = sampled ? std::string("lo = -0.12\nhi = 0.2\n") + kTorchSampled : std::string("w = 0.3\n") + kTorchCos2;
    op.sample = [sampled](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t N = s.sizes[0], A = s.sizes[1], B = s.sizes[2];
      FineGrid grid;
      if (sampled) {  // sorted random points on [0, 1]
        std::vector<double> x(static_cast<std::size_t>(B));
        for (auto& v : x) v = g.uniform();
        std::sort(x.begin(), x.end());
        grid = FineGrid::points(Tensor::from_vector(x, {B}, kFloat64));
      } else {
        grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(std::max<std::int64_t>(B - 1, 1)), B);
      }
      Tensor coarse = values({N, A}, g, kFloat64, D::unit);
      coarse = (coarse * 1.2 - 0.1).detach();  // [-0.1, 1.1): supports reaching past both ends
      SampleInput si{{{"f", values(bshape(s.batch, {N, B}), g, dt)}, {"coarse", coarse.to(dt)}}, {}, {}};
      if (sampled) si.inputs.push_back({"v", values({6}, g, dt)});
      si.inputs.push_back({"x", grid.to_tensor(dt), false});
      si.call = [grid, sampled](const Tensors& in) {
        return resample_conv(in[0], in[1], grid, sampled ? Response::sampled(in[2], -0.12, 0.2) : cos2(0.3));
      };
      return si;
    };
    op.size_names = {"N", "A", "B"};
    op.small = {3, 5, 30};
    op.threads = {64, 600, 600};
    op.large = {300, 300, 3000};
    op.supports_batch = true;
    op.check_undefined = false;  // x (the grid's points) is for torch only; undefined f: errors below
    op.rtol32 = 1e-3;
    op.atol32 = 1e-4;
    if (!sampled)
      op.errors = {
          {"f and coarse with different N",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({4, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 10)", "(4, 2)"}},
          {"f of the wrong width",
           [] {
             resample_conv(Tensor::zeros({3, 9}, kFloat64), Tensor::zeros({3, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 9)"}},
          {"dtype mix",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({3, 2}, kFloat32),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "dtype"}},
          {"undefined f",
           [] {
             resample_conv(Tensor(), Tensor::zeros({3, 2}, kFloat64), FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "'f'"}}};
    t.push_back(op);
  }

  // normalization.hpp: x (n, c, s); batch_norm in training (batch statistics) and eval (running
  // statistics) mode, the running statistics after one training step, and group_norm (c = g * k).
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

}  // namespace xgrad::test::table
