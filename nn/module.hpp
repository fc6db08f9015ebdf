#pragma once
// nn::Module: the base of every layer. Like torch::nn::Module, a module registers its parameters,
// buffers and child modules by name; named_parameters() walks the tree with dotted names
// ("encoder.0.weight"). Modules are held by std::shared_ptr.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  /// Registers a trainable tensor (made a leaf that requires grad) and returns it.
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Registers a non-trainable tensor saved with the module's state (e.g. running statistics).
  Tensor& register_buffer(const std::string& name, Tensor value);
  /// Registers a child module and returns it.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  /// Parameters of this module and its children, depth first, with dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  /// Total number of parameter elements.
  std::int64_t num_parameters() const;
  /// Bytes held by parameters.
  std::size_t parameter_bytes() const;

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Clears every parameter's .grad.
  void zero_grad();

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  void check_new_name(const std::string& name) const;
  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace xgrad::nn
