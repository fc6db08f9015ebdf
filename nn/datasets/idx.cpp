#include "xgrad/nn/datasets/idx.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"

namespace xgrad::nn::datasets {

namespace {

// How many bytes the inflated stream may have, decided from its first bytes: 0 while undecided. May
// throw (a prefix that is no valid start of the expected format).
using InflateLimit = std::function<std::size_t(const std::string& prefix)>;

std::string inflate_gzip(const std::string& in, const std::string& path, const char* fn, std::size_t max_bytes,
                         const InflateLimit& limit_from_prefix = {}) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip header and trailer (CRC-32 and length are checked by zlib).
  XGRAD_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "{}: '{}': zlib could not be initialised", fn, path);
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  std::string out;
  std::array<char, 1 << 16> buf{};
  std::size_t consumed = 0;
  std::size_t declared = 0;  // from limit_from_prefix, once decided
  int rc = Z_OK;
  for (;;) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      const std::size_t chunk = std::min<std::size_t>(in.size() - consumed, std::numeric_limits<uInt>::max());
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + consumed));
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    XGRAD_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, "{}: '{}' is not a valid gzip file ({})", fn,
                path, zs.msg != nullptr ? std::string(zs.msg) : "zlib error " + std::to_string(rc));
    const std::size_t produced = buf.size() - zs.avail_out;
    XGRAD_CHECK(out.size() + produced <= max_bytes, "{}: '{}' inflates to more than {} bytes (refused)", fn, path,
                max_bytes);
    out.append(buf.data(), produced);
    if (limit_from_prefix && declared == 0) {
      declared = limit_from_prefix(out);
    }
    XGRAD_CHECK(declared == 0 || out.size() <= declared,
                "{}: '{}' inflates to more than the {} bytes its header declares (refused after {} bytes)", fn, path,
                declared, out.size());
    if (rc == Z_STREAM_END) break;
    // No output and no input left: the stream stops before its end.
    if (produced == 0 && zs.avail_in == 0 && consumed == in.size()) break;
  }
  XGRAD_CHECK(rc == Z_STREAM_END, "{}: '{}' is a truncated gzip file (the stream ends after {} compressed bytes)", fn,
              path, in.size());
  const std::size_t trailing = zs.avail_in + (in.size() - consumed);
  XGRAD_CHECK(trailing == 0, "{}: '{}' has {} bytes after the end of its gzip stream", fn, path, trailing);
  return out;
}

struct IdxType {
  unsigned char code;
  const char* name;
  std::int64_t size;
};
constexpr std::array<IdxType, 6> kTypes{{{0x08, "uint8", 1},
                                         {0x09, "int8", 1},
                                         {0x0B, "int16", 2},
                                         {0x0C, "int32", 4},
                                         {0x0D, "float32", 4},
                                         {0x0E, "float64", 8}}};

std::uint64_t be(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

template <class T>
void decode(const unsigned char* src, std::int64_t n, unsigned char code, T* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    switch (code) {
      case 0x08:
        dst[i] = static_cast<T>(src[i]);
        break;
      case 0x09:
        dst[i] = static_cast<T>(static_cast<std::int8_t>(src[i]));
        break;
      case 0x0B:
        dst[i] = static_cast<T>(static_cast<std::int16_t>(be(src + 2 * i, 2)));
        break;
      case 0x0C:
        dst[i] = static_cast<T>(static_cast<std::int32_t>(be(src + 4 * i, 4)));
        break;
      case 0x0D: {
        const auto bits = static_cast<std::uint32_t>(be(src + 4 * i, 4));
        float f;
        std::memcpy(&f, &bits, 4);
        dst[i] = static_cast<T>(f);
        break;
      }
      default: {
        const std::uint64_t bits = be(src + 8 * i, 8);
        double d;
        std::memcpy(&d, &bits, 8);
        dst[i] = static_cast<T>(d);
        break;
      }
    }
  }
}

}  // namespace

std::string read_maybe_gzip(const std::string& path, const char* fn, std::size_t max_bytes) {
  std::string raw = read_regular_file(path, fn);
  if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b)
    return inflate_gzip(raw, path, fn, max_bytes);
  XGRAD_CHECK(raw.size() <= max_bytes, "{}: '{}' has more than {} bytes (refused)", fn, path, max_bytes);
  return raw;
}

namespace {

struct IdxHeader {
  const IdxType* type = nullptr;
  Shape shape;
  std::int64_t numel = 0, header_bytes = 0, total_bytes = 0;  // total: header + values
};

// Validates the IDX header at p (`size` bytes available; `complete`: they are the whole file, for the
// messages). Returns false when fewer bytes than the header are available and the file may go on
// (only when !complete); throws on anything invalid.
bool read_header(const unsigned char* p, std::int64_t size, bool complete, const std::string& source, IdxHeader& h) {
  constexpr const char* fn = "parse_idx";
  if (!complete && size < 4) return false;
  XGRAD_CHECK(size >= 4, "{}: '{}' is not an IDX file: {} bytes, shorter than the 4-byte magic", fn, source, size);
  XGRAD_CHECK(p[0] == 0 && p[1] == 0, "{}: '{}' is not an IDX file: its magic starts {:02x} {:02x}, not 00 00", fn,
              source, p[0], p[1]);
  for (const auto& t : kTypes)
    if (t.code == p[2]) h.type = &t;
  XGRAD_CHECK(h.type != nullptr, "{}: '{}' has unknown IDX value type 0x{:02x}", fn, source, p[2]);
  const int ndim = p[3];
  XGRAD_CHECK(ndim >= 1 && ndim <= 8, "{}: '{}' declares {} dims (an IDX file has 1 to 8)", fn, source, ndim);
  h.header_bytes = 4 + 4 * static_cast<std::int64_t>(ndim);
  if (!complete && size < h.header_bytes) return false;
  XGRAD_CHECK(size >= h.header_bytes, "{}: '{}' is truncated: {} bytes, but its {} dims need a {}-byte header", fn,
              source, size, ndim, h.header_bytes);
  h.shape.clear();
  for (int d = 0; d < ndim; ++d) {
    const std::uint64_t dim = be(p + 4 + 4 * d, 4);
    XGRAD_CHECK(dim <= static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()),
                "{}: '{}': dim {} is {}, not below 2^31", fn, source, d, dim);
    h.shape.push_back(static_cast<std::int64_t>(dim));
  }
  // Checked products (Note [Checked sizes]), with the file in the message.
  std::int64_t numel = 1, payload = 0;
  for (auto d : h.shape)
    XGRAD_CHECK(!__builtin_mul_overflow(numel, d, &numel), "{}: '{}': dims {} hold more than 2^63 values", fn, source,
                shape_str(h.shape));
  XGRAD_CHECK(!__builtin_mul_overflow(numel, h.type->size, &payload) &&
                  !__builtin_add_overflow(h.header_bytes, payload, &h.total_bytes),
              "{}: '{}': {} values of {} (shape {}) need more than 2^63 bytes", fn, source, numel, h.type->name,
              shape_str(h.shape));
  h.numel = numel;
  return true;
}

}  // namespace

Tensor parse_idx(const std::string& bytes, const std::string& source, Dtype dtype) {
  constexpr const char* fn = "parse_idx";
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<std::int64_t>(bytes.size());
  IdxHeader h;
  (void)read_header(p, size, /*complete=*/true, source, h);
  XGRAD_CHECK(size == h.total_bytes,
              "{}: '{}' has {} bytes but its header ({} values of {}, shape {}) needs exactly {}", fn, source, size,
              h.numel, h.type->name, shape_str(h.shape), h.total_bytes);
  XGRAD_CHECK(dtype == kFloat32 || dtype == kFloat64, "{}: argument 'dtype' must be float32 or float64, got {}", fn,
              dtype);
  Tensor t = Tensor::empty(h.shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    decode(p + h.header_bytes, h.numel, h.type->code, t.data<T>());
  });
  return t;
}

std::string read_idx_bytes(const std::string& path, const char* fn) {
  const std::string raw = read_regular_file(path, fn);
  if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b)
    return inflate_gzip(raw, path, fn, kMaxDecompressedBytes, [&](const std::string& prefix) -> std::size_t {
      IdxHeader h;
      try {
        if (!read_header(reinterpret_cast<const unsigned char*>(prefix.data()),
                         static_cast<std::int64_t>(prefix.size()), /*complete=*/false, path, h))
          return 0;
      } catch (const Error& e) {
        detail::throw_error(fmt::format("{}: {} (in the gzip stream's first {} bytes)", fn, e.what(), prefix.size()));
      }
      // A header declaring more than can be inflated is refused now, not after inflating the limit.
      XGRAD_CHECK(static_cast<std::uint64_t>(h.total_bytes) <= kMaxDecompressedBytes,
                  "{}: '{}': its IDX header declares {} bytes ({} values of {}, shape {}), more than the {} bytes "
                  "a gzip file may inflate to",
                  fn, path, h.total_bytes, h.numel, h.type->name, shape_str(h.shape), kMaxDecompressedBytes);
      return static_cast<std::size_t>(h.total_bytes);
    });
  XGRAD_CHECK(raw.size() <= kMaxDecompressedBytes, "{}: '{}' has more than {} bytes (refused)", fn, path,
              kMaxDecompressedBytes);
  return raw;
}

Tensor read_idx(const std::string& path, Dtype dtype) {
  return parse_idx(read_idx_bytes(path, "read_idx"), path, dtype);
}

}  // namespace xgrad::nn::datasets
