#pragma once
// The nn layer: modules and layers built on ops, initialisation, optimizers and learning-rate
// schedules, checkpoints, and data loading.
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/block_sparse_linear.hpp"
#include "xgrad/nn/data.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/nn/layer_norm.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/lr_scheduler.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/optim.hpp"
#include "xgrad/nn/resample_conv.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/nn/serialize.hpp"
