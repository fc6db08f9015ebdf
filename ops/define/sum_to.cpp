#include "xgrad/ops/define/sum_to.hpp"

#include <algorithm>
#include <vector>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad::detail {

namespace {
constexpr std::int64_t kChunk = 4096;  // fixed summation chunk (thread-count independent)

template <class T>
T sum_contiguous(const T* p, std::int64_t n) {
  // Eight independent accumulators: vectorises, and the order is fixed by n alone.
  T acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += p[i];
  return s;
}

template <class T>
T sum_long(const T* p, std::int64_t n) {
  return deterministic_sum<T>(0, n, kChunk,
                              [&](std::int64_t b, std::int64_t e) { return sum_contiguous(p + b, e - b); });
}

template <class T>
void sum_kernel(const T* in, T* out, const Shape& shape, const std::vector<bool>& reduced) {
  const auto nd = shape.size();
  // Merge into (outer kept) x (middle reduced) x (inner kept) when the reduced axes are contiguous.
  std::int64_t first = -1, last = -1;
  for (std::size_t d = 0; d < nd; ++d)
    if (reduced[d]) {
      if (first < 0) first = static_cast<std::int64_t>(d);
      last = static_cast<std::int64_t>(d);
    }
  bool contiguous_block = first >= 0;
  for (std::int64_t d = first; d >= 0 && d <= last; ++d)
    if (!reduced[static_cast<std::size_t>(d)] && shape[static_cast<std::size_t>(d)] != 1) contiguous_block = false;
  if (contiguous_block) {
    std::int64_t outer = 1, mid = 1, inner = 1;
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(nd); ++d) {
      const auto s = shape[static_cast<std::size_t>(d)];
      if (d < first)
        outer *= s;
      else if (d <= last)
        mid *= s;
      else
        inner *= s;
    }
    if (inner == 1) {
      if (outer == 1) {
        out[0] = sum_long(in, mid);
        return;
      }
      parallel_for(0, outer, grain_for(mid), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) out[o] = sum_contiguous(in + o * mid, mid);
      });
      return;
    }
    // Column sums: for each (outer, inner) accumulate over mid in increasing order.
    const std::int64_t rows = outer * inner;
    parallel_for(0, rows, std::max<std::int64_t>(64, kParallelGrain / std::max<std::int64_t>(mid, 1)),
                 [&](std::int64_t b, std::int64_t e) {
                   // process per outer block to keep inner contiguous
                   std::int64_t r = b;
                   while (r < e) {
                     const std::int64_t o = r / inner;
                     const std::int64_t i0 = r % inner;
                     const std::int64_t i1 = std::min(inner, i0 + (e - r));
                     T* dst = out + o * inner;
                     const T* src = in + o * mid * inner;
                     for (std::int64_t i = i0; i < i1; ++i) dst[i] = src[i];
                     for (std::int64_t m = 1; m < mid; ++m) {
                       const T* row = src + m * inner;
                       for (std::int64_t i = i0; i < i1; ++i) dst[i] += row[i];
                     }
                     r += i1 - i0;
                   }
                 });
    return;
  }
  // General case: precompute offsets of the reduced sub-indices, then one gather-sum per output.
  const Shape strides = contiguous_strides(shape);
  std::vector<std::int64_t> roffs{0};
  for (std::size_t d = 0; d < nd; ++d) {
    if (!reduced[d]) continue;
    std::vector<std::int64_t> next;
    next.reserve(roffs.size() * static_cast<std::size_t>(shape[d]));
    for (auto base : roffs)
      for (std::int64_t k = 0; k < shape[d]; ++k) next.push_back(base + k * strides[d]);
    roffs.swap(next);
  }
  Shape kept_shape, kept_strides;
  for (std::size_t d = 0; d < nd; ++d)
    if (!reduced[d]) {
      kept_shape.push_back(shape[d]);
      kept_strides.push_back(strides[d]);
    }
  const std::int64_t nout = shape_numel(kept_shape);
  const auto nr = static_cast<std::int64_t>(roffs.size());
  parallel_for(0, nout, grain_for(nr), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      std::int64_t rem = o, base = 0;
      for (std::size_t k = kept_shape.size(); k-- > 0;) {
        base += (rem % kept_shape[k]) * kept_strides[k];
        rem /= kept_shape[k];
      }
      T s = 0;
      for (std::int64_t r = 0; r < nr; ++r) s += in[base + roffs[static_cast<std::size_t>(r)]];
      out[o] = s;
    }
  });
}
}  // namespace

Tensor sum_keepdim(const Tensor& x, const std::vector<std::int64_t>& axes) {
  Shape out_shape = x.shape();
  std::vector<bool> reduced(out_shape.size(), false);
  for (auto a : axes) {
    reduced[static_cast<std::size_t>(a)] = true;
    out_shape[static_cast<std::size_t>(a)] = 1;
  }
  Tensor out = Tensor::empty(out_shape, x.dtype());
  if (out.numel() == 0) return out;
  if (x.numel() == 0) return out.fill_(0.0);
  if (axes.empty()) {
    std::copy_n(static_cast<const char*>(x.raw_data()), x.nbytes(), static_cast<char*>(out.raw_data()));
    return out;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_kernel<T>(x.data<T>(), out.data<T>(), x.shape(), reduced);
  });
  return out;
}

namespace {
// The axes of g summed to reach `shape` (broadcasting's rules backwards).
std::vector<std::int64_t> sum_to_axes(const Shape& from, const Shape& shape) {
  const auto lead = from.size() - shape.size();
  std::vector<std::int64_t> axes;
  for (std::size_t d = 0; d < from.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) axes.push_back(static_cast<std::int64_t>(d));
  return axes;
}

// `sum_to` (Note [Fused ops]): the kernel sums into a keepdim buffer and views it with the target
// shape; the formula is the same sum, recorded.
struct SumTo {
  static constexpr const char* kName = "sum_to";
  static Tensor kernel(const Tensor& g, const Shape& shape) {
    return alias_with_shape(sum_keepdim(g, sum_to_axes(g.shape(), shape)), shape);
  }
  static Tensor formula(const Tensor& g, const Shape& shape) {
    return reshape(sum(g, sum_to_axes(g.shape(), shape), /*keepdim=*/true), shape);
  }
};
}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  return apply_fused<SumTo>(g, shape);
}

}  // namespace xgrad::detail
