#pragma once
// The safetensors header scanner behind parse_safetensors / load_safetensors (nn/serialize.hpp).
// Internal: not installed, not part of the API.
//
// Note [Safetensors header scanner]: the header is read by a hand-written single-pass scanner for
// exactly the safetensors schema,
//
//   {"<name>": {"dtype": "<tag>", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<value>", ...}}
//
// not by a general JSON parser. Each byte is looked at a bounded number of times, so the time is
// linear in the header's length: for a header at the 100 MB cap, a small multiple of the time it takes
// to read the file, for 950k entries as for 4.5M "__metadata__" keys (bench/safetensors_header,
// bench/README.md; bench/results/tuning_notes.md, "The safetensors header scanner"), where the kernel's
// zeroing of the fresh pages the output is written to (keys and
// values, 8 bytes of offsets and 8 of duplicate check per key), the hashing and the duplicate check
// are most of it; the general parser used before (nlohmann's SAX parser building each entry as a
// JSON value) took several times as long for 950k entries. The output arrays are reserved once from a
// count of the header's ':' bytes (Note [Reserved output]).
// Everything that is not the schema is refused at the first byte where it departs from it, with the
// byte offset in the file and what was expected there: JSON syntax (strict RFC 8259: whitespace
// only where JSON allows it, no trailing commas, no leading zeros, only whitespace after the
// closing brace), strings (every escape of JSON, \uXXXX with surrogate pairs decoded to UTF-8;
// unpaired surrogates, unknown escapes, raw control characters and invalid UTF-8 refused), numbers
// (integers that do not fit in 64 bits refused as "number overflow"; fractions and exponents are
// not dimensions or offsets), values of the wrong type, unknown or missing fields, nesting deeper
// than the schema, more than `max_dims` dimensions. Duplicate keys are refused at every level
// (tensor names, "__metadata__", the fields of an entry, metadata keys), after unescaping: JSON
// allows them and a reader that kept one would hide data. Duplicates are found without a hash table
// that outgrows the cache (Note [Linear duplicate check]): each key is hashed once (SipHash-1-3
// under a per-process random key, so an attacker who writes the file cannot aim keys at one bucket)
// and leaves one 8-byte element (the hash's top half and the key's index), written straight into
// one of a few thousand parts chosen by the hash's top bits; at the end of its object each part is
// checked in a small table that stays in the cache. A key is compared with another only when the
// 32-bit tags (the top half of their hashes) of the two are equal. The error names the first key,
// in header order, that repeats an earlier one (and where that earlier one is). Duplicates are
// therefore reported after the syntax of their object: a header with a duplicate name and a syntax
// error further on is refused for the syntax error.
//
// The output keeps names, dtypes, metadata keys and values in two text arenas and the shapes in one
// array: a header of a million entries costs a few vectors, not a few million strings.
//
// What the scanner does not check, the caller does (nn/serialize.cpp): which dtype tags are
// supported, that the shape's element count and byte size fit, that data_offsets match the shape
// and tile the data buffer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xgrad/nn/serialize.hpp"

namespace xgrad::detail {

/// A name, token or JSON excerpt as an error message shows it: at most 64 bytes (a hostile header may
/// hold names of megabytes, the rest is counted), control characters written as \xNN (a NUL byte
/// would end the message for what()'s reader). Used by the scanner and by parse_safetensors.
std::string shown(std::string_view text);

/// One tensor's entry, as written in the header (values unescaped, types checked). Its name, dtype
/// and shape live in the SafetensorsHeader's arenas (one allocation for all entries, not three per
/// entry): read them with SafetensorsHeader::name / dtype / shape.
/// Offsets and sizes are 32-bit: the scanner refuses headers of 4 GiB or more, and neither arena is
/// longer than the header (48 bytes an entry: a header of 950k entries writes 46 MB of them, not 61).
struct SafetensorsHeaderEntry {
  std::uint64_t begin = 0, end = 0;                // data_offsets as written (not checked against each other)
  std::uint64_t at = 0;                            // byte offset in the file of the entry's name (for messages)
  std::uint32_t name_offset = 0, name_size = 0;    // in SafetensorsHeader::text
  std::uint32_t dtype_offset = 0, dtype_size = 0;  // in SafetensorsHeader::text; the tag as written, e.g. "F32"
  std::uint32_t dims_offset = 0, dims_size = 0;    // in SafetensorsHeader::dims
};

/// One "__metadata__" key and its value, in SafetensorsHeader::metadata_text (offsets fit in 32 bits:
/// the scanner refuses headers of 4 GiB or more): the public SafetensorsMetadata's entry, so that
/// parse_safetensors moves the scanned vector into the result. Only offsets: a key ends where its
/// value begins and a value where the next key begins (SafetensorsMetadata::Item), so read them with
/// SafetensorsHeader::key / value, which look at the next entry.
using SafetensorsMetadataEntry = nn::SafetensorsMetadata::Item;

struct SafetensorsHeader {
  std::vector<SafetensorsHeaderEntry> entries;     // in header order
  std::vector<SafetensorsMetadataEntry> metadata;  // in header order; keys distinct
  std::string text;                                // the entries' names and dtypes, back to back
  std::vector<std::int64_t> dims;                  // the entries' shapes, back to back
  std::string metadata_text;                       // the metadata's keys and values, back to back

  std::string_view name(const SafetensorsHeaderEntry& e) const { return {text.data() + e.name_offset, e.name_size}; }
  std::string_view dtype(const SafetensorsHeaderEntry& e) const { return {text.data() + e.dtype_offset, e.dtype_size}; }
  /// Each dimension in [0, 2^63); their product is not checked.
  std::vector<std::int64_t> shape(const SafetensorsHeaderEntry& e) const {
    return {dims.begin() + static_cast<std::ptrdiff_t>(e.dims_offset),
            dims.begin() + static_cast<std::ptrdiff_t>(e.dims_offset + e.dims_size)};
  }
  // `m` must be an element of `metadata` (its value ends where the next element's key begins).
  std::string_view key(const SafetensorsMetadataEntry& m) const {
    return {metadata_text.data() + m.key_offset, m.value_offset - m.key_offset};
  }
  std::string_view value(const SafetensorsMetadataEntry& m) const {
    const std::size_t i = static_cast<std::size_t>(&m - metadata.data());
    const std::size_t end = i + 1 < metadata.size() ? metadata[i + 1].key_offset : metadata_text.size();
    return {metadata_text.data() + m.value_offset, end - m.value_offset};
  }
};

/// Work done by the duplicate-key checks (for the deterministic linearity test).
struct SafetensorsScanCounters {
  std::uint64_t keys = 0;            // keys checked
  std::uint64_t bytes_hashed = 0;    // bytes of keys hashed
  std::uint64_t bytes_compared = 0;  // bytes of keys compared after a hash match
  std::uint64_t probes = 0;          // hash-table slots looked at
  std::uint64_t rehashed = 0;        // keys moved into their part (Note [Linear duplicate check])
};

struct SafetensorsScanOptions {
  std::uint64_t file_offset = 8;  // offset of the header's first byte in the file (for messages)
  std::size_t max_dims = 64;      // more dimensions than this are refused
  // The SipHash key (two words). Zero: a per-process random key. Tests fix it to count work.
  std::uint64_t hash_key[2] = {0, 0};
  SafetensorsScanCounters* counters = nullptr;  // if set, receives the work done
};

/// Scans the header text `header` (the bytes after the 8-byte length). Errors: xgrad::Error
/// "load_safetensors: '<src>' is not a valid safetensors file: <what> (at byte <N>: expected <what
/// was expected>, found <the byte there>)", N counted from the start of the file.
SafetensorsHeader scan_safetensors_header(std::string_view header, const std::string& src,
                                          const SafetensorsScanOptions& options = {});

}  // namespace xgrad::detail
