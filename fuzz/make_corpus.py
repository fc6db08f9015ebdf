#!/usr/bin/python3
"""Regenerates the seed corpora in fuzz/corpus/ (small valid files and slightly broken ones).
Run with Debian's /usr/bin/python3 (numpy); the files are committed, so this is only needed to
change them."""
import io
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def st(tensors, metadata=None, pad=True, order=None):
    header, chunks, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, a in tensors:
        data = a.tobytes()
        header[name] = {"dtype": {4: "F32", 8: "F64"}[a.dtype.itemsize], "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def npy(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def main():
    f4 = np.arange(6, dtype=np.float32).reshape(2, 3)
    f8 = np.linspace(-1, 1, 4)
    s = {
        "valid_two": st([("w", f4), ("b", f8)], {"format": "pt"}),
        "valid_scalar_empty": st([("s", np.array(2.5)), ("e", np.zeros((0, 3), np.float32))]),
        "valid_unpadded": st([("x", np.ones(3, np.float32))], pad=False),
        "valid_none": st([]),
        "bad_bf16": st([("w", f4)]).replace(b'"F32"', b'"BF16"'),
        "bad_overlap": st([("a", f8), ("b", f8)]).replace(b"[32, 64]", b"[16, 48]"),
        "bad_truncated": st([("w", f4), ("b", f8)])[:-5],
        "bad_header_len": struct.pack("<Q", 1 << 40) + b"{}",
        "bad_negative": st([("w", f4)]).replace(b"[2, 3]", b"[-2, 3]"),
    }
    n = {
        "f4_2d": npy(f4),
        "f8_1d": npy(f8),
        "f8_scalar": npy(np.array(3.0)),
        "i8": npy(np.arange(5, dtype=np.int64)),
        "u2": npy(np.arange(3, dtype=np.uint16)),
        "bool": npy(np.array([True, False])),
        "v2_header": npy(f4, version=(2, 0)),
        "empty": npy(np.zeros((2, 0), np.float32)),
        "bad_fortran": npy(np.asfortranarray(f4)),
        "bad_bigendian": npy(f8.astype(">f8")),
        "bad_truncated": npy(f8)[:-3],
    }
    for folder, files in (("safetensors", s), ("npy", n)):
        d = os.path.join(HERE, "corpus", folder)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
