// The C++ half of xgrad_torch's training-loop parity test (python/tests/test_training.py): the same
// loop as the Python test, written with xgrad alone (xgrad's ops, mse_loss and nn::Adam), on the
// initial values the test wrote as .npy files. Prints one loss per step ("%.17g"), which the test
// compares with the losses of the loop run through torch.optim.Adam and xgrad_torch.
//
// usage: xgrad_torch_train_reference DIR block_sparse STEPS LR BLOCK_IN BLOCK_OUT
//          DIR holds x, target, weight, bias, mask (block mask, W's block layout) .npy files
//        xgrad_torch_train_reference DIR resample STEPS LR X0 DX LO HI
//          DIR holds f (batch, N, B), coarse (N, A), values (K), target (batch, N, A)
// Parameters: block_sparse learns weight and bias; resample learns values and coarse.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "xgrad/xgrad.hpp"

using namespace xgrad;

namespace {
Tensor load(const std::string& dir, const char* name) { return load_npy(dir + "/" + name + ".npy"); }

void print_loss(const Tensor& loss) { std::printf("%.17g\n", loss.item()); }
}  // namespace

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s DIR block_sparse|resample STEPS LR ...\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  const int steps = std::atoi(argv[3]);
  const double lr = std::atof(argv[4]);
  if (mode == "block_sparse" && argc == 7) {
    const Tensor x = load(dir, "x"), target = load(dir, "target"), mask = load(dir, "mask");
    Tensor weight = load(dir, "weight").set_requires_grad();
    Tensor bias = load(dir, "bias").set_requires_grad();
    const auto pattern = BlockSparsePattern::from_block_mask(
        InFeatures{x.shape().back()}, OutFeatures{target.shape().back()},
        BlockSize{InFeatures{std::atoll(argv[5])}, OutFeatures{std::atoll(argv[6])}}, mask);
    nn::Adam opt({weight, bias}, nn::AdamOptions(lr));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad(true);
      const Tensor loss = mse_loss(block_sparse_linear(x, weight, bias, pattern), target);
      print_loss(loss);
      loss.backward();
      opt.step();
    }
    return 0;
  }
  if (mode == "resample" && argc == 9) {
    const Tensor f = load(dir, "f"), target = load(dir, "target");
    Tensor coarse = load(dir, "coarse").set_requires_grad();
    Tensor values = load(dir, "values").set_requires_grad();
    const FineGrid grid = FineGrid::uniform(std::atof(argv[5]), std::atof(argv[6]), f.shape().back());
    const double lo = std::atof(argv[7]), hi = std::atof(argv[8]);
    nn::Adam opt({values, coarse}, nn::AdamOptions(lr));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad(true);
      const Tensor out = resample_conv(f, coarse, grid, Response::sampled(values, lo, hi, Interp::cubic));
      const Tensor loss = mse_loss(out, target);
      print_loss(loss);
      loss.backward();
      opt.step();
    }
    return 0;
  }
  std::fprintf(stderr, "%s: bad arguments for mode '%s'\n", argv[0], mode.c_str());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
