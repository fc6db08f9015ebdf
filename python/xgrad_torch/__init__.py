"""xgrad_torch: xgrad's resampling convolution, block-sparse linear layers and sparse CSR products
(spmm, sddmm) for PyTorch (CPU).

    import torch, xgrad_torch as xt
    out = xt.resample_conv(f, coarse, (0.0, 2e-5, 50000), xt.Response.hann(0.03))
    layer = xt.BlockSparseLinear(4096, 4096, 64)          # 64 block-diagonal groups

Functions are torch.autograd.Functions that call xgrad's forward and backward; modules are
torch.nn.Modules whose parameters are ordinary torch Parameters (any torch.optim optimizer,
state_dict and load_state_dict work). CPU, float32 or float64, any leading batch dimensions.
Contiguous tensors cross into xgrad without copies; others are made contiguous once. xgrad's
errors arrive as ValueError (bad arguments) with xgrad's message. See docs/python.md.
"""
import torch
from torch.autograd.function import once_differentiable

from . import _C
from ._C import BlockSparsePattern, FineGrid, Response

__all__ = [
    "resample_conv", "ResampleConv", "Response", "SampledResponse", "FineGrid",
    "block_sparse_linear", "BlockSparseLinear", "BlockSparsePattern", "block_diagonal", "block_mask",
    "spmm", "sddmm", "csr_pattern",
    "set_num_threads", "get_num_threads",
]


# ---- threads ---------------------------------------------------------------------------------------

def set_num_threads(n):
    """Fix xgrad's thread count to n (xgrad then runs in its own TBB pool of n threads), or with None
    follow torch.get_num_threads() again (the default: xgrad's parallel loops run in torch's own
    intra-op pool, with as many threads; see docs/python.md)."""
    _C.set_num_threads(n)


def get_num_threads():
    """The number of threads xgrad's kernels use (torch.get_num_threads() unless fixed)."""
    return _C.get_num_threads()


# ---- resample_conv -----------------------------------------------------------------------------------

class SampledResponse:
    """A learnable response: K >= 2 values on the uniform lattice lo + k*(hi-lo)/(K-1), interpolated
    with Catmull-Rom cubics ("cubic") or linearly ("linear"); zero outside [lo, hi]. `values` is a
    1-d torch tensor that may require grad (resample_conv then returns its gradient)."""

    def __init__(self, values, lo, hi, interp="cubic"):
        if not isinstance(values, torch.Tensor):
            raise TypeError(f"SampledResponse: argument 'values' must be a torch.Tensor, got {type(values).__name__}")
        if interp not in ("cubic", "linear"):
            raise ValueError(f"SampledResponse: argument 'interp' is {interp!r}; expected 'cubic' or 'linear'")
        self.values, self.lo, self.hi, self.interp = values, float(lo), float(hi), interp

    def __repr__(self):
        return f"SampledResponse(K={self.values.numel()}, lo={self.lo}, hi={self.hi}, interp={self.interp!r})"


def _grid(fine):
    """A FineGrid from a FineGrid, a uniform spec (start, step, count) or a 1-d tensor of points."""
    if isinstance(fine, FineGrid):
        return fine
    if isinstance(fine, torch.Tensor):
        return FineGrid.points(fine)
    if isinstance(fine, (tuple, list)) and len(fine) == 3:
        start, step, count = fine
        if isinstance(count, float) and not count.is_integer():
            raise ValueError(f"resample_conv: argument 'fine': count {count} is not an integer")
        return FineGrid.uniform(float(start), float(step), int(count))
    raise TypeError("resample_conv: argument 'fine' must be a FineGrid, a uniform spec (start, step, count) "
                    f"or a 1-d tensor of increasing points, got {type(fine).__name__}")


class _ResampleConvFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, f, coarse, values, grid, response, lo, hi, interp, tolerance, exact, strict):
        needs = [bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]),
                 values is not None and bool(ctx.needs_input_grad[2])]
        out, graph = _C.resample_conv(f, coarse, grid, response, values, lo, hi, interp, tolerance, exact, strict,
                                      needs)
        ctx.graph = graph  # xgrad's output and node: what the op saved and prepared for its backward
        # torch's version counters then refuse a backward after an in-place change of an input that
        # xgrad's graph reads through its zero-copy view (Note [External storage]).
        ctx.save_for_backward(f, coarse, values)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        ctx.saved_tensors  # raises if an input was modified in place since the forward
        gf, gc, gv = ctx.graph.backward(grad_out)
        return (gf, gc, gv) + (None,) * 8


def resample_conv(f, coarse, fine, response, *, tolerance=0.0, exact=False, strict=False):
    """out[..., n, a] = sum_b r(coarse[n, a] - fine[b]) * f[..., n, b].

    f: (..., N, B); coarse: (N, A); fine: (start, step, count), a FineGrid or a (B,) tensor of strictly
    increasing points; response: a named Response (Response.gaussian(sigma), .hann(width), .box, .triangle,
    .bspline(order, h), .lanczos(a)) or a SampledResponse. Returns (..., N, A). Differentiable in f,
    coarse and the sampled values. tolerance / exact / strict: xgrad::ResampleConvOptions."""
    grid = _grid(fine)
    if isinstance(response, SampledResponse):
        return _ResampleConvFn.apply(f, coarse, response.values, grid, None, response.lo, response.hi,
                                     response.interp, float(tolerance), bool(exact), bool(strict))
    if isinstance(response, Response):
        return _ResampleConvFn.apply(f, coarse, None, grid, response, 0.0, 0.0, "cubic", float(tolerance),
                                     bool(exact), bool(strict))
    raise TypeError("resample_conv: argument 'response' must be a xgrad_torch.Response or SampledResponse, "
                    f"got {type(response).__name__}")


class ResampleConv(torch.nn.Module):
    """The resampling convolution as a module owning its geometry: coarse points (N, A) (a buffer, or a
    Parameter with learn_coarse=True), the fine grid and the response (a SampledResponse's values become
    the Parameter `response_values`). The tables of a named response are built once, here.
    forward: (..., N, B) -> (..., N, A)."""

    def __init__(self, coarse, fine, response, *, learn_coarse=False, tolerance=0.0, exact=False):
        super().__init__()
        if not isinstance(coarse, torch.Tensor) or coarse.dim() != 2:
            raise ValueError("ResampleConv: argument 'coarse' must be a (N, A) tensor")
        coarse = coarse.detach().clone()
        if learn_coarse:
            self.coarse = torch.nn.Parameter(coarse)
        else:
            self.register_buffer("coarse", coarse)
        self.grid = _grid(fine)
        self.tolerance, self.exact = float(tolerance), bool(exact)
        if isinstance(response, SampledResponse):
            self.response = None
            self.response_values = torch.nn.Parameter(response.values.detach().clone().to(coarse.dtype))
            self.lo, self.hi, self.interp = response.lo, response.hi, response.interp
        elif isinstance(response, Response):
            self.response = response
            self.response_values = None
            if not exact:
                _C.resample_conv_prepare(self.grid, response, coarse.dtype == torch.float64, self.tolerance,
                                         learn_coarse)
        else:
            raise TypeError("ResampleConv: argument 'response' must be a Response or SampledResponse")

    def forward(self, f):
        if self.response is None:
            resp = SampledResponse(self.response_values, self.lo, self.hi, self.interp)
        else:
            resp = self.response
        return resample_conv(f, self.coarse, self.grid, resp, tolerance=self.tolerance, exact=self.exact)

    def bytes_held(self):
        """Bytes of the named response's precomputed tables (0 for a sampled response)."""
        return 0 if self.response is None else _C.resample_conv_cached_bytes(self.response)

    def extra_repr(self):
        resp = self.response if self.response is not None else \
            f"sampled(K={self.response_values.numel()}, {self.interp})"
        return f"N={self.coarse.shape[0]}, A={self.coarse.shape[1]}, grid={self.grid}, response={resp}"


# ---- block-sparse linear -----------------------------------------------------------------------------

def block_diagonal(in_features, out_features, groups):
    """A block-diagonal pattern: `groups` equal groups (an int dividing both sizes), or a list of
    (in, out) pairs adding up to (in_features, out_features)."""
    if isinstance(groups, int):
        if groups <= 0 or in_features % groups or out_features % groups:
            raise ValueError(f"block_diagonal: {groups} groups do not divide in_features={in_features} and "
                             f"out_features={out_features}")
        groups = [(in_features // groups, out_features // groups)] * groups
    p = BlockSparsePattern.block_diagonal([(int(i), int(o)) for i, o in groups])
    if p.in_features != in_features or p.out_features != out_features:
        raise ValueError(f"block_diagonal: the groups add up to in={p.in_features}, out={p.out_features}, "
                         f"not in_features={in_features}, out_features={out_features}")
    return p


def block_mask(in_features, out_features, mask):
    """A uniform grid of blocks: `mask` (out_features/bo, in_features/bi), W's block layout, non-zero =
    stored; the block sizes bo x bi follow from the mask's shape."""
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
        raise ValueError("block_mask: argument 'mask' must be a 2-d tensor (block rows, block columns)")
    rows, cols = mask.shape
    if rows == 0 or cols == 0 or out_features % rows or in_features % cols:
        raise ValueError(f"block_mask: mask of shape {tuple(mask.shape)} does not divide the layer "
                         f"(out_features={out_features}, in_features={in_features}) into blocks")
    return BlockSparsePattern.from_block_mask(in_features, out_features, in_features // cols,
                                              out_features // rows, mask.detach().to(torch.uint8))


def _pattern(in_features, out_features, pattern):
    if isinstance(pattern, BlockSparsePattern):
        p = pattern
    elif isinstance(pattern, int):
        p = block_diagonal(in_features, out_features, pattern)
    elif isinstance(pattern, torch.Tensor):
        p = block_mask(in_features, out_features, pattern)
    elif isinstance(pattern, (list, tuple)):
        p = block_diagonal(in_features, out_features, pattern)
    else:
        raise TypeError("BlockSparseLinear: argument 'pattern' must be a BlockSparsePattern, a number of "
                        f"block-diagonal groups, a list of (in, out) groups or a block mask, got {type(pattern).__name__}")
    if p.in_features != in_features or p.out_features != out_features:
        raise ValueError(f"BlockSparseLinear: pattern {p} does not match in_features={in_features}, "
                         f"out_features={out_features}")
    return p


class _BlockSparseLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, pattern):
        needs = [bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]),
                 bias is not None and bool(ctx.needs_input_grad[2])]
        out, graph = _C.block_sparse_linear(x, weight, bias, pattern, needs)
        ctx.graph = graph
        ctx.save_for_backward(x, weight, bias)  # torch's in-place check, as in _ResampleConvFn
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        ctx.saved_tensors
        gx, gw, gb = ctx.graph.backward(grad_out)
        return gx, gw, gb, None


def block_sparse_linear(x, weight, bias, pattern):
    """y = x W^T + b with W block-sparse: weight holds the stored blocks (pattern.weight_shape), bias is
    (out,) or None. x: (..., in) -> (..., out). Differentiable in x, weight and bias."""
    return _BlockSparseLinearFn.apply(x, weight, bias, pattern)


class BlockSparseLinear(torch.nn.Module):
    """torch.nn.Linear with a block-sparse weight: only the blocks of `pattern` are stored and computed.

    pattern: a BlockSparsePattern, an int (that many equal block-diagonal groups), a list of (in, out)
    groups (block-diagonal), or a 2-d block mask (W's block layout, (out/bo, in/bi)). Parameters:
    `weight`, the packed blocks (shape pattern.weight_shape), and `bias` (out,) unless bias=False.
    Initialised like torch.nn.Linear with each output's fan-in counted over its existing connections."""

    def __init__(self, in_features, out_features, pattern, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.pattern = _pattern(self.in_features, self.out_features, pattern)
        dtype = dtype or torch.get_default_dtype()
        self.weight = torch.nn.Parameter(torch.empty(self.pattern.weight_shape, dtype=dtype))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(self.out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        fan_in = torch.tensor(self.pattern.row_fan_in(), dtype=torch.float64)
        bound = torch.where(fan_in > 0, 1.0 / fan_in.clamp(min=1).sqrt(), torch.zeros(()))
        with torch.no_grad():
            dense_bound = bound[:, None].expand(self.out_features, self.in_features).contiguous()
            packed = _C.block_sparse_from_dense(dense_bound, self.pattern).to(self.weight.dtype)
            self.weight.copy_((torch.rand_like(self.weight) * 2 - 1) * packed.reshape(self.weight.shape))
            if self.bias is not None:
                self.bias.copy_((torch.rand_like(self.bias) * 2 - 1) * bound.to(self.bias.dtype))

    def forward(self, x):
        return block_sparse_linear(x, self.weight, self.bias, self.pattern)

    @classmethod
    def from_dense(cls, weight, pattern, bias=None):
        """A layer holding the stored blocks of a dense (out, in) weight (the rest is dropped); bias (out,)
        or None for no bias. Dtype follows weight."""
        out_features, in_features = weight.shape
        layer = cls(in_features, out_features, pattern, bias=bias is not None, dtype=weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(_C.block_sparse_from_dense(weight.detach(), layer.pattern).reshape(layer.weight.shape))
            if bias is not None:
                layer.bias.copy_(bias.detach())
        return layer

    def to_dense(self):
        """The dense (out, in) weight, zeros outside the blocks (no autograd history)."""
        return _C.block_sparse_to_dense(self.weight.detach(), self.pattern)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"blocks={self.pattern.num_blocks}, bias={self.bias is not None}")


# ---- sparse CSR products ---------------------------------------------------------------------------

def _check_sparse(A, op):
    """A must be a 2-D torch sparse matrix, CSR or COO (converted, as torch.sparse.mm accepts both)."""
    if not isinstance(A, torch.Tensor) or A.layout not in (torch.sparse_csr, torch.sparse_coo):
        raise TypeError(f"{op}: argument 'A' must be a torch sparse CSR or COO tensor, got "
                        f"{A.layout if isinstance(A, torch.Tensor) else type(A).__name__}")
    if A.dim() != 2:
        raise ValueError(f"{op}: argument 'A' must be 2-D, got shape {tuple(A.shape)}")


def csr_pattern(A):
    """The xgrad pattern handle of a torch sparse matrix A (CSR, or COO: its CSR form), kept on A: made
    (validated, its indices copied) on the first call and returned again while A's index tensors are
    the same (data pointers, shape, and torch's version counters of A.crow_indices() and
    A.col_indices(), or of a COO matrix's indices), so spmm and sddmm on one matrix check its pattern
    once and reuse its cached transpose in every backward. An in-place change through those index
    tensors bumps their version and makes a new handle on the next call. torch gives the tensors a
    CSR matrix was built from a version counter of their own: write through A's accessors, or build
    a new matrix, to change a pattern."""
    _check_sparse(A, "csr_pattern")
    return _pattern_of(A, None)[0]


def _pattern_of(A, csr):
    """(handle, CSR form of A). csr: A's CSR form when the caller has it already (else made here)."""
    if A.layout == torch.sparse_csr:
        idx = (A.crow_indices(), A.col_indices())
    else:
        idx = (A._indices(),)
    key = (tuple(A.shape),) + tuple((t.data_ptr(), t._version, tuple(t.shape)) for t in idx)
    cached = getattr(A, "_xgrad_csr_pattern", None)
    if cached is not None and cached[0] == key:
        return cached[1], csr
    if csr is None:
        csr = A if A.layout == torch.sparse_csr else A.to_sparse_csr()
    handle = _C.CsrPattern(csr.crow_indices(), csr.col_indices(), csr.shape[0], csr.shape[1])
    A._xgrad_csr_pattern = (key, handle)
    return handle, csr


class _SpmmFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern, values, x):
        needs = [bool(ctx.needs_input_grad[1]), bool(ctx.needs_input_grad[2])]
        out, graph = _C.spmm(pattern, values, x, needs)
        ctx.graph = graph
        ctx.save_for_backward(values, x)  # torch's in-place check, as in _ResampleConvFn
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        ctx.saved_tensors
        gv, gx = ctx.graph.backward(grad_out)
        return None, gv, gx


def spmm(A, x, values=None):
    """A @ x for a torch sparse matrix A (rows, cols) (CSR, or COO: converted) and a dense x (cols, F):
    xgrad's spmm (row-parallel, the same bits at any thread count). Differentiable in x and in the
    values: pass them as `values` (a (nnz,) tensor in A's CSR entry order, e.g. a Parameter; it
    replaces A's own), whose gradient is then (nnz,) in the same order (xgrad's sddmm). A's pattern
    is checked once and kept on A (csr_pattern)."""
    _check_sparse(A, "spmm")
    csr = A if A.layout == torch.sparse_csr else None
    if values is None and csr is None:
        csr = A.to_sparse_csr()  # the values in CSR entry order
    pattern, csr = _pattern_of(A, csr)
    if values is None:
        values = csr.values()
    elif values.shape != (pattern.nnz,):
        raise ValueError(f"spmm: argument 'values' must have shape ({pattern.nnz},), one per stored entry "
                         f"of A, got {tuple(values.shape)}")
    return _SpmmFn.apply(pattern, values, x)


class _SddmmFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern, x, y):
        needs = [bool(ctx.needs_input_grad[1]), bool(ctx.needs_input_grad[2])]
        out, graph = _C.sddmm(pattern, x, y, needs)
        ctx.graph = graph
        ctx.save_for_backward(x, y)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        ctx.saved_tensors
        gx, gy = ctx.graph.backward(grad_out)
        return None, gx, gy


def sddmm(A, x, y):
    """The sampled product on A's pattern: out[k] = <x[i], y[j]> for the k-th stored entry (i, j) of A
    (CSR entry order), x (rows, F), y (cols, F); A's values are not read. Returns the (nnz,) values:
    torch.sparse_csr_tensor(A.crow_indices(), A.col_indices(), out, A.shape) is the sparse matrix
    (torch.sparse.sampled_addmm(A, x, y.T, beta=0) without its dense detour on the CPU).
    Differentiable in x and y. A's pattern is checked once and kept on A (csr_pattern)."""
    _check_sparse(A, "sddmm")
    return _SddmmFn.apply(_pattern_of(A, None)[0], x, y)
