#include "xgrad/nn/serialize.hpp"

#include <fmt/format.h>  // fmt::join

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"

namespace xgrad::nn {

// The buffer is copied byte for byte into tensors and the header length is read as little-endian:
// a big-endian host would need byte swapping, which is not implemented.
static_assert(std::endian::native == std::endian::little, "xgrad safetensors I/O assumes a little-endian host");

namespace {

// Not ordered_json: its object is a vector with linear lookups, so a hostile header with many keys
// would take quadratic time. The file order of the tensors is their order in the buffer instead.
using Json = nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB; so do we (a lying length cannot make
// us allocate more than this, and a real header of this size would be absurd).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// As for .npy files (NumPy 2's limit): a hostile shape cannot make a tensor of a million dimensions.
constexpr std::size_t kMaxDims = 64;

[[noreturn]] void bad(const std::string& src, const std::string& why) {
  detail::throw_error(fmt::format("load_safetensors: '{}' is not a valid safetensors file: {}", src, why));
}

// The safetensors dtype strings of xgrad's dtypes, both ways.
const char* dtype_tag(Dtype d) {
  switch (d) {
    case Dtype::float32:
      return "F32";
    case Dtype::float64:
      return "F64";
    case Dtype::int64:
      return "I64";
    case Dtype::int32:
      return "I32";
    case Dtype::uint8:
      return "U8";
    case Dtype::bool_:
      return "BOOL";
  }
  return "F64";
}
bool dtype_from_tag(const std::string& tag, Dtype& d) {
  for (Dtype c : {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool})
    if (tag == dtype_tag(c)) {
      d = c;
      return true;
    }
  return false;
}

// At most 64 bytes of a name or a JSON excerpt in an error message (a hostile header may hold
// names or arrays of megabytes).
std::string shown(const std::string& text) {
  constexpr std::size_t kMax = 64;
  if (text.size() <= kMax) return text;
  return text.substr(0, kMax) + fmt::format("...({} bytes)", text.size());
}

struct Entry {
  std::string name;
  Dtype dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Reads one tensor's header entry, checking the types and the self-consistency of its fields.
Entry read_entry(const std::string& src, const std::string& full_name, const Json& info, std::uint64_t buffer_size) {
  const std::string name = shown(full_name);
  if (!info.is_object()) bad(src, fmt::format("the header entry of tensor '{}' is not a JSON object", name));
  for (auto it = info.begin(); it != info.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      bad(src, fmt::format("the header entry of tensor '{}' has an unknown field '{}'", name, shown(it.key())));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!info.contains(field)) bad(src, fmt::format("tensor '{}' has no '{}' field", name, field));
  Entry e;
  e.name = full_name;

  const Json& dt = info["dtype"];
  if (!dt.is_string()) bad(src, fmt::format("the 'dtype' of tensor '{}' is not a string", name));
  const auto& tag = dt.get_ref<const std::string&>();
  if (!dtype_from_tag(tag, e.dtype)) {
    static const std::set<std::string> known = {"BOOL",    "U8",      "I8",  "U16",     "I16",     "F16",
                                                "BF16",    "U32",     "I32", "U64",     "I64",     "F8_E4M3",
                                                "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
    const std::string shown = tag.size() > 32 ? tag.substr(0, 32) + "..." : tag;
    if (known.count(tag))
      bad(src, fmt::format("dtype '{}' of tensor '{}': {} not supported (only F32, F64, I64, I32, U8 and BOOL are)",
                           shown, name, shown));
    bad(src, fmt::format("unknown dtype '{}' of tensor '{}' (only F32, F64, I64, I32, U8 and BOOL are supported)",
                         shown, name));
  }

  const Json& sh = info["shape"];
  if (!sh.is_array()) bad(src, fmt::format("the 'shape' of tensor '{}' is not an array", name));
  std::int64_t numel = 1;
  if (sh.size() > kMaxDims)
    bad(src, fmt::format("the shape of tensor '{}' has {} dimensions, more than {}", name, sh.size(), kMaxDims));
  for (const auto& d : sh) {
    if (d.is_number_integer() && !d.is_number_unsigned())
      bad(src, fmt::format("the shape of tensor '{}' has a negative dimension {}", name, d.get<std::int64_t>()));
    if (!d.is_number_unsigned())
      bad(src, fmt::format("the shape of tensor '{}' has a dimension that is not a non-negative integer: {}", name,
                           shown(d.dump())));
    const auto v = d.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<std::int64_t>(v), &numel))
      bad(src, fmt::format("the shape {} of tensor '{}' overflows", shown(sh.dump()), name));
    e.shape.push_back(static_cast<std::int64_t>(v));
  }
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(e.dtype), &nbytes))
    bad(src, fmt::format("the shape {} of tensor '{}' overflows", shown(sh.dump()), name));

  const Json& off = info["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad(src, fmt::format("the 'data_offsets' of tensor '{}' are not two non-negative integers: {}", name,
                         shown(off.dump())));
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.end < e.begin)
    bad(src, fmt::format("tensor '{}' has data_offsets [{}, {}] that end before they begin", name, e.begin, e.end));
  if (e.end - e.begin != nbytes)
    bad(src, fmt::format("tensor '{}' of dtype {} and shape {} needs {} bytes but its data_offsets [{}, {}] span {}",
                         name, tag, shown(shape_str(e.shape)), nbytes, e.begin, e.end, e.end - e.begin));
  if (e.end > buffer_size)
    bad(src, fmt::format("tensor '{}' has data_offsets [{}, {}] outside the data buffer of {} bytes", name, e.begin,
                         e.end, buffer_size));
  return e;
}

// Note [Linear header parsing]: the header is streamed through nlohmann's SAX parser, and this
// handler validates it as it goes, in time linear in its length (up to a log factor for the name
// lookups). The top-level object is never built: each tensor's entry (a small object) is built,
// checked by read_entry and dropped as soon as it closes. Duplicate keys are refused at every level
// (a tensor name, "__metadata__", a field of an entry, a metadata key) when the second one is read;
// JSON allows them and a DOM parser would silently keep one, hiding data. Nesting deeper than the
// format (top object > entry object > shape array) is refused at the opening bracket.
// (nlohmann's DOM parser with a callback, used before, rescans the parent object each time a child
// object closes: quadratic in the number of entries.)
class HeaderHandler final : public nlohmann::json_sax<Json> {
 public:
  HeaderHandler(const std::string& src, std::uint64_t buffer_size, std::vector<Entry>& entries,
                std::map<std::string, std::string>& metadata)
      : src_(src), buffer_size_(buffer_size), entries_(entries), metadata_(metadata) {}

  bool null() override { return scalar(Json(nullptr)); }
  bool boolean(bool v) override { return scalar(Json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(Json(v)); }
  bool number_float(number_float_t v, const string_t& /*text*/) override { return scalar(Json(v)); }
  bool string(string_t& v) override { return scalar(Json(std::move(v))); }
  bool binary(binary_t& v) override { return scalar(Json::binary(std::move(v))); }  // never in JSON text
  bool start_object(std::size_t /*elements*/) override { return open(Json::object()); }
  bool start_array(std::size_t /*elements*/) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (depth_ == 1) {  // a tensor name or "__metadata__"
      if (!names_.insert(k).second) bad(src_, fmt::format("duplicate name '{}' in the header", shown(k)));
      name_ = k;
      return true;
    }
    auto& object = stack_.back()->get_ref<Json::object_t&>();
    auto [it, inserted] = object.emplace(std::move(k), Json());
    if (!inserted)
      bad(src_, name_ == kMetadataKey ? fmt::format("duplicate key '{}' in '__metadata__'", shown(it->first))
                                      : fmt::format("duplicate key '{}' in the header entry of tensor '{}'",
                                                    shown(it->first), shown(name_)));
    slot_ = &it->second;
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    // The message quotes the last token, which may be megabytes long: keep its start.
    std::string what = ex.what();
    if (what.size() > 300) what = what.substr(0, 300) + "...";
    bad(src_, fmt::format("the header is not valid JSON: {}", what));
  }

 private:
  // Puts a value where the parser is: the current top-level value, the next element of the
  // current array, or the slot of the key just read.
  Json* place(Json v) {
    if (stack_.empty()) {
      value_ = std::move(v);
      return &value_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool scalar(Json v) {
    if (depth_ == 1)
      finish(std::move(v));
    else
      place(std::move(v));
    return true;
  }
  bool open(Json container) {
    if (depth_ == 0) {  // the header itself (it starts with '{', checked before parsing)
      depth_ = 1;
      return true;
    }
    if (depth_ > 2) bad(src_, "the JSON header is nested deeper than the format allows");
    ++depth_;
    stack_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    --depth_;
    if (depth_ == 0) return true;  // the end of the header
    stack_.pop_back();
    if (stack_.empty()) finish(std::move(value_));
    return true;
  }
  // A top-level value is complete: validate it and keep what it describes.
  void finish(Json v) {
    if (name_ != kMetadataKey) {
      entries_.push_back(read_entry(src_, name_, v, buffer_size_));
      return;
    }
    if (!v.is_object()) bad(src_, "'__metadata__' is not a JSON object");
    // Both maps are sorted by key: append at the end, moving the values.
    for (auto& [key, value] : v.get_ref<Json::object_t&>()) {
      if (!value.is_string())
        bad(src_, fmt::format("'__metadata__' value of '{}' is not a string: {}", shown(key), shown(value.dump())));
      metadata_.emplace_hint(metadata_.end(), key, std::move(value.get_ref<std::string&>()));
    }
  }

  const std::string& src_;
  const std::uint64_t buffer_size_;
  std::vector<Entry>& entries_;
  std::map<std::string, std::string>& metadata_;
  std::set<std::string> names_;  // an ordered set: no hash collisions for a hostile header to exploit
  std::string name_;             // the current top-level key
  int depth_ = 0;                // containers open, the header included
  std::vector<Json*> stack_;     // the containers open inside the current top-level value
  Json value_;                   // the current top-level value while it is built
  Json* slot_ = nullptr;         // where the value of the key just read goes
};

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

// ---- SafetensorsFile ----------------------------------------------------------------------------------

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& p) { return p.first == name; });
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::vector<std::string> names;
  for (const auto& [n, t] : tensors) names.push_back(n);
  detail::throw_error(
      fmt::format("SafetensorsFile::at: no tensor named '{}' (the file has [{}])", name, join_keys(names)));
}

// ---- bytes ---------------------------------------------------------------------------------------------

std::string to_safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  std::set<std::string> names;
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    XGRAD_CHECK(!name.empty(), "save_safetensors: argument 'tensors' has a tensor with an empty name");
    XGRAD_CHECK(name != kMetadataKey, "save_safetensors: a tensor may not be named '{}' (reserved)", kMetadataKey);
    XGRAD_CHECK(t.defined(), "save_safetensors: tensor '{}' is undefined", name);
    XGRAD_CHECK(names.insert(name).second, "save_safetensors: duplicate tensor name '{}'", name);
    const std::uint64_t n = t.nbytes();
    header[name] = {{"dtype", dtype_tag(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  // Invalid UTF-8 in a name or metadata makes dump() throw; report it as our error.
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    detail::throw_error(fmt::format("save_safetensors: a name or metadata string is not valid UTF-8 ({})", e.what()));
  }
  // Pad with spaces so that the buffer (at 8 + N) is 8-byte aligned, like the reference writer.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, t] : tensors) out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

SafetensorsFile parse_safetensors(const std::uint8_t* data, std::size_t size, const std::string& src) {
  XGRAD_CHECK(data != nullptr || size == 0, "parse_safetensors: argument 'data' is null but size is {}", size);
  if (size < 8) bad(src, fmt::format("file is shorter than 8 bytes ({} bytes)", size));
  std::uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<std::uint64_t>(data[i]) << (8 * i);
  if (hlen > kMaxHeaderBytes)
    bad(src, fmt::format("header length {} is absurd (the limit is {} bytes)", hlen, kMaxHeaderBytes));
  if (hlen > size - 8)
    bad(src, fmt::format("header length {} runs past the end of the file ({} bytes after the length)", hlen, size - 8));
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  if (hlen == 0 || hbegin[0] != '{') bad(src, "the header does not start with '{'");

  const std::uint64_t buffer_size = size - 8 - hlen;
  SafetensorsFile out;
  std::vector<Entry> entries;
  HeaderHandler handler(src, buffer_size, entries, out.metadata);
  try {
    (void)Json::sax_parse(hbegin, hbegin + hlen, &handler, nlohmann::json::input_format_t::json, /*strict=*/true,
                          /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    bad(src, fmt::format("the header is not valid JSON: {}", shown(e.what())));
  }

  // The tensors must tile the buffer exactly: sorted by offset, each begins where the previous
  // ended, and the last ends at the end of the file. A gap hides bytes; an overlap aliases data.
  // Ties (empty tensors at one offset) are broken by name, so the order does not depend on the
  // order of the header's keys.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      bad(src, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", shown(prev->name), prev->begin, prev->end,
                           shown(e.name), e.begin, e.end));
    if (e.begin > pos)
      bad(src, fmt::format("gap in the data buffer: bytes [{}, {}) before tensor '{}' belong to no tensor", pos,
                           e.begin, shown(e.name)));
    pos = e.end;
    prev = &e;
  }
  if (pos != buffer_size)
    bad(src,
        fmt::format("the tensors cover {} bytes of the data buffer but it has {} (trailing bytes)", pos, buffer_size));

  const std::uint8_t* buffer = data + 8 + hlen;
  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.dtype == kBool) {  // a byte other than 0 or 1 would not be a valid C++ bool: read as != 0
      bool* o = t.data<bool>();
      for (std::uint64_t i = 0; i < e.end - e.begin; ++i) o[i] = buffer[e.begin + i] != 0;
    } else if (e.end > e.begin) {
      std::memcpy(t.raw_data(), buffer + e.begin, e.end - e.begin);
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& src) {
  return parse_safetensors(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), src);
}

// ---- files ---------------------------------------------------------------------------------------------

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, to_safetensors_bytes(tensors, metadata), "save_safetensors");
}

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_regular_file(path, "load_safetensors"), path);
}

void save_state(const std::string& path, const NamedTensors& state,
                const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, state, metadata);
}

NamedTensors load_state(const std::string& path) { return load_safetensors(path).tensors; }

// ---- modules -------------------------------------------------------------------------------------------

namespace {
void collect_state(const Module& m, const std::string& prefix, NamedTensors& out) {
  for (const auto& [n, t] : m.named_parameters(false)) out.emplace_back(prefix + n, t);
  for (const auto& [n, t] : m.named_buffers(false))
    if (t.defined()) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : m.named_children()) collect_state(*c, prefix + n + ".", out);
}
}  // namespace

NamedTensors state_dict(const Module& module) {
  NamedTensors out;
  collect_state(module, "", out);
  return out;
}

LoadResult load_state_dict(Module& module, const NamedTensors& state, bool strict) {
  const NamedTensors own = state_dict(module);
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) {
    XGRAD_CHECK(t.defined(), "load_state_dict: argument 'state' has an undefined tensor '{}'", n);
    XGRAD_CHECK(given.emplace(n, &t).second, "load_state_dict: argument 'state' has the name '{}' twice", n);
  }
  LoadResult result;
  std::set<std::string> own_names;
  std::vector<std::string> mismatched;
  std::vector<std::pair<Tensor, const Tensor*>> plan;
  for (const auto& [n, t] : own) {
    own_names.insert(n);
    auto it = given.find(n);
    if (it == given.end()) {
      result.missing_keys.push_back(n);
      continue;
    }
    const Tensor& src = *it->second;
    if (src.dtype() != t.dtype() || src.shape() != t.shape())
      mismatched.push_back(fmt::format("'{}': module has {} {}, state has {} {}", n, dtype_name(t.dtype()),
                                       shape_str(t.shape()), dtype_name(src.dtype()), shape_str(src.shape())));
    else
      plan.emplace_back(t, &src);
  }
  for (const auto& [n, t] : state)
    if (!own_names.count(n)) result.unexpected_keys.push_back(n);
  std::sort(result.missing_keys.begin(), result.missing_keys.end());
  std::sort(result.unexpected_keys.begin(), result.unexpected_keys.end());

  std::vector<std::string> problems;
  if (strict && !result.missing_keys.empty())
    problems.push_back(fmt::format("missing keys [{}]", join_keys(result.missing_keys)));
  if (strict && !result.unexpected_keys.empty())
    problems.push_back(fmt::format("unexpected keys [{}]", join_keys(result.unexpected_keys)));
  if (!mismatched.empty())
    problems.push_back(fmt::format("dtype or shape mismatch for {}", fmt::join(mismatched, "; ")));
  XGRAD_CHECK(problems.empty(), "load_state_dict: the state does not match the {} module ({}); nothing was loaded",
              module.type_name(), fmt::join(problems, "; "));

  // Everything is validated; now write. In place (same storage), so optimizers holding the
  // parameter handles see the new values; no-grad so a leaf that requires grad may be written.
  NoGradGuard no_grad;
  for (auto& [dst, src] : plan) dst.copy_(*src);
  return result;
}

void save(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, state_dict(module), metadata);
}

LoadResult load(Module& module, const std::string& path, bool strict) {
  const SafetensorsFile file = load_safetensors(path);
  try {
    return load_state_dict(module, file.tensors, strict);
  } catch (const Error& e) {
    detail::throw_error(fmt::format("nn::load: '{}': {}", path, e.what()));
  }
}

}  // namespace xgrad::nn
