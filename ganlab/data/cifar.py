"""CIFAR-10 (Krizhevsky 2009) from a local copy of its python version: the folder ``cifar-10-batches-py`` with the
pickled batches ``data_batch_1`` .. ``data_batch_5`` (50,000 training images) and ``test_batch`` (10,000).

The layout and the file names are torchvision's (``torchvision.datasets.CIFAR10``, which also fetches the archive
when ``dataset.download=true``). The batches are read here rather than through that class because it accepts
only the published files (it checks each one's MD5): a subset or a test fixture in the same layout would be
refused as "not found or corrupted". Each batch is checked for the format instead (below), and a damaged one is
named.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ganlab.data.base import GANData
from ganlab.data.images import _to_model_range
from ganlab.data.root import describe, env_root, resolve_root

log = logging.getLogger("ganlab")

FOLDER = "cifar-10-batches-py"
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_FILES = ["test_batch"]
DEFAULT_HOME = "~/.cache/ganlab"  # where dataset.download=true puts the files when neither root is set


def _candidates(base: Path) -> list[Path]:
    """``base`` itself and torchvision's ``<base>/cifar-10-batches-py``."""
    return [base / FOLDER, base]


def _missing(folder: Path) -> list[str]:
    return [n for n in TRAIN_FILES + TEST_FILES if not (folder / n).is_file()]


def find_cifar10(root: str | None = None) -> Path:
    """The folder holding the six CIFAR-10 python batches.

    An explicit ``root`` (relative: to the launch folder, :func:`ganlab.data.root.resolve_root`) is the only place
    searched: ``<root>/cifar-10-batches-py`` (torchvision's layout), then ``<root>`` itself. Without one,
    ``$GANLAB_DATA`` and ``~/.cache/ganlab`` are searched in that order, each in the same two ways.

    Raises:
        FileNotFoundError: an explicit root lacks the files (naming the resolved folder and the files missing),
            or no default place holds them (naming every folder searched); both say how to get the files.
    """
    names = ", ".join(TRAIN_FILES + TEST_FILES)
    if root is not None and str(root) != "":
        resolved = resolve_root(root)
        assert resolved is not None
        for d in _candidates(resolved):
            if not _missing(d):
                return d
        nearest = min(_candidates(resolved), key=lambda d: len(_missing(d)))
        raise FileNotFoundError(
            f"{describe(root, resolved)} does not hold CIFAR-10's python batches: {', '.join(_missing(nearest))} "
            f"not found in {nearest}. Extract cifar-10-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) "
            f"into {resolved} (it makes {FOLDER}/ there), set dataset.root=null to search $GANLAB_DATA and "
            f"{DEFAULT_HOME}, or add dataset.download=true to fetch it into it through torchvision.")
    bases = [b for b in (env_root(), Path(DEFAULT_HOME).expanduser()) if b is not None]
    searched = [d for b in bases for d in _candidates(b)]
    for d in searched:
        if not _missing(d):
            return d
    raise FileNotFoundError(
        f"CIFAR-10's python batches ({names}) were not found in: {', '.join(str(d) for d in searched)}. Extract "
        "cifar-10-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) into one of them, point dataset.root "
        "or $GANLAB_DATA at the folder holding cifar-10-batches-py, or set dataset.download=true to fetch it "
        "through torchvision.")


def read_batch(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """One pickled CIFAR-10 batch: a dict whose ``data`` is an (N, 3072) uint8 array (per image 1024 red, then
    1024 green, then 1024 blue values, rows top to bottom) and whose ``labels`` are N classes in 0-9
    (https://www.cs.toronto.edu/~kriz/cifar.html, "Dataset layout"). Like torchvision, this unpickles the file:
    read only copies you trust.

    Returns:
        (images (N, 3, 32, 32) uint8, labels (N,) int64).

    Raises:
        ValueError: naming the file, when it cannot be unpickled (truncated, not a pickle) or does not hold
            that layout.
    """
    try:
        with open(path, "rb") as f:
            entry: Any = pickle.load(f, encoding="latin1")
    except Exception as err:  # unpickling damaged bytes raises many kinds of error (EOFError, UnpicklingError...)
        raise ValueError(f"{path} is damaged ({type(err).__name__}: {err}; a truncated download or copy?): replace "
                         "it with an intact copy (extract cifar-10-python.tar.gz again)") from err
    data = entry.get("data") if isinstance(entry, dict) else None
    labels = entry.get("labels") if isinstance(entry, dict) else None
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072
            and labels is not None and len(labels) == data.shape[0]):
        raise ValueError(f"{path} is not a CIFAR-10 python batch (expected a dict with 'data', an (N, 3072) uint8 "
                         "array, and N 'labels'): replace it with an intact copy (extract cifar-10-python.tar.gz "
                         "again)")
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    if len(y) and not bool(((y >= 0) & (y <= 9)).all()):
        raise ValueError(f"{path} holds labels outside 0-9; it is not a CIFAR-10 batch")
    return torch.from_numpy(data.copy()).view(-1, 3, 32, 32), y


def _read_split(folder: Path, names: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    parts = [read_batch(folder / n) for n in names]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def cifar10(root: str | None = None, image_size: int = 32, download: bool = False, name: str = "cifar10") -> GANData:
    """CIFAR-10: 50,000 training and 10,000 test 32x32 colour images, 10 classes.

    Returns (N, 3, image_size, image_size) images in [-1, 1] with class labels; the test batch is the hold-out.
    Where the files are searched: :func:`find_cifar10` (only in ``root`` when it is given). ``download=True``
    fetches them via torchvision (which checks the archive's MD5) into ``root`` (default ``$GANLAB_DATA``, else
    ``~/.cache/ganlab``) when none are found. The six files read are logged and kept in ``info["files"]``.

    Raises:
        FileNotFoundError: no files found and ``download`` is false.
        ValueError: a batch is damaged or not in CIFAR-10's layout (:func:`read_batch`), naming it.
    """
    try:
        folder = find_cifar10(root)
    except FileNotFoundError:
        if not download:
            raise
        import torchvision

        target = resolve_root(root) or env_root() or Path(DEFAULT_HOME).expanduser()
        torchvision.datasets.CIFAR10(str(target), train=True, download=True)
        folder = find_cifar10(str(target))
    (x, y), (hx, hy) = _read_split(folder, TRAIN_FILES), _read_split(folder, TEST_FILES)
    files = [str(folder / n) for n in TRAIN_FILES + TEST_FILES]
    log.info("%s: read %s", name, ", ".join(files))
    return GANData(name=name, x=_to_model_range(x, image_size, 255.0), labels=y, num_modes=10,
                   holdout=_to_model_range(hx, image_size, 255.0), holdout_labels=hy,
                   info={"source": str(folder), "files": files, "image_size": image_size})
