// Shared by the op table's files: op_table.cpp builds the table from the files of entries, one per op
// header (tests/ops/op_table_<header>.cpp for ops/<header>.hpp), which register themselves here
// (register_entries). Here: sample-value helpers, the factories of op families used by more than one
// file (unary, binary, scalar forms, the (n, m) entries), and the integer-input refusals. A helper
// that one file uses stays in that file. Internal to the test suite.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "op_table.hpp"
#include "xgrad/ops/activation.hpp"
#include "xgrad/ops/attention.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/conv.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/linear.hpp"
#include "xgrad/ops/loss.hpp"
#include "xgrad/ops/matmul.hpp"
#include "xgrad/ops/normalization.hpp"
#include "xgrad/ops/pool.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/rnn.hpp"
#include "xgrad/ops/shape_ops.hpp"
#include "xgrad/ops/softmax.hpp"
#include "xgrad/ops/unary_math.hpp"

namespace xgrad::test::table {

using In = ParityBatch::Input;
using Call = std::function<Tensor(const Tensors&)>;

// ---- sample values -----------------------------------------------------------------------------

/// batch + rest.
inline Shape bshape(const Shape& batch, std::initializer_list<std::int64_t> rest) {
  Shape s = batch;
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

enum class Domain { normal, positive, nonzero, unit, mask };

/// Values for a domain: normal N(0, 1); positive U[0.5, 2); nonzero +-U[0.5, 2); unit U[0, 1);
/// mask 0/1 with probability 1/2 (kinks, poles and branch cuts are kept away from the samples).
inline Tensor values(const Shape& shape, Generator& gen, Dtype dt, Domain d = Domain::normal) {
  if (d == Domain::normal) return Tensor::randn(shape, gen, kFloat64).to(dt);
  Tensor t = Tensor::rand(shape, gen, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double u = p[i];
    switch (d) {
      case Domain::positive:
        p[i] = 0.5 + 1.5 * u;
        break;
      case Domain::nonzero:
        p[i] = (gen.uniform() < 0.5 ? -1 : 1) * (0.5 + 1.5 * u);
        break;
      case Domain::unit:
        break;
      case Domain::mask:
        p[i] = u < 0.5 ? 0 : 1;
        break;
      case Domain::normal:
        break;
    }
  }
  return t.to(dt);
}

inline std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// ---- factories ---------------------------------------------------------------------------------

inline OpInfo unary(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
                    Domain d = Domain::normal) {
  OpInfo op;
  op.name = std::move(name);
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.call = [f](const Tensors& in) { return f(in[0]); };
  op.sample = [d](Dtype dt, const SampleSpec& s, Generator& g) {
    return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]}), g, dt, d)}}, {}, {}};
  };
  op.size_names = {"n"};
  op.small = {5};
  op.threads = {40000};
  op.supports_batch = true;
  op.supports_scalar = true;
  return op;
}

/// a (batch..., n, m) against b (m): broadcasting along the leading axes.
inline OpInfo binary(std::string name, std::string sig, std::string torch,
                     std::function<Tensor(const Tensor&, const Tensor&)> f, Domain da = Domain::normal,
                     Domain db = Domain::normal) {
  OpInfo op;
  op.name = name;
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.call = [f](const Tensors& in) { return f(in[0], in[1]); };
  op.sample = [da, db](Dtype dt, const SampleSpec& s, Generator& g) {
    if (s.scalar) return SampleInput{{{"a", values({}, g, dt, da)}, {"b", values({}, g, dt, db)}}, {}, {}};
    return SampleInput{
        {{"a", values(bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt, da)}, {"b", values({s.sizes[1]}, g, dt, db)}},
        {},
        {}};
  };
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  op.supports_batch = true;
  op.supports_scalar = true;
  const std::string opname = name.substr(0, name.find('_'));
  op.errors = {
      {"shapes that do not broadcast",
       [f] {
         f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({4}, kFloat64));
       },
       {opname, "(2, 3)", "(4,)"}},
  };
  // add, sub, mul, div, pow, maximum and minimum promote float32 with float64 (tests/ops/test_elementwise.cpp); the
  // other binary ops refuse the mix.
  static const std::set<std::string> promoting = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  if (promoting.count(opname) == 0)
    op.errors.insert(op.errors.begin(), {"dtype mix",
                                         [f] {
                                           f(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({3}, kFloat32));
                                         },
                                         {opname, "dtype"}});
  return op;
}

inline OpInfo scalar_form(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f,
                          Domain d = Domain::normal) {
  OpInfo op = unary(std::move(name), std::move(sig), std::move(torch), std::move(f), d);
  return op;
}

/// Every input of the entries t[first...] in turn as an integer tensor: an error case each (the op
/// refuses it, naming the op, the argument and the dtype). For the float-only families: the unary
/// math ops, the activations, dropout.
inline void add_integer_input_errors(std::vector<OpInfo>& t, std::size_t first) {
  for (std::size_t k = first; k < t.size(); ++k) {
    OpInfo& op = t[k];
    const std::string opname = op.signature.substr(0, op.signature.find('('));
    Generator g(1);
    const SampleInput si = op.sample(kFloat64, {op.small, {}}, g);
    for (std::size_t i = 0; i < si.inputs.size(); ++i) {
      Tensors args;
      for (const auto& in : si.inputs) args.push_back(in.value);
      args[i] = args[i].to(kInt64);
      op.errors.push_back({"integer " + si.inputs[i].name, [call = op.call, args] { call(args); }, {opname, "int64"}});
    }
  }
}

// ---- (n, m) entries: the copy-type shape ops, cumsum, the index ops, max/min with indices -----------

/// a (batch..., n, m): the sample of most entries below.
inline SampleInput nm_sample(Dtype dt, const SampleSpec& s, Generator& g) {
  return SampleInput{{{"a", values(s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0], s.sizes[1]}), g, dt)}}, {}, {}};
}

/// a (batch..., n, m) through f, with batch dimensions (f may be left empty for an entry that sets
/// call itself): the copy-type shape ops and cumsum.
inline OpInfo nm_entry(std::string name, std::string sig, std::string torch, std::function<Tensor(const Tensor&)> f) {
  OpInfo op;
  op.name = std::move(name);
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.call = [f](const Tensors& in) { return f(in[0]); };
  op.sample = nm_sample;
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  op.supports_batch = true;
  return op;
}

/// Sizes (n, m) and nothing else: the index ops and max/min with indices set the rest.
inline OpInfo nm_base(std::string name, std::string sig, std::string torch) {
  OpInfo op;
  op.name = std::move(name);
  op.signature = std::move(sig);
  op.torch = std::move(torch);
  op.size_names = {"n", "m"};
  op.small = {3, 4};
  op.threads = {200, 200};
  return op;
}

/// An integer result as the floating dtype of the entry's run (the sweep checks the output dtype).
inline Tensor as_float(const Tensor& t, const Tensor& like) { return t.to(like.dtype()); }

// ---- the files of entries ---------------------------------------------------------------------------

/// Appends the entries of one op header to the table.
using AddEntries = void (*)(std::vector<OpInfo>&);

/// Registers `add` as the entries of the op header the file is named for: tests/ops/op_table_<header>.cpp
/// holds the entries of ops/<header>.hpp, and ends with
///   const bool registered = register_entries(__FILE__, add_<header>_entries);
/// build() (op_table.cpp) calls the registered functions in the headers' alphabetical order and refuses
/// an entry whose op its file's header does not declare. Returns true.
bool register_entries(const char* file, AddEntries add);

}  // namespace xgrad::test::table
