#include "xgrad/ops/kernels/dropout_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail {

namespace {
constexpr std::int64_t kLanes = detail::kPhiloxLanes;
constexpr std::int64_t kGroup = 4 * kLanes;  // elements a group of blocks decides: one word each

}  // namespace

// y = x·m and m from one pass over groups of kGroup elements (Note [Counter-based random numbers]:
// element 64g + 16k + l takes word k of lane l of group g, i.e. word e of the group's words read in
// order, for element 64g + e).
template <class T>
void dropout_kernel(const T* x, T* y, T* m, std::int64_t n, double p, Generator& gen) {
  // Dropped when the word is below p·2^32 (p < 1: the threshold fits in 32 bits). Compared as signed
  // after flipping the top bit (the same order), which AVX2 has as one instruction, so that the
  // select vectorises: a branch on random bits would mispredict half the time.
  const auto flip = [](std::uint32_t v) { return static_cast<std::int32_t>(v ^ 0x80000000u); };
  const std::int32_t threshold = flip(static_cast<std::uint32_t>(std::ldexp(p, 32)));
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const std::int64_t groups = (n + kGroup - 1) / kGroup;
  for_each_group(gen.reserve(static_cast<std::uint64_t>(groups * kLanes)), groups, kParallelGrain / kGroup,
                 [&](std::int64_t g, const std::uint32_t(&w)[4][kLanes]) {
                   const std::uint32_t* word = &w[0][0];
                   const std::int64_t first = g * kGroup, count = std::min(kGroup, n - first);
                   const T* __restrict xs = x + first;
                   T* __restrict ys = y + first;
                   T* __restrict ms = m + first;
                   const T s = scale;
                   const std::int32_t t = threshold;
                   if (count == kGroup) {  // a whole group: a fixed trip count
                     for (std::int64_t e = 0; e < kGroup; ++e) {
                       const T keep = flip(word[e]) >= t ? s : T(0);
                       ms[e] = keep;
                       ys[e] = xs[e] * keep;
                     }
                     return;
                   }
                   for (std::int64_t e = 0; e < count; ++e) {
                     const T keep = flip(word[e]) >= t ? s : T(0);
                     ms[e] = keep;
                     ys[e] = xs[e] * keep;
                   }
                 });
}

XGRAD_INSTANTIATE_FLOATING(dropout_kernel);

}  // namespace xgrad::detail
