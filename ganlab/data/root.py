"""Where a data set's files are: the one resolver of ``dataset.root`` and ``$GANLAB_DATA`` for every loader.

A relative folder means relative to the folder the command was launched from, never to the job's own
folder: under ``hydra.job.chdir=true``, and in a joblib or submitit multirun, the working directory of a job
is its output folder, but Hydra keeps the launch folder as ``hydra.runtime.cwd``.
"""

from __future__ import annotations

import os
from pathlib import Path


def launch_dir() -> Path:
    """The folder the command was launched from: Hydra's ``hydra.runtime.cwd`` when a Hydra job is running (the
    job may have changed directory since), else the current working directory."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        cwd = HydraConfig.get().runtime.cwd
        if cwd:
            return Path(cwd)
    return Path.cwd()


def resolve_root(root: str | os.PathLike[str] | None) -> Path | None:
    """A data folder as an absolute path: ``~`` expanded, a relative path joined to :func:`launch_dir`.

    Returns:
        None when ``root`` is None or empty (the loader then searches its defaults), else the absolute path
        (not checked for existence: each loader says which of its files are missing).
    """
    if root is None or str(root) == "":
        return None
    path = Path(root).expanduser()
    return path if path.is_absolute() else launch_dir() / path


def env_root() -> Path | None:
    """``$GANLAB_DATA`` resolved like ``dataset.root`` (:func:`resolve_root`), or None when unset."""
    return resolve_root(os.environ.get("GANLAB_DATA"))


def describe(root: str | os.PathLike[str], resolved: Path) -> str:
    """``dataset.root=<root>`` plus, when it was relative, the folder it resolved to (for error messages)."""
    given = f"dataset.root={root}"
    if Path(root).expanduser().is_absolute():
        return given
    return f"{given} (relative, so taken from the launch folder {launch_dir()}: {resolved})"
