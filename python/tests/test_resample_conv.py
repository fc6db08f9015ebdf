"""xgrad_torch.resample_conv and ResampleConv: gradcheck on every differentiable input (float64),
parity with the einsum over a dense T written in torch, zero-copy crossing, errors, the module."""
import math
import unittest

import torch
from torch.autograd import gradcheck

import xgrad_torch as xt

torch.manual_seed(0)


def hann_torch(d, width):
    return torch.where(d.abs() <= width / 2, (2 / width) * torch.cos(math.pi * d / width) ** 2, torch.zeros((), dtype=d.dtype))


def linear_interp_torch(d, values, lo, hi):
    """The sampled response with linear interpolation, written in torch (differentiable in values)."""
    K = values.numel()
    h = (hi - lo) / (K - 1)
    pos = (d - lo) / h
    inside = (d >= lo) & (d <= hi)
    k = pos.floor().clamp(0, K - 2).long()
    t = pos - k.to(d.dtype)
    r = values[k] * (1 - t) + values[k + 1] * t
    return torch.where(inside, r, torch.zeros((), dtype=d.dtype))


def einsum_ref(f, coarse, fine, r):
    T = r(coarse[:, :, None] - fine[None, None, :])  # (N, A, B), what the seed's users build
    return torch.einsum("nab,...nb->...na", T, f)


def sample(N=3, A=5, B=40, dtype=torch.float64, batch=()):
    fine = torch.linspace(0.0, 1.0, B, dtype=dtype)
    coarse = torch.sort(torch.rand(N, A, dtype=dtype) * 0.8 + 0.1, dim=1).values
    f = torch.randn(*batch, N, B, dtype=dtype)
    return f, coarse, fine


class ResampleConvTest(unittest.TestCase):
    def test_gradcheck_named_response(self):
        f, coarse, _ = sample(batch=(2,))
        f.requires_grad_()
        coarse.requires_grad_()
        spec = (0.0, 1.0 / 39, 40)
        for resp in (xt.Response.gaussian(0.05), xt.Response.hann(0.2), xt.Response.bspline(4, 0.04)):
            with self.subTest(resp=repr(resp)):
                self.assertTrue(gradcheck(lambda f, c: xt.resample_conv(f, c, spec, resp), (f, coarse)))

    def test_gradcheck_sampled_response(self):
        f, coarse, fine = sample()
        f.requires_grad_()
        coarse.requires_grad_()
        values = torch.rand(9, dtype=torch.float64, requires_grad=True)
        for interp in ("cubic", "linear"):
            for grid in ((0.0, 1.0 / 39, 40), fine, fine ** 1.5):  # uniform spec, linspace, non-uniform
                with self.subTest(interp=interp, grid=type(grid).__name__):
                    def fn(f, c, v):
                        return xt.resample_conv(f, c, grid, xt.SampledResponse(v, -0.1, 0.1, interp))
                    self.assertTrue(gradcheck(fn, (f, coarse, values)))

    def test_parity_with_einsum_named(self):
        f, coarse, fine = sample(N=4, A=7, B=60, batch=(2, 3))
        f.requires_grad_()
        coarse.requires_grad_()
        width = 0.15
        out = xt.resample_conv(f, coarse, (0.0, 1.0 / 59, 60), xt.Response.hann(width))
        g = torch.randn_like(out)
        gf, gc = torch.autograd.grad(out, (f, coarse), g)
        ref = einsum_ref(f, coarse, fine, lambda d: hann_torch(d, width))
        rf, rc = torch.autograd.grad(ref, (f, coarse), g)
        self.assertEqual(out.shape, (2, 3, 4, 7))
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(gf, rf, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(gc, rc, rtol=1e-8, atol=1e-8)

    def test_parity_with_einsum_sampled_linear(self):
        f, coarse, fine = sample(N=3, A=6, B=50)
        values = torch.rand(7, dtype=torch.float64, requires_grad=True)
        f.requires_grad_()
        lo, hi = -0.12, 0.09
        out = xt.resample_conv(f, coarse, fine, xt.SampledResponse(values, lo, hi, "linear"))
        g = torch.randn_like(out)
        gf, gv = torch.autograd.grad(out, (f, values), g)
        ref = einsum_ref(f, coarse, fine, lambda d: linear_interp_torch(d, values, lo, hi))
        rf, rv = torch.autograd.grad(ref, (f, values), g)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(gf, rf, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(gv, rv, rtol=1e-9, atol=1e-9)

    def test_float32(self):
        f, coarse, fine = sample(N=2, A=9, B=80, dtype=torch.float32)
        sigma = 0.02
        out = xt.resample_conv(f, coarse, (0.0, 1.0 / 79, 80), xt.Response.gaussian(sigma))
        self.assertEqual(out.dtype, torch.float32)
        z = sigma * math.sqrt(2 * math.pi) * math.erf(4 / math.sqrt(2))  # unit area over [-4 sigma, 4 sigma]

        def gauss(d):
            return torch.where(d.abs() <= 4 * sigma, torch.exp(-d * d / (2 * sigma ** 2)) / z, torch.zeros((), dtype=d.dtype))
        ref = einsum_ref(f.double(), coarse.double(), fine.double(), gauss)
        scale = float(einsum_ref(f.double().abs(), coarse.double(), fine.double(), gauss).max())
        self.assertLess(float((out.double() - ref).abs().max()), 1e-5 * scale)

    def test_non_contiguous_inputs_and_zero_copy(self):
        f, coarse, _ = sample(N=3, A=4, B=30)
        ft = f.t().contiguous().t()  # same values, not contiguous
        self.assertFalse(ft.is_contiguous())
        spec = (0.0, 1.0 / 29, 30)
        resp = xt.Response.triangle(0.2)
        torch.testing.assert_close(xt.resample_conv(ft, coarse, spec, resp), xt.resample_conv(f, coarse, spec, resp),
                                   rtol=0, atol=0)
        x = torch.randn(5, 6, dtype=torch.float64)
        ptr, back = xt._C._roundtrip(x)
        self.assertEqual(ptr, x.data_ptr())  # the xgrad view is the torch buffer
        self.assertEqual(back.data_ptr(), x.data_ptr())
        torch.testing.assert_close(back, x, rtol=0, atol=0)

    def test_errors_carry_xgrad_messages(self):
        f, coarse, _ = sample(N=3, A=4, B=30)
        with self.assertRaisesRegex(ValueError, "resample_conv"):
            xt.resample_conv(f[:2], coarse, (0.0, 0.1, 30), xt.Response.hann(0.2))  # N mismatch
        with self.assertRaisesRegex(ValueError, "resample_conv"):
            xt.resample_conv(f, coarse, (0.0, 0.1, 31), xt.Response.hann(0.2))  # B mismatch
        with self.assertRaisesRegex(ValueError, "gaussian"):
            xt.Response.gaussian(-1.0)
        with self.assertRaises(TypeError):
            xt.resample_conv(f, coarse, "grid", xt.Response.hann(0.2))
        with self.assertRaises(TypeError):
            xt.resample_conv(f.to(torch.float16), coarse, (0.0, 0.1, 30), xt.Response.hann(0.2))

    def test_in_place_change_after_forward_is_refused(self):
        f, coarse, _ = sample(N=2, A=3, B=20)
        f.requires_grad_()
        c = coarse.clone().requires_grad_()
        c2 = c * 1.0
        out = xt.resample_conv(f, c2, (0.0, 1.0 / 19, 20), xt.Response.hann(0.3))
        with torch.no_grad():
            c2.add_(0.01)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            out.sum().backward()

    def test_empty_sizes(self):
        for fshape, cshape in (((0, 30), (0, 4)), ((2, 0, 30), (0, 4)), ((2, 30), (2, 0)), ((0, 2, 30), (2, 4))):
            with self.subTest(f=fshape, coarse=cshape):
                f = torch.randn(*fshape, dtype=torch.float64, requires_grad=True)
                c = torch.rand(*cshape, dtype=torch.float64, requires_grad=True)
                out = xt.resample_conv(f, c, (0.0, 0.1, 30), xt.Response.hann(0.2))
                self.assertEqual(out.shape, (*fshape[:-1], cshape[1]))
                out.sum().backward()
                self.assertEqual(f.grad.shape, f.shape)
                self.assertEqual(c.grad.shape, c.shape)
                self.assertEqual(float(c.grad.abs().sum()), 0.0)

    def test_module(self):
        f, coarse, fine = sample(N=3, A=5, B=40, batch=(2,))
        values = torch.rand(8, dtype=torch.float64)
        m = xt.ResampleConv(coarse, (0.0, 1.0 / 39, 40), xt.SampledResponse(values, -0.1, 0.1), learn_coarse=True)
        names = dict(m.named_parameters())
        self.assertEqual(set(names), {"coarse", "response_values"})
        out = m(f)
        out.square().sum().backward()
        self.assertIsNotNone(m.coarse.grad)
        self.assertIsNotNone(m.response_values.grad)
        m2 = xt.ResampleConv(coarse, fine, xt.Response.hann(0.2))
        self.assertIn("coarse", dict(m2.named_buffers()))
        self.assertGreater(m2.bytes_held(), 0)
        sd = m2.state_dict()
        self.assertIn("coarse", sd)
        m3 = xt.ResampleConv(torch.zeros_like(coarse), fine, xt.Response.hann(0.2))
        m3.load_state_dict(sd)
        torch.testing.assert_close(m3(f), m2(f), rtol=0, atol=0)
        self.assertIn("N=3", repr(m2))


if __name__ == "__main__":
    unittest.main()
