#pragma once
// Inverted dropout (torch.dropout): in training each element is zeroed with probability p and the
// others are scaled by 1/(1 - p), so the expected output is the input. The keep mask is drawn from a
// Generator (the default generator unless one is given) in one parallel pass with the output: element
// i is dropped when its 32-bit word of the Philox stream is below p·2^32 (Note [Counter-based random
// numbers] in core/random.hpp), so the same generator state gives the same mask on every machine and
// at any thread count. The mask is kept for the backward (the gradient is g·m, which is
// differentiable again). p = 1 drops every element, with a zero gradient, as torch does.
#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// float32 and float64. Errors: undefined x, an integer x, p outside [0, 1] (or NaN).
/// @op `dropout(x, p, train, gen)` | x·m, m_i = 1/(1 − p) with probability 1 − p, else 0 (x itself
///   when not train or p = 0) | g·m | torch.dropout (compared through torch.where, the mask recomputed from the
///   Philox stream in numpy)
Tensor dropout(const Tensor& x, double p, bool train, Generator& gen = default_generator());

}  // namespace xgrad
