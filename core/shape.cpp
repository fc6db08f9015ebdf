#include "xgrad/core/shape.hpp"

#include <fmt/format.h>  // fmt::join
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstddef>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {

std::int64_t checked_numel(const Shape& s, const char* op, const char* arg) {
  // Suffix products from the innermost dimension: each is a row-major stride (or the element count).
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    const std::int64_t d = s[i];
    XGRAD_CHECK(d >= 0, "{}: argument '{}': shape {} has a negative dimension {} (at index {})", op, arg, shape_str(s),
                d, i);
    XGRAD_CHECK(!__builtin_mul_overflow(acc, d, &acc),
                "{}: argument '{}': shape {} is too large: its size (or a stride) overflows int64", op, arg,
                shape_str(s));
  }
  return acc;
}

std::int64_t checked_prod(const Shape& s, std::size_t begin, std::size_t end, const char* op, const char* arg) {
  std::int64_t p = 1;
  for (std::size_t d = begin; d < end; ++d)
    XGRAD_CHECK(!__builtin_mul_overflow(p, s[d], &p),
                "{}: argument '{}': the product of dimensions {}..{} of shape {} overflows int64", op, arg, begin,
                end - 1, shape_str(s));
  return p;
}

std::size_t checked_nbytes(std::int64_t numel, std::size_t element_size, const char* op, const char* arg) {
  std::int64_t bytes = 0;
  const bool overflow = numel < 0 || __builtin_mul_overflow(numel, static_cast<std::int64_t>(element_size), &bytes);
  XGRAD_CHECK(!overflow && bytes <= PTRDIFF_MAX,
              "{}: argument '{}' is too large: {} elements of {} bytes ({:.6g} bytes asked for) is more memory "
              "than can exist",
              op, arg, numel, element_size, static_cast<double>(numel) * static_cast<double>(element_size));
  return static_cast<std::size_t>(bytes);
}

void check_host_memory(std::size_t bytes, const char* op, const char* arg) {
  static const std::size_t ceiling = [] {
    struct sysinfo info {};
    if (::sysinfo(&info) != 0) return static_cast<std::size_t>(PTRDIFF_MAX);
    const std::size_t unit = info.mem_unit == 0 ? 1 : info.mem_unit;
    return (static_cast<std::size_t>(info.totalram) + static_cast<std::size_t>(info.totalswap)) * unit;
  }();
  XGRAD_CHECK(bytes <= ceiling,
              "{}: argument '{}' needs {} bytes ({:.3g} GiB): more than this machine's memory and swap ({:.3g} GiB)",
              op, arg, bytes, static_cast<double>(bytes) / 1073741824.0, static_cast<double>(ceiling) / 1073741824.0);
}

std::int64_t shape_numel(const Shape& s) { return checked_numel(s, "shape_numel", "shape"); }

Shape contiguous_strides(const Shape& s) {
  checked_numel(s, "contiguous_strides", "shape");  // then no stride below overflows
  Shape st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) {
  if (s.size() == 1) return fmt::format("({},)", s[0]);
  return fmt::format("({})", fmt::join(s, ", "));
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    XGRAD_CHECK(da == db || da == 1 || db == 1,
                "{}: shapes {} and {} cannot be broadcast together (dimension {} is {} vs {})", op, shape_str(a),
                shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t ndim, const char* op, const Shape& shape) {
  XGRAD_CHECK(axis >= -ndim && axis < ndim && ndim > 0,
              "{}: axis {} is out of range for a tensor of shape {} ({} dimensions)", op, axis, shape_str(shape), ndim);
  return axis < 0 ? axis + ndim : axis;
}

std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, const Shape& shape, const char* op,
                                         bool empty_means_all) {
  const auto nd = static_cast<std::int64_t>(shape.size());
  std::vector<std::int64_t> out;
  if (axes.empty() && empty_means_all) {
    for (std::int64_t i = 0; i < nd; ++i) out.push_back(i);
    return out;
  }
  for (auto a : axes) out.push_back(normalize_axis(a, nd, op, shape));
  std::sort(out.begin(), out.end());
  XGRAD_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(),
              "{}: axis list [{}] names an axis twice (shape {})", op, fmt::join(axes, ", "), shape_str(shape));
  return out;
}

}  // namespace xgrad
