"""The labelled collapse corpus as three CSVs: ``runs.csv`` (one row per run: its settings, label, drop step, CPU
seconds, overrides), ``evals.csv`` (one row per run and evaluation: the independent label statistics
``label_<name>``, the run's own scores with their ``data/`` baselines and its ``health/<key>`` values) and
``signals.csv`` (one row per run and monitored step: ``collapse_risk`` and each risk signal as logged).

:func:`read_corpus` reads them for the detection table (:mod:`ganlab.study.detection`);
:func:`write_corpus` writes them atomically (the collapse corpus study's ``collect``).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ganlab.io import atomic_write_text

#: The three files of a corpus folder, in this order.
FILES = ("runs", "evals", "signals")

Row = dict[str, Any]


def _number(value: str) -> Any:
    """A CSV cell as a float ('' and 'nan' -> NaN); text that is no number stays text."""
    try:
        return float(value) if value != "" else math.nan
    except ValueError:
        return value


def read_rows(path: Path) -> list[Row]:
    """The rows of one corpus CSV, every cell that parses as a number a float (empty cells NaN)."""
    with open(path, newline="") as f:
        return [{k: _number(v) for k, v in r.items()} for r in csv.DictReader(f)]


@dataclasses.dataclass
class Corpus:
    """A corpus read into memory.

    Attributes:
        runs: ``runs.csv``'s rows, file order; ``drop_step`` an int or None, ``collapsed`` 0.0 or 1.0.
        evals: run name -> its ``evals.csv`` rows, step order as in the file.
        signals: run name -> its ``signals.csv`` rows, as in the file.
        signal_rows: every ``signals.csv`` row in file order (the risk fit's row order).
    """

    runs: list[Row]
    evals: dict[str, list[Row]]
    signals: dict[str, list[Row]]
    signal_rows: list[Row]

    def by_name(self) -> dict[str, Row]:
        """run name -> its ``runs.csv`` row."""
        return {r["name"]: r for r in self.runs}


def read_corpus(folder: Path) -> Corpus:
    """``runs.csv``, ``evals.csv`` and ``signals.csv`` of ``folder``.

    Raises:
        FileNotFoundError: a file is missing (the message names it and how to make it).
    """
    for name in FILES:
        if not (Path(folder) / f"{name}.csv").is_file():
            raise FileNotFoundError(f"{folder}/{name}.csv is missing: run the collapse corpus study "
                                    "(ganlab-study collapse_corpus) or restore the committed file")
    runs = read_rows(Path(folder) / "runs.csv")
    for r in runs:
        r["drop_step"] = None if isinstance(r["drop_step"], float) and math.isnan(r["drop_step"]) \
            else int(r["drop_step"])
    evals: dict[str, list[Row]] = defaultdict(list)
    for e in read_rows(Path(folder) / "evals.csv"):
        evals[e["run"]].append(e)
    rows = read_rows(Path(folder) / "signals.csv")
    signals: dict[str, list[Row]] = defaultdict(list)
    for s in rows:
        signals[s["run"]].append(s)
    return Corpus(runs, dict(evals), dict(signals), rows)


def to_csv(rows: Iterable[Row]) -> str:
    """``rows`` as CSV text; the header is every key in first-seen order, missing cells empty."""
    rows = list(rows)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_corpus(folder: Path, runs: list[dict[str, list[Row]]]) -> list[Path]:
    """Write ``runs.csv``, ``evals.csv`` and ``signals.csv`` of ``folder`` atomically (each file the old one or
    the new one, never half of one), runs in the given order.

    Args:
        runs: one ``{"summary": [row], "evals": rows, "signals": rows}`` per run.

    Returns:
        The three paths.
    """
    out = []
    for name, rows in (("runs", [r for p in runs for r in p["summary"]]),
                       ("evals", [r for p in runs for r in p["evals"]]),
                       ("signals", [r for p in runs for r in p["signals"]])):
        path = Path(folder) / f"{name}.csv"
        atomic_write_text(path, to_csv(rows))
        out.append(path)
    return out


def read_raw(folder: Path) -> dict[str, dict[str, list[Row]]]:
    """The runs of a committed corpus as text cells: run name -> ``{"summary": [row], "evals": rows, "signals":
    rows}`` ({} when ``folder`` has no ``runs.csv``), so that new runs merge in without touching the old rows."""
    if not (Path(folder) / "runs.csv").is_file():
        return {}
    out: dict[str, dict[str, list[Row]]] = {}
    with open(Path(folder) / "runs.csv", newline="") as f:
        for row in csv.DictReader(f):
            out[row["name"]] = {"summary": [row], "evals": [], "signals": []}
    for name in ("evals", "signals"):
        with open(Path(folder) / f"{name}.csv", newline="") as f:
            for row in csv.DictReader(f):
                out[row["run"]][name].append(row)
    return out
