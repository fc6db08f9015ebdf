"""PyTorch (Debian python3-torch) peer of bench/graph_layers.cpp: the same layer steps written the way
PyTorch Geometric computes them (no PyG in Debian: its message passing, by hand), on the same graph
(torch_index_ops.py's splitmix64 edges src -> dst, duplicates kept, as PyG keeps them), x (N, 64)
float32. Prints CSV rows `case,impl,threads,metric,value` (impl: the torch form); fwdbwd_ms: forward, then
backward with a seed of ones, median of REPS steps after a warm-up of at least 0.3 s.
  sage  SAGEConv(64, 64): x[src] -> scatter_reduce(mean) to dst (torch_scatter_reduce), or index_add_
        divided by the in-degree (torch_index_add) -> lin_l, + lin_r(x)
  gcn   GCNConv(64, 64): self-loops, deg^-1/2 edge norms (computed once: PyG's cached=True),
        x W -> (x W)[src] * norm -> index_add_ to dst, + b
  gat   GATConv(64, 8, heads=8): self-loops, alpha = leaky_relu(a_src.h[src] + a_dst.h[dst]),
        softmax over each dst (scatter_reduce amax, exp, index_add_ of the sums), h[src] * alpha
        index_add_ to dst, heads concatenated, + b
usage: torch_graph_layers.py THREADS [REPS]"""
import sys
import warnings

import torch
import torch.nn.functional as F

from torch_index_ops import N, median_ms
from torch_index_ops import make_graph as make_edges

C = 64


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 else 15
    torch.set_num_threads(threads)
    warnings.filterwarnings("ignore", message="scatter_reduce\\(\\) is in beta")
    torch.manual_seed(1)
    src, dst, _ = make_edges()
    loops = torch.arange(N)
    src_l, dst_l = torch.cat([src, loops]), torch.cat([dst, loops])
    x = torch.randn(N, C, requires_grad=True)

    lin_l, lin_r = torch.nn.Linear(C, 64), torch.nn.Linear(C, 64, bias=False)

    def sage():
        agg = torch.zeros(N, C).scatter_reduce(0, dst[:, None].expand(-1, C), x.index_select(0, src), "mean",
                                               include_self=False)
        return lin_l(agg) + lin_r(x)

    deg_in = torch.zeros(N).index_add_(0, dst, torch.ones(dst.numel())).clamp(min=1)[:, None]

    def sage_index_add():  # the same mean as a sum by index_add_ over the in-degree
        agg = torch.zeros(N, C).index_add_(0, dst, x.index_select(0, src)) / deg_in
        return lin_l(agg) + lin_r(x)

    w_gcn, b_gcn = torch.nn.Linear(C, 64, bias=False), torch.zeros(64, requires_grad=True)
    deg = torch.zeros(N).index_add_(0, dst_l, torch.ones(dst_l.numel()))
    dinv = deg.pow(-0.5)
    norm = (dinv[src_l] * dinv[dst_l])[:, None]

    def gcn():
        h = w_gcn(x)
        return torch.zeros(N, 64).index_add_(0, dst_l, h.index_select(0, src_l) * norm) + b_gcn

    H, Cg = 8, 8
    w_gat = torch.nn.Linear(C, H * Cg, bias=False)
    a_src = torch.randn(1, H, Cg, requires_grad=True)
    a_dst = torch.randn(1, H, Cg, requires_grad=True)
    b_gat = torch.zeros(H * Cg, requires_grad=True)

    def gat():
        h = w_gat(x).view(N, H, Cg)
        s_src, s_dst = (h * a_src).sum(-1), (h * a_dst).sum(-1)  # (N, H)
        e = F.leaky_relu(s_src.index_select(0, src_l) + s_dst.index_select(0, dst_l), 0.2)  # (E, H)
        m = torch.full((N, H), -float("inf")).scatter_reduce(0, dst_l[:, None].expand(-1, H), e, "amax",
                                                             include_self=True)
        p = (e - m.index_select(0, dst_l)).exp()
        s = torch.zeros(N, H).index_add_(0, dst_l, p)
        alpha = p / s.index_select(0, dst_l)
        out = torch.zeros(N, H, Cg).index_add_(0, dst_l, h.index_select(0, src_l) * alpha[:, :, None])
        return out.reshape(N, H * Cg) + b_gat

    seed = torch.ones(N, 64)
    params = [x, a_src, a_dst, b_gat, b_gcn, *lin_l.parameters(), *lin_r.parameters(), *w_gcn.parameters(),
              *w_gat.parameters()]

    def step(fn):
        def run():
            for p in params:
                p.grad = None
            fn().backward(seed)
        return median_ms(run, reps)

    for name, impl, fn in (("sage", "torch_scatter_reduce", sage), ("sage", "torch_index_add", sage_index_add),
                           ("gcn", "torch_index_add", gcn), ("gat", "torch_index_add", gat)):
        print(f"{name},{impl},{threads},fwdbwd_ms,{step(fn):.6g}", flush=True)


if __name__ == "__main__":
    main()
