#pragma once
// Internal to ops/kernels/resample_kernels.cpp. Note [AVX-512 kernels]: on CPUs with AVX-512 (F, BW, DQ, VL)
// the float32 inner loops of resample_conv run 16 lanes wide instead of 8: the same templates
// (resample_loops.hpp) instantiated in resample_simd512.cpp, the one file compiled with
// -march=x86-64-v4, and reached only through
// simd512_kernels(), which asks detail::avx512_enabled() (core/detail/cpu.hpp: the CPU is checked once, so
// the library still runs on AVX2-only CPUs; XGRAD_CPU_CAPABILITY=avx2 keeps the 8-lane loops). The
// values gradient's loop computes every element with the same operations in the same order at either width, so it gives
// identical results. The forward's dot products sum 16 lanes in their fixed tree instead of 8, and the f gradient adds
// the overlapping segments of nearby outputs in a width-dependent order, so those float32 results differ in the last
// bits between the two widths (each width is deterministic and independent of the thread count). This header includes
// nothing but <cstdint>: see resample_simd512.cpp for why.
#include <cstdint>

namespace xgrad::detail::resample {

struct Simd512Kernels {
  // res[m * nk + k] = sum_j rows[k][j] * fs[m][j]
  using Dot = void (*)(const float* const* rows, const float* const* fs, std::int64_t n, double* res);
  // out[o][j] += sum_i c[o * ni + i] * in[i][j]
  using Combine = void (*)(const float* const* in, float* const* out, const float* c, std::int64_t n);
  Dot dot_multi[4];        // [nk - 1]: multi_width(nk) outputs (4, 4, 2, 2)
  Dot dot_one[4];          // [nk - 1]: one output
  Combine spread[4];       // [nk - 1]: ni = nk table rows into no = multi_width(nk) outputs
  Combine accumulate4[4];  // [nk - 1]: ni = 4 outputs' f segments into no = nk rows
  Combine accumulate1[4];  // [nk - 1]: ni = 1 output's f segment into no = nk rows
};

/// The AVX-512 loops, or null when the library was built without them (non-x86 compilers).
/// Defined in resample_simd512.cpp; does not itself check the CPU.
const Simd512Kernels* simd512_table();
/// simd512_table() when detail::avx512_enabled() (core/detail/cpu.hpp), else null.
const Simd512Kernels* simd512_kernels();

}  // namespace xgrad::detail::resample
