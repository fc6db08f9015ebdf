"""PyTorch (Debian python3-torch) peer of bench/sparse_ops.cpp: the same cases on the same graphs
(gcn: splitmix64, see index_ops.cpp; rmat17 / rmat20: R-MAT, Note [R-MAT graphs] in gcn_graph.hpp,
drawn here with numpy; A[dst, src] = w, duplicates summed), float32. Prints CSV rows
`case,impl,threads,metric,value` with case `<op>:<graph>:f<F>`, impl torch_coo (a coalesced COO
matrix) or torch_csr (A.to_sparse_csr()) or torch_gather (PyG's way: index_select of the end points);
fwd_ms / fwdbwd_ms: median of REPS calls after a warm-up of at least 0.3 s; the backward is
y.backward(ones).
  spmm          torch.sparse.mm(A, X), gradient to X (COO and CSR)
  spmm_weights  torch.sparse.mm(A, X) with A = sparse_coo_tensor(indices, w) and w a leaf: gradients
                to X and w (COO, built from the leaf each call and coalesced again by sparse.mm: torch 1.13
                has no differentiable way to mark it coalesced, nor a values gradient for CSR here) (gcn)
  sddmm         (X[dst] * Z[src]).sum(-1) on the coalesced edges, gradients to X and Z (gcn)
usage: torch_sparse_ops.py THREADS [REPS] [--case NAME] [--big]"""
import sys

import torch

# The same graph, generator and timer as the index ops peer (the scripts sit side by side).
import numpy as np
from torch_index_ops import E, F, N, median_ms, splitmix64, timed_steps
from torch_index_ops import make_graph as make_edges


def gcn_graph():
    src, dst, w = make_edges()
    return torch.sparse_coo_tensor(torch.stack([dst, src]), w.reshape(E), (N, N)).coalesce()


def rmat_graph(scale):
    """Note [R-MAT graphs] in gcn_graph.hpp: the same edges as rmat_edges(scale), weight 1."""
    n, e = 1 << scale, 16 << scale
    k = np.arange(e, dtype=np.uint64) * np.uint64(64)
    r = np.zeros(e, dtype=np.int64)
    c = np.zeros(e, dtype=np.int64)
    for level in range(scale):
        u = (splitmix64(k + np.uint64(level)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        bit = 1 << (scale - 1 - level)
        both = u >= 0.57 + 0.19 + 0.19
        row = (u >= 0.57 + 0.19) & ~both
        col = (u >= 0.57) & (u < 0.57 + 0.19)
        r |= np.where(both | row, bit, 0)
        c |= np.where(both | col, bit, 0)
    idx = torch.from_numpy(np.stack([r, c]))
    return torch.sparse_coo_tensor(idx, torch.ones(e), (n, n)).coalesce()


def run_graph(graph, A, widths, reps, threads, only):
    import warnings
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    n = A.shape[0]
    A_csr = A.to_sparse_csr()
    idx, w = A.indices(), A.values()
    dst, src = idx[0], idx[1]

    def row(case, impl, metric, value):
        print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)

    for f in widths:
        X = torch.randn(n, f)
        Z = torch.randn(n, f)
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
            Aw = torch.sparse_coo_tensor(idx, Wg, (n, n))
            return torch.sparse.mm(Aw, Xg)

        cases = [
            ("spmm", "torch_coo", lambda g: torch.sparse.mm(A, Xg if g else X), (n, f)),
            ("spmm", "torch_csr", lambda g: torch.sparse.mm(A_csr, Xg if g else X), (n, f)),
        ]
        if graph == "gcn":
            cases += [
                ("spmm_weights", "torch_coo", weighted, (n, f)),
                ("sddmm", "torch_gather", lambda g: ((Xg if g else X)[dst] * (Zg if g else Z)[src]).sum(-1),
                 (idx.shape[1],)),
            ]
        for name, impl, fn, shape in cases:
            if only is not None and name != only:
                continue
            seed = torch.ones(shape)
            case = f"{name}:{graph}:f{f}"

            fwd, fwdbwd = timed_steps(fn, seed, clear)
            row(case, impl, "fwd_ms", median_ms(fwd, reps))
            try:
                row(case, impl, "fwdbwd_ms", median_ms(fwdbwd, reps))
            except RuntimeError as e:  # a backward torch 1.13 does not have
                print(f"# {case} {impl}: no backward: {str(e).splitlines()[0]}", flush=True)
    print(f"# {graph}: {n} nodes, nnz after summing duplicate edges {idx.shape[1]}")


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 and not args[1].startswith("--") else 15
    only = args[args.index("--case") + 1] if "--case" in args else None
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    run_graph("gcn", gcn_graph(), [F], reps, threads, only)
    run_graph("rmat17", rmat_graph(17), [16, 64, 256], max(3, reps // 3), threads, only)
    if "--big" in args:
        run_graph("rmat20", rmat_graph(20), [16, 64], 3, threads, only)


if __name__ == "__main__":
    main()
