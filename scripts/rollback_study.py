"""The search for a late-collapse setting behind the controlled generator-rollback study.

Resumable (finished runs are skipped) and run in parallel with joblib, one thread per job:

``search``: plain GANs in candidate settings (``CANDIDATES``), looking for one that first covers most modes and
then collapses late (the practitioner's pattern). Every evaluation goes to ``<out>/search_curve.csv``; a
candidate shows the pattern when its coverage reaches >= 75 % of the data's and later falls to <= 50 % of its
best::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/rollback_study.py search --jobs 1 --out docs/results/rollback_study

The study itself (the 2 x 2 design of periodic rollback and D lr halving, triggered rollback, minibatch
discrimination) is ``conf/study/rollback_study.yaml``: ``ganlab-study rollback_study``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from joblib import Parallel, delayed
from pacgan_table import write_csv  # scripts/ is on sys.path when a script in it runs

#: Scores written to the CSVs at every evaluation.
KEYS = ("modes_covered", "hq_fraction", "clusters_covered", "high_similarity_fraction", "reverse_kl")
#: Cheap scoring: the mixture, cluster and similarity scores only.
CHEAP = ["~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]
LR = "optim.generator.lr={g} optim.discriminator.lr={d}"

#: The small DCGAN pair (widths 16, 16-d latent, batch 64) of the collapse corpus's digits runs.
SMALL_DCGAN = ("model.generator.width=16 model.discriminator.width=16 model.generator.z_dim=16 "
               "trainer.batch_size=64")
DIGITS = f"dataset=digits dataset.image_size=8 model=dcgan {SMALL_DCGAN}"

#: Plain-GAN settings searched for a late collapse (G and D lr 2e-4, the report's).
CANDIDATES = {
    "pacring_lr2e-4": f"experiment=pacgan_ring {LR.format(g=2e-4, d=2e-4)}",
    "pacgrid_lr2e-4": f"experiment=pacgan_grid {LR.format(g=2e-4, d=2e-4)}",
    "pacring_lr2e-4_b0.5": (f"experiment=pacgan_ring {LR.format(g=2e-4, d=2e-4)} "
                            "optim.generator.betas=[0.5,0.999] optim.discriminator.betas=[0.5,0.999]"),
    "mlpbn_ring8_lr2e-4": f"dataset=ring8 model=mlp model.generator.batch_norm=true {LR.format(g=2e-4, d=2e-4)}",
    "pacpair_ring8_lr2e-4": f"dataset=ring8 model=pacgan_mlp {LR.format(g=2e-4, d=2e-4)}",
    "pacpair_grid25_lr2e-4": f"dataset=grid25 model=pacgan_mlp {LR.format(g=2e-4, d=2e-4)}",
    "mlpbn_grid25_lr2e-4": f"dataset=grid25 model=mlp model.generator.batch_norm=true {LR.format(g=2e-4, d=2e-4)}",
    "mlpbn_ring8_lr1e-3": f"dataset=ring8 model=mlp model.generator.batch_norm=true {LR.format(g=1e-3, d=1e-3)}",
    "mlpbn_ring8_g2e-4_d1e-3": f"dataset=ring8 model=mlp model.generator.batch_norm=true {LR.format(g=2e-4, d=1e-3)}",
    "mlpbn_grid25_lr1e-3": f"dataset=grid25 model=mlp model.generator.batch_norm=true {LR.format(g=1e-3, d=1e-3)}",
    # The report's collapse came after ~50,000 steps on images: long runs of the small DCGAN on 8x8 digits
    # (1,437 training images, about 90 steps/s on one thread) and on Fashion-MNIST at 16x16.
    "dcgan_digits_lr2e-4": f"{DIGITS} {LR.format(g=2e-4, d=2e-4)}",
    "dcgan_digits_lr1e-3": f"{DIGITS} {LR.format(g=1e-3, d=1e-3)}",
    "dcgan_digits_strongD_lr2e-4": (f"{DIGITS.replace('discriminator.width=16', 'discriminator.width=64')} "
                                    f"{LR.format(g=2e-4, d=2e-4)}"),  # D 4x as wide as G
    "dcgan_fmnist16_lr2e-4": (f"dataset=fashion_mnist dataset.image_size=16 model=dcgan {SMALL_DCGAN} "
                              f"{LR.format(g=2e-4, d=2e-4)}"),
    # Not a plain GAN: the collapse corpus's grid25 PacGAN2 runs at lr 1e-2 (ganlab's MLP pair, batch 256) fell
    # from 22-25 of 25 modes to 10-15 after step 3,000 in all 4 seeds, the only late pattern seen so far.
    "pacgan2_grid25_lr1e-2": f"dataset=grid25 model=mlp trainer.batch_size=256 strategy=[pacgan] "
                             f"{LR.format(g=1e-2, d=1e-2)}",
}


def train(folder: Path, overrides: list[str], cheap: bool = True, steps: int | None = None) -> None:
    """One ``ganlab.cli.train`` run into ``folder`` (with the :data:`CHEAP` scorer set unless ``cheap`` is False);
    skipped when its ``metrics.json`` exists (with ``steps``: at that step or beyond); an interrupted run
    (checkpoints but no ``metrics.json``), or with ``steps`` a finished run that stopped short of it, is continued in
    place from its newest checkpoint (``trainer.resume``; the evaluations after it are redone)."""
    done = folder / "metrics.json"
    if done.is_file() and (steps is None or json.loads(done.read_text())["step"] >= steps):
        return
    resume = [f"trainer.resume={folder}"] if any((folder / "checkpoints").glob("*.pt")) else []
    cmd = [sys.executable, "-m", "ganlab.cli.train", *overrides, *resume, "logger=none", "trainer.progress=false",
           "trainer.projector=false", "threads=1", *(CHEAP if cheap else []), f"hydra.run.dir={folder}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wall_s.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    (folder / "command.txt").write_text(" ".join(cmd) + "\n")
    if proc.returncode != 0:
        (folder / "stderr.txt").write_text(proc.stderr)


def curve(folder: Path, keys: tuple[str, ...] = KEYS,
          data_keys: tuple[str, ...] = ("modes_covered", "clusters_covered"),
          **labels: object) -> list[dict[str, object]]:
    """Every evaluation of one run (``metrics.jsonl``) as rows: labels, step, ``keys`` and the ``data/`` baselines
    of ``data_keys``."""
    jsonl = folder / "metrics.jsonl"
    rows = []
    for line in jsonl.read_text().splitlines() if jsonl.is_file() else []:
        rec = json.loads(line)
        scores = rec.get("scores", {})
        if not scores:
            continue
        rows.append({**labels, "step": rec["step"], **{k: scores.get(k) for k in keys},
                     **{f"data/{k}": scores.get(f"data/{k}") for k in data_keys}})
    return rows


def search(args: argparse.Namespace) -> None:
    jobs = [(name, seed) for seed in range(args.seeds) for name in args.only or CANDIDATES]
    common = [f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
              f"trainer.ckpt_every={args.steps}"]
    if args.jobs > 0:  # --jobs 0: collect what the run folders hold, train nothing
        Parallel(n_jobs=args.jobs)(
            delayed(train)(args.out / "search" / f"{n}_s{s}", [*CANDIDATES[n].split(), *common, f"seed={s}"])
            for n, s in jobs)
    rows = [r for n, s in jobs for r in curve(args.out / "search" / f"{n}_s{s}", candidate=n, seed=s)]
    write_csv(args.out / "search_curve.csv", rows)
    for n, s in jobs:
        cov = [r["modes_covered"] for r in rows if r["candidate"] == n and r["seed"] == s]
        done = "" if (args.out / "search" / f"{n}_s{s}" / "metrics.json").is_file() else " (unfinished)"
        print(f"{n:24s} s{s}: " + " ".join(f"{c:g}" for c in cov if c is not None) + done)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["search"])
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/results/rollback_study"))
    ap.add_argument("--only", nargs="+", choices=list(CANDIDATES), help="search: these candidates only")
    args = ap.parse_args()
    search(args)


if __name__ == "__main__":
    main()
