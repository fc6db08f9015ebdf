#pragma once
// xgrad::distributed::SyncBatchNorm: batch normalisation whose batch statistics are computed over the
// whole batch of every rank (torch.nn.SyncBatchNorm), part of the xgrad::distributed target (MPI).
#include <cstdint>
#include <memory>
#include <optional>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/normalization.hpp"

namespace xgrad::distributed {

/// torch.nn.SyncBatchNorm for inputs (N, C, *) (any rank >= 2), on MPI_COMM_WORLD.
///
/// Training mode: with M = the number of values per channel over all ranks (Σ_r N_r·S, S the product
/// of the dimensions after C), per channel c
///   μ_c = (1/M) Σ_ranks Σ_{n,s} x[n,c,s],   σ²_c = (1/M) Σ_ranks Σ_{n,s} (x[n,c,s] − μ_c)²  (biased),
///   y = (x − μ_c)/√(σ²_c + eps)·w_c + b_c,
/// the two sums all-reduced across ranks (all_reduce_sum, two passes for accuracy). The gradient
/// flows through both all-reduces (their backward all-reduces the gradients), so each rank's x.grad is
/// the gradient of the total loss Σ_r L_r with respect to its x_r, exactly what one process with the
/// whole batch computes for those rows; backward is therefore collective. The running statistics
/// are updated on every rank with the global μ and the unbiased M/(M−1)·σ², as BatchNorm's (momentum,
/// or the cumulative average with momentum unset), so they stay equal on all ranks.
/// Eval mode: the running statistics (no communication), as BatchNorm.
/// Every rank must call forward (and backward) in training mode together, with inputs of the same C
/// (the batch sizes may differ). Each training forward first all-gathers every rank's count of values
/// per channel and its options (num_features, eps, momentum, affine, track_running_stats, the input's
/// dtype), so a layer built differently on some rank is refused by every rank alike instead of
/// summing mismatched tensors. Errors: as BatchNorm's; input rank < 2; M <= 1 in training mode
/// ("more than 1 value per channel") and options that differ across ranks (naming the option, rank
/// 0's value and the other rank's), decided after the all-gather so every rank throws;
/// MPI not initialised.
class SyncBatchNorm : public nn::BatchNormBase {
 public:
  explicit SyncBatchNorm(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                         bool affine = true, bool track_running_stats = true, Dtype dtype = kFloat32)
      : BatchNormBase("SyncBatchNorm", num_features, eps, momentum, affine, track_running_stats, dtype) {}

  Tensor forward(const Tensor& x) override;

 protected:
  void check_input_dim(const Tensor& x) const override;

 private:
  double gather_counts_and_check(double local, Dtype dtype) const;
};

}  // namespace xgrad::distributed
