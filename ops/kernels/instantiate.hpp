#pragma once
// Explicit instantiation of a kernel template for float and double without writing its signature
// again: the declaration in the kernel's header is the only place that states it, and a mismatch
// between that declaration and the definition is a compile error here.
#define XGRAD_INSTANTIATE_FLOATING(kernel)        \
  template decltype(kernel<float>) kernel<float>; \
  template decltype(kernel<double>) kernel<double>
