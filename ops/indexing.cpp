#include "xgrad/ops/indexing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/detail/gather_map.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

namespace {

void check_defined(const char* op, const Tensor& t, const char* arg) {
  XGRAD_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

// The values of an index tensor (int64, or int32 when `int32_ok`), as int64.
std::vector<std::int64_t> index_values(const char* op, const char* arg, const Tensor& t, bool int32_ok) {
  check_defined(op, t, arg);
  const bool ok = t.dtype() == kInt64 || (int32_ok && t.dtype() == kInt32);
  XGRAD_CHECK(ok, "{}: argument '{}' must be an int64{} tensor, got {} of shape {} (convert with .to(kInt64))", op, arg,
              int32_ok ? " or int32" : "", t.dtype(), shape_str(t.shape()));
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == kInt64) {
    if (!v.empty()) std::memcpy(v.data(), t.data<std::int64_t>(), v.size() * sizeof(std::int64_t));
  } else {
    const std::int32_t* p = t.data<std::int32_t>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  }
  return v;
}

// Checks every index against [0, n) (or [-n, n) when `negative_ok`, then wraps them); the first bad
// one is reported with its position in the index tensor.
void check_range(const char* op, const char* arg, std::vector<std::int64_t>& v, std::int64_t n, std::int64_t dim,
                 const Shape& x_shape, bool negative_ok) {
  for (std::size_t e = 0; e < v.size(); ++e) {
    const std::int64_t i = v[e];
    const bool ok = negative_ok ? (i >= -n && i < n) : (i >= 0 && i < n);
    XGRAD_CHECK(ok, "{}: index {} (element {} of '{}') is out of range for dim {} of size {} (x has shape {})", op, i,
                e, arg, dim, n, shape_str(x_shape));
    if (i < 0) v[e] = i + n;
  }
}

// Multi-index of flat position e in `shape` applied to `strides` (a dot product), skipping dim `skip`.
std::int64_t offset_of(std::int64_t e, const Shape& shape, const Shape& strides, std::size_t skip) {
  std::int64_t off = 0;
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t i = e % shape[d];
    e /= shape[d];
    if (d != skip) off += i * strides[d];
  }
  return off;
}

// The flat x position of every element of an index of shape `ishape` along dim (gather's map).
std::vector<std::int64_t> gather_positions(const Shape& x_shape, std::int64_t dim, const Shape& ishape,
                                           const std::vector<std::int64_t>& idx) {
  std::vector<std::int64_t> map(idx.size());
  const Shape xs = contiguous_strides(x_shape);
  const auto a = static_cast<std::size_t>(dim);
  parallel_for(0, static_cast<std::int64_t>(idx.size()), kParallelGrain / 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k)
      map[static_cast<std::size_t>(k)] =
          offset_of(k, ishape, xs, a) + idx[static_cast<std::size_t>(k)] * (x_shape.empty() ? 1 : xs[a]);
  });
  return map;
}

std::int64_t norm_dim(const char* op, std::int64_t dim, const Shape& s) {
  // a 0-d tensor takes dim 0 / -1, as torch
  const std::int64_t a = normalize_axis(dim, std::max<std::int64_t>(1, static_cast<std::int64_t>(s.size())), op, s);
  return s.empty() ? 0 : a;
}

Tensor gather_checked(const char* op, const Tensor& x, std::int64_t a, const Shape& ishape,
                      std::vector<std::int64_t> idx) {
  const Shape& s = x.shape();
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  check_range(op, "index", idx, n, a, s, false);
  return detail::gather_map(op, x, ishape, gather_positions(s, a, ishape, idx), false);
}

// y = x + (src[srcoff[e]] added at map[e], for every e in increasing order); dx = g,
// dsrc[srcoff[e]] = g[map[e]] (srcoff is injective).
struct ScatterAdd : Function<ScatterAdd> {
  static constexpr const char* kName = "scatter_add";
  const char* op = kName;
  Shape src_shape;
  std::vector<std::int64_t> map, srcoff;
  const char* name() const override { return op; }
  Tensor forward(const Tensor& x, const Tensor& src, const char* op_, std::vector<std::int64_t> map_,
                 std::vector<std::int64_t> srcoff_) {
    op = op_;
    src_shape = src.shape();
    Tensor y = x.clone_data();
    if (!map_.empty()) {
      Tensor picked = Tensor::empty({static_cast<std::int64_t>(srcoff_.size())}, src.dtype());
      dispatch(src.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* sp = src.data<T>();
        T* pp = picked.data<T>();
        parallel_for(0, picked.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t k = b; k < e; ++k) pp[k] = sp[srcoff_[static_cast<std::size_t>(k)]];
        });
        const Tensor add = detail::scatter_add_map(picked, x.shape(), map_, false);
        const T* ap = add.data<T>();
        T* yp = y.data<T>();
        parallel_for(0, y.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t k = b; k < e; ++k) yp[k] += ap[k];
        });
      });
    }
    if (needs_input_grad(1)) {
      map = std::move(map_);
      srcoff = std::move(srcoff_);
    }
    return y;
  }
  // Note [Create graph]: dx = g and dsrc = g gathered through the map, recorded in grad mode.
  static constexpr bool kDifferentiableBackward = true;
  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    Tensors out(2);
    if (GradMode::is_enabled()) {
      if (needs_input_grad(0)) out[0] = g;
      if (needs_input_grad(1)) {
        std::vector<std::int64_t> back(static_cast<std::size_t>(shape_numel(src_shape)), -1);
        for (std::size_t k = 0; k < map.size(); ++k) back[static_cast<std::size_t>(srcoff[k])] = map[k];
        out[1] = detail::gather_map(op, g, src_shape, std::move(back), false);
      }
      return out;
    }
    if (needs_input_grad(0)) out[0] = g.clone_data();
    if (needs_input_grad(1)) {
      out[1] = Tensor::zeros(src_shape, g.dtype());
      dispatch(g.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* gp = g.data<T>();
        T* dp = out[1].data<T>();
        parallel_for(0, static_cast<std::int64_t>(map.size()), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t k = b; k < e; ++k)
            dp[srcoff[static_cast<std::size_t>(k)]] = gp[map[static_cast<std::size_t>(k)]];
        });
      });
    }
    return out;
  }
};

// map[r * inner + i] = rows[r] * inner + i: whole rows of x (of `inner` elements) in the given order.
void fill_row_map(std::vector<std::int64_t>& map, const std::vector<std::int64_t>& rows, std::int64_t inner) {
  parallel_for(0, static_cast<std::int64_t>(rows.size()),
               std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, inner)),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t r = b; r < e; ++r)
                   for (std::int64_t i = 0; i < inner; ++i)
                     map[static_cast<std::size_t>(r * inner + i)] = rows[static_cast<std::size_t>(r)] * inner + i;
               });
}

void check_float_pair(const char* op, const Tensor& x, const Tensor& src) {
  check_defined(op, x, "x");
  check_defined(op, src, "src");
  check_floating(op, "x", x);
  check_floating(op, "src", src);
  XGRAD_CHECK(x.dtype() == src.dtype(), "{}: dtype mismatch: x is {} {} but src is {} {}", op, x.dtype(),
              shape_str(x.shape()), src.dtype(), shape_str(src.shape()));
}

}  // namespace

// ---- gather family ------------------------------------------------------------------------------

Tensor detail::index_select_tensor(const Tensor& x, std::int64_t dim, const Tensor& index) {
  check_defined("index_select", x, "x");
  std::vector<std::int64_t> idx = index_values("index_select", "index", index, true);
  XGRAD_CHECK(index.dim() <= 1, "index_select: argument 'index' must be 0-d or 1-d, got shape {}",
              shape_str(index.shape()));
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("index_select", dim, s);
  if (s.empty()) {
    check_range("index_select", "index", idx, 1, a, s, false);
    return detail::gather_map("index_select", x, Shape(index.dim() == 1 ? 1 : 0, idx.size() == 1 ? 1 : 0),
                              std::vector<std::int64_t>(idx.size(), 0), false);
  }
  check_range("index_select", "index", idx, s[static_cast<std::size_t>(a)], a, s, false);
  return xgrad::index_select(x, a, idx);
}

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  check_defined("gather", x, "x");
  std::vector<std::int64_t> idx = index_values("gather", "index", index, false);
  const Shape& s = x.shape();
  const Shape& is = index.shape();
  const std::int64_t a = norm_dim("gather", dim, s);
  XGRAD_CHECK(is.size() == s.size() || (s.empty() && is.size() <= 1) || (is.empty() && s.size() <= 1),
              "gather: index of shape {} must have as many dims as x of shape {}", shape_str(is), shape_str(s));
  for (std::size_t d = 0; d < is.size() && is.size() == s.size(); ++d)
    XGRAD_CHECK(static_cast<std::int64_t>(d) == a || is[d] <= s[d],
                "gather: index of shape {} is larger than x of shape {} at dim {} (only dim {} may be larger)",
                shape_str(is), shape_str(s), d, a);
  if (is.size() != s.size()) {  // a 0-d / 1-element pairing: one position along the only dim
    const std::int64_t n = s.empty() ? 1 : s[0];
    check_range("gather", "index", idx, n, a, s, false);
    return detail::gather_map("gather", x, is, idx, false);
  }
  return gather_checked("gather", x, a, is, std::move(idx));
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<std::int64_t> dim) {
  check_defined("take_along_dim", x, "x");
  std::vector<std::int64_t> idx = index_values("take_along_dim", "indices", indices, false);
  if (!dim) {
    const Tensor flat = reshape(x, {x.numel()});
    check_range("take_along_dim", "indices", idx, x.numel(), 0, x.shape(), false);
    return detail::gather_map("take_along_dim", flat, {indices.numel()}, idx, false);
  }
  const Shape& s = x.shape();
  const Shape& is = indices.shape();
  XGRAD_CHECK(is.size() == s.size(), "take_along_dim: indices of shape {} must have as many dims as x of shape {}",
              shape_str(is), shape_str(s));
  const std::int64_t a = norm_dim("take_along_dim", *dim, s);
  if (s.empty()) return gather_checked("take_along_dim", x, 0, is, std::move(idx));
  // Broadcast x and indices against each other except along dim (torch's rule).
  Shape xs = s, ib = is;
  xs[static_cast<std::size_t>(a)] = is[static_cast<std::size_t>(a)];
  const Shape bshape = broadcast_shapes(xs, is, "take_along_dim");
  Shape xtarget = bshape;
  xtarget[static_cast<std::size_t>(a)] = s[static_cast<std::size_t>(a)];
  const Tensor xb = xtarget == s ? x : expand(x, xtarget);
  // the indices broadcast to bshape
  std::vector<std::int64_t> ibv(static_cast<std::size_t>(shape_numel(bshape)));
  const Shape istr = contiguous_strides(is);
  for (std::int64_t e = 0; e < static_cast<std::int64_t>(ibv.size()); ++e) {
    std::int64_t rem = e, off = 0;
    for (std::size_t d = bshape.size(); d-- > 0;) {
      const std::int64_t i = rem % bshape[d];
      rem /= bshape[d];
      if (is[d] != 1) off += i * istr[d];
    }
    ibv[static_cast<std::size_t>(e)] = idx[static_cast<std::size_t>(off)];
  }
  return gather_checked("take_along_dim", xb, a, bshape, std::move(ibv));
}

Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_float_pair("scatter_add", x, src);
  std::vector<std::int64_t> idx = index_values("scatter_add", "index", index, false);
  const Shape &s = x.shape(), &is = index.shape(), &ss = src.shape();
  XGRAD_CHECK(is.size() == s.size() && ss.size() == s.size(),
              "scatter_add: x {}, index {} and src {} must have the same number of dims", shape_str(s), shape_str(is),
              shape_str(ss));
  const std::int64_t a = norm_dim("scatter_add", dim, s);
  for (std::size_t d = 0; d < is.size(); ++d)
    XGRAD_CHECK(
        is[d] <= ss[d] && (static_cast<std::int64_t>(d) == a || is[d] <= s[d]),
        "scatter_add: index of shape {} must be no larger than src {} at every dim and than x {} except at dim {}",
        shape_str(is), shape_str(ss), shape_str(s), a);
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  check_range("scatter_add", "index", idx, n, a, s, false);
  std::vector<std::int64_t> map = gather_positions(s, a, is, idx);
  std::vector<std::int64_t> srcoff(idx.size());
  const Shape sstr = contiguous_strides(ss);
  for (std::size_t e = 0; e < idx.size(); ++e) srcoff[e] = offset_of(static_cast<std::int64_t>(e), is, sstr, is.size());
  return apply<ScatterAdd>(x, src, "scatter_add", std::move(map), std::move(srcoff));
}

Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_float_pair("index_add", x, src);
  std::vector<std::int64_t> idx = index_values("index_add", "index", index, true);
  XGRAD_CHECK(index.dim() <= 1, "index_add: argument 'index' must be 0-d or 1-d, got shape {}",
              shape_str(index.shape()));
  const Shape &s = x.shape(), &ss = src.shape();
  const std::int64_t a = norm_dim("index_add", dim, s);
  Shape want = s;
  if (!want.empty()) want[static_cast<std::size_t>(a)] = static_cast<std::int64_t>(idx.size());
  XGRAD_CHECK(ss == want || (s.empty() && src.numel() == static_cast<std::int64_t>(idx.size())),
              "index_add: src of shape {} must be x's shape {} with dim {} of size {} (the index's length)",
              shape_str(ss), shape_str(s), a, idx.size());
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  check_range("index_add", "index", idx, n, a, s, false);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (static_cast<std::int64_t>(d) < a) outer *= s[d];
    if (static_cast<std::int64_t>(d) > a) inner *= s[d];
  }
  if (src.numel() == 0) outer = inner = 0;
  const auto len = static_cast<std::int64_t>(idx.size());
  std::vector<std::int64_t> map(static_cast<std::size_t>(src.numel())), srcoff(map.size());
  std::iota(srcoff.begin(), srcoff.end(), std::int64_t{0});
  parallel_for(0, src.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t f) {
    for (std::int64_t e = b; e < f; ++e) {
      const std::int64_t i = e % inner, j = (e / inner) % len, o = e / (inner * len);
      map[static_cast<std::size_t>(e)] = (o * n + idx[static_cast<std::size_t>(j)]) * inner + i;
    }
  });
  return apply<ScatterAdd>(x, src, "index_add", std::move(map), std::move(srcoff));
}

Tensor index(const Tensor& x, const Tensor& idx) {
  check_defined("index", x, "x");
  check_defined("index", idx, "idx");
  const Shape& s = x.shape();
  if (idx.dtype() == kBool) {
    const Shape& ms = idx.shape();
    bool ok = ms.size() <= s.size();
    for (std::size_t d = 0; ok && d < ms.size(); ++d) ok = ms[d] == s[d];
    XGRAD_CHECK(ok, "index: the bool mask of shape {} must match the leading dims of x of shape {}", shape_str(ms),
                shape_str(s));
    const Shape rest(s.begin() + static_cast<std::ptrdiff_t>(ms.size()), s.end());
    const std::int64_t inner = shape_numel(rest);
    const bool* m = idx.data<bool>();
    std::vector<std::int64_t> rows;
    for (std::int64_t p = 0; p < idx.numel(); ++p)
      if (m[p]) rows.push_back(p);
    Shape out{static_cast<std::int64_t>(rows.size())};
    out.insert(out.end(), rest.begin(), rest.end());
    std::vector<std::int64_t> map(static_cast<std::size_t>(shape_numel(out)));
    fill_row_map(map, rows, inner);
    return detail::gather_map("index", x, out, std::move(map), true);
  }
  std::vector<std::int64_t> v = index_values("index", "idx", idx, true);
  XGRAD_CHECK(!s.empty(), "index: x is 0-d (shape ()): an integer index needs a dim to index");
  check_range("index", "idx", v, s[0], 0, s, true);
  Shape out = idx.shape();
  out.insert(out.end(), s.begin() + 1, s.end());
  checked_numel(out, "index", "idx");
  const std::int64_t inner = shape_numel(Shape(s.begin() + 1, s.end()));
  std::vector<std::int64_t> map(static_cast<std::size_t>(shape_numel(out)));
  fill_row_map(map, v, inner);
  std::vector<std::int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  return detail::gather_map("index", x, out, std::move(map), distinct);
}

// ---- arg-reductions, topk, sort -----------------------------------------------------------------
namespace {

// x seen as (outer, n, inner) along dim a (a 0-d tensor: 1, 1, 1).
struct Lines {
  std::int64_t outer = 1, n = 1, inner = 1;
};
Lines lines_of(const Shape& s, std::int64_t a) {
  Lines l;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (static_cast<std::int64_t>(d) < a)
      l.outer *= s[d];
    else if (static_cast<std::int64_t>(d) == a)
      l.n = s[d];
    else
      l.inner *= s[d];
  }
  return l;
}

// "a comes before b" in ascending order with NaN above every number (torch's sort order).
template <class T>
inline bool less_nan_last(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b != b) return a == a;
    if (a != a) return false;
  }
  return a < b;
}

// "v replaces the best so far w" for argmax / argmin: a NaN beats every number and then stays (NaN
// counts as both the maximum and the minimum, as torch); otherwise strictly larger / smaller, so
// the first of tied values is kept.
template <bool kMax, class T>
inline bool arg_beats(T v, T w) {
  if constexpr (std::is_floating_point_v<T>) {
    if (w != w) return false;
    if (v != v) return true;
  }
  return kMax ? w < v : v < w;
}

template <bool kMax>
Tensor arg_reduce(const char* op, const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  check_defined(op, x, "x");
  const Shape& s = x.shape();
  Shape out_shape;
  Lines l;
  if (dim) {
    const std::int64_t a = norm_dim(op, *dim, s);
    l = lines_of(s, a);
    XGRAD_CHECK(l.n > 0 || s.empty(), "{}: cannot reduce over dim {} of size 0 (x has shape {}): no position to return",
                op, a, shape_str(s));
    out_shape = s;
    if (!s.empty()) {
      if (keepdim)
        out_shape[static_cast<std::size_t>(a)] = 1;
      else
        out_shape.erase(out_shape.begin() + a);
    }
  } else {
    XGRAD_CHECK(x.numel() > 0, "{}: x of shape {} is empty: no position to return", op, shape_str(s));
    l.n = x.numel();
    if (keepdim) out_shape.assign(s.size(), 1);
  }
  Tensor y = Tensor::empty(out_shape, kInt64);
  std::int64_t* yp = y.data<std::int64_t>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    parallel_for(0, l.outer * l.inner, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, l.n)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t t = b; t < e; ++t) {
                     const T* p = xp + (t / l.inner) * l.n * l.inner + t % l.inner;
                     std::int64_t best = 0;
                     for (std::int64_t j = 1; j < l.n; ++j)
                       if (arg_beats<kMax>(p[j * l.inner], p[best * l.inner])) best = j;
                     yp[t] = best;
                   }
                 });
  });
  return y;
}

// Stable order of every line along dim a: positions (int64, x's shape with dim a of size k).
Tensor sorted_positions(const char* op, const Tensor& x, std::int64_t a, std::int64_t k, bool descending) {
  const Shape& s = x.shape();
  const Lines l = lines_of(s, a);
  Shape out_shape = s;
  if (!s.empty()) out_shape[static_cast<std::size_t>(a)] = k;
  Tensor pos = Tensor::empty(out_shape, kInt64);
  std::int64_t* pp = pos.data<std::int64_t>();
  if (pos.numel() == 0) return pos;
  dispatch(
      x.dtype(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = x.data<T>();
        parallel_for(
            0, l.outer * l.inner, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, l.n * 8)),
            [&](std::int64_t b, std::int64_t e) {
              std::vector<std::int64_t> order(static_cast<std::size_t>(l.n));
              for (std::int64_t t = b; t < e; ++t) {
                const std::int64_t o = t / l.inner, i = t % l.inner;
                const T* p = xp + o * l.n * l.inner + i;
                std::iota(order.begin(), order.end(), std::int64_t{0});
                auto cmp = [&](std::int64_t u, std::int64_t v) {
                  return descending ? less_nan_last(p[v * l.inner], p[u * l.inner])
                                    : less_nan_last(p[u * l.inner], p[v * l.inner]);
                };
                if (k < l.n)
                  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t u, std::int64_t v) {
                    return cmp(u, v) || (!cmp(v, u) && u < v);  // ties by position: stable
                  });
                else
                  std::stable_sort(order.begin(), order.end(), cmp);
                for (std::int64_t j = 0; j < k; ++j) pp[(o * k + j) * l.inner + i] = order[static_cast<std::size_t>(j)];
              }
            });
      },
      op);
  return pos;
}

// (x taken at the positions along dim a, the positions): values differentiable through gather_map.
std::tuple<Tensor, Tensor> take_sorted(const char* op, const Tensor& x, std::int64_t a, const Tensor& pos) {
  const Shape& s = x.shape();
  const Lines l = lines_of(s, a);
  const std::int64_t k = s.empty() ? 1 : pos.shape()[static_cast<std::size_t>(a)];
  std::vector<std::int64_t> map(static_cast<std::size_t>(pos.numel()));
  const std::int64_t* pp = pos.data<std::int64_t>();
  parallel_for(0, pos.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const std::int64_t i = q % l.inner, o = q / (l.inner * k);
      map[static_cast<std::size_t>(q)] = (o * l.n + pp[q]) * l.inner + i;
    }
  });
  return {detail::gather_map(op, x, pos.shape(), std::move(map), true), pos};
}

// torch.max(x, dim) / torch.min(x, dim): the values are x taken at the indices (the first arg-max /
// arg-min along dim), so the gradient goes to that one element, as torch's (Note [Tie rules] in
// ops/reduction.cpp: max(x, axes), torch.amax, shares it among ties instead).
template <bool kMax>
std::tuple<Tensor, Tensor> extremum_with_indices(const char* op, const Tensor& x, std::int64_t dim, bool keepdim) {
  check_defined(op, x, "x");
  check_floating(op, "x", x);
  const Tensor pos = arg_reduce<kMax>(op, x, dim, true);
  const std::int64_t a = norm_dim(op, dim, x.shape());
  auto [v, i] = take_sorted(op, x, a, pos);
  if (keepdim || x.dim() == 0) return {v, i};
  Shape out = x.shape();
  out.erase(out.begin() + a);
  return {reshape(v, out), reshape(i, out)};
}

}  // namespace

Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_reduce<true>("argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_reduce<false>("argmin", x, dim, keepdim);
}

std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_with_indices<true>("max", x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_with_indices<false>("min", x, dim, keepdim);
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted (a valid order for sorted = false too)
  check_defined("topk", x, "x");
  check_floating("topk", "x", x);
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("topk", dim, s);
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  XGRAD_CHECK(k >= 0 && k <= n, "topk: k = {} is out of range for dim {} of size {} (x has shape {})", k, a, n,
              shape_str(s));
  const Tensor pos = sorted_positions("topk", x, a, k, largest);
  return take_sorted("topk", x, a, pos);
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim, bool descending, bool stable) {
  (void)stable;  // always stable
  check_defined("sort", x, "x");
  check_floating("sort", "x", x);
  const Shape& s = x.shape();
  const std::int64_t a = norm_dim("sort", dim, s);
  const std::int64_t n = s.empty() ? 1 : s[static_cast<std::size_t>(a)];
  const Tensor pos = sorted_positions("sort", x, a, n, descending);
  return take_sorted("sort", x, a, pos);
}

Tensor nonzero(const Tensor& x) {
  check_defined("nonzero", x, "x");
  const Shape& s = x.shape();
  const std::int64_t total = x.numel();
  constexpr std::int64_t kChunk = kParallelGrain;
  const std::int64_t chunks = (total + kChunk - 1) / kChunk;
  std::vector<std::int64_t> count(static_cast<std::size_t>(chunks) + 1, 0);
  std::vector<std::uint8_t> nz(static_cast<std::size_t>(total));
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    parallel_for(0, chunks, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c) {
        std::int64_t cnt = 0;
        for (std::int64_t i = c * kChunk; i < std::min(total, (c + 1) * kChunk); ++i) {
          nz[static_cast<std::size_t>(i)] = xp[i] != T(0);
          cnt += nz[static_cast<std::size_t>(i)];
        }
        count[static_cast<std::size_t>(c) + 1] = cnt;
      }
    });
  });
  for (std::size_t c = 0; c < static_cast<std::size_t>(chunks); ++c) count[c + 1] += count[c];
  const auto nd = static_cast<std::int64_t>(s.size());
  Tensor y = Tensor::empty({count.back(), nd}, kInt64);
  std::int64_t* yp = y.data<std::int64_t>();
  parallel_for(0, chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t r = count[static_cast<std::size_t>(c)];
      for (std::int64_t i = c * kChunk; i < std::min(total, (c + 1) * kChunk); ++i) {
        if (!nz[static_cast<std::size_t>(i)]) continue;
        std::int64_t rem = i;
        for (std::int64_t d = nd; d-- > 0;) {
          yp[r * nd + d] = rem % s[static_cast<std::size_t>(d)];
          rem /= s[static_cast<std::size_t>(d)];
        }
        ++r;
      }
    }
  });
  return y;
}

Tensor one_hot(const Tensor& labels, std::int64_t num_classes) {
  const std::vector<std::int64_t> v = index_values("one_hot", "labels", labels, false);
  XGRAD_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or >= 0, got {}", num_classes);
  std::int64_t c = num_classes;
  if (c == -1) {
    XGRAD_CHECK(!v.empty(), "one_hot: cannot infer num_classes from empty labels of shape {}; pass num_classes",
                shape_str(labels.shape()));
    c = checked_add(*std::max_element(v.begin(), v.end()), 1, "one_hot", "labels");
  }
  for (std::size_t e = 0; e < v.size(); ++e)
    XGRAD_CHECK(v[e] >= 0 && v[e] < c, "one_hot: label {} (element {} of 'labels') is out of range for {} classes",
                v[e], e, c);
  Shape out = labels.shape();
  out.push_back(c);
  // a num_classes too large for this machine is refused naming it, not by the anonymous allocation
  check_host_memory(
      checked_nbytes(checked_numel(out, "one_hot", "num_classes"), sizeof(std::int64_t), "one_hot", "num_classes"),
      "one_hot", "num_classes");
  Tensor y = Tensor::zeros(out, kInt64);
  std::int64_t* yp = y.data<std::int64_t>();
  parallel_for(0, static_cast<std::int64_t>(v.size()), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) yp[i * c + v[static_cast<std::size_t>(i)]] = 1;
  });
  return y;
}

}  // namespace xgrad
