// Tests for the safetensors header scanner (nn/detail/safetensors_header.*, Note [Safetensors header
// scanner]): JSON strings (escapes, surrogate pairs, UTF-8), numbers, whitespace, the schema, and
// the messages (file, byte offset, what was expected). The files built from these headers are
// tested end to end in test_serialize.cpp.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/nn/detail/safetensors_header.hpp"
#include "xgrad/nn/serialize.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {

detail::SafetensorsHeader scan(const std::string& header) {
  return detail::scan_safetensors_header(header, "h.safetensors");
}

// One tensor entry with the given name text (as written in JSON, without the quotes).
std::string named(const std::string& name_json) {
  return "{\"" + name_json + R"(": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})";
}

void require_refused(const std::string& header, std::initializer_list<std::string> parts) {
  INFO("header: " << header.substr(0, 200));
  std::vector<std::string> all = {"load_safetensors", "'h.safetensors'", "not a valid safetensors file"};
  all.insert(all.end(), parts.begin(), parts.end());
  require_error([&] { (void)scan(header); }, all);
}

}  // namespace

TEST_CASE("safetensors header: a valid header gives every entry and the metadata, in header order",
          "[serialize][safetensors_header]") {
  const auto h = scan(R"({"b": {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 48]},
    "__metadata__": {"format": "pt", "z": ""},
    "a": {"data_offsets": [48, 52], "shape": [], "dtype": "F32"}})");
  REQUIRE(h.entries.size() == 2);
  CHECK(h.name(h.entries[0]) == "b");
  CHECK(h.dtype(h.entries[0]) == "F64");
  CHECK(h.shape(h.entries[0]) == std::vector<std::int64_t>{2, 3});
  CHECK(h.entries[0].begin == 0);
  CHECK(h.entries[0].end == 48);
  CHECK(h.entries[0].at == 8 + 1);  // the name's opening quote, counted from the file's start
  CHECK(h.name(h.entries[1]) == "a");
  CHECK(h.shape(h.entries[1]).empty());
  CHECK(h.entries[1].begin == 48);
  REQUIRE(h.metadata.size() == 2);
  CHECK(h.key(h.metadata[0]) == "format");
  CHECK(h.value(h.metadata[0]) == "pt");
  CHECK(h.key(h.metadata[1]) == "z");
  CHECK(h.value(h.metadata[1]).empty());
  CHECK(scan("{}").entries.empty());
  CHECK(scan(R"({"__metadata__": {}})").metadata.empty());
  // Dimensions and offsets up to their limits.
  const auto big = scan(R"({"w": {"dtype": "U8", "shape": [9223372036854775807, 0],
                                   "data_offsets": [18446744073709551615, 18446744073709551615]}})");
  CHECK(big.shape(big.entries[0])[0] == 9223372036854775807LL);
  CHECK(big.entries[0].end == 18446744073709551615ULL);
  const auto zero = scan(R"({"w": {"dtype": "F32", "shape": [-0], "data_offsets": [0, -0]}})");
  CHECK(zero.shape(zero.entries[0]) == std::vector<std::int64_t>{0});
}

TEST_CASE("safetensors header: whitespace wherever JSON allows it, nowhere else", "[serialize][safetensors_header]") {
  const std::string ws = " \t\n\r";
  const auto h = scan(ws + "{" + ws + "\"w\"" + ws + ":" + ws + "{" + ws + "\"dtype\"" + ws + ":" + ws + "\"F32\"" +
                      ws + "," + ws + "\"shape\"" + ws + ":" + ws + "[" + ws + "1" + ws + "," + ws + "2" + ws + "]" +
                      ws + "," + ws + "\"data_offsets\"" + ws + ":" + ws + "[" + ws + "0" + ws + "," + ws + "8" + ws +
                      "]" + ws + "}" + ws + "," + ws + "\"__metadata__\"" + ws + ":" + ws + "{" + ws + "\"k\"" + ws +
                      ":" + ws + "\"v\"" + ws + "}" + ws + "}" + ws);
  REQUIRE(h.entries.size() == 1);
  CHECK(h.shape(h.entries[0]) == std::vector<std::int64_t>{1, 2});
  CHECK(h.metadata.size() == 1);
  // Not JSON whitespace: vertical tab, form feed, a no-break space.
  require_refused("{\v}", {"not valid JSON", "at byte 9", "expected a tensor name"});
  require_refused("{\f}", {"not valid JSON", "at byte 9"});
  require_refused("{\xc2\xa0}", {"not valid JSON", "at byte 9"});
  // Trailing commas, missing commas, trailing bytes.
  require_refused(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},})",
                  {"not valid JSON", "expected a tensor name"});
  require_refused(R"({"w": {"dtype": "F32", "shape": [0,], "data_offsets": [0, 0]}})",
                  {"dimension that is not a non-negative integer", "found ']'"});
  require_refused(R"({"w": {"dtype": "F32", "shape": [0] "data_offsets": [0, 0]}})",
                  {"not valid JSON", "expected ',' or '}' in the header entry of tensor 'w'", "found '\"'"});
  require_refused(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0],}})", {"not valid JSON"});
  require_refused("{} x", {"not valid JSON", "at byte 11", "only whitespace after", "found 'x'"});
  require_refused("{}}", {"not valid JSON", "at byte 10"});
  require_refused(std::string("{}\0", 3), {"not valid JSON", "found byte 0x00"});
}

TEST_CASE("safetensors header: string escapes and UTF-8", "[serialize][safetensors_header]") {
  auto name = [](const std::string& json) {
    const auto h = scan(named(json));
    return std::string(h.name(h.entries.at(0)));
  };
  CHECK(name(R"(a\"b\\c\/d\be\ff\ng\rh\ti)") == "a\"b\\c/d\be\ff\ng\rh\ti");
  CHECK(name(R"(\u0077)") == "w");
  CHECK(name(R"(\u00e9)") == "\xc3\xa9");                // é, two bytes
  CHECK(name(R"(\u20AC)") == "\xe2\x82\xac");            // €, three bytes (upper-case hex)
  CHECK(name(R"(\ud83d\ude00)") == "\xf0\x9f\x98\x80");  // 😀, a surrogate pair: four bytes
  CHECK(name(R"(\uDBFF\uDFFF)") == "\xf4\x8f\xbf\xbf");  // U+10FFFF, the last code point
  CHECK(name(R"(\u0000)") == std::string(1, '\0'));      // NUL is a valid (escaped) character
  CHECK(name("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // raw UTF-8
  CHECK(name("") == "");

  // Invalid escapes, lone surrogates, raw control characters.
  require_refused(named(R"(a\x)"),
                  {"not valid JSON", "invalid escape in a string at byte 11", "at byte 12", "found 'x'"});
  require_refused(named(R"(a\U0041)"), {"invalid escape"});
  require_refused(named(R"(\u00g0)"), {"not valid JSON", "a hexadecimal digit", "found 'g'"});
  require_refused(named(R"(\u12)"), {"not valid JSON", "a hexadecimal digit"});
  require_refused(named(R"(\ude00)"), {"low surrogate without a high surrogate"});
  require_refused(named(R"(\ud83dx)"), {"high surrogate not followed by a low one"});
  require_refused(named(R"(\ud83d\u0041)"), {"high surrogate followed by \\u0041"});
  require_refused(named(R"(\ud83d\ud83d)"), {"high surrogate followed by"});
  require_refused(named("a\nb"), {"not valid JSON", "control characters must be escaped", "found byte 0x0a"});
  require_refused(named(std::string("a\0b", 3)), {"control characters must be escaped", "found byte 0x00"});
  require_refused(named("a\x1f"), {"control characters must be escaped"});
  // Invalid UTF-8: a stray continuation byte, overlong forms, an encoded surrogate, above U+10FFFF,
  // a truncated sequence, bytes that never occur.
  for (const std::string bad : {"\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\xaf",
                                "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe2\x82", "\xff", "\xfe"}) {
    INFO("bytes of " << bad.size());
    require_refused(named(bad), {"not valid JSON", "invalid UTF-8"});
  }
  // The scanner skips 8 plain bytes at a time: a special byte at any position of a word is seen.
  for (std::size_t pos = 0; pos < 20; ++pos) {
    INFO("special byte at " << pos);
    const std::string a(pos, 'a'), tail = "bcdefghijklmnopq";
    CHECK(name(a + R"(\n)" + tail) == a + "\n" + tail);
    CHECK(name(a + R"(\")" + tail) == a + "\"" + tail);
    CHECK(name(a + "\xc3\xa9" + tail) == a + "\xc3\xa9" + tail);
    CHECK(name(a + "\x7f" + tail) == a + "\x7f" + tail);  // DEL is not a JSON control character
    require_refused(named(a + "\x01" + tail), {"control characters must be escaped"});
    require_refused(named(a + "\xff" + tail), {"invalid UTF-8"});
    require_refused("{\"" + a + tail, {"closing a tensor name"});
  }
  // Unterminated strings name where they start.
  require_refused(R"({"abc)",
                  {"not valid JSON", "closing a tensor name that starts at byte 9", "the end of the header"});
  require_refused(R"({"__metadata__": {"k": "v)", {"closing a value of '__metadata__'"});
}

TEST_CASE("safetensors header: numbers", "[serialize][safetensors_header]") {
  auto entry = [](const std::string& shape, const std::string& offsets) {
    return R"({"w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}";
  };
  require_refused(entry("[01]", "[0, 4]"), {"not valid JSON", "expected ',' or ']' in the shape", "found '1'"});
  require_refused(entry("[1.5]", "[0, 4]"), {"dimension that is not a non-negative integer: 1.5"});
  require_refused(entry("[1e2]", "[0, 4]"), {"not a non-negative integer: 1e2"});
  require_refused(entry("[1.]", "[0, 4]"), {"not valid JSON", "a digit after the decimal point"});
  require_refused(entry("[1e]", "[0, 4]"), {"not valid JSON", "a digit of the exponent"});
  require_refused(entry("[-]", "[0, 4]"), {"not valid JSON", "expected a digit"});
  require_refused(entry("[+1]", "[0, 4]"), {"not a non-negative integer", "found '+'"});
  require_refused(entry("[-3]", "[0, 4]"), {"negative dimension -3"});
  require_refused(entry("[9223372036854775808]", "[0, 4]"), {"dimension 9223372036854775808 that overflows int64"});
  require_refused(entry("[18446744073709551616]", "[0, 4]"), {"number overflow", "does not fit in 64 bits"});
  require_refused(entry("[1]", "[0, 18446744073709551616]"), {"number overflow", "a data offset of tensor 'w'"});
  require_refused(entry("[1]", "[0, 4.0]"), {"'data_offsets' of tensor 'w' are not two non-negative integers"});
  require_refused(entry("[1]", "[0, 4, 8]"), {"not two non-negative integers", "expected ']' after two offsets"});
  require_refused(entry("[1]", "[0]"), {"not two non-negative integers", "expected ','"});
  require_refused(entry("[1]", "[-4, 0]"), {"not two non-negative integers"});
  require_refused(entry("[true]", "[0, 4]"), {"not a non-negative integer", "found 't'"});
  require_refused(entry("[[1]]", "[0, 4]"), {"nested deeper"});
  // A number token of megabytes is cut in the message.
  const auto e = [&] {
    try {
      (void)scan(entry("[" + std::string(1'000'000, '7') + "]", "[0, 4]"));
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string();
  }();
  CHECK(e.find("number overflow") != std::string::npos);
  CHECK(e.size() < 400);
}

TEST_CASE("safetensors header: the schema, with the byte and what was expected", "[serialize][safetensors_header]") {
  require_refused("", {"not valid JSON", "at byte 8", "expected '{'", "found the end of the header"});
  require_refused("[]", {"does not start with '{'", "found '['"});
  require_refused(R"({"w": 3})", {"the header entry of tensor 'w' is not a JSON object", "at byte 14", "found '3'"});
  require_refused(R"({"w": )", {"not valid JSON", "found the end of the header"});
  require_refused(R"({"w" 3})", {"not valid JSON", "expected ':' after a name"});
  require_refused(R"({3: {}})", {"not valid JSON", "expected a tensor name or \"__metadata__\" in double quotes"});
  require_refused(R"({"w": {}})", {"tensor 'w' has no 'dtype' field"});
  require_refused(R"({"w": {"dtype": "F32", "shape": [1]}})", {"tensor 'w' has no 'data_offsets' field"});
  require_refused(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", {"tensor 'w' has no 'shape' field"});
  require_refused(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})",
                  {"unknown field 'x'", "expected \"dtype\", \"shape\" or \"data_offsets\"", "found \"x\""});
  require_refused(R"({"w": {"dtype": 4}})", {"the 'dtype' of tensor 'w' is not a string", "found '4'"});
  require_refused(R"({"w": {"shape": "2"}})", {"the 'shape' of tensor 'w' is not an array", "expected '['"});
  require_refused(R"({"w": {"data_offsets": {}}})", {"'data_offsets' of tensor 'w' are not two"});
  require_refused(R"({"__metadata__": [1]})", {"'__metadata__' is not a JSON object", "expected '{'"});
  require_refused(R"({"__metadata__": {"a": 1}})", {"'__metadata__' value of 'a' is not a string", "found '1'"});
  require_refused(R"({"__metadata__": {"a": null}})", {"'__metadata__' value of 'a' is not a string"});
  require_refused(R"({"__metadata__": {"a": "b" "c": "d"}})", {"not valid JSON", "after a value of '__metadata__'"});
  // More dimensions than the limit: refused at the first one too many.
  std::string dims = "[1";
  for (int i = 1; i < 65; ++i) dims += ",1";
  require_refused(R"({"w": {"dtype": "F32", "shape": )" + dims + "]}}", {"more than 64 dimensions"});
  detail::SafetensorsScanOptions two;
  two.max_dims = 2;
  require_error([&] { (void)detail::scan_safetensors_header(R"({"w": {"shape": [1, 2, 3]}})", "h", two); },
                {"more than 2 dimensions", "at byte 31"});
  // file_offset moves every reported byte.
  detail::SafetensorsScanOptions shifted;
  shifted.file_offset = 1000;
  require_error([&] { (void)detail::scan_safetensors_header("{} x", "h", shifted); }, {"at byte 1003"});
}

TEST_CASE("safetensors header: duplicate keys at every level, after unescaping, with both places",
          "[serialize][safetensors_header]") {
  const std::string w = R"("w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]})";
  require_refused("{" + w + "," + w + "}",
                  {"duplicate name 'w' in the header", "the first is at byte 9", "(at byte 69)"});
  require_refused("{" + w + R"(, "\u0077": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})",
                  {"duplicate name 'w'"});
  require_refused(R"({"__metadata__": {}, "__metadata__": {}})",
                  {"duplicate name '__metadata__'", "the first is at byte 9"});
  require_refused(R"({"__metadata__": {"a": "1", "\u0061": "2"}})",
                  {"duplicate key 'a' in '__metadata__'", "at byte 36"});
  require_refused(R"({"w": {"dtype": "F32", "d\u0074ype": "F32"}})",
                  {"duplicate key 'dtype' in the header entry of tensor 'w'", "at byte 31"});
  require_refused(R"({"w": {"shape": [], "shape": []}})", {"duplicate key 'shape'"});
  require_refused(R"({"w": {"data_offsets": [0, 0], "data_offsets": [0, 0]}})", {"duplicate key 'data_offsets'"});
  // A tensor may be named like a metadata key and the other way round; names differing in one byte,
  // by case or by a trailing NUL are distinct.
  const auto h = scan(R"({"k": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
    "K": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
    "k\u0000": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
    "__metadata__": {"k": "1", "K": "2", "w": "3"}})");
  CHECK(h.entries.size() == 3);
  CHECK(h.metadata.size() == 3);
}

TEST_CASE("safetensors header: parse_safetensors keeps unescaped names, and they round trip",
          "[serialize][safetensors_header]") {
  const std::string header = R"({"caf\u00e9.\ud83d\ude00": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
    "__metadata__": {"n\u00e4me": "v\u00e4lue \"q\"", "a": "b"}})";
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  bytes += header + std::string(4, '\0');
  const auto f = nn::parse_safetensors(bytes, "mem");
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.tensors[0].first == "caf\xc3\xa9.\xf0\x9f\x98\x80");
  CHECK(f.metadata == std::map<std::string, std::string>{{"n\xc3\xa4me", "v\xc3\xa4lue \"q\""}, {"a", "b"}});
  const auto back = nn::parse_safetensors(nn::to_safetensors_bytes(f.tensors, f.metadata), "mem");
  CHECK(back.tensors[0].first == f.tensors[0].first);
  CHECK(back.metadata == f.metadata);
}

namespace {

// ---- differential test against nlohmann/json (an independent strict JSON parser) -----------------

using Json = nlohmann::json;

// A JSON number that is a non-negative integer of at most `max` (nlohmann keeps -0 as a signed 0).
bool non_negative(const Json& v, std::uint64_t max) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= max;
  return v.is_number_integer() && v.get<std::int64_t>() == 0;
}

// The safetensors schema on nlohmann's DOM (as fuzz/fuzz_safetensors_header.cpp).
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

// A random JSON string literal (with its quotes) over plain ASCII, every escape, \u escapes (BMP and
// surrogate pairs) and raw UTF-8; `pool` > 0 draws from few distinct texts (so that duplicates occur).
std::string random_string(std::mt19937_64& rng, int pool) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  if (pool > 0) return "\"k" + std::to_string(pick(pool)) + (pick(4) == 0 ? "\\u0041" : "A") + "\"";
  static const char* const pieces[] = {"a",
                                       "Z",
                                       "0",
                                       ".",
                                       "_",
                                       "\\\"",
                                       "\\\\",
                                       "\\/",
                                       "\\b",
                                       "\\f",
                                       "\\n",
                                       "\\r",
                                       "\\t",
                                       "\\u0041",
                                       "\\u00e9",
                                       "\\u20AC",
                                       "\\ud83d\\ude00",
                                       "\xc3\xa9",
                                       "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80",
                                       " ",
                                       "\\u0000"};
  std::string s = "\"";
  const int n = pick(8);
  for (int i = 0; i < n; ++i) s += pieces[pick(static_cast<int>(std::size(pieces)))];
  return s + "\"";
}

std::string random_ws(std::mt19937_64& rng) {
  static const char* const ws[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
  return ws[rng() % std::size(ws)];
}

std::string random_number(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0:
      return "-0";
    case 1:
      return "18446744073709551615";
    case 2:
      return "9223372036854775807";
    case 3:
      return std::to_string(rng() % 100) + "0000000000000000000000";  // overflows 64 bits
    default:
      return std::to_string(rng() % 1000);
  }
}

// A random header close to the schema (valid most of the time before mutation).
std::string random_header(std::mt19937_64& rng, int pool) {
  auto W = [&] { return random_ws(rng); };
  std::string h = W() + "{" + W();
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    if (i) h += "," + W();
    if (rng() % 6 == 0) {
      h += "\"__metadata__\"" + W() + ":" + W() + "{" + W();
      const int m = static_cast<int>(rng() % 4);
      for (int j = 0; j < m; ++j)
        h += (j ? "," + W() : "") + random_string(rng, pool) + W() + ":" + W() + random_string(rng, 0) + W();
      h += "}" + W();
      continue;
    }
    h += random_string(rng, pool) + W() + ":" + W() + "{" + W();
    std::vector<std::string> fields = {"\"dtype\"" + W() + ":" + W() + (rng() % 2 ? "\"F32\"" : random_string(rng, 0)),
                                       "\"shape\"" + W() + ":" + W() + "[" + W(),
                                       "\"data_offsets\"" + W() + ":" + W() + "[" + W() + random_number(rng) + W() +
                                           "," + W() + random_number(rng) + W() + "]"};
    const int dims = static_cast<int>(rng() % 4);
    for (int d = 0; d < dims; ++d) fields[1] += (d ? "," + W() : "") + random_number(rng) + W();
    fields[1] += "]";
    std::shuffle(fields.begin(), fields.end(), rng);
    for (std::size_t f = 0; f < fields.size(); ++f) h += (f ? "," + W() : "") + fields[f] + W();
    h += "}" + W();
  }
  return h + "}" + W();
}

// A byte-level mutation: delete, insert or replace a byte, or duplicate a span.
void mutate(std::mt19937_64& rng, std::string& h) {
  if (h.empty()) return;
  static const char bytes[] = "{}[],:\"\\ -0123456789eE.aunr\x01\x7f\x80\xc3\xed";
  const std::size_t at = rng() % h.size();
  const char b = bytes[rng() % (sizeof bytes - 1)];
  switch (rng() % 4) {
    case 0:
      h.erase(at, 1);
      break;
    case 1:
      h.insert(h.begin() + static_cast<std::ptrdiff_t>(at), b);
      break;
    case 2:
      h[at] = b;
      break;
    default: {
      const std::size_t len = std::min<std::size_t>(rng() % 40, h.size() - at);
      h.insert(at, h.substr(at, len));
    }
  }
}

}  // namespace

TEST_CASE("safetensors header: differential against nlohmann/json on random valid and invalid headers",
          "[serialize][safetensors_header]") {
  std::mt19937_64 rng(20261202);
  int accepted = 0, refused = 0, valid = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = random_header(rng, iter % 3 == 0 ? 3 : 0);
    const int mutations = static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) mutate(rng, text);
    INFO("header: " << text);

    detail::SafetensorsHeader header;
    bool ok = true;
    try {
      header = detail::scan_safetensors_header(text, "d.safetensors");
    } catch (const Error& e) {
      ok = false;
      const std::string_view msg = e.what();
      REQUIRE(msg.find("'d.safetensors'") != std::string_view::npos);
      REQUIRE(msg.find("at byte ") != std::string_view::npos);
    }
    // nlohmann: a DOM and a duplicate detector (a set of keys per open object).
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
    // (nlohmann takes a raw NUL byte for the end of its input; JSON does not.)
    const bool schema_ok = !j.is_discarded() && !duplicate && matches_schema(j) && text.find('\0') == std::string::npos;
    valid += schema_ok;
    if (!ok) {
      ++refused;
      REQUIRE_FALSE(schema_ok);  // every header nlohmann reads as a valid safetensors header is accepted
      continue;
    }
    ++accepted;
    REQUIRE(schema_ok);  // everything accepted is one
    const bool has_meta = j.contains("__metadata__");
    REQUIRE(j.size() == header.entries.size() + (has_meta ? 1 : 0));
    for (const auto& e : header.entries) {
      const std::string name(header.name(e));
      REQUIRE(j.contains(name));
      const Json& v = j[name];
      CHECK(v["dtype"].get<std::string>() == header.dtype(e));
      const std::vector<std::int64_t> dims = header.shape(e);
      REQUIRE(v["shape"].size() == dims.size());
      for (std::size_t i = 0; i < dims.size(); ++i) CHECK(as_u64(v["shape"][i]) == static_cast<std::uint64_t>(dims[i]));
      CHECK(as_u64(v["data_offsets"][0]) == e.begin);
      CHECK(as_u64(v["data_offsets"][1]) == e.end);
    }
    REQUIRE((has_meta ? j["__metadata__"].size() : 0) == header.metadata.size());
    for (const auto& m : header.metadata) {
      const std::string k(header.key(m));
      REQUIRE(j["__metadata__"].contains(k));
      CHECK(j["__metadata__"][k].get<std::string>() == header.value(m));
    }
  }
  // Both sides of the comparison were exercised.
  CHECK(accepted > 1000);
  CHECK(refused > 1000);
  CHECK(valid == accepted);
}

TEST_CASE("safetensors header: the first duplicate in header order is found among many keys",
          "[serialize][safetensors_header]") {
  // Enough keys for the duplicate check to split them into several parts (Note [Linear duplicate
  // check]); a duplicate planted at random places, in odd trials a second one further on: the key
  // named is the first, in header order, that repeats an earlier one, with the earlier one's byte.
  std::mt19937_64 rng(7);
  const auto entry = [](const std::string& name) {
    return "\"" + name + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  };
  for (int trial = 0; trial < 6; ++trial) {
    const std::size_t n = 30000 + rng() % 20000;
    std::vector<std::string> names(n);
    for (std::size_t i = 0; i < n; ++i) names[i] = "t" + std::to_string(i);
    const std::size_t first = rng() % (n - 2);
    const std::size_t later = first + 1 + rng() % (n - first - 1);
    names[later] = names[first];
    if (trial % 2 && later + 1 < n) names[later + 1 + rng() % (n - later - 1)] = names[rng() % later];
    std::string h = "{", meta = R"({"__metadata__":{)";
    std::size_t first_at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i) h += ',', meta += ',';
      if (i == first) first_at = 8 + h.size();
      h += entry(names[i]);
      meta += "\"" + names[i] + "\":\"v\"";
    }
    INFO("n " << n << ", key " << first << " repeated at " << later);
    require_refused(h + "}", {"duplicate name '" + names[later] + "' in the header",
                              "(the first is at byte " + std::to_string(first_at) + ")"});
    require_refused(meta + "}}", {"duplicate key '" + names[later] + "' in '__metadata__'"});
  }
  // Distinct keys that share long prefixes and hash parts: accepted.
  std::string h = "{";
  for (std::size_t i = 0; i < 40000; ++i) h += (i ? "," : "") + entry(std::string(40, 'p') + std::to_string(i));
  CHECK(scan(h + "}").entries.size() == 40000);
}
