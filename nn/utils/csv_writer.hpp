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
  /// a column name with a comma, quote or newline, a file that cannot be opened (with the OS reason).
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

/// Writes columns of equal length to `path` as a CSV with a header line, atomically (a temporary
/// file renamed into place: a reader never sees half a file). Errors: no columns, names and columns
/// differ in count, columns of different lengths, a bad column name, a file that cannot be written.
void write_csv(const std::string& path, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& columns);

}  // namespace xgrad::utils
