#pragma once
// Internal: the convolution kernels of ops/conv.cpp (K1, K2, K3 of Note [im2col convolution] and the
// bias gradient), over contiguous NCHW buffers (a 1-d convolution is a 2-d one of height 1).
// Instantiated for float and double.
#include <algorithm>
#include <cstdint>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/ceil_div.hpp"

namespace xgrad::detail {

// Note [im2col convolution]: a convolution is three dense products over the im2col matrix. With the
// "image" I (the tensor whose windows are gathered: x for conv, y for conv_transpose), the "grid" Z
// (the other side: y for conv, x for conv_transpose) and the weight seen as W (groups * co, ci * kH * kW),
// per group:
//   K1  Z = W col(I)                     conv forward, conv_transpose's input gradient
//   K2  I = col2im(W^T Z)                conv's input gradient, conv_transpose forward
//   K3  dW = Z col(I)^T  (over samples)  the weight gradient of both
// The batch is cut into chunks of `chunk` samples fixed by the shapes: one sample when its grid has
// at least kSampleCols positions (then the GEMMs read and write the sample's block of the tensors in
// place; for 28 x 28 and 14 x 14 images, GEMMs of 784 and 196 columns), else about kColElems
// elements of col per chunk and at most ceil(N / kMinChunks) samples, each chunk's columns side by
// side in one buffer (copied to and from the tensors), so one GEMM covers a chunk. Chunks run as
// TBB tasks, each GEMM through detail::gemm (ops/kernels/blas.hpp's single-threaded BLAS, cut into
// tiles fixed by the shapes: Note [Deterministic GEMM]); K1 and K2 write disjoint samples, and K3 accumulates runs of
// consecutive chunks into at most kWeightSlots partial weight gradients, added in slot order.
// Nothing depends on the thread count.
// With unit strides and a grid as wide as its image, K1, K2 and (2-d grids) K3 run as direct kernels
// instead (Note [Direct convolution] in conv_kernels.cpp); docs/design.md ("Convolution: direct kernels where the
// rows are contiguous") says why, against oneDNN.

inline constexpr std::int64_t kColElems = std::int64_t{1} << 20;
inline constexpr std::int64_t kMinChunks = 8;
// A grid of at least this many positions per sample is big enough for one GEMM per sample: then a
// chunk is one sample, whose (co, positions) block of the grid tensor is exactly the GEMM's operand
// or result, so K1 writes y in place and K2 / K3 read the gradient in place (no copies to and from a
// chunk buffer), and the im2col buffer (krows x positions) stays small enough for the caches.
inline constexpr std::int64_t kSampleCols = 64;

/// The geometry of one convolution as the kernels see it: the image I, the grid Z and the chunking.
struct ConvPlan {
  std::int64_t n = 0, groups = 1;
  std::int64_t ci = 0, co = 0;  // image / grid channels per group
  std::int64_t ih = 1, iw = 1, gh = 1, gw = 1;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;  // ph, pw: padding at the start
  std::int64_t chunk = 1;

  std::int64_t krows() const { return ci * kh * kw; }
  std::int64_t ilen() const { return ih * iw; }
  std::int64_t glen() const { return gh * gw; }
  std::int64_t chunks() const { return n == 0 ? 0 : ceil_div(n, chunk); }
  void choose_chunk() {
    if (glen() >= kSampleCols) {  // one sample per chunk: its GEMMs read and write the tensors in place
      chunk = 1;
      return;
    }
    const std::int64_t per_sample = std::max<std::int64_t>(1, krows() * glen());
    chunk = std::clamp<std::int64_t>(kColElems / per_sample, 1, std::max<std::int64_t>(1, ceil_div(n, kMinChunks)));
  }
  // Chunks per task: all of them when the whole op is small (tasks would cost more than they save).
  std::int64_t grain() const {
    const std::int64_t work = n * groups * co * krows() * glen();
    return work < 4 * kParallelGrain ? std::max<std::int64_t>(1, chunks()) : 1;
  }
};

/// K1: Z[n, g co + o, :] = bias[g co + o] + (W_g col(I_n,g))[o, :] (bias may be null).
template <class T>
void k1_forward(const ConvPlan& p, const T* img, const T* w, const T* bias, T* z);
/// K2: I[n, g ci .. g ci + ci) = col2im(W_g^T Z[n, g co .. g co + co)); I is overwritten.
template <class T>
void k2_adjoint(const ConvPlan& p, const T* z, const T* w, T* img);
/// K3: dW = sum over samples of Z col(I)^T (dw overwritten).
template <class T>
void k3_weight(const ConvPlan& p, const T* img, const T* z, T* dw);
/// y[i, c, :] += bias[c] for y (n, channels, len).
template <class T>
void add_bias(T* y, const T* bias, std::int64_t n, std::int64_t channels, std::int64_t len);
/// db[o] = sum of g (n, channels, len) over n and len, accumulated in double.
template <class T>
void bias_grad(const T* g, std::int64_t n, std::int64_t channels, std::int64_t len, T* db);

}  // namespace xgrad::detail
