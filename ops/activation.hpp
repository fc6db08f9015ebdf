#pragma once
// Activation functions with the names, defaults and semantics of torch.nn.functional (torch 1.13);
// each has a module of the same role in nn/activation.hpp (nn::GELU, nn::SiLU, ...). float32 and
// float64, any shape; values agree with torch's to a few ulp and are bit-identical whatever the
// thread count. The gradient at a kink is torch's choice (noted per op).
//
//   op                             forward y                                gradient dx
//   gelu(x, "none")                x*Phi(x) = x/2*(1 + erf(x/sqrt 2))       g*(Phi(x) + x*phi(x)), phi the N(0,1) pdf
//   gelu(x, "tanh")                x/2*(1 + tanh u),                        g*((1+t)/2 + x/2*(1-t^2)*u'), t = tanh u,
//                                  u = sqrt(2/pi)*(x + 0.044715 x^3)        u' = sqrt(2/pi)*(1 + 0.134145 x^2)
//   silu(x)                        x*sigmoid(x)                             g*s*(1 + x*(1 - s)), s = sigmoid(x)
//   softplus(x, beta, threshold)   ln(1 + e^(beta x))/beta,                 g*sigmoid(beta x),
//                                  x where beta x > threshold               g where beta x > threshold
//   mish(x)                        x*tanh(softplus(x))                      g*(t + x*s*(1 - t^2)), t = tanh(softplus x)
//   leaky_relu(x, negative_slope)  x if x > 0, else slope*x                 g if x > 0, else slope*g (slope*g at 0)
//   elu(x, alpha)                  x if x > 0, else alpha*(e^x - 1)         g if x > 0, else g*alpha*e^x (at 0 too)
//   selu(x)                        scale*elu(x, alpha), torch's constants   scale*g if x > 0, else g*scale*alpha*e^x
//   hardtanh(x, min_val, max_val)  min(max(x, min_val), max_val)            g where min_val < x < max_val, else 0
//                                  (NaN stays NaN)                          (0 at the bounds, unlike clamp)
//   logsigmoid(x)                  ln sigmoid(x) = min(x, 0) - ln(1 + e^-|x|)   g*sigmoid(-x)
//   hardswish(x)                   x*min(max(x + 3, 0), 6)/6                0 if x < -3, g if x >= 3,
//                                                                           else g*(x/3 + 1/2)
//   hardsigmoid(x)                 min(max(x + 3, 0), 6)/6                  g/6 where -3 < x < 3, else 0
//
// softplus and logsigmoid are computed in the overflow-free forms max(z, 0) + ln(1 + e^-|z|) and
// sigmoid = 1/(1 + e^-z), so softplus stays finite for any threshold. selu's constants are
// scale = 1.0507009873554804934193349852946 and alpha = 1.6732632423543772848170429916717.
// Errors: gelu's approximate other than "none" or "tanh"; softplus with beta = 0 or a NaN beta or
// threshold; a NaN slope or alpha; hardtanh with min_val > max_val or a NaN bound.
#include <string_view>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor mish(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor selu(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor logsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);

}  // namespace xgrad
