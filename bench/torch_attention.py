"""PyTorch (Debian python3-torch 1.13) peer of bench/attention.cpp: attention on q, k, v of shape
(heads, L, 64), float32, written as torch 1.13's nn.MultiheadAttention computes it (bmm of q scaled by
1/sqrt(64) with k^T, softmax, bmm with v: the (heads, L, L) scores and weights are materialised), forward
and backward to q, k and v (loss sum(out * w)). Rows `case,impl,threads,metric,value`: fwd_ms and
fwdbwd_ms (median of REPS after a warm-up), peak_mb (the process's peak resident set, VmHWM: run one
length per process to read it per length); a length that runs out of memory prints `oom,1`.
usage: torch_attention.py THREADS [REPS] [HEADS] [L ...]"""
import math
import sys
import time

import torch


def vm_hwm_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    return 0.0


def median_ms(reps, fn):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1000.0)
    t.sort()
    return t[len(t) // 2]


def attention(q, k, v):
    s = torch.bmm(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(1, 2))
    return torch.bmm(torch.softmax(s, dim=-1), v)


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 else 5
    heads = int(args[2]) if len(args) > 2 else 8
    lengths = [int(a) for a in args[3:]] or [1024, 2048, 4096]
    torch.set_num_threads(threads)
    for L in lengths:
        name = f"L{L}_h{heads}_e64"
        torch.manual_seed(0)
        try:
            q, k, v = (torch.randn(heads, L, 64, requires_grad=True) for _ in range(3))
            w = torch.randn(heads, L, 64)

            def fwd():
                with torch.no_grad():
                    attention(q, k, v)

            def fwdbwd():
                q.grad = k.grad = v.grad = None
                (attention(q, k, v) * w).sum().backward()

            f = median_ms(reps, fwd)
            fb = median_ms(reps, fwdbwd)
        except RuntimeError as e:  # DefaultCPUAllocator: can't allocate memory
            print(f"{name},torch_bmm,{threads},oom,1  # {str(e).splitlines()[0][:80]}")
            continue
        print(f"{name},torch_bmm,{threads},fwd_ms,{f:.4f}")
        print(f"{name},torch_bmm,{threads},fwdbwd_ms,{fb:.4f}")
        print(f"{name},torch_bmm,{threads},peak_mb,{vm_hwm_mb():.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
