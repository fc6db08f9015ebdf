#pragma once
// The nn layer: modules, layers, losses, optimizers (filled in by the nn issue).
#include "xgrad/ops/ops.hpp"
