"""The seeds' programs in PyTorch against the same programs with xgrad_torch dropped in, in one
process: median milliseconds of the forward and of forward+backward, the ratios (PyTorch / xgrad,
> 1 means xgrad is faster) and the memory each formulation holds, at 1 and 2 threads.

Seed 000 (resample_einsum.py / resample_xgrad.py): einsum over the dense T against ResampleConv.
Seed 004 (block_diagonal_torch.py / block_diagonal_xgrad.py): the ModuleList loop, the masked dense
Linear and a grouped bmm (the fastest PyTorch formulation we know) against BlockSparseLinear.

Threads: torch.set_num_threads(t); xgrad follows it (docs/python.md). Debian's torch runs its CPU
GEMMs (mm, bmm, the einsum's bmm, Linear) in OpenBLAS, and torch.set_num_threads does not reach
OpenBLAS's own pool, which keeps one thread per core: without more, "1 thread" would time the
PyTorch formulations' GEMMs on every core. So the OpenBLAS pool is set to t as well
(openblas_set_num_threads, as OPENBLAS_NUM_THREADS=t would at start-up; the C++ drivers in bench/ do
the same); --blas-default leaves it as torch has it, for a separately labelled run. xgrad_torch
restores the process's OpenBLAS thread count after each call, so the PyTorch formulations' GEMMs keep
theirs.

usage: benchmark.py [--tiny] [--threads 1,2] [--reps 5] [--blas-default]
  --tiny: small sizes, a smoke test of the script (the suite runs it); no meaningful timing.
  --blas-default: do not set OpenBLAS's thread count (PyTorch's GEMMs then use every core)."""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import block_diagonal_torch  # noqa: E402
import resample_einsum  # noqa: E402
import resample_xgrad  # noqa: E402
from blas_threads import openblas  # noqa: E402
import xgrad_torch as xt  # noqa: E402

# Seconds of quiet before each formulation is timed. OpenBLAS's pthread workers spin for a while
# after each GEMM (THREAD_TIMEOUT, about 0.1 s here) before they sleep, and TBB's workers do the same
# for a shorter time: a formulation timed right after another on the same cores would share them
# with the previous one's spinning workers (measured: xgrad's 2-thread resampling forward 0.7-2.2 ms
# right after the einsum's reps, 0.7-1.1 ms after a pause). Every formulation gets the same pause.
SETTLE_S = 0.5


def bench(fn, reps, warm=1):
    time.sleep(SETTLE_S)
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def row(case, impl, threads, metric, value):
    print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)


def time_pair(fwd, fwdbwd, reps):
    with torch.no_grad():
        f_ms = bench(fwd, reps)
    return f_ms, bench(fwdbwd, reps)


def seed000(threads, reps, N, A, B, width):
    fine, coarse = resample_einsum.setup(N, A, B, width)
    dense = resample_einsum.Resample(coarse, fine, width)
    ours = resample_xgrad.Resample(coarse, fine, width)
    f = torch.randn(N, B, requires_grad=True)
    g = torch.randn(N, A)
    err = float((dense(f) - ours(f)).abs().max())
    case = f"resample_N{N}_A{A}_B{B}"
    results = {}
    for name, model in (("torch_einsum", dense), ("xgrad", ours)):
        def fb(model=model):
            model(f).backward(g)
            f.grad = None
        results[name] = time_pair(lambda model=model: model(f), fb, reps)
        row(case, name, threads, "fwd_ms", results[name][0])
        row(case, name, threads, "fwdbwd_ms", results[name][1])
    row(case, "torch_einsum", threads, "bytes_held", tensor_bytes([dense.T]))
    row(case, "xgrad", threads, "bytes_held", ours.conv.bytes_held() + tensor_bytes([ours.conv.coarse]))
    row(case, "xgrad", threads, "graph_bytes_per_forward", xt._C.resample_conv_graph_bytes(N * A))
    row(case, "xgrad", threads, "max_abs_diff_vs_einsum", err)
    row(case, "einsum/xgrad", threads, "fwd_ratio", results["torch_einsum"][0] / results["xgrad"][0])
    row(case, "einsum/xgrad", threads, "fwdbwd_ratio", results["torch_einsum"][1] / results["xgrad"][1])


def seed004(threads, reps, groups, fin, fout, batch):
    torch.manual_seed(0)
    IN, OUT = groups * fin, groups * fout
    x = torch.randn(batch, IN, requires_grad=True)
    loop = block_diagonal_torch.GroupedLoop(groups, fin, fout)
    masked = block_diagonal_torch.MaskedDense(groups, fin, fout)
    bmm = block_diagonal_torch.GroupedBmm(groups, fin, fout)
    ours = xt.BlockSparseLinear(IN, OUT, groups)
    case = f"block_diagonal_g{groups}_{fin}x{fout}_batch{batch}"
    results = {}
    for name, model in (("torch_modulelist", loop), ("torch_masked", masked), ("torch_bmm", bmm), ("xgrad", ours)):
        def fb(model=model):
            model(x).sum().backward()
            x.grad = None
            model.zero_grad(set_to_none=True)
        results[name] = time_pair(lambda model=model: model(x), fb, reps)
        row(case, name, threads, "fwd_ms", results[name][0])
        row(case, name, threads, "fwdbwd_ms", results[name][1])
        row(case, name, threads, "bytes_held", tensor_bytes(list(model.parameters()) + list(model.buffers())))
    for name in ("torch_modulelist", "torch_masked", "torch_bmm"):
        row(case, f"{name}/xgrad", threads, "fwd_ratio", results[name][0] / results["xgrad"][0])
        row(case, f"{name}/xgrad", threads, "fwdbwd_ratio", results[name][1] / results["xgrad"][1])
    fastest = min(("torch_modulelist", "torch_masked", "torch_bmm"), key=lambda n: results[n][1])
    row(case, f"fastest_torch({fastest})/xgrad", threads, "fwdbwd_ratio", results[fastest][1] / results["xgrad"][1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="small sizes: a smoke test, not a measurement")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--blas-default", action="store_true", help="leave OpenBLAS's thread count as torch has it")
    args = ap.parse_args()
    reps = 1 if args.tiny else args.reps
    global SETTLE_S
    if args.tiny:
        SETTLE_S = 0.0  # a smoke test of the script: nothing is timed that the pause would protect
    blas = None if args.blas_default else openblas()
    print("case,impl,threads,metric,value")
    for t in (int(v) for v in args.threads.split(",")):
        torch.set_num_threads(t)
        if blas is not None:
            blas.openblas_set_num_threads(t)
        lib = blas or openblas()
        row("threads", "openblas", t, "num_threads", lib.openblas_get_num_threads() if lib else float("nan"))
        if args.tiny:
            seed000(t, reps, N=3, A=20, B=400, width=0.05)
            seed004(t, reps, groups=4, fin=8, fout=8, batch=8)
        else:
            seed000(t, reps, N=20, A=500, B=50000, width=0.03)
            seed004(t, reps, groups=64, fin=64, fout=64, batch=256)
            seed004(t, reps, groups=16, fin=256, fout=256, batch=256)


if __name__ == "__main__":
    main()
