#include "xgrad/nn/utils/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "xgrad/core/error.hpp"

namespace xgrad::utils {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ProgressBar::ProgressBar(std::string label, long total, std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      out_(out),
      start_ns_(steady_ns()),
      tty_(out != nullptr && isatty(fileno(out)) != 0) {
  XGRAD_CHECK(total >= 0, "ProgressBar: argument 'total' must be >= 0, got {}", total);
  XGRAD_CHECK(out != nullptr, "ProgressBar: argument 'out' is a null FILE*");
}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(std::chrono::nanoseconds(steady_ns() - start_ns_)).count();
}

void ProgressBar::update(long done, double loss) {
  const double elapsed = seconds();
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? static_cast<int>(std::min<long>(kWidth, kWidth * done / total_)) : kWidth;
  if (tty_) {
    std::fprintf(out_, "\r%s [%s%s] %ld/%ld loss %.4e ETA %.1fs ", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total_, loss, eta);
    if (done == total_) std::fprintf(out_, "(%.1fs)\n", elapsed);
    std::fflush(out_);
    return;
  }
  const long decile = total_ > 0 ? 10 * done / total_ : 10;
  if (decile != last_decile_ || done == total_) {
    last_decile_ = decile;
    std::fprintf(out_, "%s %3ld%% %ld/%ld loss %.4e elapsed %.1fs ETA %.1fs\n", label_.c_str(),
                 total_ > 0 ? 100 * done / total_ : 100, done, total_, loss, elapsed, eta);
    std::fflush(out_);
  }
}

}  // namespace xgrad::utils
