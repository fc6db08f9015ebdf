"""Recomputes the graph-layer cases of tests/nn/test_graph.cpp with PyTorch 1.13 (Debian python3-torch).

usage: graph_parity.py DIR

There is no torch_geometric on the machine: GCNConv, GraphConv, SAGEConv and GATConv are written
here from PyG's definitions (gcn_norm with add_remaining_self_loops, scatter sum, mean and max
aggregation, GATConv's attention with PyG's softmax), on the edge_index (2, E) itself with
index_add / scatter, not on a CSR matrix, so they share no code path with xgrad's layers. Parameter
names are PyG's (and xgrad's).

DIR/manifest.json lists the cases: {name, dtype, ctor, num_nodes, params, weighted, attention}.
For each, builds the module with `ctor`, checks that its parameter names are `params`, loads them
from NAME__p_<param>.npy, runs it on NAME__in_x.npy (requiring grad), NAME__in_ei.npy (int64) and,
when weighted, the edge weights NAME__in_w.npy, backpropagates sum(out * seed) (NAME__seed.npy) and
writes NAME__torch_out.npy, NAME__torch_grad_x.npy and NAME__torch_grad_p_<param>.npy. With
attention (GATConv), also NAME__torch_alpha.npy: the attention weights of PyG's edge list, put in
the order of xgrad's edge list NAME__in_att_ei.npy (each (source, target) looked up)."""
import json
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)


def add_remaining_self_loops(ei, w, n, fill=1.0):
    mask = ei[0] != ei[1]
    loop_w = torch.full((n,), fill, dtype=w.dtype)
    loop_w[ei[0][~mask]] = w[~mask]
    loops = torch.arange(n).repeat(2, 1)
    return torch.cat([ei[:, mask], loops], 1), torch.cat([w[mask], loop_w])


class GCNConv(nn.Module):  # PyG's GCNConv
    def __init__(self, i, o, bias=True, add_self_loops=True, normalize=True):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(torch.zeros(o)) if bias else None
        self.loops, self.normalize = add_self_loops, normalize

    def forward(self, x, ei, n, w=None):
        w = torch.ones(ei.size(1), dtype=x.dtype) if w is None else w
        if self.normalize:
            if self.loops:
                ei, w = add_remaining_self_loops(ei, w, n)
            row, col = ei
            deg = torch.zeros(n, dtype=x.dtype).index_add(0, col, w)
            dis = deg.pow(-0.5)
            dis.masked_fill_(dis == float("inf"), 0)
            w = dis[row] * w * dis[col]
        h = self.lin(x)
        out = torch.zeros(n, h.size(1), dtype=x.dtype).index_add(0, ei[1], w[:, None] * h[ei[0]])
        return out + self.bias if self.bias is not None else out


def scatter(x, src, dst, n, aggr):
    """PyG's aggregation of the messages x[src] at dst: sum, mean or max, 0 where no message arrives."""
    if aggr == "max":
        idx = dst[:, None].expand(-1, x.size(1))
        return torch.zeros(n, x.size(1), dtype=x.dtype).scatter_reduce(0, idx, x[src], "amax", include_self=False)
    s = torch.zeros(n, x.size(1), dtype=x.dtype).index_add(0, dst, x[src])
    if aggr == "sum":
        return s
    cnt = torch.zeros(n, dtype=x.dtype).index_add(0, dst, torch.ones(src.size(0), dtype=x.dtype))
    return s / cnt.clamp(min=1)[:, None]


class GraphConv(nn.Module):  # PyG's GraphConv (aggr='add')
    def __init__(self, i, o, bias=True):
        super().__init__()
        self.lin_rel = nn.Linear(i, o, bias=bias)
        self.lin_root = nn.Linear(i, o, bias=False)

    def forward(self, x, ei, n, w=None):
        msg = x[ei[0]] if w is None else w[:, None] * x[ei[0]]
        out = torch.zeros(n, x.size(1), dtype=x.dtype).index_add(0, ei[1], msg)
        return self.lin_rel(out) + self.lin_root(x)


class SAGEConv(nn.Module):  # PyG's SAGEConv, with the reversed direction added
    def __init__(self, i, o, aggr="mean", bias=True, root_weight=True, direction="in"):
        super().__init__()
        self.lin_l = nn.Linear(i, o, bias=bias)
        if direction == "both":
            self.lin_rev = nn.Linear(i, o, bias=False)
        if root_weight:
            self.lin_r = nn.Linear(i, o, bias=False)
        self.aggr, self.direction, self.root = aggr, direction, root_weight

    def forward(self, x, ei, n):
        src, dst = ei
        if self.direction == "out":
            src, dst = dst, src
        out = self.lin_l(scatter(x, src, dst, n, self.aggr))
        if self.direction == "both":
            out = out + self.lin_rev(scatter(x, dst, src, n, self.aggr))
        if self.root:
            out = out + self.lin_r(x)
        return out


class GATConv(nn.Module):  # PyG's GATConv
    def __init__(self, i, o, heads=1, concat=True, negative_slope=0.2, add_self_loops=True, bias=True):
        super().__init__()
        self.h, self.c, self.concat, self.slope, self.loops = heads, o, concat, negative_slope, add_self_loops
        self.lin = nn.Linear(i, heads * o, bias=False)
        self.att_src = nn.Parameter(torch.zeros(1, heads, o))
        self.att_dst = nn.Parameter(torch.zeros(1, heads, o))
        self.bias = nn.Parameter(torch.zeros(heads * o if concat else o)) if bias else None

    def forward(self, x, ei, n):
        if self.loops:  # remove_self_loops, then add_self_loops
            ei = ei[:, ei[0] != ei[1]]
            ei = torch.cat([ei, torch.arange(n).repeat(2, 1)], 1)
        h = self.lin(x).view(-1, self.h, self.c)
        a_src = (h * self.att_src).sum(-1)
        a_dst = (h * self.att_dst).sum(-1)
        src, dst = ei
        e = torch.nn.functional.leaky_relu(a_src[src] + a_dst[dst], self.slope)
        # PyG's softmax: the (detached) max per target, exp, the sum per target.
        idx = dst[:, None].expand(-1, self.h)
        m = torch.full((n, self.h), -float("inf"), dtype=x.dtype).scatter_reduce(
            0, idx, e.detach(), "amax", include_self=True)
        ex = (e - m[dst]).exp()
        s = torch.zeros(n, self.h, dtype=x.dtype).index_add(0, dst, ex)
        alpha = ex / (s[dst] + 1e-16)
        out = torch.zeros(n, self.h, self.c, dtype=x.dtype).index_add(0, dst, h[src] * alpha[..., None])
        out = out.reshape(n, self.h * self.c) if self.concat else out.mean(1)
        self.edges, self.alpha = ei, alpha.detach()
        return out + self.bias if self.bias is not None else out


d = sys.argv[1]
for case in json.load(open(f"{d}/manifest.json")):
    name = case["name"]
    dtype = {"float32": torch.float32, "float64": torch.float64}[case["dtype"]]
    m = eval(case["ctor"]).to(dtype)
    names = sorted(n for n, _ in m.named_parameters())
    assert names == sorted(case["params"]), (name, names, case["params"])
    with torch.no_grad():
        for n, p in m.named_parameters():
            v = torch.from_numpy(np.load(f"{d}/{name}__p_{n}.npy"))
            assert v.shape == p.shape and v.dtype == dtype, (name, n, v.shape, p.shape, v.dtype)
            p.copy_(v)
    x = torch.from_numpy(np.load(f"{d}/{name}__in_x.npy")).requires_grad_(True)
    ei = torch.from_numpy(np.load(f"{d}/{name}__in_ei.npy")).long()
    if case["weighted"]:
        out = m(x, ei, case["num_nodes"], torch.from_numpy(np.load(f"{d}/{name}__in_w.npy")))
    else:
        out = m(x, ei, case["num_nodes"])
    (out * torch.from_numpy(np.load(f"{d}/{name}__seed.npy"))).sum().backward()
    if case["attention"]:
        position = {(int(s), int(t)): k for k, (s, t) in enumerate(m.edges.t().tolist())}
        ours = np.load(f"{d}/{name}__in_att_ei.npy")
        np.save(f"{d}/{name}__torch_alpha.npy", m.alpha[[position[(int(s), int(t))] for s, t in ours.T]].numpy())
    np.save(f"{d}/{name}__torch_out.npy", out.detach().numpy())
    np.save(f"{d}/{name}__torch_grad_x.npy", x.grad.numpy())
    for n, p in m.named_parameters():
        np.save(f"{d}/{name}__torch_grad_p_{n}.npy", p.grad.numpy())
