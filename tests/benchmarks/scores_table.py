"""The score-speed table of docs/performance.md, generated from ``bench_scores.py``'s JSON.

Usage::

    python tests/benchmarks/scores_table.py [--results docs/results/bench/scores.json]
        [--before docs/results/bench/scores_before.json] [--out docs/results/bench/scores.md]

One row per cell of the benchmark: times (best of the run's repeats), the ratio ganlab / reference (< 1: ganlab
faster) with each side's spread, whether the two agreed, and, where ``--before`` gives an earlier run of the same
cell, that run's ratio. The file is embedded in docs/performance.md between generated-block markers; rerun this
script after a new benchmark run instead of editing either by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _ms(seconds: float) -> str:
    ms = 1e3 * seconds
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def _earlier_runs(env: dict[str, Any]) -> list[str]:
    """One sentence on the earlier runs whose cells the file still holds (``bench_scores.py --append``), if any."""
    runs = env.get("earlier_runs", [])
    if not runs:
        return []
    def load(r: dict[str, Any]) -> str:
        after = r.get("load_average_after")
        return f"load average {r['load_average_before'][0]:.1f}" + (f" to {after[0]:.1f}" if after else "")

    parts = [f"{r.get('started', '?')} ({load(r)})" for r in sorted(runs, key=lambda r: r.get("started", ""))]
    return ["", "The file gathers several runs of the same script (`--append`), each adding or replacing some cells; "
                "the earlier ones, oldest first: " + "; ".join(parts) + ". The header above is the last run's."]


def render(after: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """Markdown for one benchmark run (``after``), with ``before``'s ratios beside it where it has the cell."""
    env = after["env"]
    old = {(c["score"], c["size"]): c["ratio"] for c in (before or {}).get("cells", [])}
    lines = [
        f"Measured {env.get('started', '?')}: {env.get('device', 'cpu')}, {env.get('threads', '?')} thread(s), "
        f"{env.get('dtype', 'float32')}, best of {env.get('repeats', '?')} calls per side after one untimed call, "
        f"timed by {env.get('clock', 'wall time')}; torch {env.get('torch', '?')}, scikit-learn "
        f"{env.get('sklearn', '?')}, NumPy {env.get('numpy', '?')}; load average "
        f"{env['load_average_before'][0]:.1f} before"
        + (f" and {env['load_average_after'][0]:.1f} after" if env.get("load_average_after") else "")
        + f" the run on {env.get('cpu_count', '?')} CPUs.",
        *_earlier_runs(env),
        "",
        "| score | size | ganlab ms | reference ms | ganlab / reference | spread ganlab / ref | agrees |"
        + (" ratio before |" if before else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if before else ""),
    ]
    for c in after["cells"]:
        ratio = f"**{c['ratio']:.2f}**" if c["ratio"] > 1 else f"{c['ratio']:.2f}"
        row = (f"| {c['score']} | {c['size']} | {_ms(c['ganlab_s'])} | {_ms(c['reference_s'])} | {ratio} | "
               f"{100 * c['ganlab_spread']:.0f} % / {100 * c['reference_spread']:.0f} % | "
               f"{'yes' if c['agrees'] else 'NO: ' + c['agreement']} |")
        if before:
            prev = old.get((c["score"], c["size"]))
            row += f" {prev:.2f} |" if prev is not None else " n/a |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=REPO / "docs/results/bench/scores.json")
    p.add_argument("--before", type=Path, default=None, help="an earlier run whose ratios are shown beside")
    p.add_argument("--out", type=Path, default=REPO / "docs/results/bench/scores.md")
    args = p.parse_args(argv)
    for path in (args.results, args.before):
        if path is not None and not path.is_file():
            print(f"no benchmark results at {path}: run tests/benchmarks/bench_scores.py --out {path} first",
                  file=sys.stderr)
            return 2
    after = json.loads(args.results.read_text())
    before = json.loads(args.before.read_text()) if args.before else None
    tmp = args.out.with_suffix(".md.tmp")
    tmp.write_text(render(after, before))
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
