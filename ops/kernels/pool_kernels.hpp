#pragma once
// Internal: the window loops behind ops/pool.cpp (max and average pooling, their adaptive forms, and
// their backward). A pooled tensor is seen as `planes` contiguous planes of h.in x w.in values (a 1-d
// pool has a trivial h axis); the output as planes of h.out x w.out. Planes run in parallel, a plane's
// windows in order within one task, so the results do not depend on the thread count. Instantiated for
// float and double.
#include <cstdint>
#include <vector>

namespace xgrad::detail::pool {

/// The windows of one axis: per output position, the first input position in range, how many
/// positions in range, the spacing, and the window's size counting padding (for count_include_pad).
/// Built by ops/pool.cpp (max, average and adaptive windows).
struct Axis {
  std::int64_t in = 1, out = 1, step = 1;
  std::vector<std::int64_t> first, count, padded;
};

/// `planes` planes, windows along h then w.
struct Geometry {
  std::int64_t planes = 0;
  Axis h, w;
  std::int64_t in_len() const { return h.in * w.in; }
  std::int64_t out_len() const { return h.out * w.out; }
};

/// Average pooling: divisor per output = override, or the product of the axes' padded sizes
/// (count_include_pad) or of their in-range counts.
struct AvgSpec {
  Geometry geo;
  bool include_pad = true;
  std::int64_t override_div = 0;  // 0: none

  double divisor(std::int64_t oh, std::int64_t ow) const {
    if (override_div != 0) return static_cast<double>(override_div);
    return include_pad ? static_cast<double>(geo.h.padded[oh] * geo.w.padded[ow])
                       : static_cast<double>(geo.h.count[oh] * geo.w.count[ow]);
  }
};

/// Max pooling of x (planes x in_len) into y (planes x out_len): each output the largest value of its
/// window (a NaN takes the place; -inf for an empty window), and in argmax its flat index in its plane
/// (the first of equal maxima in window order, the last NaN when there are NaNs; -1 for an empty
/// window).
template <class T>
void max_pool_forward(const Geometry& geo, const T* x, T* y, std::int64_t* argmax);

/// The backward of max pooling: dx[plane, argmax[o]] += g[o] for every output o of the plane (an empty
/// window, -1, gets nothing). dx (planes x in_len) must hold zeros or values to add to.
template <class T>
void max_pool_scatter(const Geometry& geo, const std::int64_t* argmax, const T* g, T* dx);

/// Its adjoint: y[o] = x[plane, argmax[o]] (0 for an empty window); y is planes x out_len.
template <class T>
void max_pool_gather(const Geometry& geo, const std::int64_t* argmax, const T* x, T* y);

/// Average pooling of x (planes x in_len) into y (planes x out_len): each output the sum of its
/// window's in-range values (in row order) over its divisor; 0 for an empty window.
template <class T>
void avg_pool_forward(const AvgSpec& spec, const T* x, T* y);

/// The adjoint of avg_pool_forward: every in-range position of each window gets its output's gradient
/// over its divisor, added into dx (planes x in_len; zeros or values to add to).
template <class T>
void avg_pool_adjoint(const AvgSpec& spec, const T* g, T* dx);

}  // namespace xgrad::detail::pool
