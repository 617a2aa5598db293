"""Time from typing a bad ``ganlab-train`` command to its one-line answer, whole commands in subprocesses.

Compared, interleaved (A, B, A, B, ...), medians reported:

* ``ganlab-train lr=1e-3``: a top-level key that is no setting, answered from ``conf/``'s YAML before torch is
  imported (:func:`ganlab.config.keys.check_top_level`);
* ``ganlab-train trainer.stpes=1``: a key inside a typed group, answered after composition against the schemas,
  which needs torch (the baseline: what every config error cost before the YAML check).

    python tests/benchmarks/bench_config_errors.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"top-level typo (lr=1e-3)": ["lr=1e-3"], "typed-group typo (trainer.stpes=1)": ["trainer.stpes=1"]}


def answer_time(args: list[str]) -> float:
    """Seconds from start to exit of ``python -m ganlab.cli.train <args>``, which must refuse them (exit 1)."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ganlab.cli.train", *args], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 1 or not done.stderr.startswith("ganlab-train: "):
        raise SystemExit(f"{args} was not refused with one line: {done.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    load = os.getloadavg()[0]
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            times[name].append(answer_time(command))
    base = statistics.median(times["typed-group typo (trainer.stpes=1)"])
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}, {args.repeats} repeats\n")
    print("| command | median s | runs s | vs the typed-group typo |\n|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} | "
              f"{statistics.median(values) / base:.2f}x |")


if __name__ == "__main__":
    main()
