"""Intra-class collapse (issue 19, part 4): a class-conditional G against an unconditional one with the same G/D.

Each run is ``ganlab-train experiment=fashion_mnist_dcgan`` (the DCGAN pair at widths 32 on real Fashion-MNIST at
32x32, batch 64, Adam 2e-4, betas (0.5, 0.999), non-saturating loss; 2,500 samples scored with every default
scorer) plus the row's overrides and ``seed=S``; finished runs are skipped, jobs run in parallel with joblib, one
thread each. The rows differ only in conditioning: unconditional (``model.conditional=false``), conditional with a
projection discriminator, and conditional with an AC-GAN head. A conditional G is scored by *requested* class
(``class/...``: balanced codes, k-means on that class's real embeddings), an unconditional one by the class the
classifier embedder *predicts* for each sample (``pred_class/...``), each beside its held-out data baseline
(``data/class/...``, ``data/pred_class/...``). Every evaluation goes to ``<out>/curve.csv``, the last one of each run
to ``<out>/trials.csv`` and the table (mean +- standard error over seeds) to ``<out>/table.md``::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/conditional_table.py --steps 3000 --trials 3 --jobs 2 \\
        --out docs/results/conditional_table
"""

from __future__ import annotations

import argparse
from pathlib import Path

from joblib import Parallel, delayed
from pacgan_table import mean_se, write_tables  # scripts/ is on sys.path when a script in it runs
from rollback_study import curve, train

BASE = ["experiment=fashion_mnist_dcgan"]
#: row (its run folders' name) -> (title, overrides, prefix of its per-class keys)
ROWS = {
    "uncond": ("unconditional", ["model.conditional=false"], "pred_class"),
    "proj": ("conditional, projection D", ["model.conditional=true", "model.conditional_head=projection"], "class"),
    "acgan": ("conditional, AC-GAN D", ["model.conditional=true", "model.conditional_head=acgan"], "class"),
}
#: (per-class score, aggregate) pairs in the table, and the column titles.
PER_CLASS = [("clusters_covered", "mean"), ("clusters_covered", "worst"), ("high_similarity_fraction", "mean"),
             ("high_similarity_fraction", "worst"), ("recall", "mean"), ("recall", "worst"),
             ("precision", "mean"), ("class_accuracy", "mean"), ("class_accuracy", "worst")]
TITLES = ["clusters / class (of 10), mean", "worst", "high-sim. fraction / class, mean", "worst (max)",
          "recall / class, mean", "worst", "precision / class, mean", "class accuracy, mean", "worst"]
OVERALL = ("fd", "modes_covered", "clusters_covered")


def keys() -> tuple[str, ...]:
    """Every score a row's CSV line holds (both prefixes, so that all rows share the CSV's columns)."""
    per_class = [f"{p}/{agg}/{s}" for p in ("class", "pred_class") for s, agg in PER_CLASS]
    return OVERALL + tuple(per_class)


def cell(rows: list[dict[str, object]], key: str) -> str:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")]  # type: ignore[arg-type]
    return mean_se(values)


def cells(rows: list[dict[str, object]], prefix: str, base: str, no_accuracy: str) -> list[str]:
    """One table line's cells from the scores ``<base>fd``, ``<base>modes_covered`` and ``<base><prefix>/...``
    (``base`` "" for the model, "data/" for its baseline); ``no_accuracy`` stands in for the class accuracy of the
    ``pred_class`` grouping, which has none."""
    overall = [cell(rows, f"{base}{k}") for k in ("fd", "modes_covered")]
    return overall + [no_accuracy if s == "class_accuracy" and prefix == "pred_class"
                      else cell(rows, f"{base}{prefix}/{agg}/{s}") for s, agg in PER_CLASS]


def table(finals: list[dict[str, object]], steps: int) -> str:
    """Markdown: one line per row (mean +- standard error over seeds), each followed by its data baseline
    (held-out real images grouped the same way: true classes for ``class/``, predicted ones for ``pred_class/``)."""
    head = ["row", "grouping", "seeds", "steps", "fd", "modes (of 10)", *TITLES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, (title, _, prefix) in ROWS.items():
        mine = [r for r in finals if r["row"] == row]
        if not mine:
            continue
        grouping = "requested class" if prefix == "class" else "predicted class"
        ours, data = cells(mine, prefix, "", "- (1 by construction)"), cells(mine, prefix, "data/", "-")
        lines.append(f"| {title} | {grouping} | {len(mine)} | {steps:,} | " + " | ".join(ours) + " |")
        lines.append(f"| data baseline of that row | {grouping} | {len(mine)} | - | " + " | ".join(data) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--jobs", type=int, default=2, help="0: train nothing, only collect")
    ap.add_argument("--out", type=Path, default=Path("docs/results/conditional_table"))
    args = ap.parse_args()
    jobs = [(row, s) for s in range(args.trials) for row in args.rows]
    common = [f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
              f"trainer.ckpt_every={args.steps}"]
    if args.jobs > 0:
        Parallel(n_jobs=args.jobs)(delayed(train)(args.out / "runs" / f"{row}_s{s}",
                                                  [*BASE, *ROWS[row][1], *common, f"seed={s}"], cheap=False)
                                   for row, s in jobs)
    every = keys()
    rows = [r for row in ROWS for s in range(args.trials)
            for r in curve(args.out / "runs" / f"{row}_s{s}", keys=every, data_keys=every, row=row, seed=s)]
    write_tables(args.out, rows, args.steps, table)


if __name__ == "__main__":
    main()
