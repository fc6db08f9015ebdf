"""PyTorch (Debian python3-torch) peer of bench/sparse_ops.cpp: the same cases on the same graph
(splitmix64, see index_ops.cpp / sparse_ops.cpp: A[dst, src] = w, duplicates summed), float32,
features 64. Prints CSV rows `case,impl,threads,metric,value`, impl torch_coo (a coalesced COO
matrix) or torch_csr (A.to_sparse_csr()) or torch_gather (PyG's way: index_select of the end points);
fwd_ms / fwdbwd_ms: median of REPS calls after a warm-up of at least 0.3 s; the backward is
y.backward(ones).
  spmm          torch.sparse.mm(A, X), gradient to X (COO and CSR)
  spmm_weights  torch.sparse.mm(A, X) with A = sparse_coo_tensor(indices, w) and w a leaf: gradients
                to X and w (COO, built from the leaf each call and coalesced again by sparse.mm: torch 1.13
                has no differentiable way to mark it coalesced, nor a values gradient for CSR here)
  sddmm         (X[dst] * Z[src]).sum(-1) on the coalesced edges, gradients to X and Z
usage: torch_sparse_ops.py THREADS [REPS] [--case NAME]"""
import sys

import torch

# The same graph, generator and timer as the index ops peer (the scripts sit side by side).
from torch_index_ops import E, F, N, median_ms
from torch_index_ops import make_graph as make_edges


def make_graph():
    src, dst, w = make_edges()
    return torch.sparse_coo_tensor(torch.stack([dst, src]), w.reshape(E), (N, N)).coalesce()


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 and not args[1].startswith("--") else 15
    only = args[args.index("--case") + 1] if "--case" in args else None
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    A = make_graph()
    import warnings
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    A_csr = A.to_sparse_csr()
    idx, w = A.indices(), A.values()
    dst, src = idx[0], idx[1]
    X = torch.randn(N, F)
    Z = torch.randn(N, F)
    Xg = X.clone().requires_grad_()
    Zg = Z.clone().requires_grad_()
    Wg = w.clone().requires_grad_()

    def clear():
        Xg.grad = None
        Zg.grad = None
        Wg.grad = None

    def weighted(g):
        if not g:
            return torch.sparse.mm(A, X)
        # torch 1.13 has no differentiable way to mark it coalesced: sparse.mm coalesces it again
        Aw = torch.sparse_coo_tensor(idx, Wg, (N, N))
        return torch.sparse.mm(Aw, Xg)

    cases = [
        ("spmm", "torch_coo", lambda g: torch.sparse.mm(A, Xg if g else X), (N, F)),
        ("spmm", "torch_csr", lambda g: torch.sparse.mm(A_csr, Xg if g else X), (N, F)),
        ("spmm_weights", "torch_coo", weighted, (N, F)),
        ("sddmm", "torch_gather", lambda g: ((Xg if g else X)[dst] * (Zg if g else Z)[src]).sum(-1), (idx.shape[1],)),
    ]

    def row(case, impl, metric, value):
        print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)

    for name, impl, fn, shape in cases:
        if only is not None and name != only:
            continue
        seed = torch.ones(shape)

        def fwd():
            with torch.no_grad():
                fn(False)

        def fwdbwd():
            clear()
            fn(True).backward(seed)

        row(name, impl, "fwd_ms", median_ms(fwd, reps))
        try:
            row(name, impl, "fwdbwd_ms", median_ms(fwdbwd, reps))
        except RuntimeError as e:  # a backward torch 1.13 does not have
            print(f"# {name} {impl}: no backward: {str(e).splitlines()[0]}", flush=True)
    print(f"# nnz after summing duplicate edges: {idx.shape[1]}")


if __name__ == "__main__":
    main()
