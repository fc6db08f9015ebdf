#include "xgrad/nn/resample_conv.hpp"

#include <cmath>

#include "xgrad/ops/elementwise.hpp"

namespace xgrad::nn {

ResampleConv::ResampleConv(const Tensor& coarse, FineGrid grid, const Response& response, ResampleConvConfig config)
    : UnaryModule("ResampleConv"), grid_(std::move(grid)), config_(config) {
  XGRAD_CHECK(coarse.defined(), "nn::ResampleConv: argument 'coarse' is an undefined tensor");
  XGRAD_CHECK(coarse.dim() == 2, "nn::ResampleConv: argument 'coarse' must be (N, A), got {}",
              shape_str(coarse.shape()));
  XGRAD_CHECK(response.state() != nullptr, "nn::ResampleConv: argument 'response' is empty");
  const std::vector<double> c = coarse.to_vector();
  for (std::size_t i = 0; i < c.size(); ++i)
    XGRAD_CHECK(std::isfinite(c[i]), "nn::ResampleConv: argument 'coarse' {} has a non-finite value {} at [{}, {}]",
                shape_str(coarse.shape()), c[i], static_cast<std::int64_t>(i) / coarse.size(1),
                static_cast<std::int64_t>(i) % coarse.size(1));
  XGRAD_CHECK(!(config.learn_coarse || config.learn_shift) || response.has_derivative(),
              "nn::ResampleConv: learn_coarse and learn_shift need the response's derivative: pass it as "
              "Response::callable(fn, lo, hi, dfn), or use a sampled response");
  const Dtype dt = coarse.dtype();
  // The layer owns copies of its geometry: later changes to the caller's tensors do not leak in.
  if (config.learn_coarse)
    coarse_ = register_parameter("coarse", coarse.detach().clone_data());
  else
    coarse_ = register_buffer("coarse", coarse.detach().clone_data());
  if (config.learn_shift) shift_ = register_parameter("shift", Tensor::zeros({coarse.size(0), 1}, dt));
  if (response.is_sampled()) {
    const Tensor& v = register_parameter("response_values", response.values().detach().to(dt).clone_data());
    response_ = Response::sampled(v, response.lo(), response.hi(), response.interp());
  } else {
    response_ = response;
  }
  // The precomputation, each table built once: when the coarse points learn, prepare(derivative =
  // true) builds the forward and the derivative table; the forward table's description (table_info)
  // is then a cache hit. A sampled response's per-forward table is built here once, to describe it.
  if ((config.learn_coarse || config.learn_shift) && !response_.is_sampled())
    (void)resample_conv_prepare(grid_, response_, dt, config_.op, /*derivative=*/true);
  info_ = resample_conv_prepare(grid_, response_, dt, config_.op);
}

Tensor ResampleConv::forward(const Tensor& f) {
  return resample_conv(f, shift_.defined() ? coarse_ + shift_ : coarse_, grid_, response_, config_.op);
}

std::size_t ResampleConv::bytes_held() const { return resample_conv_cached_bytes(response_); }

}  // namespace xgrad::nn
