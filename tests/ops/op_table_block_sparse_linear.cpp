// The op table's entries for ops/block_sparse_linear.hpp: the layer and the packers (op_table_common.hpp,
// op_table.cpp).
#include "dense_index.hpp"
#include "op_table_common.hpp"

namespace xgrad::test::table {

namespace {

// The dense (O, I) weight of a block-sparse layer from its packed blocks w and the flat dense
// position idx of every stored element (Note [Block-sparse storage]).
const char* kTorchDenseW =
    "Wd = torch.zeros(O * I, dtype=w.dtype).index_put((idx.long(),), w.reshape(-1)).reshape(O, I)\n";

// A (R*bo, C*bi) pattern of 2x3 blocks, each stored with probability 1/2.
BlockSparsePattern random_pattern(std::int64_t R, std::int64_t C, Generator& g) {
  return BlockSparsePattern::from_block_mask(InFeatures{C * 3}, OutFeatures{R * 2}, {InFeatures{3}, OutFeatures{2}},
                                             values({R, C}, g, kFloat32, Domain::mask));
}

std::string dims_prelude(const BlockSparsePattern& p) {
  return fmt::format("O = {}\nI = {}\nwshape = {}\n", p.out_features(), p.in_features(),
                     fmt::format("[{}]", fmt::join(p.weight_shape(), ", ")));
}

}  // namespace

// The entries of block_sparse_linear.hpp.
void add_block_sparse_linear_entries(std::vector<OpInfo>& t) {
  // x (batch..., M, C*3) through a random pattern of 2x3 blocks (R x C grid)
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
  {
    // A weight moved from one random pattern to another on the same R x C grid of 2x3 blocks.
    OpInfo op;
    op.name = "block_sparse_remap";
    op.signature = "block_sparse_remap(Tensor,BlockSparsePattern,BlockSparsePattern)";
    op.torch = std::string(kTorchDenseW) + "out = Wd.reshape(-1)[idx2.long()].reshape(wshape2)";
    op.differentiable = false;  // no autograd history (documented)
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const BlockSparsePattern from = random_pattern(s.sizes[0], s.sizes[1], g);
      const BlockSparsePattern to = random_pattern(s.sizes[0], s.sizes[1], g);
      SampleInput si{{}, {}, dims_prelude(from) + fmt::format("wshape2 = [{}]\n", fmt::join(to.weight_shape(), ", "))};
      si.inputs.push_back({"w", values(from.weight_shape(), g, dt), false});
      si.inputs.push_back({"idx", dense_index(from), false});
      si.inputs.push_back({"idx2", dense_index(to), false});
      si.call = [from, to](const Tensors& in) { return block_sparse_remap(in[0], from, to); };
      return si;
    };
    op.size_names = {"R", "C"};
    op.small = {3, 4};
    op.threads = {150, 150};
    op.check_undefined = false;
    op.int64_inputs = {"idx", "idx2"};  // the torch code's helper indices
    op.errors = {{"another grid",
                  [] {
                    const auto a = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
                    const auto b = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{2}, OutFeatures{2}}, Tensor::ones({2, 3}));
                    block_sparse_remap(Tensor::zeros(a.weight_shape()), a, b);
                  },
                  {"block_sparse_remap", "'to'", "block grid"}},
                 {"weight of the wrong shape",
                  [] {
                    const auto a = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
                    block_sparse_remap(Tensor::zeros({3, 2, 3}), a, a);
                  },
                  {"block_sparse_remap", "'weight'", "(3, 2, 3)"}}};
    t.push_back(op);
  }
  for (bool to_csr : {true, false}) {
    // The stored elements of a random R x C grid of 2x3 blocks as a CSR matrix (read through its
    // values, in row-major element order), and back. The element order is the dense positions sorted.
    OpInfo op;
    op.name = to_csr ? "block_sparse_to_csr" : "block_sparse_from_csr";
    op.signature = to_csr ? "block_sparse_to_csr(Tensor,BlockSparsePattern)"
                          : "block_sparse_from_csr(SparseCsr,BlockSparsePattern)";
    op.torch = to_csr ? "out = w.reshape(-1)[torch.argsort(idx.long())]"
                      : "out = v[torch.argsort(torch.argsort(idx.long()))].reshape(wshape)";
    op.sample = [to_csr](Dtype dt, const SampleSpec& s, Generator& g) {
      const BlockSparsePattern p = random_pattern(s.sizes[0], s.sizes[1], g);
      SampleInput si{{}, {}, dims_prelude(p)};
      si.inputs.push_back({to_csr ? "w" : "v", values(to_csr ? p.weight_shape() : Shape{p.stored_elements()}, g, dt)});
      si.inputs.push_back({"idx", dense_index(p), false});
      si.call = [p, to_csr](const Tensors& in) {
        return to_csr ? block_sparse_to_csr(in[0], p).values()
                      : block_sparse_from_csr(SparseCsr(p.element_pattern(), in[0]), p);
      };
      return si;
    };
    op.size_names = {"R", "C"};
    op.small = {3, 4};
    op.threads = {150, 150};
    op.check_undefined = false;
    op.int64_inputs = {"idx", to_csr ? "w" : "v"};  // a gather moves integer values as they are
    const std::string opname = op.name;
    op.errors = {{"argument of the wrong shape or pattern",
                  [to_csr] {
                    const auto p = BlockSparsePattern::from_block_mask(
                        InFeatures{6}, OutFeatures{4}, {InFeatures{3}, OutFeatures{2}}, Tensor::ones({2, 2}));
                    const auto q = BlockSparsePattern::from_block_mask(InFeatures{6}, OutFeatures{4},
                                                                       {InFeatures{3}, OutFeatures{2}},
                                                                       Tensor::from_vector({1, 0, 0, 1}, {2, 2}));
                    to_csr ? (void)block_sparse_to_csr(Tensor::zeros({3, 2, 3}), p)
                           : (void)block_sparse_from_csr(block_sparse_to_csr(Tensor::zeros(q.weight_shape()), q), p);
                  },
                  {opname, to_csr ? "(3, 2, 3)" : "'a'"}}};
    t.push_back(op);
  }
  {
    // The block norms of gᵀx over an R x C grid of (bo = 2) x (bi = 3) blocks, x (batch..., M, 3C).
    OpInfo op;
    op.name = "block_grad_norms";
    op.signature = "block_grad_norms(Tensor,Tensor,BlockSize)";
    op.torch = "out = (g.flatten(0, -2).T @ x.flatten(0, -2)).reshape(R, 2, C, 3).pow(2).sum((1, 3)).sqrt()";
    op.differentiable = false;  // a statistic (documented)
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t m = s.sizes[0], r = s.sizes[1], c = s.sizes[2];
      SampleInput si{{{"x", values(bshape(s.batch, {m, 3 * c}), g, dt), false},
                      {"g", values(bshape(s.batch, {m, 2 * r}), g, dt), false}},
                     {},
                     fmt::format("R = {}\nC = {}\n", r, c)};
      si.call = [](const Tensors& in) { return block_grad_norms(in[0], in[1], {InFeatures{3}, OutFeatures{2}}); };
      return si;
    };
    op.size_names = {"M", "R", "C"};
    op.small = {5, 3, 4};
    op.threads = {400, 50, 50};
    op.supports_batch = true;
    op.errors = {
        {"block size that does not divide",
         [] {
           block_grad_norms(Tensor::zeros({5, 7}), Tensor::zeros({5, 4}), {InFeatures{3}, OutFeatures{2}});
         },
         {"block_grad_norms", "must divide", "in=7"}},
        {"batch shapes that differ",
         [] {
           block_grad_norms(Tensor::zeros({5, 6}), Tensor::zeros({4, 4}), {InFeatures{3}, OutFeatures{2}});
         },
         {"block_grad_norms", "(5, 6)", "(4, 4)"}},
        {"dtype mix",
         [] {
           block_grad_norms(Tensor::zeros({5, 6}), Tensor::zeros({5, 4}, kFloat64), {InFeatures{3}, OutFeatures{2}});
         },
         {"block_grad_norms", "dtype"}}};
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_block_sparse_linear_entries);

}  // namespace xgrad::test::table
