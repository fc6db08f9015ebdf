"""Reads the Fashion-MNIST files of the Debian package dataset-fashion-mnist with gzip and numpy (not
through xgrad) and writes, for tests/nn/test_datasets.cpp, DIR/fashion_mnist.txt: per split the
image count, the sum of all pixel bytes, the pixel sum of the first and of the last image, the
first and last labels and the count of each label."""
import gzip
import sys

import numpy as np

root = "/usr/share/datasets/fashion-mnist"
d = sys.argv[1]
lines = []
for split in ("train", "t10k"):
    images = np.frombuffer(gzip.open(f"{root}/{split}-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
    labels = np.frombuffer(gzip.open(f"{root}/{split}-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    images = images.reshape(-1, 28 * 28).astype(np.int64)
    counts = np.bincount(labels, minlength=10)
    lines.append(" ".join(str(v) for v in [len(labels), images.sum(), images[0].sum(), images[-1].sum(),
                                           labels[0], labels[-1], *counts]))
open(f"{d}/fashion_mnist.txt", "w").write("\n".join(lines) + "\n")
