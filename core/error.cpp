#include "xgrad/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace xgrad::detail {

void throw_error(std::string msg) { throw Error(msg); }

void throw_error_v(fmt::string_view fmt, fmt::format_args args) { throw Error(fmt::vformat(fmt, args)); }

void assert_fail(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "xgrad internal assertion failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace xgrad::detail
