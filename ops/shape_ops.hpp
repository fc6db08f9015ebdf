#pragma once
// Shape ops. All results are contiguous; reshape/squeeze/unsqueeze/flatten share the input's
// storage (views, like PyTorch), the others copy.
//
// Each op's formulas are its `/// @op` row (op | forward y | gradient, g = dL/dy | torch), from which
// docs/ops.md's table is generated.
//
// Every op of the first block takes tensors of any dtype (integer and bool too, as torch's: they only
// move elements); integer and bool tensors have no gradient. concat and stack need one dtype.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad {

/// @op `reshape(x, shape)` (one −1 allowed) | a view of x's storage in the new shape | reshape(g, x.shape)
///   | torch.reshape
Tensor reshape(const Tensor& x, const Shape& shape);
/// @op `flatten(x, start, end)` | a view with the dims start..end merged into one | reshape(g, x.shape)
///   | torch.flatten
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
/// @op `squeeze(x, axis)`, `squeeze(x)` | a view without axis if its size is 1, else of the same shape (as
///   torch); without an axis: without every axis of size 1 | reshape(g, x.shape) | torch.squeeze
Tensor squeeze(const Tensor& x, std::int64_t axis);
Tensor squeeze(const Tensor& x);
/// @op `unsqueeze(x, axis)` | a view with a size-1 axis inserted at axis (in [−dim−1, dim]) | reshape(g, x.shape)
///   | torch.unsqueeze
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
/// @op `permute(x, dims)` | a copy with axis i of y = axis dims[i] of x | permute(g, inverse(dims)) | torch.permute
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
/// @op `transpose(x, d0, d1)` | a copy with axes d0 and d1 swapped | transpose(g, d0, d1) | torch.transpose
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
/// @op `slice(x, axis, start, end, step)` | a copy of the elements start, start + step, ... < end along axis
///   (negative start and end count from the end, clipped to the axis like Python slices; step ≥ 1)
///   | g written into zeros at the slice | torch.Tensor.__getitem__
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// @op `index_select(x, axis, index)` (a list) | a copy of x at the index positions along axis (no negative
///   indices, as torch and the tensor overload) | g added into zeros at the indices (repeats add up) |
///   torch.index_select
Tensor index_select(const Tensor& x, std::int64_t axis, const std::vector<std::int64_t>& index);
namespace detail {
/// index_select for a caller that has checked its indices itself (the tensor overload, nn::Embedding):
/// axis in [0, x.dim()), every index in [0, x.size(axis)). Skips the second pass over the indices,
/// and copies them only when x requires grad (the backward's positions).
Tensor index_select_checked(const Tensor& x, std::int64_t axis, std::span<const std::int64_t> index);
}  // namespace detail
/// index_select(x, axis, index) for a caller that has checked its arguments itself (nn::Embedding,
/// with its own error message): axis in [0, x.dim()) and every index in [0, x.size(axis)), anything
/// else being undefined behaviour. It skips index_select's second pass over the indices and takes them
/// as a span (a tensor's data, say), copied only when x requires grad (the backward's positions).
inline Tensor index_select_checked(const Tensor& x, std::int64_t axis, std::span<const std::int64_t> index) {
  return detail::index_select_checked(x, axis, index);
}
/// @op `concat(xs, axis)`, `cat(xs, dim)` | the xs (one dtype) joined along axis | each x its slice of g
///   | torch.cat
Tensor concat(const Tensors& xs, std::int64_t axis = 0);
/// @op `stack(xs, axis)` | the xs (one dtype, one shape) joined along a new axis | each x its position of g along
///   the new axis | torch.stack
Tensor stack(const Tensors& xs, std::int64_t axis = 0);
/// @op `expand(x, shape)`, `broadcast_to(x, shape)` | a copy of x broadcast to shape (NumPy rules; −1 keeps a
///   dimension) | g summed over the expanded axes | torch.Tensor.expand
Tensor expand(const Tensor& x, const Shape& shape);
inline Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

// ---- torch's names and the copy-type shape ops ----------------------------------------------------
// flip, roll, repeat and pad gather through an index map (ops/define/gather_map.hpp); their
// backward sums g over each source element in increasing output order (deterministic).

/// torch::cat: concat under torch's name.
inline Tensor cat(const Tensors& xs, std::int64_t dim = 0) { return concat(xs, dim); }
/// split_size 0 is allowed only for an empty dim (one empty piece); an empty dim gives one empty
/// piece. Pass a std::vector (not a braced single value) for the sizes overload (torch::split_with_sizes).
/// @op `split(x, size, dim)`, `split(x, sizes, dim)` | copies of the pieces along dim: of size each (the last one
///   smaller when it does not divide), or of the given sizes (summing to the dim's size)
///   | the pieces' gradients joined (zeros for pieces without one) | torch.split
Tensors split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
Tensors split(const Tensor& x, const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0);
/// Possibly fewer than `chunks` pieces; an empty dim gives `chunks` empty pieces (as torch). chunks >= 1.
/// @op `chunk(x, chunks, dim)` | split(x, ⌈n/chunks⌉, dim), n the dim's size | as split | torch.chunk
Tensors chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);
/// No dim twice.
/// @op `flip(x, dims)` | yᵢ = x₍ₙ₋₁₋ᵢ₎ along each of dims | flip(g, dims) | torch.flip
Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims);
/// @op `roll(x, shifts, dims)` | yᵢ = x₍ᵢ₋ₛ₎ mod n along dims[k], s = shifts[k] (wrapping around); dims empty: x
///   rolled as a flat vector by the one shift, keeping its shape | roll(g, −shifts, dims) | torch.roll
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims = {});
/// repeats has at least x.dim() entries, each >= 0.
/// @op `repeat(x, repeats)` | x tiled repeats[d] times along dim d (extra repeats add leading dims): shape
///   (x.shape left-padded with 1s)·repeats | dxᵢ = Σ of g over the copies of xᵢ | torch.Tensor.repeat
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats);
/// pads = (left, right) of the LAST dim, then of the one before, ... (at most 2 * x.dim() entries).
/// mode "constant" fills with `value` (negative pads crop); "reflect" mirrors without repeating the
/// edge (each pad < the dim's size); "replicate" repeats the edge element (the padded dim must be
/// non-empty). Any dim may be padded in every mode (torch limits reflect/replicate to the last 1-3
/// dims of 2-5-d inputs).
/// @op `pad(x, pads, mode, value)` | x with borders: constant (negative pads crop), reflect or replicate
///   | dxᵢ = Σ of g over the outputs read from xᵢ, in output order (0 from constant borders)
///   | torch.nn.functional.pad
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, const std::string& mode = "constant",
           double value = 0.0);

}  // namespace xgrad
