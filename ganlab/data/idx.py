"""Reading IDX files (the MNIST / Fashion-MNIST format), plain or gzipped."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import torch

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
           0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def _gunzip(path: Path) -> bytes:
    """The decompressed content of a ``.gz`` file; ValueError naming the file when it is damaged."""
    try:
        return gzip.decompress(path.read_bytes())
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # EOFError: the stream ends before its end marker
        raise ValueError(f"{path} is damaged ({type(err).__name__}: {err}; a truncated download or copy?): "
                         "replace it with an intact copy of the file") from err


def read_idx(path: str | Path) -> torch.Tensor:
    """Read an IDX file (LeCun et al., http://yann.lecun.com/exdb/mnist/ "file formats") into a tensor.

    Args:
        path: a ``*-idx?-ubyte`` file, optionally gzipped (``.gz``).

    Returns:
        A tensor of the file's dimensions, e.g. (60000, 28, 28) uint8 for training images.

    Raises:
        ValueError: naming the file: it is not IDX (bad magic number), its data are shorter than its header
            says, or a ``.gz`` file is damaged (truncated or not gzip).
    """
    path = Path(path)
    raw = _gunzip(path) if path.suffix == ".gz" else path.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number); re-install or re-download it")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">i4", count=ndim, offset=4).astype(np.int64)
    dtype = np.dtype(_DTYPES[raw[2]])
    count = int(np.prod(dims))
    if len(raw) - 4 - 4 * ndim < count * dtype.itemsize:
        raise ValueError(f"{path} is truncated: header says {tuple(dims)} but the data are shorter")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=4 + 4 * ndim).reshape(tuple(dims))
    return torch.from_numpy(data.astype(dtype.newbyteorder("="), copy=True))
