"""PyTorch (Debian python3-torch) peer of bench/resample_conv.cpp: the seed-000 workload as the user
runs it (/work/shared/reference/torch_seed_workloads.py): a dense T built once, then
einsum('nab,nb->na', T, f); and T.to_sparse() + bmm. Prints CSV rows `case,impl,threads,metric,value`.
usage: torch_resample_conv.py THREADS [REPS]"""
import math
import sys
import resource
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
torch.set_num_threads(threads)
torch.manual_seed(0)


def row(case, impl, metric, value):
    print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)


last_cpu_ms = 0.0
last_minflt = 0.0  # minor page faults per call of the last bench() (mean over the timed repetitions)


def bench(fn, reps=reps, warm=1):
    """Median wall ms; last_cpu_ms gets the process CPU ms of that repetition (immune to waiting
    for the core when other processes run)."""
    global last_cpu_ms, last_minflt
    for _ in range(warm):
        fn()
    ts = []
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(reps):
        c = time.process_time()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t, time.process_time() - c))
    last_minflt = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / reps
    ts.sort()
    last_cpu_ms = ts[len(ts) // 2][1] * 1e3
    return ts[len(ts) // 2][0] * 1e3


def row_timed(case, impl, metric, ms):
    row(case, impl, metric, ms)
    row(case, impl, metric.replace("_ms", "_cpu_ms"), last_cpu_ms)
    row(case, impl, metric.replace("_ms", "_minflt"), last_minflt)


N, A, B, width = 20, 500, 50000, 0.03
fine = torch.linspace(0.0, 1.0, B)
coarse = torch.sort(torch.rand(N, A) * (1 - width) + width / 2, dim=1).values
half = width / 2


def response(d):
    return torch.where(d.abs() < half, torch.cos(math.pi * d / (2 * half)) ** 2, torch.zeros(()))


t0, c0 = time.perf_counter(), time.process_time()
T = response(coarse[:, :, None] - fine[None, None, :])  # (N, A, B) dense
setup = (time.perf_counter() - t0) * 1e3
row("seed_callable", "torch_einsum", "setup_ms", setup)
row("seed_callable", "torch_einsum", "setup_cpu_ms", (time.process_time() - c0) * 1e3)
row("seed_callable", "torch_einsum", "bytes", T.numel() * T.element_size())
row("seed_callable", "torch_einsum", "density", float((T != 0).float().mean()))
f = torch.randn(N, B, requires_grad=True)
g = torch.randn(N, A)
with torch.no_grad():
    row_timed("seed_callable", "torch_einsum", "fwd_ms", bench(lambda: torch.einsum("nab,nb->na", T, f)))


def fb():
    out = torch.einsum("nab,nb->na", T, f)
    out.backward(g)
    f.grad = None


row_timed("seed_callable", "torch_einsum", "fwdbwd_ms", bench(fb))
t0 = time.perf_counter()
Ts = T.to_sparse()
row("seed_callable", "torch_sparse_bmm", "setup_ms", setup + (time.perf_counter() - t0) * 1e3)
row("seed_callable", "torch_sparse_bmm", "bytes",
    Ts.values().numel() * Ts.values().element_size() + Ts.indices().numel() * Ts.indices().element_size())
del T
with torch.no_grad():
    row_timed("seed_callable", "torch_sparse_bmm", "fwd_ms",
        bench(lambda: torch.bmm(Ts, f.unsqueeze(-1)).squeeze(-1), reps=max(3, reps // 2)))


def sfb():
    out = torch.bmm(Ts, f.unsqueeze(-1)).squeeze(-1)
    out.backward(g)
    f.grad = None


row_timed("seed_callable", "torch_sparse_bmm", "fwdbwd_ms", bench(sfb, reps=max(3, reps // 2)))
