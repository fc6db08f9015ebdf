#include "xgrad/nn/module.hpp"

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
