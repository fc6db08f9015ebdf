"""OpenBLAS's own thread pool, for the example scripts that time PyTorch next to xgrad.

Debian's torch runs its CPU GEMMs (mm, bmm, the einsum's bmm, Linear) in OpenBLAS (libblas.so.3 on
Debian is OpenBLAS's), and torch.set_num_threads does not reach OpenBLAS's pool, which keeps one
thread per core: a script that wants PyTorch at t threads sets OpenBLAS's pool to t as well, as
OPENBLAS_NUM_THREADS=t would at start-up."""
import ctypes
import ctypes.util


def openblas():
    """The OpenBLAS that torch's GEMMs run in (libblas.so.3 on Debian is OpenBLAS's, loaded with it),
    or None when the process has none."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None
