#include "xgrad/core/detail/cpu.hpp"

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace xgrad::detail {
namespace {

std::atomic<bool> g_allowed{true};

bool detect() {
  if (const char* cap = std::getenv("XGRAD_CPU_CAPABILITY")) {
    const std::string_view c(cap);
    if (c == "avx2" || c == "default") return false;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // libgcc's checks include the OS saving the AVX-512 registers (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

}  // namespace

bool avx512_enabled() {
  static const bool detected = detect();
  return detected && g_allowed.load(std::memory_order_relaxed);
}

void set_avx512_enabled(bool enabled) { g_allowed.store(enabled, std::memory_order_relaxed); }

}  // namespace xgrad::detail
