#pragma once
// Internal: an N-ary elementwise map with NumPy broadcasting, used by the elementwise ops and
// their backward passes. Each output element is written by one task: deterministic.
#include <array>
#include <utility>

#include "xgrad/core/parallel.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad::detail {

/// Output shape of broadcasting all `shapes` together (error names `op`).
template <std::size_t K>
Shape broadcast_all(const std::array<const Shape*, K>& shapes, const char* op) {
  Shape out = *shapes[0];
  for (std::size_t k = 1; k < K; ++k) out = broadcast_shapes(out, *shapes[k], op);
  return out;
}

/// out[i] = f(in_0[bcast(i)], ..., in_{K-1}[bcast(i)]) for every element i of `out_shape`. The
/// output's element type O may differ from the inputs' T (comparisons write bool).
template <class T, std::size_t K, class F, class O>
void broadcast_map(O* out, const Shape& out_shape, const std::array<const T*, K>& in,
                   const std::array<const Shape*, K>& in_shapes, F&& f) {
  const std::int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  bool all_same = true;
  for (std::size_t k = 0; k < K; ++k) all_same = all_same && (*in_shapes[k] == out_shape);
  if (all_same) {
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) out[i] = [&]<std::size_t... I>(std::index_sequence<I...>) {
          return f(in[I][i]...);
        }
      (std::make_index_sequence<K>{});
    });
    return;
  }
  const auto nd = out_shape.size();
  std::array<Shape, K> strides;
  for (std::size_t k = 0; k < K; ++k) {
    const Shape& s = *in_shapes[k];
    const Shape cs = contiguous_strides(s);
    strides[k].assign(nd, 0);
    const auto lead = nd - s.size();
    for (std::size_t d = lead; d < nd; ++d) strides[k][d] = s[d - lead] == 1 ? 0 : cs[d - lead];
  }
  const std::int64_t inner = nd ? out_shape[nd - 1] : 1;
  const std::int64_t rows = n / inner;
  std::array<std::int64_t, K> inner_stride{};
  for (std::size_t k = 0; k < K; ++k) inner_stride[k] = nd ? strides[k][nd - 1] : 0;
  parallel_for(0, rows, grain_for(inner), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      std::array<std::int64_t, K> off{};
      std::int64_t rem = r;
      for (std::size_t d = nd - 1; d-- > 0;) {
        const std::int64_t idx = rem % out_shape[d];
        rem /= out_shape[d];
        for (std::size_t k = 0; k < K; ++k) off[k] += idx * strides[k][d];
      }
      O* o = out + r * inner;
      for (std::int64_t i = 0; i < inner; ++i) o[i] = [&]<std::size_t... I>(std::index_sequence<I...>) {
          return f(in[I][off[I] + i * inner_stride[I]]...);
        }
      (std::make_index_sequence<K>{});
    }
  });
}

}  // namespace xgrad::detail
