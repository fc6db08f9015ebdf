#include "xgrad/ops/dropout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/elementwise.hpp"

namespace xgrad {
namespace {

constexpr std::int64_t kLanes = detail::kPhiloxLanes;
constexpr std::int64_t kGroup = 4 * kLanes;  // elements a group of blocks decides: one word each

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
  detail::for_each_group(gen.reserve(static_cast<std::uint64_t>(groups * kLanes)), groups, kParallelGrain / kGroup,
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

struct Dropout : Function<Dropout> {
  static constexpr const char* kName = "dropout";
  static constexpr bool kDifferentiableBackward = true;  // g·m with a recorded mul
  Tensor forward(const Tensor& x, double p, Generator* gen) {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    Tensor m = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      dropout_kernel<T>(x.data<T>(), y.data<T>(), m.data<T>(), x.numel(), p, *gen);
    });
    if (needs_input_grad(0)) save_for_backward({m});
    return y;
  }
  Tensors backward(const Tensors& grads) { return {mul(grads[0], saved(0))}; }
};

}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator& gen) {
  XGRAD_CHECK(p >= 0.0 && p <= 1.0, "dropout: argument 'p' (the drop probability) must be in [0, 1], got {}", p);
  XGRAD_CHECK(x.defined(), "dropout: argument 'x' is undefined");
  check_floating("dropout", "x", x);
  if (!train || p == 0.0) return x;
  // p = 1 drops everything (as torch): zeros with a zero gradient, not the scale 1/0.
  if (p == 1.0) return mul(x, 0.0);
  return apply<Dropout>(x, p, &gen);
}

}  // namespace xgrad
