"""resample_einsum.py with xgrad_torch dropped in: the same program, T never built.
The changed lines are marked `# xgrad`. The raised cosine cos^2(pi d / width) on |d| < width/2 is
xgrad's Response.hann(width) times width/2 (xgrad's named responses have unit area).
usage: resample_xgrad.py [--full]"""
import math
import sys

import torch

import xgrad_torch as xt  # xgrad


class Resample(torch.nn.Module):
    def __init__(self, coarse, fine, width):
        super().__init__()
        B = fine.numel()  # xgrad
        self.conv = xt.ResampleConv(coarse, (0.0, 1.0 / (B - 1), B), xt.Response.hann(width))  # xgrad
        self.scale = width / 2  # xgrad: hann has unit area

    def forward(self, f):  # (N, B) -> (N, A)
        return self.conv(f) * self.scale  # xgrad


def setup(N, A, B, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    fine = torch.linspace(0.0, 1.0, B)
    coarse = torch.sort(torch.rand(N, A, generator=g) * (1 - width) + width / 2, dim=1).values
    return fine, coarse


def main(N=20, A=500, B=50000, width=0.03, steps=5):
    fine, coarse = setup(N, A, B, width)
    model = Resample(coarse, fine, width)
    truth = torch.sin(2 * math.pi * 5 * fine).repeat(N, 1)
    observed = model(truth)
    f = torch.zeros(N, B, requires_grad=True)
    opt = torch.optim.Adam([f], lr=0.05)
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(f), observed)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6g}")


if __name__ == "__main__":
    if "--full" in sys.argv:
        main()
    else:
        main(N=4, A=50, B=2000, width=0.03)
