// CSR sparse matrices (construction, validation, the cached transpose) and spmm / sddmm with their
// backward.
//
// Note [Sparse gradients]: with A's pattern P holding values v, the three products
//   spmm(v, X)    = A·X      (M x F from K x F)
//   spmm_t(v, Z)  = Aᵀ·Z     (K x F from M x F; the cached transposed pattern, Note [Cached transpose])
//   sddmm(X, Y)[k] = ⟨X[i], Y[j]⟩ for entry k = (i, j)
// are each other's gradients:
//   spmm:   dv = sddmm(g, X),   dX = spmm_t(v, g)
//   spmm_t: dv = sddmm(Z, g),   dZ = spmm(v, g)
//   sddmm:  dX = spmm(g, Y),    dY = spmm_t(g, X)
// Every backward is written once, as calls of these ops through apply, so under create_graph the
// backward records itself and the derivatives of every order stay on the pattern (no dense M x K).
// spmm and spmm_t are one Function with a `transposed` flag.
#include "xgrad/ops/sparse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/indexing.hpp"
#include "xgrad/ops/kernels/copy_rows.hpp"
#include "xgrad/ops/kernels/sparse_kernels.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

// Note [Pattern tensors] in sparse.hpp: the indices are int64 tensors; the spans cache their data
// pointers, so a kernel's access costs no dtype check.
struct CsrPattern::Impl {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  Tensor crow, col;
  const std::int64_t* crow_p = nullptr;
  const std::int64_t* col_p = nullptr;
  mutable std::once_flag transposed_once, rows_once;
  mutable std::optional<Transposed> transposed;  // an optional: a Transposed holds a CsrPattern
  mutable Tensor row_of;
  mutable const std::int64_t* row_p = nullptr;
  mutable std::atomic<bool> has_transposed{false}, has_row_of{false};
};

namespace {

// A pattern over crow (rows + 1) and col (nnz), int64 tensors the pattern owns from now on, already
// validated.
std::shared_ptr<const CsrPattern::Impl> make_pattern(Tensor crow, Tensor col, std::int64_t rows, std::int64_t cols) {
  auto impl = std::make_shared<CsrPattern::Impl>();
  impl->rows = rows;
  impl->cols = cols;
  impl->nnz = col.numel();
  impl->crow_p = crow.data<std::int64_t>();
  impl->col_p = col.data<std::int64_t>();
  impl->crow = std::move(crow);
  impl->col = std::move(col);
  return impl;
}

const std::shared_ptr<const CsrPattern::Impl>& empty_pattern() {
  static const std::shared_ptr<const CsrPattern::Impl> impl =
      make_pattern(Tensor::zeros({1}, kInt64), Tensor::empty({0}, kInt64), 0, 0);
  return impl;
}

// The 1-d int64 or int32 tensor `t` as a new int64 tensor (the caller's tensor is never kept).
Tensor copy_index(const Tensor& t, const char* op, const char* arg) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is undefined", op, arg);
  XGRAD_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, "{}: argument '{}' must be int64 or int32, got {}", op, arg,
              dtype_name(t.dtype()));
  XGRAD_CHECK(t.dim() == 1, "{}: argument '{}' must be 1-d, got {}", op, arg, shape_str(t.shape()));
  return t.dtype() == kInt64 ? t.clone_data() : t.to(kInt64);
}

void check_size(const Shape& size, const char* op) {
  XGRAD_CHECK(size.size() == 2, "{}: argument 'size' must have 2 dimensions (rows, cols), got {}", op, shape_str(size));
  XGRAD_CHECK(size[0] >= 0 && size[1] >= 0, "{}: argument 'size' must be non-negative, got {}", op, shape_str(size));
}

Tensor index_tensor(const std::vector<std::int64_t>& v) {
  return Tensor::from_data<std::int64_t>(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
}

// out (n,) with out[dest[e]] += values[e], in e order, for integer and bool values (not
// differentiable, so no index_add, whose gradient is for float values): torch's coalesce, exact in
// the values' dtype; integers wrap on overflow, bools sum to their logical or.
Tensor scatter_sum_exact(const Tensor& values, const std::vector<std::int64_t>& dest, std::int64_t n) {
  Tensor out = Tensor::zeros({n}, values.dtype());
  dispatch_all(values.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = values.data<T>();
    T* o = out.data<T>();
    for (std::size_t e = 0; e < dest.size(); ++e) {
      T& y = o[dest[e]];
      if constexpr (std::is_same_v<T, bool>) {
        y = y || v[e];
      } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        y = static_cast<T>(static_cast<U>(y) + static_cast<U>(v[e]));
      } else {
        y += v[e];
      }
    }
  });
  return out;
}

// The transposed pattern's buffers (Note [Cached transpose]): crow and the sort's running offsets
// (cols + 1 each), col, perm, the row indices and the sort's per-chunk counters (at most nnz + cols;
// detail::invert_rows). A width such as 2^62 is an xgrad::Error naming `op` before any of them is
// allocated.
void check_transpose_memory(std::int64_t cols, std::int64_t nnz, const char* op) {
  const std::size_t per_column = checked_nbytes(checked_add(cols, 1, op, "cols"), 3 * sizeof(std::int64_t), op, "cols");
  check_host_memory(per_column + static_cast<std::size_t>(nnz) * 4 * sizeof(std::int64_t), op, "cols");
}

void check_values(const Tensor& values, std::int64_t nnz, const char* op) {
  XGRAD_CHECK(values.defined(), "{}: argument 'values' is undefined", op);
  XGRAD_CHECK(values.dim() == 1 && values.size(0) == nnz,
              "{}: argument 'values' must have shape ({},) (one per stored entry), got {}", op, nnz,
              shape_str(values.shape()));
}

}  // namespace

// ---- CsrPattern --------------------------------------------------------------------------------------

CsrPattern::CsrPattern() : impl_(empty_pattern()) {}

namespace {
// Note [Pattern tensors]: the one validation of a pattern's indices, before the pattern exists.
void check_pattern(std::span<const std::int64_t> crow, std::span<const std::int64_t> col, std::int64_t rows,
                   std::int64_t cols, const char* op) {
  XGRAD_CHECK(rows >= 0 && cols >= 0, "{}: argument 'size' must be non-negative, got ({}, {})", op, rows, cols);
  const auto nnz = static_cast<std::int64_t>(col.size());
  const std::int64_t want = checked_add(rows, 1, op, "size");
  XGRAD_CHECK(static_cast<std::int64_t>(crow.size()) == want,
              "{}: argument 'crow_indices' must have rows + 1 = {} elements for size ({}, {}), got {}", op, want, rows,
              cols, crow.size());
  XGRAD_CHECK(crow[0] == 0, "{}: argument 'crow_indices' must start at 0, got {}", op, crow[0]);
  XGRAD_CHECK(crow[static_cast<std::size_t>(rows)] == nnz,
              "{}: argument 'crow_indices' must end at nnz = {} (the number of column indices), got {}", op, nnz,
              crow[static_cast<std::size_t>(rows)]);
  // Monotone offsets first: with crow[0] = 0 and crow[rows] = nnz they then index col in bounds.
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t b = crow[static_cast<std::size_t>(i)], e = crow[static_cast<std::size_t>(i + 1)];
    XGRAD_CHECK(b <= e,
                "{}: argument 'crow_indices' must be non-decreasing, but crow_indices[{}] = {} > crow_indices[{}] = {}",
                op, i, b, i + 1, e);
  }
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t b = crow[static_cast<std::size_t>(i)], e = crow[static_cast<std::size_t>(i + 1)];
    for (std::int64_t k = b; k < e; ++k) {
      const std::int64_t c = col[static_cast<std::size_t>(k)];
      XGRAD_CHECK(c >= 0 && c < cols,
                  "{}: argument 'col_indices': col_indices[{}] = {} (row {}) is out of range for {} columns", op, k, c,
                  i, cols);
      XGRAD_CHECK(k == b || col[static_cast<std::size_t>(k - 1)] < c,
                  "{}: argument 'col_indices' must be strictly increasing within a row (sorted, no duplicates; "
                  "sparse_coo_tensor sorts and sums them), but row {} has {} after {}",
                  op, i, c, col[static_cast<std::size_t>(k - 1)]);
    }
  }
}

std::span<const std::int64_t> span_of(const Tensor& t) {
  return {t.data<std::int64_t>(), static_cast<std::size_t>(t.numel())};
}
}  // namespace

CsrPattern CsrPattern::from_indices(const std::vector<std::int64_t>& crow, const std::vector<std::int64_t>& col,
                                    std::int64_t rows, std::int64_t cols, const char* op) {
  check_pattern(crow, col, rows, cols, op);
  return CsrPattern(make_pattern(index_tensor(crow), index_tensor(col), rows, cols));
}

CsrPattern CsrPattern::from_indices(const Tensor& crow, const Tensor& col, std::int64_t rows, std::int64_t cols,
                                    const char* op) {
  Tensor c = copy_index(crow, op, "crow_indices");
  Tensor k = copy_index(col, op, "col_indices");
  check_pattern(span_of(c), span_of(k), rows, cols, op);
  return CsrPattern(make_pattern(std::move(c), std::move(k), rows, cols));
}

std::int64_t CsrPattern::rows() const { return impl_->rows; }
std::int64_t CsrPattern::cols() const { return impl_->cols; }
std::int64_t CsrPattern::nnz() const { return impl_->nnz; }
const Tensor& CsrPattern::crow_indices() const { return impl_->crow; }
const Tensor& CsrPattern::col_indices() const { return impl_->col; }
std::span<const std::int64_t> CsrPattern::crow() const {
  return {impl_->crow_p, static_cast<std::size_t>(impl_->rows) + 1};
}
std::span<const std::int64_t> CsrPattern::col() const { return {impl_->col_p, static_cast<std::size_t>(impl_->nnz)}; }
bool CsrPattern::has_transposed() const { return impl_->has_transposed.load(std::memory_order_acquire); }
bool CsrPattern::has_row_indices() const { return impl_->has_row_of.load(std::memory_order_acquire); }
bool CsrPattern::operator==(const CsrPattern& o) const {
  if (impl_ == o.impl_) return true;
  if (rows() != o.rows() || cols() != o.cols() || nnz() != o.nnz()) return false;
  const auto a = crow(), b = o.crow(), c = col(), d = o.col();
  return std::equal(a.begin(), a.end(), b.begin()) && std::equal(c.begin(), c.end(), d.begin());
}

const Tensor& CsrPattern::row_indices() const {
  const Impl& p = *impl_;
  std::call_once(p.rows_once, [&p] {
    Tensor r = Tensor::empty({p.nnz}, kInt64);
    detail::csr_row_indices(p.rows, p.crow_p, r.data<std::int64_t>());
    p.row_p = r.data<std::int64_t>();
    p.row_of = std::move(r);
    p.has_row_of.store(true, std::memory_order_release);
  });
  return p.row_of;
}

std::span<const std::int64_t> CsrPattern::row() const {
  (void)row_indices();
  return {impl_->row_p, static_cast<std::size_t>(impl_->nnz)};
}

// The transpose is a counting sort of the entries by column (detail::csr_transpose, Note [Cached
// transpose]): the same at any thread count. Its indices are valid by construction (a permutation of
// this pattern's entries), so the transposed pattern is made without a second validation.
const CsrPattern::Transposed& CsrPattern::transposed() const {
  const Impl& p = *impl_;
  if (!has_transposed()) check_transpose_memory(p.cols, nnz(), "CsrPattern::transposed");
  std::call_once(p.transposed_once, [this, &p] {
    const std::int64_t* row_of = row().data();
    Tensor t_crow = Tensor::empty({p.cols + 1}, kInt64);
    Tensor t_col = Tensor::empty({p.nnz}, kInt64);
    Tensor perm = Tensor::empty({p.nnz}, kInt64);
    detail::csr_transpose(p.rows, p.cols, p.crow_p, p.col_p, row_of, t_crow.data<std::int64_t>(),
                          t_col.data<std::int64_t>(), perm.data<std::int64_t>());
    Transposed t;
    t.perm_data = perm.data<std::int64_t>();
    t.perm_indices = std::move(perm);
    t.pattern = CsrPattern(make_pattern(std::move(t_crow), std::move(t_col), p.cols, p.rows));
    p.transposed = std::move(t);
    p.has_transposed.store(true, std::memory_order_release);
  });
  return *p.transposed;
}

// ---- the products --------------------------------------------------------------------------------

namespace {

Tensor spmm_impl(const Tensor& values, const Tensor& x, const CsrPattern& p, bool transposed);
Tensor sddmm_impl(const Tensor& x, const Tensor& y, const CsrPattern& p);

// A's values (nnz,) in the order of its transposed pattern, gathered in one parallel pass before a
// kernel walks Aᵀ. Read in place through perm, each entry would cost the kernel a second random
// load beside its gathered row: gathering them first made spmm's Aᵀ·G faster on bench/sparse_ops.cpp's
// R-MAT 2^17 case (bench/results/tuning_notes.md, "spmm's transposed values").
template <class T>
Tensor transposed_values(const Tensor& values, const CsrPattern::Transposed& tp) {
  const auto n = static_cast<std::int64_t>(tp.perm().size());
  Tensor tv = Tensor::empty({n}, values.dtype());
  detail::permute_values<T>(n, tp.perm_data, values.data<T>(), tv.data<T>());
  return tv;
}

// Y = A·X (transposed = false) or Aᵀ·X (true); Note [Sparse gradients].
struct SpmmFn : Function<SpmmFn> {
  static constexpr const char* kName = "spmm";
  static constexpr bool kDifferentiableBackward = true;  // through spmm and sddmm (Note [Sparse gradients])
  CsrPattern pattern;
  bool transposed = false;

  Tensor forward(const Tensor& values, const Tensor& x, const CsrPattern& p, bool t) {
    pattern = p;
    transposed = t;
    save_for_backward({needs_input_grad(1) ? values : Tensor(), needs_input_grad(0) ? x : Tensor()});
    const std::int64_t out_rows = t ? p.cols() : p.rows();
    const std::int64_t f = x.size(1);
    Tensor y = Tensor::empty({out_rows, f}, x.dtype());
    if (out_rows == 0 || f == 0) return y;
    if (p.nnz() == 0) return Tensor::zeros({out_rows, f}, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (t) {
        const auto& tp = p.transposed();
        const Tensor tv = transposed_values<T>(values, tp);
        detail::csr_spmm<T>(out_rows, tp.crow().data(), tp.col().data(), tv.data<T>(), x.data<T>(), f, y.data<T>());
      } else {
        detail::csr_spmm<T>(out_rows, p.crow().data(), p.col().data(), values.data<T>(), x.data<T>(), f, y.data<T>());
      }
    });
    return y;
  }

  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    Tensors res(2);
    if (needs_input_grad(0))
      res[0] = transposed ? sddmm_impl(s[1], grads[0], pattern) : sddmm_impl(grads[0], s[1], pattern);
    if (needs_input_grad(1)) res[1] = spmm_impl(s[0], grads[0], pattern, !transposed);
    return res;
  }
};

// out[k] = ⟨X[i], Y[j]⟩ on the entries k = (i, j) of the pattern.
struct SddmmFn : Function<SddmmFn> {
  static constexpr const char* kName = "sddmm";
  static constexpr bool kDifferentiableBackward = true;  // through spmm (Note [Sparse gradients])
  CsrPattern pattern;

  Tensor forward(const Tensor& x, const Tensor& y, const CsrPattern& p) {
    pattern = p;
    save_for_backward({needs_input_grad(1) ? x : Tensor(), needs_input_grad(0) ? y : Tensor()});
    Tensor out = Tensor::empty({p.nnz()}, x.dtype());
    if (p.nnz() == 0) return out;
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::csr_sddmm<T>(p.rows(), p.crow().data(), p.col().data(), x.data<T>(), y.data<T>(), x.size(1),
                           out.data<T>());
    });
    return out;
  }

  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    Tensors res(2);
    if (needs_input_grad(0)) res[0] = spmm_impl(grads[0], s[1], pattern, false);
    if (needs_input_grad(1)) res[1] = spmm_impl(grads[0], s[0], pattern, true);
    return res;
  }
};

Tensor spmm_impl(const Tensor& values, const Tensor& x, const CsrPattern& p, bool transposed) {
  return apply<SpmmFn>(values, x, p, transposed);
}
Tensor sddmm_impl(const Tensor& x, const Tensor& y, const CsrPattern& p) { return apply<SddmmFn>(x, y, p); }

void check_dense(const char* op, const char* arg, const Tensor& t, std::int64_t rows, const char* rows_what,
                 const SparseCsr& a) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is undefined", op, arg);
  check_floating(op, arg, t);
  XGRAD_CHECK(t.dim() == 2 && t.size(0) == rows,
              "{}: argument '{}' must be 2-d with {} = {} rows for the sparse {}, got {}", op, arg, rows_what, rows,
              shape_str(a.shape()), shape_str(t.shape()));
}

void check_sparse(const char* op, const SparseCsr& a) {
  XGRAD_CHECK(a.defined(), "{}: argument 'a' (the sparse matrix) is undefined", op);
}

}  // namespace

namespace {
// spmm under the public name `op` (spmm, matmul).
Tensor checked_spmm(const SparseCsr& a, const Tensor& x, const char* op) {
  check_sparse(op, a);
  check_floating(op, "a.values", a.values());
  check_dense(op, "x", x, a.cols(), "a.cols", a);
  XGRAD_CHECK(x.dtype() == a.dtype(), "{}: argument 'x' has dtype {} but the sparse matrix's values have dtype {}", op,
              dtype_name(x.dtype()), dtype_name(a.dtype()));
  return spmm_impl(a.values(), x, a.pattern(), false);
}
}  // namespace

Tensor spmm(const SparseCsr& a, const Tensor& x) { return checked_spmm(a, x, "spmm"); }
Tensor matmul(const SparseCsr& a, const Tensor& x) { return checked_spmm(a, x, "matmul"); }

Tensor sddmm(const SparseCsr& a, const Tensor& x, const Tensor& y) {
  constexpr const char* op = "sddmm";
  check_sparse(op, a);
  check_dense(op, "x", x, a.rows(), "a.rows", a);
  check_dense(op, "y", y, a.cols(), "a.cols", a);
  XGRAD_CHECK(x.size(1) == y.size(1), "{}: arguments 'x' {} and 'y' {} must have the same number of columns", op,
              shape_str(x.shape()), shape_str(y.shape()));
  XGRAD_CHECK(x.dtype() == y.dtype(), "{}: arguments 'x' ({}) and 'y' ({}) must have the same dtype", op,
              dtype_name(x.dtype()), dtype_name(y.dtype()));
  return sddmm_impl(x, y, a.pattern());
}

SparseCsr sampled_addmm(const SparseCsr& input, const Tensor& mat1, const Tensor& mat2, double beta, double alpha) {
  constexpr const char* op = "sampled_addmm";
  XGRAD_CHECK(input.defined(), "{}: argument 'input' (the sparse matrix) is undefined", op);
  check_floating(op, "input.values", input.values());
  XGRAD_CHECK(mat1.defined() && mat2.defined(), "{}: argument '{}' is undefined", op, mat1.defined() ? "mat2" : "mat1");
  check_floating(op, "mat1", mat1);
  check_floating(op, "mat2", mat2);
  XGRAD_CHECK(mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(0) == input.rows() && mat2.size(1) == input.cols() &&
                  mat1.size(1) == mat2.size(0),
              "{}: arguments 'mat1' {} and 'mat2' {} must be (M, K) and (K, N) for the sparse input {}", op,
              shape_str(mat1.shape()), shape_str(mat2.shape()), shape_str(input.shape()));
  XGRAD_CHECK(mat1.dtype() == input.dtype() && mat2.dtype() == input.dtype(),
              "{}: arguments 'mat1' ({}) and 'mat2' ({}) must have the dtype of the input's values ({})", op,
              dtype_name(mat1.dtype()), dtype_name(mat2.dtype()), dtype_name(input.dtype()));
  const Tensor sampled = sddmm_impl(mat1, transpose(mat2, 0, 1), input.pattern());
  return input.with_values(add(mul(input.values(), beta), mul(sampled, alpha)));
}

// ---- linear on a sparse input ------------------------------------------------------------------------
// Note [Sparse linear]: two ways, by the number of stored entries against the input width.
// - nnz >= in (a full batch of bag-of-words rows, a graph's node features): spmm(A, Wᵀ) + b. One
//   transposed copy of W (in x out) makes every entry's weights a contiguous row, which spmm reads
//   with SIMD; the copy's cost is that of a tenth of the entries or less, and on a full batch of
//   bag-of-words rows it made forward and backward many times faster than W read in place
//   (bench/results/tuning_notes.md, "Sparse linear").
// - nnz < in (a minibatch of a few hundred rows): W read in place, no transpose of W in forward and
//   none of dW in backward (Note [Fused linear] in linear.cpp measured what those copies cost), and
//   no dense A anywhere: on 256 such rows, faster than the copy, forward and backward. Its backward
//   kernels (first order):
//   dv[k] = ⟨g[i, :], W[:, j]⟩ for entry k at (i, j)       (sddmm(A, g, Wᵀ), W in place)
//   dW    = gᵀ·A, each row o of dW summed by one task over A's cached transposed pattern
//   db    = Σ_i g[i, :]
// and, when the result will be differentiated, the same written with spmm, sddmm and transpose
// (Note [Fused ops]), so every order stays on the pattern.

namespace {

struct SparseLinearFn : Function<SparseLinearFn> {
  static constexpr const char* kName = "linear";
  static constexpr bool kDifferentiableBackward = true;  // backward_formula (Note [Sparse linear])
  CsrPattern pattern;
  bool has_bias = false;

  Tensor forward(const Tensor& values, const Tensor& w, const Tensor& b, const CsrPattern& p) {
    pattern = p;
    has_bias = b.defined();
    save_for_backward({needs_input_grad(1) ? values : Tensor(), w});  // W's shape is needed for dW
    const std::int64_t out = w.size(0), in = w.size(1);
    Tensor y = Tensor::empty({p.rows(), out}, w.dtype());
    dispatch(w.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::csr_linear<T>(p.rows(), p.crow().data(), p.col().data(), values.data<T>(), w.data<T>(), in, out,
                            has_bias ? b.data<T>() : nullptr, y.data<T>());
    });
    return y;
  }

  Tensors backward_kernel(const Tensor& g, const Tensors& s) {
    const Tensor &values = s[0], &w = s[1];
    const std::int64_t out = w.size(0), in = w.size(1);
    Tensors res(3);
    dispatch(w.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (needs_input_grad(0)) {
        res[0] = Tensor::empty({pattern.nnz()}, w.dtype());
        detail::csr_linear_backward_values<T>(pattern.rows(), pattern.crow().data(), pattern.col().data(), g.data<T>(),
                                              w.data<T>(), in, out, res[0].data<T>());
      }
      if (needs_input_grad(1)) {
        const auto& tp = pattern.transposed();
        res[1] = Tensor::empty({out, in}, w.dtype());
        const Tensor tv = transposed_values<T>(values, tp);
        detail::csr_linear_backward_weight<T>(in, tp.crow().data(), tp.col().data(), tv.data<T>(), g.data<T>(), out,
                                              res[1].data<T>());
      }
    });
    if (has_bias && needs_input_grad(2)) res[2] = sum(g, {0});
    return res;
  }
  Tensors backward_formula(const Tensor& g, const Tensors& s) {
    Tensors res(3);
    if (needs_input_grad(0)) res[0] = sddmm_impl(g, transpose(s[1], 0, 1), pattern);
    if (needs_input_grad(1)) res[1] = transpose(spmm_impl(s[0], g, pattern, true), 0, 1);
    if (has_bias && needs_input_grad(2)) res[2] = sum(g, {0});
    return res;
  }
  Tensors backward(const Tensors& grads) { return apply_fused<BackwardOf<SparseLinearFn>>(*this, grads[0], saved()); }
};

}  // namespace

Tensor linear(const SparseCsr& x, const Tensor& weight, const Tensor& bias) {
  constexpr const char* op = "linear";
  XGRAD_CHECK(x.defined(), "{}: argument 'x' (the sparse input) is undefined", op);
  check_floating(op, "x.values", x.values());
  XGRAD_CHECK(weight.defined(), "{}: argument 'weight' is undefined", op);
  check_floating(op, "weight", weight);
  XGRAD_CHECK(weight.dim() == 2 && weight.size(1) == x.cols(),
              "{}: argument 'weight' must be 2-d (out, in) with in = {} (the columns of the sparse x {}), got {}", op,
              x.cols(), shape_str(x.shape()), shape_str(weight.shape()));
  XGRAD_CHECK(weight.dtype() == x.dtype(), "{}: argument 'weight' has dtype {} but the sparse x's values have dtype {}",
              op, dtype_name(weight.dtype()), dtype_name(x.dtype()));
  if (bias.defined())
    XGRAD_CHECK(bias.shape() == Shape{weight.size(0)} && bias.dtype() == weight.dtype(),
                "{}: argument 'bias' must be ({},) {} for weight {}, got {} {}", op, weight.size(0),
                dtype_name(weight.dtype()), shape_str(weight.shape()), shape_str(bias.shape()),
                dtype_name(bias.dtype()));
  if (x.nnz() >= x.cols()) {  // Note [Sparse linear]: through spmm with Wᵀ
    const Tensor y = spmm(x, transpose(weight, 0, 1));
    return bias.defined() ? add(y, bias) : y;
  }
  return apply<SparseLinearFn>(x.values(), weight, bias, x.pattern());
}

SparseCsr sparse_softmax(const SparseCsr& a) {
  XGRAD_CHECK(a.defined(), "sparse_softmax: argument 'a' is an undefined sparse matrix");
  check_floating("sparse_softmax", "a.values", a.values());
  return a.with_values(detail::segment_softmax_rows(a.values(), a.pattern()));
}

SparseCsr sparse_log_softmax(const SparseCsr& a) {
  XGRAD_CHECK(a.defined(), "sparse_log_softmax: argument 'a' is an undefined sparse matrix");
  check_floating("sparse_log_softmax", "a.values", a.values());
  return a.with_values(detail::segment_log_softmax_rows(a.values(), a.pattern()));
}

// ---- segment reductions ----------------------------------------------------------------------------

namespace {

struct SegmentSumFn;
// The offsets of a segment reduction (segments + 1,) int64, shared by its backward ops: the public
// ops' copy of the user's offsets, validated once (check_offsets), or a pattern's row offsets,
// validated when the pattern was made (Note [Pattern tensors] in sparse.hpp), used as they are.
struct Offsets {
  Tensor t;  // holds the data
  const std::int64_t* p = nullptr;
  std::int64_t segments = 0;
  const std::int64_t* data() const { return p; }
};

Offsets offsets_of(Tensor t) {
  Offsets o;
  o.p = t.data<std::int64_t>();
  o.segments = t.numel() - 1;
  o.t = std::move(t);
  return o;
}

Shape with_rows(Shape s, std::int64_t rows) {
  s[0] = rows;
  return s;
}

Tensor segment_sum_impl(const Tensor& data, const Offsets& off, bool mean, double empty = 0);
Tensor segment_expand_impl(const Tensor& g, const Offsets& off, bool mean, const Shape& data_shape);

// out[i] = (1 / n_i if mean) Σ_e data[e] over segment i; an empty segment's mean is `empty`.
struct SegmentSumFn : Function<SegmentSumFn> {
  static constexpr const char* kName = "segment_sum";
  static constexpr bool kDifferentiableBackward = true;  // through segment_expand, whose backward is this op
  Offsets offsets;
  bool mean = false;
  Shape data_shape;

  Tensor forward(const Tensor& data, const Offsets& off, bool m, double empty) {
    offsets = off;
    mean = m;
    data_shape = data.shape();
    const auto segments = off.segments;
    Tensor out = Tensor::empty(with_rows(data.shape(), segments), data.dtype());
    const std::int64_t f = segments == 0 ? 0 : out.numel() / segments;
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_sum<T>(segments, off.data(), data.data<T>(), f, m, static_cast<T>(empty), out.data<T>());
    });
    return out;
  }
  Tensors backward(const Tensors& grads) { return {segment_expand_impl(grads[0], offsets, mean, data_shape)}; }
};

// out[e] = (1 / n_i if mean) g[i] for e in segment i: segment_sum's transpose.
struct SegmentExpandFn : Function<SegmentExpandFn> {
  static constexpr const char* kName = "segment_sum_backward";
  static constexpr bool kDifferentiableBackward = true;  // through segment_sum
  Offsets offsets;
  bool mean = false;

  Tensor forward(const Tensor& g, const Offsets& off, bool m, const Shape& data_shape) {
    offsets = off;
    mean = m;
    Tensor out = Tensor::empty(data_shape, g.dtype());
    const auto segments = off.segments;
    const std::int64_t f = data_shape[0] == 0 ? 0 : out.numel() / data_shape[0];
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_expand<T>(segments, off.data(), g.data<T>(), f, m, out.data<T>());
    });
    return out;
  }
  // an empty segment's g[i] reaches no entry: its gradient is 0, also for the mean
  Tensors backward(const Tensors& grads) { return {segment_sum_impl(grads[0], offsets, mean, 0)}; }
};

Tensor segment_sum_impl(const Tensor& data, const Offsets& off, bool mean, double empty) {
  return apply<SegmentSumFn>(data, off, mean, empty);
}
Tensor segment_expand_impl(const Tensor& g, const Offsets& off, bool mean, const Shape& data_shape) {
  return apply<SegmentExpandFn>(g, off, mean, data_shape);
}

// segment_softmax's (Log = false) and segment_log_softmax's (Log = true) backward from the result y:
//   softmax:     dx = y ⊙ (g − expand(segment_sum(g ⊙ y)))
//   log_softmax: dx = g − exp(y) ⊙ expand(segment_sum(g))
// The kernel for first order; the formula of recorded ops when the result will be differentiated
// (Note [Fused ops]).
template <bool Log>
struct SegmentSoftmaxBackward {
  static constexpr const char* kName = Log ? "segment_log_softmax_backward" : "segment_softmax_backward";
  static Tensor kernel(const Tensor& g, const Tensor& y, const Offsets& off) {
    Tensor dx = Tensor::empty(y.shape(), y.dtype());
    const auto segments = off.segments;
    const std::int64_t f = y.size(0) == 0 ? 0 : y.numel() / y.size(0);
    dispatch(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_softmax_backward<T>(segments, off.data(), g.data<T>(), y.data<T>(), f, Log, dx.data<T>());
    });
    return dx;
  }
  static Tensor formula(const Tensor& g, const Tensor& y, const Offsets& off) {
    const auto expand_sum = [&](const Tensor& t) {
      return segment_expand_impl(segment_sum_impl(t, off, false), off, false, y.shape());
    };
    if (Log) return sub(g, mul(exp(y), expand_sum(g)));
    return mul(y, sub(g, expand_sum(mul(g, y))));
  }
};

// out = softmax (Log = false) or log_softmax over each segment's entries (per column).
template <bool Log>
struct SegmentSoftmaxFn : Function<SegmentSoftmaxFn<Log>> {
  static constexpr const char* kName = Log ? "segment_log_softmax" : "segment_softmax";
  static constexpr bool kDifferentiableBackward = true;  // the formula of SegmentSoftmaxBackward
  Offsets offsets;

  Tensor forward(const Tensor& data, const Offsets& off) {
    offsets = off;
    Tensor out = Tensor::empty(data.shape(), data.dtype());
    const auto segments = off.segments;
    const std::int64_t f = data.size(0) == 0 ? 0 : data.numel() / data.size(0);
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_softmax<T>(segments, off.data(), data.data<T>(), f, Log, out.data<T>());
    });
    this->save_for_backward({out});
    return out;
  }
  Tensors backward(const Tensors& grads) {
    return {apply_fused<SegmentSoftmaxBackward<Log>>(grads[0], this->saved(0), offsets)};
  }
};

// segment_max's backward (g split evenly among the ties, detail::segment_max_backward): the kernel for
// first order; under create_graph, ddata = expand(g / c) ⊙ ties with the tie mask and the tie count c
// as constants (they are piecewise constant in data), so the formula is linear in g and its
// derivative in data is 0, as the kernel's (Note [Fused ops]).
template <bool Max>
struct SegmentMaxBackward {
  static constexpr const char* kName = Max ? "segment_max_backward" : "segment_min_backward";
  static Tensor kernel(const Tensor& g, const Tensor& data, const Tensor& out, const Offsets& off) {
    return run(g, data, out, off, nullptr);
  }
  static Tensor formula(const Tensor& g, const Tensor& data, const Tensor& out, const Offsets& off) {
    Tensor divisor = Tensor::empty(out.shape(), out.dtype());
    const Tensor ties = run(g, data, out, off, &divisor);
    return mul(segment_expand_impl(div(g, divisor), off, false, data.shape()), ties);
  }
  static Tensor run(const Tensor& g, const Tensor& data, const Tensor& out, const Offsets& off, Tensor* divisor) {
    Tensor dx = Tensor::empty(data.shape(), data.dtype());
    const auto segments = off.segments;
    const std::int64_t f = segments == 0 ? 0 : out.numel() / segments;
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_max_backward<T>(segments, off.data(), g.data<T>(), data.data<T>(), out.data<T>(), f, dx.data<T>(),
                                      divisor != nullptr ? divisor->data<T>() : nullptr);
    });
    return dx;
  }
};

// out[i] = the max (Max) or min of each segment, per column.
template <bool Max>
struct SegmentMaxFn : Function<SegmentMaxFn<Max>> {
  static constexpr const char* kName = Max ? "segment_max" : "segment_min";
  static constexpr bool kDifferentiableBackward = true;  // the formula of SegmentMaxBackward
  Offsets offsets;

  Tensor forward(const Tensor& data, const Offsets& off, double empty) {
    offsets = off;
    const auto segments = off.segments;
    Tensor out = Tensor::empty(with_rows(data.shape(), segments), data.dtype());
    const std::int64_t f = segments == 0 ? 0 : out.numel() / segments;
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_max<T>(segments, off.data(), data.data<T>(), f, Max, static_cast<T>(empty), out.data<T>());
    });
    this->save_for_backward({data, out});
    return out;
  }
  Tensors backward(const Tensors& grads) {
    const Tensors s = this->saved();
    return {apply_fused<SegmentMaxBackward<Max>>(grads[0], s[0], s[1], offsets)};
  }
};

// segment_logsumexp's backward: ddata[e] = g[i]·exp(data[e] − out[i]) for e in segment i, by the kernel
// at first order and by the same formula of recorded ops when it will be differentiated (through out,
// the saved result, too: Note [Fused ops]).
struct SegmentLogsumexpBackward {
  static constexpr const char* kName = "segment_logsumexp_backward";
  static Tensor kernel(const Tensor& g, const Tensor& data, const Tensor& out, const Offsets& off) {
    Tensor dx = Tensor::empty(data.shape(), data.dtype());
    const auto segments = off.segments;
    const std::int64_t f = segments == 0 ? 0 : out.numel() / segments;
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_logsumexp_backward<T>(segments, off.data(), g.data<T>(), data.data<T>(), out.data<T>(), f,
                                            dx.data<T>());
    });
    return dx;
  }
  static Tensor formula(const Tensor& g, const Tensor& data, const Tensor& out, const Offsets& off) {
    const auto expand = [&](const Tensor& t) { return segment_expand_impl(t, off, false, data.shape()); };
    return mul(expand(g), exp(sub(data, expand(out))));
  }
};

// out[i] = log Σ exp(data[e]) over segment i, per column (detail::segment_logsumexp).
struct SegmentLogsumexpFn : Function<SegmentLogsumexpFn> {
  static constexpr const char* kName = "segment_logsumexp";
  static constexpr bool kDifferentiableBackward = true;  // the formula of SegmentLogsumexpBackward
  Offsets offsets;

  Tensor forward(const Tensor& data, const Offsets& off) {
    offsets = off;
    const auto segments = off.segments;
    Tensor out = Tensor::empty(with_rows(data.shape(), segments), data.dtype());
    const std::int64_t f = segments == 0 ? 0 : out.numel() / segments;
    dispatch(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      detail::segment_logsumexp<T>(segments, off.data(), data.data<T>(), f, out.data<T>());
    });
    save_for_backward({data, out});
    return out;
  }
  Tensors backward(const Tensors& grads) {
    const Tensors s = saved();
    return {apply_fused<SegmentLogsumexpBackward>(grads[0], s[0], s[1], offsets)};
  }
};

void check_data(const Tensor& data, const char* op) {
  XGRAD_CHECK(data.defined(), "{}: argument 'data' is undefined", op);
  check_floating(op, "data", data);
  XGRAD_CHECK(data.dim() >= 1, "{}: argument 'data' must have at least 1 dimension (the entries), got {}", op,
              shape_str(data.shape()));
}

// Validated offsets for data's dim 0: a copy of the user's (int32 widened), so that a later write to
// them cannot reach the backward.
Offsets check_offsets(const Tensor& data, const Tensor& offsets, const char* op) {
  check_data(data, op);
  XGRAD_CHECK(offsets.defined() && offsets.dim() == 1 && offsets.numel() >= 1,
              "{}: argument 'offsets' must be 1-d with at least one element (segments + 1), got {}", op,
              offsets.defined() ? shape_str(offsets.shape()) : std::string("undefined"));
  XGRAD_CHECK(offsets.dtype() == kInt64 || offsets.dtype() == kInt32,
              "{}: argument 'offsets' must be int64 or int32, got {}", op, dtype_name(offsets.dtype()));
  Offsets off = offsets_of(offsets.dtype() == kInt64 ? offsets.clone_data() : offsets.to(kInt64));
  const std::int64_t* o = off.data();
  const std::int64_t n = off.segments + 1;
  XGRAD_CHECK(o[0] == 0, "{}: argument 'offsets' must start at 0, got {}", op, o[0]);
  XGRAD_CHECK(o[n - 1] == data.size(0), "{}: argument 'offsets' must end at data.size(0) = {} for data {}, got {}", op,
              data.size(0), shape_str(data.shape()), o[n - 1]);
  for (std::int64_t i = 0; i + 1 < n; ++i)
    XGRAD_CHECK(o[i] <= o[i + 1],
                "{}: argument 'offsets' must be non-decreasing, but offsets[{}] = {} > offsets[{}] = {}", op, i, o[i],
                i + 1, o[i + 1]);
  return off;
}

// A pattern's row offsets for data (nnz, ...): only data is checked (Note [Pattern tensors]).
Offsets pattern_offsets(const Tensor& data, const CsrPattern& rows, const char* op) {
  check_data(data, op);
  XGRAD_CHECK(data.size(0) == rows.nnz(),
              "{}: argument 'data' must have one row per stored entry of the pattern ({} x {}, nnz {}), got {}", op,
              rows.rows(), rows.cols(), rows.nnz(), shape_str(data.shape()));
  Offsets o;
  o.t = rows.crow_indices();
  o.p = rows.crow().data();
  o.segments = rows.rows();
  return o;
}

}  // namespace

Tensor segment_sum(const Tensor& data, const Tensor& offsets) {
  return segment_sum_impl(data, check_offsets(data, offsets, "segment_sum"), false);
}
Tensor segment_mean(const Tensor& data, const Tensor& offsets, double empty_value) {
  return segment_sum_impl(data, check_offsets(data, offsets, "segment_mean"), true, empty_value);
}
Tensor segment_max(const Tensor& data, const Tensor& offsets, double empty_value) {
  return apply<SegmentMaxFn<true>>(data, check_offsets(data, offsets, "segment_max"), empty_value);
}
Tensor segment_min(const Tensor& data, const Tensor& offsets, double empty_value) {
  return apply<SegmentMaxFn<false>>(data, check_offsets(data, offsets, "segment_min"), empty_value);
}
Tensor segment_logsumexp(const Tensor& data, const Tensor& offsets) {
  return apply<SegmentLogsumexpFn>(data, check_offsets(data, offsets, "segment_logsumexp"));
}
Tensor segment_softmax(const Tensor& data, const Tensor& offsets) {
  return apply<SegmentSoftmaxFn<false>>(data, check_offsets(data, offsets, "segment_softmax"));
}
Tensor segment_log_softmax(const Tensor& data, const Tensor& offsets) {
  return apply<SegmentSoftmaxFn<true>>(data, check_offsets(data, offsets, "segment_log_softmax"));
}

Tensor detail::segment_sum_rows(const Tensor& data, const CsrPattern& rows) {
  return segment_sum_impl(data, pattern_offsets(data, rows, "segment_sum"), false);
}
Tensor detail::segment_mean_rows(const Tensor& data, const CsrPattern& rows, double empty_value) {
  return segment_sum_impl(data, pattern_offsets(data, rows, "segment_mean"), true, empty_value);
}
Tensor detail::segment_max_rows(const Tensor& data, const CsrPattern& rows, double empty_value) {
  return apply<SegmentMaxFn<true>>(data, pattern_offsets(data, rows, "segment_max"), empty_value);
}
Tensor detail::segment_softmax_rows(const Tensor& data, const CsrPattern& rows) {
  return apply<SegmentSoftmaxFn<false>>(data, pattern_offsets(data, rows, "segment_softmax"));
}
Tensor detail::segment_log_softmax_rows(const Tensor& data, const CsrPattern& rows) {
  return apply<SegmentSoftmaxFn<true>>(data, pattern_offsets(data, rows, "segment_log_softmax"));
}

// ---- gathers by a pattern's indices ------------------------------------------------------------------
// Note [Pattern gathers]: a message-passing layer gathers node rows by the pattern's column indices
// (sources) and row indices (targets). index_select would check the indices on every call and, in
// its backward, build the inverse of the index (Note [Row scatter] in kernels/scatter_rows.cpp) on
// every call; the pattern has both inverses already: its row offsets for the row indices and its
// cached transpose (row offsets and perm) for the column indices, the same stable counting sort
// (csr_transpose is invert_rows). The backward is then a gather-sum per output row over them
// (detail::segment_gather_sum), adding each row's contributions in increasing entry order from zero:
// the serial loop's order, so the same bits as index_select's backward at any thread count. With one
// thread (or little work) the column sums are that serial loop itself (detail::scatter_sum_rows),
// which reads g in sequence where the gather reads it through perm; the same sums, the same bits.

namespace {

Tensor pattern_gather_impl(const Tensor& x, const CsrPattern& p, bool by_col);
Tensor pattern_scatter_impl(const Tensor& g, const CsrPattern& p, bool by_col);

Shape with_dim0(Shape s, std::int64_t n) {
  s[0] = n;
  return s;
}

// out[k] = x[col[k]] (by_col) or x[row[k]].
struct PatternGatherFn : Function<PatternGatherFn> {
  static constexpr const char* kName = "index_select";
  static constexpr bool kDifferentiableBackward = true;  // through PatternScatterFn
  CsrPattern pattern;
  bool by_col = false;
  Tensor forward(const Tensor& x, const CsrPattern& p, bool c) {
    pattern = p;
    by_col = c;
    Tensor y = Tensor::empty(with_dim0(x.shape(), p.nnz()), x.dtype());
    if (y.numel() == 0) return y;
    detail::copy_rows(x.raw_data(), y.raw_data(), x.numel() / x.size(0), dtype_size(x.dtype()), 1, p.nnz(), x.size(0),
                      c ? p.col().data() : p.row().data(), false);
    return y;
  }
  Tensors backward(const Tensors& grads) { return {pattern_scatter_impl(grads[0], pattern, by_col)}; }
};

// dx[c] = Σ g[k] over the entries k in column c (by_col) or row c, in increasing k.
struct PatternScatterFn : Function<PatternScatterFn> {
  static constexpr const char* kName = "index_select_backward";
  static constexpr bool kDifferentiableBackward = true;  // through PatternGatherFn
  CsrPattern pattern;
  bool by_col = false;
  Tensor forward(const Tensor& g, const CsrPattern& p, bool c) {
    pattern = p;
    by_col = c;
    const std::int64_t n = c ? p.cols() : p.rows();
    Tensor dx = Tensor::empty(with_dim0(g.shape(), n), g.dtype());
    if (dx.numel() == 0) return dx;
    if (g.numel() == 0) return Tensor::zeros(dx.shape(), g.dtype());
    const std::int64_t f = g.numel() / g.size(0);
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (c && (get_num_threads() == 1 || p.nnz() * f <= kParallelGrain)) {
        // one thread: the entries in order, g read once in sequence (the row scatter's serial loop)
        detail::scatter_sum_rows<T>(p.nnz(), p.col().data(), g.data<T>(), f, n, dx.data<T>());
      } else if (c) {
        const auto& tp = p.transposed();
        detail::segment_gather_sum<T>(n, tp.crow().data(), tp.perm_data, g.data<T>(), f, dx.data<T>());
      } else {
        detail::segment_gather_sum<T>(n, p.crow().data(), nullptr, g.data<T>(), f, dx.data<T>());
      }
    });
    return dx;
  }
  Tensors backward(const Tensors& grads) { return {pattern_gather_impl(grads[0], pattern, by_col)}; }
};

Tensor pattern_gather_impl(const Tensor& x, const CsrPattern& p, bool by_col) {
  return apply<PatternGatherFn>(x, p, by_col);
}
Tensor pattern_scatter_impl(const Tensor& g, const CsrPattern& p, bool by_col) {
  return apply<PatternScatterFn>(g, p, by_col);
}

Tensor checked_pattern_gather(const Tensor& x, const CsrPattern& p, bool by_col) {
  constexpr const char* op = "index_select";
  XGRAD_CHECK(x.defined(), "{}: argument 'x' is undefined", op);
  const std::int64_t n = by_col ? p.cols() : p.rows();
  XGRAD_CHECK(x.dim() >= 1 && x.size(0) == n,
              "{}: argument 'x' must have {} = {} rows to be gathered by the pattern's {} indices, got {}", op,
              by_col ? "cols" : "rows", n, by_col ? "column" : "row", shape_str(x.shape()));
  checked_numel(with_dim0(x.shape(), p.nnz()), op, "x");
  return pattern_gather_impl(x, p, by_col);
}

}  // namespace

Tensor detail::index_select_cols(const Tensor& x, const CsrPattern& p) { return checked_pattern_gather(x, p, true); }
Tensor detail::index_select_rows(const Tensor& x, const CsrPattern& p) { return checked_pattern_gather(x, p, false); }

// ---- SparseCsr -------------------------------------------------------------------------------------

SparseCsr::SparseCsr(CsrPattern pattern, Tensor values) : pattern_(std::move(pattern)), values_(std::move(values)) {
  check_values(values_, pattern_.nnz(), "SparseCsr");
}

SparseCsr SparseCsr::with_values(const Tensor& values) const {
  check_values(values, nnz(), "SparseCsr::with_values");
  return SparseCsr(pattern_, values);
}

SparseCsr SparseCsr::t() const {
  XGRAD_CHECK(defined(), "SparseCsr::t: the sparse matrix is undefined");
  check_transpose_memory(cols(), nnz(), "SparseCsr::t");
  const auto& tp = pattern_.transposed();
  return SparseCsr(tp.pattern, detail::index_select_checked(values_, 0, tp.perm()));
}

Tensor SparseCsr::to_dense() const {
  constexpr const char* op = "to_dense";
  XGRAD_CHECK(defined(), "{}: the sparse matrix is undefined", op);
  const std::int64_t n = checked_mul(rows(), cols(), op, "size");
  check_host_memory(checked_nbytes(n, dtype_size(dtype()), op, "size"), op, "size");
  std::vector<std::int64_t> pos(static_cast<std::size_t>(nnz()));
  for (std::int64_t i = 0; i < rows(); ++i)
    for (std::int64_t k = pattern_.crow()[static_cast<std::size_t>(i)];
         k < pattern_.crow()[static_cast<std::size_t>(i + 1)]; ++k)
      pos[static_cast<std::size_t>(k)] = i * cols() + pattern_.col()[static_cast<std::size_t>(k)];
  if (!is_floating_point(dtype())) return reshape(scatter_sum_exact(values_, pos, n), {rows(), cols()});
  return reshape(index_add(Tensor::zeros({n}, dtype()), 0, index_tensor(pos), values_), {rows(), cols()});
}

std::string SparseCsr::str() const {
  if (!defined()) return "SparseCsr(undefined)";
  return fmt::format("SparseCsr(rows={}, cols={}, nnz={}, dtype={})", rows(), cols(), nnz(), dtype_name(dtype()));
}

// ---- construction --------------------------------------------------------------------------------

SparseCsr sparse_csr_tensor(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                            const Shape& size) {
  constexpr const char* op = "sparse_csr_tensor";
  check_size(size, op);
  XGRAD_CHECK(crow_indices.defined() && crow_indices.dim() == 1, "{}: argument 'crow_indices' must be 1-d, got {}", op,
              crow_indices.defined() ? shape_str(crow_indices.shape()) : std::string("undefined"));
  XGRAD_CHECK(col_indices.defined() && col_indices.dim() == 1, "{}: argument 'col_indices' must be 1-d, got {}", op,
              col_indices.defined() ? shape_str(col_indices.shape()) : std::string("undefined"));
  check_values(values, col_indices.numel(), op);
  CsrPattern p = CsrPattern::from_indices(crow_indices, col_indices, size[0], size[1], op);
  return SparseCsr(std::move(p), values);
}

SparseCsr sparse_coo_tensor(const Tensor& indices, const Tensor& values, const Shape& size) {
  constexpr const char* op = "sparse_coo_tensor";
  check_size(size, op);
  XGRAD_CHECK(indices.defined() && indices.dim() == 2 && indices.size(0) == 2,
              "{}: argument 'indices' must have shape (2, nnz) (rows, then columns), got {}", op,
              indices.defined() ? shape_str(indices.shape()) : std::string("undefined"));
  const std::int64_t n = indices.size(1);
  check_values(values, n, op);
  // the row offsets and two working copies of them (rows + 1 each) are the size-dependent memory
  check_host_memory(checked_nbytes(checked_add(size[0], 1, op, "size"), 3 * sizeof(std::int64_t), op, "size"), op,
                    "size");
  XGRAD_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "{}: argument 'indices' must be int64 or int32, got {}", op, dtype_name(indices.dtype()));
  const Tensor idx = indices.to(kInt64);
  const std::int64_t* r = idx.data<std::int64_t>();
  const std::int64_t* c = r + n;
  for (std::int64_t e = 0; e < n; ++e) {
    XGRAD_CHECK(r[e] >= 0 && r[e] < size[0],
                "{}: argument 'indices': row index {} (entry {}) is out of range for {} rows", op, r[e], e, size[0]);
    XGRAD_CHECK(c[e] >= 0 && c[e] < size[1],
                "{}: argument 'indices': column index {} (entry {}) is out of range for {} columns", op, c[e], e,
                size[1]);
  }
  std::vector<std::int64_t> ucrow(static_cast<std::size_t>(size[0]) + 1), ucol, dest(static_cast<std::size_t>(n));
  const bool identity = detail::coo_to_csr(n, size[0], r, c, ucrow.data(), ucol, dest.data());
  const auto nu = static_cast<std::int64_t>(ucol.size());
  CsrPattern p = CsrPattern::from_indices(ucrow, ucol, size[0], size[1], op);
  if (identity) return SparseCsr(std::move(p), values);
  if (!is_floating_point(values.dtype())) return SparseCsr(std::move(p), scatter_sum_exact(values, dest, nu));
  return SparseCsr(std::move(p), index_add(Tensor::zeros({nu}, values.dtype()), 0, index_tensor(dest), values));
}

SparseCsr to_sparse_csr(const Tensor& dense) {
  constexpr const char* op = "to_sparse_csr";
  XGRAD_CHECK(dense.defined(), "{}: argument 'dense' is undefined", op);
  XGRAD_CHECK(dense.dim() == 2, "{}: argument 'dense' must be 2-d, got {}", op, shape_str(dense.shape()));
  const std::int64_t rows = dense.size(0), cols = dense.size(1);
  const std::vector<double> v = dense.to_vector();
  std::vector<std::int64_t> crow(static_cast<std::size_t>(rows) + 1, 0), col, pos;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j)
      if (v[static_cast<std::size_t>(i * cols + j)] != 0) {
        col.push_back(j);
        pos.push_back(i * cols + j);
      }
    crow[static_cast<std::size_t>(i) + 1] = static_cast<std::int64_t>(col.size());
  }
  CsrPattern p = CsrPattern::from_indices(crow, col, rows, cols, op);
  return SparseCsr(std::move(p), index_select(reshape(dense, {dense.numel()}), 0, index_tensor(pos)));
}

}  // namespace xgrad
