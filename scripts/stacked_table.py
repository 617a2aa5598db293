"""1,000 modes (issue 12, part 5): DCGAN against PacDCGAN2 on stacked digits, PacGAN Table 2's comparison, CPU-sized.

Each run is ``ganlab-train`` with :data:`BASE` (stacked scikit-learn digits at 8x8: three independently drawn
digits as RGB channels, 1,000 modes; the DCGAN pair at widths 32; batch 64; Adam 2e-4, betas (0.5, 0.999);
26,000 generated samples scored, the VEEGAN/PacGAN count) plus the row's overrides and ``seed=S``; finished runs
are skipped, jobs run in parallel with joblib, one thread each. Every evaluation goes to ``<out>/curve.csv``, the
last one of each run to ``<out>/trials.csv``, the table (mean +- standard error over trials, beside the paper's
rows, copied) to ``<out>/table.md``::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/stacked_table.py --steps 10000 --trials 3 --jobs 1 \\
        --out docs/results/stacked_table

Differences from the paper's protocol (PacGAN's Table 2, the VEEGAN setting): stacked MNIST at 28x28 there,
stacked digits at 8x8 here; DCGAN widths 64 there, 32 here; 128,000 training images for 50 epochs (100,000
iterations, two G updates per D update) there; 128,000 drawn from scikit-learn's 1,797 digits here (26,000 more
held out for the data baseline, scored like the 26,000 samples), ``--steps`` iterations of one G update each;
uniform z in [-1, 1]^100 there, ganlab's Gaussian z here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from joblib import Parallel, delayed
from pacgan_table import mean_se, write_tables  # scripts/ is on sys.path when a script in it runs
from rollback_study import curve, train

BASE = ["dataset=stacked_digits", "dataset.num_samples=128000", "dataset.holdout_samples=26000", "model=dcgan",
        "model.generator.width=32", "model.discriminator.width=32", "trainer.batch_size=64",
        "metrics.num_samples=26000"]  # train() adds the cheap scorer set
ROWS = {"DCGAN": [], "PacDCGAN2": ["strategy=[pacgan]", "strategy.pacgan.m=2"]}
#: PacGAN Table 2 (Lin et al. 2018), stacked MNIST, copied from the paper: (modes of 1,000, KL to uniform).
PAPER = {"DCGAN": (78.9, 4.50), "PacDCGAN2": (1000.0, 0.06)}


def table(finals: list[dict[str, object]], steps: int) -> str:
    """Markdown: ganlab's rows (mean +- standard error over trials; the held-out data's, drawn per seed, likewise)
    beside the paper's (copied)."""
    lines = ["| row | source | trials | steps | modes (of 1,000) | KL to uniform | data baseline: modes, KL |",
             "|---|---|---|---|---|---|---|"]
    for row in ROWS:
        mine = [r for r in finals if r["row"] == row]
        if mine:
            modes = [float(r["modes_covered"]) for r in mine]  # type: ignore[arg-type]
            kl = [float(r["kl_uniform"]) for r in mine]  # type: ignore[arg-type]
            data_modes = [float(r["data/modes_covered"]) for r in mine]  # type: ignore[arg-type]
            data_kl = [float(r["data/kl_uniform"]) for r in mine]  # type: ignore[arg-type]
            data = f"{sum(data_modes) / len(data_modes):g}, {mean_se(data_kl)}"
            lines.append(f"| {row} | ganlab | {len(mine)} | {steps:,} | {mean_se(modes)} | {mean_se(kl)} | {data} |")
        m, k = PAPER[row]
        lines.append(f"| {row} | paper (copied) | - | 100,000 | {m:g} | {k:g} | - |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--eval-every", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="0: train nothing, only collect")
    ap.add_argument("--out", type=Path, default=Path("docs/results/stacked_table"))
    args = ap.parse_args()
    jobs = [(row, s) for s in range(args.trials) for row in ROWS]
    common = [f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
              f"trainer.ckpt_every={args.steps}"]
    if args.jobs > 0:
        Parallel(n_jobs=args.jobs)(delayed(train)(args.out / "runs" / f"{row}_s{s}",
                                                  [*BASE, *ROWS[row], *common, f"seed={s}"]) for row, s in jobs)
    rows = [r for row, s in jobs for r in curve(args.out / "runs" / f"{row}_s{s}", row=row, seed=s,
                                                keys=("modes_covered", "kl_uniform"),
                                                data_keys=("modes_covered", "kl_uniform"))]
    write_tables(args.out, rows, args.steps, table)


if __name__ == "__main__":
    main()
