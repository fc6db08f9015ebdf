#pragma once
// Parameter-free modules that wrap one op each, so that they can go into a Sequential, like
// torch::nn::ReLU and friends. Each forward is the op of the same name; see the op's header for its
// formula, gradient and errors.
//
//   ReLU        relu(x)                      (ops/elementwise.hpp)
//   Tanh        tanh(x)
//   Sigmoid     sigmoid(x)
//   Softmax     softmax(x, dim)              (ops/softmax.hpp)
//   LogSoftmax  log_softmax(x, dim)
//   Identity    x itself (the same handle)
//   Flatten     flatten(x, start_dim, end_dim), torch's defaults start_dim = 1, end_dim = -1
//   Functional  any std::function<Tensor(const Tensor&)> (torch::nn::Functional)
//
// There is no GELU: xgrad has no erf op yet.
#include <cstdint>
#include <functional>
#include <string>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public UnaryModule {
 public:
  Tanh() : UnaryModule("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public UnaryModule {
 public:
  Sigmoid() : UnaryModule("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

/// Softmax over `dim` (negative counts from the end; checked against x when forward runs).
class Softmax : public UnaryModule {
 public:
  explicit Softmax(std::int64_t dim) : UnaryModule("Softmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
};

/// Log-softmax over `dim` (negative counts from the end; checked against x when forward runs).
class LogSoftmax : public UnaryModule {
 public:
  explicit LogSoftmax(std::int64_t dim) : UnaryModule("LogSoftmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
};

/// Returns its input.
class Identity : public UnaryModule {
 public:
  Identity() : UnaryModule("Identity") {}
  Tensor forward(const Tensor& x) override;
};

/// Flattens dims start_dim..end_dim into one (a view). Errors (in forward): dims out of range or
/// start after end.
class Flatten : public UnaryModule {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : UnaryModule("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::int64_t start_dim_, end_dim_;
};

/// Wraps a function of one tensor as a module, to put arbitrary code into a Sequential.
/// Errors: an empty function.
class Functional : public UnaryModule {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn, std::string name = "Functional");
  Tensor forward(const Tensor& x) override;

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

}  // namespace xgrad::nn
