#include "xgrad/nn/serialize.hpp"

#include <fmt/format.h>  // fmt::join

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/nn/detail/safetensors_header.hpp"

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
  return "?";
}

using detail::shown;  // nn/detail/safetensors_header.hpp

// An entry checked by read_entry: its name and shape stay in the scanner's arenas until the tensors
// are built (no string or vector per entry before then).
struct Entry {
  std::string_view name;
  const std::int64_t* dims;
  std::size_t ndim;
  Dtype dtype;
  std::uint64_t begin, end;
  std::uint64_t at = 0;  // byte offset of the entry's name in the file (for messages)
};

std::string shape_text(const Entry& e) { return shape_str(Shape(e.dims, e.dims + e.ndim)); }

// Checks one tensor's header entry (its JSON types were checked by the scanner) for the
// self-consistency of its fields.
Entry read_entry(const std::string& src, const detail::SafetensorsHeader& header,
                 const detail::SafetensorsHeaderEntry& raw, std::uint64_t buffer_size) {
  Entry e;
  e.name = header.name(raw);
  // Built only for a message (most entries never need it).
  const auto name_shown = [&] { return shown(e.name); };

  const std::string_view tag = header.dtype(raw);
  if (tag == "F32") {
    e.dtype = kFloat32;
  } else if (tag == "F64") {
    e.dtype = kFloat64;
  } else if (tag == "I64") {  // e.g. torch's BatchNorm num_batches_tracked
    e.dtype = kInt64;
  } else if (tag == "I32") {
    e.dtype = kInt32;
  } else if (tag == "U8") {
    e.dtype = kUInt8;
  } else if (tag == "BOOL") {
    e.dtype = kBool;  // bytes other than 0 and 1 are refused below
  } else {
    static const std::set<std::string, std::less<>> known = {
        "BOOL", "U8",  "I8",      "U16",     "I16",     "F16", "BF16",    "U32",     "I32",
        "U64",  "I64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
    const std::string name = name_shown();
    const std::string tag_shown = shown(tag);
    if (known.count(tag))
      bad(src, fmt::format("dtype '{}' of tensor '{}': {} not supported (only F32, F64, I64, I32, U8 and BOOL are)",
                           tag_shown, name, tag_shown));
    bad(src, fmt::format("unknown dtype '{}' of tensor '{}' (only F32, F64, I64, I32, U8 and BOOL are supported)",
                         tag_shown, name));
  }

  e.dims = header.dims.data() + raw.dims_offset;
  e.ndim = raw.dims_size;
  std::int64_t numel = 1;
  for (std::size_t i = 0; i < e.ndim; ++i)
    if (__builtin_mul_overflow(numel, e.dims[i], &numel))
      bad(src, fmt::format("the shape {} of tensor '{}' overflows", shown(shape_text(e)), name_shown()));
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(e.dtype), &nbytes))
    bad(src, fmt::format("the shape {} of tensor '{}' overflows", shown(shape_text(e)), name_shown()));

  e.begin = raw.begin;
  e.end = raw.end;
  if (e.end < e.begin)
    bad(src,
        fmt::format("tensor '{}' has data_offsets [{}, {}] that end before they begin", name_shown(), e.begin, e.end));
  if (e.end - e.begin != nbytes)
    bad(src, fmt::format("tensor '{}' of dtype {} and shape {} needs {} bytes but its data_offsets [{}, {}] span {}",
                         name_shown(), tag, shown(shape_text(e)), nbytes, e.begin, e.end, e.end - e.begin));
  if (e.end > buffer_size)
    bad(src, fmt::format("tensor '{}' has data_offsets [{}, {}] outside the data buffer of {} bytes", name_shown(),
                         e.begin, e.end, buffer_size));
  return e;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

// ---- SafetensorsMetadata ------------------------------------------------------------------------------

SafetensorsMetadata::SafetensorsMetadata(const std::map<std::string, std::string>& map) {
  items_.reserve(map.size());
  for (const auto& [k, v] : map) {
    XGRAD_CHECK(text_.size() + k.size() + v.size() < (std::size_t{1} << 32),
                "SafetensorsMetadata: the keys and values hold more than 4 GiB");
    Item it{};
    it.key_offset = static_cast<std::uint32_t>(text_.size());
    text_ += k;
    it.value_offset = static_cast<std::uint32_t>(text_.size());
    text_ += v;
    items_.push_back(it);
  }
}

SafetensorsMetadata::const_iterator SafetensorsMetadata::find(std::string_view key) const {
  for (std::size_t i = 0; i < items_.size(); ++i)
    if (items_[i].value_offset - items_[i].key_offset == key.size() && item(i).first == key) return {this, i};
  return end();
}

std::string SafetensorsMetadata::at(std::string_view key) const {
  const auto it = find(key);
  if (it != end()) return std::string((*it).second);
  std::string keys;
  for (std::size_t i = 0; i < items_.size() && i < 20; ++i)
    keys += fmt::format("{}'{}'", i ? ", " : "", shown(item(i).first));
  if (items_.size() > 20) keys += fmt::format(", ... ({} keys)", items_.size());
  detail::throw_error(fmt::format("SafetensorsMetadata::at: no key '{}' (the metadata has [{}])", shown(key), keys));
}

std::map<std::string, std::string> SafetensorsMetadata::to_map() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : *this) out.emplace(k, v);
  return out;
}

namespace {
// The pairs sorted by key (keys are distinct): O(n log n), for comparisons only.
std::vector<SafetensorsMetadata::value_type> sorted_pairs(const SafetensorsMetadata& m) {
  std::vector<SafetensorsMetadata::value_type> out(m.begin(), m.end());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

bool operator==(const SafetensorsMetadata& a, const SafetensorsMetadata& b) {
  return a.size() == b.size() && sorted_pairs(a) == sorted_pairs(b);
}

bool operator==(const SafetensorsMetadata& a, const std::map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  const auto pairs = sorted_pairs(a);
  auto it = b.begin();
  for (const auto& [k, v] : pairs) {
    if (k != it->first || v != it->second) return false;
    ++it;
  }
  return true;
}

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
  // Note [Safetensors header scanner] (nn/detail/safetensors_header.hpp): linear in hlen.
  detail::SafetensorsScanOptions scan;
  scan.max_dims = kMaxDims;
  auto header = detail::scan_safetensors_header(std::string_view(hbegin, hlen), src, scan);
  // Each entry is checked from the scanner's arrays; only its dtype is kept (one byte an entry, not a
  // second copy of the entries: a header of 950k entries would write 50 MB more).
  const auto& raws = header.entries;
  std::vector<Dtype> dtypes;
  dtypes.reserve(raws.size());
  for (const auto& raw : raws) {
    try {
      dtypes.push_back(read_entry(src, header, raw, buffer_size).dtype);
    } catch (const Error& e) {  // the message names the entry; add where it is
      detail::throw_error(fmt::format("{} (the entry at byte {})", e.what(), raw.at));
    }
  }
  // The metadata as scanned: in header order, in one buffer (no sort, no string per key).
  out.metadata.text_ = std::move(header.metadata_text);
  out.metadata.items_ = std::move(header.metadata);

  // The tensors must tile the buffer exactly: sorted by offset, each begins where the previous
  // ended, and the last ends at the end of the file. A gap hides bytes; an overlap aliases data.
  // Ties (empty tensors at one offset) are broken by name, so the order does not depend on the
  // order of the header's keys.
  const auto before = [&](const detail::SafetensorsHeaderEntry& a, const detail::SafetensorsHeaderEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return header.name(a) < header.name(b);
  };
  // Entry k in buffer order is raws[order[k]], or raws[k] when the header is in buffer order (files
  // written by save_safetensors and most others: then no sort and no index array).
  std::vector<std::uint32_t> order;
  for (std::size_t k = 1; k < raws.size(); ++k)
    if (before(raws[k], raws[k - 1])) {
      order.resize(raws.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
      std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return before(raws[a], raws[b]); });
      break;
    }
  const auto index = [&](std::size_t k) -> std::size_t { return order.empty() ? k : order[k]; };
  std::uint64_t pos = 0;
  const detail::SafetensorsHeaderEntry* prev = nullptr;
  for (std::size_t k = 0; k < raws.size(); ++k) {
    const auto& e = raws[index(k)];
    if (e.begin < pos)
      bad(src, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap (the entries at bytes {} and {})",
                           shown(header.name(*prev)), prev->begin, prev->end, shown(header.name(e)), e.begin, e.end,
                           prev->at, e.at));
    if (e.begin > pos)
      bad(src, fmt::format("gap in the data buffer: bytes [{}, {}) before tensor '{}' belong to no tensor (the entry "
                           "at byte {})",
                           pos, e.begin, shown(header.name(e)), e.at));
    pos = e.end;
    prev = &e;
  }
  if (pos != buffer_size)
    bad(src,
        fmt::format("the tensors cover {} bytes of the data buffer but it has {} (trailing bytes)", pos, buffer_size));

  const std::uint8_t* buffer = data + 8 + hlen;
  out.tensors.reserve(raws.size());
  for (std::size_t k = 0; k < raws.size(); ++k) {
    const std::size_t i = index(k);
    const auto& e = raws[i];
    const Dtype dtype = dtypes[i];
    if (dtype == kBool)
      for (std::uint64_t b = e.begin; b < e.end; ++b)
        if (buffer[b] > 1)
          bad(src, fmt::format("tensor '{}' of dtype BOOL holds the byte {} (only 0 and 1 are booleans)",
                               shown(header.name(e)), buffer[b]));
    const std::int64_t* dims = header.dims.data() + e.dims_offset;
    Tensor t = Tensor::empty(Shape(dims, dims + e.dims_size), dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), buffer + e.begin, e.end - e.begin);
    out.tensors.emplace_back(std::string(header.name(e)), std::move(t));
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

void put_sparse_csr(NamedTensors& tensors, std::map<std::string, std::string>& metadata, const std::string& name,
                    const SparseCsr& a) {
  XGRAD_CHECK(a.defined(), "put_sparse_csr: argument 'a' (named '{}') is an undefined sparse matrix", name);
  XGRAD_CHECK(!name.empty(), "put_sparse_csr: argument 'name' is empty");
  tensors.emplace_back(name + ".crow_indices", a.crow_indices());
  tensors.emplace_back(name + ".col_indices", a.col_indices());
  tensors.emplace_back(name + ".values", a.values().detach());
  metadata["sparse_csr:" + name] = fmt::format("{},{}", a.rows(), a.cols());
}

SparseCsr get_sparse_csr(const SafetensorsFile& file, const std::string& name) {
  const std::string key = "sparse_csr:" + name;
  XGRAD_CHECK(file.metadata.contains(key),
              "get_sparse_csr: no sparse matrix '{}' in the file (its metadata has no entry '{}')", name, key);
  const std::string size = file.metadata.at(key);
  // "<rows>,<cols>", two non-negative decimal integers
  std::int64_t rows = -1, cols = -1;
  const char* b = size.data();
  const char* e = b + size.size();
  auto [p1, ec1] = std::from_chars(b, e, rows);
  bool ok = ec1 == std::errc() && p1 != e && *p1 == ',';
  if (ok) {
    auto [p2, ec2] = std::from_chars(p1 + 1, e, cols);
    ok = ec2 == std::errc() && p2 == e;
  }
  XGRAD_CHECK(ok && rows >= 0 && cols >= 0 && rows < std::numeric_limits<std::int64_t>::max(),
              "get_sparse_csr: the metadata entry '{}' is '{}'; expected '<rows>,<cols>' (two non-negative integers)",
              key, size);
  for (const char* part : {".crow_indices", ".col_indices", ".values"})
    XGRAD_CHECK(file.contains(name + part), "get_sparse_csr: sparse matrix '{}' has no tensor '{}{}' in the file", name,
                name, part);
  const Tensor& crow = file.at(name + ".crow_indices");
  XGRAD_CHECK(crow.dim() == 1 && crow.numel() == rows + 1,
              "get_sparse_csr: tensor '{}.crow_indices' has shape {}; the metadata says {} rows, so ({},)", name,
              shape_str(crow.shape()), rows, rows + 1);
  return sparse_csr_tensor(crow, file.at(name + ".col_indices"), file.at(name + ".values"), {rows, cols});
}

}  // namespace xgrad::nn
