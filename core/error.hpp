#pragma once
// Errors. Note [Error messages]: every check that can fire on user input names the op, the
// argument and the offending shapes or values, so a user can find the bad call from the message
// alone. XGRAD_CHECK is always on; XGRAD_ASSERT guards internal invariants and is compiled out
// in release builds (NDEBUG).
//
// Only fmt's light core header is included here (this header is in every translation unit): the
// message is checked against its arguments at compile time (fmt::format_string), and formatted
// out of line (error.cpp) on the cold path. A .cpp file that needs more of fmt (fmt::join, ranges)
// includes <fmt/format.h> or <fmt/ranges.h> itself.
#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace xgrad {

/// Thrown for bad arguments and misuse (wrong shapes, dtypes, axes, a second backward through a
/// freed graph, ...). Derives from std::invalid_argument so generic handlers can catch it.
class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& what) : std::invalid_argument(what) {}
};

namespace detail {
[[noreturn]] void throw_error(std::string msg);
/// Formats fmt with args (out of line) and throws xgrad::Error with the text.
[[noreturn, gnu::cold]] void throw_error_v(fmt::string_view fmt, fmt::format_args args);
template <class... T>
[[noreturn, gnu::cold, gnu::noinline]] void throw_formatted(fmt::format_string<T...> fmt, T&&... args) {
  throw_error_v(fmt, fmt::make_format_args(args...));
}
[[noreturn]] void assert_fail(const char* expr, const char* file, int line);
}  // namespace detail

}  // namespace xgrad

/// XGRAD_CHECK(cond, "op: argument 'x' ... {}", args...) throws xgrad::Error with fmt-formatted text.
#define XGRAD_CHECK(cond, ...)                       \
  do {                                               \
    if (!(cond)) [[unlikely]] {                      \
      ::xgrad::detail::throw_formatted(__VA_ARGS__); \
    }                                                \
  } while (0)

#ifdef NDEBUG
#define XGRAD_ASSERT(cond) ((void)0)
#else
#define XGRAD_ASSERT(cond) ((cond) ? (void)0 : ::xgrad::detail::assert_fail(#cond, __FILE__, __LINE__))
#endif
