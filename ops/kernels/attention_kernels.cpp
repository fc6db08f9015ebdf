// The loops of scaled_dot_product_attention (ops/attention.cpp, Note [Attention kernel]): the
// materialising kernels (per problem, the scores and their masked softmax rows, the dropout, and the
// products) and the fused ones (per tile, with an online softmax in the forward and the tiles
// recomputed from the row logsumexp in the backward). Every task writes rows no other task writes,
// so results do not depend on the thread count.
#include "xgrad/ops/kernels/attention_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/ceil_div.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/vec_kernel.hpp"

namespace xgrad::detail {

namespace {

// Problems per task: enough work (L S (E + Ev + 4) per problem) that a task pays for itself.
std::int64_t grain(const AttentionSizes& geo) {
  const std::int64_t work = geo.l * geo.s * (geo.e + geo.ev + 4) + 1;
  return grain_for(work);
}

// Masks the scores st (lr x sc, leading dimension ld) of problem b's rows l0 ... l0 + lr - 1 and
// columns s0 ... s0 + sc - 1: -inf where a bool mask is false or causal hides s > l, a float mask added.
template <class T>
void mask_tile(const AttentionMask<T>& mask, std::int64_t b, std::int64_t l0, std::int64_t lr, std::int64_t s0,
               std::int64_t sc, T* st, std::int64_t ld) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (std::int64_t r = 0; r < lr; ++r) {
    T* row = st + r * ld;
    const std::int64_t l = l0 + r;
    if (mask.bool_mask != nullptr || mask.float_mask != nullptr) {
      const std::int64_t mrow = mask.base[b] + l * mask.row_stride + s0 * mask.col_stride;
      if (mask.bool_mask != nullptr) {
        for (std::int64_t c = 0; c < sc; ++c)
          if (!mask.bool_mask[mrow + c * mask.col_stride]) row[c] = ninf;
      } else {
        for (std::int64_t c = 0; c < sc; ++c) row[c] += mask.float_mask[mrow + c * mask.col_stride];
      }
    }
    if (mask.causal)
      for (std::int64_t c = std::max<std::int64_t>(l + 1 - s0, 0); c < sc; ++c) row[c] = ninf;
  }
}

}  // namespace

template <class T>
void attention_keep(const AttentionDropout<T>& drop, std::uint64_t index0, std::int64_t count, std::uint8_t* keep) {
  // Entry i is word i % 4 of block i / 4: kPhiloxLanes blocks at a time cover 4 kPhiloxLanes entries.
  std::uint32_t w[4][kPhiloxLanes];
  std::int64_t j = 0;
  while (j < count) {
    const std::uint64_t block = (index0 + static_cast<std::uint64_t>(j)) / 4;
    philox_lanes(drop.key, drop.first + block, w);
    const std::uint64_t end = 4 * (block + kPhiloxLanes);
    for (; j < count && index0 + static_cast<std::uint64_t>(j) < end; ++j) {
      const std::uint64_t e = index0 + static_cast<std::uint64_t>(j) - 4 * block;
      keep[j] = w[e % 4][e / 4] >= drop.threshold ? 1 : 0;
    }
  }
}

template <class T>
void attention_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                       const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* p, T* pd, T* out) {
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev;
  const bool dropout = drop.on;
  const T keep_scale = drop.keep_scale;
  const T ninf = -std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  parallel_for(0, B, grain(n), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<std::uint8_t> keep(dropout ? static_cast<std::size_t>(S) : 0);
    for (std::int64_t b = b0; b < b1; ++b) {
      T* pb = p + b * L * S;
      if (L > 0 && S > 0) {
        detail::blas::gemm<T>(false, true, L, S, E, scale, q + b * L * E, E, k + b * S * E, E, T(0), pb, S);
        mask_tile(mask, b, 0, L, 0, S, pb, S);
      }
      for (std::int64_t l = 0; l < L; ++l) {
        T* row = pb + l * S;
        T mx = ninf;
        bool has_nan = false;
        for (std::int64_t s = 0; s < S; ++s) {
          has_nan |= std::isnan(row[s]);
          mx = std::max(mx, row[s]);
        }
        if (S > 0 && (mx == ninf || has_nan)) {  // every key masked, or a NaN: torch's softmax gives NaN
          std::fill(row, row + S, nan);
          continue;
        }
        T sum = 0;
        for (std::int64_t s = 0; s < S; ++s) {
          row[s] = std::exp(row[s] - mx);
          sum += row[s];
        }
        for (std::int64_t s = 0; s < S; ++s) row[s] /= sum;
      }
      if (dropout) {
        T* pdb = pd + b * L * S;
        for (std::int64_t l = 0; l < L; ++l) {
          attention_keep(drop, static_cast<std::uint64_t>((b * L + l) * S), S, keep.data());
          for (std::int64_t s = 0; s < S; ++s)
            pdb[l * S + s] = keep[static_cast<std::size_t>(s)] ? pb[l * S + s] * keep_scale : T(0);
        }
      }
      if (L > 0 && Ev > 0)
        detail::blas::gemm<T>(false, false, L, Ev, S, T(1), pd + b * L * S, S, v + b * S * Ev, Ev, T(0),
                              out + b * L * Ev, Ev);
    }
  });
}

template <class T>
void attention_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* p, T scale,
                        const AttentionDropout<T>& drop, const T* g, const T* gw, T* dq, T* dk, T* dv, T* da_full) {
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev;
  const bool need_q = dq != nullptr, need_k = dk != nullptr, need_v = dv != nullptr, need_m = da_full != nullptr;
  const bool need_a = need_q || need_k || need_m;
  const bool dropout = drop.on;
  const T keep_scale = drop.keep_scale;
  parallel_for(0, B, grain(n), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<T> pd_buf(dropout && need_v ? static_cast<std::size_t>(L * S) : 0);
    std::vector<T> da_buf(need_a && !need_m ? static_cast<std::size_t>(L * S) : 0);
    std::vector<std::uint8_t> keep(dropout ? static_cast<std::size_t>(S) : 0);
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* pb = p + b * L * S;
      const T* gb = g + b * L * Ev;
      if (need_v && S > 0 && Ev > 0) {
        const T* pdb = pb;
        if (dropout) {
          for (std::int64_t l = 0; l < L; ++l) {
            attention_keep(drop, static_cast<std::uint64_t>((b * L + l) * S), S, keep.data());
            for (std::int64_t s = 0; s < S; ++s)
              pd_buf[static_cast<std::size_t>(l * S + s)] =
                  keep[static_cast<std::size_t>(s)] ? pb[l * S + s] * keep_scale : T(0);
          }
          pdb = pd_buf.data();
        }
        detail::blas::gemm<T>(true, false, S, Ev, L, T(1), pdb, S, gb, Ev, T(0), dv + b * S * Ev, Ev);
      }
      if (!need_a) continue;
      T* da = need_m ? da_full + b * L * S : da_buf.data();
      if (L > 0 && S > 0) {
        // dP' = G V^T (+ GW)
        if (gw) std::copy(gw + b * L * S, gw + (b + 1) * L * S, da);
        detail::blas::gemm<T>(false, true, L, S, Ev, T(1), gb, Ev, v + b * S * Ev, Ev, gw ? T(1) : T(0), da, S);
      }
      for (std::int64_t l = 0; l < L; ++l) {
        T* row = da + l * S;
        const T* prow = pb + l * S;
        if (dropout) {
          attention_keep(drop, static_cast<std::uint64_t>((b * L + l) * S), S, keep.data());
          for (std::int64_t s = 0; s < S; ++s) row[s] = keep[static_cast<std::size_t>(s)] ? row[s] * keep_scale : T(0);
        }
        T dot = 0;
        for (std::int64_t s = 0; s < S; ++s) dot += row[s] * prow[s];
        for (std::int64_t s = 0; s < S; ++s) row[s] = prow[s] * (row[s] - dot);
      }
      if (need_q && L > 0 && E > 0)
        detail::blas::gemm<T>(false, false, L, E, S, scale, da, S, k + b * S * E, E, T(0), dq + b * L * E, E);
      if (need_k && S > 0 && E > 0)
        detail::blas::gemm<T>(true, false, S, E, L, scale, da, S, q + b * L * E, E, T(0), dk + b * S * E, E);
    }
  });
}

template <class T>
void attention_fused_forward(const AttentionSizes& n, const T* q, const T* k, const T* v, T scale,
                             const AttentionMask<T>& mask, const AttentionDropout<T>& drop, T* out, T* lse) {
  const bool sparse = mask.layout_crow != nullptr;
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev, R = sparse ? mask.tile : kAttentionTile;
  const std::int64_t tiles_l = (L + R - 1) / R, tiles_s = (S + R - 1) / R;
  const T ninf = -std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T keep_scale = drop.keep_scale;
  // The keys a query tile sees (on average over the layout's rows).
  const std::int64_t keys = sparse ? R * ceil_div(mask.layout_crow[tiles_l], std::max<std::int64_t>(1, tiles_l)) : S;
  const std::int64_t work = R * keys * (E + Ev + 4) + 1;
  parallel_for(0, B * tiles_l, grain_for(work), [&](std::int64_t t0, std::int64_t t1) {
    std::vector<T> st(static_cast<std::size_t>(R * R)), m(static_cast<std::size_t>(R)),
        sum(static_cast<std::size_t>(R));
    std::vector<std::uint8_t> bad(static_cast<std::size_t>(R)), keep(static_cast<std::size_t>(R));
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / tiles_l, l0 = (t % tiles_l) * R, lr = std::min(R, L - l0);
      T* o = out + (b * L + l0) * Ev;
      std::fill(o, o + lr * Ev, T(0));
      std::fill(m.begin(), m.end(), ninf);
      std::fill(sum.begin(), sum.end(), T(0));
      std::fill(bad.begin(), bad.end(), std::uint8_t{0});
      const std::int64_t i = t % tiles_l, first = sparse ? mask.layout_crow[i] : 0;
      const std::int64_t count = sparse ? mask.layout_crow[i + 1] - first : tiles_s;
      for (std::int64_t jj = 0; jj < count; ++jj) {
        const std::int64_t j = sparse ? mask.layout_col[first + jj] : jj;
        const std::int64_t s0 = j * R, sc = std::min(R, S - s0);
        if (mask.causal && s0 > l0 + lr - 1) break;  // every later key is hidden from every row of the tile
        detail::blas::gemm<T>(false, true, lr, sc, E, scale, q + (b * L + l0) * E, E, k + (b * S + s0) * E, E, T(0),
                              st.data(), R);
        mask_tile(mask, b, l0, lr, s0, sc, st.data(), R);
        for (std::int64_t r = 0; r < lr; ++r) {
          T* row = st.data() + r * R;
          const auto ri = static_cast<std::size_t>(r);
          T mt = ninf;
          bool has_nan = false;
          for (std::int64_t c = 0; c < sc; ++c) {
            has_nan |= std::isnan(row[c]);
            mt = std::max(mt, row[c]);
          }
          bad[ri] |= has_nan ? 1 : 0;
          const T mn = std::max(m[ri], mt);
          if (bad[ri] || mn == ninf) {  // a NaN row, or every key so far masked: this tile adds nothing
            std::fill(row, row + sc, T(0));
            continue;
          }
          if (mn != m[ri]) {  // the running max grows: rescale what was summed under the old one
            const T alpha = std::exp(m[ri] - mn);
            sum[ri] *= alpha;
            for (std::int64_t c = 0; c < Ev; ++c) o[r * Ev + c] *= alpha;
            m[ri] = mn;
          }
          // exp(a - m) in place, vectorised, and its sum (Note [Vector tails] in vec_kernel.hpp: the bits
          // depend on the tile's width only).
          const simd::default_batch<T> mb(mn);
          sum[ri] += vec_sum<T>(
              sc, row, [&mb](auto x) { return xsimd::exp(x - mb); }, row);
          if (drop.on) {
            attention_keep(drop, static_cast<std::uint64_t>((b * L + l0 + r) * S + s0), sc, keep.data());
            for (std::int64_t c = 0; c < sc; ++c)
              row[c] = keep[static_cast<std::size_t>(c)] ? row[c] * keep_scale : T(0);
          }
        }
        detail::blas::gemm<T>(false, false, lr, Ev, sc, T(1), st.data(), R, v + (b * S + s0) * Ev, Ev, T(1), o, Ev);
      }
      for (std::int64_t r = 0; r < lr; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        T* orow = o + r * Ev;
        T& out_lse = lse[b * L + l0 + r];
        if (S == 0) {
          out_lse = ninf;  // no keys: the output is the empty sum 0
        } else if (bad[ri] || m[ri] == ninf) {
          std::fill(orow, orow + Ev, nan);
          out_lse = nan;
        } else {
          for (std::int64_t c = 0; c < Ev; ++c) orow[c] /= sum[ri];
          out_lse = m[ri] + std::log(sum[ri]);
        }
      }
    }
  });
}

template <class T>
void attention_fused_backward(const AttentionSizes& n, const T* q, const T* k, const T* v, const T* out, const T* lse,
                              T scale, const AttentionMask<T>& mask, const AttentionDropout<T>& drop, const T* g, T* dq,
                              T* dk, T* dv, T* ds_full) {
  const bool sparse = mask.layout_crow != nullptr;
  const std::int64_t B = n.b, L = n.l, S = n.s, E = n.e, Ev = n.ev, R = sparse ? mask.tile : kAttentionTile;
  const std::int64_t tiles_l = (L + R - 1) / R, tiles_s = (S + R - 1) / R;
  const T keep_scale = drop.keep_scale;
  // The tiles a (problem, tile) task visits: all, or the layout's row (query tiles: its key tiles; key
  // tiles: the transpose's row, its query tiles).
  const auto tiles_of = [&](bool query_tile, std::int64_t i, std::int64_t& first, std::int64_t& count) {
    const std::int64_t* crow = query_tile ? mask.layout_crow : mask.layout_tcrow;
    first = sparse ? crow[i] : 0;
    count = sparse ? crow[i + 1] - first : (query_tile ? tiles_s : tiles_l);
  };
  const auto tile_at = [&](bool query_tile, std::int64_t first, std::int64_t k) {
    return sparse ? (query_tile ? mask.layout_col : mask.layout_tcol)[first + k] : k;
  };
  const std::int64_t avg_l = sparse ? R * ceil_div(mask.layout_crow[tiles_l], std::max<std::int64_t>(1, tiles_s)) : L;
  const std::int64_t avg_s = sparse ? R * ceil_div(mask.layout_crow[tiles_l], std::max<std::int64_t>(1, tiles_l)) : S;
  // D = rowsum(g * out) = rowsum(dP * P) (with or without the dropout), one per query row.
  std::vector<T> d(static_cast<std::size_t>(B * L));
  parallel_for(0, B * L, grain_for(Ev + 1), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      T acc = 0;
      for (std::int64_t c = 0; c < Ev; ++c) acc += g[r * Ev + c] * out[r * Ev + c];
      d[static_cast<std::size_t>(r)] = acc;
    }
  });
  // The buffers of one tile: P, the dropped weights pd, dP then dS, and the keep decisions.
  struct Tile {
    std::vector<T> p, pd, ds;
    std::vector<std::uint8_t> keep;
    explicit Tile(std::int64_t r)
        : p(static_cast<std::size_t>(r * r)),
          pd(static_cast<std::size_t>(r * r)),
          ds(static_cast<std::size_t>(r * r)),
          keep(static_cast<std::size_t>(r * r)) {}
  };
  // P of the tile (rows l0 + lr, columns s0 + sc of problem b) from the saved lse, and its keep decisions.
  const auto probs = [&](Tile& tile, std::int64_t b, std::int64_t l0, std::int64_t lr, std::int64_t s0,
                         std::int64_t sc) {
    T* p = tile.p.data();
    detail::blas::gemm<T>(false, true, lr, sc, E, scale, q + (b * L + l0) * E, E, k + (b * S + s0) * E, E, T(0), p, R);
    mask_tile(mask, b, l0, lr, s0, sc, p, R);
    for (std::int64_t r = 0; r < lr; ++r) {
      const simd::default_batch<T> lb(lse[b * L + l0 + r]);
      vec_map<T>(
          sc, p + r * R, [&lb](auto x) { return xsimd::exp(x - lb); }, p + r * R);
      if (drop.on)
        attention_keep(drop, static_cast<std::uint64_t>((b * L + l0 + r) * S + s0), sc, tile.keep.data() + r * R);
    }
  };
  // dS = P * (dP - D) of the tile, dP = (g v^T) with the dropout applied.
  const auto grads = [&](Tile& tile, std::int64_t b, std::int64_t l0, std::int64_t lr, std::int64_t s0,
                         std::int64_t sc) {
    T* ds = tile.ds.data();
    detail::blas::gemm<T>(false, true, lr, sc, Ev, T(1), g + (b * L + l0) * Ev, Ev, v + (b * S + s0) * Ev, Ev, T(0), ds,
                          R);
    for (std::int64_t r = 0; r < lr; ++r) {
      const T dr = d[static_cast<std::size_t>(b * L + l0 + r)];
      const T* p = tile.p.data() + r * R;
      T* row = ds + r * R;
      if (drop.on) {
        const std::uint8_t* kr = tile.keep.data() + r * R;
        for (std::int64_t c = 0; c < sc; ++c) row[c] = p[c] * ((kr[c] ? row[c] * keep_scale : T(0)) - dr);
      } else {
        for (std::int64_t c = 0; c < sc; ++c) row[c] = p[c] * (row[c] - dr);
      }
    }
  };
  if (dk != nullptr || dv != nullptr) {
    // dk and dv per (problem, key tile), summed over the query tiles in order.
    const std::int64_t work = R * avg_l * (2 * E + 2 * Ev + 6) + 1;
    parallel_for(0, B * tiles_s, grain_for(work), [&](std::int64_t t0, std::int64_t t1) {
      Tile tile(R);
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t b = t / tiles_s, s0 = (t % tiles_s) * R, sc = std::min(R, S - s0);
        T* dkj = dk != nullptr ? dk + (b * S + s0) * E : nullptr;
        T* dvj = dv != nullptr ? dv + (b * S + s0) * Ev : nullptr;
        if (dkj != nullptr) std::fill(dkj, dkj + sc * E, T(0));
        if (dvj != nullptr) std::fill(dvj, dvj + sc * Ev, T(0));
        std::int64_t first = 0, count = 0;
        tiles_of(false, t % tiles_s, first, count);
        for (std::int64_t ii = 0; ii < count; ++ii) {
          const std::int64_t i = tile_at(false, first, ii);
          const std::int64_t l0 = i * R, lr = std::min(R, L - l0);
          if (mask.causal && l0 + lr - 1 < s0) continue;  // every row of the tile is before every key
          probs(tile, b, l0, lr, s0, sc);
          if (dvj != nullptr) {
            const T* pd = tile.p.data();
            if (drop.on) {
              for (std::int64_t r = 0; r < lr; ++r)
                for (std::int64_t c = 0; c < sc; ++c)
                  tile.pd[static_cast<std::size_t>(r * R + c)] =
                      tile.keep[static_cast<std::size_t>(r * R + c)]
                          ? tile.p[static_cast<std::size_t>(r * R + c)] * keep_scale
                          : T(0);
              pd = tile.pd.data();
            }
            detail::blas::gemm<T>(true, false, sc, Ev, lr, T(1), pd, R, g + (b * L + l0) * Ev, Ev, T(1), dvj, Ev);
          }
          if (dkj != nullptr) {
            grads(tile, b, l0, lr, s0, sc);
            detail::blas::gemm<T>(true, false, sc, E, lr, scale, tile.ds.data(), R, q + (b * L + l0) * E, E, T(1), dkj,
                                  E);
          }
        }
      }
    });
  }
  if (dq != nullptr || ds_full != nullptr) {
    // dq per (problem, query tile), summed over the key tiles in order; each dS tile once.
    const std::int64_t work = R * avg_s * (2 * E + Ev + 4) + 1;
    parallel_for(0, B * tiles_l, grain_for(work), [&](std::int64_t t0, std::int64_t t1) {
      Tile tile(R);
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t b = t / tiles_l, l0 = (t % tiles_l) * R, lr = std::min(R, L - l0);
        T* dqi = dq != nullptr ? dq + (b * L + l0) * E : nullptr;
        if (dqi != nullptr) std::fill(dqi, dqi + lr * E, T(0));
        T* dsi = ds_full != nullptr ? ds_full + (b * L + l0) * S : nullptr;
        if (dsi != nullptr) std::fill(dsi, dsi + lr * S, T(0));  // the tiles causal skips stay 0
        std::int64_t first = 0, count = 0;
        tiles_of(true, t % tiles_l, first, count);
        for (std::int64_t jj = 0; jj < count; ++jj) {
          const std::int64_t j = tile_at(true, first, jj);
          const std::int64_t s0 = j * R, sc = std::min(R, S - s0);
          if (mask.causal && s0 > l0 + lr - 1) break;
          probs(tile, b, l0, lr, s0, sc);
          grads(tile, b, l0, lr, s0, sc);
          if (dsi != nullptr)
            for (std::int64_t r = 0; r < lr; ++r)
              std::copy(tile.ds.data() + r * R, tile.ds.data() + r * R + sc, dsi + r * S + s0);
          if (dqi != nullptr)
            detail::blas::gemm<T>(false, false, lr, E, sc, scale, tile.ds.data(), R, k + (b * S + s0) * E, E, T(1), dqi,
                                  E);
        }
      }
    });
  }
}

template <class T>
void attention_dropout_factor(const AttentionSizes& n, const AttentionDropout<T>& drop, T* out) {
  const std::int64_t rows = n.b * n.l, S = n.s;
  parallel_for(0, rows, grain_for(4 * S + 1), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(S));
    for (std::int64_t r = r0; r < r1; ++r) {
      attention_keep(drop, static_cast<std::uint64_t>(r * S), S, keep.data());
      for (std::int64_t s = 0; s < S; ++s) out[r * S + s] = keep[static_cast<std::size_t>(s)] ? drop.keep_scale : T(0);
    }
  });
}

void attention_causal_mask(std::int64_t l_len, std::int64_t s_len, bool* out) {
  for (std::int64_t l = 0; l < l_len; ++l)
    for (std::int64_t s = 0; s < s_len; ++s) out[l * s_len + s] = s > l;
}

void attention_layout_mask(std::int64_t l_len, std::int64_t s_len, std::int64_t tile, const std::int64_t* crow,
                           const std::int64_t* col, bool* out) {
  std::fill(out, out + l_len * s_len, false);
  for (std::int64_t i = 0; i * tile < l_len; ++i)
    for (std::int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      const std::int64_t s0 = col[k] * tile, s1 = std::min(s_len, s0 + tile);
      for (std::int64_t l = i * tile; l < std::min(l_len, (i + 1) * tile); ++l)
        std::fill(out + l * s_len + s0, out + l * s_len + s1, true);
    }
}

XGRAD_INSTANTIATE_FLOATING(attention_keep);
XGRAD_INSTANTIATE_FLOATING(attention_forward);
XGRAD_INSTANTIATE_FLOATING(attention_backward);
XGRAD_INSTANTIATE_FLOATING(attention_fused_forward);
XGRAD_INSTANTIATE_FLOATING(attention_fused_backward);
XGRAD_INSTANTIATE_FLOATING(attention_dropout_factor);

}  // namespace xgrad::detail
