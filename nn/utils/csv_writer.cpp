#include "xgrad/nn/utils/csv_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"

namespace xgrad::utils {

CsvWriter::CsvWriter(const std::string& path, std::vector<std::string> columns)
    : path_(path), columns_(std::move(columns)) {
  XGRAD_CHECK(!columns_.empty(), "CsvWriter: no columns for '{}'", path);
  for (const auto& c : columns_)
    XGRAD_CHECK(c.find_first_of(",\"\n\r") == std::string::npos,
                "CsvWriter: column name '{}' contains a comma, quote or newline", c);
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of blocking the open; it is
  // cleared afterwards so that rows written to a pipe with a reader block as usual. A regular file,
  // a character device (/dev/null, /dev/stdout) or a pipe with a reader may take the log; a folder
  // cannot be opened for writing (Note [Hostile files] in core/file_io.hpp).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    detail::throw_error(fmt::format("CsvWriter: cannot open '{}' for writing: {}", path, errno_text(err)));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    detail::throw_error(fmt::format("CsvWriter: cannot open '{}' for writing: {}", path, errno_text(err)));
  }
  for (std::size_t j = 0; j < columns_.size(); ++j) std::fprintf(file_, "%s%s", j ? "," : "", columns_[j].c_str());
  std::fputc('\n', file_);
  XGRAD_CHECK(std::fflush(file_) == 0, "CsvWriter: cannot write '{}': {}", path, errno_text(errno));
}

CsvWriter::~CsvWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvWriter::row(const std::vector<double>& values) {
  XGRAD_CHECK(values.size() == columns_.size(), "CsvWriter: row of {} values for the {} columns of '{}'", values.size(),
              columns_.size(), path_);
  for (std::size_t j = 0; j < values.size(); ++j) std::fprintf(file_, "%s%.9g", j ? "," : "", values[j]);
  std::fputc('\n', file_);
  XGRAD_CHECK(std::fflush(file_) == 0 && !std::ferror(file_), "CsvWriter: cannot write '{}': {}", path_,
              errno_text(errno));
}

void write_csv(const std::string& path, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& columns) {
  XGRAD_CHECK(names.size() == columns.size(), "write_csv: {} names for {} columns ('{}')", names.size(), columns.size(),
              path);
  const std::size_t rows = columns.empty() ? 0 : columns[0].size();
  for (std::size_t j = 0; j < columns.size(); ++j)
    XGRAD_CHECK(columns[j].size() == rows, "write_csv: column '{}' has {} values, column '{}' has {} ('{}')", names[j],
                columns[j].size(), names[0], rows, path);
  for (const auto& c : names)
    XGRAD_CHECK(c.find_first_of(",\"\n\r") == std::string::npos,
                "write_csv: column name '{}' contains a comma, quote or newline", c);
  XGRAD_CHECK(!names.empty(), "write_csv: no columns for '{}'", path);
  std::string text;
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (j) text += ',';
    text += names[j];
  }
  text += '\n';
  char buf[32];
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < columns.size(); ++j) {
      std::snprintf(buf, sizeof buf, "%s%.9g", j ? "," : "", columns[j][i]);
      text += buf;
    }
    text += '\n';
  }
  // All at once, atomically, like every xgrad writer (a temporary file renamed over `path`).
  write_file_atomic(path, text, "write_csv");
}

}  // namespace xgrad::utils
