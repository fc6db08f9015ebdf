#pragma once
// Internal to ops/kernels/gemm_kernels.cpp and gemm_simd512.cpp: the direct convolution's loops (Note
// [Direct convolution] and Note [Direct weight gradient] in gemm_kernels.hpp) as templates over the
// element type T, the architecture A (Note [Kernel architectures] in simd.hpp) and the tile shape, on
// the packed GEMM's micro-tiles (gemm_loops.hpp). Like those, everything is in an unnamed namespace and
// calls no standard-library function template, so each including file compiles its own copy.
#include <cstdint>
#include <type_traits>

#include "xgrad/ops/kernels/gemm_loops.hpp"

namespace xgrad::detail::gemmk {
namespace {

// The unsigned integer type of T's size.
template <class T>
struct Bits;
template <>
struct Bits<float> {
  using type = std::uint32_t;
};
template <>
struct Bits<double> {
  using type = std::uint64_t;
};

template <bool B>
struct Masked {
  static constexpr bool value = B;
};

// One tile of Note [Direct convolution] (gemm_kernels.hpp): rows [0, mr) of the panel wp (k x MR) and
// columns [l0, l0 + nr) of the result, MU <= MR rows and NU vectors computed (NU <= NV, or up to
// MR * NV / 3 for a single row).
template <class T, class A, int MR, int NV, int MU, int NU>
inline void conv_tile(const ConvArgs<T>& g, const T* __restrict wp, std::int64_t l0, T* __restrict out, std::int64_t mr,
                      std::int64_t nr) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  V acc[MU][NU];
#pragma GCC unroll 16
  for (int i = 0; i < MU; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NU; ++v) acc[i][v] = V(T(0));
  // Taps outermost: a tap's mask vectors are loaded once for all channels (or not at all inside
  // its all-ones range); each element is summed over (tap, channel) in that fixed order.
  const std::int64_t channels = g.k / g.taps;
  const auto run_tap = [&](std::int64_t t, auto masked) {
    const T* base = g.img + g.shift[t] + l0;
    V m[NU];
    if constexpr (decltype(masked)::value) {
#pragma GCC unroll 8
      for (int v = 0; v < NU; ++v) m[v] = simd::load<T, A>(g.mask + t * g.mask_ld + l0 + v * L);
    }
    for (std::int64_t c = 0; c < channels; ++c) {
      const T* src = base + c * g.plane;
      V b[NU];
#pragma GCC unroll 8
      for (int v = 0; v < NU; ++v) {
        b[v] = simd::load<T, A>(src + v * L);
        if constexpr (decltype(masked)::value) b[v] = b[v] & m[v];
      }
      const T* a = wp + (c * g.taps + t) * MR;
#pragma GCC unroll 16
      for (int i = 0; i < MU; ++i) {
        const V av(a[i]);
#pragma GCC unroll 8
        for (int v = 0; v < NU; ++v) acc[i][v] = xsimd::fma(av, b[v], acc[i][v]);
      }
    }
  };
  for (std::int64_t t = 0; t < g.taps; ++t) {
    if (l0 >= g.ones[2 * t] && l0 + NU * L <= g.ones[2 * t + 1])  // inside the image: no mask
      run_tap(t, Masked<false>{});
    else
      run_tap(t, Masked<true>{});
  }
#pragma GCC unroll 16
  for (int i = 0; i < MU; ++i) {
    if (i >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < NU; ++v) {
      T* o = out + i * g.ldo + l0 + v * L;
      const std::int64_t rem = nr - v * L;
      if (rem >= L) {
        simd::store<T, A>(o, acc[i][v]);
      } else if (rem > 0) {
        alignas(64) T tmp[L];
        simd::store<T, A>(tmp, acc[i][v]);
        for (std::int64_t l = 0; l < rem; ++l) o[l] = tmp[l];
      }
    }
  }
}

// Note [Direct convolution]: tiles of MR rows x NV vectors, the columns outermost so that the image
// columns one tile reads (k rows of NV vectors) stay in L1 / L2 for every panel of rows. The last
// tile of a row computes only the vectors that reach len (reads stay below len rounded up to L).
template <class T, class A, int MR, int NV, int MU>
inline void conv_tile_cols(const ConvArgs<T>& g, const T* wp, std::int64_t l0, T* out, std::int64_t mr,
                           std::int64_t nr) {
  constexpr int L = simd::lanes<T, A>;
  if constexpr (NV >= 3) {
    if (nr > 2 * L) return conv_tile<T, A, MR, NV, MU, 3>(g, wp, l0, out, mr, nr);
  }
  if (nr > L)
    conv_tile<T, A, MR, NV, MU, 2>(g, wp, l0, out, mr, nr);
  else
    conv_tile<T, A, MR, NV, MU, 1>(g, wp, l0, out, mr, nr);
}

template <class T, class A, int MR, int NV>
void direct_conv_loops(const ConvArgs<T>& g) {
  constexpr int L = simd::lanes<T, A>, NR = NV * L;
  static_assert(NV == 2 || NV == 3, "direct_conv: tiles of 2 or 3 vectors");
  if (g.m == 1) {
    // One output channel per group (depthwise): a single row's tile has as many vectors as a third
    // of the accumulators of a full tile (its masks and image vectors take the other two thirds), so
    // that enough FMAs are in flight.
    constexpr int N1 = MR * NV / 3;
    std::int64_t l0 = 0;
    for (; l0 + N1 * L <= g.len; l0 += N1 * L) conv_tile<T, A, MR, NV, 1, N1>(g, g.w, l0, g.out, 1, N1 * L);
    for (; l0 < g.len; l0 += NR)
      conv_tile_cols<T, A, MR, NV, 1>(g, g.w, l0, g.out, 1, gmin<std::int64_t>(NR, g.len - l0));
    return;
  }
  for (std::int64_t l0 = 0; l0 < g.len; l0 += NR) {
    const std::int64_t nr = gmin<std::int64_t>(NR, g.len - l0);
    for (std::int64_t r = 0; r < g.m; r += MR) {
      const std::int64_t mr = gmin<std::int64_t>(MR, g.m - r);
      const T* wp = g.w + r * g.k;
      T* out = g.out + r * g.ldo;
      constexpr int MQ = MR * 2 / 3;  // a two-thirds tile: 16 rows on AVX2 are 6 + 6 + 4, not 6 + 6 + 6
      if (mr > MQ)
        conv_tile_cols<T, A, MR, NV, MR>(g, wp, l0, out, mr, nr);
      else if (mr > MR / 2)
        conv_tile_cols<T, A, MR, NV, MQ>(g, wp, l0, out, mr, nr);
      else
        conv_tile_cols<T, A, MR, NV, MR / 2>(g, wp, l0, out, mr, nr);
    }
  }
}

// Note [Direct weight gradient] (gemm_kernels.hpp): tiles of MR gradient rows x NK weight columns, each
// element a vector of lane-wise partial sums over every block of the run, reduced by simd::tree_sum at
// the end. The tiles at the edges compute on their last valid row or column again and store only the
// valid ones. A tile's columns run tap-major (column kk is tap kk / chans of channel kk % chans), so
// the NK columns of a tile mostly share one tap and so one mask: one mask vector per step instead of NK,
// and NK fewer pointers in the loop (with a mask pointer per column, 4 x 6 tiles spilled pointers to
// the stack on every step). Tiles that straddle two taps keep a mask per column. The order in which
// each element is summed does not depend on the tiling.
template <class T, class A, int MR, int NK>
void conv_weight_loops(const ConvWeightArgs<T>& g) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  const std::int64_t full = g.len / L * L, rem = g.len - full;
  const std::int64_t chans = g.k / g.taps;  // k = channels x taps
  // The lanes of the last vector inside len, as a bit mask (all ones or zeros per lane).
  alignas(64) T tail_bits[L];
  for (int l = 0; l < L; ++l) {
    using U = typename Bits<T>::type;
    const U u = l < rem ? static_cast<U>(~U(0)) : U(0);
    __builtin_memcpy(&tail_bits[l], &u, sizeof(T));
  }
  const V tail = simd::load<T, A>(tail_bits);
  for (std::int64_t o0 = 0; o0 < g.m; o0 += MR)
    for (std::int64_t k0 = 0; k0 < g.k; k0 += NK) {
      std::int64_t grow[MR], ioff[NK], moff[NK], dcol[NK];
      // Whole vectors in [ulo, uhi) are all ones in every mask of the tile: loaded without the mask.
      std::int64_t ulo = 0, uhi = full;
      for (int i = 0; i < MR; ++i) grow[i] = gmin<std::int64_t>(o0 + i, g.m - 1) * g.len;
      for (int j = 0; j < NK; ++j) {
        const std::int64_t kk = gmin<std::int64_t>(k0 + j, g.k - 1), t = kk / chans, c = kk % chans;
        dcol[j] = c * g.taps + t;
        ioff[j] = c * g.plane + g.shift[t];
        moff[j] = t * g.mask_ld;
        ulo = g.ones[2 * t] > ulo ? g.ones[2 * t] : ulo;
        uhi = g.ones[2 * t + 1] < uhi ? g.ones[2 * t + 1] : uhi;
      }
      ulo = (ulo + L - 1) / L * L;
      uhi = uhi / L * L;
      if (uhi < ulo) uhi = ulo;
      V acc[MR][NK];
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < NK; ++j) acc[i][j] = V(T(0));
      // Tap-major columns are in increasing tap order, so the first and the last share a tap only if all do.
      const auto run_blocks = [&](auto one_tap) {  // Masked<true>: every column on one tap
        constexpr bool kOneTap = decltype(one_tap)::value;
        for (std::int64_t s = 0; s < g.blocks; ++s) {
          const T* gp[MR];
          const T* ip[NK];
          const T* mp[kOneTap ? 1 : NK];
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i) gp[i] = g.grid[s] + grow[i];
#pragma GCC unroll 8
          for (int j = 0; j < NK; ++j) ip[j] = g.img[s] + ioff[j];
#pragma GCC unroll 8
          for (int j = 0; j < (kOneTap ? 1 : NK); ++j) mp[j] = g.mask + moff[j];
          // The same steps in three ranges (masked, unmasked, masked): each element's order is unchanged.
          const auto step = [&](std::int64_t l, auto masked) {
            V b[NK];
            if constexpr (decltype(masked)::value && kOneTap) {
              const V mk = simd::load<T, A>(mp[0] + l);
#pragma GCC unroll 8
              for (int j = 0; j < NK; ++j) b[j] = simd::load<T, A>(ip[j] + l) & mk;
            } else {
#pragma GCC unroll 8
              for (int j = 0; j < NK; ++j) {
                b[j] = simd::load<T, A>(ip[j] + l);
                if constexpr (decltype(masked)::value) b[j] = b[j] & simd::load<T, A>(mp[j] + l);
              }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) {
              const V a = simd::load<T, A>(gp[i] + l);
#pragma GCC unroll 8
              for (int j = 0; j < NK; ++j) acc[i][j] = xsimd::fma(a, b[j], acc[i][j]);
            }
          };
          for (std::int64_t l = 0; l < ulo; l += L) step(l, Masked<true>{});
          for (std::int64_t l = ulo; l < uhi; l += L) step(l, Masked<false>{});
          for (std::int64_t l = uhi; l < full; l += L) step(l, Masked<true>{});
          if (rem > 0) {  // the last partial vector: the grid's lanes past len are zeros, not the next row's
            V b[NK];
#pragma GCC unroll 8
            for (int j = 0; j < NK; ++j)
              b[j] = simd::load<T, A>(ip[j] + full) & simd::load<T, A>(g.mask + moff[j] + full);
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) {
              const V a = simd::load<T, A>(gp[i] + full) & tail;
#pragma GCC unroll 8
              for (int j = 0; j < NK; ++j) acc[i][j] = xsimd::fma(a, b[j], acc[i][j]);
            }
          }
        }
      };
      if (moff[0] == moff[NK - 1])
        run_blocks(Masked<true>{});
      else
        run_blocks(Masked<false>{});
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        if (o0 + i >= g.m) break;
#pragma GCC unroll 8
        for (int j = 0; j < NK; ++j) {
          if (k0 + j >= g.k) break;
          T* d = g.dw + (o0 + i) * g.ldw + dcol[j];
          const T v = simd::tree_sum(acc[i][j]);
          *d = g.accumulate ? *d + v : v;
        }
      }
    }
}

#if defined(__AVX512F__)
// g++ 12 warns that the intrinsics' internal _mm512_undefined_ps() is used uninitialized (GCC bug
// 105593, fixed in 13); it is the don't-care source of an all-ones mask.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// The 16 x 16 float block at src (rows lds apart) transposed into dst (rows ldd apart): two unpack and
// two 128-bit lane shuffle stages, 64 shuffles for 256 elements.
inline void transpose16x16(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}
#pragma GCC diagnostic pop
#endif

// dst[q * ldd + r] = src[r * lds + q] for r < rows, q < cols: 16 x 16 blocks by shuffles where the
// family is AVX-512 and T float, element by element elsewhere.
template <class T, class A>
inline void transpose_copy(const T* src, std::int64_t lds, std::int64_t rows, std::int64_t cols, T* dst,
                           std::int64_t ldd) {
  std::int64_t r0 = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, xsimd::avx512bw>) {
    for (; r0 + 16 <= rows; r0 += 16) {
      std::int64_t q0 = 0;
      for (; q0 + 16 <= cols; q0 += 16) transpose16x16(src + r0 * lds + q0, lds, dst + q0 * ldd + r0, ldd);
      for (; q0 < cols; ++q0)
        for (std::int64_t r = r0; r < r0 + 16; ++r) dst[q0 * ldd + r] = src[r * lds + q0];
    }
  }
#endif
  for (std::int64_t r = r0; r < rows; ++r)
    for (std::int64_t q = 0; q < cols; ++q) dst[q * ldd + r] = src[r * lds + q];
}

// Note [Co-vectorised weight gradient]: where a block's output channels fill whole vectors (m a
// multiple of L; of 2 L with 16 registers) and its input channels come in multiples of 8, the weight
// gradient is vectorised over the output channels instead of the positions. Each block's grid is
// transposed to (len x m) and its image to (plane x chans) in g.work; a tile is MV vectors of L
// output channels x NK input channels of one tap, and a step (one position l of one of the tap's
// runs of valid positions) is MV vector loads of the transposed grid and MV x NK FMAs with broadcast
// image values, which sit side by side (compile-time offsets): no masks, no horizontal sums, no
// lanes past len. Each element is one lane of one accumulator, summed over the blocks in order and
// each block's valid positions in increasing order. (Positions outside a tap's window are skipped,
// not multiplied by zero: a NaN in the gradient there reaches the weights only through the taps
// that see it, as the direct sum has it.) The transposes cost about a fifth of the time (they are
// the first to read the run from memory); AVX-512 does them in 16 x 16 blocks by shuffles, AVX2
// element by element. Measured in gemm_simd512.cpp and gemm_kernels.cpp.
template <class T, class A, int MV, int NK>
void conv_weight_cv_tiles(const ConvWeightArgs<T>& g, std::int64_t chans) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  const std::int64_t gstride = g.len * g.m, istride = g.plane * chans;
  const T* gt = g.work;
  const T* it = g.work + g.blocks * gstride;
  for (std::int64_t t = 0; t < g.taps; ++t) {
    const std::int64_t sh = g.shift[t], r0 = g.run_start[t], r1 = g.run_start[t + 1];
    for (std::int64_t c0 = 0; c0 < chans; c0 += NK)
      for (std::int64_t o0 = 0; o0 < g.m; o0 += MV * L) {
        V acc[MV][NK];
#pragma GCC unroll 4
        for (int v = 0; v < MV; ++v)
#pragma GCC unroll 24
          for (int j = 0; j < NK; ++j) acc[v][j] = V(T(0));
        for (std::int64_t s = 0; s < g.blocks; ++s) {
          const T* gs = gt + s * gstride + o0;
          const T* is = it + s * istride + c0;
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t l = g.runs[2 * r]; l < g.runs[2 * r + 1]; ++l) {
              V a[MV];
#pragma GCC unroll 4
              for (int v = 0; v < MV; ++v) a[v] = simd::load<T, A>(gs + l * g.m + v * L);
              const T* b = is + (l + sh) * chans;
#pragma GCC unroll 24
              for (int j = 0; j < NK; ++j) {
                const V bj(b[j]);
#pragma GCC unroll 4
                for (int v = 0; v < MV; ++v) acc[v][j] = xsimd::fma(a[v], bj, acc[v][j]);
              }
            }
        }
#pragma GCC unroll 4
        for (int v = 0; v < MV; ++v)
#pragma GCC unroll 24
          for (int j = 0; j < NK; ++j) {
            alignas(64) T lanes[L];
            simd::store<T, A>(lanes, acc[v][j]);
            T* d = g.dw + (o0 + v * L) * g.ldw + (c0 + j) * g.taps + t;
            for (int i = 0; i < L; ++i, d += g.ldw) *d = g.accumulate ? *d + lanes[i] : lanes[i];
          }
      }
  }
}

// Note [Direct weight gradient] for one output and one input channel per group (depthwise): each
// tap's gradient is a dot product of the grid with the shifted image over whole vectors, both ANDed
// with the tap's mask (zero past len, so no partial vector; whatever the image or grid holds at a
// masked position, it adds a zero), in four accumulators taken in turn, added pairwise and reduced
// by simd::tree_sum at the end. The order depends on the shapes only. (A version over the unmasked
// runs of valid positions was measured slower than this one on the depthwise benchmark's weight
// gradient, but only with the accumulators of both indexed at run time, which kept them in memory;
// unrolled, this one is faster still. The runs version was not measured unrolled;
// bench/results/tuning_notes.md, "Depthwise weight gradient".)
template <class T, class A>
void conv_weight_depthwise(const ConvWeightArgs<T>& g) {
  using V = simd::batch<T, A>;
  constexpr int L = simd::lanes<T, A>;
  for (std::int64_t t = 0; t < g.taps; ++t) {
    V acc[4] = {V(T(0)), V(T(0)), V(T(0)), V(T(0))};
    const T* mp = g.mask + t * g.mask_ld;
    for (std::int64_t s = 0; s < g.blocks; ++s) {
      const T* gp = g.grid[s];
      const T* ip = g.img[s] + g.shift[t];
      const auto step = [&](std::int64_t l, V& a) {
        const V m = simd::load<T, A>(mp + l);
        a = xsimd::fma(simd::load<T, A>(gp + l) & m, simd::load<T, A>(ip + l) & m, a);
      };
      std::int64_t l = 0;  // vector v of the block goes to accumulator v % 4
      for (; l + 4 * L <= g.len; l += 4 * L) {
        step(l, acc[0]);
        step(l + L, acc[1]);
        step(l + 2 * L, acc[2]);
        step(l + 3 * L, acc[3]);
      }
      if (l < g.len) step(l, acc[0]);  // fewer than 4 L positions left: up to 4 vectors, the last partial
      if (l + L < g.len) step(l + L, acc[1]);
      if (l + 2 * L < g.len) step(l + 2 * L, acc[2]);
      if (l + 3 * L < g.len) step(l + 3 * L, acc[3]);
    }
    const T v = simd::tree_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
    T* d = g.dw + t;
    *d = g.accumulate ? *d + v : v;
  }
}

// Note [Direct weight gradient] with the co-vectorised tiles where they apply (g.work given, m a
// multiple of the tile's output vectors, input channels a multiple of 8), else tiles of MR x NK over
// the positions. CV: 24 with 32 registers (tiles of 1 output vector x 24, 16 or 8 input channels), 8
// with 16 (2 output vectors x 4 input channels), 0 for none.
template <class T, class A, int MR, int NK, int CV>
void conv_weight(const ConvWeightArgs<T>& g) {
  constexpr int L = simd::lanes<T, A>;
  const std::int64_t chans = g.k / g.taps;
  if (g.m == 1 && chans == 1) return conv_weight_depthwise<T, A>(g);
  if (g.m == 1) return conv_weight_loops<T, A, 1, 2 * NK>(g);  // one output channel per group
  // tiles of one output vector with 32 registers (CV 24), of two with 16 (CV 8: 2 x 4 accumulators)
  const std::int64_t mv = CV >= 24 ? L : 2 * L;
  if (CV == 0 || g.work == nullptr || g.m % mv != 0 || chans % 8 != 0) return conv_weight_loops<T, A, MR, NK>(g);
  const std::int64_t gstride = g.len * g.m, istride = g.plane * chans;
  for (std::int64_t s = 0; s < g.blocks; ++s) {  // the transposed copies
    transpose_copy<T, A>(g.grid[s], g.len, g.m, g.len, g.work + s * gstride, g.m);
    transpose_copy<T, A>(g.img[s], g.plane, chans, g.plane, g.work + g.blocks * gstride + s * istride, chans);
  }
  if constexpr (CV >= 24) {
    if (chans % 24 == 0) return conv_weight_cv_tiles<T, A, 1, 24>(g, chans);
    if (chans % 16 == 0) return conv_weight_cv_tiles<T, A, 1, 16>(g, chans);
    conv_weight_cv_tiles<T, A, 1, 8>(g, chans);
  } else if constexpr (CV > 0) {
    conv_weight_cv_tiles<T, A, 2, 4>(g, chans);
  }
}

}  // namespace
}  // namespace xgrad::detail::gemmk
