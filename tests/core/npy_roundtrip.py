#!/usr/bin/python3
"""NumPy / PyTorch side of the core tests (run with Debian's /usr/bin/python3).

    npy_roundtrip.py roundtrip DIR   check the arrays xgrad wrote, write modified copies and
                                     arrays of other dtypes and layouts for xgrad to read back
    npy_roundtrip.py linspace DIR    write torch.linspace results for the cases in DIR/linspace.json

roundtrip: DIR/manifest.json lists {"name", "dtype", "shape", "values"} for every DIR/<name>.npy
that xgrad saved. Each is loaded with numpy.load and must have exactly that dtype, shape and
values (bit-exact); then <name>_mod.npy = array * 2 + 1 (computed in the array's own dtype) is
written with numpy.save. It also writes the arrays listed in WRITTEN below (integer, bool,
version 2.0 header, and layouts xgrad must refuse) and their expected float64 values as JSON.
Exits non-zero with a message on any mismatch.
"""
import json
import os
import sys

import numpy as np


def fail(msg):
    print("npy_roundtrip.py: " + msg, file=sys.stderr)
    sys.exit(1)


def roundtrip(d):
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    for case in manifest:
        name = case["name"]
        arr = np.load(os.path.join(d, name + ".npy"), allow_pickle=False)
        want_dtype = np.dtype(case["dtype"])
        if arr.dtype != want_dtype:
            fail(f"{name}: dtype {arr.dtype}, expected {want_dtype}")
        if list(arr.shape) != case["shape"]:
            fail(f"{name}: shape {arr.shape}, expected {case['shape']}")
        if not arr.flags["C_CONTIGUOUS"]:
            fail(f"{name}: not C-contiguous")
        want = np.array(case["values"], dtype=np.float64).reshape(case["shape"]).astype(want_dtype)
        if not np.array_equal(arr, want):
            fail(f"{name}: values differ:\n{arr}\nexpected\n{want}")
        mod = arr * arr.dtype.type(2) + arr.dtype.type(1)
        assert mod.dtype == arr.dtype
        np.save(os.path.join(d, name + "_mod.npy"), mod)

    # Arrays written by numpy for xgrad to read (int64/int32/uint8/bool keep their dtype, int16 becomes float64).
    expected = {}
    i64 = np.array([[-3, 0, 7], [2**40, -(2**52), 5]], dtype=np.int64)
    np.save(os.path.join(d, "np_int64.npy"), i64)
    expected["np_int64"] = {"shape": list(i64.shape), "values": i64.astype(np.float64).ravel().tolist()}
    b = np.array([True, False, True, True])
    np.save(os.path.join(d, "np_bool.npy"), b)
    expected["np_bool"] = {"shape": list(b.shape), "values": b.astype(np.float64).tolist()}
    i32 = np.arange(-6, 6, dtype=np.int32).reshape(3, 2, 2)
    np.save(os.path.join(d, "np_int32.npy"), i32)
    expected["np_int32"] = {"shape": list(i32.shape), "values": i32.astype(np.float64).ravel().tolist()}
    i16 = np.array([-7, 300], dtype=np.int16)  # no xgrad dtype: loads as float64
    np.save(os.path.join(d, "np_int16.npy"), i16)
    expected["np_int16"] = {"shape": list(i16.shape), "values": i16.astype(np.float64).tolist()}
    u8 = np.array([0, 1, 255], dtype=np.uint8)
    np.save(os.path.join(d, "np_uint8.npy"), u8)
    expected["np_uint8"] = {"shape": list(u8.shape), "values": u8.astype(np.float64).tolist()}
    z = np.zeros((0, 3), dtype=np.float32)
    np.save(os.path.join(d, "np_empty.npy"), z)
    expected["np_empty"] = {"shape": [0, 3], "values": []}
    s = np.array(2.5, dtype=np.float64)
    np.save(os.path.join(d, "np_scalar.npy"), s)
    expected["np_scalar"] = {"shape": [], "values": [2.5]}
    v2 = np.linspace(0, 1, 5).astype(np.float32)
    with open(os.path.join(d, "np_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, v2, version=(2, 0))
    expected["np_v2"] = {"shape": [5], "values": v2.astype(np.float64).tolist()}
    with open(os.path.join(d, "numpy_expected.json"), "w") as f:
        json.dump(expected, f)

    # Layouts xgrad must refuse with an error.
    fo = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    np.save(os.path.join(d, "bad_fortran.npy"), fo)
    np.save(os.path.join(d, "bad_bigendian.npy"), np.arange(4, dtype=">f8"))
    np.save(os.path.join(d, "bad_object.npy"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(os.path.join(d, "bad_complex.npy"), np.array([1 + 2j], dtype=np.complex128))


def linspace(d):
    import torch

    with open(os.path.join(d, "linspace.json")) as f:
        cases = json.load(f)
    for i, c in enumerate(cases):
        dt = {"float32": torch.float32, "float64": torch.float64}[c["dtype"]]
        t = torch.linspace(c["start"], c["stop"], c["steps"], dtype=dt)
        np.save(os.path.join(d, f"linspace_{i}.npy"), t.numpy())


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("roundtrip", "linspace"):
        fail("usage: npy_roundtrip.py roundtrip|linspace DIR")
    {"roundtrip": roundtrip, "linspace": linspace}[sys.argv[1]](sys.argv[2])
