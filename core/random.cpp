#include "xgrad/core/random.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/error.hpp"

namespace xgrad {
namespace {
std::array<std::uint32_t, 4> block(const Generator::Blocks& b) {
  return detail::philox4x32({static_cast<std::uint32_t>(b.first), static_cast<std::uint32_t>(b.first >> 32), 0, 0},
                            {static_cast<std::uint32_t>(b.key), static_cast<std::uint32_t>(b.key >> 32)});
}
std::uint64_t join(std::uint32_t lo, std::uint32_t hi) { return std::uint64_t{hi} << 32 | lo; }
}  // namespace

Generator& Generator::operator=(const Generator& other) noexcept {
  seed_.store(other.initial_seed(), std::memory_order_relaxed);
  offset_.store(other.offset(), std::memory_order_relaxed);
  return *this;
}

void Generator::manual_seed(std::uint64_t seed) {
  seed_.store(seed, std::memory_order_relaxed);
  offset_.store(0, std::memory_order_relaxed);
}

Generator::Blocks Generator::reserve(std::uint64_t count) {
  const std::uint64_t first = offset_.fetch_add(count, std::memory_order_relaxed);
  return {initial_seed(), first};
}

std::uint64_t Generator::next_u64() {
  const auto w = block(reserve(1));
  return join(w[0], w[1]);
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  const auto w = block(reserve(1));
  const double u1 = static_cast<double>((join(w[0], w[1]) >> 11) + 1) * 0x1.0p-53;  // (0, 1]: log(u1) finite
  const double u2 = static_cast<double>(join(w[2], w[3]) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::uint64_t Generator::integer(std::uint64_t n) {
  XGRAD_CHECK(n > 0, "Generator::integer: n must be positive, got 0");
  // Rejection sampling: unbiased and fully specified.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = next_u64();
  while (x >= limit) x = next_u64();
  return x % n;
}

namespace detail {

namespace {
constexpr std::int64_t kLanes = kPhiloxLanes;

// Runs value(e, k, l) over a draw of n elements that take `per_block` of the four words of each
// block (4: one word each; 2: two words, or a Box-Muller pair, each): element e of group g is
// g * per_block * kLanes + e, and takes part k = e / kLanes of lane l = e % kLanes.
template <class Store>
void fill_groups(std::int64_t n, int per_block, Generator& gen, Store&& store) {
  const std::int64_t per_group = per_block * kLanes;
  const std::int64_t groups = (n + per_group - 1) / per_group;
  for_each_group(gen.reserve(static_cast<std::uint64_t>(groups * kLanes)), groups, kParallelGrain / per_group,
                 [&](std::int64_t g, const std::uint32_t(&w)[4][kLanes]) {
                   const std::int64_t first = g * per_group, count = std::min(per_group, n - first);
                   store(first, count, w);
                 });
}
}  // namespace

template <class T>
void uniform_fill(T* out, std::int64_t n, Generator& gen, double lo, double hi) {
  if (n <= 0) return;
  // Computed in double, rounded once to T; a value that rounds up to hi is moved just below it.
  const T top = lo < hi ? std::nextafter(static_cast<T>(hi), static_cast<T>(lo)) : static_cast<T>(lo);
  const auto value = [lo, hi, top](double u) {  // copies: no reload per element
    const T v = static_cast<T>(lo + (hi - lo) * u);
    return v < top ? v : top;
  };
  if constexpr (sizeof(T) == 4) {  // one 24-bit value a word: element 64g + e takes the group's word e
    fill_groups(n, 4, gen, [&](std::int64_t first, std::int64_t count, const std::uint32_t(&w)[4][kLanes]) {
      const std::uint32_t* word = &w[0][0];
      T* __restrict o = out + first;
      if (count == 4 * kLanes) {  // a fixed trip count: the loop vectorises
        for (std::int64_t e = 0; e < 4 * kLanes; ++e) o[e] = value(static_cast<double>(word[e] >> 8) * 0x1.0p-24);
        return;
      }
      for (std::int64_t e = 0; e < count; ++e) o[e] = value(static_cast<double>(word[e] >> 8) * 0x1.0p-24);
    });
  } else {  // one 53-bit value a pair of words: element 32g + 16h + l takes words 2h and 2h + 1 of lane l
    fill_groups(n, 2, gen, [&](std::int64_t first, std::int64_t count, const std::uint32_t(&w)[4][kLanes]) {
      T* __restrict o = out + first;
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t l = 0; l < std::min(kLanes, count - h * kLanes); ++l)
          o[h * kLanes + l] = value(static_cast<double>(join(w[2 * h][l], w[2 * h + 1][l]) >> 11) * 0x1.0p-53);
    });
  }
}

template <class T>
void normal_fill(T* out, std::int64_t n, Generator& gen, double mean, double std) {
  if (n <= 0) return;
  // Lane l's block gives the pair (r cos th, r sin th) to elements l and kLanes + l of its group.
  fill_groups(n, 2, gen, [&](std::int64_t first, std::int64_t count, const std::uint32_t(&w)[4][kLanes]) {
    for (std::int64_t l = 0; l < std::min(count, kLanes); ++l) {
      const double u1 = static_cast<double>((join(w[0][l], w[1][l]) >> 11) + 1) * 0x1.0p-53;  // (0, 1]
      const double th = 2.0 * std::numbers::pi * (static_cast<double>(join(w[2][l], w[3][l]) >> 11) * 0x1.0p-53);
      const double r = std::sqrt(-2.0 * std::log(u1));
      out[first + l] = static_cast<T>(mean + std * (r * std::cos(th)));
      if (kLanes + l < count) out[first + kLanes + l] = static_cast<T>(mean + std * (r * std::sin(th)));
    }
  });
}

template void uniform_fill<float>(float*, std::int64_t, Generator&, double, double);
template void uniform_fill<double>(double*, std::int64_t, Generator&, double, double);
template void normal_fill<float>(float*, std::int64_t, Generator&, double, double);
template void normal_fill<double>(double*, std::int64_t, Generator&, double, double);

}  // namespace detail

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace xgrad
