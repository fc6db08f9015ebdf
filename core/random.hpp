#pragma once
// Seeded random numbers that are the same on every machine: mt19937_64 (its output is fixed by
// the C++ standard) with our own conversions to uniform and normal values (the standard
// distributions are implementation-defined, so they are not used).
#include <cstdint>
#include <random>

namespace xgrad {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(std::uint64_t seed) {
    engine_.seed(seed);
    has_spare_ = false;
  }
  std::uint64_t next_u64() { return engine_(); }
  /// Uniform on [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Uniform on [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller, both values used).
  double normal();
  /// Uniform integer in [0, n).
  std::uint64_t integer(std::uint64_t n);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// The process-wide generator that every layer, init function, dropout and random fill uses when it
/// is given no Generator (torch's default CPU generator). Thread-safe to draw from.
Generator& default_generator();
/// Reseeds the default generator (torch::manual_seed): the same program after the same seed draws the
/// same numbers.
void manual_seed(std::uint64_t seed);

}  // namespace xgrad
