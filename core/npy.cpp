#include "xgrad/core/npy.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>  // shapes (std::vector) in error messages
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace xgrad {

namespace {
constexpr char kMagic[] = "\x93NUMPY";

std::string header_dict(const Tensor& t) {
  std::string shape;
  if (t.dim() == 1)
    shape = fmt::format("({},)", t.shape()[0]);
  else
    shape = fmt::format("({})", fmt::join(t.shape(), ", "));
  return fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", t.dtype() == kFloat32 ? "<f4" : "<f8",
                     shape);
}

// Tiny parser for the header dict written by numpy: {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

[[noreturn]] void bad(const std::string& src, const std::string& why) {
  detail::throw_error(fmt::format("load_npy: '{}' is not a valid .npy file: {}", src, why));
}

std::size_t find_key(const std::string& h, const std::string& key, const std::string& src) {
  auto p = h.find("'" + key + "'");
  if (p == std::string::npos) p = h.find('"' + key + '"');  // Python accepts either quote
  if (p == std::string::npos) bad(src, fmt::format("header has no '{}' key", key));
  const auto c = h.find(':', p);
  if (c == std::string::npos) bad(src, fmt::format("no ':' after '{}'", key));
  auto v = c + 1;
  while (v < h.size() && h[v] == ' ') ++v;
  return v;
}

Header parse_header(const std::string& h, const std::string& src) {
  Header out;
  auto v = find_key(h, "descr", src);
  if (v >= h.size() || (h[v] != '\'' && h[v] != '"')) bad(src, "'descr' is not a string");
  const auto e = h.find(h[v], v + 1);
  if (e == std::string::npos) bad(src, "unterminated 'descr'");
  out.descr = h.substr(v + 1, e - v - 1);
  v = find_key(h, "fortran_order", src);
  if (h.compare(v, 4, "True") == 0)
    out.fortran = true;
  else if (h.compare(v, 5, "False") != 0)
    bad(src, "'fortran_order' is neither True nor False");
  v = find_key(h, "shape", src);
  if (v >= h.size() || h[v] != '(') bad(src, "'shape' is not a tuple");
  const auto close = h.find(')', v);
  if (close == std::string::npos) bad(src, "unterminated 'shape'");
  std::string inner = h.substr(v + 1, close - v - 1);
  std::size_t pos = 0;
  while (pos < inner.size()) {
    while (pos < inner.size() && (inner[pos] == ' ' || inner[pos] == ',')) ++pos;
    if (pos >= inner.size()) break;
    std::size_t end = pos;
    while (end < inner.size() && inner[end] >= '0' && inner[end] <= '9') ++end;
    if (end == pos || end - pos > 15) bad(src, fmt::format("bad dimension in shape '({})'", inner));
    out.shape.push_back(std::stoll(inner.substr(pos, end - pos)));
    pos = end;
    while (pos < inner.size() && inner[pos] == ' ') ++pos;
    if (pos < inner.size() && inner[pos] != ',') bad(src, fmt::format("bad shape '({})'", inner));
  }
  return out;
}

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
  if (hlen > b.size() - hstart) bad(src, fmt::format("header length {} runs past the end of the file", hlen));
  const Header h = parse_header(b.substr(hstart, hlen), src);
  if (h.fortran) bad(src, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  std::int64_t n = 1;
  for (auto d : h.shape) {
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) bad(src, "shape overflows");
    n *= d;
  }
  const std::string& dsc = h.descr;
  std::size_t item = 0;
  char kind = 0;
  if (dsc.size() == 3 && (dsc[0] == '<' || dsc[0] == '|' || dsc[0] == '=')) {  // every supported one is 3 chars
    kind = dsc[1];
    item = static_cast<std::size_t>(std::atoi(dsc.c_str() + 2));
  } else if (dsc.size() >= 3 && dsc[0] == '>') {
    bad(src, fmt::format("big-endian dtype '{}' is not supported", dsc));
  } else {
    bad(src, fmt::format("unsupported dtype '{}'", dsc));
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
  if (kind == 'f') {
    Tensor t = Tensor::empty(h.shape, item == 4 ? kFloat32 : kFloat64);
    if (need) std::memcpy(t.raw_data(), p, need);
    return t;
  }
  Tensor t = Tensor::empty(h.shape, kFloat64);
  double* d = t.data<double>();
  if (kind == 'b' || (kind == 'u' && item == 1))
    convert_to_double<std::uint8_t>(p, d, n);
  else if (kind == 'u' && item == 2)
    convert_to_double<std::uint16_t>(p, d, n);
  else if (kind == 'u' && item == 4)
    convert_to_double<std::uint32_t>(p, d, n);
  else if (kind == 'u')
    convert_to_double<std::uint64_t>(p, d, n);
  else if (item == 1)
    convert_to_double<std::int8_t>(p, d, n);
  else if (item == 2)
    convert_to_double<std::int16_t>(p, d, n);
  else if (item == 4)
    convert_to_double<std::int32_t>(p, d, n);
  else
    convert_to_double<std::int64_t>(p, d, n);
  return t;
}

namespace {
std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes, const char* fn) {
  XGRAD_CHECK(!path.empty() && path.back() != '/', "{}: argument 'path' ('{}') is not a file name", fn, path);
  // A unique temporary name (process, per-process counter), created with O_EXCL and mode 0666 so the
  // umask applies as for any new file. (mkostemp would force 0600, and reading the umask to fix that
  // means changing it, which races with other threads creating files.)
  static std::atomic<std::uint64_t> counter{0};
  std::string tmpl;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmpl = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd = ::open(tmpl.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  XGRAD_CHECK(fd >= 0, "{}: cannot create a temporary file next to '{}': {}", fn, path, std::strerror(errno));
  auto fail = [&](const char* what, int err, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmpl.c_str());
    detail::throw_error(fmt::format("{}: {} '{}' failed: {}", fn, what, path, std::strerror(err)));
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("writing", w < 0 ? errno : EIO, true);
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) fail("flushing", errno, true);
  if (::close(fd) != 0) fail("closing", errno, false);
  if (::rename(tmpl.c_str(), path.c_str()) != 0) fail("renaming the temporary file into", errno, false);
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // the data is in place; a folder that cannot be synced only weakens durability
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void save_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, to_npy_bytes(t), "save_npy"); }

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  XGRAD_CHECK(in.good(), "load_npy: cannot open '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_npy_bytes(ss.str(), path);
}

}  // namespace xgrad
