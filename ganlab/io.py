"""Atomic file writes: a crash or interrupt leaves either the old file or the new one, never a partial file."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success fsync it and rename it over ``path``.

    A crash or interrupt at any moment leaves either the old file or the new one, never a partial file. An
    interrupt removes the temporary file; a killed process (SIGKILL, a cluster's time limit) cannot, and leaves
    a hidden ``.<name>.<random>.tmp``: :func:`remove_stale_temp_files` clears those.
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
    # torch loads here, on the first tensor file written, not on import: the run layout and the study's schema,
    # which import this module, are read by commands that never load torch (ganlab-study check)
    import torch

    with atomic_open(path, "wb") as f:
        torch.save(obj, f)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text through :func:`atomic_open`."""
    with atomic_open(path, "w") as f:
        f.write(text)


def remove_stale_temp_files(folder: str | Path, min_age_s: float = 0.0) -> list[Path]:
    """Delete the temporary files ``.<name>.<random>.tmp`` that :func:`atomic_open` leaves in ``folder`` when
    its process is killed mid-write (only those: other files, and sub-folders, are never touched).

    Args:
        folder: where to look (nothing happens when it does not exist).
        min_age_s: only files not modified for at least this many seconds (>= 0). A live writer updates its
            file's modification time as it writes, so a positive age spares a write in progress in a folder
            another process may still be writing to.

    Returns:
        The files deleted, sorted by name.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    now, removed = time.time(), []
    for p in sorted(folder.glob(".*.tmp")):
        try:
            if p.is_file() and now - p.stat().st_mtime >= min_age_s:
                p.unlink()
                removed.append(p)
        except FileNotFoundError:  # its writer finished (renamed it) or another cleaner got there first
            continue
    return removed
