#pragma once
// Internal: xgrad's one SIMD vocabulary for the hand-written kernels (resample_conv, block_sparse_linear,
// xgrad's own GEMM, and the xsimd loops of vec_kernel.hpp): xsimd batches of an explicit architecture A.
//
// Note [Kernel architectures]: a kernel file is compiled for one instruction set and names it: the
// library's files use xsimd::default_arch (XGRAD_ARCH, x86-64-v3 = fma3<avx2> by default: 8 float or 4
// double lanes), the *_simd512.cpp files xsimd::avx512bw (built with -march=x86-64-v4 and called only
// after the run-time check of core/detail/cpu.hpp). Every template here takes the architecture as a template
// argument, so an AVX-512 file's instantiations are different functions from the AVX2 ones (a
// different mangled name) and the linker can never merge one into the other (the ODR hazard of
// per-file instruction sets; the test ops_simd_odr (tests/check_simd_odr.cmake) checks the AVX-512 objects for weak
// symbols that do not name their architecture). The loops that run at both widths are written once, as templates
// over the architecture in an unnamed namespace of a header both files include (resample_loops.hpp,
// block_sparse_tiles.hpp, gemm_loops.hpp): each file compiles its own copy. xsimd 8 has no two-input lane permutation,
// so shuffle() applies the compiler's __builtin_shufflevector to the batch's register (GCC >= 12, Clang).
//
// The helpers do exactly the arithmetic they say, lane by lane, so a kernel gives the same bits as the
// GCC vector-extension loops it replaced (the compiler contracts a * b + c into an FMA in both forms).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <xsimd/xsimd.hpp>

namespace xgrad::detail::simd {

template <class T, class A>
using batch = xsimd::batch<T, A>;
/// A batch of the build's architecture (XGRAD_ARCH), for kernels with no per-ISA variant.
template <class T>
using default_batch = batch<T, xsimd::default_arch>;

/// Lanes of a batch of T on architecture A.
template <class T, class A>
inline constexpr int lanes = static_cast<int>(batch<T, A>::size);

template <class T, class A>
inline batch<T, A> load(const T* p) {
  return batch<T, A>::load_unaligned(p);
}
template <class T, class A>
inline void store(T* p, const batch<T, A>& v) {
  v.store_unaligned(p);
}
/// The batch with every lane c.
template <class T, class A>
inline batch<T, A> splat(T c) {
  return batch<T, A>(c);
}
/// The batch whose lane l is first + l.
template <class T, class A>
inline batch<T, A> iota(T first) {
  alignas(64) T v[lanes<T, A>];
  for (int l = 0; l < lanes<T, A>; ++l) v[l] = first + static_cast<T>(l);
  return batch<T, A>::load_aligned(v);
}
/// The lanes of v in an array (lane l at index l).
template <class T, class A>
struct LaneArray {
  alignas(64) T v[lanes<T, A>];
  T operator[](int l) const { return v[l]; }
};
template <class T, class A>
inline LaneArray<T, A> to_array(const batch<T, A>& b) {
  LaneArray<T, A> r;
  b.store_aligned(r.v);
  return r;
}
/// Lane i of the result is lane I_i of the concatenation (a, b): __builtin_shufflevector on the registers.
template <int... I, class T, class A>
inline batch<T, A> shuffle(const batch<T, A>& a, const batch<T, A>& b) {
  static_assert(sizeof...(I) == lanes<T, A>, "simd::shuffle: one index per lane");
  return batch<T, A>(__builtin_shufflevector(a.data, b.data, I...));
}
/// Lane i of v (the register's element: no store to memory).
template <class T, class A>
inline T lane(const batch<T, A>& v, int i) {
  return v.data[i];
}
/// Sum of the lanes by a fixed tree of pairwise sums: ((v0 + v1) + (v2 + v3)) for 4 lanes, and for 8
/// lanes that of lanes 0-3 plus that of lanes 4-7.
template <int Lo = 0, int N = -1, class T, class A>
inline T tree_sum(const batch<T, A>& v) {
  constexpr int n = N < 0 ? lanes<T, A> : N;
  if constexpr (n == 1)
    return v.data[Lo];
  else
    return tree_sum<Lo, n / 2>(v) + tree_sum<Lo + n / 2, n / 2>(v);
}
/// The float lanes [H * half, H * half + H) of v converted to double (H = lanes<double, A>).
template <int Half, class A, std::size_t... I>
inline batch<double, A> widen_impl(const batch<float, A>& v, std::index_sequence<I...>) {
  using R = typename batch<double, A>::register_type;
  constexpr int H = static_cast<int>(sizeof...(I));
  return batch<double, A>(__builtin_convertvector(__builtin_shufflevector(v.data, v.data, (Half * H + I)...), R));
}
template <int Half, class A>
inline batch<double, A> widen(const batch<float, A>& v) {
  return widen_impl<Half>(v, std::make_index_sequence<lanes<double, A>>{});
}
/// Keeps v in a register (an empty asm the optimiser cannot see through): stops GCC from folding one
/// load into every FMA that uses it.
template <class T, class A>
inline void pin(batch<T, A>& v) {
#if defined(__AVX512F__)
  asm("" : "+v"(v.data));
#elif defined(__SSE2__)
  asm("" : "+x"(v.data));
#endif
}

}  // namespace xgrad::detail::simd
