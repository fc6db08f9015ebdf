#pragma once
// Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, LBFGS) and gradient clipping, mirroring torch::optim and
// torch.nn.utils.clip_grad_norm_ of PyTorch 1.13: one header and one source file per optimizer in
// nn/optim/ (as libtorch's torch/optim/), all included here.
#include "xgrad/nn/optim/adagrad.hpp"
#include "xgrad/nn/optim/adam.hpp"
#include "xgrad/nn/optim/clip_grad.hpp"
#include "xgrad/nn/optim/lbfgs.hpp"
#include "xgrad/nn/optim/least_squares.hpp"
#include "xgrad/nn/optim/optimizer.hpp"
#include "xgrad/nn/optim/rmsprop.hpp"
#include "xgrad/nn/optim/sgd.hpp"
