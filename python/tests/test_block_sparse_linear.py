"""xgrad_torch.BlockSparseLinear and block_sparse_linear: gradcheck on x, weight and bias (float64),
parity with the masked-dense and ModuleList formulations, patterns, init, state_dict, optimizers,
errors."""
import io
import unittest

import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import xgrad_torch as xt

torch.manual_seed(0)


def patterns():
    mask = torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=torch.bool)  # (out/bo, in/bi) = (2, 3)
    return {
        "diagonal_equal": (8, 6, xt.block_diagonal(8, 6, 2)),
        "diagonal_unequal": (7, 5, xt.block_diagonal(7, 5, [(3, 2), (4, 3)])),
        "block_mask": (9, 4, xt.block_mask(9, 4, mask)),
    }


class BlockSparseLinearTest(unittest.TestCase):
    def test_gradcheck(self):
        for name, (n_in, n_out, p) in patterns().items():
            for batch in ((3,), (2, 2)):
                with self.subTest(pattern=name, batch=batch):
                    x = torch.randn(*batch, n_in, dtype=torch.float64, requires_grad=True)
                    w = torch.randn(p.weight_shape, dtype=torch.float64, requires_grad=True)
                    b = torch.randn(n_out, dtype=torch.float64, requires_grad=True)
                    self.assertTrue(gradcheck(lambda x, w, b: xt.block_sparse_linear(x, w, b, p), (x, w, b)))
                    self.assertTrue(gradcheck(lambda x, w: xt.block_sparse_linear(x, w, None, p), (x, w)))

    def test_parity_with_masked_dense(self):
        for name, (n_in, n_out, p) in patterns().items():
            for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
                with self.subTest(pattern=name, dtype=dtype):
                    layer = xt.BlockSparseLinear(n_in, n_out, p, dtype=dtype)
                    mask = p.element_mask(dtype == torch.float64)
                    dense = layer.to_dense().clone().requires_grad_()
                    x = torch.randn(2, 5, n_in, dtype=dtype, requires_grad=True)
                    y = layer(x)
                    ref = F.linear(x, dense * mask, layer.bias)  # the pruning-mask formulation
                    torch.testing.assert_close(y, ref, rtol=tol, atol=tol)
                    g = torch.randn_like(y)
                    gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), g)
                    rx, rw, rb = torch.autograd.grad(ref, (x, dense, layer.bias), g)
                    torch.testing.assert_close(gx, rx, rtol=tol, atol=tol)
                    torch.testing.assert_close(gb, rb, rtol=tol, atol=tol)
                    # the dense weight gradient restricted to the pattern, packed like the weight
                    packed = xt._C.block_sparse_from_dense(rw * mask, p).reshape(gw.shape)
                    torch.testing.assert_close(gw, packed, rtol=tol, atol=tol)

    def test_parity_with_modulelist_loop(self):
        groups, fin, fout, batch = 4, 5, 3, 6
        layers = torch.nn.ModuleList([torch.nn.Linear(fin, fout) for _ in range(groups)]).double()
        x = torch.randn(batch, groups * fin, dtype=torch.float64)
        xs = x.view(batch, groups, fin)
        loop = torch.cat([layers[i](xs[:, i]) for i in range(groups)], dim=1)
        W = torch.block_diag(*[l.weight for l in layers]).detach()
        b = torch.cat([l.bias for l in layers]).detach()
        layer = xt.BlockSparseLinear.from_dense(W, xt.block_diagonal(groups * fin, groups * fout, groups), b)
        torch.testing.assert_close(layer(x), loop, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(layer.to_dense(), W, rtol=0, atol=0)

    def test_pattern_forms_and_init(self):
        a = xt.BlockSparseLinear(8, 6, 2)
        b = xt.BlockSparseLinear(8, 6, [(4, 3), (4, 3)])
        c = xt.BlockSparseLinear(8, 6, torch.eye(2))
        self.assertEqual(a.pattern, b.pattern)
        self.assertEqual(tuple(a.weight.shape), (2, 3, 4))
        self.assertEqual(a.pattern, c.pattern)
        layer = xt.BlockSparseLinear(64, 32, xt.block_mask(64, 32, torch.rand(4, 8) < 0.5))
        fan_in = torch.tensor(layer.pattern.row_fan_in(), dtype=torch.float32)
        bound = torch.where(fan_in > 0, fan_in.clamp(min=1).rsqrt(), torch.zeros(()))
        dense = layer.to_dense()
        self.assertTrue(bool((dense.abs() <= bound[:, None] + 1e-7).all()))
        self.assertTrue(bool((layer.bias.abs() <= bound + 1e-7).all()))
        self.assertGreater(float(dense.abs().max()), 0)

    def test_state_dict_and_optimizers(self):
        torch.manual_seed(1)
        layer = xt.BlockSparseLinear(12, 8, 4, dtype=torch.float64)
        buf = io.BytesIO()
        torch.save(layer.state_dict(), buf)
        buf.seek(0)
        other = xt.BlockSparseLinear(12, 8, 4, dtype=torch.float64)
        other.load_state_dict(torch.load(buf))
        x = torch.randn(5, 12, dtype=torch.float64)
        torch.testing.assert_close(other(x), layer(x), rtol=0, atol=0)
        self.assertEqual(set(layer.state_dict()), {"weight", "bias"})
        # a plain SGD step moves exactly the stored blocks by -lr * grad
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        before = layer.weight.detach().clone()
        layer(x).square().sum().backward()
        grad = layer.weight.grad.clone()
        opt.step()
        torch.testing.assert_close(layer.weight.detach(), before - 0.1 * grad, rtol=1e-14, atol=1e-14)

    def test_empty_batch(self):
        layer = xt.BlockSparseLinear(8, 6, 2)
        x = torch.randn(0, 8, requires_grad=True)
        y = layer(x)
        self.assertEqual(y.shape, (0, 6))
        y.sum().backward()
        self.assertEqual(x.grad.shape, (0, 8))
        self.assertEqual(float(layer.weight.grad.abs().sum()), 0.0)

    def test_no_grad_and_inference(self):
        layer = xt.BlockSparseLinear(6, 4, 2)
        with torch.no_grad():
            y = layer(torch.randn(3, 6))
        self.assertFalse(y.requires_grad)
        self.assertIsNone(y.grad_fn)

    def test_errors_carry_xgrad_messages(self):
        layer = xt.BlockSparseLinear(8, 6, 2)
        with self.assertRaisesRegex(ValueError, "block_sparse_linear"):
            layer(torch.randn(3, 7))
        with self.assertRaisesRegex(ValueError, "block_sparse_linear"):
            layer(torch.randn(3, 8, dtype=torch.float64))  # dtype differs from the weight's
        with self.assertRaisesRegex(ValueError, "divide"):
            xt.BlockSparseLinear(8, 6, 3)
        with self.assertRaisesRegex(ValueError, "does not match"):
            xt.BlockSparseLinear(10, 6, xt.block_diagonal(8, 6, 2))
        with self.assertRaises(TypeError):
            xt.BlockSparseLinear(8, 6, "diagonal")
        with self.assertRaisesRegex(ValueError, "block_diagonal.*group 0 has in=-1"):
            xt.BlockSparsePattern.block_diagonal([(-1, 3)])


if __name__ == "__main__":
    unittest.main()
