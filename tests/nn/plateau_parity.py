"""Replays ReduceLROnPlateau cases with PyTorch (Debian python3-torch 1.13), for tests/nn/test_optim.cpp.

Reads DIR/plateau.json, a list of cases {name, lrs (one per group), options (torch keyword
arguments), metrics}; writes DIR/NAME__lrs.npy ([len(metrics), groups]: every group's lr after each
step) and DIR/NAME__state.npy ([len(metrics), 3]: best, num_bad_epochs, cooldown_counter)."""
import json
import sys

import numpy as np
import torch

d = sys.argv[1]
for case in json.load(open(f"{d}/plateau.json")):
    groups = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in case["lrs"]]
    opt = torch.optim.SGD(groups, lr=case["lrs"][0])
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **case["options"])
    lrs, state = [], []
    for m in case["metrics"]:
        sched.step(m)
        lrs.append([g["lr"] for g in opt.param_groups])
        state.append([sched.best, sched.num_bad_epochs, sched.cooldown_counter])
    np.save(f"{d}/{case['name']}__lrs.npy", np.array(lrs, dtype=np.float64))
    np.save(f"{d}/{case['name']}__state.npy", np.array(state, dtype=np.float64))
