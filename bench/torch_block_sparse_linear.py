"""PyTorch peers for bench/block_sparse_linear.cpp (seed 004), CPU, float32, Debian python3-torch.

Same shapes as ours: in = out = 4096, batch 256. Prints CSV rows `case,impl,threads,metric,value`
(fwd_ms / fwdbwd_ms: median of --reps runs after a warm-up of at least 1 s; *_cpu_ms: median process CPU
time, all threads, which a busy machine disturbs less; a training step is fn().sum().backward()
with x requiring grad, like /work/shared/reference/torch_seed_workloads.py).
  diag_g64x64, diag_g16x256: torch_modulelist (loop of nn.Linear), torch_bmm (grouped bmm),
                             torch_masked_dense (nn.Linear weight * block-diagonal mask)
  masked_dense: torch_masked_dense with a random 64x64-block mask of density 1/16 (its cost does not
                depend on the mask: it is dense), used as the peer of every rand_* case.
usage: torch_block_sparse_linear.py THREADS [REPS] [--peak masked_dense|dense_linear]"""
import sys
import resource
import time

import torch

IN = OUT = 4096
BATCH = 256


last_minflt = 0.0  # minor page faults per call of the last median_ms (mean over the timed repetitions)
last_cpu_ms = 0.0  # median process CPU time (all threads) per call of the last median_ms, as the C++ side's *_cpu_ms


def median_ms(fn, reps):
    global last_minflt, last_cpu_ms
    # Warm up for at least 1 s (and twice), like the C++ side: shorter warm-ups were not enough there.
    t0 = time.perf_counter()
    n = 0
    while n < 2 or time.perf_counter() - t0 < 1.0:
        fn()
        n += 1
    ts, cs = [], []
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(reps):
        t = time.perf_counter()
        c = time.process_time()
        fn()
        cs.append(time.process_time() - c)
        ts.append(time.perf_counter() - t)
    last_minflt = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / reps
    cs.sort()
    last_cpu_ms = cs[len(cs) // 2] * 1e3
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def row(case, impl, threads, metric, value):
    print(f"{case},{impl},{threads},{metric},{value:.6g}", flush=True)


def random_block_mask(bs, density, gen):
    nr, nc = OUT // bs, IN // bs
    keep = int(nr * nc * density)
    ids = torch.randperm(nr * nc, generator=gen)[:keep]
    m = torch.zeros(nr * nc)
    m[ids] = 1
    return m.reshape(nr, nc).repeat_interleave(bs, 0).repeat_interleave(bs, 1)


def make(case):
    """Returns {impl: (fn, param_bytes)} for one case."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, IN, requires_grad=True)
    out = {}
    if case.startswith("diag_"):
        groups, size = {"diag_g64x64": (64, 64), "diag_g16x256": (16, 256)}[case]
        fin = fout = size
        layers = torch.nn.ModuleList([torch.nn.Linear(fin, fout) for _ in range(groups)])

        def loop():
            xs = x.view(BATCH, groups, fin)
            return torch.cat([layers[i](xs[:, i]) for i in range(groups)], dim=1)

        out["torch_modulelist"] = (loop, sum(p.numel() * 4 for p in layers.parameters()))
        W = torch.randn(groups, fin, fout, requires_grad=True)
        bias = torch.randn(OUT, requires_grad=True)

        def bmm():
            return torch.bmm(x.view(BATCH, groups, fin).transpose(0, 1), W).transpose(0, 1).reshape(BATCH, OUT) + bias

        out["torch_bmm"] = (bmm, (W.numel() + bias.numel()) * 4)
        mask = torch.block_diag(*[torch.ones(fout, fin) for _ in range(groups)])
    else:
        mask = random_block_mask(64, 1 / 16, torch.Generator().manual_seed(1))
    lin = torch.nn.Linear(IN, OUT)

    def masked():
        return torch.nn.functional.linear(x, lin.weight * mask, lin.bias)

    out["torch_masked_dense"] = (masked, sum(p.numel() * 4 for p in lin.parameters()))
    return x, out


def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
    return -1


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    reps = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 5
    torch.set_num_threads(threads)
    if "--peak" in sys.argv:
        which = sys.argv[sys.argv.index("--peak") + 1]
        before = status_kb("VmRSS:")
        x, impls = make("masked_dense")
        if which == "masked_dense":
            impls["torch_masked_dense"][0]().sum().backward()
        else:
            lin = torch.nn.Linear(IN, OUT)
            lin(x).sum().backward()
        row(which, "torch_" + which, threads, "peak_bytes", (status_kb("VmHWM:") - before) * 1024)
        return
    for case in ["masked_dense", "diag_g64x64", "diag_g16x256"]:
        x, impls = make(case)
        for impl, (fn, nbytes) in impls.items():
            def fb():
                fn().sum().backward()
                x.grad = None
            row(case, impl, threads, "param_bytes", nbytes)
            row(case, impl, threads, "fwd_ms", median_ms(fn, reps))
            row(case, impl, threads, "fwd_cpu_ms", last_cpu_ms)
            row(case, impl, threads, "fwd_minflt", last_minflt)
            row(case, impl, threads, "fwdbwd_ms", median_ms(fb, reps))
            row(case, impl, threads, "fwdbwd_cpu_ms", last_cpu_ms)
            row(case, impl, threads, "fwdbwd_minflt", last_minflt)


if __name__ == "__main__":
    main()
