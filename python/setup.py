"""pip install --no-build-isolation ./python: builds the extension module xgrad_torch._C with CMake and
installs the package (docs/python.md, "Install with pip").

setuptools (pyproject.toml: setuptools.build_meta) calls build_ext, which configures the repository root
(the parent of this folder) with the module on and the tests, examples and benchmarks off, in Release,
builds only the target xgrad_torch_C (output name _C) and copies _C<EXT_SUFFIX> next to
xgrad_torch/__init__.py in the wheel. The module is built for the interpreter that runs pip
(sys.executable, passed as -DPython_EXECUTABLE) and against the torch it imports.

Environment:
  XGRAD_BUILD_DIR          build in this already configured CMake folder, an absolute path (e.g.
                           $PWD/build/release, configured
                           with the module on for the same interpreter): no configure, only
                           `cmake --build <dir> --target xgrad_torch_C`; its cache is not changed.
                           Default: a folder of its own, <repository>/build/pip (kept between installs,
                           so that re-installing recompiles only what changed).
  XGRAD_CMAKE_ARGS         extra arguments for the configure, split like a shell does, e.g.
                           "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DXGRAD_ARCH=" (not with XGRAD_BUILD_DIR).
  CMAKE_BUILD_PARALLEL_LEVEL  parallel build jobs (default: the number of cores available).

Nothing is downloaded: build with --no-build-isolation, from the setuptools, wheel and CMake installed on
the machine. Nothing is written to the source tree: setuptools' own build and egg-info folders are kept
in the CMake build folder.
"""
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET = "xgrad_torch_C"


def fail(message):
    sys.exit(f"xgrad_torch setup.py: error: {message}")


def repository_version():
    """The project's version, from project(xgrad VERSION x.y.z) in the top-level CMakeLists.txt."""
    path = os.path.join(ROOT, "CMakeLists.txt")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        fail(f"{path} not found: build from a checkout of the xgrad repository (the package is built "
             "from python/ inside it, e.g. `pip install --no-build-isolation ./python`), not from a copy "
             "of python/ alone")
    m = re.search(r"project\(\s*xgrad\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        fail(f"no `project(xgrad VERSION ...)` in {path}")
    return m.group(1)


def build_folder():
    """(folder, reuse): XGRAD_BUILD_DIR (reused as configured) or <repository>/build/pip (ours)."""
    given = os.environ.get("XGRAD_BUILD_DIR")
    if given:
        if not os.path.isabs(given):  # pip runs setup.py in python/, not in the folder pip was run from
            fail(f"XGRAD_BUILD_DIR={given} must be an absolute path, e.g. XGRAD_BUILD_DIR=$PWD/build/release")
        return given, True
    return os.path.join(ROOT, "build", "pip"), False


def torch_paths():
    """The running interpreter's torch package folder; a clear error when it cannot import torch."""
    try:
        import torch
    except ImportError as e:
        fail(f"{sys.executable} cannot import torch ({e}). The module is built against the torch of the "
             "interpreter that runs pip: on Debian install python3-torch (and libtorch-dev), and in a venv "
             "create it with --system-site-packages so that it sees Debian's torch.")
    return os.path.dirname(os.path.abspath(torch.__file__))


def read_cache(folder):
    entries = {}
    with open(os.path.join(folder, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([^#/][^:=]*):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                entries[m.group(1)] = m.group(2)
    return entries


def check_reused_folder(folder, torch_dir):
    """A reused folder must hold the module target built for this interpreter and this torch."""
    if not os.path.isfile(os.path.join(folder, "CMakeCache.txt")):
        fail(f"XGRAD_BUILD_DIR={folder} is not a configured CMake build folder (no CMakeCache.txt); "
             "configure it first (e.g. `cmake --preset release`) or unset XGRAD_BUILD_DIR")
    cache = read_cache(folder)
    cached_python = cache.get("_Python_EXECUTABLE")
    torch_python = cache.get("XGRAD_TORCH_PYTHON_LIBRARY")
    if not cached_python or not torch_python or torch_python.endswith("-NOTFOUND"):
        fail(f"XGRAD_BUILD_DIR={folder} was configured without the PyTorch extension module (XGRAD_PYTHON, "
             "docs/python.md); configure it with the module, or unset XGRAD_BUILD_DIR")
    ours = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    if os.path.realpath(cached_python) not in (ours, os.path.realpath(sys.executable)):
        fail(f"XGRAD_BUILD_DIR={folder} builds the module for {cached_python}, not for the interpreter running "
             f"pip ({sys.executable} -> {ours}); unset XGRAD_BUILD_DIR to build for this one")
    our_torch_python = os.path.join(torch_dir, "lib", "libtorch_python.so")
    if os.path.exists(our_torch_python) and os.path.realpath(our_torch_python) != os.path.realpath(torch_python):
        fail(f"XGRAD_BUILD_DIR={folder} links {torch_python}, not the torch this interpreter imports "
             f"({our_torch_python}); unset XGRAD_BUILD_DIR to build against this one")


def parallel_jobs(requested):
    level = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")
    if level:
        return level
    if requested and not isinstance(requested, bool):  # build_ext --parallel N
        return str(requested)
    try:
        return str(len(os.sched_getaffinity(0)))
    except AttributeError:
        return str(os.cpu_count() or 1)


def run(cmd, cwd=None):
    print("xgrad_torch setup.py: " + shlex.join(cmd), flush=True)
    result = subprocess.run(cmd, cwd=cwd)
    if result.returncode != 0:
        fail(f"command failed with exit code {result.returncode}: {shlex.join(cmd)} "
             "(run pip with -v to see CMake's and the compiler's output)")


class CMakeBuild(build_ext):
    """build_ext for the one extension: CMake builds it, setuptools only copies the result."""

    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            fail("cmake not found on PATH: install CMake 3.25 or newer (Debian 12: apt-get install cmake) "
                 "and the build dependencies (bash scripts/install-deps.sh)")
        torch_dir = torch_paths()
        folder, reuse = build_folder()
        if reuse:
            check_reused_folder(folder, torch_dir)
            if os.environ.get("XGRAD_CMAKE_ARGS"):
                print("xgrad_torch setup.py: XGRAD_CMAKE_ARGS ignored: XGRAD_BUILD_DIR is reused as configured",
                      flush=True)
        else:
            self.configure(cmake, folder)
        run([cmake, "--build", folder, "--target", TARGET, "--parallel", parallel_jobs(self.parallel)])

        name = "_C" + sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(folder, "python", "xgrad_torch", name)
        if not os.path.isfile(built):
            found = os.listdir(os.path.dirname(built)) if os.path.isdir(os.path.dirname(built)) else []
            fail(f"the build did not produce {built} (found: {', '.join(sorted(found)) or 'nothing'}); was the "
                 f"module built for another interpreter than {sys.executable}?")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        print(f"xgrad_torch setup.py: {built} -> {dest} (torch: {torch_dir})", flush=True)

    def configure(self, cmake, folder):
        args = [
            cmake, "-S", ROOT, "-B", folder,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DXGRAD_PYTHON=ON",  # the module, or a configure error saying what is missing
            "-DXGRAD_BUILD_TESTS=OFF", "-DXGRAD_BUILD_EXAMPLES=OFF", "-DXGRAD_BUILD_BENCH=OFF",
            "-DXGRAD_WITH_MPI=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
            # Found again at each configure: the folder may last have been configured for another torch.
            "-UTorch_DIR", "-UXGRAD_TORCH_PYTHON_LIBRARY",
        ]
        extra = shlex.split(os.environ.get("XGRAD_CMAKE_ARGS", ""))
        first = not os.path.isfile(os.path.join(folder, "CMakeCache.txt"))
        if first and shutil.which("ninja") and not any(a.startswith("-G") for a in extra):
            args += ["-G", "Ninja"]
        run(args + extra)


if {"bdist_wheel", "dist_info", "editable_wheel"} & set(sys.argv[1:]):
    # setuptools 66 builds wheels, and their metadata, with the `wheel` package's bdist_wheel.
    if importlib.util.find_spec("wheel") is None:
        fail(f"{sys.executable} cannot import the `wheel` package, which setuptools needs to build the wheel: "
             "on Debian install python3-wheel, and in a venv create it with --system-site-packages")

version = repository_version()  # first: a clear error outside a checkout
folder, _ = build_folder()
# setuptools' build/ and *.egg-info/ go to the build folder, not into python/. Its build/ holds only
# copies (the .py files, the module), emptied before each wheel so that nothing stale is packaged.
setuptools_build = os.path.join(folder, "python", "setuptools-build")
if {"bdist_wheel", "editable_wheel"} & set(sys.argv[1:]):
    shutil.rmtree(setuptools_build, ignore_errors=True)
os.makedirs(os.path.join(folder, "python"), exist_ok=True)  # egg_base must exist
setup(
    version=version,
    packages=["xgrad_torch"],
    ext_modules=[Extension("xgrad_torch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={
        "build": {"build_base": setuptools_build},
        "egg_info": {"egg_base": os.path.join(folder, "python")},
    },
    zip_safe=False,
)
