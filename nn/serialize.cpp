#include "xgrad/nn/serialize.hpp"

#include <fcntl.h>
#include <fmt/format.h>  // fmt::join
#include <sys/stat.h>
#include <unistd.h>

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
#include "xgrad/core/npy.hpp"

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

[[noreturn]] void bad(const std::string& src, const std::string& why) {
  detail::throw_error(fmt::format("load_safetensors: '{}' is not a valid safetensors file: {}", src, why));
}

const char* dtype_tag(Dtype d) { return d == kFloat32 ? "F32" : "F64"; }

// Thrown by the JSON parser callback to abort parsing; turned into an xgrad::Error by the caller.
struct HeaderReject {
  std::string why;
};

// Parses the header with two checks the plain parser cannot make: a key repeated in the top-level
// object (JSON allows it; nlohmann would silently keep one, hiding a second tensor of that name)
// and nesting deeper than the format has (top object > tensor object > shape array).
Json parse_header(const char* first, const char* last) {
  std::set<std::string> seen;
  Json::parser_callback_t cb = [&seen](int depth, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth > 2)
      throw HeaderReject{"the JSON header is nested deeper than the format allows"};
    if (event == E::key && depth == 1) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) throw HeaderReject{fmt::format("duplicate name '{}' in the header", key)};
    }
    return true;
  };
  return Json::parse(first, last, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
}

struct Entry {
  std::string name;
  Dtype dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Reads one tensor's header entry, checking the types and the self-consistency of its fields.
Entry read_entry(const std::string& src, const std::string& name, const Json& info, std::uint64_t buffer_size) {
  if (!info.is_object()) bad(src, fmt::format("the header entry of tensor '{}' is not a JSON object", name));
  for (auto it = info.begin(); it != info.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      bad(src, fmt::format("the header entry of tensor '{}' has an unknown field '{}'", name, it.key()));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!info.contains(field)) bad(src, fmt::format("tensor '{}' has no '{}' field", name, field));
  Entry e;
  e.name = name;

  const Json& dt = info["dtype"];
  if (!dt.is_string()) bad(src, fmt::format("the 'dtype' of tensor '{}' is not a string", name));
  const auto& tag = dt.get_ref<const std::string&>();
  if (tag == "F32") {
    e.dtype = kFloat32;
  } else if (tag == "F64") {
    e.dtype = kFloat64;
  } else {
    static const std::set<std::string> known = {"BOOL",    "U8",      "I8",  "U16",     "I16",     "F16",
                                                "BF16",    "U32",     "I32", "U64",     "I64",     "F8_E4M3",
                                                "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
    const std::string shown = tag.size() > 32 ? tag.substr(0, 32) + "..." : tag;
    if (known.count(tag))
      bad(src, fmt::format("dtype '{}' of tensor '{}': {} not supported (only F32 and F64 are)", shown, name, shown));
    bad(src, fmt::format("unknown dtype '{}' of tensor '{}' (only F32 and F64 are supported)", shown, name));
  }

  const Json& sh = info["shape"];
  if (!sh.is_array()) bad(src, fmt::format("the 'shape' of tensor '{}' is not an array", name));
  std::int64_t numel = 1;
  for (const auto& d : sh) {
    if (d.is_number_integer() && !d.is_number_unsigned())
      bad(src, fmt::format("the shape of tensor '{}' has a negative dimension {}", name, d.get<std::int64_t>()));
    if (!d.is_number_unsigned())
      bad(src, fmt::format("the shape of tensor '{}' has a dimension that is not a non-negative integer: {}", name,
                           d.dump()));
    const auto v = d.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<std::int64_t>(v), &numel))
      bad(src, fmt::format("the shape {} of tensor '{}' overflows", sh.dump(), name));
    e.shape.push_back(static_cast<std::int64_t>(v));
  }
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(e.dtype), &nbytes))
    bad(src, fmt::format("the shape {} of tensor '{}' overflows", sh.dump(), name));

  const Json& off = info["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad(src, fmt::format("the 'data_offsets' of tensor '{}' are not two non-negative integers: {}", name, off.dump()));
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.end < e.begin)
    bad(src, fmt::format("tensor '{}' has data_offsets [{}, {}] that end before they begin", name, e.begin, e.end));
  if (e.end - e.begin != nbytes)
    bad(src, fmt::format("tensor '{}' of dtype {} and shape {} needs {} bytes but its data_offsets [{}, {}] span {}",
                         name, tag, shape_str(e.shape), nbytes, e.begin, e.end, e.end - e.begin));
  if (e.end > buffer_size)
    bad(src, fmt::format("tensor '{}' has data_offsets [{}, {}] outside the data buffer of {} bytes", name, e.begin,
                         e.end, buffer_size));
  return e;
}

// ---- atomic write (Note [Checkpoint safety]) ------------------------------------------------------

// Atomic write (core/npy.hpp): temporary file, fsync, rename, fsync of the folder.
void write_atomic(const char* fn, const std::string& path, const std::string& bytes) {
  write_file_atomic(path, bytes, fn);
}

std::string read_file(const char* fn, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  XGRAD_CHECK(fd >= 0, "{}: cannot open '{}': {}", fn, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::throw_error(fmt::format("{}: '{}' is not a regular file", fn, path));
  }
  std::string out;
  char chunk[1 << 16];
  for (;;) {
    const auto r = ::read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      detail::throw_error(fmt::format("{}: reading '{}' failed: {}", fn, path, std::strerror(err)));
    }
    if (r == 0) break;
    out.append(chunk, static_cast<std::size_t>(r));
  }
  ::close(fd);
  return out;
}

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

  Json header;
  try {
    header = parse_header(hbegin, hbegin + hlen);
  } catch (const HeaderReject& r) {
    bad(src, r.why);
  } catch (const Json::exception& e) {
    bad(src, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) bad(src, "the header is not a JSON object");

  const std::uint64_t buffer_size = size - 8 - hlen;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) bad(src, "'__metadata__' is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          bad(src, fmt::format("'__metadata__' value of '{}' is not a string: {}", m.key(), m.value().dump()));
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    entries.push_back(read_entry(src, it.key(), it.value(), buffer_size));
  }

  // The tensors must tile the buffer exactly: sorted by offset, each begins where the previous
  // ended, and the last ends at the end of the file. A gap hides bytes; an overlap aliases data.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      bad(src, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", prev->name, prev->begin, prev->end,
                           e.name, e.begin, e.end));
    if (e.begin > pos)
      bad(src, fmt::format("gap in the data buffer: bytes [{}, {}) before tensor '{}' belong to no tensor", pos,
                           e.begin, e.name));
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
    if (e.end > e.begin) std::memcpy(t.raw_data(), buffer + e.begin, e.end - e.begin);
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
  write_atomic("save_safetensors", path, to_safetensors_bytes(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_file("load_safetensors", path), path);
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
