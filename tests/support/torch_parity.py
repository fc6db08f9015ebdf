"""Recomputes xgrad test cases with PyTorch (Debian python3-torch), for tests/support/support.cpp.

Reads DIR/manifest.json; for each case loads the inputs (NAME__in_X.npy), runs the case's code with
the inputs bound as torch tensors, backpropagates the saved seed (NAME__seed.npy) and writes
NAME__torch_out.npy and NAME__torch_grad_X.npy (absent when torch's gradient is None)."""
import json
import sys

import numpy as np
import torch

torch.set_num_threads(1)
d = sys.argv[1]
for case in json.load(open(f"{d}/manifest.json")):
    name = case["name"]
    env = {"torch": torch, "np": np}
    tensors = {}
    for inp in case["inputs"]:
        t = torch.from_numpy(np.load(f"{d}/{name}__in_{inp['name']}.npy"))
        if inp["requires_grad"] and case["backward"]:
            t.requires_grad_(True)
        tensors[inp["name"]] = t
    env.update(tensors)
    try:
        exec(case["code"], env)
    except Exception as e:  # report which case failed
        raise RuntimeError(f"case {name}: {e}") from e
    out = env["out"]
    np.save(f"{d}/{name}__torch_out.npy", np.asarray(out.detach().numpy(), order="C"))
    if case["backward"]:
        seed = torch.from_numpy(np.load(f"{d}/{name}__seed.npy"))
        leaves = [t for t in tensors.values() if t.requires_grad]
        if out.requires_grad:
            grads = torch.autograd.grad(out, leaves, seed, allow_unused=True)
        else:
            grads = [None] * len(leaves)
        for (n, t), g in zip([(n, t) for n, t in tensors.items() if t.requires_grad], grads):
            if g is not None:
                np.save(f"{d}/{name}__torch_grad_{n}.npy", np.asarray(g.numpy(), order="C"))
