// The op table's driver (tests/ops/op_table.hpp): for every entry and dtype, gradcheck in float64,
// PyTorch parity of values and gradients (one batch: Python starts once), 1-vs-2-thread bit
// equality (the 2-thread run through autograd hooks that change nothing), a sweep of degenerate
// sizes {0, 1, 2, 7, large} per size parameter and of leading batch shapes (forward and backward
// run; shapes and values match torch's, through the parity batch), and bad inputs. A test fails
// when a public op in ops/*.hpp has no entry; the docs tests at the end, when one has no `/// @op`
// row (tests/ops/op_table_rows.hpp) or docs/ops.md differs from the rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "op_table.hpp"
#include "op_table_rows.hpp"
#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

const std::vector<Shape> kBatches = {{0}, {1}, {2, 3}};

const std::string& op_name(const OpInfo& op) { return op.op; }

std::string spec_str(const OpInfo& op, const SampleSpec& s) {
  std::string out;
  for (std::size_t i = 0; i < s.sizes.size(); ++i)
    out += fmt::format("{}{}={}", i ? " " : "", i < op.size_names.size() ? op.size_names[i] : "?", s.sizes[i]);
  if (!s.batch.empty()) out += " batch=" + shape_str(s.batch);
  if (s.scalar) out = "0-d inputs";
  return out;
}

SampleInput make_sample(const OpInfo& op, Dtype dt, const SampleSpec& spec, std::uint64_t seed = 7) {
  Generator gen(seed);
  SampleInput si = op.sample(dt, spec, gen);
  if (!si.call) si.call = op.call;
  return si;
}

// Fresh copies of the sample's tensors, the differentiable ones requiring grad.
Tensors leaves(const OpInfo& op, const SampleInput& si) {
  Tensors out;
  for (const auto& in : si.inputs) {
    Tensor v = in.value.detach().clone_data();
    if (op.differentiable && in.requires_grad) v.set_requires_grad();
    out.push_back(v);
  }
  return out;
}

// Hooks (Note [Hooks] in core/autograd.hpp) that change nothing, on an op's leaves and output: each
// leaf's register_hook hook multiplies by 1 (exact, so the results keep their bits) and its
// post-accumulate-grad hook checks that .grad is there; the output's hook observes. They count their
// calls, which check_fired compares with what the backward did.
struct IdentityHooks {
  std::vector<int> pre, post;
  int out = 0;
  bool post_saw_grad = true;
  void register_on(const Tensors& args, const Tensor& output, bool post_accumulate) {
    pre.assign(args.size(), 0);
    post.assign(args.size(), 0);
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!args[i].requires_grad()) continue;
      args[i].register_hook([this, i](const Tensor& g) {
        ++pre[i];
        return mul(g, 1.0);
      });
      if (post_accumulate)
        args[i].register_post_accumulate_grad_hook([this, i](Tensor& t) {
          ++post[i];
          post_saw_grad = post_saw_grad && t.grad().defined();
        });
    }
    if (output.grad_fn()) output.register_hook([this](const Tensor&) { ++out; });
  }
  // Each leaf's hooks fired once when a gradient reached it (`reached[i]`), else not; the output's once.
  void check_fired(const Tensors& args, const std::vector<bool>& reached, const Tensor& output,
                   bool post_accumulate) const {
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!args[i].requires_grad()) continue;
      INFO("input " << i << ": its hooks fire once iff a gradient reaches it");
      CHECK(pre[i] == (reached[i] ? 1 : 0));
      if (post_accumulate) CHECK(post[i] == pre[i]);
    }
    CHECK(post_saw_grad);
    if (output.grad_fn()) CHECK(out == 1);
  }
};

// Forward, then backward from a fixed random seed gradient: {out, gradients of the inputs that
// require grad (zeros when none flowed)}. CHECKs that every gradient has its input's shape. With
// `with_hooks`, IdentityHooks on the inputs and the output, checked to have fired.
Tensors forward_backward(const OpInfo& op, const SampleInput& si, bool with_hooks = false) {
  Tensors args = leaves(op, si);
  const Tensor out = si.call(args);
  Tensors res{out.detach()};
  if (!op.differentiable) {
    CHECK_FALSE(out.requires_grad());
    return res;
  }
  bool any = false;
  for (const auto& a : args) any = any || a.requires_grad();
  if (!any) return res;
  REQUIRE(out.requires_grad());
  IdentityHooks hooks;
  if (with_hooks) hooks.register_on(args, out, /*post_accumulate=*/true);
  Generator gen(99);
  out.backward(Tensor::randn(out.shape(), gen, out.dtype()));
  std::vector<bool> reached;
  for (const auto& a : args) {
    reached.push_back(a.requires_grad() && a.grad().defined());
    if (!a.requires_grad()) continue;
    const Tensor g = a.grad().defined() ? a.grad() : Tensor::zeros(a.shape(), a.dtype());
    CHECK(g.shape() == a.shape());
    CHECK(g.dtype() == a.dtype());
    res.push_back(g);
  }
  if (with_hooks) hooks.check_fired(args, reached, out, /*post_accumulate=*/true);
  return res;
}

// The size sweep: each size parameter in turn at 0, 1, 2, 7 and the entry's large value (the others
// at their small values), then the small sizes under each leading batch shape.
std::vector<SampleSpec> sweep(const OpInfo& op) {
  std::vector<SampleSpec> out;
  for (std::size_t i = 0; i < op.small.size(); ++i)
    for (std::int64_t v : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, op.large[i]}) {
      SampleSpec s{op.small, {}};
      s.sizes[i] = v;
      out.push_back(s);
    }
  if (op.supports_batch)
    for (const Shape& b : kBatches) out.push_back({op.small, b});
  if (op.supports_scalar) out.push_back({op.small, {}, true});
  return out;
}

std::string refusal(const OpInfo& op, const SampleSpec& s) { return op.refuses ? op.refuses(s) : ""; }
std::string known(const OpInfo& op, const SampleSpec& s) { return op.known_failure ? op.known_failure(s) : ""; }

}  // namespace

TEST_CASE("op table: every public op in ops/*.hpp has an entry, and entries are well formed", "[op_table]") {
  const std::vector<std::string> decls = public_op_signatures(XGRAD_SOURCE_DIR "/ops");
  REQUIRE(decls.size() >= 50);  // the parser found the headers
  std::set<std::string> declared(decls.begin(), decls.end()), covered, names;
  for (const auto& op : op_table()) {
    INFO("entry " << op.name << " (" << op.signature << ")");
    CHECK(names.insert(op.name).second);       // unique names
    CHECK(declared.count(op.signature) == 1);  // names a real declaration (no stale entry)
    covered.insert(op.signature);
    CHECK(op.small.size() == op.size_names.size());
    CHECK(op.threads.size() == op.size_names.size());
    CHECK(op.large.size() == op.size_names.size());
    CHECK(!op.torch.empty());
    CHECK(op.sample);
    for (const auto& e : op.errors) {
      INFO("error case " << e.what);
      REQUIRE(!e.fragments.empty());
      CHECK(e.fragments[0].find(op_name(op)) != std::string::npos);  // each names the op
    }
  }
  for (const auto& d : declared) {
    INFO("public op " << d << " has no entry in tests/ops/op_table_<header>.cpp (add one: see tests/README.md)");
    CHECK(covered.count(d) == 1);
  }
}

TEST_CASE("op table: gradcheck in float64", "[op_table][gradcheck]") {
  for (const auto& op : op_table()) {
    if (!op.differentiable) continue;
    DYNAMIC_SECTION(op.name) {
      std::vector<Shape> batches{{}};
      if (op.supports_batch) batches.push_back({2});
      for (const Shape& b : batches) {
        const SampleSpec spec{op.small, b};
        INFO(op.name << " at " << spec_str(op, spec));
        const SampleInput si = make_sample(op, kFloat64, spec);
        require_gradcheck(si.call, leaves(op, si), op.gradcheck);
      }
    }
  }
}

TEST_CASE("op table: second-order gradcheck (gradgradcheck) in float64", "[op_table][gradgradcheck]") {
  for (const auto& op : op_table()) {
    if (!op.differentiable || !op.create_graph) continue;
    DYNAMIC_SECTION(op.name) {
      const SampleSpec spec{op.small, {}};
      INFO(op.name << " at " << spec_str(op, spec));
      OpInfo smooth = op;
      if (op.gradgrad_sample) smooth.sample = op.gradgrad_sample;
      const SampleInput si = make_sample(smooth, kFloat64, spec);
      const GradcheckReport rep = gradgradcheck(si.call, leaves(op, si), op.gradcheck);
      INFO(rep.message);
      REQUIRE(rep.ok);
      // gradgradcheck differentiates the recorded backward against itself: check that its first
      // derivatives are the first-order backward's too, on the op's own sample
      const SampleInput own = make_sample(op, kFloat64, spec);
      const Tensors args = leaves(op, own);
      Tensors wrt;
      for (const auto& a : args)
        if (a.requires_grad()) wrt.push_back(a);
      const Tensor out = own.call(args);
      if (!wrt.empty() && out.requires_grad()) {
        Generator gen(5);
        const Tensor seed = Tensor::randn(out.shape(), gen, out.dtype());
        const Tensors plain = xgrad::grad({out}, wrt, {seed}, true, /*create_graph=*/false, /*allow_unused=*/true);
        // the recorded backward runs through hooks that multiply by 1 (recorded too) on the inputs and
        // observe the output: they fire, and change nothing
        IdentityHooks hooks;
        hooks.register_on(wrt, out, /*post_accumulate=*/false);
        const Tensors recorded = xgrad::grad({out}, wrt, {seed}, true, /*create_graph=*/true, /*allow_unused=*/true);
        std::vector<bool> reached;
        for (const auto& r : recorded) reached.push_back(r.defined());
        hooks.check_fired(wrt, reached, out, /*post_accumulate=*/false);
        for (std::size_t i = 0; i < wrt.size(); ++i) {
          INFO("input " << i << ": the recorded gradient differs from the first-order one");
          CHECK(plain[i].defined() == recorded[i].defined());
          if (plain[i].defined() && recorded[i].defined())
            CHECK(allclose(plain[i], recorded[i].detach(), 1e-10, 1e-12));
        }
      }
    }
  }
}

TEST_CASE("op table: an op without create_graph support refuses it with a clear error", "[op_table][gradgradcheck]") {
  for (const auto& op : op_table()) {
    if (!op.differentiable || op.create_graph) continue;
    DYNAMIC_SECTION(op.name) {
      const SampleSpec spec{op.small, {}};
      INFO(op.name << " at " << spec_str(op, spec));
      const SampleInput si = make_sample(op, kFloat64, spec);
      const Tensors args = leaves(op, si);
      const Tensor out = si.call(args);
      Tensors wrt;
      for (const auto& a : args)
        if (a.requires_grad()) wrt.push_back(a);
      if (wrt.empty() || !out.requires_grad()) continue;
      Generator gen(5);
      const Tensor seed = Tensor::randn(out.shape(), gen, out.dtype());
      require_error(
          [&] { (void)xgrad::grad({out}, wrt, {seed}, std::nullopt, /*create_graph=*/true, /*allow_unused=*/true); },
          {"create_graph", "not supported"});
      // and the first-order backward of the same graph still works afterwards
      const Tensors g =
          xgrad::grad({si.call(args)}, wrt, {seed}, std::nullopt, /*create_graph=*/false, /*allow_unused=*/true);
      CHECK(g.size() == wrt.size());
    }
  }
}

TEST_CASE("op table: values and gradients match PyTorch, at small and at degenerate sizes", "[op_table][parity]") {
  ParityBatch batch("op_table");
  batch.set_equal_nonfinite();  // e.g. mean over an empty axis is NaN in both, logsumexp -inf
  int k = 0;
  auto add = [&](const OpInfo& op, Dtype dt, const SampleSpec& spec) {
    const std::string what = fmt::format("{} [{}] at {}", op.name, dtype_name(dt), spec_str(op, spec));
    try {
      const SampleInput si = make_sample(op, dt, spec);
      std::vector<ParityBatch::Input> inputs = si.inputs;
      for (auto& in : inputs) in.requires_grad = in.requires_grad && op.differentiable;
      const double rtol = dt == kFloat32 ? op.rtol32 : op.rtol64, atol = dt == kFloat32 ? op.atol32 : op.atol64;
      batch.add(fmt::format("{}_{}", op.name, k++), si.torch_prelude + op.torch, inputs, si.call, rtol, atol);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": ours threw: " << e.what());
    }
  };
  for (const auto& op : op_table()) {
    for (Dtype dt : op.dtypes) {
      add(op, dt, {op.small, {}});
      if (op.supports_batch) add(op, dt, {op.small, {2}});
    }
    for (const auto& spec : sweep(op))
      if (refusal(op, spec).empty() && known(op, spec).empty() && (!op.torch_skip || op.torch_skip(spec).empty()))
        add(op, kFloat64, spec);
  }
  batch.run();
}

TEST_CASE("op table: at ties and kinks, values and gradients match PyTorch", "[op_table][parity][ties]") {
  ParityBatch batch("op_table_ties");
  batch.set_equal_nonfinite();
  int k = 0, entries = 0;
  for (const auto& op : op_table()) {
    if (op.tie_values.empty()) continue;
    ++entries;
    std::vector<SampleSpec> specs{{op.small, {}}};
    if (op.supports_batch) specs.push_back({op.small, {2, 3}});  // more elements: more ties
    for (Dtype dt : op.dtypes)
      for (const auto& spec : specs) {
        const std::string what = fmt::format("{} [{}] at {}", op.name, dtype_name(dt), spec_str(op, spec));
        try {
          SampleInput si = make_sample(op, dt, spec);
          Generator gen(11);
          const auto n = static_cast<double>(op.tie_values.size());
          for (auto& in : si.inputs) {
            if (!is_floating_point(in.value.dtype())) continue;
            Tensor u = Tensor::rand(in.value.shape(), gen, kFloat64);
            double* p = u.data<double>();
            for (std::int64_t i = 0; i < u.numel(); ++i)
              p[i] = op.tie_values[static_cast<std::size_t>(std::min(n - 1, std::floor(p[i] * n)))];
            in.value = u.to(in.value.dtype());
            in.requires_grad = in.requires_grad && op.differentiable;
          }
          const double rtol = dt == kFloat32 ? op.rtol32 : op.rtol64, atol = dt == kFloat32 ? op.atol32 : op.atol64;
          batch.add(fmt::format("{}_ties_{}", op.name, k++), si.torch_prelude + op.torch, si.inputs, si.call, rtol,
                    atol);
        } catch (const std::exception& e) {
          FAIL_CHECK(what << ": ours threw: " << e.what());
        }
      }
  }
  CHECK(entries >= 30);  // the ties block of build() found its entries
  batch.run();
}

TEST_CASE("op table: bit-identical results with 1 and 2 threads", "[op_table][threads]") {
  for (const auto& op : op_table()) {
    if (!op.deterministic) continue;
    DYNAMIC_SECTION(op.name) {
      for (Dtype dt : op.dtypes) {
        const SampleSpec spec{op.threads, op.threads_batch};
        INFO(op.name << " [" << dtype_name(dt) << "] at " << spec_str(op, spec));
        const std::string why = op.threads_known_failure ? op.threads_known_failure(dt) : "";
        if (!why.empty()) {
          WARN(op.name << " [" << dtype_name(dt) << "]: known failure, skipped: " << why);
          continue;
        }
        const SampleInput si = make_sample(op, dt, spec);
        // the sample is large enough for the parallel paths (kParallelGrain elements somewhere)
        std::int64_t biggest = 0;
        for (const auto& in : si.inputs) biggest = std::max(biggest, in.value.numel());
        const Tensor out = si.call(leaves(op, si));
        biggest = std::max(biggest, out.numel());
        CHECK(biggest > kParallelGrain);
        // 1 thread without hooks, 2 threads with IdentityHooks (Note [Hooks]): the same bits, so the
        // threads change nothing and neither do hooks that change nothing
        const Tensors one = with_num_threads(1, [&] { return forward_backward(op, si); });
        const Tensors two = with_num_threads(2, [&] { return forward_backward(op, si, /*with_hooks=*/true); });
        REQUIRE(one.size() == two.size());
        for (std::size_t i = 0; i < one.size(); ++i) {
          INFO("result " << i << " differs between 1 thread and 2 threads with identity hooks");
          REQUIRE(bit_equal(one[i], two[i]));
        }
      }
    }
  }
}

TEST_CASE("op table: degenerate sizes and batch shapes run forward and backward, or are refused clearly",
          "[op_table][sizes]") {
  for (const auto& op : op_table()) {
    DYNAMIC_SECTION(op.name) {
      for (Dtype dt : op.dtypes)
        for (const auto& spec : sweep(op)) {
          INFO(op.name << " [" << dtype_name(dt) << "] at " << spec_str(op, spec));
          const std::string refused = refusal(op, spec), why = known(op, spec);
          if (!why.empty()) {
            // not fixed on this branch (and may crash the process): reported, not run
            WARN(op.name << " at " << spec_str(op, spec) << ": known failure, skipped: " << why);
            continue;
          }
          if (!refused.empty()) {
            require_error([&] { forward_backward(op, make_sample(op, dt, spec)); }, {refused});
            continue;
          }
          try {
            const Tensors r = forward_backward(op, make_sample(op, dt, spec));
            CHECK(r[0].dtype() == dt);
          } catch (const std::exception& e) {
            FAIL_CHECK("threw: " << e.what());
          }
        }
    }
  }
}

TEST_CASE("op table: each input taken as int64 runs, or is refused naming the op", "[op_table][dtypes]") {
  for (const auto& op : op_table()) {
    DYNAMIC_SECTION(op.name) {
      const SampleInput si = make_sample(op, kFloat64, {op.small, {}});
      const auto takes = [&](const std::string& n) {
        return std::find(op.int64_inputs.begin(), op.int64_inputs.end(), n) != op.int64_inputs.end() ||
               std::find(op.int64_inputs.begin(), op.int64_inputs.end(), "*") != op.int64_inputs.end();
      };
      for (std::size_t i = 0; i < si.inputs.size(); ++i) {
        Tensors args;
        for (const auto& in : si.inputs) args.push_back(in.value.detach().clone_data());
        if (!is_floating_point(args[i].dtype())) continue;
        args[i] = args[i].to(kInt64);
        INFO(op.name << ": input '" << si.inputs[i].name << "' as int64");
        if (takes(si.inputs[i].name)) {
          Tensor out;
          CHECK_NOTHROW(out = si.call(args));
          CHECK(out.defined());
        } else {
          require_error([&] { si.call(args); }, {op_name(op), "int64"});
        }
      }
    }
  }
}

TEST_CASE("op table: int64 inputs give PyTorch's values and dtypes", "[op_table][dtypes][parity]") {
  // Each entry that takes int64 inputs runs with them (the small sample's, truncated) against torch
  // on the same int64 tensors; torch's result dtype must be ours, and integer results must agree
  // exactly. Entries exact on int64 (OpInfo::int64_exact) get data beyond 2^53.
  ParityBatch batch("op_table_int64");
  batch.set_equal_nonfinite();  // an integer division by 0 gives inf or NaN in both
  const std::map<std::string, std::string> no_parity = {
      {"pad_reflect", "torch 1.13 has no int64 kernel (xgrad's copy takes any dtype)"},
      {"pad_replicate", "torch 1.13 has no int64 kernel (xgrad's copy takes any dtype)"},
      {"resample_conv_sampled_points", "its int64 input x is the grid for torch's code; ours ignores it"},
      {"resample_conv_cos2_uniform", "its int64 input x is the grid for torch's code; ours ignores it"}};
  int k = 0, exact = 0;
  for (const auto& op : op_table()) {
    if (op.int64_inputs.empty() || no_parity.count(op.name)) continue;
    const auto takes = [&](const std::string& n) {
      return std::find(op.int64_inputs.begin(), op.int64_inputs.end(), n) != op.int64_inputs.end() ||
             std::find(op.int64_inputs.begin(), op.int64_inputs.end(), "*") != op.int64_inputs.end();
    };
    SampleInput si = make_sample(op, kFloat64, {op.small, {}});
    bool any = false;
    for (auto& in : si.inputs) {
      const bool data = in.requires_grad;
      in.requires_grad = false;
      if (!is_floating_point(in.value.dtype()) || !takes(in.name)) continue;
      any = true;
      if (!op.int64_exact || !data) {
        in.value = in.value.to(kInt64);
        continue;
      }
      // 2^53 plus small integers: neighbours that no double tells apart
      const Tensor v = in.value.to(kFloat64);
      Tensor w = Tensor::empty(v.shape(), kInt64);
      for (std::int64_t i = 0; i < v.numel(); ++i)
        w.data<std::int64_t>()[i] = (std::int64_t{1} << 53) + static_cast<std::int64_t>(v.data<double>()[i] * 8);
      in.value = w;
    }
    if (!any) continue;
    exact += op.int64_exact ? 1 : 0;
    Tensors args;
    for (const auto& in : si.inputs) args.push_back(in.value);
    Dtype ours = kFloat32;
    try {
      ours = si.call(args).dtype();
    } catch (const std::exception& e) {
      FAIL_CHECK(op.name << " on int64 inputs threw: " << e.what());
      continue;
    }
    const std::string check = fmt::format("\nassert out.dtype == torch.{}, f'torch gives {{out.dtype}}, xgrad {}'",
                                          dtype_name(ours), dtype_name(ours));
    batch.add(fmt::format("{}_int64_{}", op.name, k++), si.torch_prelude + op.torch + check, si.inputs, si.call);
  }
  CHECK(exact >= 30);  // the int64_exact block of build() found its entries
  batch.run();
}

TEST_CASE("op table: bad inputs raise xgrad::Error naming the op", "[op_table][errors]") {
  for (const auto& op : op_table()) {
    DYNAMIC_SECTION(op.name) {
      for (const auto& e : op.errors) {
        INFO(op.name << ": " << e.what);
        require_error(e.call, e.fragments);
      }
      if (op.check_undefined) {
        const SampleInput si = make_sample(op, kFloat64, {op.small, {}});
        for (std::size_t i = 0; i < si.inputs.size(); ++i) {
          INFO(op.name << ": input '" << si.inputs[i].name << "' undefined");
          Tensors args = leaves(op, si);
          args[i] = Tensor();
          require_error([&] { si.call(args); }, {op_name(op)});
        }
      }
    }
  }
}

namespace {

// The backticked spans of a docs/ops.md table cell: "`maximum(a, b)` / `minimum`" -> {"maximum(a, b)", "minimum"}.
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t open = cell.find('`', at);
    if (open == std::string::npos) break;
    const std::size_t close = cell.find('`', open + 1);
    if (close == std::string::npos) break;
    out.push_back(cell.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return out;
}

// The function names a span documents: "maximum(a, b)" -> {maximum}; "gt lt ge" -> {gt, lt, ge};
// "a + b" -> {} (an operator form of the row's function); "x.to(dtype)" -> {} (a method).
std::vector<std::string> documented_names(const std::string& span) {
  std::vector<std::string> out;
  const std::size_t paren = span.find('(');
  const std::string head = span.substr(0, paren);
  if (head.find('.') != std::string::npos) return out;  // a Tensor method
  static const std::regex word_re("[A-Za-z_][A-Za-z0-9_:]*");
  // "max_pool1d/2d_with_indices" names max_pool1d_with_indices and max_pool2d_with_indices
  static const std::regex dims_re("([A-Za-z_][A-Za-z0-9_]*?)([0-9]d)/([0-9]d)([A-Za-z0-9_]*)");
  std::smatch dm;
  if (std::regex_search(head, dm, dims_re)) {
    out.push_back(dm[1].str() + dm[2].str() + dm[4].str());
    out.push_back(dm[1].str() + dm[3].str() + dm[4].str());
    return out;
  }
  if (paren != std::string::npos) {
    std::smatch m;
    if (std::regex_search(head, m, word_re)) out.push_back(m.str());
    return out;
  }
  if (!std::regex_match(span, std::regex("[A-Za-z_][A-Za-z0-9_ ]*"))) return out;  // "a + b"
  for (std::sregex_iterator it(span.begin(), span.end(), word_re), end; it != end; ++it) out.push_back(it->str());
  return out;
}

}  // namespace

namespace {

// The name of the op a declaration line declares: "Tensor silu(const Tensor& x);" -> "silu".
std::string declared_name(const std::string& line) {
  static const std::regex name_re("(operator\\S+?|[A-Za-z_][A-Za-z0-9_]*)\\(");
  for (std::sregex_iterator it(line.begin(), line.end(), name_re), end; it != end; ++it)
    if ((*it)[1].str() != "requires") return (*it)[1].str();
  return "";
}

// The torch functions a row's torch cell names: "torch.amax, torch.Tensor.repeat" -> both.
std::vector<std::string> torch_names(const std::string& cell) {
  static const std::regex torch_re("torch(\\.[A-Za-z_][A-Za-z0-9_]*)+");
  std::vector<std::string> out;
  for (std::sregex_iterator it(cell.begin(), cell.end(), torch_re), end; it != end; ++it) out.push_back(it->str());
  return out;
}

}  // namespace

TEST_CASE("docs/ops.md: every public op of ops/*.hpp has an @op row next to it, naming ops of its header",
          "[op_table][docs]") {
  const std::vector<OpDeclaration> decls = public_op_declarations(XGRAD_SOURCE_DIR "/ops");
  REQUIRE(decls.size() >= 50);
  std::map<std::string, std::set<std::string>> headers_of;  // op name -> headers declaring it
  for (const auto& d : decls) {
    const std::string name = d.signature.substr(0, d.signature.find('('));
    if (name.rfind("operator", 0) == 0) continue;  // operators are documented with their function
    headers_of[name].insert(d.header);
  }
  // inline forms such as broadcast_to, and templates: may be named by a row, need not be
  std::map<std::string, std::set<std::string>> aliases_of;
  static const std::regex inline_re("^inline Tensor ([A-Za-z_][A-Za-z0-9_]*)\\(");
  for (const auto& e : std::filesystem::directory_iterator(XGRAD_SOURCE_DIR "/ops")) {
    std::ifstream h(e.path());
    for (std::string l; std::getline(h, l);) {
      std::smatch m;
      if (std::regex_search(l, m, inline_re)) aliases_of[m[1].str()].insert(e.path().stem().string());
    }
  }
  const std::vector<OpRow> rows = read_op_rows(XGRAD_SOURCE_DIR "/ops");
  REQUIRE(rows.size() >= 30);
  for (const auto& p : op_row_problems(rows)) FAIL_CHECK(p);
  std::map<std::string, std::set<std::string>> rows_of;  // op name -> the headers of the rows naming it
  for (const auto& row : rows) {
    if (row.cells.empty()) continue;
    const std::string where = fmt::format("ops/{}.hpp:{}", row.header, row.line);
    std::set<std::string> named;
    for (const auto& span : code_spans(row.cells[0]))
      for (const std::string& name : documented_names(span)) {
        if (name.rfind("nn::functional::", 0) == 0) continue;  // an alias in nn/, documented in nn.md
        named.insert(name);
        rows_of[name].insert(row.header);
        INFO(where << ": the @op row names `" << span << "`, and ops/" << row.header << ".hpp declares no public op "
                   << name);
        CHECK(headers_of[name].count(row.header) + aliases_of[name].count(row.header) >= 1);
      }
    {
      INFO(where << ": the @op row names no op in backticks");
      CHECK(!named.empty());
    }
    INFO(where << ": an @op row ends its op's doc comment, directly above the declaration of an op it names; it is "
                  "followed by: "
               << row.next);
    CHECK(named.count(declared_name(row.next)) == 1);
  }
  for (const auto& [name, headers] : headers_of)
    for (const auto& h : headers) {
      INFO("public op " << name << " (ops/" << h << ".hpp) has no @op row in its header: add one above its declaration "
                        << "(op | forward | gradient | torch: tests/README.md), then " << kRegenerateOpTables);
      CHECK(rows_of[name].count(h) == 1);
    }
}

TEST_CASE("docs/ops.md: its op tables are the @op rows of ops/*.hpp", "[op_table][docs]") {
  const std::string doc = read_text_file(XGRAD_SOURCE_DIR "/docs/ops.md");
  const std::string generated = replace_op_tables(doc, op_tables_markdown(read_op_rows(XGRAD_SOURCE_DIR "/ops")));
  if (generated == doc) return;
  std::istringstream a(doc), b(generated);
  std::string la, lb;
  int line = 0;
  for (;;) {
    ++line;
    const bool more_a = static_cast<bool>(std::getline(a, la)), more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a || !more_b || la != lb) {
      if (!more_a) la = "(end of file)";
      if (!more_b) lb = "(end of file)";
      break;
    }
  }
  FAIL("docs/ops.md differs from what the @op rows of ops/*.hpp generate; regenerate it with\n  "
       << kRegenerateOpTables << "\nfirst difference, line " << line << ":\n  docs/ops.md: " << la
       << "\n  generated:   " << lb);
}

TEST_CASE("docs/ops.md: each @op row's torch function is the one the op table compares with", "[op_table][docs]") {
  std::map<std::string, std::string> torch_code;  // op name -> the torch code of its entries
  for (const auto& op : op_table()) torch_code[op.signature.substr(0, op.signature.find('('))] += op.torch + "\n";
  // how the entries' Python spells the functions it calls through an operator
  static const std::map<std::string, std::string> kOperators = {
      {"add", " + "}, {"sub", " - "}, {"mul", " * "}, {"div", " / "}, {"neg", "= -"}, {"gt", " > "},
      {"lt", " < "},  {"ge", " >= "}, {"le", " <= "}, {"eq", " == "}, {"ne", " != "}, {"__getitem__", "["}};
  for (const auto& row : read_op_rows(XGRAD_SOURCE_DIR "/ops")) {
    if (row.cells.size() != 4) continue;  // reported by the test above
    std::string code;
    for (const auto& span : code_spans(row.cells[0]))
      for (const std::string& name : documented_names(span))
        if (torch_code.count(name)) code += torch_code[name];
    // "torch.nn.LSTM (...; compared through torch.lstm_cell)": the parity check calls the latter
    const std::string& cell = row.cells[3];
    const std::size_t through = cell.find("compared through");
    for (const std::string& t : torch_names(through == std::string::npos ? cell : cell.substr(through))) {
      const std::string fn = t.substr(t.rfind('.') + 1);  // called as torch.fn(...) or as a method x.fn(...)
      const auto op = kOperators.find(fn);
      INFO("ops/" << row.header << ".hpp:" << row.line << ": the @op row's torch cell names " << t
                  << ", which no op table entry of its ops calls (their torch code:\n"
                  << code << ")");
      CHECK((code.find("." + fn + "(") != std::string::npos ||
             (op != kOperators.end() && code.find(op->second) != std::string::npos)));
    }
  }
}
