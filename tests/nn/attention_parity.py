"""Recomputes the module cases of tests/nn/test_attention.cpp with PyTorch 1.13 (Debian python3-torch).

usage: attention_parity.py DIR

DIR/manifest.json lists the cases: {name, dtype, ctor, call, params, inputs: [{name, grad}]}. For each,
builds the torch module with `ctor` (Python), checks that its named_parameters are exactly `params`
(names and order: the state_dict names match xgrad's), loads them from NAME__p_<param>.npy, switches
to eval mode, binds the inputs NAME__in_<input>.npy (requiring grad when `grad`), runs `call` (which
sets `out` and `w`, None when the weights are not returned), backpropagates
sum(out * seed_out) + sum(w * seed_w) and writes NAME__torch_out.npy, NAME__torch_w.npy, and
NAME__torch_grad_p_<param>.npy / NAME__torch_grad_in_<input>.npy."""
import json
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
d = sys.argv[1]
for case in json.load(open(f"{d}/manifest.json")):
    name = case["name"]
    dtype = {"float32": torch.float32, "float64": torch.float64}[case["dtype"]]
    m = eval(case["ctor"]).to(dtype)
    names = [n for n, _ in m.named_parameters()]
    assert names == case["params"], (name, names, case["params"])
    with torch.no_grad():
        for n, p in m.named_parameters():
            v = torch.from_numpy(np.load(f"{d}/{name}__p_{n}.npy"))
            assert v.shape == p.shape and v.dtype == dtype, (name, n, v.shape, p.shape, v.dtype)
            p.copy_(v)
    m.eval()
    env = {"torch": torch, "nn": nn, "m": m}
    inputs = {}
    for inp in case["inputs"]:
        t = torch.from_numpy(np.load(f"{d}/{name}__in_{inp['name']}.npy"))
        if inp["grad"]:
            t.requires_grad_(True)
        inputs[inp["name"]] = t
    env.update(inputs)
    exec(case["call"], env)
    out, w = env["out"], env.get("w")
    loss = (out * torch.from_numpy(np.load(f"{d}/{name}__seed_out.npy"))).sum()
    np.save(f"{d}/{name}__torch_out.npy", out.detach().numpy())
    if w is not None:
        loss = loss + (w * torch.from_numpy(np.load(f"{d}/{name}__seed_w.npy"))).sum()
        np.save(f"{d}/{name}__torch_w.npy", w.detach().numpy())
    loss.backward()
    for n, p in m.named_parameters():
        np.save(f"{d}/{name}__torch_grad_p_{n}.npy", p.grad.numpy())
    for n, t in inputs.items():
        if t.requires_grad:
            np.save(f"{d}/{name}__torch_grad_in_{n}.npy", t.grad.numpy())
