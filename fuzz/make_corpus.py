#!/usr/bin/python3
"""Regenerates the seed corpora in fuzz/corpus/ (small valid files and slightly broken ones).
Run with Debian's /usr/bin/python3 (numpy); the files are committed, so this is only needed to
change them.

With --large DIR it writes instead the multi-MB hostile seeds (Note [Hostile files] in
core/file_io.hpp) to DIR/safetensors/, DIR/npy/ and DIR/deb822/: headers of several MB with many entries, long
similar names, a huge __metadata__, duplicates at the end, deep nesting, huge numbers and strings.
scripts/fuzz.sh generates them at every run (they are too big to commit)."""
import io
import json
import os
import struct
import sys

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


def raw_st(header, buffer=b""):
    """A safetensors file with the given header text, as is (duplicates and all)."""
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + buffer


def raw_npy(header, data=b"", version=1):
    h = header.encode()
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h)) + h + data


ZERO = '"dtype":"F32","shape":[0],"data_offsets":[0,0]'


def large(folder, size=3_000_000):
    # Valid headers cost the most (the harness also writes them back and parses them again; ASan
    # makes that several seconds per MB on a loaded machine): 1 MB; refused ones 2-3 MB. All of them
    # together take about 20 s of the 60 s CI budget per harness on the loaded 2-core machine.
    valid, refused = size // 3, 2 * size // 3
    entries = []
    n = 0
    while sum(map(len, entries)) < valid:
        entries.append('"t%07d":{%s}' % (n, ZERO))
        n += 1
    many = "{" + ",".join(entries)
    while sum(map(len, entries)) < refused:
        entries.append('"t%07d":{%s}' % (n, ZERO))
        n += 1
    many_dup = "{" + ",".join(entries)
    prefix = "k" * 2000
    similar = "{" + ",".join('"%s%d":{%s}' % (prefix, i, ZERO) for i in range(valid // 2050))
    similar_dup = "{" + ",".join('"%s%d":{%s}' % (prefix, i, ZERO) for i in range(refused // 2050))
    meta = '{"__metadata__":{' + ",".join('"m%d":"v"' % i for i in range(valid // 12))
    meta_dup = '{"__metadata__":{' + ",".join('"m%d":"v"' % i for i in range(refused // 12))
    s = {
        "many_entries": raw_st(many + "}"),
        "many_entries_dup": raw_st(many_dup + ',"t0000000":{%s}}' % ZERO),
        "similar_names": raw_st(similar + "}"),
        "similar_names_dup": raw_st(similar_dup + ',"%s0":{%s}}' % (prefix, ZERO)),
        "huge_metadata": raw_st(meta + "}}"),
        "huge_metadata_dup": raw_st(meta_dup + ',"m0":"v"}}'),
        "huge_name": raw_st('{"%s":{%s}}' % ("n" * size, ZERO)),
        "deep_arrays": raw_st('{"w":{"dtype":"F32","shape":' + "[" * size),
        "many_dims": raw_st('{"w":{"dtype":"F32","shape":[' + "1," * (refused // 2) + '1],"data_offsets":[0,4]}}',
                            b"\0" * 4),
        "huge_number": raw_st('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,' + "9" * size + "]}}", b"\0" * 4),
        "whitespace": raw_st("{" + '"w":{%s}' % ZERO + " " * valid + "}"),
    }
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': "
    n = {
        "whitespace_v2": raw_npy(head + "(3,)" + " " * valid + "}", b"\0" * 24, 2),
        "huge_descr_v3": raw_npy("{'descr': '" + "f" * size + "', 'fortran_order': False, 'shape': (3,)}", b"\0" * 24, 3),
        "many_dims_v2": raw_npy(head + "(" + "1, " * (size // 3) + ")}", b"\0" * 8, 2),
        "huge_dim_v2": raw_npy(head + "(" + "9" * size + ",)}", b"", 2),
        "nested_v2": raw_npy(head + "(" * size + "}", b"", 2),
    }
    # deb822 package indexes: many paragraphs, one huge continued field, a huge relation list, long
    # names, a huge paragraph of distinct fields; each valid one also as a refused variant.
    para = "Package: p%07d\nSection: contrib/net\nDescription: a package\nDepends: p0000000 (>= 1.0) | q:any, r\n\n"
    many = "".join(para % i for i in range(valid // len(para % 0)))
    rel = ", ".join("p%07d (>= 1:2.3-4~) | v%d:any" % (i, i) for i in range(valid // 36))
    c = {
        "many_paragraphs": many.encode(),
        "many_paragraphs_dup": (many + "Package: x\nSection: a\nsection: b\n").encode(),
        "long_continuation": ("Package: a\nDescription: x\n" + " more text\n" * (valid // 11)).encode(),
        "huge_relations": ("Package: a\nDepends: " + rel + "\n").encode(),
        "huge_relations_bad": ("Package: a\nDepends: " + rel + ", (\n").encode(),
        "unclosed_brackets": ("Package: a\nDepends: b " + "[" * refused + "\n").encode(),
        "long_name": ("Package: " + "n" * size + "\n").encode(),
        "many_fields": ("Package: a\n" + "".join("F%d: v\n" % i for i in range(valid // 10))).encode(),
        "many_fields_dup": ("Package: a\n" + "".join("F%d: v\n" % i for i in range(refused // 10)) + "F0: v\n").encode(),
        "blank_lines": ("Package: a\n" + " \n" * (valid // 2)).encode(),
        "no_colon": ("Package: a\n" + "x" * size).encode(),
    }
    for sub, files in (("safetensors", s), ("npy", n), ("deb822", c)):
        d = os.path.join(folder, sub)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--large":
        large(sys.argv[2])
        return
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
        # duplicate keys at every level (JSON allows them; the reader refuses them)
        "dup_name": raw_st('{"a":{%s},"b":{%s},"a":{%s}}' % (ZERO, ZERO, ZERO)),
        "dup_escaped_name": raw_st('{"w":{%s},"\\u0077":{%s}}' % (ZERO, ZERO)),
        "dup_metadata": raw_st('{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}'),
        "dup_metadata_key": raw_st('{"__metadata__":{"a":"1","a":"2"}}'),
        "dup_field": raw_st('{"w":{"dtype":"F32","dtype":"F64","shape":[0],"data_offsets":[0,0]}}'),
        "bad_deep": raw_st('{"w":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}}', b"\0" * 4),
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
        "v3_header": npy(f4, version=(3, 0)),
        "double_quotes": raw_npy('{"shape": (2,), "fortran_order": False, "descr": "<f8"}', b"\0" * 16),
        "bad_dup_key": raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'shape': (1,)}", b"\0" * 16),
        "bad_unknown_key": raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", b"\0" * 16),
        "bad_overflow": raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"),
    }
    c = {
        "valid_dumpavail": (
            "Package: 0ad\nVersion: 0.0.26-3\nArchitecture: amd64\n"
            "Depends: 0ad-data (>= 0.0.26), libc6 (>= 2.34), python3:any | python3-minimal:any (>> 3.9~)\n"
            "Pre-Depends: dpkg (>= 1.15.6~)\nDescription: Real-time strategy game of ancient warfare\n"
            "Tag: game::strategy, interface::graphical,\n uitoolkit::sdl, use::gameplaying\nSection: games\n\n"
            "Package: 0ad-data\nSuggests: 0ad\nDescription: Real-time strategy game (data files)\n"
            " A long description.\n .\n More.\nSection: games\n\n"
            "Package: firmware-x\nSection: non-free-firmware/kernel\nRecommends: 0ad | 0ad-data\n"
        ).encode(),
        "valid_crlf": b"Package: a\r\nsection: contrib/net\r\nDepends: b(=1), c [amd64] <!nocheck>\r\n \t\r\nPackage: b\r\n",
        "valid_empty_fields": b"Package: a\nRecommends:\nDescription:\nSection:\n",
        "bad_no_colon": b"Package: a\nno colon\n",
        "bad_continuation_first": b" x\nPackage: a\n",
        "bad_no_package": b"Version: 1\n\nPackage: a\n",
        "bad_duplicate_field": b"Package: a\nDepends: b\nDEPENDS: c\n",
        "bad_relation": b"Package: a\nDepends: b (>= 1, c | , d:\n",
    }
    for folder, files in (("safetensors", s), ("npy", n), ("deb822", c)):
        d = os.path.join(HERE, "corpus", folder)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
