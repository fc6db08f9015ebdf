#pragma once
// A one-line progress bar for the examples: "stage 1 [#######.....] 350/1000 loss 1.2e-03 ETA 4s".
// Redrawn in place on a terminal (carriage return); on a pipe or file it prints a line every 10%
// so logs stay short.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace examples {

class ProgressBar {
 public:
  ProgressBar(std::string label, long total)
      : label_(std::move(label)), total_(total), start_(std::chrono::steady_clock::now()), tty_(isatty(1) != 0) {}

  /// Reports that `done` of `total` steps are finished, with the current loss.
  void update(long done, double loss) {
    const double elapsed = seconds();
    const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
    const int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
    if (tty_) {
      std::printf("\r%s [%s%s] %ld/%ld loss %.4e ETA %.1fs ", label_.c_str(), std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), done, total_, loss, eta);
      if (done == total_) std::printf("(%.1fs)\n", elapsed);
      std::fflush(stdout);
    } else {
      const long decile = total_ > 0 ? 10 * done / total_ : 10;
      if (decile != last_decile_ || done == total_) {
        last_decile_ = decile;
        std::printf("%s %3ld%% %ld/%ld loss %.4e elapsed %.1fs ETA %.1fs\n", label_.c_str(),
                    total_ > 0 ? 100 * done / total_ : 100, done, total_, loss, elapsed, eta);
        std::fflush(stdout);
      }
    }
  }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::string label_;
  long total_;
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  long last_decile_ = -1;
};

}  // namespace examples
