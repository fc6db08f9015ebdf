// xgrad_torch._C: the pybind11 layer between PyTorch and xgrad (docs/python.md). Python's
// xgrad_torch/__init__.py wraps these in torch.autograd.Functions and torch.nn.Modules.
//
// Tensors cross without copies (Note [External storage] in core/from_blob.hpp): a contiguous torch
// tensor becomes an xgrad tensor over the same memory, holding a reference to the torch tensor;
// an xgrad result becomes a torch tensor over xgrad's buffer, holding a reference to xgrad's
// storage. A non-contiguous input is made contiguous once (torch's .contiguous()).
//
// Note [Graph between forward and backward]: a forward that needs gradients runs xgrad's op with
// grad mode on, on leaves made from the torch inputs, and returns a Graph holding xgrad's output
// (and so the op's node with everything it saved or prepared: located taps, tables). The Python
// autograd.Function keeps it on its ctx; backward runs xgrad::grad on it with retain_graph, so
// torch may call backward several times (gradcheck does); the graph dies with the ctx.
//
// Note [Threads next to torch]: while xgrad follows torch's thread count (the default, until the
// user fixes xgrad's count with set_num_threads), xgrad's parallel loops run in torch's own pool:
// the module sets at::parallel_for as xgrad's host pool (Note [Host thread pool] in
// core/parallel.hpp), and before each call xgrad's thread count is set to torch.get_num_threads()
// when it differs from the last value set. One pool then runs both libraries' work. With two pools
// taking turns, torch's OpenMP team spin-waits after each of its parallel regions (libgomp's default
// wait policy) while xgrad's TBB workers start on the same cores: on a 2-core machine at 2 threads,
// python/examples/thread_check.py's xgrad op (starting from torch's `.sum()`) was clearly faster in
// torch's pool than in xgrad's TBB pool (docs/python.md, "Measured"; bench/results/tuning_notes.md).
// A count fixed with set_num_threads(n) runs in xgrad's TBB arena of n threads, as in C++.
// xgrad holds OpenBLAS at one thread while its kernels run (Note [OpenBLAS threading] in
// ops/kernels/blas.cpp), process-wide; torch uses the same OpenBLAS for its dense GEMMs, and
// torch.set_num_threads does not set it back. So every call here restores the OpenBLAS thread count
// it found (OpenBlasRestore): torch's own GEMMs keep their threads next to xgrad_torch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
// Only the torch headers the module uses: at::Tensor's class, the one ATen function called
// (from_blob, a per-operator header), ATen's parallel_for, and pybind11's caster for at::Tensor
// (torch/csrc/utils/pybind.h). Not torch/extension.h (the whole C++ frontend: nn, optim, data) nor
// torch/python.h (torch::nn::Module's casters) nor ATen/ATen.h (every operator's declaration).
// Compiler CPU seconds of this file, GCC 12 -O3, one machine: 18.8 with torch/python.h and ATen/ATen.h
// (11.6 of them parsing), 11.6 with these (5.2 parsing); docs/design.md, Compile time, and
// bench/results/compile_time.csv.
// TORCH_ASSERT_ONLY_METHOD_OPERATORS makes including every operator's declaration a compile error.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/from_blob.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/block_sparse_linear.hpp"
#include "xgrad/ops/resample_conv.hpp"
#include "xgrad/ops/sparse.hpp"

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace py = pybind11;
using xgrad::BlockSparsePattern;
using xgrad::FineGrid;
using xgrad::Response;

namespace {

// ---- tensors across the boundary ---------------------------------------------------------------

xgrad::Dtype xgrad_dtype(const at::Tensor& t, const char* op, const char* arg) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return xgrad::kFloat32;
    case at::kDouble:
      return xgrad::kFloat64;
    case at::kLong:
      return xgrad::kInt64;
    case at::kInt:
      return xgrad::kInt32;
    case at::kByte:
      return xgrad::kUInt8;
    case at::kBool:
      return xgrad::kBool;
    default:
      throw py::type_error(std::string(op) + ": argument '" + arg + "' has dtype " +
                           std::string(c10::toString(t.scalar_type())) +
                           ", which xgrad does not support (float32 or float64)");
  }
}

at::ScalarType torch_dtype(xgrad::Dtype d) {
  switch (d) {
    case xgrad::Dtype::float32:
      return at::kFloat;
    case xgrad::Dtype::float64:
      return at::kDouble;
    case xgrad::Dtype::int64:
      return at::kLong;
    case xgrad::Dtype::int32:
      return at::kInt;
    case xgrad::Dtype::uint8:
      return at::kByte;
    case xgrad::Dtype::bool_:
      return at::kBool;
  }
  throw std::runtime_error("xgrad_torch: unknown xgrad dtype");
}

/// An xgrad view of `t` (no copy when contiguous; made contiguous once otherwise). The view holds a
/// reference to the torch tensor's storage until the last xgrad tensor sharing it dies.
xgrad::Tensor to_xgrad(const at::Tensor& t, const char* op, const char* arg) {
  if (!t.defined()) return {};
  if (!t.device().is_cpu())
    throw py::value_error(std::string(op) + ": argument '" + arg + "' is on " + t.device().str() +
                          "; xgrad_torch runs on the CPU (move it with .cpu())");
  const xgrad::Dtype dtype = xgrad_dtype(t, op, arg);
  auto keep = std::make_shared<at::Tensor>(t.detach().contiguous());
  xgrad::Shape shape(keep->sizes().begin(), keep->sizes().end());
  void* data = keep->numel() == 0 ? nullptr : keep->data_ptr();
  return xgrad::from_blob(data, shape, dtype, std::shared_ptr<const void>(keep));
}

/// A torch view of xgrad's buffer: holds xgrad's storage until torch frees the tensor.
at::Tensor to_torch(const xgrad::Tensor& t) {
  if (!t.defined()) return {};
  std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
  auto storage = t.impl()->storage;
  void* data = const_cast<void*>(t.raw_data());
  return at::from_blob(
      data, sizes, [storage](void*) mutable { storage.reset(); },
      at::TensorOptions().dtype(torch_dtype(t.dtype())).device(at::kCPU));
}

// ---- threads (Note [Threads next to torch]) ----------------------------------------------------

std::atomic<bool> g_follow_torch{true};
std::atomic<int> g_last_set{0};

/// Puts OpenBLAS's thread count back as it was when constructed (Note [Threads next to torch]).
struct OpenBlasRestore {
  int n = openblas_get_num_threads();
  OpenBlasRestore() = default;
  OpenBlasRestore(const OpenBlasRestore&) = delete;
  OpenBlasRestore& operator=(const OpenBlasRestore&) = delete;
  ~OpenBlasRestore() {
    if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
  }
};

/// xgrad's host pool while it follows torch (Note [Threads next to torch]): ATen's parallel loop,
/// which runs a call from inside one of its own chunks serially.
[[maybe_unused]] void torch_parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                                         xgrad::FunctionRef<void(std::int64_t, std::int64_t)> fn) {
  at::parallel_for(begin, end, grain, [&](std::int64_t lo, std::int64_t hi) { fn(lo, hi); });
}

// With torch's OpenMP backend, at::parallel_for is an inline OpenMP loop: without OpenMP in this
// build it would run everything serially, so xgrad then keeps its TBB arena.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
constexpr xgrad::HostParallelFor kTorchPool = nullptr;
#else
constexpr xgrad::HostParallelFor kTorchPool = &torch_parallel_for;
#endif

void sync_threads() {
  if (!g_follow_torch.load(std::memory_order_relaxed)) return;
  const int n = at::get_num_threads();
  if (n != g_last_set.load(std::memory_order_relaxed)) {
    xgrad::set_num_threads(n);
    g_last_set.store(n, std::memory_order_relaxed);
  }
}

// ---- the graph between forward and backward (Note [Graph between forward and backward]) --------

struct Graph {
  xgrad::Tensor output;
  std::vector<xgrad::Tensor> inputs;  // one per differentiable input; undefined = no grad wanted

  /// d output / d inputs for the seed `grad_output`, one torch tensor per input (None where no
  /// gradient was asked for).
  std::vector<std::optional<at::Tensor>> backward(const at::Tensor& grad_output) {
    xgrad::Tensor g = to_xgrad(grad_output, "backward", "grad_output");
    if (g.defined() && g.dtype() != output.dtype()) g = g.to(output.dtype());
    xgrad::Tensors wanted;
    for (const auto& in : inputs)
      if (in.defined()) wanted.push_back(in);
    xgrad::Tensors grads;
    {
      py::gil_scoped_release release;
      sync_threads();
      OpenBlasRestore blas;
      grads = xgrad::grad({output}, wanted, {g}, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
    }
    std::vector<std::optional<at::Tensor>> result;
    std::size_t k = 0;
    for (const auto& in : inputs) {
      if (!in.defined()) {
        result.emplace_back(std::nullopt);
        continue;
      }
      const xgrad::Tensor& gi = grads[k++];
      if (gi.defined())
        result.emplace_back(to_torch(gi));
      else
        result.emplace_back(to_torch(xgrad::Tensor::zeros(in.shape(), in.dtype())));
    }
    return result;
  }
};

/// Makes the xgrad leaf for an input: requires grad when asked (and grad mode is then on).
xgrad::Tensor leaf(const at::Tensor& t, const char* op, const char* arg, bool needs_grad) {
  xgrad::Tensor x = to_xgrad(t, op, arg);
  if (needs_grad && x.defined()) {
    if (!xgrad::is_floating_point(x.dtype()))
      throw py::type_error(std::string(op) + ": argument '" + arg + "' requires grad but has an integer dtype");
    x.set_requires_grad(true);
  }
  return x;
}

/// Runs `fn` on the leaves; returns the torch output and, when some leaf requires grad, the Graph.
template <class Fn>
py::tuple run(std::vector<xgrad::Tensor> leaves, Fn&& fn) {
  bool any = false;
  for (auto& l : leaves) any = any || (l.defined() && l.requires_grad());
  xgrad::Tensor out;
  {
    py::gil_scoped_release release;
    sync_threads();
    OpenBlasRestore blas;
    if (any) {
      out = fn();
    } else {
      xgrad::NoGradGuard guard;
      out = fn();
    }
  }
  at::Tensor result = to_torch(any ? out.detach() : out);
  if (!any) return py::make_tuple(result, py::none());
  auto graph = std::make_shared<Graph>();
  graph->output = out;
  for (auto& l : leaves) graph->inputs.push_back(l.defined() && l.requires_grad() ? l : xgrad::Tensor());
  return py::make_tuple(result, graph);
}

void check_needs(const char* op, const std::vector<bool>& needs, std::size_t n) {
  if (needs.size() != n)
    throw py::value_error(std::string(op) + ": argument 'needs' has " + std::to_string(needs.size()) +
                          " flags; expected " + std::to_string(n));
}

xgrad::Interp parse_interp(const std::string& s) {
  if (s == "cubic") return xgrad::Interp::cubic;
  if (s == "linear") return xgrad::Interp::linear;
  throw py::value_error("resample_conv: argument 'interp' is '" + s + "'; expected 'cubic' or 'linear'");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "xgrad's flagship ops for PyTorch (low-level bindings; use the xgrad_torch package)";
  xgrad::set_host_parallel_for(kTorchPool);  // following torch (Note [Threads next to torch])

  // ---- threads ----
  m.def(
      "set_num_threads",
      [](std::optional<int> n) {
        if (!n) {
          g_follow_torch = true;
          g_last_set = 0;
          xgrad::set_host_parallel_for(kTorchPool);
          return;
        }
        if (*n < 1) throw py::value_error("set_num_threads: n = " + std::to_string(*n) + " must be >= 1");
        g_follow_torch = false;
        xgrad::set_host_parallel_for(nullptr);
        xgrad::set_num_threads(*n);
      },
      py::arg("n"));
  m.def("get_num_threads", [] {
    sync_threads();
    return xgrad::get_num_threads();
  });
  m.def("follows_torch_threads", [] { return g_follow_torch.load(); });
  m.def("runs_in_torch_pool", [] { return xgrad::host_parallel_for() != nullptr; });

  // ---- zero-copy round trip (tests) ----
  m.def(
      "_roundtrip",
      [](const at::Tensor& t) {
        xgrad::Tensor x = to_xgrad(t, "_roundtrip", "t");
        return py::make_tuple(reinterpret_cast<std::uintptr_t>(x.raw_data()), to_torch(x));
      },
      py::arg("t"));

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph").def("backward", &Graph::backward, py::arg("grad_output"));

  // ---- resample_conv ----
  py::class_<FineGrid>(m, "FineGrid")
      .def_static("uniform", &FineGrid::uniform, py::arg("start"), py::arg("step"), py::arg("count"))
      .def_static(
          "points",
          [](const at::Tensor& x, bool detect_uniform) {
            return FineGrid::points(to_xgrad(x, "FineGrid.points", "x"), detect_uniform);
          },
          py::arg("x"), py::arg("detect_uniform") = true)
      .def_property_readonly("is_uniform", &FineGrid::is_uniform)
      .def_property_readonly("size", &FineGrid::size)
      .def_property_readonly("start", &FineGrid::x0)
      .def_property_readonly("step", &FineGrid::dx)
      .def(
          "to_tensor",
          [](const FineGrid& g, bool float64) {
            return to_torch(g.to_tensor(float64 ? xgrad::kFloat64 : xgrad::kFloat32));
          },
          py::arg("float64") = true)
      .def("__repr__", [](const FineGrid& g) {
        return g.is_uniform() ? "FineGrid.uniform(start=" + std::to_string(g.x0()) +
                                    ", step=" + std::to_string(g.dx()) + ", count=" + std::to_string(g.size()) + ")"
                              : "FineGrid.points(count=" + std::to_string(g.size()) + ")";
      });

  py::class_<Response>(m, "Response")
      .def_static("gaussian", &Response::gaussian, py::arg("sigma"), py::arg("truncate") = 4.0)
      .def_static("hann", &Response::hann, py::arg("width"))
      .def_static("box", &Response::box, py::arg("width"))
      .def_static("triangle", &Response::triangle, py::arg("width"))
      .def_static("bspline", &Response::bspline, py::arg("order"), py::arg("h"))
      .def_static("lanczos", &Response::lanczos, py::arg("a"), py::arg("scale") = 1.0)
      .def_property_readonly("name", &Response::name)
      .def_property_readonly("lo", &Response::lo)
      .def_property_readonly("hi", &Response::hi)
      .def(
          "__call__", [](const Response& r, double d) { return r(d); }, py::arg("d"))
      .def("derivative", &Response::derivative, py::arg("d"))
      .def("__repr__", [](const Response& r) {
        return "Response(" + r.name() + ", support=[" + std::to_string(r.lo()) + ", " + std::to_string(r.hi()) + "])";
      });

  // Named response (`response` set) or sampled one (`values` with lo, hi, interp).
  m.def(
      "resample_conv",
      [](const at::Tensor& f, const at::Tensor& coarse, const FineGrid& grid, const Response* response,
         const std::optional<at::Tensor>& values, double lo, double hi, const std::string& interp, double tolerance,
         bool exact, bool strict, const std::vector<bool>& needs) {
        const char* op = "resample_conv";
        check_needs(op, needs, 3);
        xgrad::Tensor xf = leaf(f, op, "f", needs[0]);
        xgrad::Tensor xc = leaf(coarse, op, "coarse", needs[1]);
        xgrad::Tensor xv;
        if (values) xv = leaf(*values, op, "values", needs[2]);
        xgrad::ResampleConvOptions options;
        options.tolerance = tolerance;
        options.exact = exact;
        options.strict = strict;
        std::optional<Response> r;
        if (response != nullptr && values)
          throw py::value_error("resample_conv: give a named response or sampled values, not both");
        if (response != nullptr)
          r = *response;
        else if (values)
          r = Response::sampled(xv, lo, hi, parse_interp(interp));
        else
          throw py::value_error("resample_conv: argument 'response' is missing");
        return run({xf, xc, xv}, [&] { return xgrad::resample_conv(xf, xc, grid, *r, options); });
      },
      py::arg("f"), py::arg("coarse"), py::arg("grid"), py::arg("response").none(true), py::arg("values").none(true),
      py::arg("lo") = 0.0, py::arg("hi") = 0.0, py::arg("interp") = "cubic", py::arg("tolerance") = 0.0,
      py::arg("exact") = false, py::arg("strict") = false, py::arg("needs") = std::vector<bool>{false, false, false});

  m.def(
      "resample_conv_prepare",
      [](const FineGrid& grid, const Response& response, bool float64, double tolerance, bool derivative) {
        xgrad::ResampleConvOptions options;
        options.tolerance = tolerance;
        const auto info = xgrad::resample_conv_prepare(grid, response, float64 ? xgrad::kFloat64 : xgrad::kFloat32,
                                                       options, derivative);
        py::dict d;
        d["method"] = std::string(info.method);
        d["degree"] = info.degree;
        d["pieces"] = info.pieces;
        d["taps"] = info.taps;
        d["measured_error"] = info.measured_error;
        d["bytes"] = info.bytes;
        return d;
      },
      py::arg("grid"), py::arg("response"), py::arg("float64") = false, py::arg("tolerance") = 0.0,
      py::arg("derivative") = false);
  m.def("resample_conv_cached_bytes", &xgrad::resample_conv_cached_bytes, py::arg("response"));
  m.def("resample_conv_graph_bytes", &xgrad::resample_conv_graph_bytes, py::arg("outputs"));

  // ---- block-sparse linear ----
  py::class_<BlockSparsePattern>(m, "BlockSparsePattern")
      .def_static(
          "block_diagonal",
          [](const std::vector<std::pair<std::int64_t, std::int64_t>>& groups) {
            std::vector<BlockSparsePattern::DiagonalGroup> gs;
            for (const auto& [in, out] : groups) gs.emplace_back(xgrad::InFeatures{in}, xgrad::OutFeatures{out});
            return BlockSparsePattern::block_diagonal(gs);
          },
          py::arg("groups"))
      .def_static(
          "from_block_mask",
          [](std::int64_t in, std::int64_t out, std::int64_t block_in, std::int64_t block_out, const at::Tensor& mask) {
            return BlockSparsePattern::from_block_mask(
                xgrad::InFeatures{in}, xgrad::OutFeatures{out},
                xgrad::BlockSize{xgrad::InFeatures{block_in}, xgrad::OutFeatures{block_out}},
                to_xgrad(mask, "BlockSparsePattern.from_block_mask", "mask"));
          },
          py::arg("in_features"), py::arg("out_features"), py::arg("block_in"), py::arg("block_out"), py::arg("mask"))
      .def_static(
          "from_element_mask",
          [](const at::Tensor& mask, std::int64_t block_in, std::int64_t block_out) {
            return BlockSparsePattern::from_element_mask(
                to_xgrad(mask, "BlockSparsePattern.from_element_mask", "mask"),
                xgrad::BlockSize{xgrad::InFeatures{block_in}, xgrad::OutFeatures{block_out}});
          },
          py::arg("mask"), py::arg("block_in"), py::arg("block_out"))
      .def_property_readonly("in_features", &BlockSparsePattern::in_features)
      .def_property_readonly("out_features", &BlockSparsePattern::out_features)
      .def_property_readonly("num_blocks", &BlockSparsePattern::num_blocks)
      .def_property_readonly("is_uniform", &BlockSparsePattern::is_uniform)
      .def_property_readonly("weight_shape",
                             [](const BlockSparsePattern& p) {
                               const auto s = p.weight_shape();
                               return std::vector<std::int64_t>(s.begin(), s.end());
                             })
      .def_property_readonly("stored_elements", &BlockSparsePattern::stored_elements)
      .def("row_fan_in", &BlockSparsePattern::row_fan_in)
      .def(
          "element_mask",
          [](const BlockSparsePattern& p, bool float64) {
            return to_torch(p.element_mask(float64 ? xgrad::kFloat64 : xgrad::kFloat32));
          },
          py::arg("float64") = false)
      .def("__eq__", &BlockSparsePattern::operator==)
      .def("__repr__", &BlockSparsePattern::str);

  m.def(
      "block_sparse_linear",
      [](const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
         const BlockSparsePattern& pattern, const std::vector<bool>& needs) {
        const char* op = "block_sparse_linear";
        check_needs(op, needs, 3);
        xgrad::Tensor xx = leaf(x, op, "x", needs[0]);
        xgrad::Tensor xw = leaf(weight, op, "weight", needs[1]);
        xgrad::Tensor xb = bias ? leaf(*bias, op, "bias", needs[2]) : xgrad::Tensor();
        return run({xx, xw, xb}, [&] { return xgrad::block_sparse_linear(xx, xw, xb, pattern); });
      },
      py::arg("x"), py::arg("weight"), py::arg("bias").none(true), py::arg("pattern"),
      py::arg("needs") = std::vector<bool>{false, false, false});
  // ---- sparse CSR ----
  // Note [CSR pattern handles]: a torch CSR matrix's indices cross once, into a CsrPattern handle
  // (validated and copied into xgrad's int64 tensors when it is made); the Python wrappers keep the
  // handle on the torch matrix and pass it to every later call, so the pattern is checked once and
  // its cached transpose (built by the first backward) serves every later backward. A's values are a
  // leaf of their own (needs[0]), so the gradient to a torch CSR matrix's values comes back as a
  // (nnz,) tensor in the same entry order.
  py::class_<xgrad::CsrPattern>(m, "CsrPattern")
      .def(py::init([](const at::Tensor& crow, const at::Tensor& col, std::int64_t rows, std::int64_t cols) {
             const char* op = "CsrPattern";
             return xgrad::CsrPattern::from_indices(to_xgrad(crow, op, "crow_indices"),
                                                    to_xgrad(col, op, "col_indices"), rows, cols, op);
           }),
           py::arg("crow_indices"), py::arg("col_indices"), py::arg("rows"), py::arg("cols"))
      .def_property_readonly("rows", &xgrad::CsrPattern::rows)
      .def_property_readonly("cols", &xgrad::CsrPattern::cols)
      .def_property_readonly("nnz", &xgrad::CsrPattern::nnz)
      .def_property_readonly("has_transposed", &xgrad::CsrPattern::has_transposed)
      .def_property_readonly("has_row_indices", &xgrad::CsrPattern::has_row_indices)
      .def("__repr__", [](const xgrad::CsrPattern& p) {
        return "CsrPattern(rows=" + std::to_string(p.rows()) + ", cols=" + std::to_string(p.cols()) +
               ", nnz=" + std::to_string(p.nnz()) + ")";
      });
  m.def(
      "spmm",
      [](const xgrad::CsrPattern& pattern, const at::Tensor& values, const at::Tensor& x,
         const std::vector<bool>& needs) {
        const char* op = "spmm";
        check_needs(op, needs, 2);
        xgrad::Tensor xv = leaf(values, op, "A.values", needs[0]);
        xgrad::Tensor xx = leaf(x, op, "x", needs[1]);
        const xgrad::SparseCsr a(pattern, xv);
        return run({xv, xx}, [&] { return xgrad::spmm(a, xx); });
      },
      py::arg("pattern"), py::arg("values"), py::arg("x"), py::arg("needs") = std::vector<bool>{false, false});
  m.def(
      "sddmm",
      [](const xgrad::CsrPattern& pattern, const at::Tensor& x, const at::Tensor& y, const std::vector<bool>& needs) {
        const char* op = "sddmm";
        check_needs(op, needs, 2);
        xgrad::Tensor xx = leaf(x, op, "x", needs[0]);
        xgrad::Tensor xy = leaf(y, op, "y", needs[1]);
        if (!xx.defined()) throw py::value_error("sddmm: argument 'x' is undefined");
        // sddmm reads only the pattern: zeros of x's dtype stand in for the values
        const xgrad::SparseCsr a(pattern, xgrad::Tensor::zeros({pattern.nnz()}, xx.dtype()));
        return run({xx, xy}, [&] { return xgrad::sddmm(a, xx, xy); });
      },
      py::arg("pattern"), py::arg("x"), py::arg("y"), py::arg("needs") = std::vector<bool>{false, false});

  m.def(
      "block_sparse_to_dense",
      [](const at::Tensor& weight, const BlockSparsePattern& pattern) {
        return to_torch(xgrad::block_sparse_to_dense(to_xgrad(weight, "block_sparse_to_dense", "weight"), pattern));
      },
      py::arg("weight"), py::arg("pattern"));
  m.def(
      "block_sparse_from_dense",
      [](const at::Tensor& dense, const BlockSparsePattern& pattern) {
        return to_torch(xgrad::block_sparse_from_dense(to_xgrad(dense, "block_sparse_from_dense", "dense"), pattern));
      },
      py::arg("dense"), py::arg("pattern"));
}
