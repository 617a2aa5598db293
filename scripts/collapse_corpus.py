"""The labelled collapse corpus (issue 13, part 3): short runs on ring8, grid25 and 8x8 digits, each with an
independent coverage evaluation at every evaluation step, the risk signals at every monitored step and the
run's own scores.

Usage (from the repository root; resumable: a run with a part file or a row in the committed ``runs.csv`` is skipped)::

    OMP_NUM_THREADS=1 nice -n 10 python scripts/collapse_corpus.py [--jobs 2] [--only NAME ...]

Writes ``docs/results/collapse_corpus/``: ``runs.csv`` (one row per run: settings, label, drop step, CPU
seconds), ``evals.csv`` (one row per run and evaluation: the run's own scores incl. ``data/`` baselines, its
``health/<key>`` values from metrics.jsonl and the independent coverage) and ``signals.csv`` (one row per run
and monitored step: ``collapse_risk`` as run, and each risk signal). Run folders (checkpoints, metrics.jsonl,
alerts) go to ``runs/collapse_corpus/``.

Health keys: the committed ``evals.csv`` was recorded before the collapse detector was wired, so its
``health/collapse_alarm`` is the fixed-z alarm and ``health/fixed_z/clusters_covered`` that alarm's cluster
count; the loop now writes those as ``health/fixed_z/alarm`` and ``health/fixed_z/clusters_hit``, and
``health/collapse_alarm`` is the merged alarm (detector or fixed-z), beside ``health/detector/collapsed``.
Nothing here or in ``collapse_table.py`` reads these columns.

Label rule (fixed before any alarm was looked at; :func:`label_run`): at every evaluation, 10,000 fresh
samples from G (own seeded generator, not the evaluator's codes) give a coverage: mixtures, ``modes_covered``
of :func:`ganlab.metrics.mixture.mixture_scores` (a mode is covered by >= 1 sample within 3 std of it);
digits, the classes the evaluator's classifier predicts for at least 10 % of a uniform share (>= 100 of the
10,000), since nearly every class receives a few misclassified samples even from a collapsed G. The data's
coverage is the same score on real samples. An evaluation is *collapsed* when coverage < 50 % of the data's
or <= 50 % of the run's best so far. The first ``WARMUP`` steps are a warm-up (G starts near a point and
healthy runs spread out only after several hundred steps), so a run is labelled collapsed when an evaluation
at step >= ``WARMUP`` is collapsed; its drop step is the first evaluation of the unbroken stretch of collapsed
evaluations that contains the first such one (a run collapsed from the start drops at its first evaluation).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUT = REPO / "docs" / "results" / "collapse_corpus"
WORK = REPO / "runs" / "collapse_corpus"
WARMUP = 1000            # steps; see the label rule
LABEL_SAMPLES = 10_000
FAST_METRICS = ["logger=none", "trainer.progress=false", "trainer.projector=false", "threads=1",
                "~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]
MIX = ["model=mlp", "trainer.steps=2500", "trainer.eval_every=250", "trainer.ckpt_every=2500", "trainer.batch_size=256"]
DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=16",
          "model.discriminator.width=16", "model.generator.z_dim=16", "trainer.steps=3000", "trainer.eval_every=250",
          "trainer.ckpt_every=3000", "trainer.batch_size=64"]


def _grid() -> list[dict[str, Any]]:
    """The runs: (data set, strategies, lr, seeds); chosen to mix healthy and collapsing settings."""
    plan: dict[str, list[tuple]] = {  # data set -> [(strategies, lr, seeds[, extra overrides])]
        "ring8": [("pacgan", 1e-3, [0, 1, 2, 3]), ("r1", 1e-3, [0, 1]), ("mode_seeking", 1e-3, [0, 1]),
                  ("minibatch_stddev", 1e-3, [0]), ("plain", 2e-4, [0, 1]), ("plain", 1e-3, [0, 1]),
                  ("spectral_norm", 1e-3, [0]), ("ema", 1e-3, [0]), ("pacgan", 5e-3, [0])],
        "grid25": [("pacgan", 1e-3, [0, 1, 2]), ("r1", 1e-3, [0, 1, 2]), ("minibatch_stddev", 1e-3, [0, 1]),
                   ("plain", 1e-3, [0, 1, 2]), ("plain", 2e-4, [0]), ("spectral_norm", 1e-3, [0]),
                   ("mode_seeking", 1e-3, [0]), ("pacgan", 5e-3, [0])],
        "digits": [("plain", 2e-4, [0, 1, 2]), ("plain", 2e-3, [0, 1]), ("plain", 5e-3, [0]),
                   ("pacgan", 2e-4, [0, 1]), ("minibatch_stddev", 2e-4, [0]), ("spectral_norm", 2e-4, [0]),
                   ("ema", 2e-4, [0]), ("mode_seeking", 2e-4, [0]), ("pacgan", 2e-3, [0]),
                   ("minibatch_stddev", 2e-3, [0])],
    }
    # Added after the first 45 runs had no collapse on digits and no late collapse anywhere (chosen by those
    # labels, never by an alarm; every outcome is kept): higher learning rates, 4,000 steps on the mixtures.
    late = ["trainer.steps=4000", "trainer.ckpt_every=4000"]
    # Seeds 1-3 of these six settings were added later: their seed-0 runs gave all five late collapses (drop step
    # >= 1,000) of the first 58 runs, too few to measure an early warning's lead time (again chosen by labels only).
    seeds = [0, 1, 2, 3]
    plan["ring8"] += [("pacgan", 1e-2, seeds, late), ("mode_seeking", 5e-3, seeds, late), ("r1", 5e-3, seeds, late)]
    plan["grid25"] += [("pacgan", 1e-2, seeds, late), ("mode_seeking", 5e-3, seeds, late), ("r1", 5e-3, seeds, late)]
    plan["digits"] += [("plain", 1e-2, [0, 1], []), ("plain", 2e-2, [0], []), ("pacgan", 1e-2, [0], []),
                       ("minibatch_stddev", 1e-2, [0], []),
                       # still no digits collapse at lr 2e-2: unbalanced learning rates (lr = D's; G's in the name)
                       ("plain", 2e-2, [0], ["optim.generator.lr=0.0002"], "_g0.0002"),
                       ("plain", 2e-4, [0], ["optim.generator.lr=0.02"], "_g0.02")]
    runs = []
    for dataset, rows in plan.items():
        for strategy, lr, seeds, *extra in rows:
            for seed in seeds:
                base = DIGITS if dataset == "digits" else [f"dataset={dataset}", *MIX]
                strat = "strategy=[]" if strategy == "plain" else f"strategy=[{strategy}]"
                suffix = extra[1] if len(extra) > 1 else ""
                runs.append({"name": f"{dataset}_{strategy}_lr{lr:g}{suffix}_s{seed}", "dataset": dataset,
                             "strategy": strategy, "lr": lr, "seed": seed,
                             "overrides": [*base, strat, f"optim.generator.lr={lr}", f"optim.discriminator.lr={lr}",
                                           f"seed={seed}", *FAST_METRICS, *(extra[0] if extra else [])]})
    return runs


def label_run(steps: list[int], coverage: list[float], data_coverage: float, warmup: int = WARMUP,
              fraction: float = 0.5) -> tuple[bool, int | None]:
    """(collapsed, drop step) by the label rule of the module docstring.

    Args:
        steps: evaluation steps, increasing.
        coverage: the independent coverage at each.
        data_coverage: the real data's coverage (> 0).
        warmup: evaluations before this step cannot make a run collapsed (they can start its drop).
        fraction: coverage below ``fraction`` x the data's, or at most ``fraction`` x the best so far, is collapsed.
    """
    best, bad = -math.inf, []
    for c in coverage:
        best = max(best, c)
        bad.append(c < fraction * data_coverage or c <= fraction * best)
    first = next((i for i, (s, b) in enumerate(zip(steps, bad)) if b and s >= warmup), None)
    if first is None:
        return False, None
    while first > 0 and bad[first - 1]:
        first -= 1
    return True, int(steps[first])


def _coverage(trainer: Any, samples: Any) -> float:
    """The independent coverage of ``samples`` (see the module docstring)."""
    import torch

    from ganlab.metrics.mixture import mixture_scores

    data = trainer.data
    if data.mixture is not None:
        return mixture_scores(samples, data.mixture.means, data.mixture.std)["modes_covered"]
    labels = torch.cat([trainer.evaluator.embedder.mode_labels(samples[i:i + 2000])
                        for i in range(0, len(samples), 2000)])
    k = int(data.num_modes)
    return float((torch.bincount(labels, minlength=k) >= 0.1 * len(samples) / k).sum())


def run_one(run: dict[str, Any]) -> dict[str, Any]:
    """Train one run, record signals and independent coverages; write its rows as JSON; return its summary."""
    import torch
    from hydra import compose, initialize_config_dir

    from ganlab import CONFIG_DIR
    from ganlab.models.base import eval_mode
    from ganlab.run.build import build_trainer

    c0 = time.process_time()
    run_dir = WORK / run["name"]
    if run_dir.exists():  # an unfinished earlier attempt: start again from scratch
        import shutil
        shutil.rmtree(run_dir)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=run["overrides"])
    trainer = build_trainer(cfg, run_dir)
    signals: list[dict[str, Any]] = []
    logged = trainer.logger.scalars

    def scalars(values: dict[str, float], step: int) -> None:  # keep the risk rows (the logger is a NullLogger)
        if "health/collapse_risk" in values:  # logged with the monitor's scalars: keep the risk's only
            signals.append({"step": step, **{k.removeprefix("health/").removeprefix("risk/"): v
                                             for k, v in values.items()
                                             if k == "health/collapse_risk" or k.startswith("health/risk/")}})
        logged(values, step)

    trainer.logger.scalars = scalars
    labels: list[dict[str, Any]] = []
    evaluate = trainer.evaluate
    device = trainer.device

    def evaluate_and_label() -> dict[str, float]:
        scores = evaluate()
        G = trainer.state.g_ema if trainer.state.g_ema is not None else trainer.G  # the G just scored
        step = trainer.state.step
        gen = torch.Generator(device=device).manual_seed(1_000_003 * (run["seed"] + 1) + step)
        with torch.no_grad(), eval_mode(G):
            samples = torch.cat([G(G.sample_z(2000, gen)) for _ in range(LABEL_SAMPLES // 2000)])
        labels.append({"step": step, "coverage": _coverage(trainer, samples)})
        return scores

    trainer.evaluate = evaluate_and_label
    real = trainer.data.holdout if trainer.data.is_image else trainer.data.x[:LABEL_SAMPLES]
    data_cov = _coverage(trainer, real)
    trainer.fit()
    evals = []
    for line, lab in zip((run_dir / "metrics.jsonl").read_text().splitlines(), labels):
        rec = json.loads(line)
        assert rec["step"] == lab["step"]
        evals.append({"run": run["name"], "step": rec["step"], "label_coverage": lab["coverage"],
                      "label_data_coverage": data_cov, **rec["scores"],
                      **{f"health/{k}": v for k, v in rec["health"].items()}})
    collapsed, drop = label_run([e["step"] for e in evals], [e["label_coverage"] for e in evals], data_cov)
    summary = {k: run[k] for k in ("name", "dataset", "strategy", "lr", "seed")} | {
        "steps": int(cfg.trainer.steps), "eval_every": int(cfg.trainer.eval_every),
        "monitor_every": int(cfg.monitor.every), "data_coverage": data_cov, "collapsed": int(collapsed),
        "drop_step": drop if drop is not None else "", "cpu_s": round(time.process_time() - c0, 1),
        "overrides": " ".join(run["overrides"])}
    rows = {"summary": summary, "evals": evals, "signals": [{"run": run["name"], **s} for s in signals]}
    part = OUT / "parts" / f"{run['name']}.json"
    part.parent.mkdir(parents=True, exist_ok=True)
    tmp = part.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, part)  # a part file exists only for a finished run (what --resume skips)
    return summary


def committed() -> dict[str, dict[str, list[dict[str, str]]]]:
    """The runs already in the committed CSVs (run name -> its ``summary``, ``evals`` and ``signals`` rows, as
    strings), so that a later session adds runs without re-running the corpus (the part files are not committed)."""
    if not (OUT / "runs.csv").is_file():
        return {}
    runs: dict[str, dict[str, list[dict[str, str]]]] = {}
    with open(OUT / "runs.csv", newline="") as f:
        for row in csv.DictReader(f):
            runs[row["name"]] = {"summary": [row], "evals": [], "signals": []}
    for name in ("evals", "signals"):
        with open(OUT / f"{name}.csv", newline="") as f:
            for row in csv.DictReader(f):
                runs[row["run"]][name].append(row)
    return runs


def write_csvs() -> None:
    """Merge the finished runs' part files and the committed runs without one into runs.csv, evals.csv and
    signals.csv (sorted by run; a part file replaces a committed run of the same name). Each file is written to a
    temporary name and then renamed, so an interrupted merge leaves the committed CSVs as they were."""
    parts = {p.stem: json.loads(p.read_text()) for p in sorted((OUT / "parts").glob("*.json"))}
    old = committed()
    names = sorted(set(parts) | set(old))
    merged = [parts[n] if n in parts else {"summary": old[n]["summary"][0], "evals": old[n]["evals"],
                                           "signals": old[n]["signals"]} for n in names]
    for name, rows in (("runs", [p["summary"] for p in merged]), ("evals", [r for p in merged for r in p["evals"]]),
                       ("signals", [r for p in merged for r in p["signals"]])):
        keys = list(dict.fromkeys(k for r in rows for k in r))
        tmp = OUT / f".{name}.csv.tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, OUT / f"{name}.csv")
    print(f"{len(merged)} runs ({len(parts)} from part files) -> {OUT}/{{runs,evals,signals}}.csv")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", nargs="*", default=None, help="run names to run (default: the whole grid)")
    p.add_argument("--list", action="store_true", help="print the grid and exit")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    grid = [r for r in _grid() if args.only is None or r["name"] in args.only]
    if args.list:
        print("\n".join(f"{r['name']}: {' '.join(r['overrides'])}" for r in grid))
        return
    done = set(committed())  # runs in the committed CSVs count as finished
    todo = [r for r in grid if r["name"] not in done and not (OUT / "parts" / f"{r['name']}.json").exists()]
    print(f"{len(grid)} runs in the grid, {len(grid) - len(todo)} finished, {len(todo)} to run", flush=True)
    from joblib import Parallel, delayed

    t0 = time.time()
    for s in Parallel(n_jobs=args.jobs, backend="loky", return_as="generator_unordered")(
            delayed(run_one)(r) for r in todo):
        print(f"[{time.time() - t0:6.0f}s] {s['name']}: collapsed={s['collapsed']} drop={s['drop_step']} "
              f"cpu={s['cpu_s']}s", flush=True)
    write_csvs()


if __name__ == "__main__":
    main()
