// libFuzzer harness for the safetensors parser (nn/serialize.hpp). Any input must either parse or
// throw xgrad::Error; anything else (a crash, a sanitizer report, another exception, a hang) is a
// bug. Parsed files are also written back and re-parsed, which must give the same tensors and
// metadata (the writer and the reader agree on everything the reader accepts).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "xgrad/core/error.hpp"
#include "xgrad/nn/serialize.hpp"

namespace {
[[noreturn]] void die(const char* why) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", why);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  xgrad::nn::SafetensorsFile file;
  try {
    file = xgrad::nn::parse_safetensors(data, size, "fuzz");
  } catch (const xgrad::Error&) {
    return 0;  // refused with a reason: fine
  }
  std::string again;
  try {
    again = xgrad::nn::to_safetensors_bytes(file.tensors, file.metadata);
  } catch (const xgrad::Error&) {
    return 0;  // e.g. an empty tensor name: readable, but our writer refuses to create one
  }
  xgrad::nn::SafetensorsFile back;
  try {
    back = xgrad::nn::parse_safetensors(again, "fuzz round trip");
  } catch (const xgrad::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    die("a file written from a parsed file does not parse");
  }
  if (back.metadata != file.metadata) die("metadata changed in the round trip");
  if (back.tensors.size() != file.tensors.size()) die("tensor count changed in the round trip");
  for (std::size_t i = 0; i < back.tensors.size(); ++i)
    if (back.tensors[i].first != file.tensors[i].first ||
        !xgrad::bit_equal(back.tensors[i].second, file.tensors[i].second))
      die("a tensor changed in the round trip");
  return 0;
}
