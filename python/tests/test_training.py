"""A training loop with torch.optim.Adam through xgrad_torch matches the same loop written with
xgrad alone in C++ (python/tests/train_reference.cpp, xgrad's own ops, mse_loss and nn::Adam),
step by step, in float64, from the same initial values."""
import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import xgrad_torch as xt

STEPS = 25


def reference_losses(args):
    exe = os.environ.get("XGRAD_TRAIN_REFERENCE")
    if not exe:
        raise unittest.SkipTest("XGRAD_TRAIN_REFERENCE (the C++ reference program) is not set")
    out = subprocess.run([exe] + [str(a) for a in args], check=True, capture_output=True, text=True).stdout
    return [float(v) for v in out.split()]


def save(d, name, t):
    np.save(os.path.join(d, name + ".npy"), t.detach().numpy())


class TrainingParityTest(unittest.TestCase):
    def test_block_sparse_adam(self):
        torch.manual_seed(3)
        n_in, n_out, bi, bo = 12, 8, 4, 2
        mask = torch.rand(n_out // bo, n_in // bi) < 0.6
        mask[0, 0] = True
        layer = xt.BlockSparseLinear(n_in, n_out, mask, dtype=torch.float64)
        x = torch.randn(16, n_in, dtype=torch.float64)
        target = torch.randn(16, n_out, dtype=torch.float64)
        lr = 0.05
        with tempfile.TemporaryDirectory() as d:
            for name, t in (("x", x), ("target", target), ("weight", layer.weight), ("bias", layer.bias),
                            ("mask", mask.to(torch.uint8))):
                save(d, name, t)
            ref = reference_losses([d, "block_sparse", STEPS, lr, bi, bo])
        opt = torch.optim.Adam(layer.parameters(), lr=lr)
        ours = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(layer(x), target)
            ours.append(loss.item())
            loss.backward()
            opt.step()
        self.assertEqual(len(ref), STEPS)
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)
        self.assertLess(ours[-1], 0.7 * ours[0])  # it trains

    def test_resample_conv_adam(self):
        torch.manual_seed(4)
        N, A, B, K = 3, 6, 50, 9
        x0, dx, lo, hi = 0.0, 1.0 / (B - 1), -0.1, 0.1
        coarse = torch.sort(torch.rand(N, A, dtype=torch.float64) * 0.7 + 0.15, dim=1).values
        values = torch.rand(K, dtype=torch.float64)
        f = torch.randn(2, N, B, dtype=torch.float64)
        true_values = torch.exp(-torch.linspace(-2, 2, K, dtype=torch.float64) ** 2)
        with torch.no_grad():
            target = xt.resample_conv(f, coarse, (x0, dx, B), xt.SampledResponse(true_values, lo, hi))
        lr = 0.02
        with tempfile.TemporaryDirectory() as d:
            for name, t in (("f", f), ("coarse", coarse), ("values", values), ("target", target)):
                save(d, name, t)
            ref = reference_losses([d, "resample", STEPS, lr, x0, dx, lo, hi])
        m = xt.ResampleConv(coarse, (x0, dx, B), xt.SampledResponse(values, lo, hi), learn_coarse=True)
        opt = torch.optim.Adam([m.response_values, m.coarse], lr=lr)
        ours = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(m(f), target)
            ours.append(loss.item())
            loss.backward()
            opt.step()
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)
        self.assertLess(ours[-1], 0.5 * ours[0])


if __name__ == "__main__":
    unittest.main()
