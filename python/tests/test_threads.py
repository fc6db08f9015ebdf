"""Thread policy (Note [Threads next to torch] in python/src/module.cpp): xgrad follows
torch.get_num_threads() and runs in torch's pool unless fixed with xgrad_torch.set_num_threads (then
its TBB arena); results are bit-identical with 1 and 2 threads in either pool, forward and backward."""
import ctypes
import unittest

import torch

import xgrad_torch as xt


def run_both():
    torch.manual_seed(5)
    f = torch.randn(3, 8, 4000, requires_grad=True)
    coarse = torch.sort(torch.rand(8, 300) * 0.9 + 0.05, dim=1).values.requires_grad_()
    out = xt.resample_conv(f, coarse, (0.0, 1.0 / 3999, 4000), xt.Response.hann(0.02))
    gf, gc = torch.autograd.grad(out, (f, coarse), torch.ones_like(out))
    layer = xt.BlockSparseLinear(512, 512, 8)
    x = torch.randn(64, 512, requires_grad=True)
    y = layer(x)
    gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), torch.ones_like(y))
    return [t.detach().clone() for t in (out, gf, gc, y, gx, gw, gb)]


class ThreadsTest(unittest.TestCase):
    def setUp(self):
        self.saved = torch.get_num_threads()

    def tearDown(self):
        torch.set_num_threads(self.saved)
        xt.set_num_threads(None)

    def test_follows_torch(self):
        for n in (1, 2):
            torch.set_num_threads(n)
            self.assertEqual(xt.get_num_threads(), n)
        # Following torch, xgrad's loops run in torch's pool (Note [Threads next to torch]).
        self.assertTrue(xt._C.runs_in_torch_pool())
        xt.set_num_threads(1)
        torch.set_num_threads(2)
        self.assertEqual(xt.get_num_threads(), 1)  # fixed by the user
        self.assertFalse(xt._C.follows_torch_threads())
        self.assertFalse(xt._C.runs_in_torch_pool())  # xgrad's own TBB arena of the fixed size
        xt.set_num_threads(None)
        self.assertEqual(xt.get_num_threads(), 2)
        self.assertTrue(xt._C.runs_in_torch_pool())
        with self.assertRaises(ValueError):
            xt.set_num_threads(0)

    def test_openblas_thread_count_is_restored(self):
        try:
            blas = ctypes.CDLL("libopenblas.so.0")
        except OSError:
            self.skipTest("libopenblas.so.0 not loadable")
        blas.openblas_set_num_threads(2)
        layer = xt.BlockSparseLinear(512, 512, 2)  # 256-wide groups: xgrad's kernels call OpenBLAS
        layer(torch.randn(64, 512, requires_grad=True)).sum().backward()
        self.assertEqual(blas.openblas_get_num_threads(), 2)  # torch's GEMMs keep their threads

    def test_bit_identical_1_vs_2_threads(self):
        torch.set_num_threads(1)
        one = run_both()
        torch.set_num_threads(2)
        two = run_both()  # in torch's pool
        xt.set_num_threads(2)
        arena = run_both()  # in xgrad's TBB arena
        xt.set_num_threads(None)
        for a, b, c in zip(one, two, arena):
            self.assertTrue(torch.equal(a, b))
            self.assertTrue(torch.equal(a, c))


if __name__ == "__main__":
    unittest.main()
