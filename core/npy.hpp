#pragma once
// NumPy .npy files (format versions 1.0-3.0), interoperable with numpy.load / numpy.save.
#include <string>

#include "xgrad/core/file_io.hpp"  // write_file_atomic, read_regular_file (used by every loader and saver)
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// Writes `t` as a little-endian C-order .npy: '<f4', '<f8', '<i8', '<i4', '|u1' or '|b1' by dtype. The write is atomic
/// (write_file_atomic, core/file_io.hpp): a temporary file in the same folder is written, flushed to
/// disk and renamed over `path`, so a crash never leaves a truncated file at `path`; any valid file
/// name (up to NAME_MAX bytes) can be written. Errors name the path and the OS reason.
void save_npy(const std::string& path, const Tensor& t);

/// Reads a .npy file. float32, float64, int64 ('<i8'), int32 ('<i4'), uint8 ('|u1') and bool ('|b1')
/// arrays load in their own dtype; the other integer widths ('<i1', '<i2', '<u2', '<u4', '<u8') load
/// as float64 (exact up to 2^53). Fortran order, big-endian
/// data, object arrays, a malformed header (parsed in one linear pass as the Python dict literal
/// numpy writes: exactly the keys 'descr', 'fortran_order' and 'shape', each once; at most 64
/// dimensions), a shape whose element count overflows 64 bits or a size that does not match the
/// file throw xgrad::Error naming the file and the reason. A path that is not a regular file (FIFO,
/// directory, device) is refused without blocking, and a file that cannot be opened is reported
/// with the OS reason (read_regular_file, core/file_io.hpp).
Tensor load_npy(const std::string& path);

/// The same from/to memory (the bytes of a .npy file).
std::string to_npy_bytes(const Tensor& t);
Tensor from_npy_bytes(const std::string& bytes, const std::string& source_name = "<memory>");

}  // namespace xgrad
