#!/usr/bin/python3
"""NumPy side of tests/nn/test_serialize.cpp (run with Debian's /usr/bin/python3; numpy only, the
`safetensors` package is not needed: the format is parsed and written by hand here, independently
of xgrad's code).

    safetensors_check.py DIR

DIR/manifest.json: {"file": "ours.safetensors", "metadata": {...}, "tensors": ["name", ...]}.
For every listed name xgrad also wrote DIR/<name>.npy. This script:
  1. parses DIR/ours.safetensors by hand (u64 little-endian header length, JSON header, buffer),
     checks the header's structure (dtypes, shapes, offsets tiling the buffer, 8-byte alignment of
     the buffer, metadata) and that every tensor equals its .npy bit for bit;
  2. writes DIR/py.safetensors the way the reference writer does (tensors sorted by dtype size
     then name, header padded with spaces) but with header keys in a different order than the
     data, holding 2 * a + 1 of every tensor plus a few extra ones, and the expected arrays as
     DIR/py__<name>.npy, and lists them in DIR/py_manifest.json.
Exits non-zero with a message on any mismatch.
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U8": np.dtype("|u1"),
    "BOOL": np.dtype("|b1"),
}


def fail(msg):
    print("safetensors_check.py: " + msg, file=sys.stderr)
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail(f"{path}: header length {n} past the end")
    if (8 + n) % 8 != 0:
        fail(f"{path}: the buffer starts at {8 + n}, not 8-byte aligned")
    header_text = raw[8 : 8 + n].decode("utf-8")
    if not header_text.startswith("{"):
        fail(f"{path}: header does not start with '{{'")
    header = json.loads(header_text)
    buf = raw[8 + n :]
    metadata = header.pop("__metadata__", {})
    arrays = {}
    spans = []
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail(f"{path}: tensor {name} has fields {sorted(info)}")
        dt = DTYPES[info["dtype"]]
        shape = tuple(info["shape"])
        b, e = info["data_offsets"]
        if e - b != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
            fail(f"{path}: tensor {name} offsets {b},{e} do not match shape {shape} dtype {dt}")
        spans.append((b, e))
        arrays[name] = np.frombuffer(buf[b:e], dtype=dt).reshape(shape)
    pos = 0
    for b, e in sorted(spans):
        if b != pos:
            fail(f"{path}: buffer not tiled at {pos} (next tensor begins at {b})")
        pos = e
    if pos != len(buf):
        fail(f"{path}: tensors cover {pos} of {len(buf)} buffer bytes")
    return arrays, metadata  # in the order of their data in the buffer


def write_safetensors(path, arrays, metadata):
    # Data order: reference writer's order (alignment descending, then name).
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    header, chunks, off = {}, [], 0
    for name in order:
        a = np.array(arrays[name], order="C")  # keeps 0-d (ascontiguousarray makes it 1-d)
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        tag = next(k for k, v in DTYPES.items() if v == a.dtype)
        header[name] = {"dtype": tag, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    # Header keys in reverse name order (so key order differs from data order), metadata last.
    ordered = {k: header[k] for k in sorted(header, reverse=True)}
    if metadata:
        ordered["__metadata__"] = metadata
    text = json.dumps(ordered, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    if len(sys.argv) != 2:
        fail("usage: safetensors_check.py DIR")
    d = sys.argv[1]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    arrays, metadata = read_safetensors(os.path.join(d, manifest["file"]))
    if metadata != manifest["metadata"]:
        fail(f"metadata {metadata} != expected {manifest['metadata']}")
    if list(arrays) != manifest["tensors"]:  # read_safetensors returns them in buffer order
        fail(f"tensor names in buffer order {list(arrays)} != expected {manifest['tensors']}")
    for name in manifest["tensors"]:
        ref = np.load(os.path.join(d, name + ".npy"))
        got = arrays[name]
        if got.dtype != ref.dtype or got.shape != ref.shape:
            fail(f"{name}: {got.dtype}{got.shape} != {ref.dtype}{ref.shape}")
        if got.tobytes() != ref.tobytes():
            fail(f"{name}: values differ from the .npy")

    out = {name: np.asarray(a * a.dtype.type(2) + a.dtype.type(1), dtype=a.dtype) for name, a in arrays.items()}
    rng = np.random.default_rng(7)
    out["extra.scalar"] = np.array(3.25, dtype=np.float64)
    out["extra.empty"] = np.zeros((2, 0, 3), dtype=np.float32)
    out["extra.matrix"] = rng.standard_normal((3, 5)).astype(np.float32)
    out["extra.labels"] = np.array([[0, 2**40 + 3], [-7, 9]], dtype=np.int64)
    out["extra.idx"] = np.array([5, -1, 2**31 - 1], dtype=np.int32)
    out["extra.pixels"] = np.array([0, 17, 255], dtype=np.uint8)
    out["extra.mask"] = np.array([[True, False, True]], dtype=np.bool_)
    py_meta = {"writer": "safetensors_check.py", "note": "ünïcode ✓"}
    write_safetensors(os.path.join(d, "py.safetensors"), out, py_meta)
    for name, a in out.items():
        np.save(os.path.join(d, "py__" + name + ".npy"), a)
    with open(os.path.join(d, "py_manifest.json"), "w") as f:
        json.dump({"tensors": sorted(out), "metadata": py_meta}, f)


if __name__ == "__main__":
    main()
