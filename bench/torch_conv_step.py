"""PyTorch peer of conv_step.cpp (the fashion_cnn training step, batch 64): the same layers, cases and
rows as conv_step.cpp / torch_conv_step.cpp (impl = torch), from Python.

usage: python3 bench/torch_conv_step.py [--threads N] [--iters N] [--reps N] [--case NAME]
"""
import argparse
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--iters", type=int, default=10)
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--case", default="")
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
x = torch.rand(64, 1, 28, 28)
target = torch.arange(64) % 10
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def median_us(fn):
    for _ in range(max(1, a.iters // 10)):
        fn()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        for _ in range(a.iters):
            fn()
        t.append((time.perf_counter() - t0) * 1e6 / a.iters)
    minflt = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / (a.iters * a.reps)
    return statistics.median(t), minflt


def row(name, fn):
    if a.case and a.case != name:
        return
    us, minflt = median_us(fn)
    print(f"{name},torch,{a.threads},us,{us:.3f}")
    print(f"{name},torch,{a.threads},minflt,{minflt:.3f}")


def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    opt.step()


def evaluate():
    model.eval()
    with torch.no_grad():
        model(x)
    model.train()


h = torch.randn(64, 32, 14, 14)
w = (torch.randn(32, 32, 3, 3) * 0.06).requires_grad_()
gamma = torch.ones(32, requires_grad=True)
beta = torch.zeros(32, requires_grad=True)
seed = torch.ones(64, 32, 7, 7)


def block():
    for p in (w, gamma, beta):
        p.grad = None
    y = F.conv2d(h, w, padding=1)
    F.max_pool2d(F.relu(F.batch_norm(y, None, None, gamma, beta, training=True)), 2).backward(seed)


row("fashion_cnn_step_b64", step)
row("fashion_cnn_eval_b64", evaluate)
row("conv_block_fwdbwd_b64", block)
