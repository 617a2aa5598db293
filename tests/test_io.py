"""Temporary files of checkpoint writes killed mid-way: left by a killed process, removed at the next start."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from ganlab.io import atomic_save, remove_stale_temp_files
from ganlab.layout import ABANDONED_AFTER_S, remove_interrupted_writes

KILLED_WRITE = """
import os, sys, torch
from ganlab.io import atomic_save
def dies_mid_write(obj, f):
    f.write(b"partial")
    f.flush()
    os._exit(9)  # as SIGKILL or a cluster's time limit: no exception handler runs
torch.save = dies_mid_write
atomic_save({"step": 2}, sys.argv[1])
"""


def _touch(path: Path, age_s: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_a_killed_write_leaves_a_hidden_temporary_file_that_is_removed(tmp_path: Path) -> None:
    ckpts = tmp_path / "checkpoints"
    atomic_save({"step": 1}, ckpts / "last.pt")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    res = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(ckpts / "last.pt")], env=env, timeout=120)
    assert res.returncode == 9
    left = [p.name for p in ckpts.iterdir() if p.name != "last.pt"]
    assert len(left) == 1 and left[0].startswith(".last.pt.") and left[0].endswith(".tmp")
    assert remove_stale_temp_files(ckpts) == [ckpts / left[0]]
    assert [p.name for p in ckpts.iterdir()] == ["last.pt"]
    assert torch.load(ckpts / "last.pt", weights_only=True) == {"step": 1}  # the good file is untouched


def test_only_old_enough_temporary_files_go(tmp_path: Path) -> None:
    old = _touch(tmp_path / ".last.pt.k3j2h1.tmp", age_s=120)
    fresh = _touch(tmp_path / ".step_0000003.pt.a1b2c3.tmp")
    keep = [_touch(tmp_path / "last.pt", 120), _touch(tmp_path / ".hidden", 120), _touch(tmp_path / "notes.tmp", 120)]
    (tmp_path / ".folder.tmp").mkdir()
    assert remove_stale_temp_files(tmp_path, min_age_s=60) == [old]
    assert fresh.exists() and all(p.exists() for p in keep)
    assert remove_stale_temp_files(tmp_path) == [fresh]
    assert all(p.exists() for p in keep) and (tmp_path / ".folder.tmp").is_dir()
    assert remove_stale_temp_files(tmp_path / "missing") == []


def test_run_start_cleans_its_own_folder_and_abandoned_files_of_the_resumed_run(tmp_path: Path, caplog) -> None:
    parent, run_dir = tmp_path / "parent", tmp_path / "resumed"
    atomic_save({"step": 4}, parent / "checkpoints" / "last.pt")
    abandoned = _touch(parent / "checkpoints" / ".step_0000006.pt.zz9y8x.tmp", ABANDONED_AFTER_S + 10)
    writing = _touch(parent / "checkpoints" / ".last.pt.q1w2e3.tmp")  # the parent run may still be going
    own = _touch(run_dir / "checkpoints" / ".last.pt.r4t5y6.tmp")
    with caplog.at_level(logging.INFO, logger="ganlab"):
        removed = remove_interrupted_writes(run_dir, str(parent))
    assert sorted(removed) == sorted([abandoned, own]) and writing.exists()
    assert "removed 2 temporary file(s) left by interrupted checkpoint writes" in caplog.text
    caplog.clear()
    assert remove_interrupted_writes(run_dir, None) == [] and caplog.text == ""  # nothing to say, no log line


def test_metrics_json_records_provenance(tmp_path) -> None:
    """The commit of this checkout, its dirty flag as git reports it, versions, device, threads, precision."""
    import json

    from tiny_config import train_tiny

    import ganlab

    threads = torch.get_num_threads()
    try:
        train_tiny(["logger=none", "threads=1"], tmp_path)
    finally:
        torch.set_num_threads(threads)
    prov = json.loads((tmp_path / "metrics.json").read_text())["provenance"]
    src = Path(ganlab.__file__).parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True)
    assert prov["git_commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    if head.returncode == 0:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=src,
                               capture_output=True, text=True).stdout.strip() != ""
        assert prov["git_dirty"] is dirty
    from importlib import metadata

    assert prov["packages"]["torch"] == metadata.version("torch")
    assert torch.__version__.startswith(metadata.version("torch"))
    assert prov["packages"]["ganlab"] == ganlab.__version__
    assert (prov["device"], prov["threads"], prov["precision"]) == ("cpu", 1, "32")
    assert prov["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # e.g. "AVX2" or "AVX512"
