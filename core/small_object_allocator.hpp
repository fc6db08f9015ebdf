#pragma once
// Internal: the small-object pool behind the graph's heap objects (nodes, TensorImpl, Storage). Not
// in core/detail/ because it is installed: apply<F> (core/autograd.hpp), a template that compiles in
// the user's code for a custom Function, allocates the node with PoolAllocator.
//
// Note [Small-object pool]: every op makes a handful of small heap objects (the node, the result's
// TensorImpl and Storage) that die together when the graph does. A thread-local free list per size
// class (multiples of 16 bytes up to 512) recycles them without going through malloc, whose
// per-size caches are too small for a graph's worth of frees. Blocks come from operator new and may
// be freed on any thread: they join the freeing thread's lists (up to a cap; beyond it, and after
// that thread's pool is gone, they go back to operator delete). No state is shared between threads,
// so the pool needs no lock and a graph built on one thread may die on another. Sanitizer builds
// (ASan, TSan) bypass the pool so that the sanitizers see every allocation.
#include <cstddef>

namespace xgrad::detail {

void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;

/// Allocator over the pool, for std::allocate_shared of graph objects.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16, "PoolAllocator: over-aligned types are not supported");
    return static_cast<T*>(pool_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace xgrad::detail
