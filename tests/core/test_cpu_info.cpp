// Tests for core/cpu_info.*: the report agrees with the CPU (libgcc's cpuid checks) and with the kernel
// family xgrad dispatches to.
#include <cstdlib>
#include <string>

#include "support.hpp"
#include "xgrad/core/cpu_info.hpp"
#include "xgrad/core/detail/cpu.hpp"

using namespace xgrad;

TEST_CASE("cpu_info: flags agree with the compiler's cpuid checks", "[cpu_info]") {
  const CpuInfo info = cpu_info();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  CHECK(info.flags.sse3 == static_cast<bool>(__builtin_cpu_supports("sse3")));
  CHECK(info.flags.avx == static_cast<bool>(__builtin_cpu_supports("avx")));
  CHECK(info.flags.avx2 == static_cast<bool>(__builtin_cpu_supports("avx2")));
  CHECK(info.flags.fma == static_cast<bool>(__builtin_cpu_supports("fma")));
  CHECK(info.flags.avx512f == static_cast<bool>(__builtin_cpu_supports("avx512f")));
  CHECK(info.flags.avx512bw == static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  CHECK(info.flags.avx512vl == static_cast<bool>(__builtin_cpu_supports("avx512vl")));
  CHECK(!info.vendor.empty());
  CHECK(info.family > 0);
  if (__builtin_cpu_is("amd")) CHECK(info.vendor == "AuthenticAMD");
  if (__builtin_cpu_is("intel")) CHECK(info.vendor == "GenuineIntel");
#endif
  const std::string s = info.str();
  CHECK(s.find("cpu: ") != std::string::npos);
  CHECK(s.find("xgrad kernels: " + std::string(isa_name(info.kernel_isa))) != std::string::npos);
}

TEST_CASE("cpu_info: xgrad's kernels are the widest family the CPU supports", "[cpu_info]") {
  const CpuInfo info = cpu_info();
  const char* cap = std::getenv("XGRAD_CPU_CAPABILITY");
  const bool narrowed = cap && (std::string(cap) == "avx2" || std::string(cap) == "default");
  CHECK(info.capability_override == (cap ? cap : ""));
  // The library's baseline is XGRAD_ARCH (x86-64-v3, AVX2 + FMA, by default; the tests are built with it).
  if (info.best_isa == Isa::avx512 && !narrowed) CHECK(info.kernel_isa == Isa::avx512);
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  if (info.best_isa != Isa::avx512 || narrowed) CHECK(info.kernel_isa == Isa::avx2);
#endif
  CHECK(info.kernel_isa <= info.best_isa);
  CHECK((info.kernel_isa == Isa::avx512) == detail::avx512_enabled());
  // The test hook narrows the report with the dispatch.
  detail::set_avx512_enabled(false);
  CHECK(cpu_info().kernel_isa < Isa::avx512);
  detail::set_avx512_enabled(true);
  CHECK(cpu_info().kernel_isa == info.kernel_isa);
}
