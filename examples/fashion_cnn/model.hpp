#pragma once
// The fashion_cnn model, shared by the example (main.cpp) and the training-step benchmark
// (bench/conv_step.cpp, whose libtorch peer bench/torch_conv_step.cpp builds the same layers):
//   Conv2d(1, 32, 3, pad 1, no bias) BatchNorm2d(32) ReLU MaxPool2d(2)     (N, 1, 28, 28) -> (N, 32, 14, 14)
//   Conv2d(32, 32, 3, pad 1, no bias) BatchNorm2d(32) ReLU MaxPool2d(2)    -> (N, 32, 7, 7)
//   Flatten Dropout(0.25) Linear(1568, 128) ReLU Dropout(0.25) Linear(128, 10)
// The convolutions have no bias: the batch norm that follows each would cancel it.
#include <cstdint>
#include <memory>
#include <vector>

#include "xgrad/core/random.hpp"
#include "xgrad/nn/nn.hpp"

namespace examples {

inline std::shared_ptr<xgrad::nn::Sequential> make_fashion_cnn(std::uint64_t seed) {
  using namespace xgrad;
  Generator gen(seed);
  using M = std::shared_ptr<nn::UnaryModule>;
  const std::vector<std::int64_t> two{2};
  return std::make_shared<nn::Sequential>(std::initializer_list<M>{
      std::make_shared<nn::Conv2d>(nn::ConvOptions(1, 32, {3}).padding(1).bias(false), gen),
      std::make_shared<nn::BatchNorm2d>(32), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(two),
      std::make_shared<nn::Conv2d>(nn::ConvOptions(32, 32, {3}).padding(1).bias(false), gen),
      std::make_shared<nn::BatchNorm2d>(32), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(two),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Dropout>(0.25, gen),
      std::make_shared<nn::Linear>(32 * 7 * 7, 128, gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.25, gen), std::make_shared<nn::Linear>(128, 10, gen)});
}

}  // namespace examples
