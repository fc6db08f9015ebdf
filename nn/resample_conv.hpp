#pragma once
// nn::ResampleConv: the resampling convolution as a layer that owns its geometry (the coarse points,
// the fine grid and the response) and precomputes what the op needs once, at construction: the
// user's "T", without ever building it (see ops/resample_conv.hpp for the formula, the gradients
// and the accuracy contract).
//
//   auto conv = std::make_shared<nn::ResampleConv>(coarse, FineGrid::uniform(0, 2e-5, 50000),
//                                                  Response::callable(fn, -w / 2, w / 2, dfn));
//   Tensor out = conv->forward(f);   // (batch..., N, B) -> (batch..., N, A)
//
// Parameters and buffers:
// - a sampled response's values are the parameter "response_values" (learnable);
// - the coarse points are the buffer "coarse", or the parameter "coarse" with learn_coarse (which
//   needs a response with a derivative: sampled, or a callable given its derivative);
// - with learn_shift, a per-row shift is the parameter "shift" (N, 1), initialised to zero, and the
//   layer reads row n at coarse[n, a] + shift[n]: one learnable offset per row (e.g. a per-fibre
//   wavelength offset), with d shift[n] = sum_a d coarse[n, a]. It also needs the derivative.
#include <cstddef>

#include "xgrad/nn/module.hpp"
#include "xgrad/ops/resample_conv.hpp"

namespace xgrad::nn {

struct ResampleConvConfig {
  /// Make the coarse points a learnable parameter.
  bool learn_coarse = false;
  /// Table tolerance / exact evaluation, passed to the op.
  xgrad::ResampleConvOptions op;
  /// Learn one shift per row, added to every coarse point of that row (parameter "shift", (N, 1)).
  bool learn_shift = false;
};

class ResampleConv : public UnaryModule {
 public:
  /// coarse: (N, A) float32 or float64 (the dtype the layer computes in); response: callable or
  /// sampled (its values are copied into the layer's parameter and converted to coarse's dtype).
  ResampleConv(const Tensor& coarse, FineGrid grid, const Response& response, ResampleConvConfig config = {});

  /// (batch..., N, B) -> (batch..., N, A).
  Tensor forward(const Tensor& f) override;
  std::string extra_repr() const override;

  const Tensor& coarse() const { return coarse_; }
  /// The learnable per-row shift (N, 1), undefined unless config.learn_shift.
  const Tensor& shift() const { return shift_; }
  const FineGrid& grid() const { return grid_; }
  const Response& response() const { return response_; }
  /// The precomputed tables (method, degree, pieces, measured error, bytes) used by forward.
  const ResampleConvTableInfo& table_info() const { return info_; }
  /// Bytes the layer holds beyond its parameters and buffers: its precomputed tables. A sampled
  /// response keeps none between steps; each forward builds a table of about table_info().bytes
  /// that its graph holds until the backward.
  std::size_t bytes_held() const;

 private:
  Tensor coarse_;
  Tensor shift_;
  FineGrid grid_;
  Response response_;
  ResampleConvConfig config_;
  ResampleConvTableInfo info_;
};

}  // namespace xgrad::nn
