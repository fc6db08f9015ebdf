#pragma once
// Internal helpers shared by the optimizers' sources in nn/optim/ (not installed).
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "xgrad/core/parallel.hpp"
#include "xgrad/nn/optim/optimizer.hpp"

namespace xgrad::nn::detail {

// Bumps the version counter of an in-place written tensor (Note [Storage] in tensor.hpp).
inline void bump_version(const Tensor& t) { ++t.impl()->storage->version; }
// Options as doubles, by the names used in state_dict (bools as 0/1, betas split in two).
std::optional<double> get_option(const ParamGroup& g, const std::string& name);
void set_option(ParamGroup& g, const std::string& name, double v);
bool is_bool_option(const std::string& name);
// Rejects options set on a group that the optimizer does not have.
void reject_foreign(const ParamGroup& g, const std::string& opt, const std::vector<std::string>& allowed);
void check_nonneg(const std::string& opt, std::size_t index, const char* what, double v);

// Elementwise loop over [0, n), serial below kParallelGrain (Note [Determinism]).
template <class Fn>
void for_each_element(std::int64_t n, Fn&& fn) {
  parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) fn(i);
  });
}

// Calls fn(std::true_type{}) or fn(std::false_type{}): the update loops take their options as
// compile-time flags so that each variant is a branch-free, vectorisable loop.
template <class Fn>
void with_flag(bool flag, Fn&& fn) {
  if (flag)
    fn(std::true_type{});
  else
    fn(std::false_type{});
}

// NaN-propagating maximum, like torch.maximum.
template <class T>
T nan_max(T a, T b) {
  return (a != a || a > b) ? a : b;  // NOLINT(misc-redundant-expression): a != a tests NaN
}

}  // namespace xgrad::nn::detail
