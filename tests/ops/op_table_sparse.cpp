// The entries of sparse.hpp: the constructors, spmm (and matmul), sddmm (and sampled_addmm), linear on
// a random CSR pattern, the softmaxes over a CSR matrix's rows, the segment reductions.
#include "op_table_common.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::test::table {

namespace {

// A random (m x k) CSR pattern: each entry stored with probability 0.3, row 1 left empty (an empty
// row in every sample with 2 or more rows). The index tensors are int64: crow (m + 1), col and row
// (nnz; row is for torch's COO form).
struct RandomCsr {
  Tensor crow, col, row;
  std::int64_t nnz = 0;
};
RandomCsr random_csr(std::int64_t m, std::int64_t k, Generator& g) {
  std::vector<std::int64_t> crow{0}, col, row;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < k; ++j)
      if (g.uniform() < 0.3 && i != 1) {
        col.push_back(j);
        row.push_back(i);
      }
    crow.push_back(static_cast<std::int64_t>(col.size()));
  }
  const auto n = static_cast<std::int64_t>(col.size());
  const auto t = [](const std::vector<std::int64_t>& v) {
    return Tensor::from_data<std::int64_t>(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
  };
  return {t(crow).to(kFloat64), t(col).to(kFloat64), t(row).to(kFloat64), n};
}

SparseCsr small_csr(Dtype dt) {  // 3 x 3: entries (0, 1), (0, 2), (2, 0)
  return sparse_csr_tensor(Tensor::from_data<std::int64_t>(std::vector<std::int64_t>{0, 2, 2, 3}, {4}),
                           Tensor::from_data<std::int64_t>(std::vector<std::int64_t>{1, 2, 0}, {3}),
                           Tensor::ones({3}, dt), {3, 3});
}

// The bad offsets and data every segment op refuses; `f` calls the op named `n`.
std::vector<ErrorCase> segment_errors(const std::string& n,
                                      const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
  const auto longs = [](std::vector<double> v) {
    return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, kInt64);
  };
  return {
      {"offsets not ending at data.size(0)",
       [=] {
         f(Tensor::zeros({4, 2}, kFloat64), longs({0, 2, 3}));
       },
       {n, "'offsets'", "data.size(0) = 4", "(4, 2)", "got 3"}},
      {"decreasing offsets",
       [=] {
         f(Tensor::zeros({4, 2}, kFloat64), longs({0, 3, 2, 4}));
       },
       {n, "'offsets'", "non-decreasing", "offsets[1] = 3"}},
      {"offsets not starting at 0",
       [=] {
         f(Tensor::zeros({4, 2}, kFloat64), longs({1, 4}));
       },
       {n, "'offsets'", "start at 0"}},
      {"float offsets",
       [=] {
         f(Tensor::zeros({4, 2}, kFloat64), Tensor::from_vector({0, 4}, {2}, kFloat64));
       },
       {n, "'offsets'", "int64 or int32"}},
      {"integer data",
       [=] {
         f(Tensor::zeros({4, 2}, kInt64), longs({0, 4}));
       },
       {n, "'data'"}},
      {"0-d data", [=] { f(Tensor::zeros({}, kFloat64), longs({0})); }, {n, "'data'", "()"}},
      {"undefined data", [=] { f(Tensor(), longs({0})); }, {n, "'data'", "undefined"}},
  };
}

}  // namespace

void add_segment_entries(std::vector<OpInfo>& t);

void add_sparse_entries(std::vector<OpInfo>& t) {
  {  // spmm(A, X): A (M x K) with values v, X (K x F)
    OpInfo op;
    op.name = "spmm";
    op.signature = "spmm(SparseCsr,Tensor)";
    op.torch = "out = torch.sparse.mm(torch.sparse_coo_tensor(torch.stack([row.long(), col.long()]), v, (M, K)), x)";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1], F = s.sizes[2];
      const RandomCsr a = random_csr(M, K, g);
      SampleInput si{{{"v", values({a.nnz}, g, dt)},
                      {"x", values({K, F}, g, dt)},
                      {"crow", a.crow, false},
                      {"col", a.col, false},
                      {"row", a.row, false}},
                     {},
                     fmt::format("M = {}\nK = {}\n", M, K)};
      si.call = [M, K](const Tensors& in) {
        return spmm(sparse_csr_tensor(in[2].to(kInt64), in[3].to(kInt64), in[0], {M, K}), in[1]);
      };
      return si;
    };
    op.size_names = {"M", "K", "F"};
    op.small = {5, 4, 3};
    op.threads = {400, 300, 40};
    op.check_undefined = false;  // crow/col/row are index inputs; undefined x and A: errors below
    op.int64_inputs = {"crow", "col", "row"};
    op.errors = {
        {"x with the wrong number of rows",
         [] {
           spmm(small_csr(kFloat64), Tensor::zeros({4, 2}, kFloat64));
         },
         {"spmm", "'x'", "(4, 2)", "(3, 3)"}},
        {"x not 2-d", [] { spmm(small_csr(kFloat64), Tensor::zeros({3}, kFloat64)); }, {"spmm", "'x'", "(3,)"}},
        {"dtype mix",
         [] {
           spmm(small_csr(kFloat32), Tensor::zeros({3, 2}, kFloat64));
         },
         {"spmm", "dtype"}},
        {"undefined x", [] { spmm(small_csr(kFloat64), Tensor()); }, {"spmm", "'x'", "undefined"}},
        {"undefined sparse matrix",
         [] {
           spmm(SparseCsr(), Tensor::zeros({3, 2}));
         },
         {"spmm", "'a'", "undefined"}},
    };
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
  {  // sddmm(A, X, Y): the pattern of A (M x K), X (M x F), Y (K x F)
    OpInfo op;
    op.name = "sddmm";
    op.signature = "sddmm(SparseCsr,Tensor,Tensor)";
    op.torch = "out = (x[row.long()] * y[col.long()]).sum(-1)";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1], F = s.sizes[2];
      const RandomCsr a = random_csr(M, K, g);
      SampleInput si{{{"x", values({M, F}, g, dt)},
                      {"y", values({K, F}, g, dt)},
                      {"v", values({a.nnz}, g, dt), false},  // A's values: not read by sddmm
                      {"crow", a.crow, false},
                      {"col", a.col, false},
                      {"row", a.row, false}},
                     {},
                     {}};
      si.call = [M, K](const Tensors& in) {
        return sddmm(sparse_csr_tensor(in[3].to(kInt64), in[4].to(kInt64), in[2], {M, K}), in[0], in[1]);
      };
      return si;
    };
    op.size_names = {"M", "K", "F"};
    op.small = {5, 4, 3};
    op.threads = {400, 300, 40};
    op.check_undefined = false;
    op.int64_inputs = {"v", "crow", "col", "row"};  // A's values are not read
    op.errors = {
        {"x with the wrong number of rows",
         [] {
           sddmm(small_csr(kFloat64), Tensor::zeros({4, 2}, kFloat64), Tensor::zeros({3, 2}, kFloat64));
         },
         {"sddmm", "'x'", "(4, 2)", "(3, 3)"}},
        {"y with the wrong number of rows",
         [] {
           sddmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({2, 2}, kFloat64));
         },
         {"sddmm", "'y'", "(2, 2)"}},
        {"x and y of different widths",
         [] {
           sddmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({3, 4}, kFloat64));
         },
         {"sddmm", "(3, 2)", "(3, 4)"}},
        {"dtype mix",
         [] {
           sddmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({3, 2}, kFloat32));
         },
         {"sddmm", "dtype"}},
        {"undefined y",
         [] {
           sddmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor());
         },
         {"sddmm", "'y'", "undefined"}},
    };
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
  {  // linear(A, W, b): A (M x K) sparse, W (N x K), b (N)
    OpInfo op;
    op.name = "linear_sparse";
    op.signature = "linear(SparseCsr,Tensor,Tensor)";
    op.torch =
        "a = torch.sparse_coo_tensor(torch.stack([row.long(), col.long()]), v, (M, K)).to_dense()\n"
        "out = torch.nn.functional.linear(a, w, b)";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1], N = s.sizes[2];
      const RandomCsr a = random_csr(M, K, g);
      SampleInput si{{{"v", values({a.nnz}, g, dt)},
                      {"w", values({N, K}, g, dt)},
                      {"b", values({N}, g, dt)},
                      {"crow", a.crow, false},
                      {"col", a.col, false},
                      {"row", a.row, false}},
                     {},
                     fmt::format("M = {}\nK = {}\n", M, K)};
      si.call = [M, K](const Tensors& in) {
        return linear(sparse_csr_tensor(in[3].to(kInt64), in[4].to(kInt64), in[0], {M, K}), in[1], in[2]);
      };
      return si;
    };
    op.size_names = {"M", "K", "N"};
    op.small = {5, 4, 3};
    op.threads = {400, 300, 40};
    op.check_undefined = false;  // crow/col/row are index inputs; undefined x and weight: errors below
    op.int64_inputs = {"crow", "col", "row"};
    const Tensor w23 = Tensor::zeros({2, 3}, kFloat64);
    op.errors = {
        {"weight with the wrong number of columns",
         [] {
           linear(small_csr(kFloat64), Tensor::zeros({2, 4}, kFloat64));
         },
         {"linear", "'weight'", "(2, 4)", "(3, 3)"}},
        {"weight not 2-d",
         [] { linear(small_csr(kFloat64), Tensor::zeros({3}, kFloat64)); },
         {"linear", "'weight'", "(3,)"}},
        {"bias of the wrong size",
         [w23] { linear(small_csr(kFloat64), w23, Tensor::zeros({3}, kFloat64)); },
         {"linear", "'bias'", "(2,)", "(3,)"}},
        {"dtype mix", [w23] { linear(small_csr(kFloat32), w23); }, {"linear", "dtype"}},
        {"undefined weight", [] { linear(small_csr(kFloat64), Tensor()); }, {"linear", "'weight'", "undefined"}},
        {"undefined sparse x", [w23] { linear(SparseCsr(), w23); }, {"linear", "'x'", "undefined"}},
    };
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
    // The same op where W is read in place (fewer stored entries than input features, as a minibatch
    // of bag-of-words rows; the sizes above take the spmm path: Note [Sparse linear] in sparse.cpp).
    op.name = "linear_sparse_minibatch";
    op.small = {3, 30, 4};
    op.threads = {4, 20000, 64};
    t.push_back(op);
  }
  {  // matmul(A, X): spmm under torch's name
    OpInfo op = *std::find_if(t.begin(), t.end(), [](const OpInfo& o) { return o.name == "spmm"; });
    op.name = "matmul_sparse";
    op.signature = "matmul(SparseCsr,Tensor)";
    op.op = "matmul";
    op.sample = [spmm_sample = op.sample](Dtype dt, const SampleSpec& s, Generator& g) {  // spmm's inputs
      SampleInput si = spmm_sample(dt, s, g);
      si.call = [M = s.sizes[0], K = s.sizes[1]](const Tensors& in) {
        return matmul(sparse_csr_tensor(in[2].to(kInt64), in[3].to(kInt64), in[0], {M, K}), in[1]);
      };
      return si;
    };
    op.errors = {
        {"x with the wrong number of rows",
         [] {
           matmul(small_csr(kFloat64), Tensor::zeros({4, 2}, kFloat64));
         },
         {"matmul", "'x'", "(4, 2)", "(3, 3)"}},
        {"x not 2-d", [] { matmul(small_csr(kFloat64), Tensor::zeros({3}, kFloat64)); }, {"matmul", "'x'", "(3,)"}},
        {"dtype mix",
         [] {
           matmul(small_csr(kFloat32), Tensor::zeros({3, 2}, kFloat64));
         },
         {"matmul", "dtype"}},
        {"integer values",
         [] {
           matmul(small_csr(kInt64), Tensor::zeros({3, 2}, kFloat64));
         },
         {"matmul", "'a.values'", "int64"}},
        {"undefined sparse matrix",
         [] {
           matmul(SparseCsr(), Tensor::zeros({3, 2}));
         },
         {"matmul", "'a'", "undefined"}},
    };
    t.push_back(op);
  }
  {  // sampled_addmm(input, mat1, mat2, beta, alpha): input (M x N) sparse, mat1 (M x K), mat2 (K x N)
    OpInfo op;
    op.name = "sampled_addmm";
    op.signature = "sampled_addmm(SparseCsr,Tensor,Tensor,double,double)";
    // values from torch.sparse.sampled_addmm itself, gradients through its formula (torch 1.13 has no
    // autograd through a CSR tensor's values)
    op.torch =
        "a = torch.sparse_csr_tensor(crow.long(), col.long(), v.detach(), (M, N))\n"
        "ref = torch.sparse.sampled_addmm(a, x.detach(), y.detach(), beta=0.5, alpha=-2.0).values()\n"
        "formula = 0.5 * v - 2.0 * (x @ y)[row.long(), col.long()]\n"
        "out = formula + (ref - formula).detach()";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], N = s.sizes[1], K = s.sizes[2];
      const RandomCsr a = random_csr(M, N, g);
      SampleInput si{{{"v", values({a.nnz}, g, dt)},
                      {"x", values({M, K}, g, dt)},
                      {"y", values({K, N}, g, dt)},
                      {"crow", a.crow, false},
                      {"col", a.col, false},
                      {"row", a.row, false}},
                     {},
                     fmt::format("M = {}\nN = {}\n", M, N)};
      si.call = [M, N](const Tensors& in) {
        return sampled_addmm(sparse_csr_tensor(in[3].to(kInt64), in[4].to(kInt64), in[0], {M, N}), in[1], in[2], 0.5,
                             -2.0)
            .values();
      };
      return si;
    };
    op.size_names = {"M", "N", "K"};
    op.small = {5, 4, 3};
    op.threads = {400, 300, 40};
    op.check_undefined = false;
    op.int64_inputs = {"crow", "col", "row"};
    op.errors = {
        {"mat1 with the wrong number of rows",
         [] {
           sampled_addmm(small_csr(kFloat64), Tensor::zeros({4, 2}, kFloat64), Tensor::zeros({2, 3}, kFloat64));
         },
         {"sampled_addmm", "'mat1'", "(4, 2)", "(2, 3)", "(3, 3)"}},
        {"mat2 with the wrong number of columns",
         [] {
           sampled_addmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({2, 4}, kFloat64));
         },
         {"sampled_addmm", "'mat2'", "(2, 4)"}},
        {"inner sizes differ",
         [] {
           sampled_addmm(small_csr(kFloat64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({5, 3}, kFloat64));
         },
         {"sampled_addmm", "(3, 2)", "(5, 3)"}},
        {"dtype mix",
         [] {
           sampled_addmm(small_csr(kFloat32), Tensor::zeros({3, 2}, kFloat32), Tensor::zeros({2, 3}, kFloat64));
         },
         {"sampled_addmm", "'mat2'", "float64", "float32"}},
        {"integer values",
         [] {
           sampled_addmm(small_csr(kInt64), Tensor::zeros({3, 2}, kFloat64), Tensor::zeros({2, 3}, kFloat64));
         },
         {"sampled_addmm", "'input.values'", "int64"}},
        {"undefined mat1",
         [] {
           sampled_addmm(small_csr(kFloat64), Tensor(), Tensor::zeros({2, 3}, kFloat64));
         },
         {"sampled_addmm", "'mat1'", "undefined"}},
        {"undefined input",
         [] {
           sampled_addmm(SparseCsr(), Tensor::zeros({3, 2}), Tensor::zeros({2, 3}));
         },
         {"sampled_addmm", "'input'", "undefined"}},
    };
    op.rtol32 = 1e-4;
    op.atol32 = 1e-4;
    t.push_back(op);
  }
  // sparse_softmax / sparse_log_softmax (A): torch.sparse.(log_)softmax(A, 1) on A's COO form; the
  // random pattern has an empty row
  for (bool log : {false, true}) {
    OpInfo op;
    op.name = log ? "sparse_log_softmax" : "sparse_softmax";
    op.signature = op.name + "(SparseCsr)";
    op.torch = fmt::format(
        "a = torch.sparse_coo_tensor(torch.stack([row.long(), col.long()]), v, (M, K)).coalesce()\n"
        "out = torch.sparse.{}(a, 1).coalesce().values()",
        log ? "log_softmax" : "softmax");
    op.sample = [log](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1];
      const RandomCsr a = random_csr(M, K, g);
      SampleInput si{
          {{"v", values({a.nnz}, g, dt)}, {"crow", a.crow, false}, {"col", a.col, false}, {"row", a.row, false}},
          {},
          fmt::format("M = {}\nK = {}\n", M, K)};
      si.call = [M, K, log](const Tensors& in) {
        const SparseCsr csr = sparse_csr_tensor(in[1].to(kInt64), in[2].to(kInt64), in[0], {M, K});
        return (log ? sparse_log_softmax(csr) : sparse_softmax(csr)).values();
      };
      return si;
    };
    op.size_names = {"M", "K"};
    op.small = {5, 4};
    op.threads = {3000, 300};
    op.check_undefined = false;
    op.int64_inputs = {"crow", "col", "row"};
    const std::string n = op.name;
    const auto f = [log](const SparseCsr& a) { return log ? sparse_log_softmax(a) : sparse_softmax(a); };
    op.errors = {
        {"integer values", [f] { f(small_csr(kInt64)); }, {n, "'a.values'", "int64"}},
        {"undefined sparse matrix", [f] { f(SparseCsr()); }, {n, "'a'", "undefined"}},
    };
    t.push_back(op);
  }
  {  // sparse_csr_tensor(crow, col, values, size), read through to_dense: A (M x K)
    OpInfo op;
    op.name = "sparse_csr_tensor";
    op.signature = "sparse_csr_tensor(Tensor,Tensor,Tensor,Shape)";
    op.torch = "out = torch.sparse_coo_tensor(torch.stack([row.long(), col.long()]), v, (M, K)).to_dense()";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1];
      const RandomCsr a = random_csr(M, K, g);
      SampleInput si{
          {{"v", values({a.nnz}, g, dt)}, {"crow", a.crow, false}, {"col", a.col, false}, {"row", a.row, false}},
          {},
          fmt::format("M = {}\nK = {}\n", M, K)};
      si.call = [M, K](const Tensors& in) {
        return sparse_csr_tensor(in[1].to(kInt64), in[2].to(kInt64), in[0], {M, K}).to_dense();
      };
      return si;
    };
    op.size_names = {"M", "K"};
    op.small = {5, 4};
    op.threads = {400, 300};
    op.check_undefined = false;
    op.int64_inputs = {"v", "crow", "col", "row"};  // integer values: an integer matrix
    const Tensor v3 = Tensor::zeros({3}, kFloat64);
    op.errors = {
        {"crow not starting at 0",
         [v3] {
           sparse_csr_tensor(Tensor::from_vector({1, 2, 2, 3}, {4}, kInt64),
                             Tensor::from_vector({1, 2, 0}, {3}, kInt64), v3, {3, 3});
         },
         {"sparse_csr_tensor", "'crow_indices'", "start at 0"}},
        {"values of the wrong shape",
         [] {
           sparse_csr_tensor(Tensor::from_vector({0, 2, 2, 3}, {4}, kInt64),
                             Tensor::from_vector({1, 2, 0}, {3}, kInt64), Tensor::zeros({2}, kFloat64), {3, 3});
         },
         {"sparse_csr_tensor", "'values'", "(3,)", "(2,)"}},
        {"float column indices",
         [v3] {
           sparse_csr_tensor(Tensor::from_vector({0, 2, 2, 3}, {4}, kInt64), Tensor::from_vector({1, 2, 0}, {3}), v3,
                             {3, 3});
         },
         {"sparse_csr_tensor", "'col_indices'", "int64 or int32"}},
        {"undefined values",
         [] {
           sparse_csr_tensor(Tensor::from_vector({0, 0}, {2}, kInt64), Tensor::zeros({0}, kInt64), Tensor(), {1, 1});
         },
         {"sparse_csr_tensor", "'values'", "undefined"}},
    };
    t.push_back(op);
  }
  {  // sparse_coo_tensor(indices, values, size), read through its values: E entries at random
     // positions of an M x K matrix, unsorted, with duplicates
    OpInfo op;
    op.name = "sparse_coo_tensor";
    op.signature = "sparse_coo_tensor(Tensor,Tensor,Shape)";
    op.torch = "out = torch.sparse_coo_tensor(idx.long(), v, (M, K)).coalesce().values()";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t M = s.sizes[0], K = s.sizes[1], E = M == 0 || K == 0 ? 0 : s.sizes[2];
      std::vector<double> idx(static_cast<std::size_t>(2 * E));
      for (std::int64_t e = 0; e < E; ++e) {
        idx[static_cast<std::size_t>(e)] = std::floor(g.uniform() * static_cast<double>(M));
        idx[static_cast<std::size_t>(E + e)] = std::floor(g.uniform() * static_cast<double>(K));
      }
      SampleInput si{{{"v", values({E}, g, dt)}, {"idx", Tensor::from_vector(idx, {2, E}, kFloat64), false}},
                     {},
                     fmt::format("M = {}\nK = {}\n", M, K)};
      si.call = [M, K](const Tensors& in) { return sparse_coo_tensor(in[1].to(kInt64), in[0], {M, K}).values(); };
      return si;
    };
    op.size_names = {"M", "K", "E"};
    op.small = {3, 4, 9};  // 9 entries in 12 places: duplicates
    op.threads = {300, 300, 50000};
    op.check_undefined = false;
    op.int64_inputs = {"v", "idx"};  // integer values: summed exactly
    const Tensor one = Tensor::zeros({1}, kFloat64);
    op.errors = {
        {"column out of range",
         [one] {
           sparse_coo_tensor(Tensor::from_vector({0, 3}, {2, 1}, kInt64), one, {2, 2});
         },
         {"sparse_coo_tensor", "'indices'", "column index 3", "2 columns"}},
        {"indices not (2, nnz)",
         [one] {
           sparse_coo_tensor(Tensor::from_vector({0, 1, 2}, {3, 1}, kInt64), one, {2, 2});
         },
         {"sparse_coo_tensor", "'indices'", "(2, nnz)", "(3, 1)"}},
        {"2^40 rows (more row offsets than memory)",
         [one] {
           sparse_coo_tensor(Tensor::from_vector({0, 0}, {2, 1}, kInt64), one, {std::int64_t{1} << 40, 4});
         },
         {"sparse_coo_tensor", "'size'", "bytes", "memory"}},
        {"INT64_MAX rows",
         [one] {
           sparse_coo_tensor(Tensor::from_vector({0, 0}, {2, 1}, kInt64), one, {INT64_MAX, 1});
         },
         {"sparse_coo_tensor", "'size'", "overflows"}},
        {"undefined values",
         [] {
           sparse_coo_tensor(Tensor::zeros({2, 0}, kInt64), Tensor(), {2, 2});
         },
         {"sparse_coo_tensor", "'values'", "undefined"}},
    };
    t.push_back(op);
  }
  {  // to_sparse_csr(dense), read through its values: dense = d ⊙ mask (M x K), so that the zeros stay
     // zeros under gradcheck's perturbations
    OpInfo op;
    op.name = "to_sparse_csr";
    op.signature = "to_sparse_csr(Tensor)";
    op.torch = "out = (d * mask).to_sparse().values()";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      SampleInput si{{{"d", values({s.sizes[0], s.sizes[1]}, g, dt)},
                      {"mask", values({s.sizes[0], s.sizes[1]}, g, dt, Domain::mask), false}},
                     {},
                     {}};
      si.call = [](const Tensors& in) { return to_sparse_csr(mul(in[0], in[1])).values(); };
      return si;
    };
    op.size_names = {"M", "K"};
    op.small = {5, 4};
    op.threads = {400, 300};
    op.check_undefined = false;
    op.int64_inputs = {"d", "mask"};  // an integer matrix's entries
    op.errors = {
        {"1-d input", [] { to_sparse_csr(Tensor::zeros({3})); }, {"to_sparse_csr", "'dense'", "(3,)"}},
        {"undefined input", [] { to_sparse_csr(Tensor()); }, {"to_sparse_csr", "'dense'", "undefined"}},
    };
    t.push_back(op);
  }
  add_segment_entries(t);
}

// The offsets of S segments, segment i with i % 4 entries (empty ones included) or, without empty
// ones, 1 + i % 3, as float64 (an index input of the sample) and the Python that defines the same
// offsets as `off` (a long tensor).
std::vector<double> segment_offsets(std::int64_t S, bool empty) {
  std::vector<double> off{0};
  for (std::int64_t i = 0; i < S; ++i) off.push_back(off.back() + static_cast<double>(empty ? i % 4 : 1 + i % 3));
  return off;
}
std::string torch_segment_offsets(std::int64_t S, bool empty) {
  return fmt::format("off = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum({}, 0)])\n",
                     empty ? fmt::format("torch.arange({}) % 4", S) : fmt::format("1 + torch.arange({}) % 3", S));
}

void add_segment_entries(std::vector<OpInfo>& t) {
  // data (E, F) cut into S segments: segment i has i % 4 entries for sum (empty ones included) and
  // 1 + i % 3 for mean (torch gives NaN for an empty one, which finite differences cannot check);
  // segment_mean_empty0 has empty segments and asks for 0 there (torch: initial = 0, which for a
  // mean is the same)
  for (int kind : {0, 1, 2}) {
    const bool mean = kind > 0, empty0 = kind == 2;
    OpInfo op;
    op.name = !mean ? "segment_sum" : empty0 ? "segment_mean_empty0" : "segment_mean";
    op.signature = mean ? "segment_mean(Tensor,Tensor,double)" : "segment_sum(Tensor,Tensor)";
    op.torch = fmt::format("out = torch.segment_reduce(data, '{}', offsets=off.long(), axis=0{})",
                           mean ? "mean" : "sum", empty0 ? ", initial=0.0" : "");
    op.sample = [mean, empty0](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::vector<double> off = segment_offsets(s.sizes[0], !mean || empty0);
      const auto e = static_cast<std::int64_t>(off.back());
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)},
                      {"off", Tensor::from_vector(off, {s.sizes[0] + 1}, kFloat64), false}},
                     {},
                     {}};
      si.call = [mean, empty0](const Tensors& in) {
        const Tensor off_i = in[1].to(kInt64);
        if (empty0) return segment_mean(in[0], off_i, 0.0);
        return mean ? segment_mean(in[0], off_i) : segment_sum(in[0], off_i);
      };
      return si;
    };
    op.size_names = {"S", "F"};
    op.small = {5, 3};
    op.threads = {2000, 40};
    op.check_undefined = false;  // off is an index input; undefined data: errors below
    op.int64_inputs = {"off"};
    // torch.segment_reduce refuses empty data
    op.torch_skip = [mean, empty0](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 || s.sizes[0] == 0 || ((!mean || empty0) && s.sizes[0] == 1)
                 ? "torch.segment_reduce: empty data"
                 : "";
    };
    op.errors = segment_errors(mean ? "segment_mean" : "segment_sum", [mean](const Tensor& d, const Tensor& o) {
      return mean ? segment_mean(d, o) : segment_sum(d, o);
    });
    t.push_back(op);
  }
  // segment_max / segment_min: data (E, F), segment i with 1 + i % 3 entries (an empty segment's
  // ±inf would make finite differences NaN; test_sparse.cpp checks it against torch), and the
  // _empty0 entries with empty segments and empty_value 0. torch: scatter_reduce with amax / amin
  // (include_self=False, so each segment's own values), whose gradient splits evenly at ties, as ours
  // (torch.segment_reduce's does for a positive g only); the fill of its result is the empty value.
  // The offsets are bound in the call and defined in the torch prelude, so that the test at ties
  // redraws only data.
  for (bool is_max : {true, false})
    for (bool empty0 : {false, true}) {
      OpInfo op;
      const std::string name = is_max ? "segment_max" : "segment_min";
      op.name = empty0 ? name + "_empty0" : name;
      op.signature = name + "(Tensor,Tensor,double)";
      op.torch = fmt::format(
          "idx = torch.repeat_interleave(torch.arange(len(off) - 1), off[1:] - off[:-1])\n"
          "out = torch.full((len(off) - 1,) + data.shape[1:], {}, dtype=data.dtype)\n"
          "out = out.scatter_reduce(0, idx.view(-1, 1).expand(data.shape), data, '{}', include_self=False)",
          empty0   ? "0.0"
          : is_max ? "-float('inf')"
                   : "float('inf')",
          is_max ? "amax" : "amin");
      op.sample = [is_max, empty0](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t S = s.sizes[0];
        const std::vector<double> off = segment_offsets(S, empty0);
        const auto e = static_cast<std::int64_t>(off.back());
        const Tensor off_i = Tensor::from_vector(off, {S + 1}, kInt64);
        SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)}}, {}, torch_segment_offsets(S, empty0)};
        si.call = [is_max, empty0, off_i](const Tensors& in) {
          if (empty0) return is_max ? segment_max(in[0], off_i, 0.0) : segment_min(in[0], off_i, 0.0);
          return is_max ? segment_max(in[0], off_i) : segment_min(in[0], off_i);
        };
        return si;
      };
      op.size_names = {"S", "F"};
      op.small = {5, 3};
      op.threads = {2000, 40};
      op.errors = segment_errors(
          name, [is_max](const Tensor& d, const Tensor& o) { return is_max ? segment_max(d, o) : segment_min(d, o); });
      t.push_back(op);
    }
  // segment_logsumexp: data (E, F), segment i with 1 + i % 3 entries (an empty segment's −inf would make
  // finite differences NaN); torch: logsumexp over each segment's rows. Offsets as for segment_max.
  {
    OpInfo op;
    op.name = "segment_logsumexp";
    op.signature = "segment_logsumexp(Tensor,Tensor)";
    op.torch =
        "o = off.tolist()\n"
        "parts = [torch.logsumexp(data[o[i]:o[i + 1]], 0, keepdim=True) for i in range(len(o) - 1)]\n"
        "out = torch.cat(parts, 0) if parts else data.new_zeros((0,) + data.shape[1:])\n";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t S = s.sizes[0];
      const std::vector<double> off = segment_offsets(S, false);
      const auto e = static_cast<std::int64_t>(off.back());
      const Tensor off_i = Tensor::from_vector(off, {S + 1}, kInt64);
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)}}, {}, torch_segment_offsets(S, false)};
      si.call = [off_i](const Tensors& in) { return segment_logsumexp(in[0], off_i); };
      return si;
    };
    op.size_names = {"S", "F"};
    op.small = {5, 3};
    op.threads = {2000, 40};
    op.errors = segment_errors(op.name, [](const Tensor& d, const Tensor& o) { return segment_logsumexp(d, o); });
    t.push_back(op);
  }
  // segment_softmax / segment_log_softmax: data (E, F), segment i with i % 4 entries (empty ones included)
  for (bool log : {false, true}) {
    OpInfo op;
    op.name = log ? "segment_log_softmax" : "segment_softmax";
    op.signature = op.name + "(Tensor,Tensor)";
    op.torch = fmt::format(
        "o = off.long().tolist()\n"
        "parts = [data[:0]]\n"
        "for i in range(len(o) - 1):\n"
        "    parts.append(torch.{}(data[o[i]:o[i + 1]], 0))\n"
        "out = torch.cat(parts, 0)\n",
        log ? "log_softmax" : "softmax");
    op.sample = [log](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::vector<double> off = segment_offsets(s.sizes[0], true);
      const auto e = static_cast<std::int64_t>(off.back());
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)},
                      {"off", Tensor::from_vector(off, {s.sizes[0] + 1}, kFloat64), false}},
                     {},
                     {}};
      si.call = [log](const Tensors& in) {
        return log ? segment_log_softmax(in[0], in[1].to(kInt64)) : segment_softmax(in[0], in[1].to(kInt64));
      };
      return si;
    };
    op.size_names = {"S", "F"};
    op.small = {6, 3};
    op.threads = {2000, 40};
    op.check_undefined = false;
    op.int64_inputs = {"off"};
    op.errors = segment_errors(op.name, [log](const Tensor& d, const Tensor& o) {
      return log ? segment_log_softmax(d, o) : segment_softmax(d, o);
    });
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_sparse_entries);

}  // namespace xgrad::test::table
