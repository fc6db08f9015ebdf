"""The pip install path (CTest python_pip_install; docs/python.md, "Install with pip"), offline:

  1. a venv with --system-site-packages (Debian's torch visible) in <build>/python/pip_install_test/;
  2. `pip install --no-build-isolation --no-index <repo>/python` in it, with XGRAD_BUILD_DIR=<build>
     (setup.py reuses this configured build: the module is built already, nothing is recompiled);
  3. from a temporary folder outside the source and build trees, with no PYTHONPATH, the venv's python
     imports xgrad_torch from the venv's site-packages and checks a block-sparse layer's and a
     resampling convolution's forward and backward against dense torch formulas;
  4. `pip uninstall -y xgrad_torch`: the import fails and the package's files are gone;
  5. the same `pip install` again, and the check again;
  6. no file was added to or removed from python/ in the source tree (setuptools' build/ and egg-info
     go to the build folder).

usage: pip_install_check.py [--fresh] <repository root> <build folder>

--fresh: the path a user takes, without XGRAD_BUILD_DIR: setup.py configures and builds the module
in its own folder, <repository>/build/pip (removed first), compiling the library (minutes; .ci/run
runs it once, the CTest test python_pip_install without it).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHECK = r"""
import math, os, sys
import torch
import xgrad_torch as xt

site = os.path.realpath(sys.argv[1])
where = os.path.realpath(xt.__file__)
assert where.startswith(site + os.sep), f"xgrad_torch imported from {where}, not from {site}"
assert os.path.realpath(xt._C.__file__).startswith(site + os.sep), xt._C.__file__
torch.manual_seed(0)

# Block-sparse linear layer against the dense formula x W^T + b with W = layer.to_dense().
layer = xt.BlockSparseLinear(12, 8, [(4, 2), (8, 6)], dtype=torch.float64)
x = torch.randn(5, 12, dtype=torch.float64, requires_grad=True)
y = layer(x)
g = torch.randn_like(y)
gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), g)
W = layer.to_dense().clone().requires_grad_()
b = layer.bias.detach().clone().requires_grad_()
x2 = x.detach().clone().requires_grad_()
ref = x2 @ W.T + b
rx, rW, rb = torch.autograd.grad(ref, (x2, W, b), g)
torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
torch.testing.assert_close(gx, rx, rtol=1e-12, atol=1e-12)
torch.testing.assert_close(gb, rb, rtol=1e-12, atol=1e-12)
torch.testing.assert_close(xt.BlockSparseLinear.from_dense(rW, layer.pattern).weight, gw, rtol=1e-12, atol=1e-12)
assert float(W.detach()[0, 4:].abs().sum()) == 0.0 and float(W.detach()[0, :4].abs().sum()) > 0.0

# Resampling convolution against the dense T[n, a, b] = hann(coarse[n, a] - fine[b]).
N, A, B, width = 3, 5, 40, 0.2
fine = torch.linspace(0.0, 1.0, B, dtype=torch.float64)
coarse = torch.sort(torch.rand(N, A, dtype=torch.float64) * 0.8 + 0.1, dim=1).values.requires_grad_()
f = torch.randn(2, N, B, dtype=torch.float64, requires_grad=True)
out = xt.resample_conv(f, coarse, (0.0, 1.0 / (B - 1), B), xt.Response.hann(width))
d = coarse[:, :, None] - fine[None, None, :]
T = torch.where(d.abs() <= width / 2, (2 / width) * torch.cos(math.pi * d / width) ** 2, torch.zeros((), dtype=d.dtype))
ref = torch.einsum("nab,...nb->...na", T, f)
g = torch.randn_like(out)
grads = torch.autograd.grad(out, (f, coarse), g)
refs = torch.autograd.grad(ref, (f, coarse), g)
torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
torch.testing.assert_close(grads[0], refs[0], rtol=1e-10, atol=1e-10)
torch.testing.assert_close(grads[1], refs[1], rtol=1e-8, atol=1e-8)
assert float(out.abs().sum()) > 0.0
print(f"xgrad_torch {where}: block-sparse and resample_conv forward + backward match torch")
"""


def source_files(folder):
    """Every file and folder under `folder`, but Python's caches (other tests may write them)."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + [f for f in filenames if not f.endswith(".pyc")]:
            found.add(os.path.relpath(os.path.join(dirpath, name), folder))
    return found


def main():
    args = sys.argv[1:]
    fresh = bool(args) and args[0] == "--fresh"
    if fresh:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    root, build = (os.path.abspath(a) for a in args)
    python_src = os.path.join(root, "python")
    work = os.path.join(build, "python", "pip_install_test")
    venv = os.path.join(work, "venv")
    vpython = os.path.join(venv, "bin", "python")
    before = source_files(python_src)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME") and not k.startswith("PIP_")}
    # Not the machine's pip configuration (an index, find-links): the install must need nothing but the checkout.
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.pop("XGRAD_BUILD_DIR", None)
    if fresh:
        shutil.rmtree(os.path.join(root, "build", "pip"), ignore_errors=True)
        work += "_fresh"
        venv, vpython = os.path.join(work, "venv"), os.path.join(work, "venv", "bin", "python")
    else:
        env["XGRAD_BUILD_DIR"] = build
    start = time.monotonic()

    def step(what, cmd, cwd=None, expect_fail=False):
        shown = ["<CHECK>" if a == CHECK else a for a in cmd]
        print(f"--- [{time.monotonic() - start:5.1f} s] {what}: {' '.join(shown)}", flush=True)
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="", flush=True)
        if expect_fail:
            if r.returncode == 0:
                sys.exit(f"FAIL: {what}: succeeded, expected a failure")
        elif r.returncode != 0:
            sys.exit(f"FAIL: {what}: exit code {r.returncode}")
        return r.stdout

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        step("venv", [sys.executable, "-m", "venv", "--system-site-packages", venv])
    except SystemExit:
        print("(Debian: the venv module and its pip come with python3-venv: bash scripts/install-deps.sh)")
        raise
    site = step("site-packages", [vpython, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    install = [vpython, "-m", "pip", "install", "--no-build-isolation", "--no-index", python_src]
    outside = tempfile.mkdtemp(prefix="xgrad-pip-check-")  # not under the source or build trees
    try:
        for tree in (root, build):
            if os.path.realpath(outside).startswith(os.path.realpath(tree) + os.sep):
                sys.exit(f"FAIL: the temporary folder {outside} is inside {tree}; set TMPDIR elsewhere")
        step("install", install)
        step("import and compute", [vpython, "-c", CHECK, site], cwd=outside)

        step("uninstall", [vpython, "-m", "pip", "uninstall", "-y", "xgrad_torch"])
        out = step("import after uninstall", [vpython, "-c", "import xgrad_torch"], cwd=outside, expect_fail=True)
        if "ModuleNotFoundError" not in out:
            sys.exit("FAIL: after pip uninstall, `import xgrad_torch` failed but not with ModuleNotFoundError")
        left = [n for n in os.listdir(site) if n.lower().startswith("xgrad_torch")]
        if left:
            sys.exit(f"FAIL: pip uninstall left {left} in {site}")

        step("re-install", install)
        step("import and compute again", [vpython, "-c", CHECK, site], cwd=outside)
    finally:
        shutil.rmtree(outside, ignore_errors=True)

    after = source_files(python_src)
    if before != after:
        sys.exit(f"FAIL: the install changed the source tree {python_src}: added {sorted(after - before)}, "
                 f"removed {sorted(before - after)}")
    shutil.rmtree(work)
    print(f"--- [{time.monotonic() - start:5.1f} s] pip install, uninstall and re-install: OK; "
          f"{python_src} unchanged")


if __name__ == "__main__":
    main()
