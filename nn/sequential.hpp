#pragma once
// nn::Sequential: runs its modules one after another, like torch::nn::Sequential.
//
//   nn::Sequential net({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
//                       std::make_shared<nn::Linear>(8, 1)});
//   Tensor y = net(x);                         // Linear, then ReLU, then Linear
//   net.named_parameters();                   // "0.weight", "0.bias", "2.weight", "2.bias"
//
// Children are named "0", "1", ... in order (or the name given to push_back). Any UnaryModule goes
// in, including a Sequential and nn::Functional (an arbitrary function). Sequential is itself a
// UnaryModule, so it nests: named parameters then read "encoder.0.weight".
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class Sequential : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  /// The modules in order, named "0", "1", .... Errors: a null module.
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules);

  /// Appends a module named after its position ("3"). Errors: a null module.
  void push_back(std::shared_ptr<UnaryModule> module);
  /// Appends a module under `name`. Errors: a null module, a name taken or containing '.'.
  void push_back(const std::string& name, std::shared_ptr<UnaryModule> module);
  /// Appends a function wrapped in nn::Functional.
  void push_back(std::function<Tensor(const Tensor&)> fn);

  /// Applies every module in order; the identity for an empty Sequential.
  Tensor forward(const Tensor& x) override;

  std::size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// The i-th module. Errors: i out of range.
  const std::shared_ptr<UnaryModule>& operator[](std::size_t i) const;
  /// The i-th module as a T (like torch's Sequential::ptr<T>). Errors: i out of range, not a T.
  template <class T>
  std::shared_ptr<T> at(std::size_t i) const {
    auto p = std::dynamic_pointer_cast<T>((*this)[i]);
    check_cast(p != nullptr, i);
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void check_cast(bool ok, std::size_t i) const;
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

}  // namespace xgrad::nn
