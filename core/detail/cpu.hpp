#pragma once
// Run-time CPU dispatch. Note [AVX-512 kernels]: the library is built for XGRAD_ARCH (x86-64-v3:
// AVX2 + FMA by default); a few float32 inner loops also exist in 16-lane AVX-512 form, each in a
// file of its own compiled for x86-64-v4 (ops/kernels/resample_simd512.cpp, ops/kernels/block_sparse_simd512.cpp,
// ops/kernels/gemm_simd512.cpp: float32 and float64). xgrad::cpu_info() reports which family runs.
// Their callers reach them only when avx512_enabled() says so, which checks the CPU once per process,
// so the library still runs on AVX2-only CPUs. XGRAD_CPU_CAPABILITY=avx2 (or =default) in the
// environment keeps the baseline loops, as PyTorch's ATEN_CPU_CAPABILITY does.
namespace xgrad::detail {

/// True when this CPU and OS support AVX-512 F, BW, DQ and VL and XGRAD_CPU_CAPABILITY does not ask
/// for avx2 / default. The CPU and the variable are read once per process.
bool avx512_enabled();
/// Test hook: false makes avx512_enabled() return false (the baseline loops run everywhere); true
/// restores the detected answer.
void set_avx512_enabled(bool enabled);

}  // namespace xgrad::detail
