#include "xgrad/ops/kernels/loss_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"

namespace xgrad::detail {

// The loops of Note [Loss kernels] (ops/loss.cpp).

namespace {

// ---- pointwise regression losses ---------------------------------------------------------------
using Pointwise = PointwiseLossKind;

// l(d) and dl/dd for d = input - target; p is huber's delta or smooth_l1's beta (> 0). The
// branches are torch's (aten/src/ATen/native/cpu/*Kernel.cpp), so values agree at the kinks.
template <Pointwise K, class T>
inline T pointwise_value(T d, T p) {
  if constexpr (K == Pointwise::mse) {
    return d * d;
  } else if constexpr (K == Pointwise::l1) {
    return std::abs(d);
  } else if constexpr (K == Pointwise::huber) {
    const T z = std::abs(d);
    return z < p ? T(0.5) * z * z : p * (z - T(0.5) * p);
  } else {
    const T z = std::abs(d);
    return z < p ? T(0.5) * z * z / p : z - T(0.5) * p;
  }
}

template <Pointwise K, class T>
inline T pointwise_deriv(T d, T p) {
  if constexpr (K == Pointwise::mse) {
    return T(2) * d;
  } else if constexpr (K == Pointwise::l1) {
    return static_cast<T>((d > 0) - (d < 0));
  } else if constexpr (K == Pointwise::huber) {
    return d < -p ? -p : (d > p ? p : d);
  } else {
    return d < -p ? T(-1) : (d > p ? T(1) : d / p);
  }
}

template <Pointwise K, class T>
double pointwise_forward_pass(std::int64_t n, const T* x, const T* t, T pt, T* y) {
  if (y) {
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) y[i] = pointwise_value<K>(x[i] - t[i], pt);
    });
    return 0;
  }
  return deterministic_sum<double>(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    double s = 0;
    for (std::int64_t i = b; i < e; ++i) s += static_cast<double>(pointwise_value<K>(x[i] - t[i], pt));
    return s;
  });
}

template <Pointwise K, class T>
void pointwise_backward_pass(std::int64_t n, const T* x, const T* t, T pt, const GradScale<T>& sc, T* dx, T* dt) {
  // Branch-free inner loops (they vectorise): the seed's form and the outputs are chosen outside.
  T* first = dx ? dx : dt;
  const T sign = dx ? T(1) : T(-1);
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    if (sc.g) {
      for (std::int64_t i = b; i < e; ++i) first[i] = sign * sc.g[i] * pointwise_deriv<K>(x[i] - t[i], pt);
    } else {
      const T f = sign * sc.s;
      for (std::int64_t i = b; i < e; ++i) first[i] = f * pointwise_deriv<K>(x[i] - t[i], pt);
    }
    if (dx && dt)
      for (std::int64_t i = b; i < e; ++i) dt[i] = -dx[i];
  });
}

// ---- class-index losses ----------------------------------------------------------------------------

// Samples per task: about kParallelGrain scores. Fixed (thread-count independent) chunks.
std::int64_t sample_chunk(const ClassGeometry& g) { return grain_for(g.classes); }

// ---- binary cross-entropy with logits ------------------------------------------------------------
template <class T>
inline T softplus_neg(T x) {  // log(1 + exp(-x)), stable for any x
  return std::max(-x, T(0)) + std::log1p(std::exp(-std::abs(x)));
}

// Elements are processed in blocks of kBceBlock with xsimd (exp and log1p dominate the cost): the
// block's pos_weight values (w[i % P], or ones) and seed values are first gathered into aligned
// buffers so one branch-free vector loop serves every case. Per Note [Vector tails] an element's
// value does not depend on where its block starts, so the thread split cannot change results.
constexpr std::int64_t kBceBlock = 256;  // divides kParallelGrain: reduction chunks hold whole blocks

template <class T>
void gather_pos_weight(const T* w, std::int64_t P, std::int64_t begin, std::int64_t len, T* out) {
  if (w == nullptr) {
    std::fill(out, out + len, T(1));
    return;
  }
  std::int64_t j = begin % P;
  for (std::int64_t k = 0; k < len; ++k) {
    out[k] = w[j];
    if (++j == P) j = 0;
  }
}

template <class T>
inline simd::default_batch<T> softplus_neg(simd::default_batch<T> x) {
  using B = simd::default_batch<T>;
  return xsimd::max(-x, B(T(0))) + xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
}

}  // namespace

template <class T>
double pointwise_loss_forward(PointwiseLossKind kind, std::int64_t n, const T* x, const T* t, T p, T* y) {
  switch (kind) {
    case Pointwise::mse:
      return pointwise_forward_pass<Pointwise::mse>(n, x, t, p, y);
    case Pointwise::l1:
      return pointwise_forward_pass<Pointwise::l1>(n, x, t, p, y);
    case Pointwise::huber:
      return pointwise_forward_pass<Pointwise::huber>(n, x, t, p, y);
    case Pointwise::smooth_l1:
      return pointwise_forward_pass<Pointwise::smooth_l1>(n, x, t, p, y);
  }
  return 0;
}

template <class T>
void pointwise_loss_backward(PointwiseLossKind kind, std::int64_t n, const T* x, const T* t, T p,
                             const GradScale<T>& sc, T* dx, T* dt) {
  switch (kind) {
    case Pointwise::mse:
      return pointwise_backward_pass<Pointwise::mse>(n, x, t, p, sc, dx, dt);
    case Pointwise::l1:
      return pointwise_backward_pass<Pointwise::l1>(n, x, t, p, sc, dx, dt);
    case Pointwise::huber:
      return pointwise_backward_pass<Pointwise::huber>(n, x, t, p, sc, dx, dt);
    case Pointwise::smooth_l1:
      return pointwise_backward_pass<Pointwise::smooth_l1>(n, x, t, p, sc, dx, dt);
  }
}

template <class T>
double cross_entropy_forward(const ClassGeometry& geo, const std::int64_t* target, std::int64_t ignore_index,
                             double eps, const T* z, T* stats, T* y) {
  using B = simd::default_batch<T>;
  const std::int64_t ns = geo.samples(), C = geo.classes, inner = geo.inner;
  const T keep = static_cast<T>(1 - eps), spread = static_cast<T>(eps / static_cast<double>(C));
  return deterministic_sum<double>(0, ns, sample_chunk(geo), [&](std::int64_t b, std::int64_t e) {
    double acc = 0;
    for (std::int64_t s = b; s < e; ++s) {
      const std::int64_t cls = target[s];
      if (cls == ignore_index) {
        if (stats) stats[2 * s] = stats[2 * s + 1] = 0;
        if (y) y[s] = 0;
        continue;
      }
      const T* zr = z + geo.offset(s);
      T m, se, sz = 0;
      if (inner == 1) {
        m = vec_max(zr, C);
        const B mb(m);
        se = vec_sum(
            C, static_cast<T*>(nullptr), [&](B v) { return xsimd::exp(v - mb); }, zr);
        if (eps != 0)
          sz = vec_sum(
              C, static_cast<T*>(nullptr), [](B v) { return v; }, zr);
      } else {
        m = zr[0];
        for (std::int64_t c = 1; c < C; ++c) m = std::max(m, zr[c * inner]);
        se = 0;
        for (std::int64_t c = 0; c < C; ++c) {
          se += std::exp(zr[c * inner] - m);
          sz += zr[c * inner];
        }
      }
      const T log_se = std::log(se);
      // l = lse - z_y with lse = m + log_se; with smoothing (1 - eps)(lse - z_y) + eps (lse - mean_c z_c).
      T l = (m - zr[cls * inner]) + log_se;
      if (eps != 0) l = log_se + keep * (m - zr[cls * inner]) + static_cast<T>(eps) * m - spread * sz;
      if (stats) {
        stats[2 * s] = m;
        stats[2 * s + 1] = log_se;
      }
      if (y) y[s] = l;
      acc += static_cast<double>(l);
    }
    return acc;
  });
}

template <class T>
void cross_entropy_backward(const ClassGeometry& geo, const std::int64_t* target, std::int64_t ignore, double smoothing,
                            const T* z, const T* stats, const GradScale<T>& sc, T* dz) {
  using B = simd::default_batch<T>;
  const std::int64_t ns = geo.samples(), C = geo.classes, inner = geo.inner;
  const T keep = static_cast<T>(1 - smoothing), spread = static_cast<T>(smoothing / static_cast<double>(C));
  parallel_for(0, ns, sample_chunk(geo), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t s = b; s < e; ++s) {
      const std::int64_t off = geo.offset(s);
      const std::int64_t cls = target[s];
      T* dr = dz + off;
      if (cls == ignore) {
        for (std::int64_t c = 0; c < C; ++c) dr[c * inner] = 0;
        continue;
      }
      const T* zr = z + off;
      const T w = sc(s), m = stats[2 * s], ls = stats[2 * s + 1];
      if (inner == 1) {
        const B mb(m), lb(ls), wb(w), sb(spread);
        vec_map(
            C, dr, [&](B v) { return (xsimd::exp((v - mb) - lb) - sb) * wb; }, zr);
      } else {
        for (std::int64_t c = 0; c < C; ++c) dr[c * inner] = (std::exp((zr[c * inner] - m) - ls) - spread) * w;
      }
      dr[cls * inner] -= keep * w;
    }
  });
}

// One read per sample, so this runs serially (in sample order: deterministic).
template <class T>
double nll_forward(const ClassGeometry& geo, const std::int64_t* target, std::int64_t ignore_index, const T* p, T* y) {
  double total = 0;
  for (std::int64_t s = 0; s < geo.samples(); ++s) {
    const std::int64_t cls = target[s];
    const T l = cls == ignore_index ? T(0) : -p[geo.offset(s) + cls * geo.inner];
    if (y) y[s] = l;
    total += static_cast<double>(l);
  }
  return total;
}

template <class T>
void nll_scatter(const ClassGeometry& geo, const std::int64_t* target, std::int64_t ignore, const T* wp,
                 bool per_sample, T* dp) {
  for (std::int64_t s = 0; s < geo.samples(); ++s) {
    const std::int64_t cls = target[s];
    if (cls != ignore) dp[geo.offset(s) + cls * geo.inner] = -(per_sample ? wp[s] : wp[0]);
  }
}

template <class T>
void class_mask(std::int64_t samples, const std::int64_t* target, std::int64_t ignore, T* mp) {
  for (std::int64_t s = 0; s < samples; ++s) mp[s] = target[s] == ignore ? 0 : 1;
}

template <class T>
double bce_with_logits_forward(std::int64_t n, const T* x, const T* t, const T* w, std::int64_t P, T* y) {
  using B = simd::default_batch<T>;
  // l = (1 - t) x + (1 + (w - 1) t) softplus(-x) for elements [i, i + len) into dst.
  auto block = [&](std::int64_t i, std::int64_t len, T* dst) {
    alignas(64) T wb[kBceBlock];
    gather_pos_weight(w, P, i, len, wb);
    vec_map(
        len, dst,
        [](B xv, B tv, B wv) {
          const B one(T(1));
          return (one - tv) * xv + (one + (wv - one) * tv) * softplus_neg<T>(xv);
        },
        x + i, t + i, +wb);
  };
  if (y) {
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; i += kBceBlock) block(i, std::min(kBceBlock, e - i), y + i);
    });
    return 0;
  }
  return deterministic_sum<double>(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    double s = 0;
    alignas(64) T buf[kBceBlock];
    for (std::int64_t i = b; i < e; i += kBceBlock) {
      const std::int64_t len = std::min(kBceBlock, e - i);
      block(i, len, buf);
      for (std::int64_t k = 0; k < len; ++k) s += static_cast<double>(buf[k]);
    }
    return s;
  });
}

template <class T>
void bce_with_logits_backward(std::int64_t n, const T* x, const T* t, const T* w, std::int64_t P,
                              const GradScale<T>& sc, T* dx, T* dt, T* dw) {
  using B = simd::default_batch<T>;
  if (dx || dt) {
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      alignas(64) T wb[kBceBlock], sb[kBceBlock];
      for (std::int64_t i = b; i < e; i += kBceBlock) {
        const std::int64_t len = std::min(kBceBlock, e - i);
        gather_pos_weight(w, P, i, len, wb);
        if (sc.g)
          std::copy(sc.g + i, sc.g + i + len, sb);
        else
          std::fill(sb, sb + len, sc.s);
        if (dx)
          vec_map(
              len, dx + i,
              [](B xv, B tv, B wv, B sv) {
                const B one(T(1));
                const B sig = one / (one + xsimd::exp(-xv));
                return sv * ((one + (wv - one) * tv) * sig - wv * tv);
              },
              x + i, t + i, +wb, +sb);
        if (dt)
          vec_map(
              len, dt + i, [](B xv, B wv, B sv) { return sv * ((wv - B(T(1))) * softplus_neg<T>(xv) - xv); }, x + i,
              +wb, +sb);
      }
    });
  }
  if (dw) {
    // A scatter onto P entries: serial, in element order (deterministic; rarely needed).
    for (std::int64_t i = 0; i < n; ++i) dw[i % P] += sc(i) * t[i] * softplus_neg(x[i]);
  }
}

XGRAD_INSTANTIATE_FLOATING(pointwise_loss_forward);
XGRAD_INSTANTIATE_FLOATING(pointwise_loss_backward);
XGRAD_INSTANTIATE_FLOATING(cross_entropy_forward);
XGRAD_INSTANTIATE_FLOATING(cross_entropy_backward);
XGRAD_INSTANTIATE_FLOATING(nll_forward);
XGRAD_INSTANTIATE_FLOATING(nll_scatter);
XGRAD_INSTANTIATE_FLOATING(class_mask);
XGRAD_INSTANTIATE_FLOATING(bce_with_logits_forward);
XGRAD_INSTANTIATE_FLOATING(bce_with_logits_backward);

}  // namespace xgrad::detail
