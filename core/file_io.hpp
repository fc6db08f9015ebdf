#pragma once
// File reading and writing shared by every xgrad loader and saver (load_npy, read_csv,
// load_safetensors, save_npy, save_safetensors, ...), so that they all refuse the same hostile
// inputs in the same way.
//
// Note [Hostile files]: a path handed to a loader may name anything. read_regular_file opens it
// with O_NONBLOCK (opening a FIFO that has no writer, or a device, must not block), checks with
// fstat that it is a regular file before reading a byte, and refuses anything else (FIFO,
// directory, character or block device, socket) at once. Every OS failure is reported with the OS
// reason (strerror text, e.g. "No such file or directory"). write_file_atomic never leaves a
// half-written file at the target: the bytes go to a temporary file in the same folder whose name
// stays within NAME_MAX whatever the target's name, is unique per call (threads and processes
// saving at once never share one; O_EXCL) and is renamed over the target only once complete.
#include <string>

namespace xgrad {

/// The OS's text for an errno value (strerror_r, thread-safe), e.g. "No such file or directory".
std::string errno_text(int err);

/// The whole content of the regular file at `path`. Errors (xgrad::Error naming `fn`, the function
/// that reads, and the path): the file cannot be opened (with the OS reason); it is not a regular
/// file (named: FIFO, directory, character device, ...; checked without blocking and before
/// reading); a read fails (with the OS reason); the file does not fit in memory.
std::string read_regular_file(const std::string& path, const char* fn);

/// Atomic file write used by every writer in xgrad: writes `bytes` to a temporary file in the same
/// folder (".<start of the target's name>.<16 hex digits>.tmp", at most 222 bytes, created with
/// O_EXCL and mode 0666 & ~umask), fsyncs it, renames it over `path` and fsyncs the folder. Any
/// `path` whose last component is a valid name (up to NAME_MAX bytes) can be written. An existing
/// `path` must be a regular file or a symbolic link (which is replaced, not followed): a folder,
/// FIFO or device is refused before anything is written (renaming over /dev/null as root would
/// replace the device). On any
/// failure the temporary file is removed and whatever was at `path` is left untouched; the
/// xgrad::Error names `fn` (the public function that writes), the path and the OS reason.
/// Thread-safe: concurrent writes to different or to the same path use different temporary files
/// (for the same path the last rename wins; every reader sees one complete version).
void write_file_atomic(const std::string& path, const std::string& bytes, const char* fn = "write_file_atomic");

}  // namespace xgrad
