"""``threads=auto`` against the best fixed thread count, on an idle CPU and under load this script makes itself.

Usage::

    python tests/benchmarks/bench_threads.py [--experiments mlp dcgan] [--settings auto 1 2 null]
                                             [--rounds 3] [--steps 200] [--busy 2] [--readme] [--out DIR]

For each experiment (``mlp``: the README's first command, ``ganlab-train`` with no arguments: the MLP pair on
ring8, batch 256; ``dcgan``: ``experiment=fashion_mnist_dcgan``, 32x32, batch 64, on Fashion-MNIST or on
scikit-learn's digits resized to 32x32 when the files are absent) and each ``threads`` setting, a child process
builds the trainer the normal way (``conf/train.yaml`` + overrides, ``ganlab.run.build.build_trainer``, which applies
``threads``), runs ``--warmup`` steps, then times ``--steps`` calls of ``trainer.train_step()`` by the wall clock
(what a user waits for; under load CPU time would hide the waiting). Settings are interleaved in rotating order
over ``--rounds`` rounds; the table gives the median steps/s per setting, the best one, and auto's ratio to it
(the goal: auto within 10 % of the best).

Two conditions: ``idle`` (nothing else started; the load average is recorded) and ``busy``: ``--busy`` processes
of ``while True: pass`` started by this script for the whole condition (on a 2-core machine, two busy processes
keep both cores busy, the case where torch's default thread count collapses). With ``--readme`` the README's
first command (``python -m ganlab.cli.train`` with no arguments, into a temporary folder) is also timed end to end
under the busy load (the goal: <= 90 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import QUIET, REPO, env_info, fashion_mnist_available, finish, median, table  # noqa: E402

EXPERIMENTS = {"mlp": [], "dcgan": ["experiment=fashion_mnist_dcgan"]}


def child(experiment: str, threads: str, warmup: int, steps: int) -> None:
    """In a fresh process: build the trainer with ``threads=<threads>`` and print ``{"steps_per_s", "threads"}``."""
    import torch
    from _common import compose

    from ganlab.run.build import build_trainer

    overrides = [*EXPERIMENTS[experiment], f"threads={threads}", *QUIET, "trainer.ckpt_every=1000000"]
    if experiment == "dcgan" and not fashion_mnist_available():
        overrides += ["dataset=digits", "dataset.image_size=32"]
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(compose(overrides), Path(tmp))
        for _ in range(warmup):
            trainer.train_step()
        t0 = time.perf_counter()
        for _ in range(steps):
            trainer.train_step()
        seconds = time.perf_counter() - t0
    print(json.dumps({"steps_per_s": steps / seconds, "threads": torch.get_num_threads()}))


def measure(experiment: str, threads: str, warmup: int, steps: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", experiment, threads, str(warmup), str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{experiment} threads={threads} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def readme_command(timeout: float) -> float:
    """Wall seconds of ``python -m ganlab.cli.train`` with no arguments (the README's first command)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ganlab.cli.train", f"hydra.run.dir={tmp}/run"], cwd=REPO, check=True,
                       capture_output=True, timeout=timeout)
        return time.perf_counter() - t0


def condition(name: str, args: argparse.Namespace, report: dict) -> list[list[object]]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)] \
        if name == "busy" else []
    rows = []
    try:
        time.sleep(1.0 if hogs else 0.0)
        raw: dict[tuple[str, str], list[dict[str, float]]] = {}
        for r in range(args.rounds):
            for exp in args.experiments:
                order = args.settings[r % len(args.settings):] + args.settings[:r % len(args.settings)]
                for s in order:
                    m = measure(exp, s, args.warmup, args.steps)
                    raw.setdefault((exp, s), []).append(m)
                    print(f"{name} round {r} {exp} threads={s}: {m['steps_per_s']:.2f} steps/s "
                          f"({m['threads']} threads)", file=sys.stderr, flush=True)  # partial results survive a kill
        for exp in args.experiments:
            rates = {s: median([m["steps_per_s"] for m in raw[(exp, s)]]) for s in args.settings}
            best = max(rates, key=rates.get)
            auto = rates.get("auto")
            rows.append([name, exp, *(f"{rates[s]:.1f} ({raw[(exp, s)][0]['threads']})" for s in args.settings),
                         best, f"{auto / rates[best]:.3f}" if auto else "-"])
        report["raw"][name] = {f"{e}|{s}": v for (e, s), v in raw.items()}
        if name == "busy" and args.readme:
            report["readme_seconds_busy"] = readme_command(timeout=600)
    finally:
        for h in hogs:
            h.kill()
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    ap.add_argument("--settings", nargs="+", default=["auto", "1", "2", "null"])
    ap.add_argument("--conditions", nargs="+", default=["idle", "busy"], choices=["idle", "busy"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--busy", type=int, default=2, help="busy processes started for the busy condition")
    ap.add_argument("--readme", action="store_true", help="also time the README's first command under load")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch

    report: dict = {"env": env_info(torch.device("cpu")), "args": {k: str(v) for k, v in vars(args).items()},
                    "raw": {}}
    rows = [row for c in args.conditions for row in condition(c, args, report)]
    headers = ["load", "experiment", *(f"threads={s} steps/s (threads)" for s in args.settings), "best",
               "auto / best"]
    print(table(headers, rows))
    if "readme_seconds_busy" in report:
        print(f"\nREADME's first command under {args.busy} busy processes: {report['readme_seconds_busy']:.1f} s "
              "(goal <= 90 s)")
    report["table"] = rows
    finish(report, args.out, "bench_threads")


if __name__ == "__main__":
    main()
