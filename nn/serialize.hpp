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
// bool; a BOOL byte other than 0 is read as true). The host must be little-endian (checked at compile time).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

/// Tensors by name, in order (what a checkpoint holds, like PyTorch's state_dict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// The contents of a safetensors file.
struct SafetensorsFile {
  /// The tensors in the order their data appears in the buffer (for files written by
  /// save_safetensors: the order they were given in). Each owns fresh storage.
  NamedTensors tensors;
  /// The header's "__metadata__" (string to string), empty if absent.
  std::map<std::string, std::string> metadata;

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

/// save_safetensors(path, state_dict(module), metadata).
void save(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata = {});

/// load_state_dict(module, load_safetensors(path).tensors, strict); errors also name `path`.
LoadResult load(Module& module, const std::string& path, bool strict = true);

}  // namespace xgrad::nn
