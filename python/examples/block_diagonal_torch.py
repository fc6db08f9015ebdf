"""Seed 004 as its PyTorch users wrote it: a non-fully-connected (block-diagonal) linear layer, as a
ModuleList loop over the groups, or as a dense Linear whose weight is multiplied by a pruning mask.
block_diagonal_xgrad.py is the same program with xgrad_torch.BlockSparseLinear dropped in.
usage: block_diagonal_torch.py [--full]"""
import sys

import torch


class GroupedLoop(torch.nn.Module):  # one Linear per group, run in a Python loop
    def __init__(self, groups, fin, fout):
        super().__init__()
        self.groups, self.fin = groups, fin
        self.layers = torch.nn.ModuleList([torch.nn.Linear(fin, fout) for _ in range(groups)])

    def forward(self, x):
        xs = x.view(*x.shape[:-1], self.groups, self.fin)
        return torch.cat([self.layers[i](xs[..., i, :]) for i in range(self.groups)], dim=-1)


class MaskedDense(torch.nn.Module):  # a dense Linear with a pruning mask: 1/groups of it is used
    def __init__(self, groups, fin, fout):
        super().__init__()
        self.lin = torch.nn.Linear(groups * fin, groups * fout)
        self.register_buffer("mask", torch.block_diag(*[torch.ones(fout, fin) for _ in range(groups)]))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.lin.weight * self.mask, self.lin.bias)


class GroupedBmm(torch.nn.Module):  # the fastest PyTorch formulation we know: one batched matmul
    def __init__(self, groups, fin, fout):
        super().__init__()
        self.groups, self.fin, self.fout = groups, fin, fout
        self.W = torch.nn.Parameter(torch.randn(groups, fin, fout) / fin ** 0.5)
        self.b = torch.nn.Parameter(torch.zeros(groups * fout))

    def forward(self, x):
        batch = x.shape[0]
        xs = x.view(batch, self.groups, self.fin).transpose(0, 1)
        return torch.bmm(xs, self.W).transpose(0, 1).reshape(batch, self.groups * self.fout) + self.b


def make_model(kind, groups, fin, fout, classes=10):
    layer = {"loop": GroupedLoop, "masked": MaskedDense}[kind](groups, fin, fout)
    return torch.nn.Sequential(layer, torch.nn.ReLU(), torch.nn.Linear(groups * fout, classes))


def main(kind="loop", groups=64, fin=64, fout=64, batch=256, steps=5):
    torch.manual_seed(0)
    model = make_model(kind, groups, fin, fout)
    x = torch.randn(batch, groups * fin)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"{kind} step {step} loss {loss.item():.6g}")


if __name__ == "__main__":
    for kind in ("loop", "masked"):
        if "--full" in sys.argv:
            main(kind)
        else:
            main(kind, groups=4, fin=8, fout=8, batch=16)
