#pragma once
// gnuplot plots for the examples (their CSVs come from xgrad::utils::write_csv). Plots are PNGs
// drawn by gnuplot (Debian's gnuplot-nox, installed by scripts/install-deps.sh); when gnuplot is
// missing the CSVs are still written and a note says how to draw them.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "xgrad/core/file_io.hpp"

namespace examples {

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
