#pragma once
// The op table: every public op of ops/ registered once, with what the generic tests need to drive
// it (in the spirit of PyTorch's OpInfo, torch/testing/_internal/opinfo/core.py). tests/ops/
// test_op_table.cpp runs, for every entry and dtype: gradcheck (float64), PyTorch parity of values
// and gradients, 1-vs-2-thread bit equality, a sweep of degenerate sizes and batch shapes, and the
// entry's bad-input cases. Adding an op = adding one entry in tests/ops/op_table_<header>.cpp, the file
// of its header (see tests/README.md).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"

namespace xgrad::test {

/// What a sample is built for: one value per size parameter of the entry (OpInfo::size_names) and
/// the leading batch shape (always {} unless the entry supports batch dimensions).
struct SampleSpec {
  std::vector<std::int64_t> sizes;
  Shape batch;
  bool scalar = false;  // 0-d tensors instead (entries with supports_scalar; sizes are then ignored)
};

/// One call of the op: named inputs (which of them need grad), and for ops whose non-tensor
/// arguments depend on the sample (a block pattern, an index list, a target shape) the callable
/// bound to them plus the Python lines that define them for the torch code.
struct SampleInput {
  std::vector<ParityBatch::Input> inputs;
  std::function<Tensor(const Tensors&)> call;  // when set, replaces OpInfo::call for this sample
  std::string torch_prelude;                   // Python run before OpInfo::torch
};

using SampleFn = std::function<SampleInput(Dtype, const SampleSpec&, Generator&)>;

/// A call that must throw xgrad::Error whose message contains every fragment (the op's name first).
struct ErrorCase {
  std::string what;
  std::function<void()> call;
  std::vector<std::string> fragments;
};

struct OpInfo {
  std::string name;       // unique entry name, e.g. "sum_last_keepdim"
  std::string signature;  // the public declaration it covers, normalised: "sum(Tensor,vector<int64_t>,bool)"
  std::string op;         // the name its errors use (default: the signature's function name)
  std::string torch;      // Python with the inputs bound by name (and torch imported); sets `out`
  std::function<Tensor(const Tensors&)> call;  // ours, on the sample's input tensors (in order)
  SampleFn sample;

  std::vector<std::string> size_names;  // the size parameters a sample takes (e.g. {"n", "m"})
  std::vector<std::int64_t> small;      // sizes for gradcheck and parity (one per size name)
  std::vector<std::int64_t> threads;    // sizes for the thread test: enough work for 2 threads
  std::vector<std::int64_t> large;      // the "large" value of the size sweep, per size (default 300)
  std::vector<Dtype> dtypes = {kFloat32, kFloat64};

  bool differentiable = true;    // has a gradient (comparisons and the block-sparse packers do not)
  bool supports_batch = false;   // takes arbitrary leading batch dimensions (SampleSpec::batch)
  bool supports_scalar = false;  // takes 0-d tensors (SampleSpec::scalar)
  bool deterministic = true;     // bit-identical with 1 and 2 threads (every op so far)
  bool check_undefined = true;   // an undefined tensor in place of any input must be refused
  /// Inputs that may be int64 (by name; "*" = every input): the op runs with that input as int64
  /// and the others as sampled. Every other input given as int64 must be refused with an
  /// xgrad::Error naming the op (tests/ops/test_op_table.cpp). Default: float-only.
  std::vector<std::string> int64_inputs;
  /// The op is exact on int64 (it orders, compares, selects or sums): the int64 parity test draws
  /// its data inputs (those that require grad in the sample) as integers beyond 2^53, where a
  /// detour through double or float32 would round them. Otherwise they are the sample truncated.
  bool int64_exact = false;

  /// Sizes the op refuses on purpose (documented): returns the fragment the xgrad::Error must
  /// contain besides the op's name, or "" when the spec must run. E.g. max over an empty axis,
  /// Reduction::Mean over nothing.
  std::function<std::string(const SampleSpec&)> refuses;
  /// Specs torch 1.13 itself cannot run (returns why, "" = none): no parity there; ours still runs.
  std::function<std::string(const SampleSpec&)> torch_skip;
  /// Known failures at a degenerate spec in code this branch does not own: returns why ("" = none).
  /// The sweep reports them with WARN and does not run them (one crashes the process); no parity there
  /// either. Each one is listed in tests/README.md.
  std::function<std::string(const SampleSpec&)> known_failure;

  /// Leading batch shape of the thread test's sample (for batch-only parallel paths).
  Shape threads_batch;
  /// Known 1-vs-2-thread differences in code this branch does not own, by dtype ("" = none):
  /// reported with WARN, not failed.
  std::function<std::string(Dtype)> threads_known_failure;

  /// Second order (Note [Create graph] in core/autograd.hpp): true = the op's backward is
  /// differentiable and gradgradcheck runs (float64, small sizes); false (the default, the safe one
  /// for a new op) = a backward with create_graph=true must be refused with an xgrad::Error saying
  /// create_graph is not supported. Not set by hand: build() reads it from the op (its nodes'
  /// kDifferentiableBackward on the small sample).
  bool create_graph = false;
  /// gradgradcheck's sample when `sample` puts inputs on a kink of the gradient (e.g. norm's zeros,
  /// where no second derivative exists for finite differences to check); default: `sample`.
  SampleFn gradgrad_sample;
  GradcheckOptions gradcheck;                                 // float64 central differences
  double rtol32 = -1, atol32 = -1, rtol64 = -1, atol64 = -1;  // parity tolerances (-1: ParityBatch's)

  std::vector<ErrorCase> errors;  // bad inputs, each an xgrad::Error naming the op

  /// Ops with a tie rule (docs/ops.md, "Ties and kinks"): a kink (relu's 0, clamp's bounds) or a
  /// choice among equal values (maximum's operands, the elements of a max or of a pooling window).
  /// The values at which the op meets them: the test "at ties and kinks" redraws every floating
  /// input of the small sample from these values, so that ties and kinks occur, and compares the
  /// values and gradients with PyTorch's. Set by name in build() (the ties block).
  std::vector<double> tie_values;
};

/// The table (built once).
const std::vector<OpInfo>& op_table();

/// The public op declarations of the headers in `ops_dir` (non-inline functions returning Tensor,
/// Tensors or SparseCsr in namespace xgrad, outside detail namespaces and classes), normalised like
/// OpInfo::signature: name(type,type,...) without const, &, parameter names and defaults.
std::vector<std::string> public_op_signatures(const std::string& ops_dir);

/// One public op declaration and the header that declares it (its stem: "elementwise").
struct OpDeclaration {
  std::string header;
  std::string signature;
};
/// public_op_signatures with the header of each declaration.
std::vector<OpDeclaration> public_op_declarations(const std::string& ops_dir);

}  // namespace xgrad::test
