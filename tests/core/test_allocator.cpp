// The caching allocator of tensor storage (Note [Caching allocator] in core/allocator.hpp).
#include <thread>
#include <vector>

#include "support.hpp"
#include "xgrad/core/allocator.hpp"

using namespace xgrad;

namespace {
// Restores the cache limit a test changed.
struct LimitGuard {
  std::size_t saved = memory_cache_limit();
  ~LimitGuard() { set_memory_cache_limit(saved); }
};
}  // namespace

TEST_CASE("allocator: size classes round up by at most an eighth, in multiples of 64 bytes") {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{4000}, kCacheMinBytes - 1,
                            kCacheMinBytes, kCacheMinBytes + 1, std::size_t{1000003}, std::size_t{1} << 26,
                            (std::size_t{1} << 26) + 1, std::size_t{3} << 30}) {
    const std::size_t c = detail::storage_size_class(bytes);
    INFO("bytes " << bytes << " class " << c);
    CHECK(c >= bytes);
    CHECK(c % 64 == 0);
    if (bytes >= kCacheMinBytes) CHECK(c <= bytes + bytes / 8 + 64);
  }
  // Requests of one step's sizes map to few classes, so they find each other's buffers.
  CHECK(detail::storage_size_class(1000000) == detail::storage_size_class(1000001));
}

TEST_CASE("allocator: a freed large buffer serves the next request of its class without the system") {
  empty_cache();
  const MemoryStats before = memory_stats();
  const void* first = nullptr;
  {
    Tensor a = Tensor::empty({1 << 18});  // 1 MiB
    first = a.raw_data();
    const MemoryStats live = memory_stats();
    CHECK(live.allocated_bytes == before.allocated_bytes + a.nbytes());
    CHECK(live.peak_allocated_bytes >= live.allocated_bytes);
    CHECK(live.system_allocations == before.system_allocations + 1);
  }
  const MemoryStats freed = memory_stats();
  CHECK(freed.allocated_bytes == before.allocated_bytes);
  CHECK(freed.cached_bytes == before.cached_bytes + detail::storage_size_class(std::size_t{1} << 20));
  // A training loop: the same sizes every step are all served from the cache after the first.
  for (int step = 0; step < 5; ++step) {
    Tensor a = Tensor::zeros({1 << 18});
    Tensor b = Tensor::ones({1 << 18});
    CHECK((a.raw_data() == first || b.raw_data() == first));
    Tensor c = a.clone_data();  // a third buffer of the class
    c.add_(b);
    CHECK(c.data<float>()[(1 << 18) - 1] == 1.0f);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.system_allocations - before.system_allocations <= 3);  // a, b and c
  CHECK(after.cache_hits - before.cache_hits >= 10);
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
}

TEST_CASE("allocator: small buffers are counted but not cached") {
  empty_cache();
  const MemoryStats before = memory_stats();
  {
    Tensor a = Tensor::empty({100});
    CHECK(memory_stats().allocated_bytes == before.allocated_bytes + 400);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.cached_bytes == 0);
  CHECK(after.allocations == before.allocations);
}

TEST_CASE("allocator: the cap on cached bytes evicts the oldest buffers and is never exceeded") {
  LimitGuard guard;
  empty_cache();
  const std::size_t one = detail::storage_size_class(std::size_t{1} << 20);
  set_memory_cache_limit(2 * one);
  CHECK(memory_cache_limit() == 2 * one);
  const MemoryStats before = memory_stats();
  {
    std::vector<Tensor> ts;
    for (int i = 0; i < 5; ++i) ts.push_back(Tensor::empty({1 << 18}));
  }
  const MemoryStats after = memory_stats();
  CHECK(after.cached_bytes == 2 * one);
  CHECK(after.system_frees - before.system_frees == 3);
  // A buffer larger than the cap is never cached.
  { Tensor big = Tensor::empty({3 << 18}); }
  CHECK(memory_stats().cached_bytes <= 2 * one);
  // Lowering the cap returns the excess at once; 0 disables caching.
  set_memory_cache_limit(one);
  CHECK(memory_stats().cached_bytes == one);
  set_memory_cache_limit(0);
  CHECK(memory_stats().cached_bytes == 0);
  { Tensor t = Tensor::empty({1 << 18}); }
  CHECK(memory_stats().cached_bytes == 0);
}

TEST_CASE("allocator: peaks and their reset") {
  empty_cache();
  reset_peak_memory_stats();
  const MemoryStats base = memory_stats();
  CHECK(base.peak_allocated_bytes == base.allocated_bytes);
  { Tensor t = Tensor::empty({1 << 20}); }  // 4 MiB, then freed
  const MemoryStats s = memory_stats();
  CHECK(s.peak_allocated_bytes >= base.allocated_bytes + (std::size_t{4} << 20));
  CHECK(s.peak_cached_bytes >= detail::storage_size_class(std::size_t{4} << 20));
  reset_peak_memory_stats();
  CHECK(memory_stats().peak_allocated_bytes == memory_stats().allocated_bytes);
  empty_cache();
}

TEST_CASE("allocator: concurrent allocation and freeing from several threads keeps the books balanced") {
  empty_cache();
  const std::size_t before = memory_stats().allocated_bytes;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const std::int64_t n = (std::int64_t{1} << 14) * (1 + (i + t) % 7);  // 64 KiB .. 448 KiB
        Tensor a = Tensor::full({n}, 1.0);
        Tensor b = a.clone_data();  // may reuse a buffer another thread freed
        b.add_(a);
        if (b.data<float>()[n - 1] != 2.0f) throw std::runtime_error("wrong value");
      }
    });
  for (auto& th : threads) th.join();
  CHECK(memory_stats().allocated_bytes == before);
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
}

TEST_CASE("allocator: a request larger than the machine's memory is an xgrad::Error stating the bytes") {
  // 2^44 float32 elements: 64 TiB.
  test::require_error([] { (void)Tensor::empty({std::int64_t{1} << 44}); },
                      {"cannot allocate", "70368744177664 bytes", "memory"});
  test::require_error(
      [] {
        (void)Tensor::zeros({std::int64_t{1} << 22, std::int64_t{1} << 22}, kFloat64);
      },
      {"cannot allocate", "bytes"});
}

TEST_CASE("allocator: CachedVector takes large buffers from the cache and small ones from the system") {
  empty_cache();
  const MemoryStats before = memory_stats();
  const void* first = nullptr;
  {
    detail::CachedVector<double> a(1 << 17);  // 1 MiB
    first = a.data();
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
    CHECK(memory_stats().allocated_bytes == before.allocated_bytes + a.size() * sizeof(double));
  }
  CHECK(memory_stats().allocated_bytes == before.allocated_bytes);
  {
    detail::CachedVector<double> b(1 << 17);  // the same class: the same buffer, from the cache
    CHECK(static_cast<const void*>(b.data()) == first);
    detail::CachedVector<int> small(10, 7);  // below kCacheMinBytes: counted, not cached
    CHECK(small[9] == 7);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.system_allocations == before.system_allocations + 1);
  CHECK(after.cache_hits == before.cache_hits + 1);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  // An element count whose byte size overflows is an error (Note [Checked sizes]), not a tiny buffer.
  detail::CachingAllocator<double> alloc;
  test::require_error([&] { (void)alloc.allocate(std::size_t{1} << 62); },
                      {"scratch buffer", "count", "more memory than can exist"});
  test::require_error([&] { (void)alloc.allocate(std::numeric_limits<std::size_t>::max()); },
                      {"scratch buffer", "count", "overflows int64"});
  empty_cache();
}
