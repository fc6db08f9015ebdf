#pragma once
// xgrad::utils::ProgressBar: a one-line training progress bar,
// "stage 1 [#######.....] 350/1000 loss 1.2e-03 ETA 4s". Redrawn in place on a terminal (carriage
// return); on a pipe or a file it prints a line every 10% so that logs stay short.
#include <cstdint>
#include <cstdio>
#include <string>

namespace xgrad::utils {

class ProgressBar {
 public:
  /// `total` steps (>= 0); writes to `out` (stdout by default).
  ProgressBar(std::string label, long total, std::FILE* out = stdout);
  /// Reports that `done` of the total steps are finished, with the current loss.
  void update(long done, double loss);
  /// Seconds since construction.
  double seconds() const;

 private:
  std::string label_;
  long total_;
  std::FILE* out_;
  std::int64_t start_ns_;  // std::chrono::steady_clock at construction, in nanoseconds (<chrono> stays in the .cpp)
  bool tty_;
  long last_decile_ = -1;
};

}  // namespace xgrad::utils
