// The op table's entries for ops/indexing.hpp: index_select (the int64-tensor overload), gather ... one_hot
// (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

namespace {

// Index tensors travel through the parity harness as float64 inputs that need no grad (as the
// block-sparse entries do) and are converted to int64 in the call (as_long) and in torch (.long());
// integer results are compared as float64.

Tensor as_long(const Tensor& t) { return t.defined() ? t.to(kInt64) : t; }

/// Integer values in [lo, hi) (float64), for index inputs.
Tensor int_values(const Shape& shape, Generator& g, std::int64_t lo, std::int64_t hi) {
  Tensor t = Tensor::zeros(shape, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<double>(std::min(hi - 1, lo + static_cast<std::int64_t>(std::floor(g.uniform() * (hi - lo)))));
  return t;
}

}  // namespace

// The entries of indexing.hpp.
void add_indexing_entries(std::vector<OpInfo>& t) {
  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64);
  const auto l = [](std::vector<double> v) {
    return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, kFloat64).to(kInt64);
  };
  {
    OpInfo op =
        // the int64-tensor overload is an inline template (indexing.hpp): filed under the std::vector one
        nm_base("index_select_tensor", "index_select(Tensor,int64_t,vector<int64_t>)",
                "out = a.index_select(-2, idx.long())");
    op.call = [](const Tensors& in) { return index_select(in[0], -2, as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0];
      return SampleInput{{{"a", values(bshape(s.batch, {n, s.sizes[1]}), g, dt)},
                          {"idx", int_values({n == 0 ? 0 : n + 2}, g, 0, n), false}},  // repeats: gradients add up
                         {},
                         {}};
    };
    op.supports_batch = true;
    op.errors = {
        {"index out of range",
         [z23, l] {
           index_select(z23, 0, l({0, 2}));
         },
         {"index_select", "2", "size 2"}},
        {"negative index (torch refuses it too)",
         [z23, l] { index_select(z23, 1, l({-1})); },
         {"index_select", "-1", "size 3"}},
        {"float index", [z23] { index_select(z23, 0, Tensor::zeros({1}, kFloat64)); }, {"index_select", "int64"}},
        {"2-d index",
         [z23] {
           index_select(z23, 0, Tensor::zeros({1, 1}, kInt64));
         },
         {"index_select", "(1, 1)"}}};
    t.push_back(op);
  }
  {
    OpInfo op = nm_base("gather", "gather(Tensor,int64_t,Tensor)", "out = torch.gather(a, 1, idx.long())");
    op.call = [](const Tensors& in) { return gather(in[0], 1, as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      // index longer than x along dim 1 and shorter along dim 0
      return SampleInput{
          {{"a", values({n, m}, g, dt)}, {"idx", int_values({(n + 1) / 2, 2 * m}, g, 0, m), false}}, {}, {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    gather(z23, 1, Tensor::full({2, 1}, 3, kInt64));
                  },
                  {"gather", "3", "size 3"}},
                 {"negative index",
                  [z23] {
                    gather(z23, 1, Tensor::full({2, 1}, -1, kInt64));
                  },
                  {"gather", "-1"}},
                 {"index dims", [z23] { gather(z23, 1, Tensor::zeros({2}, kInt64)); }, {"gather", "(2,)", "(2, 3)"}},
                 {"index larger at another dim",
                  [z23] {
                    gather(z23, 1, Tensor::zeros({3, 1}, kInt64));
                  },
                  {"gather", "(3, 1)", "(2, 3)"}},
                 {"float index",
                  [z23] {
                    gather(z23, 1, Tensor::zeros({2, 1}, kFloat64));
                  },
                  {"gather", "int64"}}};
    t.push_back(op);
  }
  {
    OpInfo op = nm_base("take_along_dim", "take_along_dim(Tensor,Tensor,optional<int64_t>)",
                        "out = torch.take_along_dim(a, idx.long(), 1)");
    op.call = [](const Tensors& in) { return take_along_dim(in[0], as_long(in[1]), 1); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{{{"a", values({n, m}, g, dt)}, {"idx", int_values({1, 2 * m}, g, 0, m), false}}, {}, {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    take_along_dim(z23, Tensor::full({1, 1}, 3, kInt64), 1);
                  },
                  {"take_along_dim", "3"}},
                 {"shapes that do not broadcast",
                  [z23] {
                    take_along_dim(z23, Tensor::zeros({3, 1}, kInt64), 1);
                  },
                  {"take_along_dim", "(3, 1)"}}};
    t.push_back(op);
    op = nm_base("take_along_dim_flat", "take_along_dim(Tensor,Tensor,optional<int64_t>)",
                 "out = torch.take_along_dim(a, idx.long())");
    op.call = [](const Tensors& in) { return take_along_dim(in[0], as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{
          {{"a", values({n, m}, g, dt)}, {"idx", int_values({n * m == 0 ? 0 : 5}, g, 0, n * m), false}}, {}, {}};
    };
    op.errors = {{"index out of range", [z23, l] { take_along_dim(z23, l({6})); }, {"take_along_dim", "6", "size 6"}}};
    t.push_back(op);
  }
  {
    OpInfo op =
        nm_base("scatter_add", "scatter_add(Tensor,int64_t,Tensor,Tensor)", "out = a.scatter_add(0, idx.long(), src)");
    op.call = [](const Tensors& in) { return scatter_add(in[0], 0, as_long(in[1]), in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      // more index rows than x has (repeats add up); src of index's shape (torch 1.13's backward
      // fails for a larger src, which test_indexing.cpp checks on its own)
      return SampleInput{{{"a", values({n, m}, g, dt)},
                          {"idx", int_values({2 * n, m}, g, 0, n), false},
                          {"src", values({2 * n, m}, g, dt)}},
                         {},
                         {}};
    };
    op.errors = {{"index out of range",
                  [z23] {
                    scatter_add(z23, 0, Tensor::full({1, 3}, 2, kInt64), z23);
                  },
                  {"scatter_add", "2", "size 2"}},
                 {"index larger than src",
                  [z23] {
                    scatter_add(z23, 0, Tensor::zeros({3, 3}, kInt64), z23);
                  },
                  {"scatter_add", "(3, 3)", "(2, 3)"}},
                 {"dtype mix",
                  [z23] {
                    scatter_add(z23, 0, Tensor::zeros({1, 3}, kInt64), Tensor::zeros({2, 3}, kFloat32));
                  },
                  {"scatter_add", "dtype"}},
                 {"integer x",
                  [z23] {
                    scatter_add(Tensor::zeros({2, 3}, kInt64), 0, Tensor::zeros({1, 3}, kInt64), z23);
                  },
                  {"scatter_add", "int64"}}};
    t.push_back(op);
  }
  // scatter_reduce: a (n, m), src (2n, m) reduced along dim 0 at a fixed index with repeats (each row
  // of a reached about twice, some more, some not at all), the same formula in C++ and in the torch
  // prelude: the index is no input, so the test at ties redraws only a and src.
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool include_self : {true, false}) {
      const std::string r = reduce;
      OpInfo op = nm_base("scatter_reduce_" + r + (include_self ? "" : "_exclude_self"),
                          "scatter_reduce(Tensor,int64_t,Tensor,Tensor,string,bool)",
                          fmt::format("out = a.scatter_reduce(0, idx, src, '{}', include_self={})", r,
                                      include_self ? "True" : "False"));
      op.op = "scatter_reduce";
      op.sample = [r, include_self](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t n = s.sizes[0], m = s.sizes[1], rows = 2 * n;
        Tensor idx = Tensor::zeros({rows, m}, kInt64);
        std::int64_t* p = idx.data<std::int64_t>();
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < m; ++j)
            p[i * m + j] = (i * 7 + j * 3 + (i * j) % 5) % std::max<std::int64_t>(n, 1);
        SampleInput si{{{"a", values({n, m}, g, dt)}, {"src", values({rows, m}, g, dt)}},
                       {},
                       fmt::format("_r = torch.arange({}).reshape(-1, 1)\n_c = torch.arange({}).reshape(1, -1)\n"
                                   "idx = (_r * 7 + _c * 3 + (_r * _c) % 5) % {}\n",
                                   rows, m, std::max<std::int64_t>(n, 1))};
        si.call = [r, include_self, idx](const Tensors& in) {
          return scatter_reduce(in[0], 0, idx, in[1], r, include_self);
        };
        return si;
      };
      op.errors = {{"unknown reduce",
                    [z23] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kInt64), z23, "max");
                    },
                    {"scatter_reduce", "'reduce'", "'max'", "amax"}},
                   {"index out of range",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::full({1, 3}, 2, kInt64), z23, r);
                    },
                    {"scatter_reduce", "2", "size 2"}},
                   {"negative index",
                    [z23, r] {
                      scatter_reduce(z23, 1, Tensor::full({2, 1}, -1, kInt64), z23, r, false);
                    },
                    {"scatter_reduce", "-1", "size 3"}},
                   {"index larger than src",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({3, 3}, kInt64), z23, r);
                    },
                    {"scatter_reduce", "(3, 3)", "(2, 3)"}},
                   {"index with fewer dims",
                    [z23, r] { scatter_reduce(z23, 0, Tensor::zeros({3}, kInt64), z23, r); },
                    {"scatter_reduce", "(3,)", "(2, 3)"}},
                   {"float index",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kFloat64), z23, r);
                    },
                    {"scatter_reduce", "'index'", "int64"}},
                   {"dtype mix",
                    [z23, r] {
                      scatter_reduce(z23, 0, Tensor::zeros({1, 3}, kInt64), Tensor::zeros({2, 3}, kFloat32), r);
                    },
                    {"scatter_reduce", "dtype"}}};
      if (r == "prod") op.rtol32 = 1e-4;
      t.push_back(op);
    }
  {
    OpInfo op =
        nm_base("index_add", "index_add(Tensor,int64_t,Tensor,Tensor)", "out = a.index_add(-1, idx.long(), src)");
    op.call = [](const Tensors& in) { return index_add(in[0], -1, as_long(in[1]), in[2]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0], m = s.sizes[1];
      return SampleInput{{{"a", values({n, m}, g, dt)},
                          {"idx", int_values({m == 0 ? 0 : 2 * m}, g, 0, m), false},
                          {"src", values({n, m == 0 ? 0 : 2 * m}, g, dt)}},
                         {},
                         {}};
    };
    op.errors = {{"index out of range",
                  [z23, l] {
                    index_add(z23, 1, l({3}), Tensor::zeros({2, 1}, kFloat64));
                  },
                  {"index_add", "3", "size 3"}},
                 {"src of the wrong shape", [z23, l] { index_add(z23, 1, l({0}), z23); }, {"index_add", "(2, 3)"}}};
    t.push_back(op);
  }
  {
    OpInfo op = nm_base("index_int", "index(Tensor,Tensor)", "out = a[idx.long()]");
    op.call = [](const Tensors& in) { return index(in[0], as_long(in[1])); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t n = s.sizes[0];
      // negative indices and repeats (x[idx] wraps negatives, as torch)
      return SampleInput{
          {{"a", values({n, s.sizes[1]}, g, dt)}, {"idx", int_values({2, n == 0 ? 0 : 3}, g, -n, n), false}}, {}, {}};
    };
    op.errors = {
        {"index out of range", [z23, l] { index(z23, l({-3})); }, {"index", "-3", "size 2"}},
        {"float index", [z23] { index(z23, Tensor::zeros({1}, kFloat64)); }, {"index", "int64"}},
        {"0-d x", [l] { index(Tensor::scalar(1.0, kFloat64), l({0})); }, {"index", "0-d"}},
        {"mask of the wrong shape", [z23] { index(z23, Tensor::zeros({3}, kBool)); }, {"index", "(3,)", "(2, 3)"}}};
    t.push_back(op);
    for (bool rows : {true, false}) {
      op = nm_base(rows ? "index_mask_rows" : "index_mask_elements", "index(Tensor,Tensor)", "out = a[mask.bool()]");
      op.call = [](const Tensors& in) { return index(in[0], in[1].defined() ? in[1].to(kBool) : in[1]); };
      op.sample = [rows](Dtype dt, const SampleSpec& s, Generator& g) {
        const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
        const Shape ms = rows ? Shape(sh.begin(), sh.end() - 1) : sh;
        return SampleInput{{{"a", values(sh, g, dt)}, {"mask", values(ms, g, kFloat64, Domain::mask), false}}, {}, {}};
      };
      op.supports_batch = true;
      t.push_back(op);
    }
  }
  // arg-reductions (max and min with indices: op_table_reduction.cpp)
  for (bool is_max : {true, false}) {
    const std::string arg = is_max ? "argmax" : "argmin";
    OpInfo op = nm_base(arg + "_last", arg + "(Tensor,optional<int64_t>,bool)",
                        fmt::format("out = torch.{}(a, -1).to(a.dtype)", arg));
    op.call = [is_max](const Tensors& in) { return as_float(is_max ? argmax(in[0], -1) : argmin(in[0], -1), in[0]); };
    op.sample = nm_sample;
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    op.refuses = [](const SampleSpec& s) -> std::string { return !s.scalar && s.sizes[1] == 0 ? "size 0" : ""; };
    op.errors = {
        {"dim out of range", [z23, is_max] { is_max ? argmax(z23, 2) : argmin(z23, 2); }, {arg, "2", "(2, 3)"}},
        {"empty tensor",
         [is_max] { is_max ? argmax(Tensor::zeros({0})) : argmin(Tensor::zeros({0})); },
         {arg, "empty"}}};
    t.push_back(op);
    op = nm_base(arg + "_all_keepdim", arg + "(Tensor,optional<int64_t>,bool)",
                 fmt::format("out = torch.{}(a, None, True).to(a.dtype)", arg));
    op.call = [is_max](const Tensors& in) {
      return as_float(is_max ? argmax(in[0], std::nullopt, true) : argmin(in[0], std::nullopt, true), in[0]);
    };
    op.sample = nm_sample;
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    op.refuses = [](const SampleSpec& s) -> std::string {
      return !s.scalar && s.sizes[0] * s.sizes[1] * numel_of(s.batch) == 0 ? "empty" : "";
    };
    t.push_back(op);
  }
  // topk and sort: values (gradient scattered back) and indices
  for (bool values_out : {true, false}) {
    for (bool largest : {true, false}) {
      OpInfo op =
          nm_base(fmt::format("topk_{}_{}", largest ? "largest" : "smallest", values_out ? "values" : "indices"),
                  "topk(Tensor,int64_t,int64_t,bool,bool)", "");
      op.call = nullptr;
      op.sample = [values_out, largest](Dtype dt, const SampleSpec& s, Generator& g) {
        SampleInput si = nm_sample(dt, s, g);
        const std::int64_t k = s.scalar ? 1 : (s.sizes[1] + 1) / 2;
        si.call = [k, values_out, largest](const Tensors& in) {
          auto [v, i] = topk(in[0], k, -1, largest);
          return values_out ? v : as_float(i, in[0]);
        };
        si.torch_prelude = fmt::format("k = {}\n", k);
        return si;
      };
      op.torch = fmt::format("out = torch.topk(a, k, -1, largest={})[{}]{}", largest ? "True" : "False",
                             values_out ? 0 : 1, values_out ? "" : ".double()");
      op.differentiable = values_out;
      op.supports_batch = true;
      op.supports_scalar = true;
      op.errors = {{"k too large", [z23] { topk(z23, 4); }, {"topk", "k = 4", "size 3"}},
                   {"negative k", [z23] { topk(z23, -1); }, {"topk", "-1"}}};
      t.push_back(op);
    }
    for (bool descending : {false, true}) {
      OpInfo op =
          nm_base(fmt::format("sort_{}_{}", descending ? "descending" : "ascending", values_out ? "values" : "indices"),
                  "sort(Tensor,int64_t,bool,bool)",
                  fmt::format("out = torch.sort(a, dim=-2, descending={}, stable=True)[{}]{}",
                              descending ? "True" : "False", values_out ? 0 : 1, values_out ? "" : ".double()"));
      op.call = [values_out, descending](const Tensors& in) {
        auto [v, i] = sort(in[0], -2, descending);
        return values_out ? v : as_float(i, in[0]);
      };
      op.sample = [values_out](Dtype dt, const SampleSpec& s, Generator& g) {
        // for the indices: values rounded to halves, so ties occur, which a stable sort keeps in
        // order (not for the values: a tie has no gradient for gradcheck to check)
        Tensor v = values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel() && !values_out; ++i) p[i] = std::round(2 * p[i]) / 2;
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
      op.differentiable = values_out;
      op.supports_batch = true;
      op.errors = {{"dim out of range", [z23] { sort(z23, 2); }, {"sort", "2", "(2, 3)"}},
                   {"integer x", [] { sort(Tensor::zeros({2}, kInt64)); }, {"sort", "int64"}}};
      t.push_back(op);
    }
  }
  {
    OpInfo op = nm_base("nonzero", "nonzero(Tensor)", "out = torch.nonzero(a).to(a.dtype)");
    op.call = [](const Tensors& in) { return as_float(nonzero(in[0]), in[0]); };
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{
          {{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt, Domain::mask)}}, {}, {}};
    };
    op.differentiable = false;
    op.supports_batch = true;
    op.supports_scalar = true;
    t.push_back(op);
  }
  {
    OpInfo op =
        nm_base("one_hot", "one_hot(Tensor,int64_t)", "out = torch.nn.functional.one_hot(y.long(), C).double()");
    op.call = nullptr;
    op.sample = [](Dtype, const SampleSpec& s, Generator& g) {
      const std::int64_t c = s.sizes[1];
      SampleInput si{{{"y", int_values(bshape(s.batch, {c == 0 ? 0 : s.sizes[0]}), g, 0, c), false}}, {}, {}};
      si.call = [c](const Tensors& in) { return one_hot(as_long(in[0]), c).to(kFloat64); };
      si.torch_prelude = fmt::format("C = {}\n", c);
      return si;
    };
    op.differentiable = false;
    op.supports_batch = true;
    op.dtypes = {kFloat64};  // no floating input: the int64 result is compared as float64
    op.torch_skip = [](const SampleSpec& s) -> std::string {
      return s.sizes[1] == 0 ? "torch 1.13 takes num_classes 0 as 'infer', which fails on empty labels" : "";
    };
    op.errors = {
        {"label out of range",
         [l] {
           one_hot(l({0, 3}), 3);
         },
         {"one_hot", "3", "3 classes"}},
        {"negative label", [l] { one_hot(l({-1}), 3); }, {"one_hot", "-1"}},
        {"float labels", [] { one_hot(Tensor::zeros({2}, kFloat64), 3); }, {"one_hot", "int64"}},
        {"empty labels without num_classes", [] { one_hot(Tensor::zeros({0}, kInt64)); }, {"one_hot", "empty"}}};
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_indexing_entries);

}  // namespace xgrad::test::table
