#pragma once
// The core layer: tensor, dtype, shapes and checked sizes, autograd engine and extension API,
// gradcheck, random numbers, .npy I/O, parallel helpers and the CPU report. Not the xtensor
// interop: that is the opt-in header xgrad/core/xtensor_interop.hpp, so that including xgrad parses
// no xtensor header.
#include "xgrad/core/allocator.hpp"
#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/cpu_info.hpp"
#include "xgrad/core/dtype.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/core/from_blob.hpp"
#include "xgrad/core/functional.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/gradcheck.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/core/random.hpp"
#include "xgrad/core/shape.hpp"
#include "xgrad/core/tensor.hpp"
