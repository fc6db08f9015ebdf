"""Recomputes the recurrent-layer cases of tests/nn/test_rnn.cpp with PyTorch 1.13 (Debian python3-torch).

DIR/cases.json lists the cases; for each, the module's parameters (by torch's names), the input, the
initial states and the seeds of the loss are DIR/<case>__<name>.npy, and xgrad's results are
DIR/<case>__ours_<name>.npy. The loss is sum(out * r_out) + sum(h_n * r_h) (+ sum(c_n * r_c)). Prints
every mismatch (output, h_n, c_n, the input's, the states' and every parameter's gradient) and exits
1 if there is one. Also writes torch's repr of each case's module to DIR/<case>__repr.txt."""
import json
import sys

import numpy as np
import torch

torch.set_num_threads(1)
d = sys.argv[1]
bad = []


def load(case, name):
    return torch.from_numpy(np.load(f"{d}/{case}__{name}.npy"))


for c in json.load(open(f"{d}/cases.json")):
    name, kind = c["name"], c["kind"]
    dtype = torch.float64 if c["dtype"] == "float64" else torch.float32
    if kind == "lstm":
        m = torch.nn.LSTM(c["input_size"], c["hidden"], c["num_layers"], bias=c["bias"], batch_first=c["batch_first"],
                          bidirectional=c["bidirectional"])
    elif kind == "gru":
        m = torch.nn.GRU(c["input_size"], c["hidden"], c["num_layers"], bias=c["bias"], batch_first=c["batch_first"],
                         bidirectional=c["bidirectional"])
    elif kind == "lstm_cell":
        m = torch.nn.LSTMCell(c["input_size"], c["hidden"], bias=c["bias"])
    else:
        m = torch.nn.GRUCell(c["input_size"], c["hidden"], bias=c["bias"])
    open(f"{d}/{name}__repr.txt", "w").write(repr(m))
    m = m.to(dtype)
    with torch.no_grad():
        for pn, p in m.named_parameters():
            p.copy_(load(name, pn))
    x = load(name, "x").requires_grad_(True)
    leaves = {"x": x}
    h0 = c0 = None
    if c["states"]:
        h0 = load(name, "h0").requires_grad_(True)
        leaves["h0"] = h0
        if kind.startswith("lstm"):
            c0 = load(name, "c0").requires_grad_(True)
            leaves["c0"] = c0
    if kind == "lstm":
        out, (hn, cn) = m(x, (h0, c0)) if h0 is not None else m(x)
    elif kind == "gru":
        out, hn = m(x, h0) if h0 is not None else m(x)
        cn = None
    elif kind == "lstm_cell":
        hn, cn = m(x, (h0, c0)) if h0 is not None else m(x)
        out = hn
    else:
        hn = m(x, h0) if h0 is not None else m(x)
        out, cn = hn, None
    results = {"out": out, "hn": hn}
    loss = (out * load(name, "r_out")).sum() + (hn * load(name, "r_h")).sum()
    if cn is not None:
        results["cn"] = cn
        loss = loss + (cn * load(name, "r_c")).sum()
    loss.backward()
    for ln, t in leaves.items():
        results["grad_" + ln] = t.grad if t.grad is not None else torch.zeros_like(t)
    for pn, p in m.named_parameters():
        results["grad_" + pn] = p.grad if p.grad is not None else torch.zeros_like(p)
    rtol, atol = (1e-9, 1e-11) if dtype == torch.float64 else (2e-4, 2e-5)
    for rn, t in results.items():
        try:
            ours = np.load(f"{d}/{name}__ours_{rn}.npy")
        except FileNotFoundError:
            bad.append(f"{name}: ours has no {rn}")
            continue
        want = t.detach().numpy()
        if ours.shape != want.shape:
            bad.append(f"{name}: {rn} has shape {ours.shape}, torch {want.shape}")
        elif not np.allclose(ours, want, rtol=rtol, atol=atol):
            bad.append(f"{name}: {rn} differs by {np.abs(ours - want).max()} (max |torch| {np.abs(want).max()})")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
