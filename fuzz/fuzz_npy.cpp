// libFuzzer harness for the .npy reader (core/npy.hpp). Any input must either load or throw
// xgrad::Error; a loaded float array written back with to_npy_bytes must load bit-identically.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "xgrad/core/error.hpp"
#include "xgrad/core/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  xgrad::Tensor t;
  try {
    t = xgrad::from_npy_bytes(bytes, "fuzz");
  } catch (const xgrad::Error&) {
    return 0;
  }
  try {
    const xgrad::Tensor back = xgrad::from_npy_bytes(xgrad::to_npy_bytes(t), "fuzz round trip");
    if (!xgrad::bit_equal(back, t)) {
      std::fprintf(stderr, "fuzz_npy: the round trip changed the array\n");
      std::abort();
    }
  } catch (const xgrad::Error& e) {
    std::fprintf(stderr, "fuzz_npy: a written array does not load: %s\n", e.what());
    std::abort();
  }
  return 0;
}
