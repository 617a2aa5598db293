"""Atomic file writes: a crash or interrupt leaves either the old file or the new one, never a partial file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import torch


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success fsync it and rename it over ``path``.

    A crash or interrupt at any moment leaves either the old file or the new one, never a partial file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` through :func:`atomic_open`."""
    with atomic_open(path, "wb") as f:
        torch.save(obj, f)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text through :func:`atomic_open`."""
    with atomic_open(path, "w") as f:
        f.write(text)
