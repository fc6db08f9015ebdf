#include "xgrad/core/tensor.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "xgrad/core/allocator.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/detail/philox.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/core/small_object_allocator.hpp"

namespace xgrad {

// ---- storage ------------------------------------------------------------------------------------
Storage::Storage(std::size_t n) : nbytes(n) {
  if (n <= kInlineBytes) {
    const auto addr = reinterpret_cast<std::uintptr_t>(inline_);
    data = inline_ + (((addr + 63) & ~std::uintptr_t{63}) - addr);
    return;
  }
  data = detail::storage_allocate(n);  // Note [Caching allocator]
}
Storage::~Storage() {
  const auto d = reinterpret_cast<std::uintptr_t>(data), b = reinterpret_cast<std::uintptr_t>(inline_);
  if (d < b || d >= b + sizeof(inline_)) detail::storage_free(data, nbytes);
}

namespace {
std::shared_ptr<TensorImpl> make_impl_unnamed(const Shape& shape, Dtype dtype) {
  // Checked element and byte counts (Note [Checked sizes]): a shape whose size overflows would
  // otherwise get a tiny buffer, and a request no machine can serve is an error stating the bytes.
  const std::int64_t numel = checked_numel(shape, "tensor", "shape");
  XGRAD_CHECK(numel <= PTRDIFF_MAX / static_cast<std::int64_t>(dtype_size(dtype)),
              "tensor: shape {} is too large for {} elements: {:.6g} bytes asked for, more memory than can exist",
              shape_str(shape), dtype_name(dtype), static_cast<double>(numel) * static_cast<double>(dtype_size(dtype)));
  const std::size_t nbytes = checked_nbytes(numel, dtype_size(dtype), "tensor", "shape");
  auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>{});
  impl->shape = shape;
  impl->numel = numel;
  impl->dtype = dtype;
  try {
    impl->storage = std::allocate_shared<Storage>(detail::PoolAllocator<Storage>{}, nbytes);
  } catch (const std::bad_alloc&) {
    detail::throw_error(fmt::format("tensor: out of memory: cannot allocate {} bytes ({:.3g} GiB) for shape {} {}",
                                    nbytes, static_cast<double>(nbytes) / 1073741824.0, shape_str(shape),
                                    dtype_name(dtype)));
  }
  return impl;
}

// Inside an op's forward (apply sets its name, Note [Op name in dtype errors]), a result whose shape
// overflows or whose bytes cannot exist is that op's error: "sum: cannot make its result: tensor:
// argument 'shape': shape (2^62, 2^62) is too large ...", not an anonymous tensor's. Backward
// passes run without a name and keep the tensor's own message.
std::shared_ptr<TensorImpl> make_impl(const Shape& shape, Dtype dtype) {
  const char* op = detail::current_op();
  if (op == nullptr) return make_impl_unnamed(shape, dtype);
  try {
    return make_impl_unnamed(shape, dtype);
  } catch (const Error& e) {
    detail::throw_formatted("{}: cannot make its result: {}", op, e.what());
  }
}

template <class T, class Fn>
void fill_with(Tensor& t, Fn&& fn) {
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = convert_value<T>(fn(i));
}

void check_floating_creation(const char* op, Dtype dtype) {
  XGRAD_CHECK(is_floating_point(dtype),
              "{}: dtype {} is not supported: {} makes floating point tensors only "
              "(pass xgrad::kFloat32 or xgrad::kFloat64, then convert with .to({}))",
              op, dtype, op, dtype);
}
}  // namespace

namespace detail {
void throw_not_floating(Dtype d, const char* op) {
  throw_formatted(
      "{}: dtype {} is not supported: this op takes float32 or float64 tensors (convert with "
      ".to(xgrad::kFloat32))",
      op != nullptr ? op : (current_op() != nullptr ? current_op() : "xgrad"), d);
}
}  // namespace detail

void check_floating(std::string_view op, std::string_view arg, const Tensor& t) {
  if (!t.defined() || is_floating_point(t.dtype())) return;
  detail::throw_formatted(
      "{}: argument '{}' has dtype {}, but {} takes float32 or float64 tensors only "
      "(convert with {}.to(xgrad::kFloat32))",
      op, arg, t.dtype(), op, arg);
}

// ---- creation -----------------------------------------------------------------------------------
Tensor Tensor::empty(const Shape& shape, Dtype dtype) { return Tensor(make_impl(shape, dtype)); }

Tensor Tensor::zeros(const Shape& shape, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    std::fill(p, p + t.numel(), convert_value<T>(value));
  });
  return t;
}

Tensor Tensor::scalar(double value, Dtype dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(double start, double stop, double step, Dtype dtype) {
  XGRAD_CHECK(step != 0.0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(stop),
              "arange: start {}, stop {}, step {} must be finite with a non-zero step", start, stop, step);
  const double n = std::ceil((stop - start) / step);
  // Checked before the cast: converting a count beyond int64 (or inf) to an integer is undefined.
  XGRAD_CHECK(n < 0x1p62, "arange: start {}, stop {}, step {} would give {} elements, too many", start, stop, step, n);
  const auto count = static_cast<std::int64_t>(n > 0 ? n : 0);
  Tensor t = empty({count}, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_with<T>(t, [&](std::int64_t i) { return start + static_cast<double>(i) * step; });
  });
  return t;
}

Tensor Tensor::linspace(double start, double stop, std::int64_t steps, Dtype dtype) {
  check_floating_creation("linspace", dtype);
  XGRAD_CHECK(steps >= 0, "linspace: steps must be non-negative, got {}", steps);
  Tensor t = empty({steps}, dtype);
  const double step = steps > 1 ? (stop - start) / static_cast<double>(steps - 1) : 0.0;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Symmetric evaluation (from both ends), as torch does, so the last point is exactly `stop`.
    // One point is `start` (torch special-cases steps == 1 the same way).
    const std::int64_t half = steps == 1 ? 1 : steps / 2;
    fill_with<T>(t, [&](std::int64_t i) {
      return i < half ? start + step * static_cast<double>(i) : stop - step * static_cast<double>(steps - 1 - i);
    });
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, Dtype dtype) {
  check_floating_creation("rand", dtype);
  Tensor t = empty(shape, dtype);
  dispatch(dtype,
           [&](auto tag) { detail::uniform_fill(t.data<typename decltype(tag)::type>(), t.numel(), gen, 0.0, 1.0); });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Dtype dtype) { return rand(shape, default_generator(), dtype); }

Tensor Tensor::randn(const Shape& shape, Generator& gen, Dtype dtype) {
  check_floating_creation("randn", dtype);
  Tensor t = empty(shape, dtype);
  dispatch(dtype,
           [&](auto tag) { detail::normal_fill(t.data<typename decltype(tag)::type>(), t.numel(), gen, 0.0, 1.0); });
  return t;
}

Tensor Tensor::randn(const Shape& shape, Dtype dtype) { return randn(shape, default_generator(), dtype); }

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype) {
  XGRAD_CHECK(static_cast<std::int64_t>(values.size()) == checked_numel(shape, "from_vector", "shape"),
              "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape_str(shape),
              checked_numel(shape, "from_vector", "shape"));
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_with<T>(t, [&](std::int64_t i) { return values[static_cast<std::size_t>(i)]; });
  });
  return t;
}

Tensor Tensor::from_buffer(const void* data, std::size_t count, Dtype src, const Shape& shape, Dtype dtype) {
  XGRAD_CHECK(static_cast<std::int64_t>(count) == checked_numel(shape, "from_vector", "shape"),
              "from_vector: {} values do not fill shape {} ({} elements)", count, shape_str(shape),
              checked_numel(shape, "from_vector", "shape"));
  Tensor t = empty(shape, src);
  if (count != 0) std::memcpy(t.raw_data(), data, count * dtype_size(src));
  return t.to(dtype);
}

template <class T>
Tensor Tensor::from_data(std::span<const T> values, const Shape& shape) {
  XGRAD_CHECK(static_cast<std::int64_t>(values.size()) == checked_numel(shape, "from_data", "shape"),
              "from_data: {} values do not fill shape {} ({} elements)", values.size(), shape_str(shape),
              checked_numel(shape, "from_data", "shape"));
  Tensor t = empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor Tensor::from_data<float>(std::span<const float>, const Shape&);
template Tensor Tensor::from_data<double>(std::span<const double>, const Shape&);
template Tensor Tensor::from_data<std::int64_t>(std::span<const std::int64_t>, const Shape&);
template Tensor Tensor::from_data<std::int32_t>(std::span<const std::int32_t>, const Shape&);
template Tensor Tensor::from_data<std::uint8_t>(std::span<const std::uint8_t>, const Shape&);
template Tensor Tensor::from_data<bool>(std::span<const bool>, const Shape&);

Tensor Tensor::of(std::initializer_list<double> values, Dtype dtype) {
  return from_vector(std::vector<double>(values), {static_cast<std::int64_t>(values.size())}, dtype);
}

Tensor Tensor::of(std::initializer_list<std::initializer_list<double>> rows, Dtype dtype) {
  const auto nrows = static_cast<std::int64_t>(rows.size());
  const auto ncols = nrows > 0 ? static_cast<std::int64_t>(rows.begin()->size()) : 0;
  std::vector<double> v;
  for (const auto& r : rows) {
    XGRAD_CHECK(static_cast<std::int64_t>(r.size()) == ncols, "Tensor::of: ragged rows ({} and {} values)", ncols,
                r.size());
    v.insert(v.end(), r.begin(), r.end());
  }
  return from_vector(v, {nrows, ncols}, dtype);
}

// ---- metadata and data --------------------------------------------------------------------------
void Tensor::throw_undefined(const char* what) {
  detail::throw_error(fmt::format("{}: called on an undefined tensor", what));
}
std::int64_t Tensor::size(std::int64_t axis) const {
  const auto ax = normalize_axis(axis, dim(), "size", shape());
  return impl_->shape[static_cast<std::size_t>(ax)];
}
template <class T>
T* Tensor::data() {
  check_defined("data");
  XGRAD_CHECK(impl_->dtype == dtype_of<T>(), "data<{}>: tensor has dtype {}", dtype_of<T>(), impl_->dtype);
  return static_cast<T*>(impl_->storage->data);
}
template <class T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}
#define XGRAD_INSTANTIATE_DATA(T)            \
  template T* Tensor::data<T>();             \
  template const T* Tensor::data<T>() const; \
  template T Tensor::item<T>() const;
XGRAD_INSTANTIATE_DATA(float)
XGRAD_INSTANTIATE_DATA(double)
XGRAD_INSTANTIATE_DATA(std::int64_t)
XGRAD_INSTANTIATE_DATA(std::int32_t)
XGRAD_INSTANTIATE_DATA(std::uint8_t)
XGRAD_INSTANTIATE_DATA(bool)
#undef XGRAD_INSTANTIATE_DATA

void* Tensor::raw_data() {
  check_defined("raw_data");
  return impl_->storage->data;
}
const void* Tensor::raw_data() const {
  check_defined("raw_data");
  return impl_->storage->data;
}

double Tensor::item() const {
  XGRAD_CHECK(numel() == 1, "item: tensor of shape {} has {} elements, expected exactly 1", shape_str(shape()),
              numel());
  return item<double>();
}

template <class R>
R Tensor::item() const {
  XGRAD_CHECK(numel() == 1, "item: tensor of shape {} has {} elements, expected exactly 1", shape_str(shape()),
              numel());
  return dispatch_all(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return convert_value<R>(data<T>()[0]);
  });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> v(static_cast<std::size_t>(numel()));
  dispatch_all(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = data<T>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(p[i]);
  });
  return v;
}

Tensor Tensor::clone_data() const {
  Tensor t = empty(shape(), dtype());
  if (nbytes() > 0) std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

Tensor alias_with_shape(const Tensor& t, const Shape& shape) {
  XGRAD_CHECK(checked_numel(shape, "reshape", "shape") == t.numel(),
              "reshape: cannot view a tensor of shape {} as shape {}", shape_str(t.shape()), shape_str(shape));
  auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>{});
  impl->storage = t.impl()->storage;
  impl->shape = shape;
  impl->numel = t.numel();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// ---- autograd accessors -------------------------------------------------------------------------
bool Tensor::requires_grad() const {
  check_defined("requires_grad");
  return impl_->requires_grad || impl_->grad_fn != nullptr;
}

Tensor& Tensor::set_requires_grad(bool flag) {
  check_defined("set_requires_grad");
  XGRAD_CHECK(!flag || is_floating_point(impl_->dtype),
              "set_requires_grad: only tensors of floating point dtype can require gradients; this tensor is {} "
              "of shape {} (convert it first with .to(xgrad::kFloat32))",
              impl_->dtype, shape_str(impl_->shape));
  XGRAD_CHECK(impl_->grad_fn == nullptr,
              "set_requires_grad: only leaf tensors can be flagged; this tensor was produced by '{}' "
              "(use detach() to make a leaf)",
              impl_->grad_fn->name());
  impl_->requires_grad = flag;
  return *this;
}

bool Tensor::is_leaf() const {
  check_defined("is_leaf");
  return impl_->grad_fn == nullptr;
}

Tensor Tensor::grad() const {
  check_defined("grad");
  return Tensor(detail::load_grad(*impl_));
}

void Tensor::set_grad(const Tensor& g) {
  check_defined("set_grad");
  if (g.defined())
    XGRAD_CHECK(g.shape() == shape() && g.dtype() == dtype(),
                "set_grad: gradient of shape {} {} does not match tensor of shape {} {}", shape_str(g.shape()),
                g.dtype(), shape_str(shape()), dtype());
  detail::store_grad(*impl_, g.impl());
}

void Tensor::zero_grad() {
  check_defined("zero_grad");
  detail::store_grad(*impl_, nullptr);
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  check_defined("grad_fn");
  return impl_->grad_fn;
}

Tensor Tensor::detach() const {
  check_defined("detach");
  return alias_with_shape(*this, impl_->shape);
}

void Tensor::backward(const Tensor& grad, std::optional<bool> retain_graph, bool create_graph) const {
  check_defined("backward");
  run_backward({*this}, {grad}, retain_graph, create_graph);
}

// ---- in-place -----------------------------------------------------------------------------------
namespace {
// dst = src converted elementwise (same numel; any dtypes).
void convert_into(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    if (src.nbytes() > 0) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  dispatch_all(dst.dtype(), [&](auto dst_tag) {
    using D = typename decltype(dst_tag)::type;
    dispatch_all(src.dtype(), [&](auto src_tag) {
      using S = typename decltype(src_tag)::type;
      D* p = dst.data<D>();
      const S* q = src.data<S>();
      const std::int64_t n = src.numel();
      parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) p[i] = convert_value<D>(q[i]);
      });
    });
  });
}

void check_inplace(const Tensor& t, const char* op) {
  XGRAD_CHECK(!(GradMode::is_enabled() && t.requires_grad()),
              "{}: in-place modification of a tensor that requires grad (shape {}) is not allowed in grad "
              "mode; wrap it in NoGradGuard (as optimizers do) or use detach()",
              op, shape_str(t.shape()));
  ++t.impl()->storage->version;
}
}  // namespace

Tensor& Tensor::fill_(double value) {
  check_defined("fill_");
  check_inplace(*this, "fill_");
  dispatch_all(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = data<T>();
    std::fill(p, p + numel(), convert_value<T>(value));
  });
  return *this;
}

Tensor& Tensor::uniform_(double from, double to, Generator& gen) {
  check_defined("uniform_");
  check_floating("uniform_", "self", *this);
  XGRAD_CHECK(std::isfinite(from) && std::isfinite(to) && from <= to,
              "uniform_: expects finite from <= to, got from = {}, to = {}", from, to);
  check_inplace(*this, "uniform_");
  dispatch(dtype(),
           [&](auto tag) { detail::uniform_fill(data<typename decltype(tag)::type>(), numel(), gen, from, to); });
  return *this;
}

Tensor& Tensor::normal_(double mean, double std, Generator& gen) {
  check_defined("normal_");
  check_floating("normal_", "self", *this);
  XGRAD_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0,
              "normal_: expects a finite mean and a finite std >= 0, got mean = {}, std = {}", mean, std);
  check_inplace(*this, "normal_");
  dispatch(dtype(),
           [&](auto tag) { detail::normal_fill(data<typename decltype(tag)::type>(), numel(), gen, mean, std); });
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_defined("add_");
  XGRAD_CHECK(other.defined() && other.shape() == shape() && other.dtype() == dtype(),
              "add_: other must have this tensor's shape {} and dtype {}; got {} {}", shape_str(shape()), dtype(),
              other.defined() ? shape_str(other.shape()) : "undefined",
              other.defined() ? dtype_name(other.dtype()) : "");
  check_floating("add_", "self", *this);
  check_inplace(*this, "add_");
  dispatch(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = data<T>();
    const T* q = other.data<T>();
    const T a = static_cast<T>(alpha);
    parallel_for(0, numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      if (alpha == 1.0)
        for (std::int64_t i = b; i < e; ++i) p[i] += q[i];
      else
        for (std::int64_t i = b; i < e; ++i) p[i] += a * q[i];
    });
  });
  return *this;
}

Tensor& Tensor::mul_(double value) {
  check_defined("mul_");
  check_floating("mul_", "self", *this);
  check_inplace(*this, "mul_");
  dispatch(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = data<T>();
    const T v = static_cast<T>(value);
    parallel_for(0, numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] *= v;
    });
  });
  return *this;
}

Tensor& Tensor::copy_(const Tensor& other) {
  check_defined("copy_");
  XGRAD_CHECK(other.defined() && other.shape() == shape(), "copy_: source shape {} does not match destination {}",
              other.defined() ? shape_str(other.shape()) : "undefined", shape_str(shape()));
  check_inplace(*this, "copy_");
  convert_into(other, *this);
  return *this;
}

// ---- dtype conversion (differentiable between float32 and float64) ------------------------------
namespace {
Tensor convert(const Tensor& x, Dtype to) {
  Tensor out = Tensor::empty(x.shape(), to);
  convert_into(x, out);
  return out;
}

// y = x converted to dtype; dx = dy converted back.
struct ToDtype : Function<ToDtype> {
  static constexpr const char* kName = "to";
  static constexpr bool kDifferentiableBackward = true;  // Note [Create graph]: .to() records itself
  Dtype from = kFloat32;
  Tensor forward(const Tensor& x, Dtype to) {
    from = x.dtype();
    return convert(x, to);
  }
  Tensors backward(const Tensors& g) {
    if (GradMode::is_enabled()) return {g[0].to(from)};
    return {convert(g[0], from)};
  }
};
}  // namespace

Tensor Tensor::to(Dtype d) const {
  check_defined("to");
  if (d == dtype()) return *this;
  // Integer and bool tensors carry no gradient: a conversion that has one on either side is not
  // recorded (torch: x.to(torch.int64) of a float x that requires grad does not require grad).
  if (!is_floating_point(d) || !is_floating_point(dtype())) return convert(*this, d);
  return apply<ToDtype>(*this, d);
}

// ---- comparison and printing ----------------------------------------------------------------------
bool bit_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  XGRAD_CHECK(a.shape() == b.shape(), "allclose: shapes {} and {} differ", shape_str(a.shape()), shape_str(b.shape()));
  const auto va = a.to_vector();
  const auto vb = b.to_vector();
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i]))) return false;
  return true;
}

namespace {
// `elem(os, i)` prints element i.
template <class Elem>
void print_rec(std::ostream& os, const Elem& elem, const Shape& s, std::size_t dim, std::int64_t& pos, int indent) {
  if (dim == s.size()) {
    elem(os, pos++);
    return;
  }
  os << '[';
  const auto n = s[dim];
  const bool summarize = n > 12;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto separate = [&] {
      os << ',';
      if (dim + 1 < s.size())
        os << '\n' << std::string(static_cast<std::size_t>(indent + 1), ' ');
      else
        os << ' ';
    };
    if (summarize && i == 6) {
      // skip the middle: advance pos over the elided sub-blocks; "a, ..., b" like torch
      std::int64_t block = 1;
      for (std::size_t d = dim + 1; d < s.size(); ++d) block *= s[d];
      pos += block * (n - 12);
      i = n - 6;
      separate();
      os << "...";
    }
    if (i > 0) separate();
    print_rec(os, elem, s, dim + 1, pos, indent + 1);
  }
  os << ']';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::ostringstream body;
  body.precision(6);
  std::int64_t pos = 0;
  dispatch_all(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    print_rec(
        body,
        [p](std::ostream& o, std::int64_t i) {
          if constexpr (std::is_same_v<T, bool>)
            o << (p[i] ? "True" : "False");
          else if constexpr (std::is_floating_point_v<T>)
            o << p[i];
          else
            o << static_cast<std::int64_t>(p[i]);  // uint8 as a number, not a character
        },
        t.shape(), 0, pos, 7);
  });
  os << "tensor(" << body.str() << ", dtype=" << dtype_name(t.dtype());
  if (t.grad_fn())
    os << ", grad_fn=<" << t.grad_fn()->name() << '>';
  else if (t.requires_grad())
    os << ", requires_grad=True";
  return os << ')';
}

}  // namespace xgrad
