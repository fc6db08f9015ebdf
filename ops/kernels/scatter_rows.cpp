#include "xgrad/ops/kernels/scatter_rows.hpp"

#include <algorithm>

#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail {

// Note [Row scatter]: index_add, the backward of index_select (nn::Embedding's included) and the
// 1-d scatter_add add whole rows of src into rows of dst chosen by one int64 per row: never an
// index per element. Note [Determinism] asks that every destination row receive its contributions
// in one fixed order; ours is increasing source position j, the order of the plain serial loop
// `for j: dst[idx[j]] += src[j]` (torch's index_add_ order too). That loop is the 1-thread path
// and the path of small sizes. With more threads each task owns a range of destination rows (and
// a column chunk of very long rows) and walks the inverse of idx (CSR: the sources of each
// destination row in increasing j), so the sums are the serial loop's, bit for bit, whatever the
// split. The inverse is a stable counting sort by destination built in parallel: per-chunk
// histograms, one prefix sum over (row, chunk) in parallel blocks, then each chunk places its
// sources; O(E + chunks * n) ints. Source rows are then read in a random order: they are
// prefetched a few entries ahead. (Measured on the GCN case of bench/index_ops.cpp, 2 cores: the
// serial loop, this path and a scan of all of idx by each task for the rows it owns are within
// noise of each other, all bound by reading src; a column split of rows, or the scan with 4 tasks
// per thread, were slower. Each src row is read once here, which is what bandwidth asks.)
// When x has several outer slabs (dim > 0) they are independent, and the tasks split them instead.
// The same counting sort, invert_rows, is the CSR transpose (csr_transpose in sparse_kernels.cpp:
// the inverse of a pattern's column indices), so a pattern caches what this scatter rebuilds per call
// (Note [Pattern gathers] in ops/sparse.cpp).

namespace {

constexpr std::int64_t kMinCountChunk = 16384;  // indices per counting chunk, at least
constexpr std::int64_t kRowBlock = 8192;        // rows per block of the parallel prefix sum
constexpr std::int64_t kColumnChunk = 4096;     // elements of a row one task adds at most
constexpr std::int64_t kPrefetchRows = 8;       // how far ahead in a CSR list source rows are prefetched

template <class T>
inline void add_row(T* __restrict d, const T* __restrict s, std::int64_t len) {
  for (std::int64_t i = 0; i < len; ++i) d[i] += s[i];
}

template <class T>
void add_rows_kernel(const T* s, T* d, std::int64_t outer, std::int64_t n, std::int64_t inner,
                     const std::vector<std::int64_t>& idx) {
  const auto e = static_cast<std::int64_t>(idx.size());
  const std::int64_t* ip = idx.data();
  auto serial_slab = [&](std::int64_t o) {
    const T* so = s + o * e * inner;
    T* dd = d + o * n * inner;
    for (std::int64_t j = 0; j < e; ++j) add_row(dd + ip[j] * inner, so + j * inner, inner);
  };
  const int threads = get_num_threads();
  if (threads == 1 || outer * e * inner <= kParallelGrain) {
    for (std::int64_t o = 0; o < outer; ++o) serial_slab(o);
    return;
  }
  if (outer >= 4 * static_cast<std::int64_t>(threads)) {  // independent slabs: no inverse needed
    parallel_for(0, outer, grain_for(e * inner), [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) serial_slab(o);
    });
    return;
  }
  std::vector<std::int64_t> inv_start(static_cast<std::size_t>(n) + 1), inv_src(static_cast<std::size_t>(e));
  invert_rows(ip, e, n, inv_start.data(), inv_src.data());
  const std::int64_t cw = std::min(inner, kColumnChunk);
  const std::int64_t nc = (inner + cw - 1) / cw;
  const std::int64_t prefetch_bytes = std::min<std::int64_t>(256, cw * static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t per_row = (e + n - 1) / std::max<std::int64_t>(1, n) + 1;  // contributions, about
  parallel_for(0, outer * n * nc, grain_for(per_row * cw), [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t c = t % nc, rr = t / nc, o = rr / n, r = rr % n;
      const std::int64_t i0 = c * cw, len = std::min(inner - i0, cw);
      T* drow = d + rr * inner + i0;
      const T* so = s + o * e * inner + i0;
      const auto k0 = inv_start[static_cast<std::size_t>(r)];
      const auto k1 = inv_start[static_cast<std::size_t>(r) + 1];
      for (std::int64_t k = k0; k < k1; ++k) {
        if (k + kPrefetchRows < e) {  // a source row ahead: random rows, which no prefetcher guesses
          const char* p =
              reinterpret_cast<const char*>(so + inv_src[static_cast<std::size_t>(k + kPrefetchRows)] * inner);
          for (std::int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(p + b);
        }
        add_row(drow, so + inv_src[static_cast<std::size_t>(k)] * inner, len);
      }
    }
  });
}

}  // namespace

void invert_rows(const std::int64_t* idx, std::int64_t e, std::int64_t n, std::int64_t* start, std::int64_t* src) {
  // Histogram chunks: at most one per thread, at least kMinCountChunk indices each, and no more than
  // e / n of them, so that the chunks * n counters stay within O(e + n).
  const std::int64_t chunks = std::min({static_cast<std::int64_t>(get_num_threads()), e / kMinCountChunk,
                                        std::max<std::int64_t>(1, e / std::max<std::int64_t>(1, n))});
  if (chunks <= 1) {
    std::fill(start, start + n + 1, std::int64_t{0});
    for (std::int64_t j = 0; j < e; ++j) ++start[idx[j] + 1];
    for (std::int64_t r = 0; r < n; ++r) start[r + 1] += start[r];
    std::vector<std::int64_t> next(start, start + n);
    for (std::int64_t j = 0; j < e; ++j) src[next[static_cast<std::size_t>(idx[j])]++] = j;
    return;
  }
  const std::int64_t per = (e + chunks - 1) / chunks;
  // count[c * n + r]: how many of chunk c's indices are r; then, in place, where chunk c's first
  // source of row r goes.
  std::vector<std::int64_t> count(static_cast<std::size_t>(chunks * n), 0);
  std::int64_t* cnt = count.data();
  parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      std::int64_t* h = cnt + c * n;
      for (std::int64_t j = c * per; j < std::min(e, (c + 1) * per); ++j) ++h[idx[j]];
    }
  });
  const std::int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  std::vector<std::int64_t> block_start(static_cast<std::size_t>(blocks) + 1, 0);
  parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      std::int64_t sum = 0;
      for (std::int64_t r = b * kRowBlock; r < std::min(n, (b + 1) * kRowBlock); ++r)
        for (std::int64_t c = 0; c < chunks; ++c) sum += cnt[c * n + r];
      block_start[static_cast<std::size_t>(b) + 1] = sum;
    }
  });
  for (std::size_t b = 0; b < static_cast<std::size_t>(blocks); ++b) block_start[b + 1] += block_start[b];
  parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      std::int64_t run = block_start[static_cast<std::size_t>(b)];
      for (std::int64_t r = b * kRowBlock; r < std::min(n, (b + 1) * kRowBlock); ++r) {
        start[r] = run;
        for (std::int64_t c = 0; c < chunks; ++c) {
          const std::int64_t k = cnt[c * n + r];
          cnt[c * n + r] = run;
          run += k;
        }
      }
    }
  });
  start[n] = e;
  parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      std::int64_t* next = cnt + c * n;
      for (std::int64_t j = c * per; j < std::min(e, (c + 1) * per); ++j) src[next[idx[j]]++] = j;
    }
  });
}

template <class T>
void add_rows_at(const T* src, T* dst, std::int64_t outer, std::int64_t n, std::int64_t inner,
                 const std::vector<std::int64_t>& idx) {
  if (outer == 0 || inner == 0 || idx.empty()) return;
  add_rows_kernel<T>(src, dst, outer, n, inner, idx);
}

XGRAD_INSTANTIATE_FLOATING(add_rows_at);

}  // namespace xgrad::detail
