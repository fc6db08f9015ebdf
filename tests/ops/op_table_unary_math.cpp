// The op table's entries for ops/unary_math.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of unary_math.hpp. Samples stay inside each op's domain and away from its poles, kinks
// and jumps: uniform on [lo, hi) where the domain is bounded.
void add_unary_math_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  const std::string TT = "Tensor,Tensor";
  const std::size_t first = t.size();
  auto in_range = [](OpInfo op, double lo, double hi) {
    op.sample = [lo, hi](Dtype dt, const SampleSpec& s, Generator& g) {
      Tensor v = values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]}), g, kFloat64, D::unit);
      double* p = v.data<double>();
      for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = lo + (hi - lo) * p[i];
      return SampleInput{{{"a", v.to(dt)}}, {}, {}};
    };
    return op;
  };
  using U = Tensor (*)(const Tensor&);
  struct Math {
    const char* name;
    U fn;
    Domain d;
    double lo = 0, hi = 0;  // a uniform range instead of d when lo < hi
  };
  for (const Math& m : std::vector<Math>{{"sin", &sin, D::normal},
                                         {"cos", &cos, D::normal},
                                         {"tan", &tan, D::normal, -1.2, 1.2},
                                         {"asin", &asin, D::normal, -0.9, 0.9},
                                         {"acos", &acos, D::normal, -0.9, 0.9},
                                         {"atan", &atan, D::normal},
                                         {"sinh", &sinh, D::normal},
                                         {"cosh", &cosh, D::normal},
                                         {"log1p", &log1p, D::normal, -0.7, 3.0},
                                         {"expm1", &expm1, D::normal},
                                         {"log2", &log2, D::positive},
                                         {"log10", &log10, D::positive},
                                         {"erf", &erf, D::normal},
                                         {"erfc", &erfc, D::normal},
                                         {"rsqrt", &rsqrt, D::positive},
                                         {"reciprocal", &reciprocal, D::nonzero},
                                         {"sign", &sign, D::normal},
                                         {"floor", &floor, D::normal},
                                         {"ceil", &ceil, D::normal},
                                         {"round", static_cast<U>(&round), D::normal},
                                         {"trunc", &trunc, D::normal}}) {
    OpInfo op = unary(
        m.name, std::string(m.name) + "(Tensor)", fmt::format("out = torch.{}(a)", m.name),
        [fn = m.fn](auto& x) { return fn(x); }, m.d);
    t.push_back(m.lo < m.hi ? in_range(op, m.lo, m.hi) : op);
  }
  t.push_back(unary("round_decimals", "round(Tensor,int64_t)", "out = torch.round(a, decimals=2)",
                    [](auto& x) { return round(x, 2); }));
  t.push_back(in_range(unary("round_decimals_negative", "round(Tensor,int64_t)", "out = torch.round(a, decimals=-2)",
                             [](auto& x) { return round(x, -2); }),
                       -300.0, 300.0));
  using B = Tensor (*)(const Tensor&, const Tensor&);
  for (auto [name, fn] : std::vector<std::pair<std::string, B>>{
           {"atan2", &atan2}, {"fmod", static_cast<B>(&fmod)}, {"remainder", static_cast<B>(&remainder)}})
    t.push_back(binary(
        name, name + "(" + TT + ")", fmt::format("out = torch.{}(a, b)", name),
        [fn](auto& a, auto& b) { return fn(a, b); }, D::normal, D::nonzero));
  t.push_back(scalar_form("fmod_scalar", "fmod(Tensor,double)", "out = torch.fmod(a, 0.75)",
                          [](auto& a) { return fmod(a, 0.75); }));
  t.push_back(scalar_form("remainder_scalar", "remainder(Tensor,double)", "out = torch.remainder(a, -0.75)",
                          [](auto& a) { return remainder(a, -0.75); }));
  {
    OpInfo op = unary("clamp_min", "clamp_min(Tensor,double)", "out = torch.clamp_min(a, 0.3)",
                      [](auto& x) { return clamp_min(x, 0.3); });
    op.errors = {{"NaN bound",
                  [] {
                    clamp_min(Tensor::zeros({2, 3}, kFloat64), NAN);
                  },
                  {"clamp_min", "'min'", "NaN", "(2, 3)"}}};
    t.push_back(op);
    op = unary("clamp_max", "clamp_max(Tensor,double)", "out = torch.clamp_max(a, -0.2)",
               [](auto& x) { return clamp_max(x, -0.2); });
    op.errors = {{"NaN bound",
                  [] {
                    clamp_max(Tensor::zeros({2, 3}, kFloat64), NAN);
                  },
                  {"clamp_max", "'max'", "NaN", "(2, 3)"}}};
    t.push_back(op);
  }
  add_integer_input_errors(t, first);
}

const bool registered = register_entries(__FILE__, add_unary_math_entries);

}  // namespace xgrad::test::table
