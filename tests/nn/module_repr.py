"""Writes PyTorch's repr of the modules that tests/nn/test_module.cpp prints with xgrad, to DIR/NAME.txt
(Debian python3-torch 1.13)."""
import sys

import torch
from torch import nn

d = sys.argv[1]


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.25), nn.Linear(8, 3, bias=False))
        self.head = nn.LogSoftmax(dim=1)


models = {
    "sequential": nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2, bias=False),
                                nn.Softmax(dim=-1)),
    "nested": Mlp(),
    "embedding": nn.Embedding(10, 3),
    "layer_norm_2d": nn.LayerNorm([2, 3], eps=1e-3, elementwise_affine=False),
    "activations": nn.Sequential(nn.GELU(), nn.GELU(approximate='tanh'), nn.SiLU(), nn.Softplus(),
                                 nn.Softplus(beta=2.5, threshold=10), nn.Mish(), nn.LeakyReLU(), nn.LeakyReLU(0.2),
                                 nn.ELU(), nn.ELU(alpha=0.5), nn.SELU(), nn.Hardtanh(), nn.Hardtanh(-2.0, 0.25),
                                 nn.LogSigmoid()),
}
for name, m in models.items():
    open(f"{d}/{name}.txt", "w").write(repr(m))
