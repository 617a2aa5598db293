"""The mission's strategies with the same tuning budget (issue 12, part 4): ring8 and grid25, >= 5 seeds.

Every arm gets the same budget: the same generator steps, and the same four learning rates tried (``LRS``, Lucic
et al. 2018's "same budget per model"). The protocol has two stages, both resumable (finished runs are skipped,
interrupted ones resumed from their checkpoint; a larger ``--steps`` continues finished runs from their last
checkpoint) and run in parallel with joblib, one thread per job:

``tune``: every (arm, data set, lr) on the tuning seeds (``TUNE_SEEDS``, not used again). The best lr of an
(arm, data set) has the highest mean final modes covered over those seeds (ties: higher HQ fraction, then lower
lr). ``final``: every (arm, data set) at its best lr on fresh seeds 0..``--seeds``-1; the table reports these
only, so the selection does not bias them (no winner's curse). ``all`` runs both::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/fair_table.py all --jobs 2 --out docs/results/fair_table

Writes ``<out>/curve.csv`` (every evaluation of every run, both stages), ``<out>/lr_choice.csv``,
``<out>/curves.png`` (modes and HQ against step) and ``<out>/table.md`` (mean +- std over the final seeds, seeds
with all modes, the chosen lr, the difference to the plain GAN; and the tuning stage's results at every lr).
``--arms`` restricts what is trained; the tables collect every finished run.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from joblib import Parallel, delayed
from pacgan_table import write_csv  # scripts/ is on sys.path when a script in it runs
from rollback_study import curve, seed_lines, slug, train
from strategy_table import mean_std

#: Learning rates every arm tries (both networks; WGAN-GP through its own lr key, which sets both).
LRS = (1e-4, 3e-4, 1e-3, 3e-3)
#: Seeds of the tuning stage (the final stage uses 0, 1, ...).
TUNE_SEEDS = (100, 101)
DATASETS = {"ring8": 8, "grid25": 25}
LR = "optim.generator.lr={lr} optim.discriminator.lr={lr}"
#: WGAN-GP's 2-D toy settings (Gulrajani et al. 2017, gan_toy.py): lambda 0.1, 3 x 512 MLPs with a 2-d latent,
#: Adam betas (0.5, 0.9), 5 critic steps (the strategy's default n_critic), batch 256 (every arm's batch here).
WGAN_TOY = ("strategy=[wgan_gp] strategy.wgan_gp.lambda_gp=0.1 strategy.wgan_gp.betas=[0.5,0.9] "
            "strategy.wgan_gp.lr={lr} model.generator.hidden=[512,512,512] "
            "model.discriminator.hidden=[512,512,512] model.generator.z_dim=2")

#: label -> overrides with ``{lr}``; the first is the plain GAN. Shipped strategy defaults unless stated.
ARMS = {
    "GAN (no strategy)": LR,
    "D lr damping (x0.5)": f"{LR} strategy=[d_lr_damping]",
    "periodic rollback": f"{LR} strategy=[rollback]",
    "periodic rollback + D lr damping (x0.5)": f"{LR} strategy=[rollback,d_lr_damping]",
    # B=8 kernels (the shipped B=100 costs ~25x a plain step on 256 samples; B=8 about 5x)
    "minibatch discrimination (B=8)": f"{LR} strategy=[minibatch_discrimination] "
                                      "strategy.minibatch_discrimination.num_kernels=8",
    "WGAN-GP (toy settings)": WGAN_TOY,  # 3 x 512 MLPs and 5 critic steps: ~30x a plain step on the CPU
}
#: Settings every run shares: ganlab's MLP pair (WGAN-GP: its own widths above), batch 256.
COMMON = "model=mlp trainer.batch_size=256"


def overrides(arm: str, dataset: str, lr: float, seed: int, args: argparse.Namespace) -> list[str]:
    return [*COMMON.split(), f"dataset={dataset}", *ARMS[arm].format(lr=lr).split(), f"seed={seed}",
            f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
            f"trainer.ckpt_every={args.ckpt_every}"]


def folder(args: argparse.Namespace, arm: str, dataset: str, lr: float, seed: int) -> Path:
    return args.out / "runs" / dataset / slug(arm) / f"lr{lr:g}_s{seed}"


def collect(args: argparse.Namespace, jobs: list[tuple[str, str, float, int]], stage: str) -> list[dict]:
    """Every evaluation of the given runs as CSV rows (unfinished runs included; ``finished`` marks the rest)."""
    rows = []
    for a, d, lr, s in jobs:
        f = folder(args, a, d, lr, s)
        done = (f / "metrics.json").is_file()
        rows += curve(f, stage=stage, dataset=d, arm=a, lr=lr, seed=s, finished=done)
    return rows


def choose_lr(rows: list[dict], arms: list[str], steps: int, lrs: tuple[float, ...] = LRS
              ) -> dict[tuple[str, str], float]:
    """(arm, data set) -> the lr with the highest mean final modes covered over the tuning seeds (then HQ, then
    the lower lr); only (arm, data set) pairs whose every tuning run has finished get one."""
    best = {}
    for a in arms:
        for d in DATASETS:
            score = {}
            for lr in lrs:
                fin = [r for r in rows if (r["arm"], r["dataset"], r["lr"], r["step"]) == (a, d, lr, steps)]
                if len(fin) < len(TUNE_SEEDS):
                    break
                score[lr] = (statistics.mean(r["modes_covered"] for r in fin),
                             statistics.mean(r["hq_fraction"] for r in fin), -lr)
            else:
                best[(a, d)] = max(score, key=score.get)
    return best


def run(args: argparse.Namespace, jobs: list[tuple[str, str, float, int]]) -> None:
    if args.jobs > 0:  # --jobs 0: collect what the run folders hold, train nothing
        Parallel(n_jobs=args.jobs)(
            delayed(train)(folder(args, a, d, lr, s), overrides(a, d, lr, s, args), steps=args.steps)
            for a, d, lr, s in jobs)


#: Evaluations averaged per seed in the table's late-window columns (the final one and the LATE - 1 before it).
LATE = 5


def table(final: list[dict], best: dict[tuple[str, str], float], args: argparse.Namespace) -> str:
    """Markdown: per arm and data set, the chosen lr and, over the final seeds that finished, modes covered (with its
    difference to the plain GAN's and Welch's two-sided p), HQ % and reverse KL (mean +- std), the seeds with all
    modes, and (less noisy than one evaluation) modes and HQ % averaged over each seed's last :data:`LATE`
    evaluations."""
    from ganlab.analysis.stats import welch_t_test

    lines = ["| data | arm | lr (chosen) | seeds | modes covered | vs plain GAN: modes, Welch p | HQ % | reverse KL "
             f"| seeds with all modes | last {LATE} evaluations: modes, HQ % |", "|---" * 10 + "|"]

    def runs(a: str, d: str) -> dict[object, list[dict]]:
        """seed -> its evaluations in step order, for the finished final runs of (a, d) at its chosen lr."""
        done = {r["seed"] for r in final if (r["arm"], r["dataset"], r["step"]) == (a, d, args.steps)
                and r["lr"] == best.get((a, d))}
        return {s: sorted((r for r in final if (r["arm"], r["dataset"], r["seed"]) == (a, d, s)
                           and r["lr"] == best.get((a, d))), key=lambda r: int(r["step"])) for s in sorted(done)}

    plain = next(iter(ARMS))
    for d, k in DATASETS.items():
        for a in ARMS:
            seeds = runs(a, d) if (a, d) in best else {}
            if not seeds:
                continue
            fin = [ev[-1] for ev in seeds.values()]
            m, m0 = [r["modes_covered"] for r in fin], [ev[-1]["modes_covered"] for ev in runs(plain, d).values()]
            vs = "-"
            if a != plain and len(m) > 1 and len(m0) > 1:
                p = welch_t_test(statistics.mean(m), statistics.stdev(m), len(m),
                                 statistics.mean(m0), statistics.stdev(m0), len(m0))[2]
                vs = f"{statistics.mean(m) - statistics.mean(m0):+.1f}, p = {p:.2g}"
            late_m = [statistics.mean(r["modes_covered"] for r in ev[-LATE:]) for ev in seeds.values()]
            late_hq = [statistics.mean(100 * r["hq_fraction"] for r in ev[-LATE:]) for ev in seeds.values()]
            lines.append(
                f"| {d} | {a} | {best[(a, d)]:g} | {len(fin)} | {mean_std(m, '.1f')} | {vs} "
                f"| {mean_std([100 * r['hq_fraction'] for r in fin], '.1f')} "
                f"| {mean_std([r['reverse_kl'] for r in fin], '.3f')} "
                f"| {sum(r['modes_covered'] == k for r in fin)}/{len(fin)} "
                f"| {mean_std(late_m, '.1f')}, {mean_std(late_hq, '.1f')} |")
    return "\n".join(lines)


def tuning_table(tune: list[dict], args: argparse.Namespace) -> str:
    """Markdown: mean final modes covered / HQ % over the tuning seeds at every lr tried."""
    lines = ["| data | arm | " + " | ".join(f"lr {lr:g}: modes, HQ %" for lr in args.lrs) + " |",
             "|---|---|" + "---|" * len(args.lrs)]
    for d in DATASETS:
        for a in ARMS:
            cells = []
            for lr in args.lrs:
                fin = [r for r in tune if (r["arm"], r["dataset"], r["lr"], r["step"]) == (a, d, lr, args.steps)]
                cells.append(f"{statistics.mean(r['modes_covered'] for r in fin):.1f}, "
                             f"{100 * statistics.mean(r['hq_fraction'] for r in fin):.1f} ({len(fin)} seeds)"
                             if fin else "-")
            if any(c != "-" for c in cells):
                lines.append(f"| {d} | {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(final: list[dict], path: Path, steps: int) -> None:
    """Modes covered and HQ % against step (rows) per data set (columns), one line per arm at its chosen lr (the
    mean over its final seeds; each seed faint), with the data's modes dashed: shows whether the runs plateaued."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(DATASETS), figsize=(12, 7), dpi=110, sharex=True)
    for col, (d, k) in enumerate(DATASETS.items()):
        for row, (key, scale, label) in enumerate((("modes_covered", 1, f"modes covered (of {k})"),
                                                    ("hq_fraction", 100, "HQ %"))):
            ax = axes[row][col]
            for i, a in enumerate(ARMS):
                mine = [r for r in final if r["arm"] == a and r["dataset"] == d]
                if not mine:
                    continue
                done = len({r["seed"] for r in mine if r["step"] == steps})
                seed_lines(ax, mine, key, f"C{i}", f"{a}, lr {mine[0]['lr']:g} ({done} seeds)", scale)
            if key == "modes_covered":
                ax.axhline(k, color="k", ls="--", lw=1)
            ax.set_title(f"{d}: {label}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.set_xlabel("generator step" if row else "")
            if row == 0:
                ax.legend(fontsize=6.5, loc="lower right")
    fig.suptitle("Mean over the final seeds (faint: each seed) at each arm's chosen lr", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["tune", "final", "all"],
                    help="tune: every lr on the tuning seeds; final: the chosen lr on fresh seeds; all: both")
    ap.add_argument("--steps", type=int, default=20000, help="generator steps of every run")
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--ckpt-every", type=int, default=2500, help="checkpoint interval (an interrupted run resumes)")
    ap.add_argument("--seeds", type=int, default=5, help="final seeds 0..N-1")
    ap.add_argument("--jobs", type=int, default=2, help="parallel runs (one thread each); 0: collect only")
    ap.add_argument("--lrs", type=float, nargs="+", default=list(LRS),
                    help="learning rates tried (the protocol's: %(default)s; others for a check outside it)")
    ap.add_argument("--arms", nargs="+", choices=[slug(a) for a in ARMS], help="train these arms only")
    ap.add_argument("--out", type=Path, default=Path("docs/results/fair_table"))
    args = ap.parse_args()
    if (args.steps <= 0 or args.eval_every <= 0 or args.steps % args.eval_every or args.seeds <= 0 or args.jobs < 0
            or not all(lr > 0 for lr in args.lrs)):
        ap.error("--steps, --eval-every, --seeds and --lrs must be positive, --steps a multiple of --eval-every "
                 "(the final evaluation is the table's), --jobs >= 0")
    arms = [a for a in ARMS if args.arms is None or slug(a) in args.arms]
    tune_jobs = [(a, d, lr, s) for a in ARMS for d in DATASETS for lr in args.lrs for s in TUNE_SEEDS]
    for a in arms:  # arm by arm, so that an arm's table is complete before the next one starts
        mine = [j for j in tune_jobs if j[0] == a]
        if args.what in ("tune", "all"):
            run(args, mine)
        if args.what in ("final", "all"):
            best = choose_lr(collect(args, mine, "tune"), [a], args.steps, tuple(args.lrs))
            run(args, [(a, d, best[(a, d)], s) for d in DATASETS if (a, d) in best for s in range(args.seeds)])
    tune = collect(args, tune_jobs, "tune")
    if not tune:
        raise SystemExit(f"fair_table.py: no evaluations under {args.out / 'runs'}; train first (--jobs 1 or more), "
                         "or point --out at the folder the runs were written to")
    best = choose_lr(tune, list(ARMS), args.steps, tuple(args.lrs))
    final = collect(args, [(a, d, lr, s) for (a, d), lr in best.items() for s in range(args.seeds)], "final")
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "curve.csv", tune + final)
    write_csv(args.out / "lr_choice.csv", [{"arm": a, "dataset": d, "lr": lr} for (a, d), lr in best.items()])
    text = f"{table(final, best, args)}\n\nTuning stage (seeds {TUNE_SEEDS}):\n\n{tuning_table(tune, args)}\n"
    (args.out / "table.md").write_text(text)
    if final:
        plot(final, args.out / "curves.png", args.steps)
    print(text)


if __name__ == "__main__":
    main()
