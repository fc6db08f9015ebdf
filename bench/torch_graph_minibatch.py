"""PyTorch (Debian python3-torch) peer of bench/graph_minibatch.cpp: an epoch of neighbour sampling and
training of a 2-layer SAGE (mean) model on an R-MAT graph, with the same uniform sampler written in
vectorised torch ops (no PyG or DGL in Debian), the same model and the same optimizer.

Graph: Note [R-MAT graphs] in gcn_graph.hpp (torch_sparse_ops.rmat_graph: the same edges as
rmat_edges(scale), duplicates summed), N = 2^scale nodes, A[dst, src]; a node's neighbours are its
in-neighbours (row of A in CSR form). x (N, 64) float32 randn; labels: argmax of the first 16
columns of x + mean over in-neighbours of x (16 classes, learnable from a node and its neighbours).
Training nodes: the i with splitmix64(i) % 100 < 10. An epoch: the training nodes shuffled, batches
of 1024 seeds; per batch, for the output layer then the input layer:
  sampling   per target, its in-degree d from the CSR row offsets; every neighbour when d <= k (the
             fan-out, 10), else k distinct entry offsets into the row by Floyd's algorithm, vectorised
             over the targets (k rounds of: t uniform in [0, d - k + j], replaced by d - k + j when an
             earlier round took it), the same distribution as ours (nn::NeighborSampler, uniform
             without replacement)
  relabel    a global map (N int64, -1 when unset, reset after each layer): targets first, then the
             neighbours not among them, torch.unique (sorted; ours orders them by first appearance)
  block      the mean's weights 1 / (sampled neighbours of the target) as a COO matrix
             (targets x sources), coalesced
then forward: h = relu(SAGE(x[input_nodes])), logits = SAGE(h) with SAGE(x_src) =
lin_l(torch.sparse.mm(block, x_src)) + lin_r(x_src[:targets]) (PyG's SAGEConv, mean), 64 -> 64 -> 16;
cross-entropy on the seeds, backward, Adam (lr 0.01). The sampling runs in the training loop (ours
samples the next batch on a background thread while a batch trains).

Prints CSV rows `case,impl,threads,metric,value` (case sage_rmat<scale>, impl torch): epoch_ms and
sampled_edges_per_s (medians over REPS epochs after one warm-up epoch), batches_per_epoch,
edges_per_batch and input_nodes_per_batch (means over every batch), loss_first (the first batch's)
and loss_last (the mean over the last epoch's batches), peak_rss_mb (VmHWM: the whole process, the
graph's construction included) and train_peak_rss_mb (VmHWM reset through /proc/self/clear_refs once
the graph, x and the labels are built: the training epochs' peak, the data included; absent where
the kernel refuses the reset).
usage: torch_graph_minibatch.py THREADS [REPS] [--scale S] [--big] [--batches B]
  --big: scale 21 (2^21 nodes, 2^25 edges); --batches B: at most B batches per epoch (0: all)"""
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_index_ops import splitmix64, status_kb
from torch_sparse_ops import rmat_graph

FEATURES, HIDDEN, CLASSES, BATCH, FANOUTS, TRAIN_PERCENT, LR = 64, 64, 16, 1024, (10, 10), 10, 0.01


class SAGE(torch.nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.lin_l = torch.nn.Linear(cin, cout)
        self.lin_r = torch.nn.Linear(cin, cout, bias=False)

    def forward(self, x_src, block, n_dst):
        return self.lin_l(torch.sparse.mm(block, x_src)) + self.lin_r(x_src[:n_dst])


class Sampler:
    def __init__(self, rowptr, col, n):
        self.rowptr, self.col = rowptr, col
        self.assoc = torch.full((n,), -1, dtype=torch.long)

    def layer(self, targets, k):
        """Targets' sampled neighbours: (row of each sampled edge, global id of its source)."""
        start = self.rowptr[targets]
        deg = self.rowptr[targets + 1] - start
        counts = torch.clamp(deg, max=k)
        nt = targets.numel()
        rows = torch.repeat_interleave(torch.arange(nt), counts)
        first = torch.cumsum(counts, 0) - counts
        offsets = torch.arange(rows.numel()) - first[rows]  # every neighbour of a row with d <= k
        big = torch.nonzero(deg > k).squeeze(1)
        if big.numel():
            d = deg[big]
            picks = torch.empty(big.numel(), k, dtype=torch.long)
            for j in range(k):  # Floyd: t uniform in [0, m], m itself when t was taken already
                m = d - k + j
                t = torch.minimum((torch.rand(big.numel(), dtype=torch.float64) * (m + 1)).long(), m)
                if j:
                    t = torch.where((picks[:, :j] == t[:, None]).any(1), m, t)
                picks[:, j] = t
            offsets[(first[big][:, None] + torch.arange(k)).reshape(-1)] = picks.reshape(-1)
        return rows, self.col[start[rows] + offsets], counts

    def sample(self, seeds):
        """Blocks from the input layer to the output layer, each (mean weights, number of targets), and
        the input nodes."""
        blocks, targets = [], seeds
        for k in reversed(FANOUTS):
            rows, nbrs, counts = self.layer(targets, k)
            nt = targets.numel()
            self.assoc[targets] = torch.arange(nt)
            new = torch.unique(nbrs[self.assoc[nbrs] < 0])
            self.assoc[new] = nt + torch.arange(new.numel())
            src = torch.cat([targets, new])
            cols = self.assoc[nbrs]
            self.assoc[src] = -1
            w = 1.0 / counts[rows].to(torch.float32)
            block = torch.sparse_coo_tensor(torch.stack([rows, cols]), w, (nt, src.numel())).coalesce()
            blocks.insert(0, (block, nt))
            targets = src
        return blocks, targets


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args else 1
    reps = int(args[1]) if len(args) > 1 and not args[1].startswith("--") else 3
    scale, max_batches = 17, 0
    for i, a in enumerate(args):
        if a == "--scale":
            scale = int(args[i + 1])
        elif a == "--big":
            scale = 21
        elif a == "--batches":
            max_batches = int(args[i + 1])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    n = 1 << scale
    case = f"sage_rmat{scale}"

    A = rmat_graph(scale)  # coalesced COO, A[dst, src]
    dst, col = A.indices()[0], A.indices()[1].contiguous()
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    del A, dst
    x = torch.randn(n, FEATURES)
    with torch.no_grad():  # labels: argmax over 16 columns of x + the in-neighbours' mean of x
        deg = (rowptr[1:] - rowptr[:-1]).clamp(min=1).to(torch.float32)[:, None]
        adj = torch.sparse_csr_tensor(rowptr, col, torch.ones(col.numel()), (n, n))
        labels = (x[:, :CLASSES] + (adj @ x[:, :CLASSES].contiguous()) / deg).argmax(1)
        del adj, deg
    train = torch.from_numpy(np.nonzero(splitmix64(np.arange(n, dtype=np.uint64)) % np.uint64(100) <
                                        np.uint64(TRAIN_PERCENT))[0].astype(np.int64))

    build_rss = status_kb("VmHWM")
    try:  # VmHWM from here on is the training's peak (Linux: 5 resets it to the current RSS)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        hwm_reset = True
    except OSError:
        hwm_reset = False
    sampler = Sampler(rowptr, col, n)
    conv0, conv1 = SAGE(FEATURES, HIDDEN), SAGE(HIDDEN, CLASSES)
    params = [*conv0.parameters(), *conv1.parameters()]
    opt = torch.optim.Adam(params, lr=LR)
    totals = {"edges": 0, "inputs": 0, "batches": 0}

    def epoch():
        perm = train[torch.randperm(train.numel())]
        losses, edges = [], 0
        for b, lo in enumerate(range(0, perm.numel(), BATCH)):
            if max_batches and b >= max_batches:
                break
            seeds = perm[lo:lo + BATCH]
            blocks, input_nodes = sampler.sample(seeds)
            e = sum(block._nnz() for block, _ in blocks)
            edges += e
            totals["edges"] += e
            totals["inputs"] += input_nodes.numel()
            totals["batches"] += 1
            h = F.relu(conv0(x[input_nodes], *blocks[0]))
            loss = F.cross_entropy(conv1(h, *blocks[1]), labels[seeds])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, edges

    losses, _ = epoch()  # warm-up
    loss_first = losses[0]
    times, rates = [], []
    batches = len(losses)
    for _ in range(reps):
        t0 = time.perf_counter()
        losses, edges = epoch()
        t = time.perf_counter() - t0
        times.append(t)
        rates.append(edges / t)
    times.sort()
    rates.sort()
    rows = [("epoch_ms", times[len(times) // 2] * 1e3), ("sampled_edges_per_s", rates[len(rates) // 2]),
            ("batches_per_epoch", batches), ("edges_per_batch", totals["edges"] / totals["batches"]),
            ("input_nodes_per_batch", totals["inputs"] / totals["batches"]), ("loss_first", loss_first),
            ("loss_last", sum(losses) / len(losses))]
    train_rss = status_kb("VmHWM")
    rows.append(("peak_rss_mb", (max(build_rss, train_rss) if hwm_reset else train_rss) / 1024))
    if hwm_reset:
        rows.append(("train_peak_rss_mb", train_rss / 1024))
    for metric, value in rows:
        print(f"{case},torch,{threads},{metric},{value:.6g}", flush=True)


if __name__ == "__main__":
    main()
