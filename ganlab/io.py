"""Run records on disk: atomic file writes (a crash or interrupt leaves either the old file or the new one, never a
partial file) and the one writer and reader of every append-only JSON-lines record (``metrics.jsonl``,
``alerts.jsonl``, ``study_jobs.jsonl``, the corpus files), which survive a writer killed mid-line; and the one
writer of a Markdown table row (:func:`md_row`), which keeps a ``|`` inside a label from splitting its cell."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("ganlab")


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
    """``torch.save`` through :func:`atomic_open`; a Ctrl-C during the write raises KeyboardInterrupt (not the
    RuntimeError torch's half-closed zip writer would raise instead) and leaves no file behind."""
    # torch loads here, on the first tensor file written, not on import: the run layout and the study's schema,
    # which import this module, are read by commands that never load torch (ganlab-study check)
    import torch

    with atomic_open(path, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as err:  # torch's zip writer, cut short by Ctrl-C, hides the KeyboardInterrupt
            if isinstance(err.__context__, KeyboardInterrupt):
                raise err.__context__ from None
            raise


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


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append ``record`` to the JSON-lines file ``path`` as one line, in one ``write()`` call, flushed at once.

    A writer killed mid-line (a kill, a full disk, a lost node) leaves a torn last line without its newline: the next
    record then starts a fresh line, so the torn one stays alone on its line (where :func:`read_jsonl` skips it) and
    no complete record is glued onto it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record) + "\n").encode()
    with open(path, "a+b") as f:  # a+: every write goes to the end; reading the last byte is allowed
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)
        f.flush()


#: The files whose torn lines were reported in this process (a warning once per file).
_WARNED: set[str] = set()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of the JSON-lines file ``path`` in file order ([] when there is none). A line that is not a
    complete JSON object (a writer killed mid-line: see :func:`append_jsonl`) is skipped, with one warning per file
    and process naming the file and the lines; blank lines are skipped silently."""
    path = Path(path)
    if not path.is_file():
        return []
    out, torn = [], []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict):
            out.append(record)
        else:
            torn.append(number)
    if torn and str(path) not in _WARNED:
        _WARNED.add(str(path))
        log.warning("%s: skipped %d torn record(s) at line(s) %s (a writer stopped mid-line); the %d complete "
                    "record(s) are read", path, len(torn), ", ".join(map(str, torn[:5])), len(out))
    return out


def rewrite_jsonl(path: str | Path, records: list[dict[str, Any]]) -> None:
    """Replace the JSON-lines file ``path`` by ``records``, one line each, atomically (:func:`atomic_open`)."""
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in records))


def md_cell(value: Any) -> str:
    """``value`` as the text of one Markdown table cell: a ``|`` not already escaped becomes ``\\|`` (GitHub-
    flavoured Markdown and Python-Markdown's tables read it as a literal bar, not a cell border) and a line break
    becomes ``<br>`` (a row is one line)."""
    text = re.sub(r"(?<!\\)\|", r"\\|", str(value))
    return re.sub(r"\r\n|\r|\n", "<br>", text)


def md_row(cells: Any) -> str:
    """One Markdown table row, ``| a | b |``, from an iterable of cell values (each through :func:`md_cell`)."""
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def md_rule(columns: int) -> str:
    """The rule under a Markdown table's header row for ``columns`` columns: ``|---|---|``."""
    return "|" + "---|" * columns
