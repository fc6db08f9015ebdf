#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind xgrad's random numbers (Note [Counter-based random numbers] in
// core/random.hpp). Block c of the stream keyed by k is philox(k, c): four 32-bit words that depend
// on nothing else, so any range of blocks can be computed in any order, by any number of threads,
// with the same bits.
#include <algorithm>
#include <array>
#include <cstdint>

#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"

namespace xgrad::detail {

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// One round on the counter words c0..c3 under key words k0, k1. W is std::uint32_t, or std::uint64_t
/// holding 32-bit words: in 64-bit lanes the products are one vpmuludq each, so the lanes' loop
/// vectorises without widening shuffles.
template <class W>
inline void philox_round(W& c0, W& c1, W& c2, W& c3, W k0, W k1) {
  constexpr std::uint64_t kLow = 0xffffffffu;
  const std::uint64_t p0 = (std::uint64_t{c0} & kLow) * kPhiloxM0;
  const std::uint64_t p1 = (std::uint64_t{c2} & kLow) * kPhiloxM1;
  c0 = static_cast<W>((p1 >> 32) ^ c1 ^ k0);
  c2 = static_cast<W>((p0 >> 32) ^ c3 ^ k1);
  c1 = static_cast<W>(p1 & kLow);
  c3 = static_cast<W>(p0 & kLow);
}

/// One block: philox(key, counter) with the full 128-bit counter {c[0], c[1], c[2], c[3]} and key
/// {k[0], k[1]}, as Random123's philox4x32 (its known-answer vectors test this).
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    philox_round(c[0], c[1], c[2], c[3], k[0], k[1]);
    k[0] += kPhiloxW0;
    k[1] += kPhiloxW1;
  }
  return c;
}

/// Blocks computed together: 16 lanes of 64-bit words fill four AVX2 or two AVX-512 registers.
inline constexpr int kPhiloxLanes = 16;

/// out[w][l] = word w of block base + l of the stream keyed by `key` (the counter's words: base + l's
/// low and high halves, then 0, 0; the key's: key's low and high halves).
inline void philox_lanes(std::uint64_t key, std::uint64_t base, std::uint32_t (&out)[4][kPhiloxLanes]) {
  std::uint64_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; ++l) {
    const std::uint64_t c = base + static_cast<std::uint64_t>(l);
    c0[l] = c & 0xffffffffu;
    c1[l] = c >> 32;
    c2[l] = 0;
    c3[l] = 0;
  }
  std::uint64_t k0 = key & 0xffffffffu, k1 = key >> 32;
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < kPhiloxLanes; ++l) philox_round(c0[l], c1[l], c2[l], c3[l], k0, k1);
    k0 = (k0 + kPhiloxW0) & 0xffffffffu;
    k1 = (k1 + kPhiloxW1) & 0xffffffffu;
  }
  for (int l = 0; l < kPhiloxLanes; ++l) {
    out[0][l] = static_cast<std::uint32_t>(c0[l]);
    out[1][l] = static_cast<std::uint32_t>(c1[l]);
    out[2][l] = static_cast<std::uint32_t>(c2[l]);
    out[3][l] = static_cast<std::uint32_t>(c3[l]);
  }
}

/// emit(g, w) for each group g in [0, groups) of kPhiloxLanes blocks of the reservation r: w[k][l] is
/// word k of block r.first + g * kPhiloxLanes + l. In parallel, about `grain` groups or more a chunk;
/// emit must write only what group g decides (Note [Determinism]). Bulk draws give a group's words to
/// consecutive elements lane by lane (Note [Counter-based random numbers]), so emit's loops over l are
/// contiguous and vectorise.
template <class Emit>
void for_each_group(const Generator::Blocks& r, std::int64_t groups, std::int64_t grain, Emit&& emit) {
  parallel_for(0, groups, std::max<std::int64_t>(grain, 1), [&](std::int64_t g0, std::int64_t g1) {
    std::uint32_t w[4][kPhiloxLanes];
    for (std::int64_t g = g0; g < g1; ++g) {
      philox_lanes(r.key, r.first + static_cast<std::uint64_t>(g) * kPhiloxLanes, w);
      emit(g, static_cast<const std::uint32_t(&)[4][kPhiloxLanes]>(w));
    }
  });
}

/// Fill kernels of Note [Counter-based random numbers] (core/random.cpp), for float and double.
template <class T>
void uniform_fill(T* out, std::int64_t n, Generator& gen, double lo, double hi);
template <class T>
void normal_fill(T* out, std::int64_t n, Generator& gen, double mean, double std);

}  // namespace xgrad::detail
