#pragma once
// Internal: dropout's one-pass kernel behind ops/dropout.cpp. Instantiated for float and double.
#include <cstdint>

namespace xgrad {
class Generator;
}

namespace xgrad::detail {

/// y[i] = x[i] * m[i] and the mask m[i] = 1 / (1 - p) when element i is kept, 0 when dropped
/// (dropped when its random word is below p * 2^32, 0 <= p < 1), for i < n, in one pass; draws n
/// words from `gen` (Note [Counter-based random numbers] in core/random.hpp), so the mask depends on
/// the generator's state and n alone, not on the thread count.
template <class T>
void dropout_kernel(const T* x, T* y, T* m, std::int64_t n, double p, Generator& gen);

}  // namespace xgrad::detail
