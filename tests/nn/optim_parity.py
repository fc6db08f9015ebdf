"""Replays xgrad optimizer test cases with PyTorch (Debian python3-torch 1.13), for tests/nn/test_optim.cpp.

Reads DIR/manifest.json, a list of cases:
  name, optimizer ("sgd" | "adam" | "adamw" | "rmsprop" | "adagrad"), defaults (torch keyword arguments),
  groups ([{"params": [indices], "options": {...}}]), num_params, steps K,
  skip ([[param, step], ...]: that parameter has no gradient at that step),
  clip (null or {"max_norm", "norm_type"}; applied before each optimizer step),
  scheduler (null or {"type": "step" | "cosine" | "linear" | "sequential", ...}; stepped after each step).
Inputs: NAME__p<j>.npy (initial parameter j), NAME__g<j>.npy (its gradients, shape [K, *shape]).
Writes NAME__out_p<j>.npy (parameter j after each step, [K, *shape]), NAME__lrs.npy ([K + 1, groups]:
the lrs at construction and after each scheduler step) and NAME__norms.npy ([K], clip_grad_norm_'s result)."""
import json
import sys

import numpy as np
import torch

torch.set_num_threads(1)

OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
              "rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad}


def make_scheduler(opt, spec):
    kind = spec["type"]
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=spec["step_size"], gamma=spec["gamma"])
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=spec["T_max"], eta_min=spec["eta_min"])
    if kind == "linear":
        return torch.optim.lr_scheduler.LinearLR(opt, start_factor=spec["start_factor"],
                                                 end_factor=spec["end_factor"], total_iters=spec["total_iters"])
    if kind == "sequential":
        children = [make_scheduler(opt, s) for s in spec["schedulers"]]
        return torch.optim.lr_scheduler.SequentialLR(opt, children, milestones=spec["milestones"])
    raise ValueError(f"unknown scheduler {kind}")


def run_case(d, case):
    name, K = case["name"], case["steps"]
    params = [torch.from_numpy(np.load(f"{d}/{name}__p{j}.npy")).clone().requires_grad_(True)
              for j in range(case["num_params"])]
    grads = [torch.from_numpy(np.load(f"{d}/{name}__g{j}.npy")) for j in range(case["num_params"])]
    groups = []
    for g in case["groups"]:
        group = {"params": [params[j] for j in g["params"]]}
        for k, v in g["options"].items():
            group[k] = tuple(v) if k == "betas" else v
        groups.append(group)
    defaults = dict(case["defaults"])
    if "betas" in defaults:
        defaults["betas"] = tuple(defaults["betas"])
    opt = OPTIMIZERS[case["optimizer"]](groups, foreach=False, **defaults)
    sched = make_scheduler(opt, case["scheduler"]) if case.get("scheduler") else None
    skip = {(j, k) for j, k in case.get("skip", [])}
    outs = [[] for _ in params]
    lrs = [[g["lr"] for g in opt.param_groups]]
    norms = []
    for k in range(K):
        for j, p in enumerate(params):
            p.grad = None if (j, k) in skip else grads[j][k].clone()
        if case.get("clip"):
            c = case["clip"]
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, c["max_norm"], float(c["norm_type"]))))
        opt.step()
        for j, p in enumerate(params):
            outs[j].append(p.detach().clone().numpy())
        if sched is not None:
            sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    for j in range(len(params)):
        np.save(f"{d}/{name}__out_p{j}.npy", np.ascontiguousarray(np.stack(outs[j])))
    np.save(f"{d}/{name}__lrs.npy", np.asarray(lrs, dtype=np.float64))
    np.save(f"{d}/{name}__norms.npy", np.asarray(norms, dtype=np.float64))


def main():
    d = sys.argv[1]
    for case in json.load(open(f"{d}/manifest.json")):
        try:
            run_case(d, case)
        except Exception as e:  # say which case failed
            raise RuntimeError(f"case {case['name']}: {e}") from e


if __name__ == "__main__":
    main()
