#include "xgrad/nn/sequential.hpp"

#include <utility>

#include "xgrad/nn/activation.hpp"

namespace xgrad::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules) : UnaryModule("Sequential") {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules) : UnaryModule("Sequential") {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  push_back(std::to_string(modules_.size()), std::move(module));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<UnaryModule> module) {
  XGRAD_CHECK(module != nullptr, "Sequential::push_back: module {} ('{}') is null", modules_.size(), name);
  add_child(name, module);  // validates the name before anything is stored
  modules_.push_back(std::move(module));
}

void Sequential::push_back(std::function<Tensor(const Tensor&)> fn) {
  push_back(std::make_shared<Functional>(std::move(fn)));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : modules_) y = m->forward(y);
  return y;
}

const std::shared_ptr<UnaryModule>& Sequential::operator[](std::size_t i) const {
  XGRAD_CHECK(i < modules_.size(), "Sequential: index {} is out of range for {} modules", i, modules_.size());
  return modules_[i];
}

void Sequential::check_cast(bool ok, std::size_t i) const {
  XGRAD_CHECK(ok, "Sequential::at: module {} is a {}, not the requested type", i, modules_[i]->type_name());
}

}  // namespace xgrad::nn
