#pragma once
// xgrad::utils::CsvWriter: a metrics log, one CSV row per call, flushed as it goes so that a
// training run can be followed (or plotted) while it runs.
#include <cstdio>
#include <string>
#include <vector>

namespace xgrad::utils {

class CsvWriter {
 public:
  /// Creates (or truncates) `path` and writes the header line. Errors (xgrad::Error): no columns,
  /// a column name with a comma, quote or newline, a file that cannot be opened (with the OS reason;
  /// a FIFO without a reader fails at once instead of blocking).
  CsvWriter(const std::string& path, std::vector<std::string> columns);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;
  /// Appends one row (as many values as columns; printed with %.9g) and flushes it.
  void row(const std::vector<double>& values);
  const std::vector<std::string>& columns() const { return columns_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* file_ = nullptr;
};

/// Writes columns of equal length to `path` as a CSV with a header line, in one go and atomically
/// (write_file_atomic, core/file_io.hpp: a temporary file renamed over `path`).
/// Errors: names and columns differ in count, columns of different lengths, no columns, a column
/// name with a comma, quote or newline, the write_file_atomic errors (with the OS reason).
void write_csv(const std::string& path, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& columns);

}  // namespace xgrad::utils
