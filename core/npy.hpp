#pragma once
// NumPy .npy files (format versions 1.0-3.0), interoperable with numpy.load / numpy.save.
#include <string>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// Writes `t` as a little-endian C-order .npy ('<f4' or '<f8'). The write is atomic: a temporary
/// file in the same folder is written, flushed to disk and renamed over `path`, so a crash never
/// leaves a truncated file at `path`.
void save_npy(const std::string& path, const Tensor& t);

/// Reads a .npy file. float32 and float64 load as such; integer and bool arrays ('<i1'..'<i8',
/// '<u1'..'<u8', '|b1') load as float64 (exact for integers up to 2^53). Fortran order, big-endian
/// data, object arrays, a malformed header or a size that does not match the file throw
/// xgrad::Error naming the file and the reason.
Tensor load_npy(const std::string& path);

/// The same from/to memory (the bytes of a .npy file).
std::string to_npy_bytes(const Tensor& t);
Tensor from_npy_bytes(const std::string& bytes, const std::string& source_name = "<memory>");

/// Atomic file write used by every writer in xgrad: writes `bytes` to a uniquely named temporary
/// file in the same folder (unique name, O_EXCL), fsyncs it, renames it over `path` and fsyncs the folder. On
/// any failure the temporary file is removed and whatever was at `path` is left untouched; the
/// xgrad::Error names `fn` (the public function that writes) and the path.
void write_file_atomic(const std::string& path, const std::string& bytes, const char* fn = "write_file_atomic");

}  // namespace xgrad
