#pragma once
// Internal to ops/kernels/resample_kernels.cpp and resample_simd512.cpp: the inner loops of
// resample_conv that run at either vector width, as templates over the element type T and the
// architecture A (Note [Kernel architectures] in simd.hpp). resample_kernels.cpp instantiates them for
// xsimd::default_arch (float and double), resample_simd512.cpp for xsimd::avx512bw (float, Note
// [AVX-512 kernels] in resample_simd512.hpp): both widths run the same loops.
//
// Everything here is in an unnamed namespace, so each including file compiles its own copy with its own
// flags and the linker never merges the AVX-512 one with the baseline one (the test ops_simd_odr checks
// the AVX-512 object). For the same reason the loops call no standard-library function template (such as
// std::min, one function for every file that instantiates it) and the header includes only simd.hpp.
#include <cstdint>

#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail::resample {
namespace {

// std::min's body: the same code as the baseline loops had with std::min.
template <class I>
constexpr const I& imin(const I& a, const I& b) {
  if (b < a) return b;
  return a;
}

// Widens a batch of T to double lanes and adds it to acc: acc += (low half + high half) for float.
template <class A>
inline void add_wide(simd::batch<double, A>& acc, const simd::batch<float, A>& v) {
  acc += simd::widen<0>(v) + simd::widen<1>(v);
}
template <class A>
inline void add_wide(simd::batch<double, A>& acc, const simd::batch<double, A>& v) {
  acc += v;
}

// Outputs per group for dot_rows_multi (0: none, use dot_rows_one).
constexpr int multi_width(int nk) { return nk <= 2 ? 4 : nk <= 4 ? 2 : 0; }

// res[m * NK + k] = sum_j rows[k][j] * fs[m][j]: the sums of dot_rows (resample_kernels.cpp) for M
// outputs sharing the rows (one phase), with their own f segments. Each row load serves M outputs (the
// single-output loop is bound by loads). Per output the sums are formed exactly as in dot_rows with
// U = 1, so an output's value does not depend on which outputs it was grouped with.
template <class T, class A, int NK, int M>
void dot_rows_multi(const T* const* rows, const T* const* fs, std::int64_t n, double* res) {
  using V = simd::batch<T, A>;
  constexpr int W = simd::lanes<T, A>;
  constexpr std::int64_t kBlock = 256;
  simd::batch<double, A> tot[M][NK] = {};
  double tail[M][NK] = {};
  std::int64_t j = 0;
  while (j < n) {
    const std::int64_t e = imin(n, j + kBlock);
    V acc[M][NK] = {};
    for (; j + W <= e; j += W) {
      V rv[NK];
      for (int k = 0; k < NK; ++k) rv[k] = simd::load<T, A>(rows[k] + j);
      for (int m = 0; m < M; ++m) {
        V fv = simd::load<T, A>(fs[m] + j);
        // Keep fv in a register: otherwise GCC folds the load into every FMA that uses it,
        // which brings back the loads this grouping removes.
        if constexpr (NK > 1) simd::pin(fv);
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
    for (int k = 0; k < NK; ++k) res[m * NK + k] = simd::tree_sum(tot[m][k]) + tail[m][k];
}

// out[o][j] += sum_i c[o * NI + i] * in[i][j] for j < n: the inner loop of both accumulating passes.
// The f gradient adds NI = NK table rows into NO = M outputs' segments of df (each row load serves M
// outputs); the values gradient adds NI = M outputs' f segments into NO = NK gradient rows of their
// phase. Output segments may overlap (nearby outputs): they are updated one after the other for
// each j, so the sums are those of a sequential update in this order (the order of overlapping
// updates, not the operations per element, depends on the width).
template <class T, class A, int NI, int NO>
void combine_rows(const T* const* in, T* const* out, const T* c, std::int64_t n) {
  using V = simd::batch<T, A>;
  constexpr int W = simd::lanes<T, A>;
  // Coefficients and pointers in registers: the stores through out could alias c and the pointer
  // arrays, so they would be re-read every iteration.
  V cv[NO][NI];
  T cs[NO][NI];
  const T* ip[NI];
  T* op[NO];
  for (int o = 0; o < NO; ++o) {
    op[o] = out[o];
    for (int i = 0; i < NI; ++i) cs[o][i] = T(0) + c[o * NI + i], cv[o][i] = V(cs[o][i]);
  }
  for (int i = 0; i < NI; ++i) ip[i] = in[i];
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    V iv[NI];
    for (int i = 0; i < NI; ++i) iv[i] = simd::load<T, A>(ip[i] + j);
    for (int o = 0; o < NO; ++o) {
      V d = simd::load<T, A>(op[o] + j);
      for (int i = 0; i < NI; ++i) d += cv[o][i] * iv[i];
      simd::store<T, A>(op[o] + j, d);
    }
  }
  for (; j < n; ++j)
    for (int o = 0; o < NO; ++o) {
      T d = op[o][j];
      for (int i = 0; i < NI; ++i) d += cs[o][i] * ip[i][j];
      op[o][j] = d;
    }
}

}  // namespace
}  // namespace xgrad::detail::resample
