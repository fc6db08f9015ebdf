#include "xgrad/ops/kernels/norm_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail::norm {

namespace {

// Note [Lane sums]: batch_norm's per-channel sums (in double) run over kLanes interleaved partial
// sums: element j of each row goes to lane j mod kLanes (the row's tail to lanes 0, 1, ...), and the
// lanes are added in a fixed tree at the end. One running double sum is a chain of dependent adds
// (about 4 cycles each); eight independent ones vectorise. The order is fixed by the shapes, and one
// task owns a channel, so the results do not depend on the thread count.
constexpr std::int64_t kLanes = 8;
struct LaneSum {
  double a[kLanes] = {};
  double total() const { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }
};

template <class T>
void lane_add(LaneSum& s, const T* p, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) s.a[l] += static_cast<double>(p[j + l]);
  for (std::int64_t l = 0; j < n; ++j, ++l) s.a[l] += static_cast<double>(p[j]);
}

// s += (p - mu)^2
template <class T>
void lane_add_sq_dev(LaneSum& s, const T* p, std::int64_t n, double mu) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const double d = static_cast<double>(p[j + l]) - mu;
      s.a[l] += d * d;
    }
  for (std::int64_t l = 0; j < n; ++j, ++l) {
    const double d = static_cast<double>(p[j]) - mu;
    s.a[l] += d * d;
  }
}

// sg += g, sgx += g (x - mu)
template <class T>
void lane_add_g_gx(LaneSum& sg, LaneSum& sgx, const T* g, const T* x, std::int64_t n, double mu) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const double gv = static_cast<double>(g[j + l]);
      sg.a[l] += gv;
      sgx.a[l] += gv * (static_cast<double>(x[j + l]) - mu);
    }
  for (std::int64_t l = 0; j < n; ++j, ++l) {
    const double gv = static_cast<double>(g[j]);
    sg.a[l] += gv;
    sgx.a[l] += gv * (static_cast<double>(x[j]) - mu);
  }
}

}  // namespace

// ---- batch_norm ----------------------------------------------------------------------------------

template <class T>
void batch_norm_forward(const Geometry& geo, const T* x, const T* weight, const T* bias, const T* running_mean,
                        const T* running_var, bool training, double eps, T* y, double* mean, double* invstd,
                        double* batch_var) {
  const std::int64_t C = geo.c, S = geo.s, M = geo.n * geo.s;
  const T* xp = x;
  T* yp = y;
  const T* wp = weight;
  const T* bp = bias;
  const T* rm = running_mean;
  const T* rv = running_var;
  parallel_for(0, C, grain_for(2 * M), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      double mu = 0, var = 0;
      if (training) {
        if (M == 0) continue;
        LaneSum sum, sq;  // Note [Lane sums]
        for (std::int64_t i = 0; i < geo.n; ++i) lane_add(sum, xp + (i * C + c) * S, S);
        mu = sum.total() / static_cast<double>(M);
        for (std::int64_t i = 0; i < geo.n; ++i) lane_add_sq_dev(sq, xp + (i * C + c) * S, S, mu);
        var = sq.total() / static_cast<double>(M);
        if (batch_var != nullptr) batch_var[c] = var;
      } else {
        mu = static_cast<double>(rm[c]);
        var = static_cast<double>(rv[c]);
      }
      const double r = 1.0 / std::sqrt(var + eps);
      mean[c] = mu;
      invstd[c] = r;
      const double scale = wp ? static_cast<double>(wp[c]) * r : r;
      const double shift = bp ? static_cast<double>(bp[c]) : 0.0;
      for (std::int64_t i = 0; i < geo.n; ++i) {
        const T* row = xp + (i * C + c) * S;
        T* out = yp + (i * C + c) * S;
        for (std::int64_t j = 0; j < S; ++j)
          out[j] = static_cast<T>((static_cast<double>(row[j]) - mu) * scale + shift);
      }
    }
  });
}

// The same closed forms as the op's recorded formula, in one pass over each channel's lanes.
template <class T>
void batch_norm_backward(const Geometry& geo, const T* g, const T* x, const T* weight, const double* mean,
                         const double* invstd, bool training, T* dx, T* dw, T* db) {
  const std::int64_t C = geo.c, S = geo.s, M = geo.n * geo.s;
  const T* gp = g;
  const T* xp = x;
  const T* wp = weight;
  T* dxp = dx;
  parallel_for(0, C, grain_for(2 * M), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const double mu = mean[c], r = invstd[c];
      LaneSum lg, lgx;  // sum g, sum g * (x - mu) (Note [Lane sums])
      for (std::int64_t i = 0; i < geo.n; ++i) {
        const T* grow = gp + (i * C + c) * S;
        if (xp)
          lane_add_g_gx(lg, lgx, grow, xp + (i * C + c) * S, S, mu);
        else
          lane_add(lg, grow, S);
      }
      const double sg = lg.total(), sgx = lgx.total();
      if (dw != nullptr) dw[c] = static_cast<T>(sgx * r);
      if (db != nullptr) db[c] = static_cast<T>(sg);
      if (dxp == nullptr) continue;
      const double k = wp ? static_cast<double>(wp[c]) * r : r;
      for (std::int64_t i = 0; i < geo.n; ++i) {
        const T* grow = gp + (i * C + c) * S;
        const T* xrow = xp + (i * C + c) * S;
        T* drow = dxp + (i * C + c) * S;
        if (training) {
          const double mg = sg / static_cast<double>(M), mgx = sgx * r * r / static_cast<double>(M);
          for (std::int64_t j = 0; j < S; ++j)
            drow[j] =
                static_cast<T>(k * (static_cast<double>(grow[j]) - mg - (static_cast<double>(xrow[j]) - mu) * mgx));
        } else {
          for (std::int64_t j = 0; j < S; ++j) drow[j] = static_cast<T>(k * static_cast<double>(grow[j]));
        }
      }
    }
  });
}

// ---- group_norm ----------------------------------------------------------------------------------

template <class T>
void group_norm_forward(const Geometry& geo, std::int64_t groups, const T* x, const T* weight, const T* bias,
                        double eps, T* y, double* mean, double* rstd) {
  const std::int64_t C = geo.c, S = geo.s, K = C / groups, M = K * S, blocks = geo.n * groups;
  const T* xp = x;
  T* yp = y;
  const T* wp = weight;
  const T* bp = bias;
  parallel_for(0, blocks, grain_for(2 * M), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      if (M == 0) continue;
      const T* xb = xp + b * M;  // (sample, group) b is contiguous: K channels of S values
      double mu = 0, var = 0;
      for (std::int64_t j = 0; j < M; ++j) mu += static_cast<double>(xb[j]);
      mu /= static_cast<double>(M);
      for (std::int64_t j = 0; j < M; ++j) {
        const double d = static_cast<double>(xb[j]) - mu;
        var += d * d;
      }
      var /= static_cast<double>(M);
      const double r = 1.0 / std::sqrt(var + eps);
      mean[b] = mu;
      rstd[b] = r;
      const std::int64_t c_first = (b % groups) * K;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t c = c_first + k;
        const double scale = wp ? static_cast<double>(wp[c]) * r : r;
        const double shift = bp ? static_cast<double>(bp[c]) : 0.0;
        const T* xr = xb + k * S;
        T* out = yp + b * M + k * S;
        for (std::int64_t j = 0; j < S; ++j) out[j] = static_cast<T>((static_cast<double>(xr[j]) - mu) * scale + shift);
      }
    }
  });
}

// The same closed forms as the op's recorded formula, in one pass over each group's block.
template <class T>
void group_norm_backward(const Geometry& geo, std::int64_t groups, const T* g, const T* x, const T* weight,
                         const double* mean, const double* rstd, T* dx, T* dw, T* db) {
  const bool need_x = dx != nullptr, need_w = dw != nullptr, need_b = db != nullptr;
  const std::int64_t N = geo.n, C = geo.c, S = geo.s, K = C / groups, M = K * S, blocks = N * groups;
  // Per (sample, channel): sum of g * xh and of g, summed over the samples afterwards.
  std::vector<double> pw(need_w ? static_cast<std::size_t>(N * C) : 0),
      pb(need_b ? static_cast<std::size_t>(N * C) : 0);
  const T* gp = g;
  const T* xp = x;
  const T* wp = weight;
  parallel_for(0, blocks, grain_for(3 * M), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const double mu = mean[b], r = rstd[b];
      const std::int64_t c_first = (b % groups) * K, n = b / groups;
      const T* gb = gp + b * M;
      const T* xb = xp ? xp + b * M : nullptr;
      double sd = 0, sdx = 0;  // sum of gw = g * w, sum of gw * xh
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t c = c_first + k;
        const double w = wp ? static_cast<double>(wp[c]) : 1.0;
        double sg = 0, sgx = 0;
        for (std::int64_t j = 0; j < S; ++j) {
          const double gv = static_cast<double>(gb[k * S + j]);
          sg += gv;
          if (xb) sgx += gv * (static_cast<double>(xb[k * S + j]) - mu) * r;
        }
        if (need_w) pw[static_cast<std::size_t>(n * C + c)] = sgx;
        if (need_b) pb[static_cast<std::size_t>(n * C + c)] = sg;
        sd += w * sg;
        sdx += w * sgx;
      }
      if (!need_x) continue;
      const double md = sd / static_cast<double>(M), mdx = sdx / static_cast<double>(M);
      T* db_ = dx + b * M;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t c = c_first + k;
        const double w = wp ? static_cast<double>(wp[c]) : 1.0;
        for (std::int64_t j = 0; j < S; ++j) {
          const double xh = (static_cast<double>(xb[k * S + j]) - mu) * r;
          db_[k * S + j] = static_cast<T>(r * (w * static_cast<double>(gb[k * S + j]) - md - xh * mdx));
        }
      }
    }
  });
  if (need_w || need_b)
    parallel_for(0, C, grain_for(N), [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t c = c0; c < c1; ++c) {
        double aw = 0, ab = 0;
        for (std::int64_t n = 0; n < N; ++n) {
          if (need_w) aw += pw[static_cast<std::size_t>(n * C + c)];
          if (need_b) ab += pb[static_cast<std::size_t>(n * C + c)];
        }
        if (need_w) dw[c] = static_cast<T>(aw);
        if (need_b) db[c] = static_cast<T>(ab);
      }
    });
}

XGRAD_INSTANTIATE_FLOATING(batch_norm_forward);
XGRAD_INSTANTIATE_FLOATING(batch_norm_backward);
XGRAD_INSTANTIATE_FLOATING(group_norm_forward);
XGRAD_INSTANTIATE_FLOATING(group_norm_backward);

}  // namespace xgrad::detail::norm
