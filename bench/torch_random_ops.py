"""PyTorch (Debian python3-torch) peer of bench/random_ops.cpp: the same cases and sizes (82,115 x 128,
float32). Prints CSV rows `case,impl,threads,metric,value` (median of REPS calls after a warm-up of at
least 0.3 s).
  dropout  torch.nn.functional.dropout(x, 0.5, training=True); fwdbwd: on a leaf, backward(ones)
  rand     torch.rand
  randn    torch.randn
usage: torch_random_ops.py THREADS [REPS]"""
import sys

import torch

from torch_index_ops import median_ms

ROWS, COLS = 82115, 128


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 else 15
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    x = torch.randn(ROWS, COLS)
    xg = x.clone().requires_grad_()
    seed = torch.ones(ROWS, COLS)

    def row(case, metric, value):
        print(f"{case},torch,{threads},{metric},{value:.6g}", flush=True)

    def fwd():
        with torch.no_grad():
            torch.nn.functional.dropout(x, 0.5, training=True)

    def fwdbwd():
        xg.grad = None
        torch.nn.functional.dropout(xg, 0.5, training=True).backward(seed)

    row("dropout", "fwd_ms", median_ms(fwd, reps))
    row("dropout", "fwdbwd_ms", median_ms(fwdbwd, reps))
    row("rand", "fwd_ms", median_ms(lambda: torch.rand(ROWS, COLS), reps))
    row("randn", "fwd_ms", median_ms(lambda: torch.randn(ROWS, COLS), reps))


if __name__ == "__main__":
    main()
