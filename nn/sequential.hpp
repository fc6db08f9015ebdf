#pragma once
// nn::Sequential: runs its modules one after another, like torch::nn::Sequential.
//
//   nn::Sequential net(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 1));  // libtorch's spelling
//   Tensor y = net(x);                         // Linear, then ReLU, then Linear
//   net.named_parameters();                   // "0.weight", "0.bias", "2.weight", "2.bias"
//
// The modules go in as temporaries (each moved into a std::shared_ptr of its own type, Note [Moved
// modules] in nn/module.hpp) or as std::shared_ptrs (shared with the caller, e.g. to keep a handle
// on a layer), mixed freely; the braced list of shared_ptrs and the std::vector form take
// shared_ptrs only. Children are named "0", "1", ... in order (or the name given to push_back). Any
// UnaryModule goes in, including a Sequential and nn::Functional (an arbitrary function). Sequential
// is itself a UnaryModule, so it nests: named parameters then read "encoder.0.weight".
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "xgrad/core/std_function.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

/// What Sequential's variadic constructor and push_back take: a std::shared_ptr to a UnaryModule,
/// or a UnaryModule object by rvalue (a temporary, or std::move of a module not yet shared). An
/// lvalue module is refused at compile time: it cannot be shared, and copying a module is deleted.
template <class M>
concept SequentialItem = std::is_convertible_v<M, std::shared_ptr<UnaryModule>> ||
    (std::derived_from<std::remove_cvref_t<M>, UnaryModule> && !std::is_lvalue_reference_v<M> &&
     std::move_constructible<std::remove_cvref_t<M>>);
/// A SequentialItem that is a module object, not a std::shared_ptr.
template <class M>
concept SequentialObject = SequentialItem<M> && !std::is_convertible_v<M, std::shared_ptr<UnaryModule>>;

class Sequential : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  /// The modules in order, named "0", "1", .... Errors: a null module.
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules);
  /// The modules in order, named "0", "1", ...: nn::Sequential(nn::Linear(4, 8), nn::ReLU()), as in
  /// libtorch; module objects and std::shared_ptrs may be mixed. Errors: a null module.
  template <SequentialItem... Ms>
  explicit Sequential(Ms&&... modules) : UnaryModule("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends a module named after its position ("3"). Errors: a null module.
  void push_back(std::shared_ptr<UnaryModule> module);
  /// Appends a module under `name`. Errors: a null module, a name taken or containing '.'.
  void push_back(const std::string& name, std::shared_ptr<UnaryModule> module);
  /// Appends a module object (moved into a std::shared_ptr of its own type), as libtorch's
  /// push_back(nn::Linear(4, 8)).
  template <SequentialObject M>
  void push_back(M&& module) {
    push_back(std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module)));
  }
  /// The same under `name`.
  template <class M>
  requires(SequentialItem<M> &&
           !std::is_convertible_v<M, std::shared_ptr<UnaryModule>>) void push_back(const std::string& name,
                                                                                   M&& module) {
    push_back(name, std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module)));
  }
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
