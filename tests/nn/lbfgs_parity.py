"""Replays tests/nn/test_optim.cpp's L-BFGS cases with PyTorch (Debian python3-torch 1.13).

Reads DIR/lbfgs.json, a list of cases {name, problem, x0, options (torch keyword arguments), steps};
writes DIR/NAME__x.npy ([steps, n]: the parameters after each step()), DIR/NAME__loss.npy ([steps]:
what each step() returned) and DIR/NAME__state.npy ([steps, 2]: func_evals, n_iter)."""
import json
import sys

import numpy as np
import torch

torch.set_num_threads(1)
d = sys.argv[1]
# The same objectives as the C++ side, in float64, written with the same elementary operations; the
# exponential fit's data come from the manifest.


def objective(name, x, case):
    if name == "rosenbrock":
        a = 1.0 - x[0]
        b = x[1] - x[0] * x[0]
        return a * a + 100.0 * (b * b)
    if name == "rosenbrock4":  # chained, 4 dimensions
        s = 0.0
        for i in range(3):
            a = 1.0 - x[i]
            b = x[i + 1] - x[i] * x[i]
            s = s + a * a + 100.0 * (b * b)
        return s
    if name == "exp_fit":
        t_data = torch.tensor(case["t"], dtype=torch.float64)
        y_data = torch.tensor(case["y"], dtype=torch.float64)
        r = x[0] * torch.exp(x[1] * t_data) - y_data
        return (r * r).sum()
    raise ValueError(name)


for case in json.load(open(f"{d}/lbfgs.json")):
    x = torch.tensor(case["x0"], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([x], **case["options"])

    def closure():
        opt.zero_grad()
        loss = objective(case["problem"], x, case)
        loss.backward()
        return loss

    xs, losses, state = [], [], []
    for _ in range(case["steps"]):
        losses.append(float(opt.step(closure)))
        xs.append(x.detach().clone().numpy())
        st = opt.state[x]
        state.append([st["func_evals"], st["n_iter"]])
    np.save(f"{d}/{case['name']}__x.npy", np.array(xs, dtype=np.float64))
    np.save(f"{d}/{case['name']}__loss.npy", np.array(losses, dtype=np.float64))
    np.save(f"{d}/{case['name']}__state.npy", np.array(state, dtype=np.float64))
