#include "xgrad/nn/utils/csv_writer.hpp"

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
  file_ = std::fopen(path.c_str(), "w");
  XGRAD_CHECK(file_ != nullptr, "CsvWriter: cannot open '{}' for writing: {}", path, std::strerror(errno));
  for (std::size_t j = 0; j < columns_.size(); ++j) std::fprintf(file_, "%s%s", j ? "," : "", columns_[j].c_str());
  std::fputc('\n', file_);
  XGRAD_CHECK(std::fflush(file_) == 0, "CsvWriter: cannot write '{}': {}", path, std::strerror(errno));
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
              std::strerror(errno));
}

void write_csv(const std::string& path, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& columns) {
  XGRAD_CHECK(!names.empty(), "write_csv: no columns for '{}'", path);
  XGRAD_CHECK(names.size() == columns.size(), "write_csv: {} names for {} columns ('{}')", names.size(),
              columns.size(), path);
  const std::size_t rows = columns[0].size();
  for (std::size_t j = 0; j < columns.size(); ++j)
    XGRAD_CHECK(columns[j].size() == rows, "write_csv: column '{}' has {} values, column '{}' has {} ('{}')", names[j],
                columns[j].size(), names[0], rows, path);
  std::string text;
  for (std::size_t j = 0; j < names.size(); ++j) {
    XGRAD_CHECK(names[j].find_first_of(",\"\n\r") == std::string::npos,
                "write_csv: column name '{}' contains a comma, quote or newline", names[j]);
    text += (j ? "," : "") + names[j];
  }
  text += '\n';
  char buf[32];
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < columns.size(); ++j) {
      std::snprintf(buf, sizeof buf, "%.9g", columns[j][i]);
      if (j) text += ',';
      text += buf;
    }
    text += '\n';
  }
  // All or nothing, like every xgrad writer (a temporary file renamed into place).
  write_file_atomic(path, text, "write_csv");
}

}  // namespace xgrad::utils
