#pragma once
// The IDX file format (the MNIST family's: yann.lecun.com/exdb/mnist), plain or gzip-compressed.
//
// An IDX file is a big-endian header, then the values in row-major order:
//   bytes 0-1  zero          byte 2  value type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
//                                                0x0D float32, 0x0E float64
//   byte 3     number of dims d (1..8)          then d big-endian uint32 dims, then the values.
//
// Note [Hostile IDX files]: a file is validated before anything is allocated from its header: the
// magic zeros, a known type code, 1 <= d <= 8, the header fitting in the file, each dim below
// 2^31, the element count and byte count computed with overflow checks (Note [Checked sizes]), and
// the file holding exactly header + values (no missing and no trailing bytes). A gzip file is read
// with read_regular_file (core/file_io.hpp: FIFOs and devices refused without blocking) and
// inflated with zlib up to kMaxDecompressedBytes, so a small "gzip bomb" cannot exhaust memory;
// read_idx also stops inflating at the size the file's IDX header declares, and refuses a bad header
// after its first inflated bytes (read_idx_bytes). A corrupt, truncated or trailing-garbage stream is
// refused. Every error is an xgrad::Error naming
// the function, the file and what is wrong.
#include <cstddef>
#include <string>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn::datasets {

/// The most bytes read_maybe_gzip inflates (1 GiB; Fashion-MNIST's largest file is 47 MB).
inline constexpr std::size_t kMaxDecompressedBytes = std::size_t{1} << 30;

/// The content of the regular file at `path`, inflated when it starts with the gzip magic (1f 8b).
/// Errors name `fn` and `path`: those of read_regular_file, a corrupt or truncated gzip stream,
/// bytes after its end, more than `max_bytes` once inflated.
std::string read_maybe_gzip(const std::string& path, const char* fn = "read_maybe_gzip",
                            std::size_t max_bytes = kMaxDecompressedBytes);

/// The bytes of the IDX file at `path`, inflated when it is gzip-compressed. Unlike read_maybe_gzip,
/// the inflation is bounded by the file's own IDX header: as soon as the header's bytes are inflated it
/// is validated (a wrong magic, type or dims is refused after a few bytes, not after inflating up to
/// the limit), and the stream is refused as soon as it passes the size the header declares (header +
/// values), or when that size is above kMaxDecompressedBytes. So a gzip bomb costs at most the memory
/// of the file it claims to be. Errors name `fn` and `path`. The result is checked in full by parse_idx.
std::string read_idx_bytes(const std::string& path, const char* fn = "read_idx_bytes");

/// Parses the bytes of an IDX file into a tensor of its dims holding its values converted to
/// `dtype` (float32 or float64; int32 values beyond 2^24 round in float32). `source` names the file
/// in error messages. Errors: see Note [Hostile IDX files].
Tensor parse_idx(const std::string& bytes, const std::string& source, Dtype dtype = kFloat32);

/// parse_idx(read_idx_bytes(path), path, dtype).
Tensor read_idx(const std::string& path, Dtype dtype = kFloat32);

}  // namespace xgrad::nn::datasets
