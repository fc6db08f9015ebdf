// AVX-512 versions of resample_conv's float32 inner loops (Note [AVX-512 kernels] in
// resample_kernels.hpp). This file alone is compiled with -march=x86-64-v4; resample_kernels.cpp
// calls it through simd512_kernels() only when the CPU has AVX-512 (F, BW, DQ, VL).
//
// Everything here has internal linkage, and the only library templates it instantiates are xsimd's and
// ops/detail/simd.hpp's with the architecture xsimd::avx512bw as a template argument (Note [Kernel
// architectures] in simd.hpp): an inline or template function that another file also instantiates
// would be merged by the linker with that file's copy, and whichever copy it kept (possibly this one,
// with AVX-512 instructions) would then run on every CPU. The test ops_simd_odr checks this file's object.
#include "xgrad/ops/detail/resample_simd512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/detail/simd.hpp"
#endif

namespace xgrad::detail::resample {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
using v16f = simd::batch<float, A>;
using v8d = simd::batch<double, A>;
static_assert(simd::lanes<float, A> == 16 && simd::lanes<double, A> == 8);

inline v16f load16(const float* p) { return simd::load<float, A>(p); }

inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// Widens 16 floats to double lanes and adds them to acc (8 double lanes).
inline void add_wide(v8d& acc, const v16f& v) { acc += simd::widen<0>(v) + simd::widen<1>(v); }

// res[m * NK + k] = sum_j rows[k][j] * fs[m][j]: dot_rows_multi of resample_kernels.cpp with 16 lanes
// (float sums within blocks of 256 taps, lane-wise double across blocks, a fixed tree at the end).
template <int NK, int M>
void dot_multi(const float* const* rows, const float* const* fs, std::int64_t n, double* res) {
  constexpr std::int64_t kBlock = 256;
  v8d tot[M][NK] = {};
  double tail[M][NK] = {};
  std::int64_t j = 0;
  while (j < n) {
    const std::int64_t e = imin(n, j + kBlock);
    v16f acc[M][NK] = {};
    for (; j + 16 <= e; j += 16) {
      v16f rv[NK];
      for (int k = 0; k < NK; ++k) rv[k] = load16(rows[k] + j);
      for (int m = 0; m < M; ++m) {
        v16f fv = load16(fs[m] + j);
        if constexpr (NK > 1) simd::pin(fv);  // one load per f vector, not one per FMA
        for (int k = 0; k < NK; ++k) acc[m][k] += rv[k] * fv;
      }
    }
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < NK; ++k) add_wide(tot[m][k], acc[m][k]);
    for (; j < e; ++j)
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < NK; ++k) tail[m][k] += static_cast<double>(rows[k][j]) * static_cast<double>(fs[m][j]);
  }
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < NK; ++k) {
      // (((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))) + tail
      res[m * NK + k] = simd::tree_sum(tot[m][k]) + tail[m][k];
    }
}

// out[o][j] += sum_i c[o * NI + i] * in[i][j]: combine_rows of resample_kernels.cpp with 16 lanes (the
// same operations per element; only overlapping out segments are updated in a width-dependent order).
template <int NI, int NO>
void combine(const float* const* in, float* const* out, const float* c, std::int64_t n) {
  v16f cv[NO][NI];
  const float* ip[NI];
  float* op[NO];
  for (int o = 0; o < NO; ++o) {
    op[o] = out[o];
    for (int i = 0; i < NI; ++i) cv[o][i] = v16f(0.0f) + v16f(c[o * NI + i]);
  }
  for (int i = 0; i < NI; ++i) ip[i] = in[i];
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v16f iv[NI];
    for (int i = 0; i < NI; ++i) iv[i] = load16(ip[i] + j);
    for (int o = 0; o < NO; ++o) {
      v16f d = load16(op[o] + j);
      for (int i = 0; i < NI; ++i) d += cv[o][i] * iv[i];
      d.store_unaligned(op[o] + j);
    }
  }
  for (; j < n; ++j)
    for (int o = 0; o < NO; ++o) {
      float d = op[o][j];
      for (int i = 0; i < NI; ++i) d += simd::lane(cv[o][i], 0) * ip[i][j];
      op[o][j] = d;
    }
}

const Simd512Kernels kTable = {
    {dot_multi<1, 4>, dot_multi<2, 4>, dot_multi<3, 2>, dot_multi<4, 2>},
    {dot_multi<1, 1>, dot_multi<2, 1>, dot_multi<3, 1>, dot_multi<4, 1>},
    {combine<1, 4>, combine<2, 4>, combine<3, 2>, combine<4, 2>},
    {combine<4, 1>, combine<4, 2>, combine<4, 3>, combine<4, 4>},
    {combine<1, 1>, combine<1, 2>, combine<1, 3>, combine<1, 4>},
};

}  // namespace

const Simd512Kernels* simd512_table() { return &kTable; }
#else
const Simd512Kernels* simd512_table() { return nullptr; }
#endif

}  // namespace xgrad::detail::resample
