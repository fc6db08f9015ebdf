#pragma once
// Internal: the softmax and log_softmax kernels behind ops/softmax.cpp (Note [Softmax kernels] in
// softmax_kernels.cpp). Instantiated for float and double.
#include <cstdint>

namespace xgrad::detail {

/// A contiguous tensor seen as (outer, n, inner), n the softmax axis: element (o, k, i) is at
/// o * n * inner + k * inner + i.
struct SoftmaxGeometry {
  std::int64_t outer = 1, n = 1, inner = 1;
};

/// y = softmax(x) along n: exp(x - m) / s, with m the max of the row and s = sum exp(x - m); with
/// `log`, y = log_softmax(x) = x - m - log(s). A row of -inf gives NaN (m = -inf), as in PyTorch.
/// x and y have the layout of `g`.
template <class T>
void softmax_forward(const T* x, T* y, const SoftmaxGeometry& g, bool log);

/// The backward from the saved output y and the seed gy (both of the layout of `g`), into gx:
/// softmax dx = y * (gy - sum(gy * y)); with `log`, dx = gy - exp(y) * sum(gy), sums along n.
template <class T>
void softmax_backward(const T* y, const T* gy, T* gx, const SoftmaxGeometry& g, bool log);

}  // namespace xgrad::detail
