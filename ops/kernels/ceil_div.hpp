#pragma once
// Internal: ceil(a / b) for a >= 0 and b > 0, without forming a + b - 1 (which overflows for b near
// 2^63, e.g. a stride of 2^63 - 1 that the size checks accept). Shared by matmul, conv and pool.
#include <cstdint>

namespace xgrad::detail {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace xgrad::detail
