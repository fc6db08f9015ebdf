#pragma once
// Tensor storage allocation: a caching allocator for large buffers, with statistics.
//
// Note [Caching allocator]: a training step frees and allocates the same large buffers (outputs,
// gradients, saved activations) every iteration. Through malloc, buffers of glibc's mmap size
// (128 KiB and up, adjusted at run time up to 32 MiB) are returned to the system when freed and
// mapped afresh on the next allocation, so every step page-faults each of them in again: that was
// a third of a block-sparse training step (issue "Fast by default"). xgrad therefore keeps freed
// buffers of at least kCacheMinBytes in size-class bins and hands them out again:
// - size classes: a request is rounded up to a multiple of 1/8 of its power of two (at most 12.5%
//   more than asked), so a buffer freed by one step serves the same request in the next;
// - a cap on the bytes held in the cache (set_memory_cache_limit, default 1 GiB or a quarter of the
//   physical memory, whichever is less): a freed buffer that would exceed it goes back to the system;
// - empty_cache() returns every cached buffer to the system (like torch.cuda.empty_cache);
// - statistics (memory_stats): bytes in use, cached and their peaks, and how many requests the
//   cache served;
// - thread-safe (one mutex; buffers this large cost far more to fill than to lock), and buffers
//   may be freed on any thread;
// - under AddressSanitizer cached buffers are poisoned, so a use after free is still reported.
// Smaller buffers go straight to the system allocator, whose own free lists reuse them without
// fresh pages. The cache changes where memory comes from, never a result.
//
// Ops' own large buffers that are rebuilt on every call (the resampling convolution's per-output tap
// plan and its sampled response's tables) are std::vectors with detail::CachingAllocator, so they come
// from the same cache: through malloc, each was a fresh mapping on every step (a learnable sampled
// response's forward + backward took ~150 minor page faults a step). They count in the statistics
// like tensor storage.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xgrad {

/// Allocation statistics of tensor storage since the start (or the last reset of the peaks).
struct MemoryStats {
  std::size_t allocated_bytes = 0;       ///< bytes of live tensor storage (as requested)
  std::size_t peak_allocated_bytes = 0;  ///< maximum of allocated_bytes
  std::size_t cached_bytes = 0;          ///< bytes of freed buffers kept for reuse
  std::size_t peak_cached_bytes = 0;     ///< maximum of cached_bytes
  std::size_t cache_limit_bytes = 0;     ///< the cap on cached_bytes
  std::uint64_t allocations = 0;         ///< storage allocations of at least kCacheMinBytes
  std::uint64_t cache_hits = 0;          ///< of those, served from the cache
  std::uint64_t system_allocations = 0;  ///< of those, served by the system allocator
  std::uint64_t system_frees = 0;        ///< cacheable buffers returned to the system
};

/// Buffers smaller than this are not cached (the system allocator reuses them without new pages).
inline constexpr std::size_t kCacheMinBytes = std::size_t{64} * 1024;

/// Current statistics (a consistent snapshot).
MemoryStats memory_stats();
/// Sets peak_allocated_bytes and peak_cached_bytes to the current values.
void reset_peak_memory_stats();
/// Returns every cached buffer to the system; allocated memory is not affected.
void empty_cache();
/// Caps the bytes the cache may hold (0 disables caching); buffers beyond a new, lower cap are
/// returned to the system at once.
void set_memory_cache_limit(std::size_t bytes);
/// The current cap.
std::size_t memory_cache_limit();

namespace detail {
/// A 64-byte aligned buffer of at least `bytes` bytes for tensor storage. Throws xgrad::Error
/// naming `what` and the bytes asked for when the system cannot provide it (never std::bad_alloc).
void* storage_allocate(std::size_t bytes, const char* what = "tensor");
/// Frees a buffer from storage_allocate of the same `bytes`.
void storage_free(void* p, std::size_t bytes) noexcept;
/// The size class a request of `bytes` is rounded up to (bytes itself below kCacheMinBytes).
std::size_t storage_size_class(std::size_t bytes);
/// storage_allocate for `n` elements of `size` bytes, the byte count computed by checked_nbytes (Note
/// [Checked sizes] in core/checked.hpp): a count whose bytes overflow is an xgrad::Error naming `what`.
void* storage_allocate_array(std::size_t n, std::size_t size, const char* what);

/// A standard allocator over storage_allocate / storage_free (64-byte aligned; buffers of at least
/// kCacheMinBytes cached and reused, Note [Caching allocator]), for an op's large vectors that are
/// rebuilt on every call. Stateless: every instance frees what any other allocated.
template <class T>
struct CachingAllocator {
  static_assert(alignof(T) <= 64, "CachingAllocator: storage is 64-byte aligned");
  using value_type = T;
  CachingAllocator() noexcept = default;
  template <class U>
  CachingAllocator(const CachingAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) { return static_cast<T*>(storage_allocate_array(n, sizeof(T), "scratch buffer")); }
  void deallocate(T* p, std::size_t n) noexcept { storage_free(p, n * sizeof(T)); }  // checked when allocated
  template <class U>
  bool operator==(const CachingAllocator<U>&) const noexcept {
    return true;
  }
};

/// A std::vector whose buffer comes from the storage cache (CachingAllocator).
template <class T>
using CachedVector = std::vector<T, CachingAllocator<T>>;
}  // namespace detail

}  // namespace xgrad
