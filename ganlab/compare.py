"""``ganlab-compare <sweep dir>``: a table of final scores per configuration, mean ± std over seeds.

Every ``metrics.json`` below the folder is one job; jobs that differ only in ``seed`` form one row
(grouped by data set and strategies). Jobs without ``metrics.json`` are listed as failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def collect_runs(root: str | Path) -> tuple[list[dict[str, Any]], list[Path]]:
    """All finished jobs (their ``metrics.json`` plus ``run_dir``) under ``root``, and unfinished job folders.

    A job folder is one holding ``.hydra/`` or ``checkpoints/``; it failed when it has no ``metrics.json``.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; give a sweep or runs directory")
    runs = [{**json.loads(p.read_text()), "run_dir": str(p.parent)} for p in sorted(root.rglob("metrics.json"))
            if p.parent.parent.name != "eval"]  # ganlab-eval's re-scores live in <run>/eval/<ckpt>/
    done = {r["run_dir"] for r in runs}
    jobs = {p.parent for marker in (".hydra", "checkpoints") for p in root.rglob(marker) if p.is_dir()}
    return runs, sorted(j for j in jobs if str(j) not in done)


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """Row label (``dataset [strategies]``) -> score -> (mean, std over seeds, number of seeds)."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        label = f"{r.get('dataset', '?')} [{','.join(r.get('strategies', [])) or 'plain'}]"
        for k, v in r.get("scores", {}).items():
            groups[label][k].append(float(v))
    return {label: {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
                    for k, v in scores.items()} for label, scores in groups.items()}


def markdown_table(summary: dict[str, dict[str, tuple[float, float, int]]], keys: list[str] | None = None) -> str:
    """A markdown table of ``mean ± std`` per row and score (model scores only, not the ``data/`` baseline)."""
    keys = keys or sorted({k for s in summary.values() for k in s if not k.startswith("data/")})
    lines = ["| run | seeds | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for label, scores in sorted(summary.items()):
        n = max((v[2] for v in scores.values()), default=0)
        cells = [f"{scores[k][0]:.3g} ± {scores[k][1]:.2g}" if k in scores else "" for k in keys]
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-compare``."""
    parser = argparse.ArgumentParser(prog="ganlab-compare", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", help="a sweep directory (runs/multirun/...) or any folder of runs")
    args = parser.parse_args(argv)
    try:
        runs, failed = collect_runs(args.sweep_dir)
    except FileNotFoundError as err:
        print(f"ganlab-compare: {err}", file=sys.stderr)
        return 2
    print(markdown_table(summarise(runs)))
    for job in failed:
        print(f"failed or unfinished: {job} (log: {job / 'train.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
