#include "xgrad/core/npy.hpp"

#include <fmt/ranges.h>  // shapes (std::vector) in error messages

#include <algorithm>
#include <cstring>
#include <limits>

#include "xgrad/core/file_io.hpp"

namespace xgrad {

namespace {
constexpr char kMagic[] = "\x93NUMPY";

// numpy's descr of each dtype (little-endian; one-byte types have no byte order).
const char* npy_descr(Dtype d) {
  switch (d) {
    case Dtype::float32:
      return "<f4";
    case Dtype::float64:
      return "<f8";
    case Dtype::int64:
      return "<i8";
    case Dtype::int32:
      return "<i4";
    case Dtype::uint8:
      return "|u1";
    case Dtype::bool_:
      return "|b1";
  }
  return "<f8";
}

std::string header_dict(const Tensor& t) {
  std::string shape;
  if (t.dim() == 1)
    shape = fmt::format("({},)", t.shape()[0]);
  else
    shape = fmt::format("({})", fmt::join(t.shape(), ", "));
  return fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(t.dtype()), shape);
}

// The header dict numpy writes, e.g. {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }.
struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// NumPy 2's limit on the number of dimensions (NPY_MAXDIMS); also bounds the work a hostile
// shape can cause.
constexpr std::size_t kMaxDims = 64;

[[noreturn]] void bad(const std::string& src, const std::string& why) {
  detail::throw_error(fmt::format("load_npy: '{}' is not a valid .npy file: {}", src, why));
}

// At most 40 bytes of header text around position i, for error messages.
std::string excerpt(const std::string& h, std::size_t i) {
  const std::size_t n = std::min<std::size_t>(40, h.size() - std::min(i, h.size()));
  std::string out;
  for (char c : h.substr(std::min(i, h.size()), n))
    out += (c >= 32 && c < 127) ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  return out;
}

// Parses the header as the Python literal it is (numpy reads it with ast.literal_eval and then
// requires exactly these keys): a dict with the keys 'descr' (a string), 'fortran_order' (True or
// False) and 'shape' (a tuple of non-negative integers), each exactly once, in any order, with
// optional whitespace between tokens and an optional trailing comma; only whitespace may follow.
// Strings are single- or double-quoted without escapes. One pass over the header: linear time.
class HeaderParser {
 public:
  HeaderParser(const std::string& h, const std::string& src) : h_(h), src_(src) {}

  Header parse() {
    Header out;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    expect('{', "the header is not a dict");
    skip_ws();
    while (peek() != '}') {
      const std::size_t key_at = i_;
      const std::string key = string_literal("a dict key");
      skip_ws();
      expect(':', fmt::format("no ':' after the key '{}'", key));
      skip_ws();
      bool* seen = nullptr;
      if (key == "descr") {
        seen = &have_descr;
        if (peek() != '\'' && peek() != '"') bad(src_, "'descr' is not a string");
        out.descr = string_literal("'descr'");
      } else if (key == "fortran_order") {
        seen = &have_fortran;
        if (h_.compare(i_, 4, "True") == 0) {
          out.fortran = true;
          i_ += 4;
        } else if (h_.compare(i_, 5, "False") == 0) {
          out.fortran = false;
          i_ += 5;
        } else {
          bad(src_, "'fortran_order' is neither True nor False");
        }
      } else if (key == "shape") {
        seen = &have_shape;
        out.shape = shape_tuple();
      } else {
        bad(src_, fmt::format("unknown key '{}' in the header (only 'descr', 'fortran_order' and 'shape' are allowed)",
                              excerpt(key, 0)));
      }
      if (*seen) bad(src_, fmt::format("duplicate key '{}' in the header (at byte {})", key, key_at));
      *seen = true;
      skip_ws();
      if (peek() == ',') {
        ++i_;
        skip_ws();
      } else if (peek() != '}') {
        bad(src_, fmt::format("expected ',' or '}}' after the value of '{}', found '{}'", key, excerpt(h_, i_)));
      }
    }
    ++i_;  // '}'
    skip_ws();
    if (i_ != h_.size()) bad(src_, fmt::format("unexpected text after the header dict: '{}'", excerpt(h_, i_)));
    if (!have_descr) bad(src_, "header has no 'descr' key");
    if (!have_fortran) bad(src_, "header has no 'fortran_order' key");
    if (!have_shape) bad(src_, "header has no 'shape' key");
    return out;
  }

 private:
  char peek() const { return i_ < h_.size() ? h_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < h_.size() && (h_[i_] == ' ' || h_[i_] == '\t' || h_[i_] == '\n' || h_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& why) {
    if (peek() != c) bad(src_, i_ >= h_.size() ? why + " (the header ends early)" : why);
    ++i_;
  }
  std::string string_literal(const char* what) {
    const char q = peek();
    if (q != '\'' && q != '"')
      bad(src_, fmt::format("expected {} (a quoted string), found '{}'", what, excerpt(h_, i_)));
    const auto e = h_.find(q, i_ + 1);
    if (e == std::string::npos) bad(src_, fmt::format("unterminated string in {}", what));
    std::string out = h_.substr(i_ + 1, e - i_ - 1);
    if (out.find('\\') != std::string::npos || out.find('\n') != std::string::npos)
      bad(src_, fmt::format("{} '{}' has an escape or a line break (not supported)", what, excerpt(out, 0)));
    i_ = e + 1;
    return out;
  }
  // (d0, d1, ...) with a trailing comma, required for one element as in Python: "(3,)". "()" is 0-d.
  Shape shape_tuple() {
    if (peek() != '(') bad(src_, fmt::format("'shape' is not a tuple: '{}'", excerpt(h_, i_)));
    const std::size_t start = i_;
    ++i_;
    Shape shape;
    bool trailing_comma = false;
    skip_ws();
    while (peek() != ')') {
      if (i_ >= h_.size()) bad(src_, "unterminated 'shape'");
      if (peek() < '0' || peek() > '9')
        bad(src_, fmt::format("bad dimension in shape '{}': not a non-negative integer", excerpt(h_, start)));
      if (peek() == '0' && i_ + 1 < h_.size() && h_[i_ + 1] >= '0' && h_[i_ + 1] <= '9')
        bad(src_, fmt::format("bad dimension in shape '{}': leading zero (not a Python integer)", excerpt(h_, start)));
      std::int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(v, std::int64_t{10}, &v) || __builtin_add_overflow(v, peek() - '0', &v))
          bad(src_, fmt::format("dimension in shape '{}' does not fit in 64 bits", excerpt(h_, start)));
        ++i_;
      }
      if (shape.size() == kMaxDims)
        bad(src_, fmt::format("shape '{}' has more than {} dimensions", excerpt(h_, start), kMaxDims));
      shape.push_back(v);
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
        skip_ws();
      } else if (peek() != ')') {
        bad(src_, fmt::format("bad shape '{}'", excerpt(h_, start)));
      }
    }
    ++i_;  // ')'
    if (shape.size() == 1 && !trailing_comma)
      bad(src_, fmt::format("'shape' is not a tuple: '{}' is a parenthesised integer (write '({},)')",
                            excerpt(h_, start), shape[0]));
    return shape;
  }

  const std::string& h_;
  const std::string& src_;
  std::size_t i_ = 0;
};

template <class S>
void convert_to_double(const char* src, double* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * static_cast<std::int64_t>(sizeof(S)), sizeof(S));
    dst[i] = static_cast<double>(v);
  }
}
}  // namespace

std::string to_npy_bytes(const Tensor& t) {
  XGRAD_CHECK(t.defined(), "save_npy: tensor is undefined");
  std::string dict = header_dict(t);
  // magic(6) + version(2) + len(2) + dict + padding + '\n' must be a multiple of 64.
  std::size_t total = 10 + dict.size() + 1;
  const std::size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  const auto len = static_cast<std::uint16_t>(dict.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += dict;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

Tensor from_npy_bytes(const std::string& b, const std::string& src) {
  if (b.size() < 10 || b.compare(0, 6, kMagic, 6) != 0) bad(src, "missing the \\x93NUMPY magic string");
  const auto major = static_cast<unsigned char>(b[6]);
  std::size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(b[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) bad(src, "truncated header length");
    for (int i = 0; i < 4; ++i) hlen |= static_cast<std::size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    bad(src, fmt::format("unsupported format version {}", major));
  }
  if (b[7] != 0)  // numpy writes and reads only versions 1.0, 2.0 and 3.0
    bad(src, fmt::format("unsupported format version {}.{}", major, static_cast<unsigned char>(b[7])));
  if (hlen > b.size() - hstart) bad(src, fmt::format("header length {} runs past the end of the file", hlen));
  const std::string header = b.substr(hstart, hlen);
  const Header h = HeaderParser(header, src).parse();
  if (h.fortran) bad(src, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  std::int64_t n = 1;
  for (auto d : h.shape) {
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      bad(src, fmt::format("shape {} overflows: more than 2^63 - 1 elements", shape_str(h.shape)));
    n *= d;
  }
  const std::string& dsc = h.descr;
  std::size_t item = 0;
  char kind = 0;
  if (dsc.size() == 3 && (dsc[0] == '<' || dsc[0] == '|' || dsc[0] == '=')) {  // every supported one is 3 chars
    kind = dsc[1];
    item = static_cast<std::size_t>(std::atoi(dsc.c_str() + 2));
  } else if (dsc.size() >= 3 && dsc[0] == '>') {
    bad(src, fmt::format("big-endian dtype '{}' is not supported", excerpt(dsc, 0)));
  } else {
    bad(src, fmt::format("unsupported dtype '{}'", excerpt(dsc, 0)));
  }
  const bool ok_kind = (kind == 'f' && (item == 4 || item == 8)) ||
                       ((kind == 'i' || kind == 'u') && (item == 1 || item == 2 || item == 4 || item == 8)) ||
                       (kind == 'b' && item == 1);
  if (!ok_kind) bad(src, fmt::format("unsupported dtype '{}' (float32/64, integers and bool are)", dsc));
  const std::size_t data_start = hstart + hlen;
  // A hostile shape can make n * item wrap around to the file's data size: check before multiplying.
  if (static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max() / item)
    bad(src, fmt::format("shape {} of '{}' is too large", shape_str(h.shape), dsc));
  const std::size_t need = static_cast<std::size_t>(n) * item;
  if (b.size() - data_start != need)
    bad(src, fmt::format("shape {} of '{}' needs {} data bytes but the file has {}", shape_str(h.shape), dsc, need,
                         b.size() - data_start));
  const char* p = b.data() + data_start;
  if (kind == 'f' || (kind == 'i' && (item == 8 || item == 4)) || (kind == 'u' && item == 1)) {
    const Dtype dt = kind == 'f'   ? (item == 4 ? kFloat32 : kFloat64)
                     : kind == 'u' ? kUInt8
                                   : (item == 8 ? kInt64 : kInt32);
    Tensor t = Tensor::empty(h.shape, dt);
    if (need) std::memcpy(t.raw_data(), p, need);
    return t;
  }
  if (kind == 'b') {  // bytes other than 0 and 1 (numpy never writes them) are read as != 0
    Tensor t = Tensor::empty(h.shape, kBool);
    bool* o = t.data<bool>();
    for (std::int64_t i = 0; i < n; ++i) o[i] = p[i] != 0;
    return t;
  }
  // The other integer widths have no xgrad dtype: float64 (exact up to 2^53).
  Tensor t = Tensor::empty(h.shape, kFloat64);
  double* d = t.data<double>();
  if (kind == 'u' && item == 2)
    convert_to_double<std::uint16_t>(p, d, n);
  else if (kind == 'u' && item == 4)
    convert_to_double<std::uint32_t>(p, d, n);
  else if (kind == 'u')
    convert_to_double<std::uint64_t>(p, d, n);
  else if (item == 1)
    convert_to_double<std::int8_t>(p, d, n);
  else
    convert_to_double<std::int16_t>(p, d, n);
  return t;
}

void save_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, to_npy_bytes(t), "save_npy"); }

Tensor load_npy(const std::string& path) { return from_npy_bytes(read_regular_file(path, "load_npy"), path); }

}  // namespace xgrad
