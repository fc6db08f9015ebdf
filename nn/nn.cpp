#include "xgrad/nn/nn.hpp"
