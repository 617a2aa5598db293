"""Helpers of the result scripts that are not yet studies (``conditional_table.py``, ``rollback_study.py``'s
search): CSV writing and the mean +- standard error cell. PacGAN's Table 1 itself is the study
``conf/study/pacgan_table.yaml`` (``ganlab-study pacgan_table``, ``ganlab-study report pacgan_table``)."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from pathlib import Path


def write_csv(path: Path, records: list[dict[str, object]]) -> None:
    if records:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)


def mean_se(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3g} (1 trial)"
    return f"{statistics.mean(values):.3g} ± {statistics.stdev(values) / math.sqrt(len(values)):.2g}"


def write_tables(out: Path, records: list[dict[str, object]], steps: int,
                 table_of: Callable[[list[dict[str, object]], int], str]) -> None:
    """``out/curve.csv`` (every evaluation), ``out/trials.csv`` (the evaluations at ``steps``) and
    ``out/table.md`` (``table_of(those, steps)``, also printed); ``out`` is made if missing."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "curve.csv", records)
    finals = [r for r in records if r["step"] == steps]
    write_csv(out / "trials.csv", finals)
    text = table_of(finals, steps)
    (out / "table.md").write_text(text + "\n")
    print(text)
