#include "xgrad/nn/module.hpp"

#include "xgrad/core/autograd.hpp"

namespace xgrad::nn {

void Module::check_new_name(const std::string& name) const {
  XGRAD_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "{}: name '{}' must be non-empty and contain no '.'", type_name_, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, v] : list)
      if (n == name) return true;
    return false;
  };
  XGRAD_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_),
              "{}: a parameter, buffer or child named '{}' is already registered", type_name_, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  XGRAD_CHECK(value.defined(), "{}: parameter '{}' is an undefined tensor", type_name_, name);
  if (!value.is_leaf()) value = value.detach();
  value.set_requires_grad(requires_grad);
  parameters_.emplace_back(name, std::move(value));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(name, value.defined() ? value.detach() : value);
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  XGRAD_CHECK(module != nullptr, "{}: child module '{}' is null", type_name_, name);
  children_.emplace_back(name, std::move(module));
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out = parameters_;
  if (recurse)
    for (const auto& [cname, child] : children_)
      for (auto& [n, t] : child->named_parameters(true)) out.emplace_back(cname + "." + n, t);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  if (recurse)
    for (const auto& [cname, child] : children_)
      for (auto& [n, t] : child->named_buffers(true)) out.emplace_back(cname + "." + n, t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  out.reserve(children_.size());
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (const auto& [cname, child] : children_) {
    const std::string name = prefix.empty() ? cname : prefix + "." + cname;
    out.emplace_back(name, child);
    child->collect_modules(name, out);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(const std::string& prefix,
                                                                                   bool include_self) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  if (include_self) {
    std::shared_ptr<Module> self = weak_from_this().lock();
    // A module on the stack has no owner: hand out a non-owning pointer (aliasing constructor).
    if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
    out.emplace_back(prefix, std::move(self));
  }
  collect_modules(prefix, out);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, m] : named_modules("", include_self)) out.push_back(std::move(m));
  return out;
}

namespace {
// Converts `t` to `dtype` without rebinding the handle (see Note [Parameter handles]): the TensorImpl
// that the registry and the layer share gets a new storage. The new storage's version continues the
// old one's, plus one, so a graph that saved this very tensor before the conversion fails its saved-
// tensor check in backward instead of reading data of the wrong type.
void convert_in_place(const Tensor& t, Dtype dtype) {
  // As torch's Module.to(dtype): integer and bool tensors (e.g. BatchNorm's num_batches_tracked) keep theirs.
  if (!t.defined() || t.dtype() == dtype || !is_floating_point(t.dtype())) return;
  NoGradGuard no_grad;
  TensorImpl& impl = *t.impl();
  const Tensor converted = t.detach().to(dtype);
  const std::uint32_t version = impl.storage->version;
  impl.storage = converted.impl()->storage;
  impl.storage->version = version + 1;
  impl.dtype = dtype;
  // .grad through the accessors behind grad()/set_grad, under the leaf's lock (Note [Leaf
  // accumulation] in core/autograd.hpp), so that a thread reading grad() meanwhile does not race.
  if (const std::shared_ptr<TensorImpl> g = detail::load_grad(impl))
    detail::store_grad(impl, Tensor(g).detach().to(dtype).impl());
}
}  // namespace

Module& Module::to(Dtype dtype) {
  XGRAD_CHECK(is_floating_point(dtype), "{}::to: dtype must be float32 or float64 (as torch's Module.to), got {}",
              type_name_, dtype);
  for (auto& [n, t] : parameters_) convert_in_place(t, dtype);
  for (auto& [n, t] : buffers_) convert_in_place(t, dtype);
  for (auto& [n, c] : children_) c->to(dtype);
  return *this;
}

Dtype Module::dtype() const {
  const auto params = named_parameters();
  const auto bufs = named_buffers();
  const std::pair<std::string, Tensor>* first = nullptr;
  for (const auto* list : {&params, &bufs})
    for (const auto& entry : *list) {
      if (!entry.second.defined() || !is_floating_point(entry.second.dtype())) continue;
      if (first == nullptr) {
        first = &entry;
        continue;
      }
      XGRAD_CHECK(entry.second.dtype() == first->second.dtype(), "{}::dtype: mixed dtypes: '{}' is {} but '{}' is {}",
                  type_name_, first->first, first->second.dtype(), entry.first, entry.second.dtype());
    }
  XGRAD_CHECK(first != nullptr, "{}::dtype: the module has no parameters or buffers of a floating-point dtype",
              type_name_);
  return first->second.dtype();
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& t : parameters()) n += t.numel();
  return n;
}

std::size_t Module::parameter_bytes() const {
  std::size_t n = 0;
  for (const auto& t : parameters()) n += t.nbytes();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.zero_grad();
}

}  // namespace xgrad::nn
