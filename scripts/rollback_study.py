"""The controlled generator-rollback study (issue 12, part 6): find a late-collapse setting, then test rollback.

Two steps, both resumable (finished runs are skipped) and run in parallel with joblib, one thread per job:

``search``: plain GANs in candidate settings (``CANDIDATES``), looking for one that first covers most modes and
then collapses late (the practitioner's pattern). Every evaluation goes to ``<out>/search_curve.csv``; a
candidate shows the pattern when its coverage reaches >= 75 % of the data's and later falls to <= 50 % of its
best::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/rollback_study.py search --jobs 1 --out docs/results/rollback_study

``study``: the 2 x 2 design (periodic rollback off/on x D lr 2e-4 / 1e-4) plus triggered rollback plus
minibatch discrimination alone, on ``experiment=rollback_study``, ``--seeds`` seeds each. Every evaluation goes to
``<out>/study_curve.csv``, the plots of coverage against step to ``<out>/study_<score>.png`` and the table (final
coverage, mean with a 95 % t-interval over seeds) to ``<out>/study.md``::

    OMP_NUM_THREADS=1 nice -n 15 python scripts/rollback_study.py study --seeds 5 --jobs 2 \\
        --out docs/results/rollback_study
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
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


#: The base setting's own strategies (``experiment=rollback_study`` packs D's input: PacGAN2); every arm keeps them.
BASE_STRATEGIES = "pacgan"
#: The base's D lr and the halved one (the report halved D's lr, 2e-4 -> 1e-4; the base here runs at 1e-2).
D_LR, D_LR_HALVED = "1e-2", "5e-3"
ROLLBACK = ["strategy=[{base},rollback]"]
PERIODIC = [*ROLLBACK, "strategy.rollback.period={period}", "strategy.rollback.lag={lag}"]

#: The study's arms: overrides added to ``experiment=rollback_study`` (periodic rollback's period and lag come
#: from ``--period``/``--lag``, the base strategies from :data:`BASE_STRATEGIES`, filled in by :func:`arms`).
ARMS = {
    f"base (D lr {D_LR})": [],
    f"D lr halved ({D_LR_HALVED})": [f"optim.discriminator.lr={D_LR_HALVED}"],
    "periodic rollback": PERIODIC,
    "periodic rollback + D lr halved": [*PERIODIC, f"optim.discriminator.lr={D_LR_HALVED}"],
    "triggered rollback": [*ROLLBACK, "strategy.rollback.mode=triggered"],
    "minibatch discrimination": ["strategy=[{base},minibatch_discrimination]"],
}


def arms(period: int, lag: int) -> dict[str, list[str]]:
    return {a: [o.format(period=period, lag=lag, base=BASE_STRATEGIES) for o in ov] for a, ov in ARMS.items()}


def slug(arm: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in arm).strip("_")


def mean_ci(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} (1 seed)" if values else "-"
    from scipy import stats

    m, s = statistics.mean(values), statistics.stdev(values)
    h = stats.t.ppf(0.975, len(values) - 1) * s / math.sqrt(len(values))  # two-sided 95 % Student-t interval
    return f"{m:.2f} [{m - h:.2f}, {m + h:.2f}]"


#: Evaluations averaged per seed in the table's secondary column (the final one and the LATE - 1 before it).
LATE = 5


def late_values(rows: list[dict[str, object]], arm: str, seed: object, key: str) -> list[float]:
    """``key`` at the last :data:`LATE` evaluations of one finished run."""
    mine = sorted((int(r["step"]), float(r[key])) for r in rows if r["arm"] == arm and r["seed"] == seed)
    return [v for _, v in mine[-LATE:]]


def study_table(rows: list[dict[str, object]], key: str, steps: int, seeds: int, data_cov: float) -> str:
    """Markdown: final ``key`` per arm (mean, 95 % t-interval over seeds), seeds reaching the data's coverage,
    the mean best coverage over the run, the difference to the base arm (Welch's t-test), and (secondary, less
    noisy than one evaluation) each seed's mean over its last :data:`LATE` evaluations, with its 95 % interval."""
    from ganlab.analysis.stats import welch_t_test

    finals = {a: [float(r[key]) for r in rows if r["arm"] == a and r["step"] == steps] for a in ARMS}
    done = {a: sorted({r["seed"] for r in rows if r["arm"] == a and r["step"] == steps}) for a in ARMS}
    late = {a: [statistics.mean(late_values(rows, a, s, key)) for s in done[a]] for a in ARMS}
    best = {a: [max(float(r[key]) for r in rows if r["arm"] == a and r["seed"] == s) for s in done[a]] for a in ARMS}
    base = finals[next(iter(ARMS))]
    lines = [f"| arm | seeds | final {key} (95 % CI) | seeds with all {data_cov:g} | best during run (mean) "
             f"| vs base: difference, Welch p | mean of the last {LATE} evaluations (95 % CI) |",
             "|---|---|---|---|---|---|---|"]
    for a in ARMS:
        f = finals[a]
        if not f:
            continue
        diff = "-"
        if a != next(iter(ARMS)) and len(f) >= 2 and len(base) >= 2:
            _, _, p = welch_t_test(statistics.mean(f), statistics.stdev(f), len(f),
                                   statistics.mean(base), statistics.stdev(base), len(base))
            diff = f"{statistics.mean(f) - statistics.mean(base):+.2f}, p = {p:.3g}"
        lines.append(f"| {a} | {len(f)} | {mean_ci(f)} | {sum(v >= data_cov for v in f)} "
                     f"| {statistics.mean(best[a]):.2f} | {diff} | {mean_ci(late[a])} |")
    return "\n".join(lines)


def factorial(rows: list[dict[str, object]], key: str, steps: int) -> str:
    """Markdown: the 2 x 2 design's main effects and interaction on the final ``key`` (periodic rollback off/on x
    D lr as is/halved), each a difference of means over the two levels of the other factor, with a 95 % t-interval
    and p from the pooled within-cell variance (two-way ANOVA with replication, df = N - 4); empty when a cell has
    fewer than 2 seeds.
    """
    from scipy import stats

    names = list(ARMS)[:4]  # base, D lr halved, periodic rollback, periodic rollback + D lr halved
    cells = [[float(r[key]) for r in rows if r["arm"] == a and r["step"] == steps] for a in names]
    if min(len(c) for c in cells) < 2:
        return ""
    m = [statistics.mean(c) for c in cells]
    df = sum(len(c) for c in cells) - 4
    mse = sum((v - mi) ** 2 for c, mi in zip(cells, m) for v in c) / df
    inv = sum(1 / len(c) for c in cells)  # each contrast below weighs every cell mean by +-1/2 (interaction +-1)
    contrasts = {"periodic rollback (on - off)": ((m[2] + m[3]) - (m[0] + m[1])) / 2,
                 "D lr halved (halved - as is)": ((m[1] + m[3]) - (m[0] + m[2])) / 2,
                 "interaction (D lr's effect with rollback - without)": (m[3] - m[2]) - (m[1] - m[0])}
    t = stats.t.ppf(0.975, df)
    lines = [f"| 2 x 2 effect on final {key} | estimate (95 % CI) | p |", "|---|---|---|"]
    for name, est in contrasts.items():
        se = math.sqrt(mse * inv / (1 if name.startswith("interaction") else 4))
        p = 2 * stats.t.sf(abs(est) / se, df) if se > 0 else math.nan
        lines.append(f"| {name} | {est:+.2f} [{est - t * se:+.2f}, {est + t * se:+.2f}] | {p:.3g} |")
    return "\n".join(lines)


def seed_lines(ax: object, rows: list[dict[str, object]], key: str, color: str, label: str,
               scale: float = 1.0) -> None:
    """On ``ax``: ``scale x key`` against step, a faint line per seed of ``rows`` and their mean in bold (``label``)."""
    for s in sorted({r["seed"] for r in rows}):
        ax.plot(*zip(*sorted((r["step"], scale * float(r[key])) for r in rows if r["seed"] == s)),
                color=color, alpha=0.15, lw=0.8)
    steps = sorted({r["step"] for r in rows})
    ax.plot(steps, [statistics.mean(scale * float(r[key]) for r in rows if r["step"] == t) for t in steps],
            color=color, lw=2, label=label)


def plot(rows: list[dict[str, object]], key: str, path: Path, title: str, data_cov: float) -> None:
    """Mean ``key`` over seeds against step, one line per arm (its seeds in the legend), with each seed as a faint
    line and the real data's value dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=120)
    last = max(r["step"] for r in rows)  # the runs' length: a seed without it is unfinished
    for i, a in enumerate(ARMS):
        mine = [r for r in rows if r["arm"] == a]
        if not mine:
            continue
        seeds = len({r["seed"] for r in mine})
        done = len({r["seed"] for r in mine if r["step"] == last})
        unfinished = f", {done} finished" if done < seeds else ""
        seed_lines(ax, mine, key, f"C{i}", f"{a} ({seeds} seed{'s' * (seeds > 1)}{unfinished})")
    if math.isfinite(data_cov):
        ax.axhline(data_cov, color="k", ls="--", lw=1, label=f"real data ({data_cov:g})")
    ax.set_xlabel("generator step")
    ax.set_ylabel(key)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def study(args: argparse.Namespace) -> None:
    design = arms(args.period, args.lag)
    train_arms = [a for a in design if args.arms is None or slug(a) in args.arms]
    jobs = [(a, s) for s in range(args.seeds) for a in design]
    common = ["experiment=rollback_study", f"trainer.steps={args.steps}", f"trainer.eval_every={args.eval_every}",
              f"trainer.ckpt_every={args.steps}"]
    if args.jobs > 0:
        Parallel(n_jobs=args.jobs)(
            delayed(train)(args.out / "study" / f"{slug(a)}_s{s}", [*common, *design[a], f"seed={s}"])
            for a, s in jobs if a in train_arms)
    rows = [r for a, s in jobs for r in curve(args.out / "study" / f"{slug(a)}_s{s}", arm=a, seed=s)]
    write_csv(args.out / "study_curve.csv", rows)
    texts = []
    for key in dict.fromkeys([args.key, "clusters_covered"]):
        data_cov = max((float(r[f"data/{key}"]) for r in rows if r.get(f"data/{key}") is not None),
                       default=math.nan)
        texts.append(study_table(rows, key, args.steps, args.seeds, data_cov))
        texts.append(factorial(rows, key, args.steps))
        plot(rows, key, args.out / f"study_{key}.png",
             f"experiment=rollback_study, up to {args.seeds} seeds, {args.steps:,} steps\nperiodic rollback every "
             f"{args.period:,} steps to the snapshot {args.lag:,} steps earlier", data_cov)
    text = "\n\n".join(t for t in texts if t)
    (args.out / "study.md").write_text(text + "\n")
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["search", "study"])
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/results/rollback_study"))
    ap.add_argument("--only", nargs="+", choices=list(CANDIDATES), help="search: these candidates only")
    ap.add_argument("--period", type=int, default=1000, help="study: periodic rollback every this many G steps")
    ap.add_argument("--lag", type=int, default=200, help="study: ... to the snapshot this many steps earlier")
    ap.add_argument("--arms", nargs="+", choices=[slug(a) for a in ARMS],
                    help="study: train these arms only (the table and plots still collect every arm's finished runs)")
    ap.add_argument("--key", default="modes_covered", help="study: the coverage score of the table and plot")
    args = ap.parse_args()
    {"search": search, "study": study}[args.what](args)


if __name__ == "__main__":
    main()
