#pragma once
// Shape ops. All results are contiguous; reshape/squeeze/unsqueeze/flatten share the input's
// storage (views, like PyTorch), the others copy.
//
// | op                             | gradient                                                  |
// |--------------------------------|-----------------------------------------------------------|
// | reshape(x, shape) (one -1 ok)  | dx = reshape(g, x.shape)                                  |
// | flatten(x, start, end)         | dx = reshape(g, x.shape)                                  |
// | squeeze(x, axis) / unsqueeze   | dx = reshape(g, x.shape)                                  |
// | permute(x, dims)               | dx = permute(g, inverse(dims))                            |
// | transpose(x, d0, d1)           | dx = transpose(g, d0, d1)                                 |
// | slice(x, axis, start, end, st) | dx = zeros(x.shape) with g written at the sliced indices |
// | index_select(x, axis, index)   | dx = zeros(x.shape) with g added at the indices (repeats sum) |
// | concat(xs, axis)               | dx_i = the i-th slice of g along axis                     |
// | stack(xs, axis)                | dx_i = g selected at position i of the new axis           |
// | expand(x, shape)               | dx = g summed over the expanded axes (broadcast_to alias) |
// Every op of this table takes tensors of any dtype (integer and bool too, as torch's: they only
// move elements); integer and bool tensors have no gradient. concat and stack need one dtype.
#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
/// Removes `axis` if its size is 1; otherwise returns a view of the same shape (as torch does).
Tensor squeeze(const Tensor& x, std::int64_t axis);
/// Removes every axis of size 1.
Tensor squeeze(const Tensor& x);
/// Inserts a size-1 axis at `axis` (in [-dim-1, dim]).
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
/// Elements start, start+step, ... < end along axis (negative start/end count from the end,
/// clipped to the axis like Python slices); step >= 1.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// x taken at `index` positions along axis (negative indices count from the end).
Tensor index_select(const Tensor& x, std::int64_t axis, std::vector<std::int64_t> index);
Tensor concat(const Tensors& xs, std::int64_t axis = 0);
Tensor stack(const Tensors& xs, std::int64_t axis = 0);
/// Broadcasts x to `shape` (NumPy rules; -1 keeps a dimension).
Tensor expand(const Tensor& x, const Shape& shape);
inline Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

// ---- torch's names and the copy-type shape ops ----------------------------------------------------
// | op                              | forward                                  | gradient                          |
// |---------------------------------|------------------------------------------|-----------------------------------|
// | cat(xs, dim)                    | concat (torch's name)                    | as concat                         |
// | split(x, size or sizes, dim)    | pieces along dim (copies)                | dx = the pieces' gradients joined |
// | chunk(x, chunks, dim)           | split(x, ceil(n / chunks), dim)          | as split                          |
// | flip(x, dims)                   | y[.., i, ..] = x[.., n-1-i, ..]          | dx = flip(g, dims)                |
// | roll(x, shifts, dims)           | y[.., i, ..] = x[.., (i - s) mod n, ..]  | dx = roll(g, -shifts, dims)       |
// | repeat(x, repeats)              | tile x repeats[d] times along dim d      | dx[i] = sum of g over the copies  |
// | pad(x, pads, mode, value)       | constant / reflect / replicate border    | dx[i] = sum of g over the outputs |
// |                                 |                                          | read from x[i] (0 from constants) |
// flip, roll, repeat and pad gather through an index map (ops/detail/gather_map.hpp); their
// backward sums g over each source element in increasing output order (deterministic).

/// torch::cat: concat under torch's name.
inline Tensor cat(const Tensors& xs, std::int64_t dim = 0) { return concat(xs, dim); }
/// Pieces of `split_size` along dim (the last one smaller when it does not divide), as
/// torch::split. split_size 0 is allowed only for an empty dim (one empty piece); an empty dim
/// gives one empty piece. Pass a std::vector (not a braced single value) for the sizes overload.
Tensors split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
/// Pieces of the given sizes along dim (they must sum to the dim's size), as torch::split_with_sizes.
Tensors split(const Tensor& x, const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0);
/// torch::chunk: split(x, ceil(n / chunks), dim), so possibly fewer than `chunks` pieces; an empty
/// dim gives `chunks` empty pieces (as torch). chunks >= 1.
Tensors chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);
/// Reverses the order of the elements along each of `dims` (no dim twice).
Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims);
/// torch::roll: shifts elements along dims[k] by shifts[k] (wrapping around; negative shifts go
/// the other way). With dims empty, x is rolled as a flat vector (one shift) and keeps its shape.
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims = {});
/// torch's Tensor::repeat: tiles x; repeats has at least x.dim() entries (extra ones add leading
/// dims), each >= 0. The result has shape (x.shape left-padded with 1s) * repeats.
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats);
/// torch.nn.functional.pad: pads = (left, right) of the LAST dim, then of the one before, ...
/// (at most 2 * x.dim() entries). mode "constant" fills with `value` (negative pads crop);
/// "reflect" mirrors without repeating the edge (each pad < the dim's size); "replicate" repeats the
/// edge element (the padded dim must be non-empty). Any dim may be padded in every mode (torch limits
/// reflect/replicate to the last 1-3 dims of 2-5-d inputs).
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, const std::string& mode = "constant",
           double value = 0.0);

}  // namespace xgrad
