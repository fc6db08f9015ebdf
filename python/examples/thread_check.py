"""Does xgrad's TBB pool, next to torch's OpenMP pool, oversubscribe the cores? A short check (the
measurement behind the thread policy in docs/python.md): alternate a torch op (OpenMP-parallel
elementwise + matmul) with an xgrad op (block-sparse forward+backward, resample_conv forward) and
compare the interleaved loop's time with the sum of each op's time alone, for torch at 1 and 2
threads and xgrad following torch (the default) or fixed at 1 or 2 threads.
A ratio interleaved / (torch alone + xgrad alone) near 1 means no contention between the pools.
usage: thread_check.py [--reps 20]"""
import argparse
import time

import torch

import xgrad_torch as xt


def timed(fn, reps):
    fn()
    t = time.perf_counter()
    c = time.process_time()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e3, (time.process_time() - c) / reps * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
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
            xt.set_num_threads(xg)
            t_ms, _ = timed(torch_op, args.reps)
            x_ms, _ = timed(xgrad_op, args.reps)
            b_ms, b_cpu = timed(both, args.reps)
            label = f"follow({xt.get_num_threads()})" if xg is None else str(xg)
            print(f"{tt},{label},{t_ms:.3f},{x_ms:.3f},{b_ms:.3f},{b_ms / (t_ms + x_ms):.3f},{b_cpu:.3f}", flush=True)
    xt.set_num_threads(None)


if __name__ == "__main__":
    main()
