#pragma once
// from_blob: a Tensor over memory xgrad does not own (a PyTorch or NumPy buffer, a memory-mapped
// file), without a copy, in the spirit of torch::from_blob.
//
// Note [External storage]: the tensor's Storage points at the caller's memory instead of a buffer
// from xgrad's allocator. The rules:
// - Layout: `data` holds numel(shape) elements of `dtype`, contiguous and row-major (xgrad has no
//   strides), aligned to the element size (no 64-byte alignment is needed: no kernel assumes it).
//   `data` may be null only when the shape has no element.
// - Lifetime: the memory must stay valid while any tensor sharing the storage lives: the tensor
//   itself, its reshapes and detach()es, the copies an autograd graph saved for its backward, and
//   anything else that took a reference. xgrad releases `owner` (or calls `deleter(data)`, once)
//   when the last of them dies, on whichever thread drops it; the deleter must not throw. Without
//   an owner or deleter the caller guarantees the lifetime alone.
// - Writes: xgrad's in-place ops (add_, copy_, an optimizer step on a parameter) write into the
//   memory, bump xgrad's version counter and are seen by the owner. Writes by the owner are NOT
//   seen by xgrad's version counter: a tensor saved for backward and then modified outside xgrad
//   gives a wrong gradient, silently. The owner must not modify the memory between a forward that
//   saved the tensor and the backward (xgrad_torch keeps PyTorch's own version check for this by
//   saving the torch tensors in its autograd.Function).
// - Autograd: the result is a leaf with requires_grad false (set_requires_grad works as for any
//   leaf); gradients are fresh xgrad buffers, never written into the external memory.
#include <memory>

#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// A tensor over `data` (see Note [External storage]); the caller keeps the memory alive.
Tensor from_blob(void* data, const Shape& shape, Dtype dtype);
/// Same; `owner` is held until the last tensor sharing the storage dies (e.g. a shared_ptr to the
/// object that owns the memory).
Tensor from_blob(void* data, const Shape& shape, Dtype dtype, std::shared_ptr<const void> owner);
/// Same; `deleter(data)` is called once when the last tensor sharing the storage dies.
Tensor from_blob(void* data, const Shape& shape, Dtype dtype, std::function<void(void*)> deleter);

/// True when `t`'s storage is external memory (made by from_blob).
bool is_external(const Tensor& t);

}  // namespace xgrad
