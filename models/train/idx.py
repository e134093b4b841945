"""Reading the gzip'd IDX files Fashion-MNIST ships in (shared by fashion.py and corrupt.py)."""
import gzip

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    assert magic >> 8 == 0x08, f"{path}: not an unsigned-byte IDX file"
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)
