// AVX-512 versions of resample_conv's float32 inner loops (Note [AVX-512 kernels] in
// resample_simd512.hpp): the templates of resample_loops.hpp, which resample_kernels.cpp instantiates for
// its own architecture, instantiated here for xsimd::avx512bw. This file alone is compiled with
// -march=x86-64-v4; resample_kernels.cpp calls it through simd512_kernels() only when the CPU has
// AVX-512 (F, BW, DQ, VL).
//
// Everything here has internal linkage, and the only library templates it instantiates are xsimd's,
// ops/kernels/simd.hpp's with the architecture xsimd::avx512bw as a template argument (Note [Kernel
// architectures] in simd.hpp) and resample_loops.hpp's, which are in an unnamed namespace: an inline or
// template function that another file also instantiates would be merged by the linker with that file's
// copy, and whichever copy it kept (possibly this one, with AVX-512 instructions) would then run on every
// CPU. The test ops_simd_odr checks this file's object.
#include "xgrad/ops/kernels/resample_simd512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "xgrad/ops/kernels/resample_loops.hpp"
#endif

namespace xgrad::detail::resample {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
namespace {

using A = xsimd::avx512bw;
static_assert(simd::lanes<float, A> == 16 && simd::lanes<double, A> == 8);

const Simd512Kernels kTable = {
    {dot_rows_multi<float, A, 1, multi_width(1)>, dot_rows_multi<float, A, 2, multi_width(2)>,
     dot_rows_multi<float, A, 3, multi_width(3)>, dot_rows_multi<float, A, 4, multi_width(4)>},
    {dot_rows_multi<float, A, 1, 1>, dot_rows_multi<float, A, 2, 1>, dot_rows_multi<float, A, 3, 1>,
     dot_rows_multi<float, A, 4, 1>},
    {combine_rows<float, A, 1, multi_width(1)>, combine_rows<float, A, 2, multi_width(2)>,
     combine_rows<float, A, 3, multi_width(3)>, combine_rows<float, A, 4, multi_width(4)>},
    {combine_rows<float, A, 4, 1>, combine_rows<float, A, 4, 2>, combine_rows<float, A, 4, 3>,
     combine_rows<float, A, 4, 4>},
    {combine_rows<float, A, 1, 1>, combine_rows<float, A, 1, 2>, combine_rows<float, A, 1, 3>,
     combine_rows<float, A, 1, 4>},
};

}  // namespace

const Simd512Kernels* simd512_table() { return &kTable; }
#else
const Simd512Kernels* simd512_table() { return nullptr; }
#endif

}  // namespace xgrad::detail::resample
