"""xgrad_torch.spmm and sddmm on torch sparse CSR (and COO) matrices: values and gradients against
torch.sparse.mm and a dense reference, float64 gradcheck, empty rows, errors."""
import unittest

import torch
from torch.autograd import gradcheck

import xgrad_torch as xt

torch.manual_seed(0)


def random_csr(rows, cols, density, dtype=torch.float64):
    """A random sparse CSR matrix with some empty rows (and duplicates-free sorted entries)."""
    mask = torch.rand(rows, cols) < density
    if rows > 2:
        mask[1] = False  # an empty row
    dense = torch.randn(rows, cols, dtype=dtype) * mask
    return dense.to_sparse_csr(), dense


class SpmmTest(unittest.TestCase):
    def test_values_match_torch_sparse_mm(self):
        for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
            for rows, cols, feats in ((7, 5, 3), (1, 1, 1), (40, 33, 17)):
                with self.subTest(dtype=dtype, shape=(rows, cols, feats)):
                    A, dense = random_csr(rows, cols, 0.3, dtype)
                    x = torch.randn(cols, feats, dtype=dtype)
                    want = torch.sparse.mm(A.to_sparse_coo(), x)
                    torch.testing.assert_close(xt.spmm(A, x), want, rtol=tol, atol=tol)
                    torch.testing.assert_close(xt.spmm(A.to_sparse_coo(), x), want, rtol=tol, atol=tol)

    def test_gradients_match_dense(self):
        A, dense = random_csr(9, 6, 0.4)
        x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
        values = A.values().clone().requires_grad_(True)
        g = torch.randn(9, 4, dtype=torch.float64)
        xt.spmm(A, x, values=values).backward(g)
        # reference: the dense product, its gradient read at the stored entries
        d = dense.clone().requires_grad_(True)
        x2 = x.detach().clone().requires_grad_(True)
        (d @ x2).backward(g)
        torch.testing.assert_close(x.grad, x2.grad)
        rows = torch.repeat_interleave(torch.arange(9), A.crow_indices().diff())
        torch.testing.assert_close(values.grad, d.grad[rows, A.col_indices()])

    def test_gradcheck(self):
        A, _ = random_csr(8, 5, 0.4)
        x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        values = A.values().clone().requires_grad_(True)
        self.assertTrue(gradcheck(lambda v, x: xt.spmm(A, x, values=v), (values, x)))

    def test_empty(self):
        A = torch.sparse_csr_tensor(torch.zeros(4, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                                    torch.zeros(0, dtype=torch.float64), (3, 5))
        out = xt.spmm(A, torch.randn(5, 2, dtype=torch.float64))
        torch.testing.assert_close(out, torch.zeros(3, 2, dtype=torch.float64))

    def test_errors(self):
        A, _ = random_csr(4, 3, 0.5)
        with self.assertRaisesRegex(ValueError, "spmm"):
            xt.spmm(A, torch.randn(4, 2, dtype=torch.float64))  # x has 4 rows, A 3 columns
        with self.assertRaisesRegex(TypeError, "spmm: argument 'A'"):
            xt.spmm(torch.randn(4, 3), torch.randn(3, 2))
        with self.assertRaisesRegex(ValueError, "spmm"):
            xt.spmm(A, torch.randn(3, 2, dtype=torch.float64), values=torch.randn(A.values().numel() + 1,
                                                                                   dtype=torch.float64))


class SddmmTest(unittest.TestCase):
    def test_values_and_gradients(self):
        A, dense = random_csr(7, 6, 0.4)
        x = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
        y = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
        out = xt.sddmm(A, x, y)
        rows = torch.repeat_interleave(torch.arange(7), A.crow_indices().diff())
        cols = A.col_indices()
        x2 = x.detach().clone().requires_grad_(True)
        y2 = y.detach().clone().requires_grad_(True)
        want = (x2[rows] * y2[cols]).sum(-1)
        torch.testing.assert_close(out, want)
        # against torch's own sampled product on the same pattern
        sampled = torch.sparse.sampled_addmm(A, x.detach(), y.detach().T, beta=0.0)
        torch.testing.assert_close(out.detach(), sampled.values())
        g = torch.randn_like(want)
        out.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, x2.grad)
        torch.testing.assert_close(y.grad, y2.grad)

    def test_gradcheck(self):
        A, _ = random_csr(6, 5, 0.5)
        x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
        y = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
        self.assertTrue(gradcheck(lambda x, y: xt.sddmm(A, x, y), (x, y)))

    def test_errors(self):
        A, _ = random_csr(6, 5, 0.5)
        with self.assertRaisesRegex(ValueError, "sddmm"):
            xt.sddmm(A, torch.randn(6, 2, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64))


class PatternHandleTest(unittest.TestCase):
    def test_handle_kept_across_calls_with_its_transpose(self):
        A, dense = random_csr(9, 7, 0.4)
        x = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
        xt.spmm(A, x).sum().backward()
        p = xt.csr_pattern(A)
        self.assertEqual((p.rows, p.cols, p.nnz), (9, 7, A.values().numel()))
        self.assertTrue(p.has_transposed)  # built by the first backward (dx = A^T g)
        g1 = x.grad.clone()
        x.grad = None
        xt.spmm(A, x).sum().backward()  # the same handle: not checked again, its transpose reused
        self.assertIs(xt.csr_pattern(A), p)
        torch.testing.assert_close(x.grad, g1)
        y = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
        xt.sddmm(A, torch.randn(9, 3, dtype=torch.float64), y).sum().backward()  # dy through A^T too
        self.assertIs(xt.csr_pattern(A), p)
        # a COO matrix keeps its handle as well
        C = dense.to_sparse()
        q = xt.csr_pattern(C)
        xt.spmm(C, x)
        self.assertIs(xt.csr_pattern(C), q)

    def test_in_place_change_of_the_indices_makes_a_new_handle(self):
        A = torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]),
                                    torch.tensor([2.0, 3.0], dtype=torch.float64), (2, 2))
        x = torch.tensor([[1.0], [10.0]], dtype=torch.float64, requires_grad=True)
        torch.testing.assert_close(xt.spmm(A, x), torch.tensor([[2.0], [30.0]], dtype=torch.float64))
        p = xt.csr_pattern(A)
        A.col_indices().copy_(torch.tensor([1, 0]))  # bumps the indices' version
        q = xt.csr_pattern(A)
        self.assertIsNot(q, p)
        self.assertFalse(q.has_transposed)
        out = xt.spmm(A, x)
        torch.testing.assert_close(out, torch.tensor([[20.0], [3.0]], dtype=torch.float64))
        out.sum().backward()
        torch.testing.assert_close(x.grad, torch.tensor([[3.0], [2.0]], dtype=torch.float64))
        self.assertIs(xt.csr_pattern(A), q)
        # a bad pattern is refused when the handle is made, naming the argument
        with self.assertRaisesRegex(ValueError, "CsrPattern: argument 'col_indices'"):
            xt._C.CsrPattern(torch.tensor([0, 2, 2]), torch.tensor([1, 1]), 2, 2)

if __name__ == "__main__":
    unittest.main()
