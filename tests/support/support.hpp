#pragma once
// Shared test helpers: float64 gradcheck, 1-vs-2-thread bit equality, PyTorch parity, and
// error-message checks. See tests/README.md for how an op's test file uses them.
#include <catch2/catch.hpp>
// fmt::join and range formatting for test names and torch code (xgrad/core/error.hpp has fmt/core.h only)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/core.hpp"

namespace xgrad::test {

/// A fresh temporary folder, unique per process and tag, removed with everything in it at the end.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// path / name, as a string.
  std::string file(const std::string& name) const;
  /// The names of the folder's entries, sorted (to check that nothing was left behind).
  std::vector<std::string> entries() const;
};
/// A whole file's bytes.
std::string read_bytes(const std::string& path);
/// Writes `bytes` to `path` (plainly, not atomically: test fixtures only).
void write_bytes(const std::string& path, const std::string& bytes);

/// Checks that `load(path)` refuses, promptly and with the reason, every path that is not a readable
/// regular file (Note [Hostile files] in core/file_io.hpp): a FIFO with no writer, a symbolic link
/// to it, the folder `dir`, /dev/null and /dev/zero (the message names `fn`, the path, "not a
/// regular file" and the kind; a load that blocks on the FIFO FAILs after 10 s and is then
/// unblocked, so the test cannot hang); a missing file, a path through a regular file and a
/// symbolic link loop (the message has the OS reason). Used by the tests of every loader.
void require_hostile_paths_refused(const std::string& dir, const std::string& fn,
                                   const std::function<void(const std::string&)>& load);

/// REQUIREs that gradcheck passes for fn at inputs (float64), printing the report on failure.
void require_gradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                       const GradcheckOptions& options = {});

/// Runs `fn` (which returns the tensors to compare: outputs and gradients) with 1 and with 2 TBB
/// threads and REQUIREs every returned tensor to be bit-identical.
void require_thread_deterministic(const std::function<Tensors()>& fn);

/// REQUIREs that `fn` throws xgrad::Error whose message contains every string in `fragments`.
void require_error(const std::function<void()>& fn, const std::vector<std::string>& fragments);

/// Runs `/usr/bin/python3 SCRIPT DIR` (Debian's python with torch 1.13 and numpy), its output going
/// to DIR/python.log, and FAILs with that log when the script exits non-zero. A relative `script` is
/// taken from the source tree (e.g. "tests/nn/mlp_parity.py").
void run_python_script(const std::string& script, const std::string& dir);

/// Fresh random leaves requiring grad.
Tensor randn_leaf(const Shape& shape, Generator& gen, Dtype dtype = kFloat64);

/// {max |got - want|, max |want|}: for errors judged relative to the largest reference value.
std::pair<double, double> max_error(const std::vector<double>& got, const std::vector<double>& want);
/// Uniform on [lo, hi) leaves requiring grad.
Tensor uniform_leaf(const Shape& shape, Generator& gen, double lo, double hi, Dtype dtype = kFloat64);

/// PyTorch parity, batched so Python (and torch's import) starts once per batch.
///
///   ParityBatch batch("elementwise");
///   batch.add("mul_broadcast", "out = a * b", {{"a", a}, {"b", b}},
///             [](const Tensors& in) { return mul(in[0], in[1]); });
///   batch.run();  // REQUIREs values and gradients to match torch
///
/// For each case the harness runs ours, seeds backward with a fixed random gradient, saves inputs,
/// seed, our output and gradients as .npy, runs tests/support/torch_parity.py with Debian's
/// /usr/bin/python3, and compares torch's output and gradients with ours (rtol/atol by dtype:
/// float32 1e-4/1e-5, float64 1e-10/1e-12, unless the case overrides them).
class ParityBatch {
 public:
  struct Input {
    std::string name;
    Tensor value;
    bool requires_grad = true;
  };
  explicit ParityBatch(std::string suite);
  /// `torch_code` is Python run with the inputs bound to their names as torch tensors (and `torch`
  /// imported); it must set `out`. Integer-valued inputs can be converted in the code (.long()).
  void add(const std::string& case_name, const std::string& torch_code, const std::vector<Input>& inputs,
           const std::function<Tensor(const Tensors&)>& ours, double rtol = -1, double atol = -1);
  /// Runs torch on every case and REQUIREs agreement.
  void run();
  /// NaN matches NaN and an infinity the same infinity (for cases whose exact answer is NaN or
  /// +-inf, e.g. the mean or logsumexp over an empty axis). Off by default.
  void set_equal_nonfinite(bool on = true) { equal_nonfinite_ = on; }

 private:
  struct Case {
    std::string name, code;
    std::vector<Input> inputs;
    Tensor out;
    Tensors grads;
    double rtol, atol;
  };
  std::string suite_;
  std::string dir_;
  std::vector<Case> cases_;
  bool equal_nonfinite_ = false;
};

}  // namespace xgrad::test
