#pragma once
// The nn layer: modules and layers built on ops.
#include "xgrad/nn/module.hpp"
