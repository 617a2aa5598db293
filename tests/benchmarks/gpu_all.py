"""Run every benchmark of this folder on a CUDA device in under 8 minutes; results into one folder.

Expected invocation, from the repository root on the GPU machine (torch, torchvision, scikit-learn and
tensorboard preinstalled; no internet; hydra-core and omegaconf carried as wheels)::

    pip install --no-index --find-links <wheel dir> hydra-core omegaconf   # also tqdm if absent
    python tests/benchmarks/gpu_all.py RESULTS_DIR [--reference path/in/repo/to/dcgan_main.py]

``--reference`` is pytorch/examples' ``dcgan/main.py`` copied into the repository tree for the run (never
committed); without it that benchmark is skipped. Fashion-MNIST is used where its files are found
(``$GANLAB_DATA``, ``/usr/share/datasets/fashion-mnist``), else scikit-learn's digits (bundled, always
there); the reference DCGAN uses ``--dataset fake`` (random images through its DataLoader). The diversity
benchmark's classifier embedder is trained on the GPU into a temporary cache (seconds).

RESULTS_DIR receives, flat (at most 5 files): ``bench_loop.json``, ``bench_reference_dcgan.json`` (with
``--reference``), ``bench_diversity.json``, ``bench_metrics.json`` (the existing kernel benchmark, run last
if time is left) and ``summary.md`` (each command, its exit status and time, and everything it printed).
Each step runs as a subprocess with its own time limit; the whole stays under ``--budget-s`` (470 s) and a
step that no longer fits is skipped and marked so in summary.md. ``--device cpu --smoke`` runs the same
sequence with tiny sizes (to check the orchestration on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def preflight(device: str) -> list[str]:
    """Problems that stop every benchmark (missing packages, no CUDA)."""
    problems = []
    for mod in ("torch", "torchvision", "sklearn", "numpy", "threadpoolctl", "hydra", "omegaconf", "tqdm"):
        try:
            importlib.import_module(mod)
        except ImportError as err:
            problems.append(f"cannot import {mod} ({err}); pip install it (hydra-core, omegaconf, tqdm wheels)")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            problems.append("CUDA is not available (use --device cpu --smoke to test the sequence without a GPU)")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="folder for the JSON files and summary.md")
    p.add_argument("--reference", type=Path, default=None, help="pytorch/examples dcgan/main.py (optional)")
    p.add_argument("--budget-s", type=float, default=470.0, help="total wall-clock budget of all steps")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks that every step runs")
    args = p.parse_args(argv)
    out = args.results.resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    summary = [f"# ganlab benchmarks on {args.device}", "", f"started {time.strftime('%Y-%m-%d %H:%M:%S')}, "
               f"budget {args.budget_s:.0f} s", ""]
    problems = preflight(args.device)
    if args.device == "cuda" and not problems:
        import torch

        summary += [f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
                    f"{os.cpu_count()} CPU cores", ""]
    if problems:
        summary += ["**not run**:", *[f"- {x}" for x in problems]]
        (out / "summary.md").write_text("\n".join(summary) + "\n")
        print("\n".join(summary))
        return 2
    env = os.environ.copy()
    env["GANLAB_CACHE"] = tempfile.mkdtemp(prefix="ganlab_bench_cache_")  # classifier trained here, not kept
    env.setdefault("PYTHONUNBUFFERED", "1")
    py, dev, smoke = sys.executable, ["--device", args.device], args.smoke
    steps: list[tuple[str, list[str], float, float]] = []  # (name, argv, time limit s, least time worth starting)
    steps.append(("bench_loop", [py, str(HERE / "bench_loop.py"), *dev, "--out", str(out),
                                 *(["--repeats", "2", "--block", "5"] if smoke else ["--repeats", "10"])], 150, 60))
    if args.reference is not None:
        ref = args.reference if args.reference.is_absolute() else (Path.cwd() / args.reference)
        steps.append(("bench_reference_dcgan", [py, str(HERE / "bench_reference_dcgan.py"), "--reference", str(ref),
                                                *dev, "--out", str(out), "--workers", "2" if smoke else "8",
                                                *(["--width", "8", "--iters", "3", "--warmup", "1",
                                                   "--repeats", "1"] if smoke else
                                                  ["--iters", "200", "--warmup", "20", "--repeats", "2"])],
                      120, 45))
    steps.append(("bench_diversity", [py, str(HERE / "bench_diversity.py"), *dev, "--out", str(out),
                                      *(["--n", "1500", "--sizes", "1000", "2000", "--repeats", "1"] if smoke else
                                        ["--n", "10000", "--sizes", "1000", "3000", "10000", "30000", "100000",
                                         "--ref-max-size", "30000", "--repeats", "3"])], 200, 90))
    steps.append(("bench_metrics", [py, str(HERE / "bench_metrics.py"), *dev, "--out", str(out / "bench_metrics.json"),
                                    *(["--quick", "--kmeans-n", "3000", "--sim-n", "2000", "--repeats", "1"] if smoke
                                      else ["--repeats", "2"])], 150, 60))
    rc_all = 0
    for name, cmd, limit, least in steps:
        left = args.budget_s - (time.perf_counter() - start)
        summary += [f"## {name}", ""]
        if left < least:
            summary += [f"skipped: {left:.0f} s of the budget left, {least:.0f} s needed", ""]
            print(f"== {name}: skipped ({left:.0f} s left)", flush=True)
            continue
        timeout = min(limit, left)
        print(f"== {name} (limit {timeout:.0f} s): {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # its own process group: a timeout stops its children too
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            rc = "timeout"
        text = stdout + ("\n[stderr]\n" + stderr[-6000:] if stderr.strip() else "")
        took = time.perf_counter() - t0
        rc_all = rc_all or (rc != 0)
        print(text[-3000:], flush=True)
        shown = [Path(cmd[0]).name, *(str(Path(c).relative_to(REPO)) if c.startswith(str(REPO)) else c
                                      for c in cmd[1:])]
        summary += [f"`{' '.join(shown)}`", "", f"exit status {rc}, {took:.0f} s", "", "```",
                    text.rstrip()[-20000:], "```", ""]
        (out / "summary.md").write_text("\n".join(summary) + "\n")
    summary += [f"total {time.perf_counter() - start:.0f} s"]
    (out / "summary.md").write_text("\n".join(summary) + "\n")
    print(f"total {time.perf_counter() - start:.0f} s; results in {out}")
    return int(bool(rc_all))


if __name__ == "__main__":
    sys.exit(main())
