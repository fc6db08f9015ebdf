#pragma once
// CSV output and gnuplot plots for the examples. Plots are PNGs drawn by gnuplot (Debian's
// gnuplot-nox, installed by scripts/install-deps.sh); when gnuplot is missing the CSVs are still
// written and a note says how to draw them.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "xgrad/core/file_io.hpp"

namespace examples {

/// Writes columns of equal length as a CSV with a header line.
inline void write_csv(const std::filesystem::path& path, const std::vector<std::string>& names,
                      const std::vector<std::vector<double>>& columns) {
  if (names.size() != columns.size()) throw std::invalid_argument("write_csv: names and columns differ in count");
  const std::size_t rows = columns.empty() ? 0 : columns[0].size();
  for (const auto& c : columns)
    if (c.size() != rows) throw std::invalid_argument("write_csv: columns of different lengths for " + path.string());
  std::string text;
  for (std::size_t j = 0; j < names.size(); ++j) text += (j ? "," : "") + names[j];
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
  // Atomic, like every xgrad writer: errors (xgrad::Error) name the path and the OS reason.
  xgrad::write_file_atomic(path.string(), text, "write_csv");
}

/// Runs a gnuplot script (written next to the plots, so a user can edit and rerun it) in `dir`.
/// Returns false (after printing why) when gnuplot is not available or fails.
inline bool run_gnuplot(const std::filesystem::path& dir, const std::string& name, const std::string& script) {
  const std::filesystem::path gp = dir / (name + ".gp");
  xgrad::write_file_atomic(gp.string(),
                           "set datafile separator ','\nset key autotitle columnhead\nset grid\n"
                           "set terminal pngcairo size 1200,700 font ',11' noenhanced\n" +
                               script,
                           "run_gnuplot");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::printf("  gnuplot not found: CSVs written; draw with `gnuplot %s` after installing gnuplot-nox\n",
                gp.string().c_str());
    return false;
  }
  const std::string cmd = "cd '" + dir.string() + "' && gnuplot '" + gp.filename().string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::printf("  gnuplot failed on %s\n", gp.string().c_str());
    return false;
  }
  return true;
}

}  // namespace examples
