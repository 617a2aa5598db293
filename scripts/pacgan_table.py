"""Reproduce PacGAN's Table 1 (Lin et al. 2018): GAN and PacGAN2-4 on the 2-D ring and grid, several trials.

Each run is ``ganlab-train experiment=pacgan_<ring|grid> [strategy=[pacgan] strategy.pacgan.m=M] seed=S``,
trained in chunks of ``--chunk`` steps with ``trainer.resume`` (an interrupted table loses at most one chunk;
finished chunks are skipped), jobs in parallel with joblib, one thread each. Every evaluation of every run goes
to ``<out>/curve.csv``; the last evaluation of each run to ``<out>/trials.csv``; the table (mean +- standard error
over trials, as the paper reports, beside the paper's rows) to ``<out>/table.md``. Example::

    OMP_NUM_THREADS=1 nice -n 10 python scripts/pacgan_table.py --steps 50000 --trials 5 --jobs 2 \\
        --out docs/results/pacgan_table

``--merge A/curve.csv B/curve.csv`` adds the evaluations of tables made earlier (in other folders, or before
their run folders were removed) to what ``<out>/runs`` holds; ``--jobs 0`` trains nothing and only collects.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from joblib import Parallel, delayed

ROWS = {"GAN": [], **{f"PacGAN{m}": ["strategy=[pacgan]", f"strategy.pacgan.m={m}"] for m in (2, 3, 4)}}
#: PacGAN Table 1, copied from the paper (mean +- standard error over 10 trials, 400,000 G steps):
#: (modes, HQ %, reverse KL) per data set and row.
PAPER = {"ring": {"GAN": ((6.3, 0.5), (98.2, 0.2), (0.45, 0.09)),
                  "PacGAN2": ((7.9, 0.1), (95.6, 2.0), (0.07, 0.03)),
                  "PacGAN3": ((7.8, 0.1), (97.7, 0.3), (0.10, 0.02)),
                  "PacGAN4": ((7.8, 0.1), (95.9, 1.4), (0.07, 0.02))},
         "grid": {"GAN": ((17.3, 0.8), (94.8, 0.7), (0.70, 0.07)),
                  "PacGAN2": ((23.8, 0.7), (91.3, 0.8), (0.13, 0.04)),
                  "PacGAN3": ((24.6, 0.4), (94.2, 0.4), (0.06, 0.02)),
                  "PacGAN4": ((24.8, 0.2), (93.6, 0.6), (0.04, 0.01))}}
KEYS = ("modes_covered", "hq_fraction", "reverse_kl_hq", "reverse_kl")


def run_one(out: Path, dataset: str, row: str, seed: int, steps: int, chunk: int, eval_every: int) -> str:
    """Train one run up to ``steps`` in chunks; returns its folder name. Finished chunks are skipped."""
    name = f"{dataset}_{row}_s{seed}"
    previous = None
    for upto in range(chunk, steps + chunk, chunk):
        upto = min(upto, steps)
        folder = out / "runs" / name / f"upto_{upto:07d}"
        done = folder / "metrics.json"
        if done.is_file() and json.loads(done.read_text())["step"] == upto:
            previous = folder
            continue
        cmd = [sys.executable, "-m", "ganlab.cli.train", f"experiment=pacgan_{dataset}", *ROWS[row], f"seed={seed}",
               f"trainer.steps={upto}", f"trainer.eval_every={eval_every}", f"trainer.ckpt_every={chunk}",
               "logger=none", "trainer.progress=false", "trainer.projector=false", "threads=1",
               f"hydra.run.dir={folder}"]
        if previous is not None:
            cmd.append(f"trainer.resume={previous}")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        (folder / "wall_s.txt").parent.mkdir(parents=True, exist_ok=True)
        (folder / "wall_s.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
        if proc.returncode != 0:
            raise RuntimeError(f"{name} up to {upto} failed:\n{proc.stderr[-2000:]}")
        previous = folder
    return name


def collect(out: Path) -> list[dict[str, object]]:
    """Every evaluation of every run: dataset, row, seed, step, the scores of KEYS, wall seconds so far."""
    records = []
    for run in sorted((out / "runs").glob("*_s*")):
        dataset, row, seed = run.name.split("_")
        wall = 0.0
        for folder in sorted(run.glob("upto_*")):
            wall += float((folder / "wall_s.txt").read_text()) if (folder / "wall_s.txt").is_file() else math.nan
            jsonl = folder / "metrics.jsonl"
            for line in jsonl.read_text().splitlines() if jsonl.is_file() else []:
                rec = json.loads(line)
                records.append({"dataset": dataset, "row": row, "seed": int(seed[1:]), "step": rec["step"],
                                **{k: rec["scores"].get(k) for k in KEYS}, "wall_s": round(wall, 1)})
    return records


def merged(records: list[dict[str, object]], csv_files: list[Path]) -> list[dict[str, object]]:
    """``records`` plus the rows of ``csv_files`` (earlier ``curve.csv``); one row per (dataset, row, seed, step),
    ``records`` first, sorted."""
    out = {(r["dataset"], r["row"], int(r["seed"]), int(r["step"])): r for r in records}
    for path in csv_files:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rec = {k: (v if k in ("dataset", "row") else float(v) if v not in ("", "None") else None)
                       for k, v in r.items()}
                rec["seed"], rec["step"] = int(r["seed"]), int(r["step"])
                out.setdefault((rec["dataset"], rec["row"], rec["seed"], rec["step"]), rec)
    return [out[k] for k in sorted(out, key=lambda k: (k[0], list(ROWS).index(k[1]), k[2], k[3]))]


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


def table(finals: list[dict[str, object]], steps: int) -> str:
    """Markdown: ganlab's rows (mean +- standard error over trials) beside the paper's (copied)."""
    lines = ["| data | row | source | trials | steps | modes | HQ % | reverse KL (HQ) | reverse KL (all) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for dataset in ("ring", "grid"):
        for row in ROWS:
            mine = [r for r in finals if r["dataset"] == dataset and r["row"] == row]
            if mine:
                col = {k: [float(r[k]) for r in mine] for k in KEYS}  # type: ignore[arg-type]
                hq = [100 * v for v in col["hq_fraction"]]
                lines.append(f"| {dataset} | {row} | ganlab | {len(mine)} | {steps:,} "
                             f"| {mean_se(col['modes_covered'])} | {mean_se(hq)} "
                             f"| {mean_se(col['reverse_kl_hq'])} | {mean_se(col['reverse_kl'])} |")
            (m, ms), (h, hs), (k, ks) = PAPER[dataset][row]
            lines.append(f"| {dataset} | {row} | paper (copied) | 10 | 400,000 "
                         f"| {m} ± {ms} | {h} ± {hs} | {k} ± {ks} | - |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50000)
    ap.add_argument("--chunk", type=int, default=10000)
    ap.add_argument("--eval-every", type=int, default=5000)
    ap.add_argument("--trials", type=int, default=5, help="trials run: seeds --first-trial, ..., --trials - 1")
    ap.add_argument("--first-trial", type=int, default=0,
                    help="seed of the first trial (to add trials: --first-trial 3 --trials 5 runs seeds 3, 4)")
    ap.add_argument("--datasets", nargs="+", default=["ring", "grid"], choices=["ring", "grid"])
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/results/pacgan_table"))
    ap.add_argument("--merge", type=Path, nargs="*", default=[], help="curve.csv files of earlier tables to add")
    args = ap.parse_args()
    if args.jobs > 0 and not 0 <= args.first_trial < args.trials:
        ap.error(f"--first-trial {args.first_trial} --trials {args.trials} runs no trial: trials are the seeds "
                 f"--first-trial, ..., --trials - 1 (e.g. --first-trial 3 --trials 5 runs seeds 3 and 4)")
    jobs = [(d, r, s) for s in range(args.first_trial, args.trials) for d in args.datasets for r in args.rows]
    if args.jobs > 0:
        Parallel(n_jobs=args.jobs)(delayed(run_one)(args.out, d, r, s, args.steps, args.chunk, args.eval_every)
                                   for d, r, s in jobs)
    records = merged(collect(args.out) if (args.out / "runs").is_dir() else [], args.merge)
    write_tables(args.out, records, args.steps, table)


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


if __name__ == "__main__":
    main()
