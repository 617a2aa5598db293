"""Run every anti-collapse strategy on ring8 and grid25 over several seeds and print a markdown table.

Each run goes through ganlab's own API (the real ``conf/train.yaml`` composed with overrides, then
``ganlab.run.build.build_trainer(cfg, run_dir).fit()``), one at a time, in this process; its ``metrics.json``
is read back. Finished runs (a ``metrics.json`` at the requested step) are skipped, so an interrupted
table resumes. Example (about 40 CPU-minutes on one core with the defaults below; ``--steps 2400`` stays safely under)::

    OMP_NUM_THREADS=1 nice -n 10 python scripts/strategy_table.py --out docs/strategy_table.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir

import ganlab
from ganlab.run.build import build_trainer

#: label -> overrides; the first is the plain GAN every strategy is compared with. Shipped defaults unless the
#: label says otherwise.
CONFIGS: dict[str, list[str]] = {
    "GAN (no strategy)": [],
    "minibatch_discrimination (B=8)": ["strategy=[minibatch_discrimination]",  # B=100 costs ~25x a plain step
                                       "strategy.minibatch_discrimination.num_kernels=8"],
    "wgan_gp": ["strategy=[wgan_gp]"],
    "d_lr_damping (static)": ["strategy=[d_lr_damping]"],
    "d_lr_damping (adaptive)": ["strategy=[d_lr_damping]", "strategy.d_lr_damping.mode=adaptive"],
    "rollback (periodic)": ["strategy=[rollback]"],
    "minibatch_stddev": ["strategy=[minibatch_stddev]"],
    "pacgan (m=2)": ["strategy=[pacgan]"],
    "spectral_norm": ["strategy=[spectral_norm]"],
    "r1": ["strategy=[r1]"],
    "ttur": ["strategy=[ttur]"],
    "unrolled": ["strategy=[unrolled]"],
    "ema": ["strategy=[ema]"],
    "mode_seeking": ["strategy=[mode_seeking]"],
    "pacgan + r1": ["strategy=[pacgan,r1]"],
}

#: Published rows (PacGAN, Lin et al. 2018, Table 1; VEEGAN, Srivastava et al. 2017, Table 1): (modes, HQ %,
#: reverse KL) per data set; their geometry differs (see notes).
PUBLISHED = [
    ("PacGAN paper: GAN (10 trials)", (6.3, 98.2, 0.45), (17.3, 94.8, 0.70)),
    ("PacGAN paper: PacGAN2 / PacGAN3", (7.9, 95.6, 0.07), (24.6, 94.2, 0.06)),
    ("PacGAN paper: PacGAN4", (7.8, 95.9, 0.07), (24.8, 93.6, 0.04)),
    ("VEEGAN paper: Unrolled GAN", (7.6, 35.6, None), (23.6, 16.0, None)),
    ("VEEGAN paper: VEEGAN", (8.0, 52.9, None), (24.6, 40.0, None)),
]
MODES = {"ring8": 8, "grid25": 25}


def slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label).strip("_")


def run_one(label: str, dataset: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one (config, data set, seed) unless its metrics.json exists; return metrics + cost."""
    run_dir = Path(args.runs_dir) / dataset / slug(label) / f"seed{seed}"
    done, meta = run_dir / "metrics.json", run_dir / "table_meta.json"
    if done.is_file() and meta.is_file() and json.loads(done.read_text())["step"] == args.steps:
        return {**json.loads(done.read_text()), **json.loads(meta.read_text())}
    overrides = [f"dataset={dataset}", f"seed={seed}", f"trainer.steps={args.steps}",
                 f"optim.generator.lr={args.lr}", f"optim.discriminator.lr={args.lr}",
                 f"trainer.batch_size={args.batch_size}", f"trainer.eval_every={args.steps}",
                 f"trainer.ckpt_every={args.steps}", "logger=none", "trainer.progress=false", "device=cpu",
                 *CONFIGS[label]]
    cfg = compose("train", overrides=overrides)
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    trainer = build_trainer(cfg, run_dir)
    info = {"label": label, "overrides": overrides, "strategies_repr": [repr(s) for s in trainer.strategies],
            "n_critic": trainer.cfg.n_critic, "lr_D": trainer.state.opt_d.param_groups[0]["lr"],
            "lr_G": trainer.state.opt_g.param_groups[0]["lr"]}  # at the start (adaptive damping changes lr_D)
    metrics = trainer.fit()
    info |= {"cpu_s": time.process_time() - t_cpu, "wall_s": time.perf_counter() - t_wall}
    meta.write_text(json.dumps(info, indent=2))
    import matplotlib.pyplot as plt

    plt.close("all")  # the scatter figures of logger=none runs stay open otherwise
    s = metrics["scores"]
    print(f"{dataset:7s} seed {seed} {label:28s} modes {s['modes_covered']:4.1f}  HQ {100 * s['hq_fraction']:5.1f}%  "
          f"rKL {s['reverse_kl']:.3f}  cpu {info['cpu_s']:.1f}s", flush=True)
    return {**metrics, **info}


def mean_std(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{format(statistics.fmean(values), fmt)} ± {format(sd, fmt)}"


def table(results: dict[tuple[str, str], list[dict[str, Any]]], datasets: list[str], labels: list[str]) -> str:
    """Markdown table: per data set modes covered, HQ %, reverse KL (mean ± std over seeds), all-modes seeds."""
    head = "| strategy | " + " | ".join(
        f"{d} modes (of {MODES[d]}) | {d} HQ % | {d} reverse KL | {d} seeds with all modes" for d in datasets)
    head += " | CPU s/run |"
    lines = [head, "|" + "---|" * (2 + 4 * len(datasets))]
    for label in labels:
        cells: list[str] = []
        cpu: list[float] = []
        for d in datasets:
            runs = results.get((label, d), [])
            sc = [r["scores"] for r in runs]
            cpu += [r["cpu_s"] for r in runs]
            full = sum(s["modes_covered"] == MODES[d] for s in sc)
            cells += [mean_std([s["modes_covered"] for s in sc], ".1f"),
                      mean_std([100 * s["hq_fraction"] for s in sc], ".1f"),
                      mean_std([s["reverse_kl"] for s in sc], ".3f"), f"{full}/{len(sc)}"]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {statistics.fmean(cpu):.0f} |")
    for label, *pub in PUBLISHED:
        cells = []
        for d in datasets:
            m, hq, kl = pub[list(MODES).index(d)]
            cells += [f"{m}", f"{hq}", "–" if kl is None else f"{kl}", "–"]
        lines.append(f"| *{label}* | " + " | ".join(cells) + " | – |")
    return "\n".join(lines)


def protocol(args: argparse.Namespace, results: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    settings = sorted({(r["label"], "; ".join(r["strategies_repr"]) or "–", r["n_critic"], r["lr_D"], r["lr_G"])
                       for runs in results.values() for r in runs})
    rows = "\n".join(f"| {lab} | {rep} | {nc} | {lrd:g} | {lrg:g} |" for lab, rep, nc, lrd, lrg in settings)
    n_runs = sum(len(runs) for runs in results.values())
    cpu_min = sum(r["cpu_s"] for runs in results.values() for r in runs) / 60
    return f"""Protocol (ganlab, `scripts/strategy_table.py`): data sets ring8 (8 Gaussians on a circle of radius 2,
std 0.02) and grid25 (means {{-4,-2,0,2,4}}^2, std 0.05), 50,000 training points each; model=mlp (G: z_dim 16,
3 x 128 ReLU; D: 2 x 128 LeakyReLU(0.2)); loss=ns; Adam betas (0.5, 0.999), lr {args.lr:g} for D and G unless a
strategy changes it (see the settings below); {args.steps} generator steps of batch {args.batch_size};
seeds {", ".join(map(str, args.seeds))}; CPU, {args.threads} thread. Scores on 2,500 samples from fixed latent
codes after the last step (PacGAN/VEEGAN protocol): a sample is high quality (HQ) within 3 std of its nearest
mode; a mode is covered when it is the nearest mode of at least one HQ sample; reverse KL = sum_k p_k log(K p_k)
over nearest-mode assignments. Cells: mean ± std over seeds. All {n_runs} runs took {cpu_min:.1f} CPU-minutes in
all. Published rows are copied from the papers (PacGAN Table 1: 10 trials, ring radius 1 std 0.01, grid std 0.05,
their own networks and training length; VEEGAN Table 1), so they compare in kind, not exactly.

| row | strategies as built | n_critic | lr D | lr G |
|---|---|---|---|---|
{rows}
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2500, help="generator steps per run")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3, help="Adam lr of D and G (optim.*.lr) before strategies")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--datasets", nargs="+", default=["ring8", "grid25"], choices=list(MODES))
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), help=f"rows, from: {list(CONFIGS)}")
    p.add_argument("--runs-dir", default="runs/strategy_table")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--out", default=None, help="also write the table (and the protocol) to this markdown file")
    args = p.parse_args()
    unknown = set(args.configs) - set(CONFIGS)
    if unknown or args.steps <= 0 or args.batch_size <= 0 or args.threads <= 0 or not args.lr > 0:
        raise ValueError(f"unknown configs {sorted(unknown)} (choose from {list(CONFIGS)}), or non-positive "
                         f"--steps/--batch-size/--threads/--lr")
    torch.set_num_threads(args.threads)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    t0 = time.process_time()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        for d in args.datasets:
            for label in args.configs:
                results[(label, d)] = [run_one(label, d, s, args) for s in args.seeds]
    text = table(results, args.datasets, args.configs)
    print(text)
    print(f"\nCPU time of this invocation: {(time.process_time() - t0) / 60:.1f} min")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(f"# Anti-collapse strategies on 2-D mixtures\n\n{text}\n\n{protocol(args, results)}")


if __name__ == "__main__":
    main()
