"""PyTorch peers for bench/sparse_training.cpp, CPU, float32, Debian python3-torch.

The same MLP (784 -> H -> H -> 10, ReLU, cross-entropy, Adam lr 1e-3, batch 128, random data):
  torch_dense:   nn.Linear hidden layers;
  torch_masked:  the PyTorch pruning way of sparse training (torch.nn.utils.prune, and the published
                 RigL and SET code): dense hidden weights multiplied by a fixed random 16 x 32 block mask
                 of the given density in every forward; its time and memory do not depend on the mask.
Rows `case,impl,threads,metric,value` as bench/sparse_training.cpp: step_ms (median over REPS windows of
UPDATE_EVERY steps, per step), param_opt_bytes (parameters + Adam's state; for torch_masked the masks too).
usage: torch_sparse_training.py THREADS REPS HIDDEN DENSITY UPDATE_EVERY"""
import sys
import time

import torch

threads, reps, hidden, density, every = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
torch.manual_seed(7)
BATCH = 128
case = f"mlp784_h{hidden}_b{BATCH}_d{density:g}"


def block_mask(out_f, in_f):
    nr, nc = out_f // 32, in_f // 16
    m = torch.zeros(nr * nc)
    m[torch.randperm(nr * nc)[: round(density * nr * nc)]] = 1
    return m.reshape(nr, nc).repeat_interleave(32, 0).repeat_interleave(16, 1)


class Masked(torch.nn.Linear):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.register_buffer("mask", block_mask(o, i))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight * self.mask, self.bias)


def model(kind):
    layer = torch.nn.Linear if kind == "torch_dense" else Masked
    return torch.nn.Sequential(layer(784, hidden), torch.nn.ReLU(), layer(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 10))


x = torch.randn(BATCH, 784)
y = torch.randint(0, 10, (BATCH,))
runs = {}
for kind in ("torch_dense", "torch_masked"):
    net = model(kind)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    runs[kind] = (net, opt, [])


def window(net, opt):
    t = time.perf_counter()
    for _ in range(every):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return (time.perf_counter() - t) * 1e3


for net, opt, _ in runs.values():
    window(net, opt)  # warm-up
for _ in range(reps):
    for net, opt, times in runs.values():
        times.append(window(net, opt))
for kind, (net, opt, times) in runs.items():
    times.sort()
    print(f"{case},{kind},{threads},step_ms,{times[len(times) // 2] / every:.6g}", flush=True)
    nbytes = sum(p.numel() * p.element_size() for p in net.parameters())
    nbytes += sum(b.numel() * b.element_size() for b in net.buffers())
    for state in opt.state.values():
        nbytes += sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v) and v.dim() > 0)
    print(f"{case},{kind},{threads},param_opt_bytes,{nbytes:.6g}", flush=True)
