#pragma once
// Element types chosen at run time. Note [Dtypes]: float32 and float64 carry gradients; int64,
// int32, uint8 and bool hold labels, indices and masks and never require grad (as in PyTorch, only
// floating point tensors can). Kernels of the float ops are templates over the element type,
// instantiated for float and double only in .cpp files: `dispatch` turns the runtime tag into one
// of those two types and refuses the others with an xgrad::Error. Dtype-generic code (creation,
// conversion, copies, comparisons, I/O) uses `dispatch_all`, which covers the six types.
//
// Type promotion (`promote_types`) follows PyTorch for this set: the types are totally ordered
// bool < uint8 < int32 < int64 < float32 < float64 and two dtypes promote to the greater one.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "xgrad/core/error.hpp"

namespace xgrad {

/// The values of float32 and float64 are stable (they are written in no file, but code has relied
/// on them); the others follow.
enum class Dtype : std::uint8_t { float32 = 0, float64 = 1, int64 = 2, int32 = 3, uint8 = 4, bool_ = 5 };

inline constexpr Dtype kFloat32 = Dtype::float32;
inline constexpr Dtype kFloat = Dtype::float32;
inline constexpr Dtype kFloat64 = Dtype::float64;
inline constexpr Dtype kDouble = Dtype::float64;
inline constexpr Dtype kInt64 = Dtype::int64;
inline constexpr Dtype kLong = Dtype::int64;
inline constexpr Dtype kInt32 = Dtype::int32;
inline constexpr Dtype kInt = Dtype::int32;
inline constexpr Dtype kUInt8 = Dtype::uint8;
inline constexpr Dtype kByte = Dtype::uint8;
inline constexpr Dtype kBool = Dtype::bool_;

/// "float32", "float64", "int64", "int32", "uint8", "bool" (PyTorch's names without "torch.").
constexpr std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::float32:
      return "float32";
    case Dtype::float64:
      return "float64";
    case Dtype::int64:
      return "int64";
    case Dtype::int32:
      return "int32";
    case Dtype::uint8:
      return "uint8";
    case Dtype::bool_:
      return "bool";
  }
  return "invalid dtype";
}

/// Bytes per element.
constexpr std::size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::float32:
    case Dtype::int32:
      return 4;
    case Dtype::float64:
    case Dtype::int64:
      return 8;
    case Dtype::uint8:
    case Dtype::bool_:
      return 1;
  }
  return 1;
}

/// True for float32 and float64 (the dtypes that can require grad).
constexpr bool is_floating_point(Dtype d) { return d == Dtype::float32 || d == Dtype::float64; }

/// The dtype both operands of a binary op are converted to (PyTorch's torch.promote_types for this
/// set): the greater of the two in bool < uint8 < int32 < int64 < float32 < float64.
///   promote_types(kInt64, kFloat32) == kFloat32, promote_types(kBool, kUInt8) == kUInt8.
constexpr Dtype promote_types(Dtype a, Dtype b) {
  const auto rank = [](Dtype d) {
    switch (d) {
      case Dtype::bool_:
        return 0;
      case Dtype::uint8:
        return 1;
      case Dtype::int32:
        return 2;
      case Dtype::int64:
        return 3;
      case Dtype::float32:
        return 4;
      case Dtype::float64:
        return 5;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

template <class T>
inline constexpr bool is_dtype_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, bool>;

/// The Dtype of a C++ element type: float, double, std::int64_t, std::int32_t, std::uint8_t, bool.
template <class T>
constexpr Dtype dtype_of() {
  static_assert(is_dtype_type_v<T>, "xgrad: element types are float, double, int64_t, int32_t, uint8_t and bool");
  if constexpr (std::is_same_v<T, float>)
    return Dtype::float32;
  else if constexpr (std::is_same_v<T, double>)
    return Dtype::float64;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return Dtype::int64;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return Dtype::int32;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return Dtype::uint8;
  else
    return Dtype::bool_;
}

template <class T>
struct type_tag {
  using type = T;
};

namespace detail {
[[noreturn, gnu::cold]] void throw_not_floating(Dtype d, const char* op);
}

/// Calls fn(type_tag<float>{}) or fn(type_tag<double>{}) according to d. The float kernels are
/// instantiated for these two types only: any other dtype is an xgrad::Error naming `op`. Public
/// ops check their inputs with check_floating (core/tensor.hpp) first, which names the argument.
template <class Fn>
decltype(auto) dispatch(Dtype d, Fn&& fn, const char* op = nullptr) {
  if (d == Dtype::float32) return fn(type_tag<float>{});
  if (d != Dtype::float64) [[unlikely]]
    detail::throw_not_floating(d, op);
  return fn(type_tag<double>{});
}

/// Calls fn(type_tag<T>{}) for the element type T of d, any of the six dtypes (for dtype-generic
/// code: creation, conversion, copies, comparisons, I/O). Every branch instantiates fn: keep the
/// callable small (six instantiations per call site).
template <class Fn>
decltype(auto) dispatch_all(Dtype d, Fn&& fn) {
  switch (d) {
    case Dtype::float64:
      return fn(type_tag<double>{});
    case Dtype::int64:
      return fn(type_tag<std::int64_t>{});
    case Dtype::int32:
      return fn(type_tag<std::int32_t>{});
    case Dtype::uint8:
      return fn(type_tag<std::uint8_t>{});
    case Dtype::bool_:
      return fn(type_tag<bool>{});
    case Dtype::float32:
      break;
  }
  return fn(type_tag<float>{});
}

/// Converts one value to element type To with PyTorch's rules: to bool is `v != 0` (NaN is true);
/// floating point to an integer type truncates toward zero. A float value outside the integer
/// type's range, or NaN, has no defined result in C++ (PyTorch leaves it to the hardware); here it
/// gives the type's minimum for int32 and int64, as x86 does, and uint8 takes the low 8 bits of the
/// int64 conversion (as PyTorch does). Integer to narrower integer keeps the low bits.
template <class To, class From>
constexpr To convert_value(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if constexpr (std::is_same_v<To, std::uint8_t>) {
      return static_cast<std::uint8_t>(convert_value<std::int64_t>(v));
    } else {
      // -2^63 <= v < 2^63 (exactly representable bounds); same for int32.
      constexpr double lo = -static_cast<double>(std::uint64_t{1} << (sizeof(To) * 8 - 1));
      if (!(v >= static_cast<From>(lo) && v < static_cast<From>(-lo))) return static_cast<To>(lo);
      return static_cast<To>(v);
    }
  } else {
    return static_cast<To>(v);
  }
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
