"""block_diagonal_torch.py with xgrad_torch dropped in: the layer stores and computes only its
diagonal blocks. The changed lines are marked `# xgrad`.
usage: block_diagonal_xgrad.py [--full]"""
import sys

import torch

import xgrad_torch as xt  # xgrad


def make_model(groups, fin, fout, classes=10):
    layer = xt.BlockSparseLinear(groups * fin, groups * fout, groups)  # xgrad: `groups` diagonal blocks
    return torch.nn.Sequential(layer, torch.nn.ReLU(), torch.nn.Linear(groups * fout, classes))


def main(groups=64, fin=64, fout=64, batch=256, steps=5):
    torch.manual_seed(0)
    model = make_model(groups, fin, fout)
    x = torch.randn(batch, groups * fin)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"xgrad step {step} loss {loss.item():.6g}")


if __name__ == "__main__":
    if "--full" in sys.argv:
        main()
    else:
        main(groups=4, fin=8, fout=8, batch=16)
