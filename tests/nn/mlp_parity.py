"""Trains the MLP of tests/nn/test_mlp_parity.cpp with PyTorch (Debian python3-torch 1.13).

usage: mlp_parity.py DIR

For each DTYPE in (float32, float64) whose files exist, reads from DIR:
  DTYPE__x.npy                 (steps, batch, 784) inputs
  DTYPE__y.npy                 (steps, batch) class indices (as floats)
  DTYPE__init_<name>.npy       initial parameters, <name> in 0.weight, 0.bias, 2.weight, 2.bias
builds torch.nn.Sequential(Linear(784, 256), ReLU(), Linear(256, 10)) in that dtype with those
parameters, trains it one step per batch with F.cross_entropy and torch.optim.SGD(lr=0.01,
momentum=0.9), and writes
  DTYPE__torch_losses.npy      (steps,) float64: each step's loss, before its update
  DTYPE__torch_final_<name>.npy  the parameters after the last step."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def run(d, dtype_name):
    prefix = os.path.join(d, dtype_name + "__")
    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    x = torch.from_numpy(np.load(prefix + "x.npy"))
    y = torch.from_numpy(np.load(prefix + "y.npy")).long()
    assert x.dtype == dtype, (x.dtype, dtype)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            init = torch.from_numpy(np.load(prefix + "init_" + name + ".npy"))
            assert init.shape == p.shape and init.dtype == dtype, (name, init.shape, init.dtype)
            p.copy_(init)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for b in range(x.shape[0]):
        opt.zero_grad()
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.save(prefix + "torch_losses.npy", np.array(losses, dtype=np.float64))
    for name, p in model.named_parameters():
        np.save(prefix + "torch_final_" + name + ".npy", p.detach().numpy())


def main():
    d = sys.argv[1]
    done = 0
    for dtype_name in ("float32", "float64"):
        if os.path.exists(os.path.join(d, dtype_name + "__x.npy")):
            run(d, dtype_name)
            done += 1
    if done == 0:
        sys.exit(f"mlp_parity.py: no DTYPE__x.npy in {d}")


if __name__ == "__main__":
    main()
