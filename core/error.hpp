#pragma once
// Errors. Note [Error messages]: every check that can fire on user input names the op, the
// argument and the offending shapes or values, so a user can find the bad call from the message
// alone. XGRAD_CHECK is always on; XGRAD_ASSERT guards internal invariants and is compiled out
// in release builds (NDEBUG).
#include <fmt/format.h>
#include <fmt/ranges.h>

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
[[noreturn]] void assert_fail(const char* expr, const char* file, int line);
}  // namespace detail

}  // namespace xgrad

/// XGRAD_CHECK(cond, "op: argument 'x' ... {}", args...) throws xgrad::Error with fmt-formatted text.
#define XGRAD_CHECK(cond, ...)                                  \
  do {                                                          \
    if (!(cond)) [[unlikely]] {                                 \
      ::xgrad::detail::throw_error(::fmt::format(__VA_ARGS__)); \
    }                                                           \
  } while (0)

#ifdef NDEBUG
#define XGRAD_ASSERT(cond) ((void)0)
#else
#define XGRAD_ASSERT(cond) ((cond) ? (void)0 : ::xgrad::detail::assert_fail(#cond, __FILE__, __LINE__))
#endif
