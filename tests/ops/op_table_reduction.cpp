// The op table's entries for ops/reduction.hpp: sum, mean, max, logsumexp, min, prod, var, std, norm,
// cumsum, and max/min along a dim with indices (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

namespace {

/// x (batch..., n, m) reduced over `axes` (empty: all).
OpInfo reduction(std::string name, std::string torch,
                 std::function<Tensor(const Tensor&, const std::vector<std::int64_t>&, bool)> f,
                 std::vector<std::int64_t> axes, bool keepdim, bool refuses_empty) {
  OpInfo op;
  const std::string opname = name.substr(0, name.find('_'));
  op.name = std::move(name);
  op.signature = opname + "(Tensor,vector<int64_t>,bool)";
  op.torch = std::move(torch);
  op.call = [f, axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
  op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
  };
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  op.supports_batch = true;
  op.supports_scalar = axes.empty() || axes == std::vector<std::int64_t>{-1};  // torch: axis -2 of a 0-d is an error
  if (refuses_empty)
    op.refuses = [axes](const SampleSpec& s) -> std::string {
      // max has no identity: an empty reduced axis is refused (an empty kept axis is fine)
      if (s.scalar) return "";
      const bool empty = axes.empty() ? (s.sizes[0] == 0 || s.sizes[1] == 0 || numel_of(s.batch) == 0)
                                      : std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) {
                                          return s.sizes[static_cast<std::size_t>(a + 2)] == 0;
                                        });
      return empty ? "size 0" : "";
    };
  op.errors = {
      {"axis out of range",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), {2}, false);
       },
       {opname, "axis 2", "(2, 3)"}},
      {"axis named twice",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), {1, -1}, false);
       },
       {opname, "twice", "(2, 3)"}},
  };
  return op;
}

/// Values with exact zeros: every 5th element, and two in row 1 when it has 2 or more elements (prod's
/// gradient with one zero and with two).
Tensor with_zeros(const Shape& shape, Generator& g, Dtype dt) {
  Tensor v = values(shape, g, kFloat64);
  double* p = v.data<double>();
  for (std::int64_t i = 0; i < v.numel(); i += 5) p[i] = 0;
  if (shape.size() >= 2 && shape[shape.size() - 2] > 1 && shape.back() >= 2) {
    p[shape.back()] = 0;
    p[shape.back() + 1] = 0;
  }
  return v.to(dt);
}

}  // namespace

// The entries of reduction.hpp.
void add_reduction_entries(std::vector<OpInfo>& t) {
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

  // reductions over non-adjacent axes {0, 2} of (n, m, k)
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

  const Tensor z23 = Tensor::zeros({2, 3}, kFloat64), s0 = Tensor::scalar(1.0, kFloat64);
  // reductions: min mirrors max's entries; prod (with zeros), var, std, norm, cumsum
  for (auto [name, torch, axes, keepdim] :
       std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool>>{
           {"min_all", "out = torch.amin(a, tuple(range(a.dim())))", {}, false},
           {"min_last", "out = torch.amin(a, -1)", {-1}, false},
           {"min_rows_keepdim", "out = torch.amin(a, -2, keepdim=True)", {-2}, true}})
    t.push_back(reduction(
        name, torch, [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return min(x, ax, kd); }, axes,
        keepdim, true));
  {
    OpInfo op = reduction(
        "min_outer_axes", "out = torch.amin(a, (0, 2))",
        [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return min(x, ax, kd); }, {0, 2}, false,
        false);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.supports_batch = false;
    op.supports_scalar = false;
    op.refuses = [](const SampleSpec& s) -> std::string { return s.sizes[0] == 0 || s.sizes[2] == 0 ? "size 0" : ""; };
    t.push_back(op);
  }
  auto zeros_sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{
        {{"a", with_zeros(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
  };
  auto prod_fn = [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return prod(x, ax, kd); };
  for (auto [name, torch, axes, keepdim] :
       std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool>>{
           {"prod_all", "out = a.prod()", {}, false},
           {"prod_last", "out = torch.prod(a, -1)", {-1}, false},
           {"prod_rows_keepdim", "out = torch.prod(a, -2, keepdim=True)", {-2}, true}}) {
    OpInfo op = reduction(name, torch, prod_fn, axes, keepdim, false);
    op.sample = zeros_sample;
    if (name == "prod_all") {
      op.threads = {200, 200};  // values near +-1: the product of 40000 stays finite
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        // values near +-1 so that products over the large sizes neither overflow nor vanish
        Tensor v = values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64, Domain::unit);
        double* p = v.data<double>();
        for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = (i % 2 ? -1 : 1) * (0.9 + 0.2 * p[i]);
        if (v.numel() > 3) p[3] = 0;
        return SampleInput{{{"a", v.to(dt)}}, {}, {}};
      };
    }
    t.push_back(op);
  }
  {
    OpInfo op = reduction("prod_outer_axes", "out = a.prod(2).prod(0)", prod_fn, {0, 2}, false, false);
    op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
      return SampleInput{{{"a", with_zeros({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)}}, {}, {}};
    };
    op.size_names = {"n", "m", "k"};
    op.small = {3, 4, 2};
    op.threads = {40, 30, 40};
    op.large = {30, 30, 30};
    op.supports_batch = false;
    op.supports_scalar = false;
    t.push_back(op);
  }
  for (bool is_std : {false, true}) {
    const std::string opname = is_std ? "std" : "var";
    auto fn = [is_std](std::int64_t c) {
      return [is_std, c](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) {
        return is_std ? xgrad::std(x, ax, c, kd) : var(x, ax, c, kd);
      };
    };
    for (auto [suffix, torch, axes, keepdim, corr] :
         std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, bool, std::int64_t>>{
             {"_all", "dim=None, correction=1", {}, false, 1},
             {"_last_c0", "dim=-1, correction=0", {-1}, false, 0},
             {"_rows_keepdim_c2", "dim=-2, correction=2, keepdim=True", {-2}, true, 2}}) {
      OpInfo op = reduction(opname + suffix, fmt::format("out = torch.{}(a, {})", opname, torch), fn(corr), axes,
                            keepdim, false);
      op.signature = opname + "(Tensor,vector<int64_t>,int64_t,bool)";
      op.call = [f = fn(corr), axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
      op.torch_skip = [axes = axes, corr = corr](const SampleSpec& s) -> std::string {
        const std::int64_t k = s.scalar        ? 1
                               : axes.empty()  ? s.sizes[0] * s.sizes[1] * numel_of(s.batch)
                               : axes[0] == -1 ? s.sizes[1]
                                               : s.sizes[0];
        return k <= corr ? "K <= correction: torch 1.13's backward gives NaN, inf or finite values by case" : "";
      };
      if (suffix == "_all") op.torch = fmt::format("out = torch.{}(a, tuple(range(a.dim())), correction=1)", opname);
      op.errors = {{"axis out of range",
                    [fn] {
                      fn(1)(Tensor::zeros({2, 3}, kFloat64), {2}, false);
                    },
                    {opname, "axis 2", "(2, 3)"}},
                   {"negative correction",
                    [fn] {
                      fn(-1)(Tensor::zeros({2, 3}, kFloat64), {}, false);
                    },
                    {opname, "correction", "-1"}}};
      t.push_back(op);
    }
  }
  {
    auto normfn = [](double p) {
      return [p](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return norm(x, p, ax, kd); };
    };
    const double inf = std::numeric_limits<double>::infinity();
    for (auto [name, ord, p, axes, keepdim] :
         std::vector<std::tuple<std::string, std::string, double, std::vector<std::int64_t>, bool>>{
             {"norm_all", "2", 2.0, {}, false},
             {"norm_last_p1", "1", 1.0, {-1}, false},
             {"norm_rows_inf_keepdim", "float('inf')", inf, {-2}, true},
             {"norm_last_p3", "3", 3.0, {-1}, true}}) {
      OpInfo op = reduction(name,
                            fmt::format("out = torch.linalg.vector_norm(a, {}, dim={}, keepdim={})", ord,
                                        axes.empty() ? "None" : std::to_string(axes[0]), keepdim ? "True" : "False"),
                            normfn(p), axes, keepdim, std::isinf(p));
      op.signature = "norm(Tensor,double,vector<int64_t>,bool)";
      op.call = [f = normfn(p), axes, keepdim](const Tensors& in) { return f(in[0], axes, keepdim); };
      // the 0-gradient convention at x = 0 (p = 2 and 1): zeros in the samples, and a zero row
      if (!std::isinf(p))
        op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
          Tensor v = with_zeros(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, kFloat64);
          if (v.dim() == 2 && v.numel() > 0)
            for (std::int64_t j = 0; j < v.shape()[1]; ++j) v.data<double>()[j] = 0;
          return SampleInput{{{"a", v.to(dt)}}, {}, {}};
        };
      op.errors.push_back({"p below 1", [] { norm(Tensor::zeros({2, 3}, kFloat64), 0.5); }, {"norm", "0.5"}});
      t.push_back(op);
    }
    OpInfo op = reduction(
        "norm_fro", "out = torch.norm(a, 'fro', dim=(-2, -1))",
        [](const Tensor& x, const std::vector<std::int64_t>& ax, bool kd) { return norm(x, "fro", ax, kd); }, {-2, -1},
        false, false);
    op.signature = "norm(Tensor,string,vector<int64_t>,bool)";
    op.supports_scalar = false;
    op.errors.push_back({"nuclear norm", [] { norm(Tensor::zeros({2, 3}, kFloat64), "nuc"); }, {"norm", "nuc"}});
    t.push_back(op);
  }
  {
    for (std::int64_t dim : {-1, 0}) {
      OpInfo op =
          nm_entry(dim == -1 ? "cumsum_last" : "cumsum_first", "cumsum(Tensor,int64_t)",
                   fmt::format("out = torch.cumsum(a, {})", dim), [dim](const Tensor& a) { return cumsum(a, dim); });
      op.supports_batch = dim == -1;
      op.supports_scalar = true;
      op.errors = {{"dim out of range", [z23] { cumsum(z23, 2); }, {"cumsum", "2", "(2, 3)"}},
                   {"dim 1 of a 0-d tensor", [s0] { cumsum(s0, 1); }, {"cumsum", "()"}}};
      t.push_back(op);
    }
  }
  // max and min along a dim, with indices (argmax, argmin: op_table_indexing.cpp)
  for (bool is_max : {true, false}) {
    const std::string opname = is_max ? "max" : "min";
    for (bool values_out : {true, false}) {
      OpInfo op =
          nm_base(opname + (values_out ? "_dim_values" : "_dim_indices"), opname + "_with_indices(Tensor,int64_t,bool)",
                  fmt::format("out = torch.{}(a, -1, keepdim=True)[{}]{}", opname, values_out ? 0 : 1,
                              values_out ? "" : ".to(a.dtype)"));
      op.op = opname;
      op.call = [is_max, values_out](const Tensors& in) {
        auto [v, i] = is_max ? max(in[0], -1, true) : min(in[0], -1, true);  // torch's spelling (integer dim)
        return values_out ? v : as_float(i, in[0]);
      };
      op.sample = nm_sample;
      op.differentiable = values_out;
      op.supports_batch = true;
      op.supports_scalar = true;
      op.refuses = [](const SampleSpec& s) -> std::string { return !s.scalar && s.sizes[1] == 0 ? "size 0" : ""; };
      op.errors = {{"int64 x with an empty dim",
                    [is_max] {
                      is_max ? max(Tensor::zeros({2, 0}, kInt64), 1) : min(Tensor::zeros({2, 0}, kInt64), 1);
                    },
                    {opname, "size 0", "(2, 0)"}}};
      t.push_back(op);
    }
  }
}

const bool registered = register_entries(__FILE__, add_reduction_entries);

}  // namespace xgrad::test::table
