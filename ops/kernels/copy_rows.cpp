#include "xgrad/ops/kernels/copy_rows.hpp"

#if defined(__AVX2__)
#include <immintrin.h>  // non-temporal stores: xsimd has no streaming store (Note [Streaming row copies])
#endif

#include <cstring>

#include "xgrad/core/parallel.hpp"

namespace xgrad::detail {

namespace {

#if defined(__AVX2__)
// The loop for rows of whole 32-byte vectors (`bytes` a multiple of 32), with streaming (Stream) or
// plain stores. The row length is a local of each task, not read through the lambda's captured
// reference: the stores could alias it, and a reload between stores halves the streamed copy's speed
// (bench/results/tuning_notes.md, "The row length in copy_rows_avx2").
// Rows go a whole 64-byte line (two stores) at a time, so a streamed line's write-combining buffer
// fills at once; a short source row (up to 1 KB: a gather from a table in L2/L3) is prefetched 8 rows
// ahead.
template <bool Stream, class SrcRow, class DstRow>
void copy_rows_avx2(const char* s, char* d, std::int64_t rows, std::int64_t len, std::size_t bytes, SrcRow src_row,
                    DstRow dst_row) {
  const auto store = [](__m256i* p, __m256i v) {
    if constexpr (Stream)
      _mm256_stream_si256(p, v);
    else
      _mm256_storeu_si256(p, v);
  };
  parallel_for(0, rows, grain_for(len), [=](std::int64_t r0, std::int64_t r1) {
    const std::size_t nb = bytes, nv = bytes / 32;  // locals: no store can alias them
    for (std::int64_t r = r0; r < r1; ++r) {
      if (nb <= 1024 && r + 8 < r1) {
        const char* ahead = s + static_cast<std::size_t>(src_row(r + 8)) * nb;
        for (std::size_t k = 0; k < nb; k += 64) _mm_prefetch(ahead + k, _MM_HINT_T0);
      }
      auto* dp = reinterpret_cast<__m256i*>(d + static_cast<std::size_t>(dst_row(r)) * nb);
      const auto* sp = reinterpret_cast<const __m256i*>(s + static_cast<std::size_t>(src_row(r)) * nb);
      std::size_t k = 0;
      for (; k + 2 <= nv; k += 2) {
        const __m256i a = _mm256_loadu_si256(sp + k), b = _mm256_loadu_si256(sp + k + 1);
        store(dp + k, a);
        store(dp + k + 1, b);
      }
      if (k < nv) store(dp + k, _mm256_loadu_si256(sp + k));
    }
    if constexpr (Stream) _mm_sfence();  // the streamed lines are visible before the task reports done
  });
}
#endif

template <class SrcRow, class DstRow>
void copy(const char* s, char* d, std::int64_t rows, std::int64_t len, std::size_t bytes, SrcRow src_row,
          DstRow dst_row) {
#if defined(__AVX2__)
  // Note [Streaming row copies]: a destination of 8 MB or more (an embedding lookup, a graph's
  // gathered rows: tens of MB written once) is written with streaming stores, which skip reading each
  // destination line before writing it; the price is that the output is not left in the cache for its
  // consumer. Only a single thread streams: with two, both ways are bound by memory bandwidth and plain
  // stores into a reused, cache-warm output were faster (bench/results/tuning_notes.md, "Streaming
  // row copies"). Short rows of whole vectors use the same inlined loop with plain stores, cheaper
  // than a memcpy call per row. A copy gives the same bits either way.
  constexpr std::size_t kStreamMinBytes = std::size_t{8} << 20;
  if (bytes % 32 == 0 && static_cast<std::size_t>(rows) * bytes >= kStreamMinBytes &&
      reinterpret_cast<std::uintptr_t>(d) % 32 == 0 && get_num_threads() == 1) {
    copy_rows_avx2<true>(s, d, rows, len, bytes, src_row, dst_row);
    return;
  }
  if (bytes % 32 == 0 && bytes <= 1024) {
    copy_rows_avx2<false>(s, d, rows, len, bytes, src_row, dst_row);
    return;
  }
#endif
  parallel_for(0, rows, grain_for(len), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      std::memcpy(d + static_cast<std::size_t>(dst_row(r)) * bytes, s + static_cast<std::size_t>(src_row(r)) * bytes,
                  bytes);
  });
}

}  // namespace

void copy_rows(const void* src, void* dst, std::int64_t row_len, std::size_t elem_size, std::int64_t outer,
               std::int64_t len, std::int64_t n, const std::int64_t* pos, bool scatter) {
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  const std::int64_t rows = outer * len;
  const std::size_t row_bytes = static_cast<std::size_t>(row_len) * elem_size;
  if (row_bytes == 0 || rows == 0) return;
  const auto same = [](std::int64_t r) { return r; };
  if (outer == 1) {  // dim 0 (embeddings, graph features): no division per row
    const auto at = [pos](std::int64_t r) { return pos[r]; };
    if (scatter)
      copy(s, d, rows, row_len, row_bytes, same, at);
    else
      copy(s, d, rows, row_len, row_bytes, at, same);
    return;
  }
  const auto at = [pos, len, n](std::int64_t r) { return (r / len) * n + pos[r % len]; };
  if (scatter)
    copy(s, d, rows, row_len, row_bytes, same, at);
  else
    copy(s, d, rows, row_len, row_bytes, at, same);
}

}  // namespace xgrad::detail
