// The entries of sparse.hpp: spmm and sddmm on a random CSR pattern, the segment reductions.
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
  }
  add_segment_entries(t);
}

void add_segment_entries(std::vector<OpInfo>& t) {
  // data (E, F) cut into S segments: segment i has i % 4 entries for sum (empty ones included) and
  // 1 + i % 3 for mean (torch gives NaN for an empty one, which finite differences cannot check)
  for (bool mean : {false, true}) {
    OpInfo op;
    op.name = mean ? "segment_mean" : "segment_sum";
    op.signature = op.name + "(Tensor,Tensor)";
    op.torch = fmt::format("out = torch.segment_reduce(data, '{}', offsets=off.long(), axis=0)", mean ? "mean" : "sum");
    op.sample = [mean](Dtype dt, const SampleSpec& s, Generator& g) {
      std::vector<double> off{0};
      for (std::int64_t i = 0; i < s.sizes[0]; ++i) off.push_back(off.back() + (mean ? 1 + i % 3 : i % 4));
      const auto e = static_cast<std::int64_t>(off.back());
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)},
                      {"off", Tensor::from_vector(off, {s.sizes[0] + 1}, kFloat64), false}},
                     {},
                     {}};
      si.call = [mean](const Tensors& in) {
        const Tensor off_i = in[1].to(kInt64);
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
    op.torch_skip = [mean](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 || s.sizes[0] == 0 || (!mean && s.sizes[0] == 1) ? "torch.segment_reduce: empty data" : "";
    };
    op.errors = segment_errors(
        op.name, [mean](const Tensor& d, const Tensor& o) { return mean ? segment_mean(d, o) : segment_sum(d, o); });
    t.push_back(op);
  }
  // segment_max / segment_min: data (E, F), segment i with 1 + i % 3 entries (an empty segment's
  // ±inf would make finite differences NaN; test_sparse.cpp checks it against torch). The offsets
  // are bound in the call and defined in the torch prelude, so that the test at ties redraws only
  // data.
  for (bool is_max : {true, false}) {
    OpInfo op;
    op.name = is_max ? "segment_max" : "segment_min";
    op.signature = op.name + "(Tensor,Tensor)";
    op.torch = fmt::format("out = torch.segment_reduce(data, '{}', offsets=off, axis=0)", is_max ? "max" : "min");
    op.sample = [is_max](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t S = s.sizes[0];
      std::vector<double> off{0};
      for (std::int64_t i = 0; i < S; ++i) off.push_back(off.back() + static_cast<double>(1 + i % 3));
      const auto e = static_cast<std::int64_t>(off.back());
      const Tensor off_i = Tensor::from_vector(off, {S + 1}, kInt64);
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)}},
                     {},
                     fmt::format("off = torch.cat([torch.zeros(1, dtype=torch.long), "
                                 "torch.cumsum(1 + torch.arange({}) % 3, 0)])\n",
                                 S)};
      si.call = [is_max, off_i](const Tensors& in) {
        return is_max ? segment_max(in[0], off_i) : segment_min(in[0], off_i);
      };
      return si;
    };
    op.size_names = {"S", "F"};
    op.small = {5, 3};
    op.threads = {2000, 40};
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 || s.sizes[0] == 0 ? "torch.segment_reduce: empty data" : "";
    };
    op.errors = segment_errors(
        op.name, [is_max](const Tensor& d, const Tensor& o) { return is_max ? segment_max(d, o) : segment_min(d, o); });
    t.push_back(op);
  }
  {  // segment_softmax: data (E, F), segment i with i % 4 entries (empty ones included)
    OpInfo op;
    op.name = "segment_softmax";
    op.signature = "segment_softmax(Tensor,Tensor)";
    op.torch =
        "o = off.long().tolist()\n"
        "parts = [data[:0]]\n"
        "for i in range(len(o) - 1):\n"
        "    parts.append(torch.softmax(data[o[i]:o[i + 1]], 0))\n"
        "out = torch.cat(parts, 0)\n";
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      std::vector<double> off{0};
      for (std::int64_t i = 0; i < s.sizes[0]; ++i) off.push_back(off.back() + static_cast<double>(i % 4));
      const auto e = static_cast<std::int64_t>(off.back());
      SampleInput si{{{"data", values({e, s.sizes[1]}, g, dt)},
                      {"off", Tensor::from_vector(off, {s.sizes[0] + 1}, kFloat64), false}},
                     {},
                     {}};
      si.call = [](const Tensors& in) { return segment_softmax(in[0], in[1].to(kInt64)); };
      return si;
    };
    op.size_names = {"S", "F"};
    op.small = {6, 3};
    op.threads = {2000, 40};
    op.check_undefined = false;
    op.int64_inputs = {"off"};
    op.errors = {
        {"offsets not ending at data.size(0)",
         [] {
           segment_softmax(Tensor::zeros({4, 2}, kFloat64), Tensor::from_vector({0, 2, 3}, {3}, kInt64));
         },
         {"segment_softmax", "'offsets'", "data.size(0) = 4", "got 3"}},
        {"undefined data",
         [] { segment_softmax(Tensor(), Tensor::zeros({1}, kInt64)); },
         {"segment_softmax", "'data'", "undefined"}},
    };
    t.push_back(op);
  }
}

}  // namespace xgrad::test::table
