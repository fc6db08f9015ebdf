#pragma once
// nn::Module: the base of every layer. Like torch::nn::Module, a module registers its parameters,
// buffers and child modules by name; named_parameters() walks the tree with dotted names
// ("encoder.0.weight"). Modules are held by std::shared_ptr.
//
// A user module derives from Module (or from UnaryModule when it maps one tensor to one tensor, so
// that it can go into a Sequential), registers what it owns in its constructor and defines its own
// forward, as in PyTorch's C++ frontend:
//
//   struct Mlp : nn::UnaryModule {
//     std::shared_ptr<nn::Linear> fc1, fc2;
//     Mlp() : UnaryModule("Mlp") {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 1));
//     }
//     Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(x))); }
//   };
//
// Note [Parameter handles]: a layer keeps a copy of the handle that register_parameter returns
// (`weight_ = register_parameter("weight", w)`), so both the registry and the layer refer to one
// TensorImpl. Everything that changes a parameter after construction (to(dtype), optimizers, loading
// a checkpoint) therefore changes that TensorImpl in place and never rebinds the registry entry:
// rebinding would leave the layer's copy pointing at the old tensor. This is PyTorch's `set_data`.
//
// Note [Moved modules]: a module can be move-constructed (libtorch's modules are shared handles,
// torch::nn::Linear a ModuleHolder of a LinearImpl; here the layer class is the module itself). The
// new module takes over the registry and the layer's handles together, so they still refer to the
// same TensorImpls and children (a module never points into itself); the moved-from module is left
// empty, fit only to be destroyed. Move a module before it is shared: moving one that a parent has
// registered, or that a std::shared_ptr owns, leaves the parent holding the empty shell. A derived
// module is movable when its own members are (no user-declared destructor or copy operations).
#include <cstdint>
#include <iosfwd>
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
  /// Moving is how a module built as a temporary goes into its std::shared_ptr, as in
  /// nn::Sequential(nn::Linear(4, 8), nn::ReLU()) (Note [Moved modules]). Not assignable.
  Module(Module&&) = default;
  Module& operator=(Module&&) = delete;

  const std::string& type_name() const { return type_name_; }

  /// Registers a trainable tensor (made a leaf that requires grad) and returns it. A leaf is adopted
  /// as is (the module and the caller then share it, e.g. for weight tying); a non-leaf is detached.
  /// The returned reference is only valid until the next registration: copy the handle.
  /// Errors: empty name or a name with '.', a name already taken, an undefined tensor.
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
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module (named `prefix`, "" by default, when include_self) and every descendant, depth
  /// first in registration order, with dotted names ("encoder", "encoder.0", ...), like torch's
  /// named_modules. When this module is not owned by a std::shared_ptr (a module on the stack), its
  /// own entry is a non-owning pointer, valid while the module lives.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(const std::string& prefix = "",
                                                                             bool include_self = true);
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);

  /// Total number of parameter elements.
  std::int64_t num_parameters() const;
  /// Bytes held by parameters.
  std::size_t parameter_bytes() const;

  /// Converts every floating-point parameter and buffer of this module and its children to `dtype`
  /// (float32 or float64; integer and bool buffers keep their dtype, as in torch), in place (see
  /// Note [Parameter handles]): the handles that layers hold see the new dtype, parameters stay the
  /// same leaves requiring grad, and an accumulated .grad is converted too. Values are rounded when
  /// going to float32. Call it before building graphs: a graph recorded earlier refuses to run its
  /// backward through a converted tensor it saved (the storage version changes). Returns *this.
  Module& to(Dtype dtype);
  /// The dtype shared by every floating-point parameter and buffer. Errors: none registered, or
  /// mixed dtypes.
  Dtype dtype() const;

  /// Sets training mode on this module and every descendant (Dropout and the like read it).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Clears every parameter's .grad.
  void zero_grad();

  /// The module's own settings for printing, as in torch's extra_repr ("in_features=4,
  /// out_features=8, bias=True" for a Linear); empty by default. Override it in your modules.
  virtual std::string extra_repr() const { return ""; }

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  /// Renames the module's type (for a subclass printed under torch's name of its own, e.g.
  /// MultiheadAttention's out_proj, a Linear that torch prints as NonDynamicallyQuantizableLinear).
  void set_type_name(std::string name) { type_name_ = std::move(name); }

 private:
  void check_new_name(const std::string& name) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Prints the module tree as PyTorch does:
///   Sequential(
///     (0): Linear(in_features=4, out_features=8, bias=True)
///     (1): ReLU()
///   )
std::ostream& operator<<(std::ostream& os, const Module& module);

/// A table of every module in the tree (dotted name, type, parameters and bytes of its subtree,
/// trainable parameters), then the totals: parameters, trainable parameters, parameter bytes and
/// buffer bytes, like torchinfo's summary.
std::string summary(Module& module);

/// A module that maps one tensor to one tensor: what Sequential chains. Derived classes define
/// forward; operator() calls it.
class UnaryModule : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace xgrad::nn
