#include "xgrad/core/from_blob.hpp"

#include <cstdint>
#include <utility>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/small_object_allocator.hpp"

namespace xgrad {

namespace {
// A Storage over external memory (Note [External storage]). Storage(0) points `data` at its own
// inline buffer, which ~Storage never frees; the destructor puts that pointer back before ~Storage
// runs, so the external memory is released by the owner or deleter only. The shared_ptr<Storage> is
// made with an ExternalStorageDeleter, which deletes it as an ExternalStorage (~Storage is not
// virtual) and lets is_external recognise it (std::get_deleter).
struct ExternalStorage final : Storage {
  ExternalStorage(void* p, std::size_t n, std::shared_ptr<const void> keep, std::function<void(void*)> del)
      : Storage(0), inline_data(data), owner(std::move(keep)), deleter(std::move(del)) {
    if (p != nullptr) data = p;
    nbytes = n;
    external_data = p;
  }
  ~ExternalStorage() {
    data = inline_data;
    nbytes = 0;
    if (deleter) deleter(external_data);
    owner.reset();
  }
  ExternalStorage(const ExternalStorage&) = delete;
  ExternalStorage& operator=(const ExternalStorage&) = delete;

  void* inline_data;
  void* external_data = nullptr;
  std::shared_ptr<const void> owner;
  std::function<void(void*)> deleter;
};

struct ExternalStorageDeleter {
  void operator()(Storage* s) const { delete static_cast<ExternalStorage*>(s); }
};

Tensor make(void* data, const Shape& shape, Dtype dtype, std::shared_ptr<const void> owner,
            std::function<void(void*)> deleter) {
  const std::int64_t numel = checked_numel(shape, "from_blob", "shape");
  const std::size_t nbytes = checked_nbytes(numel, dtype_size(dtype), "from_blob", "shape");
  XGRAD_CHECK(data != nullptr || numel == 0, "from_blob: argument 'data' is null for shape {} ({} elements)",
              shape_str(shape), numel);
  XGRAD_CHECK(reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) == 0,
              "from_blob: argument 'data' ({}) is not aligned to the {}-byte elements of {}", data, dtype_size(dtype),
              dtype_name(dtype));
  auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>{});
  impl->shape = shape;
  impl->numel = numel;
  impl->dtype = dtype;
  impl->storage = std::shared_ptr<Storage>(new ExternalStorage(data, nbytes, std::move(owner), std::move(deleter)),
                                           ExternalStorageDeleter{});
  return Tensor(std::move(impl));
}
}  // namespace

Tensor from_blob(void* data, const Shape& shape, Dtype dtype) { return make(data, shape, dtype, nullptr, {}); }

Tensor from_blob(void* data, const Shape& shape, Dtype dtype, std::shared_ptr<const void> owner) {
  return make(data, shape, dtype, std::move(owner), {});
}

Tensor from_blob(void* data, const Shape& shape, Dtype dtype, std::function<void(void*)> deleter) {
  return make(data, shape, dtype, nullptr, std::move(deleter));
}

bool is_external(const Tensor& t) {
  return t.defined() && std::get_deleter<ExternalStorageDeleter>(t.impl()->storage) != nullptr;
}

}  // namespace xgrad
