"""The controlled generator-rollback study (issue 12, part 6): find a late-collapse setting, then test rollback.

Two steps, both resumable (finished runs are skipped) and run in parallel with joblib, one thread per job:

``search``: plain GANs in candidate settings (``CANDIDATES``), looking for one that first covers most modes and
then collapses late (the practitioner's pattern). Every evaluation goes to ``<out>/search_curve.csv``; a
candidate shows the pattern when its coverage reaches >= 75 % of the data's and later falls to <= 50 % of its
best::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/rollback_study.py search --jobs 1 --out docs/results/rollback_study

``study``: the 2 x 2 design (periodic rollback off/on x D lr 2e-4 / 1e-4) plus triggered rollback plus
minibatch discrimination alone, on ``experiment=rollback_study``, ``--seeds`` seeds each. Every evaluation goes to
``<out>/study_curve.csv``, the plot of coverage against step to ``<out>/coverage.png`` and the table (final
coverage, mean with a 95 % t-interval over seeds) to ``<out>/study.md``::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/rollback_study.py study --seeds 5 --jobs 2 \\
        --out docs/results/rollback_study
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

from joblib import Parallel, delayed

#: Scores written to the CSVs at every evaluation.
KEYS = ("modes_covered", "hq_fraction", "clusters_covered", "high_similarity_fraction", "reverse_kl")
#: Cheap scoring: the mixture, cluster and similarity scores only.
CHEAP = ["~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]
LR = "optim.generator.lr={g} optim.discriminator.lr={d}"

#: Plain-GAN settings searched for a late collapse (G and D lr 2e-4, the report's).
CANDIDATES = {
    "pacring_lr2e-4": f"experiment=pacgan_ring {LR.format(g=2e-4, d=2e-4)}",
    "pacgrid_lr2e-4": f"experiment=pacgan_grid {LR.format(g=2e-4, d=2e-4)}",
    "pacring_lr2e-4_b0.5": (f"experiment=pacgan_ring {LR.format(g=2e-4, d=2e-4)} "
                            "optim.generator.betas=[0.5,0.999] optim.discriminator.betas=[0.5,0.999]"),
    "mlpbn_ring8_lr2e-4": f"dataset=ring8 model=mlp model.generator.batch_norm=true {LR.format(g=2e-4, d=2e-4)}",
    "pacpair_ring8_lr2e-4": f"dataset=ring8 model=pacgan_mlp {LR.format(g=2e-4, d=2e-4)}",
    "pacpair_grid25_lr2e-4": f"dataset=grid25 model=pacgan_mlp {LR.format(g=2e-4, d=2e-4)}",
}


def train(folder: Path, overrides: list[str]) -> None:
    """One ``ganlab.train`` run into ``folder``; skipped when its ``metrics.json`` exists."""
    if (folder / "metrics.json").is_file():
        return
    cmd = [sys.executable, "-m", "ganlab.train", *overrides, "logger=none", "trainer.progress=false",
           "trainer.projector=false", "threads=1", *CHEAP, f"hydra.run.dir={folder}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wall_s.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    (folder / "command.txt").write_text(" ".join(cmd) + "\n")
    if proc.returncode != 0:
        (folder / "stderr.txt").write_text(proc.stderr)


def curve(folder: Path, **labels: object) -> list[dict[str, object]]:
    """Every evaluation of one run (``metrics.jsonl``) as rows: labels, step, KEYS and their data baselines."""
    jsonl = folder / "metrics.jsonl"
    rows = []
    for line in jsonl.read_text().splitlines() if jsonl.is_file() else []:
        rec = json.loads(line)
        scores = rec.get("scores", {})
        if not scores:
            continue
        rows.append({**labels, "step": rec["step"], **{k: scores.get(k) for k in KEYS},
                     **{f"data/{k}": scores.get(f"data/{k}") for k in ("modes_covered", "clusters_covered")}})
    return rows


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    if rows:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def search(args: argparse.Namespace) -> None:
    jobs = [(name, seed) for seed in range(args.seeds) for name in CANDIDATES]
    common = [f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
              f"trainer.ckpt_every={args.steps}"]
    Parallel(n_jobs=args.jobs)(
        delayed(train)(args.out / "search" / f"{n}_s{s}", [*CANDIDATES[n].split(), *common, f"seed={s}"])
        for n, s in jobs)
    rows = [r for n, s in jobs for r in curve(args.out / "search" / f"{n}_s{s}", candidate=n, seed=s)]
    write_csv(args.out / "search_curve.csv", rows)
    for n, s in jobs:
        cov = [r["modes_covered"] for r in rows if r["candidate"] == n and r["seed"] == s]
        print(f"{n:24s} s{s}: " + " ".join(f"{c:g}" for c in cov if c is not None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["search", "study"])
    ap.add_argument("--steps", type=int, default=12000)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/results/rollback_study"))
    args = ap.parse_args()
    {"search": search}[args.what](args)


if __name__ == "__main__":
    main()
