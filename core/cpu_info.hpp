#pragma once
// What this CPU is and which instruction set xgrad's own kernels run on it.
//
// Note [CPU report]: the report is in two layers, as the libraries are (core <- ops <- nn). The
// core layer knows the CPU (cpuid: vendor, brand string, family / model, the feature flags the OS
// lets programs use) and which kernel family of its own xgrad runs (Note [AVX-512 kernels] in
// core/detail/cpu.hpp: the baseline the library is compiled for, or the AVX-512 files when the CPU
// has them and XGRAD_CPU_CAPABILITY does not ask for avx2). It knows nothing of OpenBLAS, which
// only the ops layer links: xgrad::kernel_info() (ops/kernel_info.hpp) takes this report and adds
// OpenBLAS's core, the instruction set that core implies and the GEMM backend xgrad chose. Both are
// plain values; neither call registers anything.
#include <string>

namespace xgrad {

/// x86 vector instruction-set levels, in increasing order (comparable with <).
enum class Isa { scalar, sse3, avx, avx2, avx512 };

/// "scalar", "sse3", "avx", "avx2" or "avx512".
const char* isa_name(Isa isa);

/// The CPU this process runs on (cpuid, read once) and the kernel family xgrad runs on it.
struct CpuInfo {
  std::string vendor;      ///< cpuid vendor, e.g. "GenuineIntel", "AuthenticAMD" ("" off x86)
  std::string model_name;  ///< the cpuid brand string, e.g. "AMD EPYC 9R14 96-Core Processor"
  int family = 0;          ///< display family (base + extended)
  int model = 0;           ///< display model (with the extended model bits)
  int stepping = 0;
  /// Features the CPU has and the OS enables (the AVX ones need the OS to save their registers).
  struct Flags {
    bool sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false, avx = false, avx2 = false, fma = false,
         f16c = false, avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false, avx512_vnni = false,
         avx512_bf16 = false;
  } flags;
  /// The widest instruction set of the list above that the CPU supports (avx2 needs avx2 and fma,
  /// avx512 needs F, BW, DQ and VL).
  Isa best_isa = Isa::scalar;
  /// The instruction set xgrad's own kernels run: avx512 when its AVX-512 files are used
  /// (detail::avx512_enabled()), else the baseline the library was compiled for (XGRAD_ARCH,
  /// avx2 by default).
  Isa kernel_isa = Isa::scalar;
  /// The value of XGRAD_CPU_CAPABILITY when set ("" otherwise).
  std::string capability_override;

  /// A few lines: "cpu: <model> (<vendor>, family f model m)", "flags: ...", "xgrad kernels: <isa>".
  std::string str() const;
};

/// This process's CPU (cpuid is read at the first call; later calls return the same report, except
/// kernel_isa, which follows the test hook detail::set_avx512_enabled).
CpuInfo cpu_info();

}  // namespace xgrad
