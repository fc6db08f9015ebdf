#pragma once
// Element types chosen at run time. Kernels are templates over the element type and are
// instantiated for float and double in .cpp files; `dispatch` turns the runtime tag into a type.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "xgrad/core/error.hpp"

namespace xgrad {

enum class Dtype : std::uint8_t { float32, float64 };

inline constexpr Dtype kFloat32 = Dtype::float32;
inline constexpr Dtype kFloat64 = Dtype::float64;

constexpr std::string_view dtype_name(Dtype d) { return d == Dtype::float32 ? "float32" : "float64"; }
constexpr std::size_t dtype_size(Dtype d) { return d == Dtype::float32 ? 4 : 8; }

template <class T>
constexpr Dtype dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "xgrad: float or double only");
  return std::is_same_v<T, float> ? Dtype::float32 : Dtype::float64;
}

template <class T>
struct type_tag {
  using type = T;
};

/// Calls fn(type_tag<float>{}) or fn(type_tag<double>{}) according to d.
template <class Fn>
decltype(auto) dispatch(Dtype d, Fn&& fn) {
  if (d == Dtype::float32) return fn(type_tag<float>{});
  return fn(type_tag<double>{});
}

}  // namespace xgrad

// Formats as its name ("{}" only). Written out rather than derived from formatter<string_view>,
// whose format() is defined in fmt/format.h, which this header does not include (core/error.hpp).
template <>
struct fmt::formatter<xgrad::Dtype> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(xgrad::Dtype d, fmt::format_context& ctx) const {
    auto out = ctx.out();
    for (const char c : xgrad::dtype_name(d)) *out++ = c;
    return out;
  }
};
