"""S seeds of one 2-D experiment: ``trainer.ensemble=S`` (one process, vectorised) against S runs launched the way
users run seeds today (``ganlab-train -m seed=0,...,S-1 hydra/launcher=joblib hydra.launcher.n_jobs=2``, one thread
per job), same settings and steps, evaluation, checkpoints and logging included, both timed as whole commands
(wall clock, Python start-up and imports included), in one run of this script, alternating the two sides.

Also printed: how the members' final scores and generator weights compare with the separate runs' (the same seed
must give the same run up to the float32 rounding described in tests/run/test_ensemble.py, which GAN training grows
over a whole run), and where the time goes (each side's training loop against building and evaluating).

    python tests/benchmarks/bench_ensemble.py --out results/                   # S=10, ring8, 2,000 steps, batch 64
    python tests/benchmarks/bench_ensemble.py --steps 200 --seeds 3 --repeats 1  # a quick look
    python tests/benchmarks/bench_ensemble.py --kernels     # only: vmap against grouped matmuls and a loop

``--kernels`` times one forward + backward of S stacked MLP networks (ring8's default G and D, batch 64) three
ways, interleaved, medians of 30 rounds: ``vmap`` of ``functional_call`` (what ``ganlab.run.ensemble`` uses: the
models' own code), hand-written grouped matmuls (``torch.baddbmm`` over the stacked weights: the same layers written
again), and a Python loop over the S networks (what S separate runs compute).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import REPO, env_info, finish, median, table

SCORES = ("modes_covered", "hq_fraction", "reverse_kl")


def settings(args: argparse.Namespace) -> list[str]:
    """The overrides both sides share."""
    out = [f"dataset={args.dataset}", f"trainer.steps={args.steps}", f"trainer.batch_size={args.batch_size}",
           f"trainer.eval_every={args.eval_every}", f"trainer.ckpt_every={args.steps}", "trainer.progress=false",
           f"logger={args.logger}"]
    return out + ([f"strategy=[{args.strategy}]"] if args.strategy else []) + list(args.extra)


def command(args: argparse.Namespace, side: str, out: Path) -> list[str]:
    exe = str(Path(sys.executable).with_name("ganlab-train"))
    seeds = ",".join(str(s) for s in range(args.seeds))
    if side == "joblib":
        return [exe, "-m", *settings(args), "threads=1", f"seed={seeds}", "hydra/launcher=joblib",
                f"hydra.launcher.n_jobs={args.n_jobs}", f"hydra.sweep.dir={out}"]
    return [exe, *settings(args), f"threads={args.ensemble_threads}", f"trainer.ensemble={args.seeds}", "seed=0",
            f"hydra.run.dir={out}"]


def run(cmd: list[str], log: Path) -> float:
    """Wall seconds of ``cmd`` (one thread per process for torch, OpenMP and BLAS, as the README advises)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    t0 = time.perf_counter()
    with open(log, "w") as f:
        res = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {res.returncode}); see {log}")
    return time.perf_counter() - t0


def runs_by_seed(root: Path) -> dict[int, Path]:
    """Seed -> run folder (a metrics.json below ``root``)."""
    return {json.loads(p.read_text())["seed"]: p.parent for p in root.rglob("metrics.json")}


def compare(single: dict[int, Path], members: dict[int, Path]) -> list[list[Any]]:
    """Per seed: each score of the separate run and of the member, and the largest |G weight difference|."""
    rows = []
    for seed in sorted(single):
        a, b = (json.loads((d / "metrics.json").read_text()) for d in (single[seed], members[seed]))
        wa, wb = (torch.load(d / "checkpoints" / "last.pt", weights_only=True)["generator"]
                  for d in (single[seed], members[seed]))
        gap = max((wa[n].float() - wb[n].float()).abs().max().item() for n in wa)
        rows.append([seed, *(f"{a['scores'][k]:.4g} / {b['scores'][k]:.4g}" for k in SCORES), f"{gap:.2g}",
                     f"{a['wall_time_s']:.1f} / {b['wall_time_s']:.1f}"])
    return rows


def kernels(size: int, batch: int = 64, rounds: int = 30) -> list[list[Any]]:
    """ms per forward + backward of ``size`` stacked networks: vmap, grouped matmuls (baddbmm), a loop."""
    import copy
    import statistics

    from torch.func import functional_call, stack_module_state, vmap

    from ganlab.models import MLPDiscriminator, MLPGenerator

    rows = []
    for name, make, d_in, act in [("MLP G 16-128-128-128-2", lambda: MLPGenerator((2,)), 16, torch.relu),
                                  ("MLP D 2-128-128-1", lambda: MLPDiscriminator((2,)), 2,
                                   lambda t: torch.nn.functional.leaky_relu(t, 0.2))]:
        nets = [make() for _ in range(size)]
        params, buffers = stack_module_state(nets)
        template = copy.deepcopy(nets[0]).to("meta")
        stacked = vmap(lambda p, b, x: functional_call(template, (p, b), (x,)))
        weights = [params[n] for n in params if n.endswith("weight")]
        biases = [params[n] for n in params if n.endswith("bias")]

        def grouped(x: torch.Tensor) -> torch.Tensor:
            for i, (w, b) in enumerate(zip(weights, biases)):
                x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
                x = act(x) if i < len(weights) - 1 else x
            return x

        x, flat = torch.randn(size, batch, d_in), list(params.values())
        runs = {"vmap": lambda: torch.autograd.grad(stacked(params, buffers, x).sum(), flat),
                "baddbmm": lambda: torch.autograd.grad(grouped(x).sum(), flat),
                "loop": lambda: torch.autograd.grad(sum(n(x[k]).sum() for k, n in enumerate(nets)),
                                                    [q for n in nets for q in n.parameters()])}
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(rounds):
            for key, fn in runs.items():
                t0 = time.perf_counter()
                for _ in range(10):
                    fn()
                times[key].append((time.perf_counter() - t0) * 100)  # ms per call
        v, g, loop = (statistics.median(times[k]) for k in ("vmap", "baddbmm", "loop"))
        rows.append([name, v, g, loop, loop / v, loop / g])
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--dataset", default="ring8")
    p.add_argument("--strategy", default="", help="one strategy name, e.g. wgan_gp (default: the plain GAN)")
    p.add_argument("--logger", default="tensorboard")
    p.add_argument("--n-jobs", type=int, default=2, help="joblib jobs of the separate runs (one thread each)")
    p.add_argument("--ensemble-threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1, help="alternations of the two sides (ensemble first)")
    p.add_argument("--work", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--kernels", action="store_true", help="only time vmap / baddbmm / loop (see the docstring)")
    p.add_argument("extra", nargs="*", help="more overrides for both sides")
    args = p.parse_args()
    if args.kernels:
        torch.set_num_threads(1)
        print(f"forward + backward of {args.seeds} stacked networks, batch 64, one thread, ms (median of 30); load "
              f"average {os.getloadavg()}")
        print(table(["networks", "vmap", "baddbmm", "loop", "loop / vmap", "loop / baddbmm"], kernels(args.seeds)))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_ensemble_"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"env": env_info(torch.device("cpu")), "args": {k: str(v) for k, v in vars(args).items()},
                              "settings": settings(args), "ensemble": [], "joblib": []}
    for r in range(args.repeats):
        for side in ("ensemble", "joblib"):
            out = work / f"{side}_{r}"
            seconds = run(command(args, side, out), work / f"{side}_{r}.log")
            report[side].append(seconds)
            print(f"round {r}: {side:8s} {seconds:7.1f} s   ({' '.join(command(args, side, out)[1:])})", flush=True)
    ens, job = median(report["ensemble"]), median(report["joblib"])
    report["speedup"] = job / ens
    last = args.repeats - 1
    single, members = runs_by_seed(work / f"joblib_{last}"), runs_by_seed(work / f"ensemble_{last}")
    summary = json.loads((work / f"ensemble_{last}" / "ensemble.json").read_text())
    print(f"\n{args.seeds} seeds, {args.dataset}, {args.steps} steps, batch {args.batch_size}, evaluation every "
          f"{args.eval_every} steps; load average before {report['env']['load_average_before']}\n")
    print(table(["side", "wall s (median)", "s per seed", "speed-up"],
                [[f"{args.seeds} runs, joblib {args.n_jobs} jobs x 1 thread", job, job / args.seeds, 1.0],
                 [f"trainer.ensemble={args.seeds}, {args.ensemble_threads} thread(s)", ens, ens / args.seeds,
                  job / ens]]))
    fits = [json.loads((d / "metrics.json").read_text())["wall_time_s"] for d in single.values()]
    print(f"\nTraining loops (fit(), evaluations inside): separate runs {sum(fits):.1f} s of process time in all "
          f"({median(fits):.1f} s each); the ensemble's one loop {summary['wall_time_s']:.1f} s.")
    rows = compare(single, members)
    report["agreement"] = rows
    print("\nPer seed, separate run / ensemble member (and the largest |difference| of G's final weights):\n")
    print(table(["seed", *SCORES, "max abs G weight diff", "fit() s"], rows))
    print(f"\nspeed-up of trainer.ensemble={args.seeds} over {args.seeds} joblib runs: {job / ens:.2f}x")
    finish(report, args.out, "bench_ensemble")


if __name__ == "__main__":
    main()
