#include "xgrad/ops/kernels/pool_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail::pool {

namespace {

// Planes per task: about kParallelGrain window reads.
std::int64_t grain(const Geometry& g, std::int64_t window) { return grain_for(g.out_len() * window); }

// The common 2 x 2 window with stride 2, no padding and no dilation, every window inside the plane
// (torch's MaxPool2d(2) on even or odd sizes): the general loop's result (same visiting order, same
// rule: a larger value or a NaN takes the place), without its per-window bookkeeping and branches.
bool is_two_by_two(const Geometry& g) {
  auto regular = [](const Axis& a) {
    if (a.step != 1) return false;
    for (std::int64_t o = 0; o < a.out; ++o)
      if (a.count[static_cast<std::size_t>(o)] != 2 || a.first[static_cast<std::size_t>(o)] != 2 * o) return false;
    return true;
  };
  return regular(g.h) && regular(g.w);
}

template <class T>
void pool_two_by_two(const Geometry& g, const T* src, T* out, std::int64_t* argmax) {
  // Locals, not g's members: the int64 stores into argmax could alias them and block vectorisation.
  const std::int64_t W = g.w.in, OW = g.w.out, OH = g.h.out;
  for (std::int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = src + 2 * oh * W;
    const T* r1 = r0 + W;
    T* yo = out + oh * OW;
    std::int64_t* ao = argmax + oh * OW;
    const std::int64_t row0 = 2 * oh * W;
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      // The first candidate always takes the place (it is > -inf, or NaN, or -inf itself).
      T best = r0[2 * ow];
      std::int64_t off = 0;
      const T v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
      const bool t1 = (v1 > best) | (v1 != v1);
      best = t1 ? v1 : best;
      off = t1 ? 1 : off;
      const bool t2 = (v2 > best) | (v2 != v2);
      best = t2 ? v2 : best;
      off = t2 ? W : off;
      const bool t3 = (v3 > best) | (v3 != v3);
      best = t3 ? v3 : best;
      off = t3 ? W + 1 : off;
      yo[ow] = best;
      ao[ow] = row0 + 2 * ow + off;
    }
  }
}

}  // namespace

template <class T>
void max_pool_forward(const Geometry& geo, const T* x, T* y, std::int64_t* argmax) {
  const std::int64_t window = (geo.h.count.empty() ? 1 : geo.h.count[0]) * (geo.w.count.empty() ? 1 : geo.w.count[0]);
  const bool two_by_two = is_two_by_two(geo);
  parallel_for(0, geo.planes, grain(geo, window), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* src = x + pl * geo.in_len();
      if (two_by_two) {
        pool_two_by_two(geo, src, y + pl * geo.out_len(), argmax + pl * geo.out_len());
        continue;
      }
      for (std::int64_t oh = 0; oh < geo.h.out; ++oh)
        for (std::int64_t ow = 0; ow < geo.w.out; ++ow) {
          const std::int64_t o = pl * geo.out_len() + oh * geo.w.out + ow;
          T best = -std::numeric_limits<T>::infinity();
          std::int64_t idx = -1;
          if (geo.h.count[oh] > 0 && geo.w.count[ow] > 0) idx = geo.h.first[oh] * geo.w.in + geo.w.first[ow];
          for (std::int64_t i = 0; i < geo.h.count[oh]; ++i) {
            const std::int64_t r = (geo.h.first[oh] + i * geo.h.step) * geo.w.in;
            for (std::int64_t j = 0; j < geo.w.count[ow]; ++j) {
              const std::int64_t at = r + geo.w.first[ow] + j * geo.w.step;
              const T v = src[at];
              if (v > best || std::isnan(v)) {
                best = v;
                idx = at;
              }
            }
          }
          y[o] = best;
          argmax[o] = idx;
        }
    }
  });
}

// Serial within a plane (windows may overlap), planes in parallel: deterministic.
template <class T>
void max_pool_scatter(const Geometry& geo, const std::int64_t* argmax, const T* g, T* dx) {
  parallel_for(0, geo.planes, grain(geo, 1), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl)
      for (std::int64_t o = pl * geo.out_len(); o < (pl + 1) * geo.out_len(); ++o) {
        const std::int64_t at = argmax[o];
        if (at >= 0) dx[pl * geo.in_len() + at] += g[o];
      }
  });
}

template <class T>
void max_pool_gather(const Geometry& geo, const std::int64_t* argmax, const T* x, T* y) {
  parallel_for(0, geo.planes, grain(geo, 1), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl)
      for (std::int64_t o = pl * geo.out_len(); o < (pl + 1) * geo.out_len(); ++o) {
        const std::int64_t at = argmax[o];
        y[o] = at >= 0 ? x[pl * geo.in_len() + at] : T(0);
      }
  });
}

template <class T>
void avg_pool_forward(const AvgSpec& spec, const T* x, T* y) {
  const Geometry& geo = spec.geo;
  parallel_for(0, geo.planes, grain(geo, 4), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* src = x + pl * geo.in_len();
      for (std::int64_t oh = 0; oh < geo.h.out; ++oh)
        for (std::int64_t ow = 0; ow < geo.w.out; ++ow) {
          T* out = y + pl * geo.out_len() + oh * geo.w.out + ow;
          if (geo.h.count[oh] == 0 || geo.w.count[ow] == 0) {
            *out = T(0);
            continue;
          }
          T sum = 0;
          for (std::int64_t i = 0; i < geo.h.count[oh]; ++i) {
            const T* row = src + (geo.h.first[oh] + i) * geo.w.in + geo.w.first[ow];
            for (std::int64_t j = 0; j < geo.w.count[ow]; ++j) sum += row[j];
          }
          *out = sum / static_cast<T>(spec.divisor(oh, ow));
        }
    }
  });
}

// Out of line in this file, as it was in ops/pool.cpp: inlined into its one caller
// (apply<AvgPoolBackward>) GCC 12 compiled its loops to more instructions (valgrind).
template <class T>
void avg_pool_adjoint(const AvgSpec& spec, const T* g, T* dx) {
  const Geometry& geo = spec.geo;
  parallel_for(0, geo.planes, grain(geo, 4), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      T* dst = dx + pl * geo.in_len();
      for (std::int64_t oh = 0; oh < geo.h.out; ++oh)
        for (std::int64_t ow = 0; ow < geo.w.out; ++ow) {
          if (geo.h.count[oh] == 0 || geo.w.count[ow] == 0) continue;
          const T d = g[pl * geo.out_len() + oh * geo.w.out + ow] / static_cast<T>(spec.divisor(oh, ow));
          for (std::int64_t i = 0; i < geo.h.count[oh]; ++i) {
            T* row = dst + (geo.h.first[oh] + i) * geo.w.in + geo.w.first[ow];
            for (std::int64_t j = 0; j < geo.w.count[ow]; ++j) row[j] += d;
          }
        }
    }
  });
}

XGRAD_INSTANTIATE_FLOATING(max_pool_forward);
XGRAD_INSTANTIATE_FLOATING(max_pool_scatter);
XGRAD_INSTANTIATE_FLOATING(max_pool_gather);
XGRAD_INSTANTIATE_FLOATING(avg_pool_forward);
XGRAD_INSTANTIATE_FLOATING(avg_pool_adjoint);

}  // namespace xgrad::detail::pool
