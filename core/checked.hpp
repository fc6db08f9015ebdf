#pragma once
// Checked size arithmetic. Note [Checked sizes]: every element count, stride, offset, byte size and
// index computed from user-supplied sizes goes through these helpers, so a product or sum that does
// not fit in int64 (or a byte count that no buffer can have) is an xgrad::Error naming the op and the
// argument, never a wrapped value that later ops would read out of bounds with. A shape is valid when
// its dimensions are >= 0 and its element count and every row-major stride (the products of its
// trailing dimensions) fit in int64; a zero dimension makes the shape empty, so (2^62, 0, 2^62) is a
// valid empty shape while (0, 2^62, 2^62) is not (its first stride overflows). Other partial
// products of an empty shape's dimensions may still overflow: compute them with checked_prod.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "xgrad/core/error.hpp"
#include "xgrad/core/shape.hpp"

namespace xgrad {

namespace detail {
/// The min/max pass of all_in_range over v's chunks on the thread pool (core/parallel.cpp).
bool all_in_range_parallel(std::span<const std::int64_t> v, std::int64_t n);
/// Indices from which all_in_range splits its pass across threads: a 100,000-row embedding lookup
/// at 2 threads spent about a tenth of its time in serial passes over its indices.
inline constexpr std::size_t kParallelRangeCheckMin = std::size_t{1} << 16;
}  // namespace detail

/// True when every index in v lies in [0, n). One min/max pass, which the compiler vectorises (a
/// check per element with a flag or an early exit compiles to a scalar loop, which showed in an
/// embedding lookup's profile), split across threads for long index lists; the index checks (index_select,
/// nn::Embedding, ops/indexing.cpp's check_range) run their per-element loop, which reports the
/// first bad index or wraps negative ones, only when this is false.
inline bool all_in_range(std::span<const std::int64_t> v, std::int64_t n) {
  if (v.size() >= detail::kParallelRangeCheckMin) return detail::all_in_range_parallel(v, n);
  std::int64_t lo = 0, hi = -1;
  for (const std::int64_t i : v) {
    lo = i < lo ? i : lo;
    hi = i > hi ? i : hi;
  }
  return lo >= 0 && hi < n;
}

/// a * b, or an xgrad::Error "op: argument 'arg': size a * b overflows int64".
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op, const char* arg) {
  std::int64_t r = 0;
  XGRAD_CHECK(!__builtin_mul_overflow(a, b, &r), "{}: argument '{}': size {} * {} overflows int64", op, arg, a, b);
  return r;
}

/// a + b, or an xgrad::Error "op: argument 'arg': size a + b overflows int64".
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* op, const char* arg) {
  std::int64_t r = 0;
  XGRAD_CHECK(!__builtin_add_overflow(a, b, &r), "{}: argument '{}': size {} + {} overflows int64", op, arg, a, b);
  return r;
}

/// a - b, or an xgrad::Error.
inline std::int64_t checked_sub(std::int64_t a, std::int64_t b, const char* op, const char* arg) {
  std::int64_t r = 0;
  XGRAD_CHECK(!__builtin_sub_overflow(a, b, &r), "{}: argument '{}': size {} - {} overflows int64", op, arg, a, b);
  return r;
}

/// Validates a shape (dims >= 0, element count and strides fit in int64: Note [Checked sizes]) and
/// returns its element count. Errors name `op`, `arg` and the shape.
std::int64_t checked_numel(const Shape& shape, const char* op, const char* arg);

/// Product of dims [begin, end) of a shape, or an xgrad::Error naming `op` and `arg`.
std::int64_t checked_prod(const Shape& shape, std::size_t begin, std::size_t end, const char* op, const char* arg);

/// numel * element_size as a byte count that a buffer can have (<= PTRDIFF_MAX), or an xgrad::Error
/// stating the bytes asked for.
std::size_t checked_nbytes(std::int64_t numel, std::size_t element_size, const char* op, const char* arg);

/// An xgrad::Error stating `bytes` when they exceed this machine's memory and swap: called before a
/// large host-side allocation (a vector sized from user input), so that the request fails with the
/// bytes asked for instead of std::bad_alloc (or an abort under sanitizers).
void check_host_memory(std::size_t bytes, const char* op, const char* arg);

/// v as a non-negative int64 (for sizes held as size_t / unsigned), or an xgrad::Error.
template <class U>
std::int64_t checked_size(U v, const char* op, const char* arg) {
  if constexpr (std::numeric_limits<U>::is_signed) {
    XGRAD_CHECK(v >= 0, "{}: argument '{}': size {} is negative", op, arg, v);
  } else {
    XGRAD_CHECK(v <= static_cast<std::make_unsigned_t<std::int64_t>>(std::numeric_limits<std::int64_t>::max()),
                "{}: argument '{}': size {} overflows int64", op, arg, v);
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace xgrad
