#include "xgrad/nn/init.hpp"

#include <cmath>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"

namespace xgrad::nn::init {

namespace {

void check_defined(const Tensor& t, const char* op) {
  XGRAD_CHECK(t.defined(), "init::{}: argument 'tensor' is undefined", op);
}

// The random initialisers refuse integer and bool tensors, as torch's do: their draws would be
// truncated (xavier's to all zeros) without a word.
void check_random_target(const Tensor& t, const char* op) {
  check_defined(t, op);
  XGRAD_CHECK(is_floating_point(t.dtype()),
              "init::{}: argument 'tensor' must be float32 or float64 to take random values, got {} of shape {}", op,
              dtype_name(t.dtype()), shape_str(t.shape()));
}

// Random fills write in place without recording (Note [Counter-based random numbers]: the same
// values at any thread count).
Tensor& uniform_fill(Tensor& t, Generator& gen, double a, double b) {
  NoGradGuard no_grad;
  t.uniform_(a, b, gen);
  return t;
}

Tensor& normal_fill(Tensor& t, Generator& gen, double mean, double std) {
  NoGradGuard no_grad;
  t.normal_(mean, std, gen);
  return t;
}

double fan_for(const Tensor& t, FanMode mode, const char* op) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t, op);
  return static_cast<double>(mode == FanMode::fan_in ? fan_in : fan_out);
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv1d:
    case Nonlinearity::conv2d:
    case Nonlinearity::conv3d:
    case Nonlinearity::sigmoid:
      return 1.0;
    case Nonlinearity::tanh:
      return 5.0 / 3.0;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      XGRAD_CHECK(std::isfinite(param), "init::calculate_gain: leaky_relu slope must be finite, got {}", param);
      return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::selu:
      return 3.0 / 4.0;
  }
  XGRAD_CHECK(false, "init::calculate_gain: unknown nonlinearity {}", static_cast<int>(nonlinearity));
  return 1.0;
}

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t, const char* op) {
  check_defined(t, op);
  XGRAD_CHECK(t.dim() >= 2,
              "init::{}: fan in and fan out cannot be computed for a tensor with fewer than 2 dimensions, got shape {}",
              op, shape_str(t.shape()));
  const std::string name = std::string("init::") + op;
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive = checked_mul(receptive, t.size(d), name.c_str(), "tensor");
  return {checked_mul(t.size(1), receptive, name.c_str(), "tensor"),
          checked_mul(t.size(0), receptive, name.c_str(), "tensor")};
}

Tensor& uniform_(Tensor& t, Generator& gen, double a, double b) {
  check_random_target(t, "uniform_");
  XGRAD_CHECK(std::isfinite(a) && std::isfinite(b) && a <= b,
              "init::uniform_: bounds must be finite with a <= b, got a = {}, b = {}", a, b);
  return uniform_fill(t, gen, a, b);
}

Tensor& normal_(Tensor& t, Generator& gen, double mean, double std) {
  check_random_target(t, "normal_");
  XGRAD_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0,
              "init::normal_: mean must be finite and std finite and >= 0, got mean = {}, std = {}", mean, std);
  return normal_fill(t, gen, mean, std);
}

Tensor& constant_(Tensor& t, double value) {
  check_defined(t, "constant_");
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& xavier_uniform_(Tensor& t, Generator& gen, double gain) {
  check_random_target(t, "xavier_uniform_");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t, "xavier_uniform_");
  if (t.numel() == 0) return t;
  const double bound = gain * std::sqrt(6.0 / (static_cast<double>(fan_in) + static_cast<double>(fan_out)));
  return uniform_fill(t, gen, -bound, bound);
}

Tensor& xavier_normal_(Tensor& t, Generator& gen, double gain) {
  check_random_target(t, "xavier_normal_");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t, "xavier_normal_");
  if (t.numel() == 0) return t;
  const double std = gain * std::sqrt(2.0 / (static_cast<double>(fan_in) + static_cast<double>(fan_out)));
  return normal_fill(t, gen, 0.0, std);
}

Tensor& kaiming_uniform_(Tensor& t, Generator& gen, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_random_target(t, "kaiming_uniform_");
  const double fan = fan_for(t, mode, "kaiming_uniform_");
  if (t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * calculate_gain(nonlinearity, a) / std::sqrt(fan);
  return uniform_fill(t, gen, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, Generator& gen, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_random_target(t, "kaiming_normal_");
  const double fan = fan_for(t, mode, "kaiming_normal_");
  if (t.numel() == 0) return t;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan);
  return normal_fill(t, gen, 0.0, std);
}

Tensor& uniform_(Tensor& t, double a, double b) { return uniform_(t, default_generator(), a, b); }
Tensor& normal_(Tensor& t, double mean, double std) { return normal_(t, default_generator(), mean, std); }
Tensor& xavier_uniform_(Tensor& t, double gain) { return xavier_uniform_(t, default_generator(), gain); }
Tensor& xavier_normal_(Tensor& t, double gain) { return xavier_normal_(t, default_generator(), gain); }
Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  return kaiming_uniform_(t, default_generator(), a, mode, nonlinearity);
}
Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  return kaiming_normal_(t, default_generator(), a, mode, nonlinearity);
}

}  // namespace xgrad::nn::init
