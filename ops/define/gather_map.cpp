#include "xgrad/ops/define/gather_map.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/parallel.hpp"

namespace xgrad::detail {

namespace {

// Note [Deterministic scatter]: the transpose of a gather adds g[o] into dx[map[o]]. With repeated
// indices two tasks could add into one dx element, in an order that depends on scheduling. Instead
// the map is inverted into CSR form (for each i, the o with map[o] == i in increasing order, built
// serially), and each dx[i] is summed by one task in that order. An injective map needs no
// inversion: every dx element is written at most once.
template <class T>
void scatter_kernel(const T* g, T* dx, std::int64_t nx, const std::vector<std::int64_t>& map, bool injective) {
  const auto n = static_cast<std::int64_t>(map.size());
  if (injective) {
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) {
        const std::int64_t i = map[static_cast<std::size_t>(o)];
        if (i >= 0) dx[i] = g[o];
      }
    });
    return;
  }
  std::vector<std::int64_t> start(static_cast<std::size_t>(nx) + 1, 0);
  for (auto i : map)
    if (i >= 0) ++start[static_cast<std::size_t>(i) + 1];
  for (std::size_t i = 0; i < static_cast<std::size_t>(nx); ++i) start[i + 1] += start[i];
  std::vector<std::int64_t> next(start.begin(), start.end() - 1), list(static_cast<std::size_t>(start.back()));
  for (std::int64_t o = 0; o < n; ++o) {
    const std::int64_t i = map[static_cast<std::size_t>(o)];
    if (i >= 0) list[static_cast<std::size_t>(next[static_cast<std::size_t>(i)]++)] = o;
  }
  const std::int64_t per = std::max<std::int64_t>(1, start.back() / std::max<std::int64_t>(1, nx));
  parallel_for(0, nx, grain_for(per), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      T s = 0;
      for (std::int64_t k = start[static_cast<std::size_t>(i)]; k < start[static_cast<std::size_t>(i) + 1]; ++k)
        s += g[list[static_cast<std::size_t>(k)]];
      dx[i] = s;
    }
  });
}

// y[o] = x[map[o]] (or fill); the map is shared with the backward ops a create_graph backward records.
using SharedMap = std::shared_ptr<const std::vector<std::int64_t>>;

template <class T>
void gather_kernel(const T* xp, T* yp, std::int64_t n, const std::int64_t* mp, T f) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) yp[o] = mp[o] >= 0 ? xp[mp[o]] : f;
  });
}

Tensor gather_raw(const Tensor& x, const Shape& out_shape, const std::vector<std::int64_t>& map, double fill) {
  Tensor y = Tensor::empty(out_shape, x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) {  // any dtype: a copy (only float inputs get gradients)
    using T = typename decltype(tag)::type;
    gather_kernel<T>(x.data<T>(), y.data<T>(), y.numel(), map.data(), convert_value<T>(fill));
  });
  return y;
}

struct GatherMapBackward;

struct GatherMap : Function<GatherMap> {
  static constexpr const char* kName = "gather_map";
  // Note [Create graph]: through the transpose (GatherMapBackward), whose backward is this op.
  static constexpr bool kDifferentiableBackward = true;
  const char* op = kName;  // the public op's name (a string literal), for messages and the tape
  Shape x_shape;
  SharedMap map;
  bool injective = false;
  const char* name() const override { return op; }
  Tensor forward(const Tensor& x, const char* op_, const Shape& out_shape, SharedMap map_, bool injective_,
                 double fill) {
    op = op_;
    x_shape = x.shape();
    injective = injective_;
    Tensor y = gather_raw(x, out_shape, *map_, fill);
    if (needs_input_grad(0)) map = std::move(map_);
    return y;
  }
  Tensors backward(const Tensors& grads);
};

// The backward of gather_map as an op of its own, so that a create_graph backward records it:
// y = zeros(x_shape) with g[o] added at map[o] (Note [Deterministic scatter]); its backward is the
// gather through the same map. Named after the public op, "<op>_backward".
struct GatherMapBackward : Function<GatherMapBackward> {
  static constexpr const char* kName = "gather_map_backward";
  static constexpr bool kDifferentiableBackward = true;
  std::string op_name;
  const char* op = kName;
  Shape g_shape;
  SharedMap map;
  bool injective = false;
  const char* name() const override { return op_name.c_str(); }
  Tensor forward(const Tensor& g, const char* op_, const Shape& x_shape, SharedMap map_, bool injective_) {
    op = op_;
    injective = injective_;
    Tensor dx = scatter_add_map(g, x_shape, *map_, injective);
    if (needs_input_grad(0)) {  // a node: its name and what its own backward reads
      op_name = std::string(op_) + "_backward";
      g_shape = g.shape();
      map = std::move(map_);
    }
    return dx;
  }
  Tensors backward(const Tensors& grads) {
    return {xgrad::apply<GatherMap>(grads[0], op, g_shape, map, injective, 0.0)};
  }
};

Tensors GatherMap::backward(const Tensors& grads) {
  return {xgrad::apply<GatherMapBackward>(grads[0], op, x_shape, map, injective)};
}

}  // namespace

Tensor scatter_add_map(const Tensor& g, const Shape& x_shape, const std::vector<std::int64_t>& map, bool injective) {
  Tensor dx = Tensor::zeros(x_shape, g.dtype());
  if (dx.numel() == 0 || map.empty()) return dx;
  dispatch(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<T>(g.data<T>(), dx.data<T>(), dx.numel(), map, injective);
  });
  return dx;
}

Tensor gather_map(const char* op, const Tensor& x, const Shape& out_shape, std::vector<std::int64_t> map,
                  bool injective, double fill) {
  return apply<GatherMap>(x, op, out_shape, std::make_shared<const std::vector<std::int64_t>>(std::move(map)),
                          injective, fill);
}

Tensor scatter_map(const char* op, const Tensor& g, const Shape& x_shape, std::vector<std::int64_t> map,
                   bool injective) {
  return scatter_map(op, g, x_shape, std::make_shared<const std::vector<std::int64_t>>(std::move(map)), injective);
}

Tensor scatter_map(const char* op, const Tensor& g, const Shape& x_shape, SharedMap map, bool injective) {
  return apply<GatherMapBackward>(g, op, x_shape, std::move(map), injective);
}

std::vector<std::int64_t> separable_map(const Shape& in_shape, const Shape& out_shape,
                                        const std::vector<std::vector<std::int64_t>>& src) {
  const std::int64_t n = shape_numel(out_shape);
  std::vector<std::int64_t> map(static_cast<std::size_t>(n));
  if (n == 0) return map;
  const Shape in_strides = contiguous_strides(in_shape);
  const std::size_t nd = out_shape.size();
  if (nd == 0) {
    map[0] = 0;
    return map;
  }
  const std::int64_t len = out_shape.back();
  const auto& last = src.back();
  const std::int64_t last_stride = in_strides.back();
  const std::int64_t rows = n / len;
  parallel_for(0, rows, grain_for(len), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rem = r, base = 0;
      bool fill = false;
      for (std::size_t d = nd - 1; d-- > 0;) {
        const std::int64_t s = src[d][static_cast<std::size_t>(rem % out_shape[d])];
        rem /= out_shape[d];
        if (s < 0) fill = true;
        base += s * in_strides[d];
      }
      std::int64_t* out = map.data() + r * len;
      for (std::int64_t j = 0; j < len; ++j) {
        const std::int64_t s = last[static_cast<std::size_t>(j)];
        out[j] = fill || s < 0 ? -1 : base + s * last_stride;
      }
    }
  });
  return map;
}

}  // namespace xgrad::detail
