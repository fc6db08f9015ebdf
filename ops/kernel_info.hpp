#pragma once
// Which kernels run xgrad's dense work on this machine: the CPU report of core (xgrad::cpu_info(),
// Note [CPU report] in core/cpu_info.hpp) plus what only the ops layer knows, OpenBLAS's core and
// the GEMM backend xgrad chose (Note [GEMM backend] in ops/kernels/blas.cpp; XGRAD_GEMM).
#include <string>

#include "xgrad/core/cpu_info.hpp"

namespace xgrad {

/// The kernels xgrad runs: CPU, its own kernel family, OpenBLAS and the GEMM backend.
struct KernelInfo {
  CpuInfo cpu;                       ///< xgrad::cpu_info()
  std::string openblas_core;         ///< the kernel set OpenBLAS chose at load time, e.g. "Haswell", "Prescott"
  Isa openblas_isa = Isa::scalar;    ///< the instruction set that core implies (scalar if unknown)
  bool openblas_core_known = false;  ///< false for a core name xgrad does not map to an instruction set
  std::string gemm_backend;          ///< "xgrad" (its own packed GEMM) or "openblas"
  /// The instruction set the chosen GEMM backend runs (scalar for OpenBLAS on a core xgrad does not know).
  Isa gemm_isa = Isa::scalar;
  std::string gemm_reason;  ///< why that backend (XGRAD_GEMM, or what auto compared)

  /// True when OpenBLAS's kernels are below the widest instruction set the CPU supports, in FMA rate:
  /// AVX2 kernels are not below AVX-512 on a CPU that runs 512-bit FMAs at the 256-bit rate (AMD Zen 4;
  /// Note [GEMM backend] in ops/kernels/blas.cpp).
  bool openblas_below_cpu = false;
  /// A short multi-line report: cpu_info's lines, then "openblas: ...", "gemm: ...".
  std::string str() const;
  /// One line when OpenBLAS runs below the CPU's instruction set, e.g. "xgrad: OpenBLAS runs its
  /// Prescott (sse3) kernels on a CPU with avx512; xgrad uses its own GEMM"; "" otherwise.
  std::string warning() const;
};

/// The report for this process (OpenBLAS's core and the backend are fixed at the first GEMM or call).
KernelInfo kernel_info();

}  // namespace xgrad
