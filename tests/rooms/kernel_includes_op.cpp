// Compiled with the kernel room's include roots only (tests/CMakeLists.txt, ops_kernel_room_refuses):
// an op header is not found, so a kernel that includes one does not compile.
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/kernels/simd.hpp"
