#pragma once
// nn::init: in-place initialisers for parameters, with torch.nn.init's formulas and names. Each one
// overwrites the tensor's values under NoGradGuard (so it works on leaves that require grad, and
// records nothing), keeps its shape and dtype, and returns the tensor. Random ones draw from the
// Generator they are given, or from the default generator (xgrad::manual_seed) in the forms without
// one, as torch's; the same seed gives the same values on every machine and at any thread count. A tensor with no
// elements is left as it is (torch warns and does the same). The random ones refuse an integer or bool tensor with an
// xgrad::Error naming the initialiser (as torch does: the draws would be truncated, xavier's to all zeros); constant_,
// zeros_ and ones_ take any dtype.
//
// Fans (torch's _calculate_fan_in_and_fan_out), for a tensor of shape (out, in, k...):
//   fan_in = in * prod(k...), fan_out = out * prod(k...); fewer than 2 dims, or fans that overflow int64,
//   are an error.
#include <cstdint>
#include <string>
#include <utility>

#include "xgrad/core/random.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad::nn::init {

/// The nonlinearity that a layer's output goes through, for calculate_gain (torch's names).
enum class Nonlinearity { linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu, selu };
/// Which fan kaiming_* preserves the variance of: forward activations (fan_in) or gradients (fan_out).
enum class FanMode { fan_in, fan_out };

/// torch.nn.init.calculate_gain: 1 for linear, conv and sigmoid, 5/3 for tanh, sqrt(2) for relu,
/// sqrt(2 / (1 + slope^2)) for leaky_relu with slope = `param` (torch's default 0.01), 3/4 for selu.
/// `param` is only read for leaky_relu.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

/// (fan_in, fan_out) of a tensor with at least 2 dims (see above). Errors: dim < 2 (names `op`).
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t,
                                                                   const char* op = "calculate_fan_in_and_fan_out");

/// Uniform on [a, b). Errors: undefined tensor, a > b or non-finite bounds.
Tensor& uniform_(Tensor& t, Generator& gen, double a = 0.0, double b = 1.0);
/// Normal with the given mean and standard deviation. Errors: std < 0 or non-finite.
Tensor& normal_(Tensor& t, Generator& gen, double mean = 0.0, double std = 1.0);
/// Every element = value.
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

/// Glorot uniform: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)). Errors: dim < 2.
Tensor& xavier_uniform_(Tensor& t, Generator& gen, double gain = 1.0);
/// Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)). Errors: dim < 2.
Tensor& xavier_normal_(Tensor& t, Generator& gen, double gain = 1.0);
/// He uniform: U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan), gain = calculate_gain(nonlinearity, a),
/// fan = fan_in or fan_out by `mode`. `a` is the negative slope of leaky_relu. With torch's
/// defaults (a = 0, fan_in, leaky_relu) the gain is sqrt(2). nn::Linear uses a = sqrt(5), which gives
/// bound = 1 / sqrt(fan_in). Errors: dim < 2.
Tensor& kaiming_uniform_(Tensor& t, Generator& gen, double a = 0.0, FanMode mode = FanMode::fan_in,
                         Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
/// He normal: N(0, std^2), std = gain / sqrt(fan) (gain and fan as in kaiming_uniform_). Errors: dim < 2.
Tensor& kaiming_normal_(Tensor& t, Generator& gen, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu);

// The same from the default generator (torch's forms without a generator).
Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                         Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu);

}  // namespace xgrad::nn::init
