#pragma once
// Reductions over chosen axes. `axes` empty means all axes; negative axes count from the end;
// keepdim keeps reduced axes as size 1. Sums are deterministic (fixed-order chunks).
//
// | op                      | forward                         | gradient                                      |
// |-------------------------|---------------------------------|-----------------------------------------------|
// | sum(x, axes, keepdim)   | sum over axes                   | dx = g broadcast back to x's shape            |
// | mean(x, axes, keepdim)  | sum / (number of reduced elems) | dx = g / count, broadcast                     |
// | max(x, axes, keepdim)   | maximum over axes               | dx = g at the first arg-max (row-major), 0 else |
// | logsumexp(x, axes, kd)  | m + log(sum exp(x - m)), stable | dx = g * exp(x - y)  (= softmax)              |
#include <cstdint>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdim = false);

}  // namespace xgrad
