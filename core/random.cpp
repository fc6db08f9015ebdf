#include "xgrad/core/random.hpp"

#include <algorithm>
#include <bit>
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

// Note [Box-Muller without libm]: the normal fills compute log and sin/cos themselves, branch-free,
// so that the lanes' loop vectorises (libm's calls kept it scalar, several times slower than torch's
// vectorised randn: bench/results/random_ops.csv) and
// the bits do not depend on which of libm's CPU variants runs. The polynomials are fdlibm's
// (e_log.c, k_sin.c, k_cos.c); within about an ulp of the exact values (a test compares with libm).

// ln(u) for u in [2^-52, 1]: u = m·2^e with m in [√½, √2), ln u = e·ln 2 + ln m, ln m from
// s = (m − 1)/(m + 1) as fdlibm's __ieee754_log. No zero, subnormal, infinite or NaN u arrives here.
[[gnu::always_inline]] inline double log_unit(double u) {
  const auto bits = std::bit_cast<std::uint64_t>(u);
  // the biased exponent as a double, without an int64 conversion (none in AVX2): 2^52 + field - 2^52
  double e = std::bit_cast<double>((bits >> 52) | 0x4330000000000000ULL) - 0x1.0p52 - 1023.0;
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  const double high = m > std::numbers::sqrt2 ? 1.0 : 0.0;  // selects as arithmetic: no branches
  m *= 1.0 - 0.5 * high;                                    // (exact: m or m/2)
  e += high;
  constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01, kLg3 = 2.857142874366239149e-01,
                   kLg4 = 2.222219843214978396e-01, kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                   kLg7 = 1.479819860511658591e-01, kLn2Hi = 6.93147180369123816490e-01,
                   kLn2Lo = 1.90821492927058770002e-10;
  const double f = m - 1.0, s = f / (2.0 + f), z = s * s, w = z * z;
  const double r = z * (kLg1 + w * (kLg3 + w * (kLg5 + w * kLg7))) + w * (kLg2 + w * (kLg4 + w * kLg6));
  const double hfsq = 0.5 * f * f;
  return e * kLn2Hi - ((hfsq - (s * (hfsq + r) + e * kLn2Lo)) - f);
}

// cos and sin of 2π·t for t in [0, 1]: t = q/4 + r exactly (q the nearest quarter turn, |r| <= 1/8),
// x = 2π·r in [−π/4, π/4] on fdlibm's kernels, then rotated by q quarter turns.
[[gnu::always_inline]] inline void cos_sin_turns(double t, double& c, double& s) {
  constexpr double kS1 = -1.66666666666666324348e-01, kS2 = 8.33333333332248946124e-03,
                   kS3 = -1.98412698298579493134e-04, kS4 = 2.75573137070700676789e-06,
                   kS5 = -2.50507602534068634195e-08, kS6 = 1.58969099521155010221e-10;
  constexpr double kC1 = 4.16666666666666019037e-02, kC2 = -1.38888888888741095749e-03,
                   kC3 = 2.48015872894767294178e-05, kC4 = -2.75573143513906633035e-07,
                   kC5 = 2.08757232129817482790e-09, kC6 = -1.13596475577881948265e-11;
  const double q = std::floor(4.0 * t + 0.5);
  const double x = 2.0 * std::numbers::pi * (t - 0.25 * q), z = x * x;
  const double sx = x + x * z * (kS1 + z * (kS2 + z * (kS3 + z * (kS4 + z * (kS5 + z * kS6)))));
  const double cx = 1.0 - 0.5 * z + z * z * (kC1 + z * (kC2 + z * (kC3 + z * (kC4 + z * (kC5 + z * kC6)))));
  // q mod 4 = k: (cos, sin) of k quarter turns further is (cx, sx), (−sx, cx), (−cx, −sx), (sx, −cx);
  // the swap is a bit blend and the signs are factors of ±1, so the lanes have no branch
  const double k = q - 4.0 * std::floor(0.25 * q);
  const std::uint64_t swap = 0 - static_cast<std::uint64_t>((k == 1.0) | (k == 3.0));
  const auto bc = std::bit_cast<std::uint64_t>(cx), bs = std::bit_cast<std::uint64_t>(sx);
  const double a = std::bit_cast<double>((bs & swap) | (bc & ~swap));
  const double b = std::bit_cast<double>((bc & swap) | (bs & ~swap));
  c = a * (1.0 - 2.0 * static_cast<double>((k == 1.0) | (k == 2.0)));
  s = b * (1.0 - 2.0 * static_cast<double>(k >= 2.0));
}

// The Box-Muller pair of one block's words: u1 in (0, 1] from words 0-1, u2 in [0, 1) from 2-3, each
// the top 52 bits as the mantissa of a double in [1, 2) (no integer-to-double conversion, which AVX2
// has only for 32-bit integers).
[[gnu::always_inline]] inline void box_muller(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3,
                                              double& z0, double& z1) {
  constexpr std::uint64_t kOne = 0x3ff0000000000000ULL;
  const double u1 = 2.0 - std::bit_cast<double>(kOne | join(w0, w1) >> 12);
  const double u2 = std::bit_cast<double>(kOne | join(w2, w3) >> 12) - 1.0;
  const double r = std::sqrt(-2.0 * log_unit(u1));
  double c, s;
  cos_sin_turns(u2, c, s);
  z0 = r * c;
  z1 = r * s;
}
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
  double z0, z1;
  box_muller(w[0], w[1], w[2], w[3], z0, z1);
  return z0;
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
  // Lane l's block gives the pair (r cos th, r sin th) to elements l and kLanes + l of its group,
  // computed for all lanes into locals first (Note [Box-Muller without libm]).
  fill_groups(n, 2, gen, [&](std::int64_t first, std::int64_t count, const std::uint32_t(&w)[4][kLanes]) {
    double z[2][kLanes];
    for (std::int64_t l = 0; l < kLanes; ++l) box_muller(w[0][l], w[1][l], w[2][l], w[3][l], z[0][l], z[1][l]);
    T* __restrict o = out + first;
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t l = 0; l < std::min(kLanes, count - h * kLanes); ++l)
        o[h * kLanes + l] = static_cast<T>(mean + std * z[h][l]);
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
