#pragma once
// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), readable by
// the reference implementation and by a few lines of NumPy:
//
//   bytes 0..7      N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N    UTF-8 JSON object {"name": {"dtype": "F32", "shape": [d0, ...],
//                   "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value", ...}},
//                   padded with trailing spaces so that the buffer starts 8-byte aligned
//   bytes 8+N..     the buffer: every tensor's row-major little-endian data; data_offsets are
//                   relative to the buffer's start and the tensors cover it exactly (no gaps, no
//                   overlaps), as the reference implementation requires.
//
// Note [Checkpoint safety]: a checkpoint comes from outside the program, so the loaders validate
// every field (header length, JSON, dtypes, shapes, offsets, coverage of the buffer, duplicate
// names) before copying a byte and throw xgrad::Error naming the file and the reason; they never
// read out of bounds. Loading into a module checks every name, dtype and shape against the module
// before writing any parameter, so a failed load leaves the module untouched. Saves are atomic (a
// temporary file in the same folder, fsync, rename, fsync of the folder): a failed or interrupted
// save leaves the previous checkpoint intact and no temporary file behind.
//
//   nn::save(*model, "model.safetensors");            // parameters and buffers by dotted name
//   auto r = nn::load(*model, "model.safetensors");   // strict: names must match exactly
//
// Supported dtypes: F32, F64, I64, I32, U8 and BOOL (xgrad's float32, float64, int64, int32, uint8 and
// bool; a BOOL byte other than 0 or 1 is refused). The host must be little-endian (checked at compile
// time).
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/ops/sparse.hpp"

namespace xgrad::nn {

struct SafetensorsFile;
SafetensorsFile parse_safetensors(const std::uint8_t* data, std::size_t size, const std::string& source_name);

/// Tensors by name, in order (what a checkpoint holds, like PyTorch's state_dict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// The "__metadata__" of a safetensors file: string keys (distinct) to string values, in the order of
/// the header (files written by save_safetensors: sorted by key). Read-only and flat: every key and
/// value lives in one buffer, so a hostile header of millions of keys is read in time linear in its
/// length (no tree of millions of nodes, no sort). A lookup (at, find, contains, count) compares the
/// key with each entry in turn, as SafetensorsFile::at does for tensor names: for many lookups into
/// a large metadata, convert it once with to_map(). Converts implicitly to std::map, so it can be
/// passed back to save_safetensors; compares equal to a std::map with the same pairs.
class SafetensorsMetadata {
 public:
  /// A key and its value (views into the metadata: valid while it lives).
  using value_type = std::pair<std::string_view, std::string_view>;
  /// Where an entry's key and value are in the buffer (the layout the header scanner produces, so
  /// that a parsed file hands its entries over without a copy). The buffer holds each key, then its
  /// value, entry after entry with nothing between: a key ends where its value begins, and a value
  /// where the next key begins (the last where the buffer ends). 8 bytes an entry, not 16: a header
  /// of 4.5M keys writes 36 MB less.
  struct Item {
    std::uint32_t key_offset = 0, value_offset = 0;
  };

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = SafetensorsMetadata::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;
    const_iterator() = default;
    value_type operator*() const { return owner_->item(i_); }
    value_type operator[](difference_type k) const { return owner_->item(i_ + static_cast<std::size_t>(k)); }
    const_iterator& operator++() { return ++i_, *this; }
    const_iterator operator++(int) { return const_iterator(owner_, i_++); }
    const_iterator& operator--() { return --i_, *this; }
    const_iterator operator--(int) { return const_iterator(owner_, i_--); }
    const_iterator& operator+=(difference_type k) { return i_ += static_cast<std::size_t>(k), *this; }
    const_iterator& operator-=(difference_type k) { return i_ -= static_cast<std::size_t>(k), *this; }
    friend const_iterator operator+(const_iterator a, difference_type k) { return a += k; }
    friend const_iterator operator+(difference_type k, const_iterator a) { return a += k; }
    friend const_iterator operator-(const_iterator a, difference_type k) { return a -= k; }
    friend difference_type operator-(const_iterator a, const_iterator b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) { return a.i_ <=> b.i_; }

   private:
    friend class SafetensorsMetadata;
    const_iterator(const SafetensorsMetadata* owner, std::size_t i) : owner_(owner), i_(i) {}
    const SafetensorsMetadata* owner_ = nullptr;
    std::size_t i_ = 0;
  };
  using iterator = const_iterator;

  SafetensorsMetadata() = default;
  /// The pairs of `map` (in key order).
  SafetensorsMetadata(const std::map<std::string, std::string>& map);  // NOLINT: implicit on purpose

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, items_.size()}; }

  /// The entry with key `key`, or end().
  const_iterator find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != end(); }
  std::size_t count(std::string_view key) const { return contains(key) ? 1 : 0; }
  /// The value of `key`; xgrad::Error naming the key (and the first keys present) if it is absent.
  std::string at(std::string_view key) const;

  /// A copy as a std::map.
  std::map<std::string, std::string> to_map() const;
  operator std::map<std::string, std::string>() const { return to_map(); }  // NOLINT: implicit on purpose

  /// Equal when both hold the same key-value pairs, in any order.
  friend bool operator==(const SafetensorsMetadata& a, const SafetensorsMetadata& b);
  friend bool operator==(const SafetensorsMetadata& a, const std::map<std::string, std::string>& b);

 private:
  friend SafetensorsFile parse_safetensors(const std::uint8_t* data, std::size_t size, const std::string& source_name);
  value_type item(std::size_t i) const {
    const Item& it = items_[i];
    const std::size_t value_end = i + 1 < items_.size() ? items_[i + 1].key_offset : text_.size();
    return {std::string_view(text_.data() + it.key_offset, it.value_offset - it.key_offset),
            std::string_view(text_.data() + it.value_offset, value_end - it.value_offset)};
  }
  std::string text_;         // keys and values back to back (see Item)
  std::vector<Item> items_;  // in header order
};

/// The contents of a safetensors file.
struct SafetensorsFile {
  /// The tensors in the order their data appears in the buffer (for files written by
  /// save_safetensors: the order they were given in). Each owns fresh storage.
  NamedTensors tensors;
  /// The header's "__metadata__", empty if absent.
  SafetensorsMetadata metadata;

  /// True when a tensor named `name` is present.
  bool contains(const std::string& name) const;
  /// The tensor named `name`; xgrad::Error listing the names present if there is none.
  const Tensor& at(const std::string& name) const;
};

/// The bytes of a safetensors file holding `tensors` (their data in that order; the header keys
/// are sorted, as JSON objects are unordered) and `metadata`.
/// Errors: an undefined tensor, an empty or duplicate name, or a tensor named "__metadata__".
std::string to_safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

/// Parses the bytes of a safetensors file (`source_name` names it in error messages). Validates
/// everything listed in Note [Checkpoint safety]; throws xgrad::Error with the reason (e.g. "file is
/// shorter than 8 bytes", "dtype 'BF16' of tensor 'w' is not supported", "overlap").
SafetensorsFile parse_safetensors(const std::uint8_t* data, std::size_t size,
                                  const std::string& source_name = "<memory>");
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source_name = "<memory>");

/// Writes `tensors` and `metadata` to `path` atomically (see the Note). Errors: as
/// to_safetensors_bytes, and any I/O failure (the message names the path and the OS error).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and validates a safetensors file. Errors: the file cannot be read, or is invalid
/// (see parse_safetensors); the message names `path`.
SafetensorsFile load_safetensors(const std::string& path);

/// Generic named-tensor state (e.g. an optimizer's state_dict()) to and from a file; the same
/// format and guarantees as save_safetensors / load_safetensors.
void save_state(const std::string& path, const NamedTensors& state,
                const std::map<std::string, std::string>& metadata = {});
NamedTensors load_state(const std::string& path);

/// The module's parameters and (defined) buffers by dotted name, like torch's state_dict(): for
/// each module its own parameters, then its own buffers, then its children's, depth first. The
/// tensors share storage with the module's.
NamedTensors state_dict(const Module& module);

/// What load / load_state_dict did not match: module entries absent from the state
/// (missing_keys) and state entries the module does not have (unexpected_keys), each sorted.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

/// Copies `state` into the module's parameters and buffers (in place, without recording autograd
/// history, so optimizers holding the parameters see the new values), like torch's
/// load_state_dict. Every matching entry must have the module's dtype and shape. With `strict`
/// any missing or unexpected key is an error; without it the matching entries are loaded and the
/// others reported. Everything is validated before anything is written: on error the module is
/// unchanged. Errors name every mismatching key (with both shapes/dtypes).
LoadResult load_state_dict(Module& module, const NamedTensors& state, bool strict = true);

/// Note [Sparse matrices in safetensors]: safetensors holds dense arrays only, so a SparseCsr
/// `name` is stored as three of them, name.crow_indices (rows + 1,) and name.col_indices (nnz,)
/// (int64) and name.values (nnz,), the arrays torch.sparse_csr_tensor and scipy.sparse.csr_matrix
/// take, and its shape as the metadata entry "sparse_csr:<name>" = "<rows>,<cols>". Reading it back
/// validates everything sparse_csr_tensor validates (offsets monotone and ending at nnz, columns in
/// range and increasing within a row), so a damaged or hostile file is an xgrad::Error, never a
/// matrix that reads out of bounds.
///
///   NamedTensors tensors;
///   std::map<std::string, std::string> meta;
///   put_sparse_csr(tensors, meta, "adjacency", A);
///   save_safetensors("graph.safetensors", tensors, meta);
///   SparseCsr B = get_sparse_csr(load_safetensors("graph.safetensors"), "adjacency");
///
/// Adds the three arrays of `a` under `name` to `tensors` and its shape to `metadata`.
/// Errors: an undefined matrix, an empty name.
void put_sparse_csr(NamedTensors& tensors, std::map<std::string, std::string>& metadata, const std::string& name,
                    const SparseCsr& a);
/// The sparse matrix stored under `name` (Note [Sparse matrices in safetensors]): its values are
/// the file's tensor (fresh storage). Errors name `name` and what is missing or wrong.
SparseCsr get_sparse_csr(const SafetensorsFile& file, const std::string& name);

/// save_safetensors(path, state_dict(module), metadata).
void save(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata = {});

/// load_state_dict(module, load_safetensors(path).tensors, strict); errors also name `path`.
LoadResult load(Module& module, const std::string& path, bool strict = true);

}  // namespace xgrad::nn
