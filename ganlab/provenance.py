"""What a result depends on, recorded in ``metrics.json`` under ``"provenance"``: the code (git commit, whether
the work tree had uncommitted changes), the packages, the machine and the numerics (device, CPU threads, the CPU's
vector instruction set that torch's kernels use, precision). The last matters for reproducibility: the same seed
and settings give other floats on a CPU with other vector units (AVX2 against AVX-512), and GAN training amplifies
them, so a run repeats bit for bit only where ``cpu_capability`` is the same."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

#: ganlab's source folder (this module lives in it).
SOURCE_DIR = Path(__file__).resolve().parent

#: Distributions whose versions are recorded (missing ones are recorded as None).
PACKAGES = ("ganlab", "torch", "torchvision", "numpy", "scikit-learn", "hydra-core", "omegaconf", "tensorboard")


def _git(*args: str) -> str | None:
    """``git <args>`` run in ganlab's source folder; None when git or the repository is not there."""
    try:
        out = subprocess.run(["git", *args], cwd=SOURCE_DIR, capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def source_commit() -> str | None:
    """The commit checked out in ganlab's source folder (``git rev-parse HEAD``); None outside a git checkout."""
    return _git("rev-parse", "HEAD")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torch_cpu_capability() -> str:
    """torch's ``torch.backends.cpu.get_cpu_capability()`` in this process ("AVX2", "AVX512", "DEFAULT", ...): the
    instruction set of the CPU kernels it dispatches to."""
    return str(torch.backends.cpu.get_cpu_capability())


def provenance(device: torch.device, precision: str) -> dict[str, Any]:
    """The provenance record.

    Args:
        device: the training device.
        precision: ``trainer.precision`` (``32``, ``bf16``, ``fp16``).

    Returns:
        ``{"git_commit", "git_dirty", "packages": {name: version}, "python", "platform", "device",
        "device_name", "cpu_capability", "threads", "precision"}``; ``git_commit``/``git_dirty`` are None outside
        a git checkout (an installed wheel), ``git_dirty`` is True when tracked files differ from the commit;
        ``cpu_capability`` is torch's ``torch.backends.cpu.get_cpu_capability()`` ("AVX2", "AVX512", "DEFAULT",
        ...), the instruction set of the CPU kernels it dispatches to.
    """
    # an installed wheel inside some other checkout (a venv in a repository) must not report that checkout
    commit = _git("rev-parse", "HEAD") if _git("ls-files", "__init__.py") else None
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None,
            "packages": {p: _version(p) for p in PACKAGES}, "python": platform.python_version(),
            "platform": platform.platform(), "device": str(device), "device_name": name,
            "cpu_capability": torch_cpu_capability(),
            "threads": torch.get_num_threads(), "precision": str(precision)}
