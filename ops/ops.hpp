#pragma once
// The ops layer: every differentiable op, each with its hand-written backward.
#include "xgrad/ops/elementwise.hpp"
