"""The seeds' programs in PyTorch against the same programs with xgrad_torch dropped in, in one
process: median milliseconds of the forward and of forward+backward, the ratios (PyTorch / xgrad,
> 1 means xgrad is faster) and the memory each formulation holds, at 1 and 2 threads.

Method: the formulations of a workload are timed in interleaved rounds (--rounds, default 7): in
each round every formulation in turn, after a pause (below), runs its forward once untimed, then
timed --reps times (default 3) and for at least 50 ms, then its forward+backward the same way. A
time (fwd_ms, fwdbwd_ms) is the median of all of a formulation's repetitions; a ratio is the median
over the rounds of the peer's round median over xgrad's, printed with the smallest and largest
round (*_ratio_min, *_ratio_max). Timing each formulation in one block instead let the machine's
drift between blocks (these VMs drift by up to 2x between hours, and by 10-30% within minutes)
decide ratios near 1: 16 groups of 256 at 1 thread against bmm gave 0.87-1.28x in blocks over six
runs, and 1.07-1.10x interleaved over three (docs/python.md).

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

usage: benchmark.py [--tiny] [--threads 1,2] [--rounds 7] [--reps 3] [--blas-default]
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
# Seconds each pass of each formulation is timed for per round, at least (see timed).
MIN_ROUND_S = 0.05


def timed(fn, reps):
    """Times fn at least `reps` times and for at least MIN_ROUND_S seconds in all (a call of about a
    millisecond gets tens of repetitions, so its median is not decided by two or three of them)."""
    ts = []
    while len(ts) < reps or sum(ts) < MIN_ROUND_S:
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def measure(formulations, rounds, reps):
    """formulations: (name, forward, forward+backward) triples. Each is warmed up once, then timed in
    `rounds` interleaved rounds: per round, every formulation in turn (after the SETTLE_S pause) runs
    its forward once untimed and `reps` times timed under no_grad, then its forward+backward the same
    way (the untimed call meets the caches the previous formulation left and the workers the pause
    put to sleep). Returns, per name and per pass ("fwd", "fwdbwd"), the list of per-round medians
    and the list of every time (s)."""
    for _, fwd, fb in formulations:
        with torch.no_grad():
            fwd()
        fb()
    out = {name: {"fwd": ([], []), "fwdbwd": ([], [])} for name, _, _ in formulations}
    for _ in range(rounds):
        for name, fwd, fb in formulations:
            time.sleep(SETTLE_S)
            with torch.no_grad():
                fwd()  # untimed: the caches and the sleeping workers after the pause
                ts = timed(fwd, reps)
            out[name]["fwd"][0].append(statistics.median(ts))
            out[name]["fwd"][1].extend(ts)
            fb()
            ts = timed(fb, reps)
            out[name]["fwdbwd"][0].append(statistics.median(ts))
            out[name]["fwdbwd"][1].extend(ts)
    return out


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def row(case, impl, threads, metric, value):
    print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)


def report_times(case, threads, results):
    for name, passes in results.items():
        for p in ("fwd", "fwdbwd"):
            row(case, name, threads, f"{p}_ms", statistics.median(passes[p][1]) * 1e3)


def round_ratios(results, peer, p):
    """The peer's time over xgrad's, per round (the two timed within seconds of each other): the
    median over the rounds, and the smallest and largest round."""
    rs = [a / b for a, b in zip(results[peer][p][0], results["xgrad"][p][0])]
    return statistics.median(rs), min(rs), max(rs)


def report_ratio(case, label, threads, results, peer, p):
    r, lo, hi = round_ratios(results, peer, p)
    row(case, label, threads, f"{p}_ratio", r)
    row(case, label, threads, f"{p}_ratio_min", lo)
    row(case, label, threads, f"{p}_ratio_max", hi)


SUMMARY = []  # (workload, threads, {pass: (peer, ratio, min, max, xgrad ms, peer ms)}), for print_summary


def summarize(workload, threads, results, peers):
    """peers: pass -> the peer it is compared with. Adds the workload's line to SUMMARY."""
    cells = {}
    for p, peer in peers.items():
        cells[p] = (peer, *round_ratios(results, peer, p), statistics.median(results["xgrad"][p][1]) * 1e3,
                    statistics.median(results[peer][p][1]) * 1e3)
    SUMMARY.append((workload, threads, cells))


def ratio(r):
    return f"{r:.2f}" if r < 10 else f"{r:.0f}"


def print_summary():
    """The ratio table of the run (markdown), after the CSV rows."""
    print("\n| workload | threads | forward: peer / xgrad, median of rounds (rounds' range) | forward + backward |")
    print("|---|---:|---|---|")
    for workload, threads, cells in SUMMARY:
        text = [f"**{ratio(r)}x** ({ratio(lo)}-{ratio(hi)}; {ours:.3g} vs {theirs:.3g} ms, {peer})"
                for peer, r, lo, hi, ours, theirs in (cells[p] for p in ("fwd", "fwdbwd"))]
        print(f"| {workload} | {threads} | {text[0]} | {text[1]} |")


def seed000(threads, rounds, reps, N, A, B, width):
    fine, coarse = resample_einsum.setup(N, A, B, width)
    dense = resample_einsum.Resample(coarse, fine, width)
    ours = resample_xgrad.Resample(coarse, fine, width)
    f = torch.randn(N, B, requires_grad=True)
    g = torch.randn(N, A)
    err = float((dense(f) - ours(f)).abs().max())
    case = f"resample_N{N}_A{A}_B{B}"

    def formulation(name, model):
        def fb():
            model(f).backward(g)
            f.grad = None
        return name, lambda: model(f), fb

    results = measure([formulation("torch_einsum", dense), formulation("xgrad", ours)], rounds, reps)
    report_times(case, threads, results)
    row(case, "torch_einsum", threads, "bytes_held", tensor_bytes([dense.T]))
    row(case, "xgrad", threads, "bytes_held", ours.conv.bytes_held() + tensor_bytes([ours.conv.coarse]))
    row(case, "xgrad", threads, "graph_bytes_per_forward", xt._C.resample_conv_graph_bytes(N * A))
    row(case, "xgrad", threads, "max_abs_diff_vs_einsum", err)
    for p in ("fwd", "fwdbwd"):
        report_ratio(case, "einsum/xgrad", threads, results, "torch_einsum", p)
    summarize(f"resampling N={N} A={A} B={B}", threads, results, {"fwd": "torch_einsum", "fwdbwd": "torch_einsum"})


def seed004(threads, rounds, reps, groups, fin, fout, batch):
    torch.manual_seed(0)
    IN, OUT = groups * fin, groups * fout
    x = torch.randn(batch, IN, requires_grad=True)
    models = {
        "torch_modulelist": block_diagonal_torch.GroupedLoop(groups, fin, fout),
        "torch_masked": block_diagonal_torch.MaskedDense(groups, fin, fout),
        "torch_bmm": block_diagonal_torch.GroupedBmm(groups, fin, fout),
        "xgrad": xt.BlockSparseLinear(IN, OUT, groups),
    }
    case = f"block_diagonal_g{groups}_{fin}x{fout}_batch{batch}"

    def formulation(name, model):
        def fb():
            model(x).sum().backward()
            x.grad = None
            model.zero_grad(set_to_none=True)
        return name, lambda: model(x), fb

    results = measure([formulation(n, m) for n, m in models.items()], rounds, reps)
    report_times(case, threads, results)
    for name, model in models.items():
        row(case, name, threads, "bytes_held", tensor_bytes(list(model.parameters()) + list(model.buffers())))
    peers = ("torch_modulelist", "torch_masked", "torch_bmm")
    for name in peers:
        for p in ("fwd", "fwdbwd"):
            report_ratio(case, f"{name}/xgrad", threads, results, name, p)
    fastest = {p: min(peers, key=lambda n: statistics.median(results[n][p][1])) for p in ("fwd", "fwdbwd")}
    for p, peer in fastest.items():
        report_ratio(case, f"fastest_torch({peer})/xgrad", threads, results, peer, p)
    summarize(f"block-diagonal {groups} groups of {fin}x{fout}, batch {batch}", threads, results, fastest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="small sizes: a smoke test, not a measurement")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each pass per round")
    ap.add_argument("--blas-default", action="store_true", help="leave OpenBLAS's thread count as torch has it")
    args = ap.parse_args()
    rounds, reps = (1, 1) if args.tiny else (args.rounds, args.reps)
    global SETTLE_S, MIN_ROUND_S
    if args.tiny:
        SETTLE_S = 0.0  # a smoke test of the script: nothing is timed that the pause would protect
        MIN_ROUND_S = 0.0
    blas = None if args.blas_default else openblas()
    print("case,impl,threads,metric,value")
    for t in (int(v) for v in args.threads.split(",")):
        torch.set_num_threads(t)
        if blas is not None:
            blas.openblas_set_num_threads(t)
        lib = blas or openblas()
        row("threads", "openblas", t, "num_threads", lib.openblas_get_num_threads() if lib else float("nan"))
        if args.tiny:
            seed000(t, rounds, reps, N=3, A=20, B=400, width=0.05)
            seed004(t, rounds, reps, groups=4, fin=8, fout=8, batch=8)
        else:
            seed000(t, rounds, reps, N=20, A=500, B=50000, width=0.03)
            seed004(t, rounds, reps, groups=64, fin=64, fout=64, batch=256)
            seed004(t, rounds, reps, groups=16, fin=256, fout=256, batch=256)
    print_summary()


if __name__ == "__main__":
    main()
