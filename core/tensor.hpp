#pragma once
// Tensor: a cheap, shared handle to a contiguous row-major buffer with a runtime dtype.
//
// Note [Storage]: data lives in a 64-byte aligned buffer (`Storage`) shared by a tensor and the
// views that reshape/detach make of it, like PyTorch's storage. Every tensor is contiguous, so a
// kernel sees a plain pointer and a shape; xtensor is the interchange type at the API boundary
// (`from_xtensor`, `to_xarray`, `as_xtensor`), in the opt-in header core/xtensor_interop.hpp, which
// this header does not include. Storage carries a version counter, bumped by every in-place op, so
// that backward can refuse a saved tensor that was modified after it was saved.
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xgrad/core/dtype.hpp"
#include "xgrad/core/shape.hpp"
#include "xgrad/core/std_function.hpp"

namespace xgrad {

class Node;
class Generator;
Generator& default_generator();  // core/random.hpp
class Tensor;
namespace detail {
struct TensorHooks;  // core/autograd.hpp
}

/// Note [Small storage]: buffers of at most kInlineBytes bytes (16 floats) live inside the Storage
/// object itself, 64-byte aligned like every buffer, so a small tensor costs no separate allocation.
struct Storage {
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  std::size_t nbytes = 0;
  std::uint32_t version = 0;  // bumped by in-place writes
  static constexpr std::size_t kInlineBytes = 64;

 private:
  alignas(16) unsigned char inline_[kInlineBytes + 48];  // 64-aligned start is at most 48 bytes in
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  std::int64_t numel = 0;
  Dtype dtype = Dtype::float32;
  bool requires_grad = false;  // meaningful for leaves; non-leaves require grad iff grad_fn
  bool retains_grad = false;   // non-leaf asked to keep its .grad (retain_grad())
  // As a leaf's .grad: backward adds into this buffer in place (detail::set_accumulate_in_place,
  // Note [Leaf accumulation]); read and written under the leaf's lock.
  bool accumulate_in_place = false;
  std::uint32_t output_nr = 0;
  std::shared_ptr<Node> grad_fn;     // null for leaves
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient (leaves, or retain_grad)
  // A leaf's hooks (register_hook, register_post_accumulate_grad_hook); null when it has none. A
  // non-leaf's register_hook hooks live on its grad_fn (Note [Hooks] in core/autograd.hpp).
  std::shared_ptr<detail::TensorHooks> hooks;
};

using Tensors = std::vector<Tensor>;

/// The element types of Tensor::from_vector's template form (besides its std::vector<double> form).
template <class T>
concept FromVectorElement = std::same_as<T, std::int64_t> || std::same_as<T, int> || std::same_as<T, float> ||
    std::same_as<T, std::uint8_t> || std::same_as<T, bool>;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (no data); defined() is false
  /// A handle to `impl`. A template taking exactly std::shared_ptr<TensorImpl>, not a plain
  /// parameter of that type: a braced list cannot deduce P, so `{0}` never converts to a Tensor
  /// (through shared_ptr's null-pointer constructor), and calls such as sum(x, {0}) or
  /// index_select(x, 0, {0}) pick their std::vector overload instead of being ambiguous ("explicit"
  /// alone does not prevent that: copy-list-initialization still considers explicit constructors).
  template <std::same_as<std::shared_ptr<TensorImpl>> P>
  explicit Tensor(P impl) : impl_(std::move(impl)) {}

  // ---- creation -------------------------------------------------------------------------
  // Every creation function takes any dtype (Note [Dtypes] in core/dtype.hpp) except linspace, rand
  // and randn (floating point only). A double value is converted to an integer dtype by truncation
  // toward zero and to bool by `!= 0` (convert_value); int64 values beyond 2^53 do not survive the
  // double: use from_data<std::int64_t> for them.
  /// Uninitialised contents.
  static Tensor empty(const Shape& shape, Dtype dtype = kFloat32);
  static Tensor zeros(const Shape& shape, Dtype dtype = kFloat32);
  static Tensor ones(const Shape& shape, Dtype dtype = kFloat32);
  static Tensor full(const Shape& shape, double value, Dtype dtype = kFloat32);
  static Tensor scalar(double value, Dtype dtype = kFloat32);
  /// [start, stop) with `step`, like numpy.arange.
  static Tensor arange(double start, double stop, double step = 1.0, Dtype dtype = kFloat32);
  /// `steps` points from start to stop inclusive, like torch.linspace.
  static Tensor linspace(double start, double stop, std::int64_t steps, Dtype dtype = kFloat32);
  /// Uniform on [0, 1) from `gen` (same seed, same numbers on every machine and at any thread count:
  /// Note [Counter-based random numbers] in core/random.hpp). Floating point dtypes only.
  static Tensor rand(const Shape& shape, Generator& gen, Dtype dtype = kFloat32);
  /// The same from the default generator (torch::rand).
  static Tensor rand(const Shape& shape, Dtype dtype = kFloat32);
  /// Standard normal from `gen`.
  static Tensor randn(const Shape& shape, Generator& gen, Dtype dtype = kFloat32);
  /// The same from the default generator (torch::randn).
  static Tensor randn(const Shape& shape, Dtype dtype = kFloat32);
  /// Copies `values` (row-major) into a tensor of `shape`; sizes must match.
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype = kFloat32);
  /// Copies the values of a std::vector of std::int64_t, int, float, std::uint8_t or bool exactly
  /// into a tensor of `shape` (sizes must match), converted to `dtype`. The default dtype is the
  /// one torch::tensor gives such a vector: int64 for std::int64_t and int, float32 for float, uint8
  /// for std::uint8_t, bool for bool. A template over the element type, so that a braced list,
  /// from_vector({1, 2}, {2}), still calls the std::vector<double> form above (float32).
  template <FromVectorElement T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Dtype dtype = from_vector_dtype<T>()) {
    if constexpr (std::same_as<T, bool>) {
      const std::unique_ptr<bool[]> copy(new bool[values.size()]);  // std::vector<bool> stores bits
      for (std::size_t i = 0; i < values.size(); ++i) copy[i] = values[i];
      return from_buffer(copy.get(), values.size(), kBool, shape, dtype);
    } else {
      return from_buffer(values.data(), values.size(), dtype_of<T>(), shape, dtype);
    }
  }
  /// Copies `values` exactly into a tensor of `shape` and dtype dtype_of<T>() (float, double,
  /// std::int64_t, std::int32_t, std::uint8_t or bool).
  template <class T>
  static Tensor from_data(std::span<const T> values, const Shape& shape);
  /// 1-d tensor from a braced list: Tensor::of({1, 2, 3}).
  static Tensor of(std::initializer_list<double> values, Dtype dtype = kFloat32);
  /// 2-d tensor from nested braced lists: Tensor::of({{1, 2}, {3, 4}}).
  static Tensor of(std::initializer_list<std::initializer_list<double>> rows, Dtype dtype = kFloat32);

  // ---- metadata -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const {
    check_defined("shape");
    return impl_->shape;
  }
  std::int64_t size(std::int64_t axis) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(shape().size()); }
  std::int64_t numel() const {
    check_defined("numel");
    return impl_->numel;
  }
  Dtype dtype() const {
    check_defined("dtype");
    return impl_->dtype;
  }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }

  // ---- data access (contiguous, row-major) ------------------------------------------------
  template <class T>
  T* data();
  template <class T>
  const T* data() const;
  void* raw_data();
  const void* raw_data() const;
  /// data<T>() requires T to be the tensor's element type (an xgrad::Error otherwise).
  /// The value of a one-element tensor, as a double (an int64 beyond 2^53 is rounded: use item<T>).
  double item() const;
  /// The value of a one-element tensor converted to T (convert_value: exact when T is the dtype's
  /// element type).
  template <class T>
  T item() const;
  /// Copy of the contents converted to double (exact except int64 values beyond 2^53).
  std::vector<double> to_vector() const;
  /// Deep copy that does not share storage and has no autograd history.
  Tensor clone_data() const;

  // ---- autograd ---------------------------------------------------------------------------
  bool requires_grad() const;
  /// Marks a leaf as requiring a gradient; returns *this for chaining. Error on non-leaves, and
  /// on integer and bool tensors when `flag` is true (only floating point tensors can require grad).
  Tensor& set_requires_grad(bool flag = true);
  bool is_leaf() const;
  /// Accumulated gradient (undefined until a backward reaches this tensor). grad, set_grad and
  /// zero_grad take the tensor's gradient lock, so they may run while backwards on other threads
  /// accumulate into it (Note [Leaf accumulation] in core/autograd.hpp): grad() returns the value
  /// before or after each whole accumulation, and an accumulation never writes into a buffer that
  /// grad() has returned. Writing into that buffer in place is the caller's business (no backward
  /// into this tensor may run meanwhile).
  Tensor grad() const;
  void set_grad(const Tensor& g);
  /// Sets .grad to undefined, like PyTorch's zero_grad(set_to_none=True).
  void zero_grad();
  /// Keeps .grad on a non-leaf tensor during backward.
  void retain_grad();
  const std::shared_ptr<Node>& grad_fn() const;
  /// A tensor sharing this one's storage, with no history and requires_grad false.
  Tensor detach() const;
  /// Runs reverse-mode differentiation from this tensor. A non-scalar tensor needs `grad`.
  /// create_graph records the backward itself, so the accumulated .grad carries history and can
  /// be differentiated again; retain_graph defaults to create_graph (as torch). Note [Create graph]
  /// in core/autograd.hpp.
  void backward(const Tensor& grad = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;

  // ---- hooks (Note [Hooks] in core/autograd.hpp; the semantics of torch's Tensor.register_hook) ----
  /// Registers `hook`, called with the gradient with respect to this tensor each time a backward
  /// (or xgrad::grad) computes it: for a non-leaf, once per backward with the sum over every path,
  /// before its grad_fn runs; for a leaf, once per backward with the sum of this backward's
  /// contributions, before it is added into .grad. A defined result replaces the gradient (what
  /// flows on, is accumulated into .grad or is returned by grad()); it must have the gradient's shape
  /// and dtype. An undefined result keeps it. Several hooks run in registration order, each given
  /// the previous one's result. Under create_graph the hook runs in grad mode, is given a gradient
  /// with history and its result is differentiated through. Returns the hook's index for
  /// remove_hook. Error when this tensor does not require grad or `hook` is empty. Not thread-safe
  /// against a backward through this tensor running on another thread (register before it starts).
  /// As torch's, a hook must not modify its argument in place (return a new tensor instead); and a
  /// hook that holds this tensor by value (or anything that owns its grad_fn) makes a reference
  /// cycle that is never freed: capture a reference, or remove the hook when done.
  unsigned register_hook(std::function<Tensor(const Tensor&)> hook) const;
  /// The same for a hook that returns nothing (it observes the gradient, which flows on unchanged),
  /// as torch's C++ register_hook accepts both kinds.
  template <class F>
  requires(std::invocable<F&, const Tensor&>&&
               std::is_void_v<std::invoke_result_t<F&, const Tensor&>>) unsigned register_hook(F hook) const {
    return register_hook(std::function<Tensor(const Tensor&)>([h = std::move(hook)](const Tensor& g) mutable {
      h(g);
      return Tensor();
    }));
  }
  /// Removes the hook that register_hook returned `index` for: it runs no more (removing it again is
  /// a no-op, as torch's). Error when no hook was registered at `index`. A hook may remove itself or
  /// another while it runs.
  void remove_hook(unsigned index) const;
  /// Registers `hook` on a leaf that requires grad (torch 2.1's register_post_accumulate_grad_hook):
  /// called with this tensor once per backward that gives it a gradient, right after that
  /// backward's gradient has been added into .grad, i.e. as soon as no node left in the backward can
  /// contribute to it (not at the end of the backward), so .grad() is final for this backward. The
  /// hook may read or replace .grad (set_grad, zero_grad) and update the tensor in place (grad mode
  /// is off in it unless create_graph, as in torch: an optimizer step in the backward). Runs on the
  /// thread that called backward (never on a TBB worker), after the register_hook hooks; not run by
  /// xgrad::grad, which accumulates nothing. Concurrent backwards into this leaf on several threads
  /// run it concurrently, each once, and .grad() may then include the other backwards' sums.
  /// Returns the index for remove_post_accumulate_grad_hook. Error on a non-leaf, on a leaf that
  /// does not require grad, or when `hook` is empty.
  unsigned register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const;
  /// Removes the hook that register_post_accumulate_grad_hook returned `index` for (as remove_hook).
  void remove_post_accumulate_grad_hook(unsigned index) const;

  // ---- in-place (bump the version counter; refuse tensors that require grad in grad mode) ---
  /// Any dtype (value converted by convert_value).
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  /// Uniform values on [from, to) from `gen` (torch's uniform_; floating point only). Errors: from > to,
  /// a bound not finite.
  Tensor& uniform_(double from = 0.0, double to = 1.0, Generator& gen = default_generator());
  /// Normal values of mean `mean` and standard deviation `std` from `gen` (torch's normal_; floating
  /// point only). Errors: std < 0, mean or std not finite.
  Tensor& normal_(double mean = 0.0, double std = 1.0, Generator& gen = default_generator());
  /// this += alpha * other (same shape and dtype; floating point only).
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  /// this *= value (floating point only).
  Tensor& mul_(double value);
  /// Copies other's values (same shape; converts dtype as to() does).
  Tensor& copy_(const Tensor& other);

  // ---- dtype ------------------------------------------------------------------------------
  /// Conversion between any two dtypes; returns *this when the dtype already matches. Floating
  /// point to integer truncates toward zero, anything to bool is `!= 0`, bool to a number is 0 or 1
  /// (convert_value in core/dtype.hpp). Differentiable between float32 and float64 only: the result
  /// of a conversion to or from an integer or bool dtype has no history (as in PyTorch).
  Tensor to(Dtype dtype) const;

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  /// True when both handles refer to the same tensor object.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  // Inline so that the metadata accessors cost a compare, not a call; the throw is out of line.
  void check_defined(const char* what) const {
    if (impl_ == nullptr) [[unlikely]]
      throw_undefined(what);
  }
  [[noreturn]] static void throw_undefined(const char* what);
  // The register_hook list: on grad_fn (for this output) for a non-leaf, on impl_ for a leaf. Null
  // when `create` is false and none exists (Note [Hooks] in core/autograd.hpp).
  std::vector<std::function<Tensor(const Tensor&)>>* pre_hook_list(bool create) const;
  template <class T>
  static constexpr Dtype from_vector_dtype() {
    return std::same_as<T, int> ? kInt64 : dtype_of<T>();
  }
  // `count` elements of dtype `src` at `data` into a tensor of `shape` converted to `dtype`
  // (from_vector's check of the sizes, then to()).
  static Tensor from_buffer(const void* data, std::size_t count, Dtype src, const Shape& shape, Dtype dtype);
  std::shared_ptr<TensorImpl> impl_;
};

/// Makes a new tensor that shares `t`'s storage with another shape (numel must match). No history.
Tensor alias_with_shape(const Tensor& t, const Shape& shape);

/// Prints like PyTorch: tensor([[1, 2], [3, 4]], dtype=float32, grad_fn=<mul>); integers plainly
/// (tensor([1, 2], dtype=int64)), bools as True/False.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// The entry check of an op that computes in floating point only: an xgrad::Error naming the op,
/// the argument and the dtype when `t` is defined and not float32/float64, saying how to convert.
/// E.g. check_floating("exp", "x", t).
void check_floating(std::string_view op, std::string_view arg, const Tensor& t);

/// True when the shapes and dtypes are equal and every element is bit-identical.
bool bit_equal(const Tensor& a, const Tensor& b);

/// Elementwise |a-b| <= atol + rtol*|b| (shapes must match); false if any is NaN.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace xgrad
