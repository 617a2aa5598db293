"""Generated blocks: a committed file embedded in markdown between marker lines, kept equal to the file.

In ``README.md`` and ``docs/**/*.md`` the lines between ``<!-- generated:PATH -->`` and ``<!-- /generated:PATH -->``
(``PATH`` relative to the repository root) must be exactly the text of ``PATH``. :func:`find_blocks` lists the
blocks, :func:`stale_blocks` those that differ (a default test fails on any), :func:`update_blocks` rewrites them.
:func:`update_doc` rewrites those of one page anywhere (a study's results page, ``ganlab-study report``).

    python -m ganlab.study.blocks            # refresh every block from its file
    python -m ganlab.study.blocks --check    # list stale blocks, exit 1 if any
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

from ganlab.io import atomic_write_text

OPEN = re.compile(r"^<!-- generated:(?P<path>\S+) -->\n", re.M)


@dataclasses.dataclass(frozen=True)
class Block:
    """One generated block: the markdown file holding it, the embedded file's path (relative to the root), and the
    text between the marker lines as it stands."""

    doc: Path
    path: str
    text: str


def markdown_files(root: Path) -> list[Path]:
    """``README.md`` and every ``docs/**/*.md`` under ``root``."""
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.is_file()]


def _spans(text: str, doc: Path) -> list[tuple[str, int, int]]:
    """(path, start, end) of each block's inner text in ``text``.

    Raises:
        ValueError: an opening marker without its closing marker after it.
    """
    out = []
    for m in OPEN.finditer(text):
        close = f"<!-- /generated:{m['path']} -->"
        end = text.find("\n" + close, m.end() - 1)
        if end < 0:
            raise ValueError(f"{doc}: <!-- generated:{m['path']} --> has no closing line {close}")
        out.append((m["path"], m.end(), end + 1))
    return out


def find_blocks(root: Path) -> list[Block]:
    """Every generated block under ``root`` (see :func:`markdown_files`)."""
    blocks = []
    for doc in markdown_files(root):
        text = doc.read_text()
        blocks += [Block(doc, path, text[a:b]) for path, a, b in _spans(text, doc)]
    return blocks


def stale_blocks(root: Path) -> list[str]:
    """One line per block whose text differs from its file (or whose file is missing)."""
    out = []
    for b in find_blocks(root):
        source = root / b.path
        if not source.is_file():
            out.append(f"{b.doc}: generated block of {b.path}, which does not exist")
        elif source.read_text() != b.text:
            out.append(f"{b.doc}: generated block of {b.path} differs from the file")
    return out


def update_blocks(root: Path) -> list[Path]:
    """Rewrite every block under ``root`` whose file exists to that file's text (atomically, per document).

    Returns:
        The documents changed.
    """
    return [doc for doc in markdown_files(root) if update_doc(doc, root)]


def update_doc(doc: Path, root: Path) -> bool:
    """Rewrite every block of the one markdown file ``doc`` (anywhere: a study's results page outside the docs)
    whose file exists to that file's text, ``PATH`` read relative to ``root`` (an absolute one as it is); returns
    whether ``doc`` changed."""
    text = doc.read_text()
    new, last = [], 0
    for path, a, b in _spans(text, doc):
        source = root / path
        new += [text[last:a], source.read_text() if source.is_file() else text[a:b]]
        last = b
    new.append(text[last:])
    if "".join(new) == text:
        return False
    atomic_write_text(doc, "".join(new))
    return True


def main(argv: list[str] | None = None) -> int:
    """Refresh the generated blocks of the repository in the current folder (``--check``: only list the stale
    ones; exit status 1 when there are any)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="list stale blocks and exit 1 if any; change nothing")
    ap.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: here)")
    args = ap.parse_args(argv)
    if args.check:
        stale = stale_blocks(args.root)
        print("\n".join(stale) or "every generated block equals its file")
        return 1 if stale else 0
    for doc in update_blocks(args.root):
        print(f"updated {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
