"""Instructions per generator step of ganlab's loop against the plain PyTorch loop, counted by valgrind's callgrind.

Usage::

    python tests/benchmarks/bench_instructions.py [--steps 30] [--out DIR] [--set KEY=VALUE ...]

Why: on a shared VM the CPU-time ratios of ``bench_loop.py`` spread over several percent (its A/A and B/B control
rows), so an overhead of 1-2 % cannot be resolved by timing. The number of instructions a loop executes does not
depend on the machine's load: counted twice, the same loop gives the same count to within a few hundredths of a
percent (the A/A row below). It leaves out what instructions do not show (cache misses, memory placement), which
``bench_loop.py`` measures, so read the two together.

Setup: the MLP pair of ``bench_loop.py`` (``model=mlp`` on ring8, batch 256, non-saturating loss, Adam; the plain
loop trains deep copies of ganlab's freshly built G and D on the same data tensor), 20 warm-up steps of each, then,
in one process run under ``valgrind --tool=callgrind --instr-atstart=no``, ``--steps`` steps of each variant in
turn with the instruction counter on, the counts dumped between variants (``callgrind_control``):

* ``ganlab steps``: ``trainer.train_step()`` with the training-health checks as configured (NaN guard on);
* ``plain``: ``PlainGAN.step`` of ``bench_loop.py``;
* ``plain again (A/A control)``: the same plain loop counted a second time;
* ``ganlab steps, monitor.nan_guard=false``: a second trainer with the guard off.

Overhead = instructions per step / plain's - 1. Needs ``valgrind`` and ``callgrind_control`` on the PATH; on the
CPU only. Slow: valgrind runs Python about 50 times slower (about 5 minutes on an idle 2-core VM at 30 steps).
Prints a table; ``--out DIR`` writes ``DIR/bench_instructions.json``. Not a test.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import compose, env_info, finish, table

VARIANTS = ("ganlab steps", "plain", "plain again (A/A control)", "ganlab steps, monitor.nan_guard=false")


def _overrides(extra: list[str]) -> list[str]:
    """``bench_loop.py``'s MLP setup (evaluation, checkpoints and logging never due) with ``extra`` overrides."""
    from bench_loop import overrides

    return overrides("mlp", argparse.Namespace(mlp_batch=256, set=extra), torch.device("cpu"))


def inner(steps: int, flag_dir: Path, extra: list[str]) -> None:
    """The counted process: build, warm up, then run each variant when the driver says go (flag files)."""
    from bench_loop import PlainGAN

    from ganlab.run.build import build_trainer

    torch.set_num_threads(1)
    cfg = compose(_overrides(extra))
    trainer = build_trainer(cfg, Path(tempfile.mkdtemp(prefix="bench_instr_")))
    unguarded = build_trainer(compose(_overrides([*extra, "monitor.nan_guard=false"])),
                              Path(tempfile.mkdtemp(prefix="bench_instr_unguarded_")))
    unguarded.G.load_state_dict(trainer.G.state_dict())
    unguarded.D.load_state_dict(trainer.D.state_dict())
    og, od = cfg.optim.generator, cfg.optim.discriminator
    plain = PlainGAN(copy.deepcopy(trainer.G), copy.deepcopy(trainer.D), trainer.data.x, int(cfg.trainer.batch_size),
                     float(og.lr), tuple(og.betas), float(od.lr), tuple(od.betas), trainer.G.z_dim)

    def ganlab(t: Any) -> None:
        t.train_step()
        t.state.step += 1

    runs = {VARIANTS[0]: lambda: ganlab(trainer), VARIANTS[1]: plain.step, VARIANTS[2]: plain.step,
            VARIANTS[3]: lambda: ganlab(unguarded)}
    for _ in range(20):
        for run in (runs[VARIANTS[0]], plain.step, runs[VARIANTS[3]]):
            run()
    for i, name in enumerate([*VARIANTS, None]):
        (flag_dir / f"{i}.ready").touch()
        while not (flag_dir / f"{i}.go").exists():
            time.sleep(0.005)
        if name is not None:
            for _ in range(steps):
                runs[name]()


def totals(path: Path) -> int:
    """The ``totals:`` line of a callgrind output file (instructions counted in that dump)."""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"no totals line in {path}")


def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Run :func:`inner` under callgrind, switch counting on before the first variant, dump after each."""
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on the PATH (Debian/Ubuntu: apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="bench_instr_flags_"))
    out_file = work / "callgrind.out"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_file}", sys.executable,
           __file__, "--inner", str(work), "--steps", str(args.steps), "--set", *args.set]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    for i in range(len(VARIANTS) + 1):
        while not (work / f"{i}.ready").exists():
            if proc.poll() is not None:
                raise SystemExit(f"the counted process ended early:\n{proc.stdout.read()[-3000:]}")
            time.sleep(0.2)
        control = ["callgrind_control", "-i", "on", str(proc.pid)] if i == 0 else \
            ["callgrind_control", "-d", str(proc.pid)]
        subprocess.run(control, check=True, capture_output=True)
        (work / f"{i}.go").touch()
    proc.wait()
    counts = {name: totals(work / f"callgrind.out.{i + 1}") / args.steps for i, name in enumerate(VARIANTS)}
    base = counts["plain"]
    rows = [[name, f"{counts[name] / 1e6:.3f}", f"{100 * (counts[name] / base - 1):+.2f}"] for name in VARIANTS]
    print(f"instructions per generator step (callgrind, {args.steps} steps each, MLP pair on ring8, batch 256, "
          "1 thread); overhead = instructions / plain's - 1:")
    print(table(["loop", "M instructions / step", "overhead %"], rows))
    return {"steps": args.steps, "instructions_per_step": counts,
            "overhead_percent": {n: 100 * (c / base - 1) for n, c in counts.items()},
            "env": env_info(torch.device("cpu"))}


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30, help="counted steps of each variant")
    p.add_argument("--out", type=Path, default=None, help="folder for bench_instructions.json")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for ganlab's run")
    p.add_argument("--inner", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.inner is not None:
        inner(args.steps, args.inner, list(args.set))
        return None
    res = drive(args)
    finish(res, args.out, "bench_instructions")
    return res


if __name__ == "__main__":
    main()
