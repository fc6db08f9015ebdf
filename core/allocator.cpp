#include "xgrad/core/allocator.hpp"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define XGRAD_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define XGRAD_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define XGRAD_POISON(p, n) ((void)(p), (void)(n))
#define XGRAD_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace xgrad {
namespace {

std::size_t default_cache_limit() {
  constexpr std::size_t kGiB = std::size_t{1} << 30;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return kGiB;
  return std::min(kGiB, static_cast<std::size_t>(pages) / 4 * static_cast<std::size_t>(page));
}

// Live bytes of every storage (small ones too), and their peak: atomics, so that small tensors pay
// no lock.
std::atomic<std::size_t> g_allocated{0};
std::atomic<std::size_t> g_peak_allocated{0};

void note_allocated(std::size_t bytes) {
  const std::size_t now = g_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t peak = g_peak_allocated.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_allocated.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// The cache of large buffers. Freed buffers are kept in `lru` (oldest first) and indexed by size
// class in `bins` (each bin oldest first too): a request takes its bin's newest buffer (warm in
// cache), and the cap evicts the oldest buffers of any class first.
class Cache {
 public:
  void* allocate(std::size_t bytes, std::size_t cls, const char* what) {
    {
      std::lock_guard lock(mutex_);
      ++allocations_;
      auto it = bins_.find(cls);
      if (it != bins_.end() && !it->second.empty()) {
        const auto entry = it->second.back();
        it->second.pop_back();
        void* p = entry->ptr;
        lru_.erase(entry);
        cached_ -= cls;
        ++hits_;
        XGRAD_UNPOISON(p, cls);
        return p;
      }
      ++system_allocations_;
    }
    void* p = std::aligned_alloc(64, cls);
    if (p == nullptr) {  // the cache may hold what the system lacks: give it back and try once more
      empty();
      p = std::aligned_alloc(64, cls);
    }
    XGRAD_CHECK(p != nullptr, "{}: cannot allocate {} bytes ({:.3g} GiB) of storage: out of memory", what, bytes,
                static_cast<double>(bytes) / 1073741824.0);
    return p;
  }

  void release(void* p, std::size_t cls) noexcept {
    std::unique_lock lock(mutex_);
    if (cls > limit_) {
      ++system_frees_;
      lock.unlock();
      std::free(p);
      return;
    }
    evict_locked(limit_ - cls);  // room for this one
    try {
      lru_.push_back(Entry{p, cls});
      bins_[cls].push_back(std::prev(lru_.end()));
    } catch (...) {  // no memory for the bookkeeping: do not cache
      if (!lru_.empty() && lru_.back().ptr == p) lru_.pop_back();
      ++system_frees_;
      lock.unlock();
      std::free(p);
      return;
    }
    cached_ += cls;
    peak_cached_ = std::max(peak_cached_, cached_);
    XGRAD_POISON(p, cls);
  }

  void empty() noexcept {
    std::lock_guard lock(mutex_);
    evict_locked(0);
  }

  void set_limit(std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    limit_ = bytes;
    evict_locked(bytes);
  }

  void fill(MemoryStats& s) {
    std::lock_guard lock(mutex_);
    s.cached_bytes = cached_;
    s.peak_cached_bytes = peak_cached_;
    s.cache_limit_bytes = limit_;
    s.allocations = allocations_;
    s.cache_hits = hits_;
    s.system_allocations = system_allocations_;
    s.system_frees = system_frees_;
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    peak_cached_ = cached_;
  }

  std::size_t limit() {
    std::lock_guard lock(mutex_);
    return limit_;
  }

 private:
  struct Entry {
    void* ptr;
    std::size_t cls;
  };
  // Frees the oldest cached buffers until at most `keep` bytes stay cached.
  void evict_locked(std::size_t keep) noexcept {
    while (cached_ > keep && !lru_.empty()) {
      const Entry e = lru_.front();
      auto& bin = bins_[e.cls];
      bin.pop_front();  // the oldest of its class is the oldest overall entry of that class
      lru_.pop_front();
      cached_ -= e.cls;
      ++system_frees_;
      XGRAD_UNPOISON(e.ptr, e.cls);
      std::free(e.ptr);
    }
  }

  std::mutex mutex_;
  std::list<Entry> lru_;
  std::unordered_map<std::size_t, std::deque<std::list<Entry>::iterator>> bins_;
  std::size_t cached_ = 0, peak_cached_ = 0, limit_ = default_cache_limit();
  std::uint64_t allocations_ = 0, hits_ = 0, system_allocations_ = 0, system_frees_ = 0;
};

// Never destroyed: tensors held in other statics may be freed after every destructor has run.
// Cached buffers stay reachable from it, so leak checkers do not report them.
Cache& cache() {
  static Cache* c = new Cache();  // NOLINT(cppcoreguidelines-owning-memory)
  return *c;
}

}  // namespace

std::size_t detail::storage_size_class(std::size_t bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  if (bytes < kCacheMinBytes) return rounded;
  const std::size_t step = std::bit_floor(bytes) / 8;  // at least 8 KiB, a multiple of 64
  return (bytes + step - 1) / step * step;
}

// Physical memory plus swap: the most the kernel grants one process under its default overcommit
// heuristic. Larger requests are refused here, with a message, instead of by the system allocator
// (whose failure for such sizes a sanitizer runtime turns into an abort).
static std::size_t memory_ceiling() {
  static const std::size_t ceiling = [] {
    struct sysinfo info {};
    if (::sysinfo(&info) != 0) return std::numeric_limits<std::size_t>::max() >> 1;
    const std::size_t unit = info.mem_unit == 0 ? 1 : info.mem_unit;
    return (static_cast<std::size_t>(info.totalram) + static_cast<std::size_t>(info.totalswap)) * unit;
  }();
  return ceiling;
}

void* detail::storage_allocate(std::size_t bytes, const char* what) {
  XGRAD_CHECK(bytes <= memory_ceiling(),
              "{}: cannot allocate {} bytes ({:.3g} GiB) of storage: more than this machine's memory and swap "
              "({:.3g} GiB)",
              what, bytes, static_cast<double>(bytes) / 1073741824.0,
              static_cast<double>(memory_ceiling()) / 1073741824.0);
  const std::size_t cls = storage_size_class(bytes);
  void* p = nullptr;
  if (bytes >= kCacheMinBytes) {
    p = cache().allocate(bytes, cls, what);
  } else {
    p = std::aligned_alloc(64, cls);
    XGRAD_CHECK(p != nullptr, "{}: cannot allocate {} bytes of storage: out of memory", what, bytes);
  }
  note_allocated(bytes);
  return p;
}

void* detail::storage_allocate_array(std::size_t n, std::size_t size, const char* what) {
  return storage_allocate(checked_nbytes(checked_size(n, what, "count"), size, what, "count"), what);
}

void detail::storage_free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  g_allocated.fetch_sub(bytes, std::memory_order_relaxed);
  if (bytes >= kCacheMinBytes)
    cache().release(p, storage_size_class(bytes));
  else
    std::free(p);
}

MemoryStats memory_stats() {
  MemoryStats s;
  cache().fill(s);
  s.allocated_bytes = g_allocated.load(std::memory_order_relaxed);
  s.peak_allocated_bytes = g_peak_allocated.load(std::memory_order_relaxed);
  return s;
}

void reset_peak_memory_stats() {
  g_peak_allocated.store(g_allocated.load(std::memory_order_relaxed), std::memory_order_relaxed);
  cache().reset_peak();
}

void empty_cache() { cache().empty(); }
void set_memory_cache_limit(std::size_t bytes) { cache().set_limit(bytes); }
std::size_t memory_cache_limit() { return cache().limit(); }

}  // namespace xgrad
