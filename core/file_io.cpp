#include "xgrad/core/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf); the XSI one returns 0 and fills buf.
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return std::string(::strerror_r(err, buf, sizeof buf));
#else
  if (::strerror_r(err, buf, sizeof buf) != 0) return fmt::format("error {}", err);
  return std::string(buf);
#endif
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO (named pipe)";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "special file";
}

// Closes the descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A name unique per call: a per-process random seed (so two processes rarely collide), the pid
// (a forked child shares its parent's seed) and a counter, mixed by splitmix64. Collisions that
// remain are caught by O_EXCL and retried.
std::uint64_t unique_bits() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      s ^= (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {  // no entropy source: the clock, pid and counter still make names unique in practice
    }
    return s;
  }();
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t z = seed ^ (static_cast<std::uint64_t>(::getpid()) << 40) ^
                    (counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// At most 200 bytes of the target's name are kept: ".", 200, ".", 16 hex digits, ".tmp" = 222 bytes,
// within NAME_MAX (255) whatever the target's name.
constexpr std::size_t kTempStemBytes = 200;

}  // namespace

std::string read_regular_file(const std::string& path, const char* fn) {
  XGRAD_CHECK(!path.empty(), "{}: argument 'path' is empty", fn);
  // O_NONBLOCK: opening a FIFO without a writer (or some devices) would otherwise block forever.
  // O_NOCTTY: a terminal must not become our controlling terminal.
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (f.fd < 0) {
    const int err = errno;
    detail::throw_error(fmt::format("{}: cannot open '{}': {}", fn, path, errno_text(err)));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    const int err = errno;
    detail::throw_error(fmt::format("{}: cannot stat '{}': {}", fn, path, errno_text(err)));
  }
  XGRAD_CHECK(S_ISREG(st.st_mode), "{}: '{}' is not a regular file (it is a {})", fn, path, file_kind(st.st_mode));
  // Regular files ignore O_NONBLOCK, but clear it so reads behave exactly as plain blocking reads.
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);

  // st_size is a hint only (the file may change while we read, and some regular files such as
  // /proc entries report 0): read until end of file. One byte more than st_size lets the read that
  // sees the end of file happen without growing the buffer.
  std::string out;
  std::size_t used = 0;
  const auto grow = [&](std::size_t n) {
    // Past memory and swap the size is refused before asking for it (a sanitizer runtime would abort
    // on such a request instead of throwing std::bad_alloc).
    check_host_memory(n, fn, "file size");
    try {
      out.resize(n);
    } catch (const std::exception&) {  // bad_alloc, length_error: a file too large for memory
      detail::throw_error(fmt::format("{}: '{}' ({} bytes) is too large to read into memory", fn, path,
                                      std::max<std::size_t>(used, static_cast<std::size_t>(st.st_size))));
    }
  };
  grow(st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : std::size_t{1} << 16);
  for (;;) {
    if (used == out.size()) grow(out.size() * 2);
    const auto r = ::read(f.fd, out.data() + used, out.size() - used);
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      detail::throw_error(fmt::format("{}: reading '{}' failed: {}", fn, path, errno_text(err)));
    }
    if (r == 0) break;
    used += static_cast<std::size_t>(r);
  }
  out.resize(used);
  return out;
}

void write_file_atomic(const std::string& path, const std::string& bytes, const char* fn) {
  XGRAD_CHECK(!path.empty() && path.back() != '/', "{}: argument 'path' ('{}') is not a file name", fn, path);
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  XGRAD_CHECK(base != "." && base != "..", "{}: argument 'path' ('{}') is not a file name", fn, path);
  XGRAD_CHECK(base.size() <= NAME_MAX, "{}: cannot write '{}': {} (its last component has {} bytes, NAME_MAX is {})",
              fn, path, errno_text(ENAMETOOLONG), base.size(), NAME_MAX);
  // Only a regular file (or a symbolic link, which the rename replaces) may be replaced: renaming over
  // a device such as /dev/null (as root) would destroy it, and a folder or FIFO is surely a mistake.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    detail::throw_error(fmt::format("{}: cannot write '{}': it exists and is not a regular file (it is a {})", fn, path,
                                    file_kind(st.st_mode)));
  // Created with O_EXCL and mode 0666 so the umask applies as for any new file. (mkostemp would
  // force 0600, and reading the umask to fix that means changing it, which races with other
  // threads creating files.)
  std::string stem = dir;
  stem.push_back('.');
  stem.append(base, 0, kTempStemBytes);
  stem.push_back('.');
  std::string tmp;
  int fd = -1, err = 0;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = stem + fmt::format("{:016x}.tmp", unique_bits());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    err = errno;
    if (fd < 0 && err != EEXIST) break;
  }
  XGRAD_CHECK(fd >= 0, "{}: cannot create a temporary file next to '{}': {}", fn, path, errno_text(err));
  auto fail = [&](const char* what, int e, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    detail::throw_error(fmt::format("{}: {} '{}' failed: {}", fn, what, path, errno_text(e)));
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming the temporary file into", errno, false);
  Fd d;
  d.fd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd >= 0) (void)::fsync(d.fd);  // the data is in place; a folder that cannot be synced only weakens durability
}

}  // namespace xgrad
