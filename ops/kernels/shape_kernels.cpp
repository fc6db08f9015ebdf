#include "xgrad/ops/kernels/shape_kernels.hpp"

#include <algorithm>
#include <cstring>

#include "xgrad/core/parallel.hpp"

namespace xgrad::detail {

template <class T>
void permute_kernel(const T* src, T* dst, const Shape& in_shape, const std::vector<std::int64_t>& dims) {
  const std::int64_t total = shape_numel(in_shape);
  if (total == 0) return;  // first: merging the dims of an empty shape could overflow
  const Shape in_strides = contiguous_strides(in_shape);
  // Output dims (size, source stride), dropping size-1 dims and merging runs that stay adjacent.
  Shape size, sstride;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    const auto src_dim = static_cast<std::size_t>(dims[d]);
    const std::int64_t n = in_shape[src_dim], st = in_strides[src_dim];
    if (n == 1) continue;
    if (!size.empty() && sstride.back() == st * n) {
      size.back() *= n;
      sstride.back() = st;
    } else {
      size.push_back(n);
      sstride.push_back(st);
    }
  }
  if (size.empty() || sstride.back() == 1) {
    // Rows of the innermost output dim are contiguous in the source.
    const std::int64_t len = size.empty() ? 1 : size.back();
    const std::size_t nd = size.size();
    parallel_for(0, total / len, grain_for(len), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        std::int64_t rem = r, off = 0;
        for (std::size_t d = nd == 0 ? 0 : nd - 1; d-- > 0;) {  // all dims but the innermost
          off += (rem % size[d]) * sstride[d];
          rem /= size[d];
        }
        std::memcpy(dst + r * len, src + off, static_cast<std::size_t>(len) * sizeof(T));
      }
    });
    return;
  }
  // Tiled transpose of the plane (p, last) where p is the output dim with source stride 1.
  const std::size_t nd = size.size();
  const std::size_t last = nd - 1;
  std::size_t p = 0;
  while (sstride[p] != 1) ++p;
  const Shape dstride = contiguous_strides(size);
  Shape osize, osrc, odst;  // the other dims
  for (std::size_t d = 0; d < last; ++d)
    if (d != p) {
      osize.push_back(size[d]);
      osrc.push_back(sstride[d]);
      odst.push_back(dstride[d]);
    }
  constexpr std::int64_t kTile = 32;
  const std::int64_t np = size[p], nl = size[last], sl = sstride[last], dp = dstride[p];
  const std::int64_t tiles_p = (np + kTile - 1) / kTile;
  const std::int64_t outer = shape_numel(osize);
  parallel_for(0, outer * tiles_p, grain_for(kTile * nl), [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      std::int64_t rem = t / tiles_p, soff = 0, doff = 0;
      for (std::size_t d = osize.size(); d-- > 0;) {
        const std::int64_t i = rem % osize[d];
        rem /= osize[d];
        soff += i * osrc[d];
        doff += i * odst[d];
      }
      const std::int64_t p0 = (t % tiles_p) * kTile, p1 = std::min(np, p0 + kTile);
      for (std::int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const std::int64_t l1 = std::min(nl, l0 + kTile);
        for (std::int64_t ip = p0; ip < p1; ++ip) {
          T* drow = dst + doff + ip * dp;
          const T* scol = src + soff + ip;
          for (std::int64_t il = l0; il < l1; ++il) drow[il] = scol[il * sl];
        }
      }
    }
  });
}

// One instantiation per element size: a permute only moves elements.
template decltype(permute_kernel<std::uint8_t>) permute_kernel<std::uint8_t>;
template decltype(permute_kernel<std::uint32_t>) permute_kernel<std::uint32_t>;
template decltype(permute_kernel<std::uint64_t>) permute_kernel<std::uint64_t>;

void join_rows(const void* const* srcs, std::size_t k, void* dst, std::size_t elem_size, std::int64_t outer,
               const std::int64_t* lens) {
  const std::size_t esize = elem_size;
  std::vector<std::int64_t> offs(k + 1, 0);
  for (std::size_t i = 0; i < k; ++i) offs[i + 1] = offs[i] + lens[i];
  const std::int64_t row = offs[k];
  char* d = static_cast<char*>(dst);
  const auto items = outer * static_cast<std::int64_t>(k);
  parallel_for(0, items, grain_for(std::max<std::int64_t>(1, row / static_cast<std::int64_t>(k))),
               [&](std::int64_t t0, std::int64_t t1) {
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t o = t / static_cast<std::int64_t>(k);
                   const auto i = static_cast<std::size_t>(t % static_cast<std::int64_t>(k));
                   const char* s = static_cast<const char*>(srcs[i]);
                   std::memcpy(d + static_cast<std::size_t>(o * row + offs[i]) * esize,
                               s + static_cast<std::size_t>(o * lens[i]) * esize,
                               static_cast<std::size_t>(lens[i]) * esize);
                 }
               });
}

void copy_column_block(const void* src, void* dst, std::size_t elem_size, std::int64_t outer, std::int64_t row,
                       std::int64_t off, std::int64_t len) {
  if (len == 0) return;
  const std::size_t esize = elem_size;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  parallel_for(0, outer, grain_for(len), [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o)
      std::memcpy(d + static_cast<std::size_t>(o * len) * esize, s + static_cast<std::size_t>(o * row + off) * esize,
                  static_cast<std::size_t>(len) * esize);
  });
}

void roll_map(std::int64_t n, std::int64_t k, std::int64_t* map) {
  for (std::int64_t o = 0; o < n; ++o) map[o] = o >= k ? o - k : o - k + n;
}

}  // namespace xgrad::detail
