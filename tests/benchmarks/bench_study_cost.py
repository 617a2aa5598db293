"""The cost of a study before it runs: each (arm, data set)'s generator step and evaluation, timed on this machine,
extrapolated to the study's budget and job count.

For every (arm, data set) of ``conf/study/<STUDY>.yaml`` the script composes the run exactly as the study would
(``ganlab.study.plan.overrides`` at one axis value and the first reporting seed), builds its trainer
(``ganlab.run.build.build_trainer``), runs ``--warmup`` steps untimed, then times ``--steps`` calls of
``trainer.train_step()`` (what ``Trainer.fit`` calls per generator step: n_critic D steps, one G step, the
strategies' hooks and the health checks) and ``--evals`` calls of ``trainer.evaluate()`` (the study's scorers on
its sample count). On CPU the times are the process's CPU seconds (one thread: ``--threads 1``), which other users'
load on a shared machine disturbs far less than wall time; on CUDA they are wall seconds with the device
synchronised. Checkpoints and logging are left out (a few ms per chunk).

Extrapolation, per run: ``budget.steps x step + (budget.steps / budget.eval_every) x evaluation``; per study: that
times the runs of each (arm, data set) (tuning values x tuning seeds + the arm's reporting seeds).

    python tests/benchmarks/bench_study_cost.py fair_table_v2 --steps 200 --out results/
    python tests/benchmarks/bench_study_cost.py pacgan_table_paper --device cuda
    python tests/benchmarks/bench_study_cost.py fair_table_v2 --arms "GAN (no strategy)" --datasets ring8
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import compose, env_info, finish, resolve_device, set_threads, sync

from ganlab.study.plan import Job, overrides
from ganlab.study.schema import StudySchema


def load_study(name: str) -> StudySchema:
    """``conf/study/<name>.yaml`` composed through the study command's config (its schema checks included)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from ganlab import CONFIG_DIR
    from ganlab.study.schema import check_study, register

    register()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = hydra_compose("ganlab_study", overrides=[f"study={name}"])
    study = OmegaConf.to_object(cfg.study)
    check_study(study)
    return study


def clock(device: torch.device) -> float:
    """CPU seconds of this process on CPU; wall seconds (device synchronised) on CUDA."""
    if device.type == "cuda":
        sync(device)
        return time.perf_counter()
    return time.process_time()


def runs_per_pair(study: StudySchema, arm: Any) -> int:
    """Runs of one (arm, data set): every axis value on every tuning seed, then the arm's reporting seeds."""
    tune = len(study.tuning.axis.values) * len(study.tuning.seeds) if study.tuning is not None else 0
    return tune + len(arm.seeds if arm.seeds is not None else study.seeds)


def measure(study: StudySchema, arm: Any, dataset: str, value: float | None, args: argparse.Namespace,
            device: torch.device) -> dict[str, Any]:
    """One (arm, data set): seconds per generator step and per evaluation, and the extrapolated run."""
    from ganlab.run.build import build_trainer

    job = Job(arm.name, dataset, "final", study.seeds[0], value)
    lines = [*overrides(study, job), f"device={device.type}"]
    run_dir = Path(tempfile.mkdtemp(prefix="bench_study_cost_"))
    try:
        trainer = build_trainer(compose(lines), run_dir)
        for _ in range(args.warmup):
            trainer.train_step()
        t0 = clock(device)
        for _ in range(args.steps):
            trainer.train_step()
        step_s = (clock(device) - t0) / args.steps
        trainer.evaluate()  # untimed: the first evaluation also fits what later ones reuse (k-means centres)
        t0 = clock(device)
        for _ in range(args.evals):
            trainer.evaluate()
        eval_s = (clock(device) - t0) / args.evals
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    b = study.budget
    run_s = b.steps * step_s + (b.steps // b.eval_every) * eval_s
    n = runs_per_pair(study, arm)
    return {"arm": arm.name, "dataset": dataset, "value": value, "step_ms": 1e3 * step_s, "eval_s": eval_s,
            "run_min": run_s / 60, "runs": n, "pair_hours": n * run_s / 3600, "overrides": lines}


def markdown(report: dict[str, Any]) -> str:
    """The cost table of ``report`` (what :func:`main` returns) as Markdown: per (arm, data set) the time of a step
    and of an evaluation, the extrapolated run, the study's runs of the pair and their hours; a closing line with
    the totals, the unit, the machine's load and the commit."""
    rows, env, b = report["rows"], report["env"], report["budget"]
    head = (f"| arm | data | ms / step | s / evaluation | {report['unit']}-min / run | runs | "
            f"{report['unit']}-hours, all runs |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r['dataset']} | {r['step_ms']:.3g} | {r['eval_s']:.2g} | {r['run_min']:.3g} | "
              f"{r['runs']} | {r['pair_hours']:.3g} |" for r in rows]
    at = "" if report["value"] is None else f" at axis value {report['value']:g}"
    load = "/".join(f"{x:.1f}" for x in env["load_average_before"])
    lines += ["", f"{report['study']}: {b['steps']:,} steps a run, an evaluation every {b['eval_every']:,}; "
              f"{sum(r['runs'] for r in rows)} runs, {report['total_hours']:.1f} {report['unit']}-hours in all. "
              f"Timed over {report['steps_timed']} steps{at} on {env['device']} "
              f"({env['cpu_count']} cores, {report['threads']} thread(s), load average {load} before), torch "
              f"{env['torch']}, commit {str(env['git']['commit'])[:7]}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", help="a study of conf/study/ (its name, without .yaml)")
    p.add_argument("--steps", type=int, default=200, help="timed generator steps per (arm, data set)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    p.add_argument("--evals", type=int, default=1, help="timed evaluations per (arm, data set)")
    p.add_argument("--value", type=float, default=None,
                   help="the tuning axis value to time at (default: the middle value; none without tuning)")
    p.add_argument("--arms", nargs="*", default=None, help="only these arms (names as in the study)")
    p.add_argument("--datasets", nargs="*", default=None, help="only these data sets")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch and BLAS)")
    p.add_argument("--markdown", type=Path, default=None, help="also write the cost table to this Markdown file")
    p.add_argument("--out", type=Path, default=None, help="write <out>/bench_study_cost_<study>.json")
    args = p.parse_args(argv)
    set_threads(args.threads)
    device = resolve_device(args.device)
    study = load_study(args.study)
    values = study.tuning.axis.values if study.tuning is not None else [None]
    value = args.value if args.value is not None else values[len(values) // 2]
    rows = []
    for arm in study.arms:
        if args.arms is not None and arm.name not in args.arms:
            continue
        for d in study.datasets:
            if args.datasets is not None and d not in args.datasets:
                continue
            rows.append(measure(study, arm, d, value, args, device))
            r = rows[-1]
            print(f"{r['arm']} / {d}: {r['step_ms']:.2f} ms a step, {r['eval_s']:.2f} s an evaluation", flush=True)
    unit = "CPU" if device.type == "cpu" else "GPU wall"
    report = {"study": args.study, "steps_timed": args.steps, "unit": unit, "value": value, "threads": args.threads,
              "budget": {"steps": study.budget.steps, "eval_every": study.budget.eval_every}, "rows": rows,
              "total_hours": sum(r["pair_hours"] for r in rows), "env": env_info(device)}
    text = markdown(report)
    print("\n" + text)
    if args.markdown is not None:
        args.markdown.write_text(text)
    finish(report, args.out, f"bench_study_cost_{args.study}")
    return report


if __name__ == "__main__":
    main()
