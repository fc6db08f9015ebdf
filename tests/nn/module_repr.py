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
    "batch_norm_1d": nn.BatchNorm1d(4, momentum=None, affine=False),
    "batch_norm_2d": nn.BatchNorm2d(3, eps=1e-3, momentum=0.3, track_running_stats=False),
    "group_norm": nn.GroupNorm(2, 4, eps=1e-3, affine=False),
    "conv_pool": nn.Sequential(nn.Conv2d(1, 32, 3, padding="same"), nn.MaxPool2d(2), nn.AvgPool2d((2, 3), (1, 2), 1),
                               nn.Conv2d(4, 4, (3, 5), stride=(2, 1), padding=(1, 2), groups=2, bias=False),
                               nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
                               nn.ConvTranspose2d(2, 4, (2, 3), dilation=2, groups=2, padding=1, bias=False),
                               nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten()),
    "conv_pool_1d": nn.Sequential(nn.Conv1d(2, 3, 3, dilation=2, bias=False), nn.Conv1d(3, 3, 2, padding="valid"),
                                  nn.MaxPool1d(3, 2, 1, ceil_mode=True), nn.AvgPool1d(3), nn.AdaptiveAvgPool1d(4)),
    "activations": nn.Sequential(nn.GELU(), nn.GELU(approximate='tanh'), nn.SiLU(), nn.Softplus(),
                                 nn.Softplus(beta=2.5, threshold=10), nn.Mish(), nn.LeakyReLU(), nn.LeakyReLU(0.2),
                                 nn.ELU(), nn.ELU(alpha=0.5), nn.SELU(), nn.Hardtanh(), nn.Hardtanh(-2.0, 0.25),
                                 nn.LogSigmoid()),
    "transformer": nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, dim_feedforward=8), 2, norm=nn.LayerNorm(4)),
    "mha_kdim_vdim": nn.MultiheadAttention(6, 3, bias=False, kdim=4, vdim=5),
}
for name, m in models.items():
    open(f"{d}/{name}.txt", "w").write(repr(m))
