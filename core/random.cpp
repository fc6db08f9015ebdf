#include "xgrad/core/random.hpp"

#include <cmath>
#include <numbers>

#include "xgrad/core/error.hpp"

namespace xgrad {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double th = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

std::uint64_t Generator::integer(std::uint64_t n) {
  XGRAD_CHECK(n > 0, "Generator::integer: n must be positive, got 0");
  // Rejection sampling: unbiased and fully specified.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace xgrad
