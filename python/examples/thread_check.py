"""xgrad next to torch's OpenMP pool: do the two contend for the cores? A short check (the
measurement behind the thread policy in docs/python.md): alternate a torch op (OpenMP-parallel
elementwise + matmul) with an xgrad op (block-sparse forward+backward, resample_conv forward) and
compare the interleaved loop's time with the sum of each op's time alone, for torch at 1 and 2
threads and xgrad following torch (the default: xgrad's loops run in torch's pool) or fixed at 1 or
2 threads (xgrad's own TBB pool). The xgrad op's backward starts from torch's .sum(), so its time
"alone" already includes one hand-over from torch's pool to xgrad's.
A ratio interleaved / (torch alone + xgrad alone) near 1 means no contention between the pools.
OpenBLAS's own pool (which runs torch's matmul on Debian, and which torch.set_num_threads does not
reach) is set to torch's count, as in benchmark.py (blas_threads.py); --blas-default leaves it alone.
Times are medians over --reps calls.
usage: thread_check.py [--reps 20] [--blas-default]"""
import argparse
import os
import statistics
import sys
import time

import torch

import xgrad_torch as xt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_threads import openblas  # noqa: E402


def timed(fn, reps):
    """Median wall and CPU milliseconds of one call over reps calls (after one warm-up call)."""
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        t = time.perf_counter()
        c = time.process_time()
        fn()
        wall.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--blas-default", action="store_true", help="leave OpenBLAS's thread count as torch has it")
    args = ap.parse_args()
    blas = None if args.blas_default else openblas()
    torch.manual_seed(0)
    a = torch.randn(1 << 20)
    m = torch.randn(384, 384)
    layer = xt.BlockSparseLinear(2048, 2048, 32)
    x = torch.randn(128, 2048, requires_grad=True)
    f = torch.randn(8, 20000)
    coarse = torch.sort(torch.rand(8, 400) * 0.9 + 0.05, dim=1).values
    resp = xt.Response.hann(0.02)

    def torch_op():
        torch.exp(a).sum()
        m @ m

    def xgrad_op():
        layer(x).sum().backward()
        xt.resample_conv(f, coarse, (0.0, 1.0 / 19999, 20000), resp)

    def both():
        torch_op()
        xgrad_op()

    print("torch_threads,xgrad_threads,torch_ms,xgrad_ms,interleaved_ms,ratio,interleaved_cpu_ms")
    for tt in (1, 2):
        for xg in (None, 1, 2):
            torch.set_num_threads(tt)
            if blas is not None:
                blas.openblas_set_num_threads(tt)
            xt.set_num_threads(xg)
            t_ms, _ = timed(torch_op, args.reps)
            x_ms, _ = timed(xgrad_op, args.reps)
            b_ms, b_cpu = timed(both, args.reps)
            label = f"follow({xt.get_num_threads()})" if xg is None else str(xg)
            print(f"{tt},{label},{t_ms:.3f},{x_ms:.3f},{b_ms:.3f},{b_ms / (t_ms + x_ms):.3f},{b_cpu:.3f}", flush=True)
    xt.set_num_threads(None)


if __name__ == "__main__":
    main()
