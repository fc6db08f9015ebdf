// The small-object pool: Note [Small-object pool] in core/small_object_allocator.hpp.
#include "xgrad/core/small_object_allocator.hpp"

#include <cstdint>
#include <new>

namespace xgrad::detail {
namespace {
#if defined(__has_feature)  // clang spells "built with a sanitizer" this way; g++ defines the macros
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define XGRAD_POOL_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(XGRAD_POOL_SANITIZED)
constexpr bool kPoolEnabled = false;  // let the sanitizers see every allocation
#else
constexpr bool kPoolEnabled = true;
#endif
constexpr std::size_t kPoolGranule = 16;
constexpr std::size_t kPoolMaxBytes = 512;
constexpr std::size_t kPoolClasses = kPoolMaxBytes / kPoolGranule;
constexpr std::uint32_t kPoolCap = 512;  // blocks kept per size class and thread

struct FreeBlock {
  FreeBlock* next;
};
// Trivially destructible, so it stays usable while other thread-locals and statics are destroyed;
// PoolDrain returns its blocks to operator delete when the thread ends.
struct PoolState {
  FreeBlock* head[kPoolClasses];
  std::uint32_t count[kPoolClasses];
  bool registered;
  bool dead;
};
thread_local PoolState t_pool{};

struct PoolDrain {
  PoolDrain() = default;
  PoolDrain(const PoolDrain&) = delete;
  PoolDrain& operator=(const PoolDrain&) = delete;
  ~PoolDrain() {
    t_pool.dead = true;
    for (std::size_t c = 0; c < kPoolClasses; ++c)
      while (FreeBlock* b = t_pool.head[c]) {
        t_pool.head[c] = b->next;
        ::operator delete(b);
      }
  }
};
void register_pool_drain() {
  thread_local PoolDrain drain;
  t_pool.registered = true;
}
}  // namespace

void* pool_allocate(std::size_t bytes) {
  if (kPoolEnabled && bytes <= kPoolMaxBytes && bytes > 0) {
    const std::size_t c = (bytes - 1) / kPoolGranule;
    if (FreeBlock* b = t_pool.head[c]) {
      t_pool.head[c] = b->next;
      --t_pool.count[c];
      return b;
    }
    return ::operator new((c + 1) * kPoolGranule);
  }
  return ::operator new(bytes);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (kPoolEnabled && bytes <= kPoolMaxBytes && bytes > 0 && !t_pool.dead) {
    const std::size_t c = (bytes - 1) / kPoolGranule;
    if (t_pool.count[c] < kPoolCap) {
      if (!t_pool.registered) register_pool_drain();
      auto* b = static_cast<FreeBlock*>(p);
      b->next = t_pool.head[c];
      t_pool.head[c] = b;
      ++t_pool.count[c];
      return;
    }
  }
  ::operator delete(p);
}

}  // namespace xgrad::detail
