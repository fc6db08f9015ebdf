// compare_checkpoints A B [TOL]: exit 0 when the two safetensors files hold the same names with values
// equal to TOL (absolute; default 1e-12, 0 for the same values), else print the worst difference and
// exit 1. The resumed DDP runs sum each global batch's gradient in another order (per rank, then
// across ranks) than one process does, so they agree to rounding, not bit for bit; the ZeRO runs of
// zero_checkpoint.cpp do the same arithmetic at every world size and are compared with TOL 0.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "xgrad/nn/serialize.hpp"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: compare_checkpoints A B [TOL]\n");
    return 2;
  }
  const auto a = xgrad::nn::load_state(argv[1]), b = xgrad::nn::load_state(argv[2]);
  if (a.size() != b.size()) {
    std::fprintf(stderr, "compare_checkpoints: %zu entries against %zu\n", a.size(), b.size());
    return 1;
  }
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.numel() != b[i].second.numel()) {
      std::fprintf(stderr, "compare_checkpoints: entry %zu is '%s' against '%s'\n", i, a[i].first.c_str(),
                   b[i].first.c_str());
      return 1;
    }
    const auto va = a[i].second.to_vector(), vb = b[i].second.to_vector();
    for (std::size_t k = 0; k < va.size(); ++k) worst = std::fmax(worst, std::fabs(va[k] - vb[k]));
  }
  std::printf("compare_checkpoints: %zu entries, largest difference %.3g\n", a.size(), worst);
  const double tol = argc == 4 ? std::atof(argv[3]) : 1e-12;
  return worst <= tol ? 0 : 1;
}
