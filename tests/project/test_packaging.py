"""A wheel carries the configs: built, installed into a fresh venv (no editable install, no checkout on the
path) and run from another folder, ``ganlab-train`` trains."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_list_names_every_package() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "ganlab").rglob("__init__.py")}
    assert listed == found | {"ganlab._conf"}


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="building a wheel needs setuptools")
@pytest.mark.slow  # builds and installs a wheel into a fresh venv: ~20 s
def test_a_wheel_trains_from_any_folder(tmp_path: Path) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist,
                    ROOT], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = dist.glob("ganlab-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies (torch, hydra, ...) come from this environment; ganlab only from the wheel
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                    "--force-reinstall", "-q", wheel], check=True, capture_output=True)
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("GANLAB_CONF", "PYTHONPATH")} | {"OMP_NUM_THREADS": "1"}
    where = subprocess.run([python, "-c", "import ganlab; print(ganlab.__file__, ganlab.CONFIG_DIR)"], cwd=elsewhere,
                           check=True, capture_output=True, text=True, env=env).stdout.split()
    assert where[0].startswith(str(site)) and where[1] == str(site / "ganlab" / "_conf")
    run = subprocess.run([venv / "bin" / "ganlab-train", "trainer.steps=20", "trainer.eval_every=20",
                          "trainer.batch_size=32", "metrics.num_samples=200", "metrics.num_real=400", "logger=none",
                          "trainer.progress=false", "trainer.projector=false", "threads=1", "hydra.run.dir=out"],
                         cwd=elsewhere, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert json.loads((elsewhere / "out" / "metrics.json").read_text())["step"] == 20
