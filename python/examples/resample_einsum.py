"""Seed 000 as its PyTorch users wrote it: a resampling convolution through a dense T.

Each of N rows of a finely sampled signal f (B points on [0, 1]) is convolved with a compactly supported
response and read out at A coarse, non-uniform points of its own. The users build T[n, a, b] =
r(coarse[n, a] - fine[b]) once (2 GB at N=20, A=500, B=50000, 97% zeros) and apply it with einsum.
resample_xgrad.py is the same program with xgrad_torch.ResampleConv dropped in.
usage: resample_einsum.py [--full]    (default: small sizes)"""
import math
import sys

import torch


def make_response(width):
    half = width / 2

    def response(d):  # a raised cosine, zero outside |d| < width/2
        return torch.where(d.abs() < half, torch.cos(math.pi * d / (2 * half)) ** 2, torch.zeros(()))
    return response


class Resample(torch.nn.Module):
    def __init__(self, coarse, fine, width):
        super().__init__()
        r = make_response(width)
        self.register_buffer("T", r(coarse[:, :, None] - fine[None, None, :]))  # (N, A, B), dense

    def forward(self, f):  # (N, B) -> (N, A)
        return torch.einsum("nab,nb->na", self.T, f)


def setup(N, A, B, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    fine = torch.linspace(0.0, 1.0, B)
    coarse = torch.sort(torch.rand(N, A, generator=g) * (1 - width) + width / 2, dim=1).values
    return fine, coarse


def main(N=20, A=500, B=50000, width=0.03, steps=5):
    fine, coarse = setup(N, A, B, width)
    model = Resample(coarse, fine, width)
    # recover the fine signal from coarse observations (a deconvolution by gradient descent)
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
