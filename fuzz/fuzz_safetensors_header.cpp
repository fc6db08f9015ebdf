// libFuzzer harness for the safetensors header scanner alone (nn/detail/safetensors_header.hpp),
// differential against nlohmann-json, an independent strict JSON parser (on inputs up to 64 KB). The input is a
// safetensors file (the seeds of fuzz_safetensors serve): the header text is what its first 8 bytes say, or all the
// rest when that runs past the end. Checked, besides "no crash, no sanitizer report, only xgrad::Error escapes":
//   - the scanner accepts => nlohmann parses the same text, and it describes exactly the scanner's
//     entries (name, dtype, shape, data_offsets) and metadata, with no key dropped;
//   - nlohmann parses the text, no object in it has a duplicate key and it matches the schema
//     (entries with exactly dtype/shape/data_offsets of the right types and ranges, at most 64
//     dimensions, a metadata object of strings) => the scanner accepts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "xgrad/core/error.hpp"
#include "xgrad/nn/detail/safetensors_header.hpp"

namespace {

using Json = nlohmann::json;

[[noreturn]] void die(const char* why, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_safetensors_header: %s %s\n", why, detail.substr(0, 500).c_str());
  std::abort();
}

// A JSON number that is a non-negative integer of at most `max` (nlohmann keeps -0 as a signed 0).
bool non_negative(const Json& v, std::uint64_t max) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= max;
  return v.is_number_integer() && v.get<std::int64_t>() == 0;
}

bool matches_schema(const Json& h) {
  if (!h.is_object()) return false;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return false;
      for (const auto& [k, s] : v.items())
        if (!s.is_string()) return false;
      continue;
    }
    if (!v.is_object() || v.size() != 3 || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return false;
    if (!v["dtype"].is_string()) return false;
    const Json& shape = v["shape"];
    if (!shape.is_array() || shape.size() > 64) return false;
    for (const auto& d : shape)
      if (!non_negative(d, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) return false;
    const Json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) return false;
    for (const auto& o : off)
      if (!non_negative(o, std::numeric_limits<std::uint64_t>::max())) return false;
  }
  return true;
}

std::uint64_t as_u64(const Json& v) { return v.is_number_unsigned() ? v.get<std::uint64_t>() : 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  // The header as the length says, or all the rest when the length runs past the end.
  std::uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<std::uint64_t>(data[i]) << (8 * i);
  if (hlen > size - 8) hlen = size - 8;
  const std::string_view text(reinterpret_cast<const char*>(data) + 8, hlen);

  xgrad::detail::SafetensorsHeader header;
  bool accepted = true;
  try {
    header = xgrad::detail::scan_safetensors_header(text, "fuzz");
  } catch (const xgrad::Error& e) {
    accepted = false;
    if (std::string_view(e.what()).find("at byte ") == std::string_view::npos)
      die("a message without a byte", e.what());
  }

  // The oracle is for inputs up to 64 KB: nlohmann's parser with a callback takes time quadratic in
  // the number of keys of an object (it rescans the parent when a child closes), so on the multi-MB
  // seeds only the scanner runs (crashes, sanitizer reports and time per input are still checked).
  if (text.size() > 65536) return 0;
  // nlohmann: a DOM (later duplicates overwrite earlier ones) and a duplicate detector (a set of
  // keys per open object, fed by the parser's callback).
  bool duplicate = false;
  std::vector<std::set<std::string>> open;
  const Json::parser_callback_t cb = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    if (event == Json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (event == Json::parse_event_t::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second)
      duplicate = true;
    return true;
  };
  const Json j = Json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  const bool json_ok = !j.is_discarded();

  if (accepted) {
    if (!json_ok) die("the scanner accepted text that nlohmann refuses");
    if (duplicate) die("the scanner accepted a duplicate key");
    if (!matches_schema(j)) die("the scanner accepted text outside the schema");
    const bool has_meta = j.contains("__metadata__");
    if (j.size() != header.entries.size() + (has_meta ? 1 : 0)) die("the entry counts differ");
    for (const auto& e : header.entries) {
      const std::string name(header.name(e));
      const std::vector<std::int64_t> dims = header.shape(e);
      if (!j.contains(name)) die("an entry nlohmann does not have", name);
      const Json& v = j[name];
      if (v["dtype"].get<std::string>() != header.dtype(e)) die("a dtype differs", name);
      const Json& shape = v["shape"];
      if (shape.size() != dims.size()) die("a shape's length differs", name);
      for (std::size_t i = 0; i < dims.size(); ++i)
        if (as_u64(shape[i]) != static_cast<std::uint64_t>(dims[i])) die("a dimension differs", name);
      if (as_u64(v["data_offsets"][0]) != e.begin || as_u64(v["data_offsets"][1]) != e.end)
        die("data_offsets differ", name);
    }
    const std::size_t n_meta = has_meta ? j["__metadata__"].size() : 0;
    if (n_meta != header.metadata.size()) die("the metadata counts differ");
    for (const auto& m : header.metadata) {
      const std::string k(header.key(m));
      if (!j["__metadata__"].contains(k) || j["__metadata__"][k].get<std::string>() != header.value(m))
        die("metadata differs", k);
    }
  } else if (json_ok && !duplicate && matches_schema(j) && text.find('\0') == std::string_view::npos) {
    // (nlohmann takes a raw NUL byte for the end of its input; JSON does not.)
    try {
      (void)xgrad::detail::scan_safetensors_header(text, "fuzz");
    } catch (const xgrad::Error& e) {
      die("the scanner refused a valid header:", e.what());
    }
  }
  return 0;
}
