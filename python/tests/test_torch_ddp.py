"""xgrad_torch ops under torch.nn.parallel.DistributedDataParallel (gloo, 2 processes on this host):
a model with a BlockSparseLinear layer and an spmm graph aggregation, each process training on half
of the batch, must end each step with the gradients (and, after SGD steps, the parameters) of one
process training on the whole batch (float64, 1e-12). Issue 38 item 8."""
import os
import tempfile
import unittest
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import xgrad_torch as xt

BATCH, NODES, FEATS = 8, 6, 8
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = xt.BlockSparseLinear(FEATS, FEATS, 2, dtype=torch.float64)
        self.out = torch.nn.Linear(FEATS, 1, dtype=torch.float64)

    def forward(self, a, x):
        # x (batch, nodes, feats): one graph aggregation per sample (spmm over the nodes), then the
        # block-sparse layer, then a dense readout
        h = torch.stack([xt.spmm(a, x[i]) for i in range(x.shape[0])])
        return self.out(torch.tanh(self.block(h))).mean(dim=1)


def problem():
    g = torch.Generator().manual_seed(3)
    dense = torch.rand(NODES, NODES, generator=g, dtype=torch.float64) * (torch.rand(NODES, NODES, generator=g) < 0.4)
    x = torch.randn(BATCH, NODES, FEATS, generator=g, dtype=torch.float64)
    y = torch.randn(BATCH, 1, generator=g, dtype=torch.float64)
    return dense.to_sparse_csr(), x, y


def train(model, a, x, y, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    grads = []
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(a, x), y).backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
    return grads


def worker(rank, world, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same initial parameters (DDP also broadcasts rank 0's)
    model = Model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    a, x, y = problem()
    share = BATCH // world
    rows = slice(rank * share, (rank + 1) * share)
    grads = train(ddp, a, x[rows], y[rows], steps=3)
    if rank == 0:
        torch.save({"grads": grads, "params": [p.detach().clone() for p in model.parameters()]},
                   os.path.join(out_dir, "ddp.pt"))
    dist.barrier()
    dist.destroy_process_group()


class TorchDdpTest(unittest.TestCase):
    def test_two_processes_equal_one(self):
        torch.manual_seed(0)
        single = Model()
        a, x, y = problem()
        want = train(single, a, x, y, steps=3)
        with tempfile.TemporaryDirectory() as tmp:
            init_file = os.path.join(tmp, "init")
            mp.spawn(worker, args=(2, init_file, tmp), nprocs=2, join=True)
            got = torch.load(os.path.join(tmp, "ddp.pt"))
        for step, (g_ddp, g_one) in enumerate(zip(got["grads"], want)):
            for k, (gd, go) in enumerate(zip(g_ddp, g_one)):
                with self.subTest(step=step, param=k):
                    torch.testing.assert_close(gd, go, rtol=1e-12, atol=1e-12)
        for gd, go in zip(got["params"], single.parameters()):
            torch.testing.assert_close(gd, go.detach(), rtol=1e-12, atol=1e-12)
        # the test is not vacuous: the gradient of one half of the batch differs from the whole's
        torch.manual_seed(0)
        half = train(Model(), a, x[: BATCH // 2], y[: BATCH // 2], steps=1)
        self.assertGreater(max((h - w).abs().max().item() for h, w in zip(half[0], want[0])), 1e-3)


if __name__ == "__main__":
    unittest.main()
