#include "xgrad/core/cpu_info.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "xgrad/core/detail/cpu.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace xgrad {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}
bool bit(unsigned v, int i) { return ((v >> i) & 1u) != 0; }
std::uint64_t xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t{hi} << 32) | lo;
}
#endif

CpuInfo detect() {
  CpuInfo info;
  if (const char* cap = std::getenv("XGRAD_CPU_CAPABILITY")) info.capability_override = cap;
#if defined(__x86_64__) || defined(__i386__)
  const Regs r0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &r0.b, 4);
  std::memcpy(vendor + 4, &r0.d, 4);
  std::memcpy(vendor + 8, &r0.c, 4);
  info.vendor = vendor;
  const unsigned max_leaf = r0.a;
  const Regs r1 = cpuid(1);
  const int base_family = static_cast<int>((r1.a >> 8) & 0xf), base_model = static_cast<int>((r1.a >> 4) & 0xf);
  info.stepping = static_cast<int>(r1.a & 0xf);
  info.family = base_family == 0xf ? base_family + static_cast<int>((r1.a >> 20) & 0xff) : base_family;
  info.model =
      base_family == 0x6 || base_family == 0xf ? (static_cast<int>((r1.a >> 16) & 0xf) << 4) | base_model : base_model;
  // The OS must save the vector registers (XCR0) for AVX (YMM) and AVX-512 (opmask, ZMM) to be usable.
  const bool osxsave = bit(r1.c, 27);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6;
  const Regs r7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs r71 = max_leaf >= 7 ? cpuid(7, 1) : Regs{};
  CpuInfo::Flags& f = info.flags;
  f.sse3 = bit(r1.c, 0);
  f.ssse3 = bit(r1.c, 9);
  f.sse4_1 = bit(r1.c, 19);
  f.sse4_2 = bit(r1.c, 20);
  f.avx = os_avx && bit(r1.c, 28);
  f.fma = os_avx && bit(r1.c, 12);
  f.f16c = os_avx && bit(r1.c, 29);
  f.avx2 = os_avx && bit(r7.b, 5);
  f.avx512f = os_avx512 && bit(r7.b, 16);
  f.avx512dq = os_avx512 && bit(r7.b, 17);
  f.avx512bw = os_avx512 && bit(r7.b, 30);
  f.avx512vl = os_avx512 && bit(r7.b, 31);
  f.avx512_vnni = os_avx512 && bit(r7.c, 11);
  f.avx512_bf16 = os_avx512 && bit(r71.a, 5);
  const Regs e0 = cpuid(0x80000000u);
  if (e0.a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    std::string s = brand;
    const auto first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
    info.model_name = first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
  }
  info.best_isa = f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl ? Isa::avx512
                  : f.avx2 && f.fma                                   ? Isa::avx2
                  : f.avx                                             ? Isa::avx
                  : f.sse3                                            ? Isa::sse3
                                                                      : Isa::scalar;
#endif
  return info;
}

// The instruction set this file (and so the library's baseline, XGRAD_ARCH) is compiled for.
constexpr Isa baseline_isa() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  return Isa::avx512;
#elif defined(__AVX2__) && defined(__FMA__)
  return Isa::avx2;
#elif defined(__AVX__)
  return Isa::avx;
#elif defined(__SSE3__)
  return Isa::sse3;
#else
  return Isa::scalar;
#endif
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::sse3:
      return "sse3";
    case Isa::avx:
      return "avx";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

CpuInfo cpu_info() {
  static const CpuInfo detected = detect();
  CpuInfo info = detected;
  info.kernel_isa = detail::avx512_enabled() ? Isa::avx512 : baseline_isa();
  return info;
}

std::string CpuInfo::str() const {
  std::string flag_list;
  const auto add = [&flag_list](bool on, const char* name) {
    if (!on) return;
    if (!flag_list.empty()) flag_list += ' ';
    flag_list += name;
  };
  add(flags.sse3, "sse3");
  add(flags.ssse3, "ssse3");
  add(flags.sse4_1, "sse4_1");
  add(flags.sse4_2, "sse4_2");
  add(flags.avx, "avx");
  add(flags.avx2, "avx2");
  add(flags.fma, "fma");
  add(flags.f16c, "f16c");
  add(flags.avx512f, "avx512f");
  add(flags.avx512bw, "avx512bw");
  add(flags.avx512dq, "avx512dq");
  add(flags.avx512vl, "avx512vl");
  add(flags.avx512_vnni, "avx512_vnni");
  add(flags.avx512_bf16, "avx512_bf16");
  std::string s =
      fmt::format("cpu: {} ({}, family {} model {} stepping {})\n", model_name.empty() ? "unknown" : model_name,
                  vendor.empty() ? "?" : vendor, family, model, stepping);
  s += fmt::format("cpu flags: {} (best: {})\n", flag_list.empty() ? "-" : flag_list, isa_name(best_isa));
  s += fmt::format("xgrad kernels: {}{}\n", isa_name(kernel_isa),
                   capability_override.empty() ? "" : " (XGRAD_CPU_CAPABILITY=" + capability_override + ")");
  return s;
}

}  // namespace xgrad
