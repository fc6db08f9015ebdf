#pragma once
// Internal: the loops behind ops/reduction.cpp (sum, mean, max, min, logsumexp, prod, var, std, norm,
// cumsum). The op file plans a reduction (its axes, shapes and Layout); the kernels here walk the
// elements. Instantiated for float and double; max_kernel also for the integer and bool element types.
// Each output is computed by one task in a fixed order, so no result depends on the thread count.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xgrad::detail::reduce {

/// A reduction's layout (Note [Reduction layout] in ops/reduction.cpp): x as (outer kept) x (mid
/// reduced) x (inner kept), row-major. kRows: inner == 1, each output reduces a contiguous row of mid
/// elements. kCols: inner > 1, output (o, i) reduces x[o, :, i]. kGather: output o (outer of them)
/// reduces the mid elements at base(o) + roffs[k], k in row-major order of the reduced elements.
struct Layout {
  enum Kind { kRows, kCols, kGather } kind = kRows;
  std::int64_t outer = 1, mid = 1, inner = 1;
  std::vector<std::int64_t> roffs;                     // kGather: offsets of the reduced elements
  std::vector<std::int64_t> kept_shape, kept_strides;  // kGather: to find each output's base offset
  std::int64_t base(std::int64_t o) const {
    std::int64_t rem = o, b = 0;
    for (std::size_t k = kept_shape.size(); k-- > 0;) {
      b += (rem % kept_shape[k]) * kept_strides[k];
      rem /= kept_shape[k];
    }
    return b;
  }
};

/// A layout seen as `rows` outputs of k reduced elements each (Note [Reductions by rows] in
/// ops/reduction.cpp): output o's element j is at off(base(o), j) in x.
struct Rows {
  Layout l;
  std::int64_t rows = 0, k = 0;
  std::int64_t base(std::int64_t o) const {
    switch (l.kind) {
      case Layout::kRows:
        return o * l.mid;
      case Layout::kCols:
        return (o / l.inner) * l.mid * l.inner + o % l.inner;
      case Layout::kGather:
        return l.base(o);
    }
    return 0;
  }
  std::int64_t off(std::int64_t b, std::int64_t j) const {
    return l.kind == Layout::kRows ? b + j : l.kind == Layout::kCols ? b + j * l.inner : b + l.roffs[j];
  }
};

enum class RowOp { kMin, kProd, kVar, kStd, kNorm };

/// A row reduction and its parameters (var/std: the correction; norm: p >= 1 or inf).
struct RowReduce {
  RowOp op = RowOp::kProd;
  std::int64_t correction = 1;
  double p = 2;
};

/// out[i] = v for i < n, in parallel.
template <class T>
void fill(T* out, std::int64_t n, T v);

/// v[i] /= c for i < n, in parallel (a mean: the sum divided by the count).
template <class T>
void divide(T* v, std::int64_t n, T c);

/// out[o] = max (kMax) or min of output o's reduced elements under layout l (NaN propagates for
/// floating types); idx[o] (when idx != nullptr) = the flat index into x of the first arg-max in
/// row-major order of the reduced elements. l.mid >= 1.
template <class T, bool kMax = true>
void max_kernel(const T* in, T* out, std::int64_t* idx, const Layout& l);

/// out[r] = logsumexp of the contiguous row in[r * n .. r * n + n), r < rows, n >= 1 (Note [Stable
/// logsumexp] in ops/reduction.cpp): the row's max, then the sum of exp in a fixed order.
template <class T>
void logsumexp_rows(const T* in, T* out, std::int64_t rows, std::int64_t n);

/// m[i] = 0 where m[i] is infinite, for i < n: the shift of a stable logsumexp.
template <class T>
void logsumexp_shift(T* m, std::int64_t n);

/// out = exp(x - m) for x of a kCols layout l and m of shape (outer, inner) broadcast along mid.
template <class T>
void logsumexp_exp_cols(const Layout& l, T* out, const T* x, const T* m);

/// y[i] += log(s[i]) for i < n: the shift plus the log of the summed exponentials.
template <class T>
void logsumexp_add_log(T* y, const T* s, std::int64_t n);

/// gx = g * exp(x - y) for x of a kRows or kCols layout l and g, y of shape (outer, inner)
/// broadcast along mid: logsumexp's gradient.
template <class T>
void logsumexp_backward(const Layout& l, T* gx, const T* x, const T* g, const T* y);

/// out[o] = the sum over the reduced axes of `in` (an int64 tensor of shape shape[0..nd), n
/// elements) into the output (keep_shape: shape with the reduced axes set to 1, zero-filled by the
/// caller); a serial row-major walk, wrapping on overflow (two's complement).
void sum_int64(const std::int64_t* in, std::int64_t* out, const std::int64_t* shape, const std::int64_t* keep_shape,
               std::size_t nd, std::int64_t n);

/// rows (v.rows x v.k, contiguous) = x's elements of each output, in row-major order of the reduced
/// elements.
template <class T>
void rows_gather(const Rows& v, const T* x, T* rows);

/// dx[v.off(v.base(o), j)] = rows[o * v.k + j]: the inverse of rows_gather (a permutation).
template <class T>
void rows_scatter(const Rows& v, const T* rows, T* dx);

/// y[o] = the row reduction r of the contiguous row x[o * k .. o * k + k), o < rows, k >= 1.
template <class T>
void row_reduce_forward(const RowReduce& r, const T* x, T* y, std::int64_t rows, std::int64_t k);

/// dx (rows x k) of the row reduction r (not min: its gradient is shared among the ties by the op)
/// for the gradient g and value y of each row's output.
template <class T>
void row_reduce_backward(const RowReduce& r, const T* x, const T* g, const T* y, T* dx, std::int64_t rows,
                         std::int64_t k);

/// y = the cumulative sum of x (outer x n x inner, row-major) along n; reverse: from the end.
/// out[j] = sum over r < rows of g[r * cols + j] (g row-major (rows, cols)), each column added in
/// double in increasing r; columns in blocks of 256 per task. linear's bias gradient.
template <class T>
void column_sums(const T* g, std::int64_t rows, std::int64_t cols, T* out);

template <class T>
void cumsum_kernel(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool reverse);

/// p[(r * k + j) * k + j] = true for r < rows, j < k: the diagonals of rows k x k matrices.
void set_diagonals(bool* p, std::int64_t rows, std::int64_t k);

}  // namespace xgrad::detail::reduce
