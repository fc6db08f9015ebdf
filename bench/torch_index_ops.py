"""PyTorch (Debian python3-torch) peer of bench/index_ops.cpp: the same cases on the same graph
(splitmix64, see index_ops.cpp), float32, features 64. Prints CSV rows `case,impl,threads,metric,value`
(fwd_ms / fwdbwd_ms: median of REPS calls after a warm-up of at least 0.3 s; the backward is
y.backward(ones)).
  gcn_aggregate  torch.zeros(N, F).index_add_(0, dst, X.index_select(0, src) * w[:, None])
  index_select   X.index_select(0, src)
  index_add      torch.zeros(N, F).index_add_(0, dst, M)
  gather         torch.gather(X, 0, src[:, None].expand(E, F).contiguous())
  scatter_add    torch.zeros(N, F).scatter_add_(0, dst[:, None].expand(E, F).contiguous(), M)
  embedding      torch.nn.Embedding(10000, 64), 100,000 lookups
--peak CASE: one forward+backward, then peak_rss_bytes (VmHWM) and peak_growth_bytes (VmHWM minus
VmRSS once the inputs exist), in a fresh process per case.
usage: torch_index_ops.py THREADS [REPS] [--case NAME] [--peak NAME]"""
import sys
import time

import numpy as np
import torch

N, E, F = 10000, 168592, 64
TABLE, LOOKUPS = 10000, 100000
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """Vectorised splitmix64 over a uint64 array (wrapping arithmetic, as the C++ side)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def make_graph():
    k = np.arange(E, dtype=np.uint64)
    h = splitmix64(k)
    h2 = splitmix64(h)
    u = (h2 >> np.uint64(11)).astype(np.float64) * 2.0**-53
    src = (h % np.uint64(N)).astype(np.int64)
    dst = np.minimum(N - 1, (N * u * u).astype(np.int64))
    w = (0.5 + ((h >> np.uint64(40)) & np.uint64(0xFFFF)).astype(np.float32) / np.float32(65536.0)).astype(np.float32)
    return torch.from_numpy(src), torch.from_numpy(dst), torch.from_numpy(w).reshape(E, 1)


def status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def median_ms(fn, reps):
    t0 = time.perf_counter()
    n = 0
    while n < 2 or time.perf_counter() - t0 < 0.3:
        fn()
        n += 1
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def timed_steps(fn, seed, clear):
    """The two timed bodies of a case fn(grad): the forward without grad, and clear(), the forward
    with grad and backward(seed). Shared with torch_sparse_ops.py."""
    def fwd():
        with torch.no_grad():
            fn(False)

    def fwdbwd():
        clear()
        fn(True).backward(seed)

    return fwd, fwdbwd


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 and not args[1].startswith("--") else 15
    only = args[args.index("--case") + 1] if "--case" in args else None
    peak = args[args.index("--peak") + 1] if "--peak" in args else None
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    src, dst, w = make_graph()
    X = torch.randn(N, F)
    M = torch.randn(E, F)
    src_rows = src[:, None].expand(E, F).contiguous()
    dst_rows = dst[:, None].expand(E, F).contiguous()
    Xg = X.clone().requires_grad_()
    Mg = M.clone().requires_grad_()
    emb = torch.nn.Embedding(TABLE, F)
    look = torch.from_numpy((splitmix64(np.arange(LOOKUPS, dtype=np.uint64) + np.uint64(0x5EED)) %
                             np.uint64(TABLE)).astype(np.int64))

    def clear():
        Xg.grad = None
        Mg.grad = None
        emb.weight.grad = None

    cases = {
        "gcn_aggregate": (lambda g: torch.zeros(N, F).index_add_(0, dst, (Xg if g else X).index_select(0, src) * w),
                          (N, F)),
        "index_select": (lambda g: (Xg if g else X).index_select(0, src), (E, F)),
        "index_add": (lambda g: torch.zeros(N, F).index_add_(0, dst, Mg if g else M), (N, F)),
        "gather": (lambda g: torch.gather(Xg if g else X, 0, src_rows), (E, F)),
        "scatter_add": (lambda g: torch.zeros(N, F).scatter_add_(0, dst_rows, Mg if g else M), (N, F)),
        "embedding": (lambda g: emb(look), (LOOKUPS, F)),
    }

    def row(case, metric, value):
        print(f"{case},torch,{threads},{metric},{value:.6g}", flush=True)

    for name, (fn, shape) in cases.items():
        seed = torch.ones(shape)
        if peak is not None:
            if name != peak:
                continue
            base = status_kb("VmRSS:")
            clear()
            fn(True).backward(seed)
            hwm = status_kb("VmHWM:")
            row(name, "peak_rss_bytes", hwm * 1024)
            row(name, "peak_growth_bytes", (hwm - base) * 1024)
            continue
        if only is not None and name != only:
            continue

        fwd, fwdbwd = timed_steps(fn, seed, clear)
        row(name, "fwd_ms", median_ms(fwd, reps))
        row(name, "fwdbwd_ms", median_ms(fwdbwd, reps))


if __name__ == "__main__":
    main()
