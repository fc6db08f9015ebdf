"""PyTorch peer of conv_step.cpp (same model, same rows): python3 torch_conv_step.py [--threads N] [--reps N].
A skeleton: no numbers have been recorded yet (issue 17 item 4)."""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--reps", type=int, default=7)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
x = torch.randn(64, 1, 28, 28)
w1 = (torch.randn(32, 1, 3, 3) * 0.3).requires_grad_()
b1 = torch.zeros(32, requires_grad=True)
w2 = (torch.randn(32, 32, 3, 3) * 0.06).requires_grad_()
b2 = torch.zeros(32, requires_grad=True)


def model():
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
    return F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)


def median_ms(fn):
    fn()
    t = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def fwd():
    with torch.no_grad():
        model()


def fwdbwd():
    for p in (w1, b1, w2, b2):
        p.grad = None
    model().backward(torch.ones(64, 32, 7, 7))


print(f"conv_step_b64,torch,{a.threads},fwd_ms,{median_ms(fwd):.6g}")
print(f"conv_step_b64,torch,{a.threads},fwdbwd_ms,{median_ms(fwdbwd):.6g}")
