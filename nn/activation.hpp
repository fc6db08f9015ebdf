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
// and the activations of ops/activation.hpp, with torch.nn's options, defaults and reprs:
//
//   GELU(approximate = "none")              gelu(x, approximate)    GELU(approximate='none')
//   SiLU                                    silu(x)                 SiLU()
//   Softplus(beta = 1, threshold = 20)      softplus(x, beta, threshold)   Softplus(beta=1, threshold=20)
//   Mish                                    mish(x)                 Mish()
//   LeakyReLU(negative_slope = 0.01)        leaky_relu(x, slope)    LeakyReLU(negative_slope=0.01)
//   ELU(alpha = 1)                          elu(x, alpha)           ELU(alpha=1.0)
//   SELU                                    selu(x)                 SELU()
//   Hardtanh(min_val = -1, max_val = 1)     hardtanh(x, lo, hi)     Hardtanh(min_val=-1.0, max_val=1.0)
//   LogSigmoid                              logsigmoid(x)           LogSigmoid()
//   Hardswish                               hardswish(x)            Hardswish()
//   Hardsigmoid                             hardsigmoid(x)          Hardsigmoid()
//
// Their constructors refuse what the op refuses (an unknown approximate, beta = 0, NaN numbers,
// min_val > max_val). torch's `inplace` option has no counterpart (xgrad's ops never write their
// input). Softplus prints a whole-number beta or threshold without ".0", as torch's defaults (the
// Python ints 1 and 20) print; the other modules print their numbers as Python floats.
#include <cstdint>
#include <string>

#include "xgrad/core/std_function.hpp"
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

/// gelu(x, approximate); approximate is "none" (the exact erf form) or "tanh".
class GELU : public UnaryModule {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

class SiLU : public UnaryModule {
 public:
  SiLU() : UnaryModule("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

/// softplus(x, beta, threshold).
class Softplus : public UnaryModule {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta() const { return beta_; }
  double threshold() const { return threshold_; }

 private:
  double beta_, threshold_;
};

class Mish : public UnaryModule {
 public:
  Mish() : UnaryModule("Mish") {}
  Tensor forward(const Tensor& x) override;
};

/// leaky_relu(x, negative_slope).
class LeakyReLU : public UnaryModule {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double negative_slope() const { return negative_slope_; }

 private:
  double negative_slope_;
};

/// elu(x, alpha).
class ELU : public UnaryModule {
 public:
  explicit ELU(double alpha = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

class SELU : public UnaryModule {
 public:
  SELU() : UnaryModule("SELU") {}
  Tensor forward(const Tensor& x) override;
};

/// hardtanh(x, min_val, max_val).
class Hardtanh : public UnaryModule {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double min_val() const { return min_val_; }
  double max_val() const { return max_val_; }

 private:
  double min_val_, max_val_;
};

class LogSigmoid : public UnaryModule {
 public:
  LogSigmoid() : UnaryModule("LogSigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Hardswish : public UnaryModule {
 public:
  Hardswish() : UnaryModule("Hardswish") {}
  Tensor forward(const Tensor& x) override;
};

class Hardsigmoid : public UnaryModule {
 public:
  Hardsigmoid() : UnaryModule("Hardsigmoid") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace xgrad::nn
