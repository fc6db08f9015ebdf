#include "xgrad/ops/kernels/conv_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/core/tensor.hpp"
#include "xgrad/ops/kernels/gemm_kernels.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/tiled_gemm.hpp"

namespace xgrad::detail {

namespace {

// The valid range of one im2col row: output columns ow in [lo, hi) read input column ow * sw + x0
// inside [0, iw); output rows oh in [ylo, yhi) read input row oh * sh + y0 inside [0, ih).
struct RowRange {
  std::int64_t x0, lo, hi, y0, ylo, yhi;
  bool empty() const { return lo >= hi || ylo >= yhi; }
};

RowRange row_range(const ConvPlan& p, std::int64_t a, std::int64_t b) {
  RowRange r{};
  r.x0 = b * p.dw - p.pw;
  r.lo = std::min(p.gw, r.x0 >= 0 ? 0 : ceil_div(-r.x0, p.sw));
  r.hi = std::max(r.lo, std::min(p.gw, p.iw - r.x0 <= 0 ? 0 : ceil_div(p.iw - r.x0, p.sw)));
  r.y0 = a * p.dh - p.ph;
  r.ylo = std::min(p.gh, r.y0 >= 0 ? 0 : ceil_div(-r.y0, p.sh));
  r.yhi = std::max(r.ylo, std::min(p.gh, p.ih - r.y0 <= 0 ? 0 : ceil_div(p.ih - r.y0, p.sh)));
  return r;
}

// Note [Contiguous im2col]: with unit strides and a grid as wide as the image (gw == iw: "same"
// padding, or any 1-d convolution), output position (oh, ow) of row (c, a, b) reads input element
// (oh + y0) * iw + ow + x0 = oh * gw + ow + shift, so the valid rows of a col row are one contiguous
// copy of the plane; the few elements of that copy that wrapped around a row's end (ow outside
// [lo, hi)) are then set to zero. For 14 x 14 planes this is one copy and 28 stores instead of 14
// short copies and 28 short fills per row (the calls dominated: bench/conv_step, conv block).
bool contiguous_rows(const ConvPlan& p) { return p.sw == 1 && p.sh == 1 && p.gw == p.iw; }

// With contiguous rows: the positions [first, last) of a col row, from its first valid one to its
// last, and the offset of the plane element each reads (position + shift).
struct ContiguousSpan {
  std::int64_t first, last, shift;
};
ContiguousSpan contiguous_span(const ConvPlan& p, const RowRange& r) {
  return {r.ylo * p.gw + r.lo, (r.yhi - 1) * p.gw + r.hi, r.y0 * p.iw + r.x0};
}

// Zeroes the wrapped positions of a col row inside its span (ow outside [lo, hi) on the rows after
// the first and before the last): they read a neighbouring image row's elements.
template <class T>
void zero_wrapped(const ConvPlan& p, const RowRange& r, T* row) {
  if (r.lo == 0 && r.hi == p.gw) return;
  for (std::int64_t oh = r.ylo; oh < r.yhi; ++oh) {
    T* out = row + oh * p.gw;
    if (oh > r.ylo)
      for (std::int64_t ow = 0; ow < r.lo; ++ow) out[ow] = T(0);
    if (oh + 1 < r.yhi)
      for (std::int64_t ow = r.hi; ow < p.gw; ++ow) out[ow] = T(0);
  }
}

// Columns [0, gh * gw) of rows (c, a, b) of col (leading dimension ld) from one group of one sample.
template <class T>
void im2col(const ConvPlan& p, const T* img, T* col, std::int64_t ld) {
  const bool contiguous = contiguous_rows(p);
  const std::int64_t L = p.glen();
  for (std::int64_t a = 0; a < p.kh; ++a)
    for (std::int64_t b = 0; b < p.kw; ++b) {
      const RowRange r = row_range(p, a, b);
      for (std::int64_t c = 0; c < p.ci; ++c) {
        T* row = col + ((c * p.kh + a) * p.kw + b) * ld;
        const T* plane = img + c * p.ilen();
        if (r.empty()) {
          std::fill(row, row + L, T(0));
          continue;
        }
        if (contiguous) {
          const ContiguousSpan sp = contiguous_span(p, r);
          std::fill(row, row + sp.first, T(0));
          std::copy(plane + sp.first + sp.shift, plane + sp.last + sp.shift, row + sp.first);
          std::fill(row + sp.last, row + L, T(0));
          zero_wrapped(p, r, row);
          continue;
        }
        for (std::int64_t oh = 0; oh < p.gh; ++oh) {
          T* out = row + oh * p.gw;
          if (oh < r.ylo || oh >= r.yhi) {
            std::fill(out, out + p.gw, T(0));
            continue;
          }
          const T* src = plane + (oh * p.sh + r.y0) * p.iw;  // input column ow * sw + x0, in range for ow in [lo, hi)
          std::fill(out, out + r.lo, T(0));
          if (p.sw == 1)
            std::copy(src + (r.lo + r.x0), src + (r.hi + r.x0), out + r.lo);
          else
            for (std::int64_t ow = r.lo; ow < r.hi; ++ow) out[ow] = src[ow * p.sw + r.x0];
          std::fill(out + r.hi, out + p.gw, T(0));
        }
      }
    }
}

// The adjoint of im2col: adds the columns back into one group of one sample (in a fixed order: for
// each input element, its rows (c, a, b) in increasing order). With contiguous rows (Note
// [Contiguous im2col]) the wrapped elements of each col row, which belong to no input element, are
// first zeroed in col (a scratch buffer), so one contiguous add covers the row: adding +0 leaves
// every element as it was.
template <class T>
void col2im(const ConvPlan& p, T* col, std::int64_t ld, T* img) {
  const bool contiguous = contiguous_rows(p);
  for (std::int64_t c = 0; c < p.ci; ++c)
    for (std::int64_t a = 0; a < p.kh; ++a)
      for (std::int64_t b = 0; b < p.kw; ++b) {
        const RowRange r = row_range(p, a, b);
        if (r.empty()) continue;
        T* row = col + ((c * p.kh + a) * p.kw + b) * ld;
        T* plane = img + c * p.ilen();
        if (contiguous) {
          const ContiguousSpan sp = contiguous_span(p, r);
          zero_wrapped(p, r, row);
          for (std::int64_t i = sp.first; i < sp.last; ++i) plane[i + sp.shift] += row[i];
          continue;
        }
        for (std::int64_t oh = r.ylo; oh < r.yhi; ++oh) {
          const T* in = row + oh * p.gw;
          T* dst = plane + (oh * p.sh + r.y0) * p.iw;
          for (std::int64_t ow = r.lo; ow < r.hi; ++ow) dst[ow * p.sw + r.x0] += in[ow];
        }
      }
}

// Note [Direct convolution] (ops/kernels/gemm_kernels.hpp) as conv.cpp uses it: with contiguous rows
// (Note [Contiguous im2col]) K1 needs no im2col matrix: the kernel reads each tap's shifted plane
// straight from the image, masked where the tap falls outside it, with the weights packed once per
// call; and K2 is K1 itself, on the grid with the weights flipped and transposed and the padding
// mirrored (d image[c, y, x] = sum over o, a, b of W[o, c, a, b] Z[o, y + ph - a dh, x + pw - b dw]),
// so it writes the image gradient with no col2im. Both sum each element over (tap, channel) in a
// fixed order, whatever the thread count. One output row per group (depthwise) takes single-row
// tiles of more vectors (faster than im2col on bench/conv_step's depthwise case;
// bench/results/tuning_notes.md, "Depthwise direct convolution"). Not taken for
// grids of fewer than kSampleCols positions, or when the masks would exceed kMaxMaskBytes. K3 runs
// Note [Direct weight gradient] (lane-wise sums over the positions of a run of samples; co-vectorised
// where the channels allow it; a masked dot product per tap for depthwise). Where a tap's mask is
// all ones over a whole vector (1-d convolutions away from the ends, the centre column of 2-d ones),
// the kernels load without it.
struct DirectGeom {
  std::int64_t rows = 0, chans = 0;             // result channels (the GEMM's m) and image channels, per group
  std::int64_t in_h = 0, out_h = 0, width = 0;  // image height, result height, the width both share
  std::int64_t kh = 1, kw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  std::int64_t taps() const { return kh * kw; }
  std::int64_t in_len() const { return in_h * width; }
  std::int64_t out_len() const { return out_h * width; }
};

constexpr std::int64_t kMaxMaskBytes = std::int64_t{16} << 20;
constexpr std::int64_t kMaxLanes = 16;  // of any kernel family's vectors (AVX-512 float)

// K1's geometry (image I, result Z), or K2's (image Z, result I), for a plan with contiguous rows.
DirectGeom k1_geom(const ConvPlan& p) { return {p.co, p.ci, p.ih, p.gh, p.gw, p.kh, p.kw, p.dh, p.dw, p.ph, p.pw}; }
DirectGeom k2_geom(const ConvPlan& p) {
  return {p.ci, p.co, p.gh, p.ih, p.iw, p.kh, p.kw, p.dh, p.dw, (p.kh - 1) * p.dh - p.ph, (p.kw - 1) * p.dw - p.pw};
}

// The active kernel family's blocking for T (its mr and nr shape the packed weights and the masks).
template <class T>
const gemmk::Blocking& blocking() {
  const gemmk::Kernels& k = gemmk::active();
  return sizeof(T) == sizeof(float) ? k.sblock : k.dblock;
}

template <class T>
bool use_direct(const ConvPlan& p, const DirectGeom& d) {
  if (!contiguous_rows(p) || p.glen() < kSampleCols) return false;
  const gemmk::Blocking& bl = blocking<T>();
  const std::int64_t padded = ceil_div(d.out_len(), bl.nr) * bl.nr;
  return d.taps() * padded * static_cast<std::int64_t>(sizeof(T)) <= kMaxMaskBytes;
}

// The taps of a DirectGeom: each one's shift and mask (Note [Direct convolution]), padded to the
// family's nr, and the range [lo, chans * in_len + hi) of a block's image its reads reach.
template <class T>
struct DirectTaps {
  std::int64_t padded = 0, lo = 0, hi = 0;
  std::vector<std::int64_t> shift, ones;      // ones: per tap, the longest run [lo, hi) of its mask's ones
  std::vector<std::int64_t> runs, run_start;  // every run of ones, tap by tap (ConvWeightArgs)
  std::vector<T> mask;

  explicit DirectTaps(const DirectGeom& d) {
    const gemmk::Blocking& bl = blocking<T>();
    const std::int64_t taps = d.taps(), L = d.out_len(), IL = d.in_len();
    padded = ceil_div(L, bl.nr) * bl.nr;
    shift.resize(static_cast<std::size_t>(taps));
    ones.resize(static_cast<std::size_t>(2 * taps));
    mask.assign(static_cast<std::size_t>(taps * padded), T(0));
    run_start.assign(1, 0);
    T all_ones;
    unsigned char bytes[sizeof(T)];
    std::fill(bytes, bytes + sizeof(T), static_cast<unsigned char>(0xff));
    std::memcpy(&all_ones, bytes, sizeof(T));
    for (std::int64_t a = 0; a < d.kh; ++a)
      for (std::int64_t b = 0; b < d.kw; ++b) {
        const std::int64_t t = a * d.kw + b, y0 = a * d.dh - d.ph, x0 = b * d.dw - d.pw;
        shift[static_cast<std::size_t>(t)] = y0 * d.width + x0;
        lo = std::min(lo, y0 * d.width + x0);
        hi = std::max(hi, y0 * d.width + x0 + padded - IL);
        T* m = mask.data() + t * padded;
        std::int64_t run = 0, best_lo = 0, best_hi = 0;
        for (std::int64_t l = 0; l < L; ++l) {
          const std::int64_t y = l / d.width + y0, x = l % d.width + x0;
          const bool in = y >= 0 && y < d.in_h && x >= 0 && x < d.width;
          m[l] = in ? all_ones : T(0);
          run = in ? run + 1 : 0;
          if (run > best_hi - best_lo) best_lo = l + 1 - run, best_hi = l + 1;
          if (in && run == 1) runs.insert(runs.end(), {l, l + 1});
          if (in) runs.back() = l + 1;
        }
        ones[static_cast<std::size_t>(2 * t)] = best_lo;
        ones[static_cast<std::size_t>(2 * t + 1)] = best_hi;
        run_start.push_back(static_cast<std::int64_t>(runs.size() / 2));
      }
  }

  // Block i of `blocks` image blocks of `block_in` values at img, readable over [lo, block_in + hi):
  // in place, or, when those reads would leave the tensor, a copy between zero guards in `guarded`.
  const T* image(const T* img, std::int64_t i, std::int64_t blocks, std::int64_t block_in,
                 std::vector<T>& guarded) const {
    const T* src = img + i * block_in;
    if (i * block_in + lo >= 0 && (i + 1) * block_in + hi <= blocks * block_in) return src;
    guarded.assign(static_cast<std::size_t>(-lo + block_in + hi), T(0));
    std::copy(src, src + block_in, guarded.data() - lo);
    return guarded.data() - lo;
  }
};

// Runs Note [Direct convolution] over `blocks` (sample, group) blocks: block i's image at
// img + i * chans * in_len, its result at out + i * rows * out_len, the weights of its group
// (i % groups) at w + (i % groups) * wstride, packed as the note says.
template <class T>
void direct_blocks(const DirectGeom& d, std::int64_t blocks, std::int64_t groups, const T* img, const T* w,
                   std::int64_t wstride, T* out, std::int64_t grain) {
  const DirectTaps<T> taps(d);
  const std::int64_t L = d.out_len(), block_in = d.chans * d.in_len();
  parallel_for(0, blocks, grain, [&](std::int64_t i0, std::int64_t i1) {
    std::vector<T> guarded;
    for (std::int64_t i = i0; i < i1; ++i)
      gemmk::direct_conv<T>({d.rows, L, d.chans * d.taps(), d.taps(), w + (i % groups) * wstride,
                             taps.image(img, i, blocks, block_in, guarded), d.in_len(), taps.shift.data(),
                             taps.mask.data(), taps.padded, taps.ones.data(), out + i * d.rows * L, L});
  });
}

// The weights of every group packed for direct_blocks: group g's (rows x chans * taps) matrix, whose
// element (r, k) is at(g, r, k), in panels of the family's mr rows. Returns the stride per group.
template <class T, class At>
std::int64_t pack_direct_weights(const DirectGeom& d, std::int64_t groups, At at, std::vector<T>& out) {
  const gemmk::Blocking& bl = blocking<T>();
  const std::int64_t K = d.chans * d.taps(), panels = ceil_div(d.rows, bl.mr), stride = panels * bl.mr * K;
  out.assign(static_cast<std::size_t>(groups * stride), T(0));
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t r = 0; r < d.rows; ++r) {
      T* panel = out.data() + g * stride + (r / bl.mr) * bl.mr * K + r % bl.mr;
      for (std::int64_t k = 0; k < K; ++k) panel[k * bl.mr] = at(g, r, k);
    }
  return stride;
}

}  // namespace

// K1: Z[n, g co + o, :] = bias[g co + o] + (W_g col(I_n,g))[o, :].
template <class T>
void k1_forward(const ConvPlan& p, const T* img, const T* w, const T* bias, T* z) {
  const std::int64_t K = p.krows(), L = p.glen(), IL = p.ilen();
  if (const DirectGeom d = k1_geom(p); use_direct<T>(p, d)) {  // Note [Direct convolution]
    std::vector<T> packed;
    const std::int64_t ws = pack_direct_weights<T>(
        d, p.groups, [&](std::int64_t g, std::int64_t r, std::int64_t k) { return w[(g * p.co + r) * K + k]; }, packed);
    direct_blocks<T>(d, p.n * p.groups, p.groups, img, packed.data(), ws, z, p.grain());
    if (bias != nullptr) add_bias<T>(z, bias, p.n, p.groups * p.co, L);
    return;
  }
  parallel_for(0, p.chunks(), p.grain(), [&](std::int64_t c0, std::int64_t c1) {
    std::vector<T> col, zb;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t n0 = c * p.chunk, nb = std::min(p.chunk, p.n - n0), cols = nb * L;
      col.resize(static_cast<std::size_t>(K * cols));
      if (nb > 1) zb.resize(static_cast<std::size_t>(p.co * cols));
      for (std::int64_t g = 0; g < p.groups; ++g) {
        for (std::int64_t s = 0; s < nb; ++s)
          im2col(p, img + ((n0 + s) * p.groups + g) * p.ci * IL, col.data() + s * L, cols);
        if (nb == 1) {  // the sample's (co, L) block of z is the GEMM's result (kSampleCols)
          T* dst = z + (n0 * p.groups + g) * p.co * L;
          gemm<T>(false, false, p.co, L, K, w + g * p.co * K, K, col.data(), L, T(0), dst, L);
          if (bias != nullptr)
            for (std::int64_t o = 0; o < p.co; ++o) {
              const T b = bias[g * p.co + o];
              for (std::int64_t l = 0; l < L; ++l) dst[o * L + l] += b;
            }
          continue;
        }
        gemm<T>(false, false, p.co, cols, K, w + g * p.co * K, K, col.data(), cols, T(0), zb.data(), cols);
        for (std::int64_t s = 0; s < nb; ++s)
          for (std::int64_t o = 0; o < p.co; ++o) {
            const T* src = zb.data() + o * cols + s * L;
            T* dst = z + (((n0 + s) * p.groups + g) * p.co + o) * L;
            const T b = bias != nullptr ? bias[g * p.co + o] : T(0);
            if (bias != nullptr)
              for (std::int64_t l = 0; l < L; ++l) dst[l] = src[l] + b;
            else
              std::copy(src, src + L, dst);
          }
      }
    }
  });
}

// K2: I[n, g ci .. g ci + ci) = col2im(W_g^T Z[n, g co .. g co + co)); I is overwritten.
template <class T>
void k2_adjoint(const ConvPlan& p, const T* z, const T* w, T* img) {
  const std::int64_t K = p.krows(), L = p.glen(), IL = p.ilen();
  if (const DirectGeom d = k2_geom(p); use_direct<T>(p, d)) {  // Note [Direct convolution]: K1 on the grid
    const std::int64_t taps = p.kh * p.kw;
    std::vector<T> packed;
    const std::int64_t ws = pack_direct_weights<T>(
        d, p.groups,
        [&](std::int64_t g, std::int64_t c, std::int64_t k) {  // k = (o, flipped tap)
          return w[(g * p.co + k / taps) * K + c * taps + (taps - 1 - k % taps)];
        },
        packed);
    direct_blocks<T>(d, p.n * p.groups, p.groups, z, packed.data(), ws, img, p.grain());
    return;
  }
  parallel_for(0, p.chunks(), p.grain(), [&](std::int64_t c0, std::int64_t c1) {
    std::vector<T> col, zb;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t n0 = c * p.chunk, nb = std::min(p.chunk, p.n - n0), cols = nb * L;
      col.resize(static_cast<std::size_t>(K * cols));
      if (nb > 1) zb.resize(static_cast<std::size_t>(p.co * cols));
      std::fill(img + n0 * p.groups * p.ci * IL, img + (n0 + nb) * p.groups * p.ci * IL, T(0));
      for (std::int64_t g = 0; g < p.groups; ++g) {
        const T* zg = z + (n0 * p.groups + g) * p.co * L;  // one sample: its block of z, in place
        if (nb > 1) {
          for (std::int64_t s = 0; s < nb; ++s)
            for (std::int64_t o = 0; o < p.co; ++o) {
              const T* src = z + (((n0 + s) * p.groups + g) * p.co + o) * L;
              std::copy(src, src + L, zb.data() + o * cols + s * L);
            }
          zg = zb.data();
        }
        gemm<T>(true, false, K, cols, p.co, w + g * p.co * K, K, zg, cols, T(0), col.data(), cols);
        for (std::int64_t s = 0; s < nb; ++s)
          col2im(p, col.data() + s * L, cols, img + ((n0 + s) * p.groups + g) * p.ci * IL);
      }
    }
  });
}

// K3: dW[g co + o, :] = sum over samples of Z[n, g co + o, :] col(I_n,g)^T. The chunks are dealt
// to at most kWeightSlots slots by a rule fixed by the shapes (slot s takes a run of consecutive
// chunks); each slot accumulates its chunks in order into its own partial weight gradient (the GEMM's
// beta = 1 after the first), and the partials are added in slot order (Note [im2col convolution]).
// The slots bound the memory of the partials to kWeightSlots weight-sized buffers.
constexpr std::int64_t kWeightSlots = 8;
constexpr std::int64_t kWeightRunBytes = std::int64_t{512} << 10;

template <class T>
void k3_weight(const ConvPlan& p, const T* img, const T* z, T* dw) {
  const std::int64_t K = p.krows(), L = p.glen(), IL = p.ilen(), wsize = p.groups * p.co * K;
  const std::int64_t nchunks = p.chunks();
  if (nchunks == 0) {
    std::fill(dw, dw + wsize, T(0));
    return;
  }
  const std::int64_t per_slot = ceil_div(nchunks, std::min(nchunks, kWeightSlots));
  const std::int64_t slots = ceil_div(nchunks, per_slot);
  std::vector<T> partial(static_cast<std::size_t>((slots - 1) * wsize));
  const std::int64_t grain = p.grain() >= p.chunks() ? slots : 1;
  if (const DirectGeom d = k1_geom(p); use_direct<T>(p, d)) {
    // Note [Direct weight gradient]: chunks are single samples here (kSampleCols). A slot's samples go
    // in runs of about kWeightRunBytes of grid and image, so that a run stays in L2 while every tile
    // of the weight gradient passes over it; runs after the first add to the slot's partial.
    const DirectTaps<T> taps(d);
    const std::int64_t block_in = p.ci * IL, blocks = p.n * p.groups;
    const std::int64_t run =
        std::max<std::int64_t>(1, kWeightRunBytes / (static_cast<std::int64_t>(sizeof(T)) * (p.co * L + block_in)));
    parallel_for(0, slots, grain, [&](std::int64_t s0, std::int64_t s1) {
      std::vector<std::vector<T>> guarded(static_cast<std::size_t>(run));
      std::vector<T> last_grid;
      // Note [Co-vectorised weight gradient]: the transposed grid and image of each block of a run,
      // uninitialised storage from the cache, where the channel counts allow the kernel at all
      const bool cv = p.co % 8 == 0 && p.ci % 8 == 0;
      Tensor work = cv ? Tensor::empty({run * (p.co * L + block_in)}, dtype_of<T>()) : Tensor();
      std::vector<const T*> grids(static_cast<std::size_t>(run)), imgs(static_cast<std::size_t>(run));
      for (std::int64_t sl = s0; sl < s1; ++sl) {
        T* out = sl == 0 ? dw : partial.data() + (sl - 1) * wsize;
        const std::int64_t first = sl * per_slot, last = std::min(p.n, (sl + 1) * per_slot);
        for (std::int64_t g = 0; g < p.groups; ++g)
          for (std::int64_t r0 = first; r0 < last; r0 += run) {
            const std::int64_t nb = std::min(run, last - r0);
            for (std::int64_t s = 0; s < nb; ++s) {
              const std::int64_t i = (r0 + s) * p.groups + g;
              grids[static_cast<std::size_t>(s)] = z + i * p.co * L;
              if (i == blocks - 1) {  // its last row's last vector may read past the tensor: a copy
                last_grid.assign(static_cast<std::size_t>(p.co * L + kMaxLanes), T(0));
                std::copy(z + i * p.co * L, z + (i + 1) * p.co * L, last_grid.data());
                grids[static_cast<std::size_t>(s)] = last_grid.data();
              }
              imgs[static_cast<std::size_t>(s)] =
                  taps.image(img, i, blocks, block_in, guarded[static_cast<std::size_t>(s)]);
            }
            gemmk::direct_conv_weight<T>({p.co, L, K, p.kh * p.kw, nb, grids.data(), imgs.data(), IL, taps.shift.data(),
                                          taps.mask.data(), taps.padded, taps.ones.data(), out + g * p.co * K, K,
                                          r0 > first, taps.runs.data(), taps.run_start.data(),
                                          cv ? work.data<T>() : nullptr});
          }
      }
    });
  } else
    parallel_for(0, slots, grain, [&](std::int64_t s0, std::int64_t s1) {
      std::vector<T> col, zb;
      for (std::int64_t sl = s0; sl < s1; ++sl) {
        T* out = sl == 0 ? dw : partial.data() + (sl - 1) * wsize;
        for (std::int64_t c = sl * per_slot; c < std::min(nchunks, (sl + 1) * per_slot); ++c) {
          const T beta = c == sl * per_slot ? T(0) : T(1);
          const std::int64_t n0 = c * p.chunk, nb = std::min(p.chunk, p.n - n0), cols = nb * L;
          col.resize(static_cast<std::size_t>(K * cols));
          if (nb > 1) zb.resize(static_cast<std::size_t>(p.co * cols));
          for (std::int64_t g = 0; g < p.groups; ++g) {
            for (std::int64_t s = 0; s < nb; ++s) {
              im2col(p, img + ((n0 + s) * p.groups + g) * p.ci * IL, col.data() + s * L, cols);
              if (nb == 1) break;
              for (std::int64_t o = 0; o < p.co; ++o) {
                const T* src = z + (((n0 + s) * p.groups + g) * p.co + o) * L;
                std::copy(src, src + L, zb.data() + o * cols + s * L);
              }
            }
            const T* zg = nb == 1 ? z + (n0 * p.groups + g) * p.co * L : zb.data();  // one sample: in place
            gemm<T>(false, true, p.co, K, cols, zg, cols, col.data(), cols, beta, out + g * p.co * K, K);
          }
        }
      }
    });
  // The fixed-order sum of the partials, cut by weight elements.
  parallel_for(0, wsize, kParallelGrain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t sl = 1; sl < slots; ++sl) {
      const T* src = partial.data() + (sl - 1) * wsize;
      for (std::int64_t i = i0; i < i1; ++i) dw[i] += src[i];
    }
  });
}

// db[o] = sum over n and the plane of g[n, o, :], in increasing (n, position) order, in double.
// y[i, c, :] += bias[c] for y (n, channels, len).
template <class T>
void add_bias(T* y, const T* bias, std::int64_t n, std::int64_t channels, std::int64_t len) {
  const std::int64_t grain = grain_for(len);
  parallel_for(0, n * channels, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      T* dst = y + r * len;
      const T b = bias[r % channels];
      for (std::int64_t l = 0; l < len; ++l) dst[l] += b;
    }
  });
}

template <class T>
void bias_grad(const T* g, std::int64_t n, std::int64_t channels, std::int64_t len, T* db) {
  const std::int64_t grain = grain_for(n * len);
  parallel_for(0, channels, grain, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o) {
      double acc = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const T* src = g + (i * channels + o) * len;
        for (std::int64_t l = 0; l < len; ++l) acc += static_cast<double>(src[l]);
      }
      db[o] = static_cast<T>(acc);
    }
  });
}

XGRAD_INSTANTIATE_FLOATING(k1_forward);
XGRAD_INSTANTIATE_FLOATING(k2_adjoint);
XGRAD_INSTANTIATE_FLOATING(k3_weight);
XGRAD_INSTANTIATE_FLOATING(bias_grad);
XGRAD_INSTANTIATE_FLOATING(add_bias);

}  // namespace xgrad::detail
