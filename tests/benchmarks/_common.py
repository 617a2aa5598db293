"""Helpers shared by the benchmark scripts in this folder (not a test module: nothing here is collected).

Every script measures the things it compares in ONE process on the same machine, interleaved
(A, B, A, B, ...) so that load from other users hits both alike, and reports medians.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_LIMITS: list[Any] = []  # threadpoolctl limiters kept alive for the whole run


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when present, else cpu; refuse cuda when it is absent."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda asked for, but CUDA is not available here")
    return dev


def set_threads(threads: int | None) -> None:
    """Limit torch and the BLAS/OpenMP pools of NumPy and scikit-learn (threadpoolctl) to ``threads``.

    Child processes inherit ``OMP_NUM_THREADS``/``MKL_NUM_THREADS``/``OPENBLAS_NUM_THREADS``.
    """
    if threads is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        _LIMITS.append(threadpool_limits(threads))
    except ImportError:
        pass


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """(seconds, result) of one call, the device synchronised before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def env_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "device": str(device), "torch_threads": torch.get_num_threads(),
                            "cpu_count": os.cpu_count(), "machine": platform.machine(),
                            "load_average_before": os.getloadavg(),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    info["git"] = git_state()
    try:
        import numpy
        import sklearn

        info["numpy"], info["sklearn"] = numpy.__version__, sklearn.__version__
    except ImportError:
        pass
    return info


def git_state() -> dict[str, Any]:
    """The commit and whether ganlab/ or conf/ differ from it (read only; benchmarks time the working tree)."""
    import hashlib
    import subprocess

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = git("status", "--porcelain", "--", "ganlab", "conf")
    loop = REPO / "ganlab" / "trainer" / "loop.py"
    return {"commit": git("rev-parse", "HEAD") or None, "ganlab_or_conf_modified": len(dirty.splitlines()),
            "loop_py_sha1": hashlib.sha1(loop.read_bytes()).hexdigest()[:12] if loop.exists() else None}


def finish(report: dict[str, Any], out_dir: Path | None, name: str) -> None:
    """Record the load after the run and write ``<out_dir>/<name>.json``."""
    report.setdefault("env", {})["load_average_after"] = os.getloadavg()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{name}.json"
        path.write_text(json.dumps(report, indent=2, default=float))
        print(f"wrote {path}")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (readable in a terminal and pasteable into the README)."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            if v != v:
                return "n/a"
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def compose(overrides: list[str]):
    """``conf/train.yaml`` composed with ``overrides`` (as tests/tiny_config.py does, without its shrinking)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ganlab import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose("train", overrides=overrides)


#: Overrides that keep evaluation and logging out of the timed window and make ``build_trainer``'s one-off
#: evaluator preparation cheap (its scores are never computed during the timed steps): few samples, and no
#: Frechet/Vendi scores, whose D x D matrices are large on raw 64x64 pixels.
QUIET = ["logger=none", "trainer.progress=false", "trainer.projector=false", "metrics.num_samples=200",
         "metrics.num_real=400", "metrics.scorers.ndb.k=20", "~metrics.scorers.frechet", "~metrics.scorers.vendi"]


def fashion_mnist_available() -> bool:
    try:
        from ganlab.data.images import find_fashion_mnist

        find_fashion_mnist()
        return True
    except FileNotFoundError:
        return False
